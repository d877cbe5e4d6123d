// Package metrics keeps the agent's self-metrics and serves them at /metrics with the
// Prometheus Go client (client_golang), with the Go runtime and process metrics beside them.
package metrics

import (
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
)

// Kind is a sample section of docs/api.md.
type Kind int

const (
	Mesh Kind = iota
	Quorum
	Storage
	Throughput
	NumKinds
)

var kindNames = [NumKinds]string{"mesh", "quorum", "storage", "throughput"}

func (k Kind) String() string { return kindNames[k] }

// KindNamed is the kind an ingest answer's section name stands for.
func KindNamed(name string) (Kind, bool) {
	for k, n := range kindNames {
		if n == name {
			return Kind(k), true
		}
	}
	return 0, false
}

// Agent holds every counter the agent exposes.
type Agent struct {
	Measured [NumKinds]atomic.Uint64 // recorded by a probe
	Shipped  [NumKinds]atomic.Uint64 // accepted by the API (first delivery or duplicate)
	Spooled  [NumKinds]atomic.Uint64 // written to the on-disk spool
	Dropped  [NumKinds]atomic.Uint64 // lost: spool full or batch rejected
	SetAside [NumKinds]atomic.Uint64 // stored batch, rows left out by the API (about a deleted peer)

	BatchesSent      atomic.Uint64
	BatchesDuplicate atomic.Uint64
	BatchesRejected  atomic.Uint64
	BatchesSplit     atomic.Uint64
	SendFailures     atomic.Uint64
	SpoolBytes       atomic.Int64
	SpoolFiles       atomic.Int64

	mu            sync.Mutex
	measuredFuncs [NumKinds]func() uint64
	gauges        []gauge
	lastErr       string
	lastErrAt     time.Time
	configVersion string
	configAt      time.Time
	version       string
	start         time.Time
}

type gauge struct {
	name, help string
	f          func() float64
}

// New returns the metrics of an agent of the given build version.
func New(version string) *Agent { return &Agent{version: version, start: time.Now()} }

// SetMeasuredSource makes kind's measured count come from f (a probe's own counter).
func (a *Agent) SetMeasuredSource(k Kind, f func() uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.measuredFuncs[k] = f
}

// AddGauge exposes f as a gauge.
func (a *Agent) AddGauge(name, help string, f func() float64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.gauges = append(a.gauges, gauge{name, help, f})
}

// MeasuredCount is the number of samples of kind recorded so far.
func (a *Agent) MeasuredCount(k Kind) uint64 {
	a.mu.Lock()
	f := a.measuredFuncs[k]
	a.mu.Unlock()
	if f != nil {
		return f()
	}
	return a.Measured[k].Load()
}

// SetError records the latest error; nil is ignored.
func (a *Agent) SetError(err error) {
	if err == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.lastErr = err.Error()
	a.lastErrAt = time.Now()
}

// LastError returns the latest error and when it happened.
func (a *Agent) LastError() (string, time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.lastErr, a.lastErrAt
}

// SetConfigVersion records the version of the server config in use.
func (a *Agent) SetConfigVersion(v string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.configVersion = v
	a.configAt = time.Now()
}

// collector turns the agent's counters into Prometheus metrics when scraped, so the hot
// paths keep bumping plain atomics and pay nothing for the exposition.
type collector struct{ a *Agent }

var (
	kindCounters = []struct {
		desc *prometheus.Desc
		get  func(a *Agent, k Kind) uint64
	}{
		{prometheus.NewDesc("stormwatch_agent_samples_measured_total", "Samples recorded by the probes.", []string{"kind"}, nil),
			func(a *Agent, k Kind) uint64 { return a.MeasuredCount(k) }},
		{prometheus.NewDesc("stormwatch_agent_samples_shipped_total", "Samples accepted by the API.", []string{"kind"}, nil),
			func(a *Agent, k Kind) uint64 { return a.Shipped[k].Load() }},
		{prometheus.NewDesc("stormwatch_agent_samples_spooled_total", "Samples written to the on-disk spool.", []string{"kind"}, nil),
			func(a *Agent, k Kind) uint64 { return a.Spooled[k].Load() }},
		{prometheus.NewDesc("stormwatch_agent_samples_dropped_total", "Samples lost because the spool was full or the API rejected the batch.", []string{"kind"}, nil),
			func(a *Agent, k Kind) uint64 { return a.Dropped[k].Load() }},
		{prometheus.NewDesc("stormwatch_agent_samples_set_aside_total", "Samples of a stored batch that the API left out, as about a peer deleted meanwhile.", []string{"kind"}, nil),
			func(a *Agent, k Kind) uint64 { return a.SetAside[k].Load() }},
	}
	simple = []struct {
		desc *prometheus.Desc
		typ  prometheus.ValueType
		get  func(a *Agent) float64
	}{
		{prometheus.NewDesc("stormwatch_agent_batches_sent_total", "Batches accepted by the API.", nil, nil), prometheus.CounterValue,
			func(a *Agent) float64 { return float64(a.BatchesSent.Load()) }},
		{prometheus.NewDesc("stormwatch_agent_batches_duplicate_total", "Batches the API had already stored (a retry after a lost answer).", nil, nil), prometheus.CounterValue,
			func(a *Agent) float64 { return float64(a.BatchesDuplicate.Load()) }},
		{prometheus.NewDesc("stormwatch_agent_batches_rejected_total", "Batches the API refused for good (4xx).", nil, nil), prometheus.CounterValue,
			func(a *Agent) float64 { return float64(a.BatchesRejected.Load()) }},
		{prometheus.NewDesc("stormwatch_agent_batches_split_total", "Batches too large for the API (413), sent again as two halves.", nil, nil), prometheus.CounterValue,
			func(a *Agent) float64 { return float64(a.BatchesSplit.Load()) }},
		{prometheus.NewDesc("stormwatch_agent_send_failures_total", "Failed attempts to send a batch.", nil, nil), prometheus.CounterValue,
			func(a *Agent) float64 { return float64(a.SendFailures.Load()) }},
		{prometheus.NewDesc("stormwatch_agent_spool_bytes", "Bytes in the on-disk spool.", nil, nil), prometheus.GaugeValue,
			func(a *Agent) float64 { return float64(a.SpoolBytes.Load()) }},
		{prometheus.NewDesc("stormwatch_agent_spool_batches", "Batches in the on-disk spool.", nil, nil), prometheus.GaugeValue,
			func(a *Agent) float64 { return float64(a.SpoolFiles.Load()) }},
		{prometheus.NewDesc("stormwatch_agent_uptime_seconds", "Seconds since the agent started.", nil, nil), prometheus.GaugeValue,
			func(a *Agent) float64 { return time.Since(a.start).Seconds() }},
	}
	lastErrorDesc   = prometheus.NewDesc("stormwatch_agent_last_error_info", "The latest error, 1 when there was one.", []string{"error"}, nil)
	lastErrorAtDesc = prometheus.NewDesc("stormwatch_agent_last_error_timestamp_seconds", "When the latest error happened.", nil, nil)
	configDesc      = prometheus.NewDesc("stormwatch_agent_config_info", "The server config version in use.", []string{"version"}, nil)
	configAtDesc    = prometheus.NewDesc("stormwatch_agent_config_timestamp_seconds", "When that config version was applied.", nil, nil)
	buildDesc       = prometheus.NewDesc("stormwatch_agent_build_info", "The agent build.", []string{"version"}, nil)
)

// Describe sends nothing: gauges added with AddGauge are named at run time, which makes
// this an unchecked collector (allowed by client_golang's registry).
func (c collector) Describe(chan<- *prometheus.Desc) {}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	a := c.a
	for _, kc := range kindCounters {
		for k := Kind(0); k < NumKinds; k++ {
			ch <- prometheus.MustNewConstMetric(kc.desc, prometheus.CounterValue, float64(kc.get(a, k)), k.String())
		}
	}
	for _, s := range simple {
		ch <- prometheus.MustNewConstMetric(s.desc, s.typ, s.get(a))
	}
	a.mu.Lock()
	gauges := append([]gauge(nil), a.gauges...)
	lastErr, lastErrAt, cv, cvAt, ver := a.lastErr, a.lastErrAt, a.configVersion, a.configAt, a.version
	a.mu.Unlock()
	for _, g := range gauges {
		ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(g.name, g.help, nil, nil), prometheus.GaugeValue, g.f())
	}
	if lastErr != "" {
		ch <- prometheus.MustNewConstMetric(lastErrorDesc, prometheus.GaugeValue, 1, lastErr)
		ch <- prometheus.MustNewConstMetric(lastErrorAtDesc, prometheus.GaugeValue, float64(lastErrAt.Unix()))
	}
	if cv != "" {
		ch <- prometheus.MustNewConstMetric(configDesc, prometheus.GaugeValue, 1, cv)
		ch <- prometheus.MustNewConstMetric(configAtDesc, prometheus.GaugeValue, float64(cvAt.Unix()))
	}
	ch <- prometheus.MustNewConstMetric(buildDesc, prometheus.GaugeValue, 1, ver)
}

// Registry holds the agent's metrics and the Go runtime and process collectors.
func (a *Agent) Registry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collector{a}, collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// WriteText writes every metric in the Prometheus text format.
func (a *Agent) WriteText(w io.Writer) error {
	families, err := a.Registry().Gather()
	if err != nil {
		return err
	}
	enc := expfmt.NewEncoder(w, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, f := range families {
		if err := enc.Encode(f); err != nil {
			return err
		}
	}
	return nil
}

// Handler serves /metrics.
func (a *Agent) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(a.Registry(), promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	return mux
}

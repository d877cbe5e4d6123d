// Package metrics keeps the agent's self-metrics and serves them in the Prometheus text
// exposition format at /metrics.
package metrics

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
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

// Agent holds every counter the agent exposes.
type Agent struct {
	Measured [NumKinds]atomic.Uint64 // recorded by a probe
	Shipped  [NumKinds]atomic.Uint64 // accepted by the API (first delivery or duplicate)
	Spooled  [NumKinds]atomic.Uint64 // written to the on-disk spool
	Dropped  [NumKinds]atomic.Uint64 // lost: spool full or batch rejected

	BatchesSent      atomic.Uint64
	BatchesDuplicate atomic.Uint64
	BatchesRejected  atomic.Uint64
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

func label(v string) string {
	r := strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
	return r.Replace(v)
}

// WriteText writes every metric in the Prometheus text format.
func (a *Agent) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	counters := []struct {
		name, help string
		get        func(Kind) uint64
	}{
		{"stormwatch_agent_samples_measured_total", "Samples recorded by the probes.", a.MeasuredCount},
		{"stormwatch_agent_samples_shipped_total", "Samples accepted by the API.", func(k Kind) uint64 { return a.Shipped[k].Load() }},
		{"stormwatch_agent_samples_spooled_total", "Samples written to the on-disk spool.", func(k Kind) uint64 { return a.Spooled[k].Load() }},
		{"stormwatch_agent_samples_dropped_total", "Samples lost because the spool was full or the API rejected the batch.", func(k Kind) uint64 { return a.Dropped[k].Load() }},
	}
	for _, c := range counters {
		fmt.Fprintf(bw, "# HELP %s %s\n# TYPE %s counter\n", c.name, c.help, c.name)
		for k := Kind(0); k < NumKinds; k++ {
			fmt.Fprintf(bw, "%s{kind=%q} %d\n", c.name, k.String(), c.get(k))
		}
	}
	simple := []struct {
		name, help, typ string
		v               float64
	}{
		{"stormwatch_agent_batches_sent_total", "Batches accepted by the API.", "counter", float64(a.BatchesSent.Load())},
		{"stormwatch_agent_batches_duplicate_total", "Batches the API had already stored (a retry after a lost answer).", "counter", float64(a.BatchesDuplicate.Load())},
		{"stormwatch_agent_batches_rejected_total", "Batches the API refused for good (4xx).", "counter", float64(a.BatchesRejected.Load())},
		{"stormwatch_agent_send_failures_total", "Failed attempts to send a batch.", "counter", float64(a.SendFailures.Load())},
		{"stormwatch_agent_spool_bytes", "Bytes in the on-disk spool.", "gauge", float64(a.SpoolBytes.Load())},
		{"stormwatch_agent_spool_batches", "Batches in the on-disk spool.", "gauge", float64(a.SpoolFiles.Load())},
		{"stormwatch_agent_uptime_seconds", "Seconds since the agent started.", "gauge", time.Since(a.start).Seconds()},
	}
	for _, s := range simple {
		fmt.Fprintf(bw, "# HELP %s %s\n# TYPE %s %s\n%s %s\n", s.name, s.help, s.name, s.typ, s.name, strconv.FormatFloat(s.v, 'f', -1, 64))
	}
	a.mu.Lock()
	gauges := append([]gauge(nil), a.gauges...)
	lastErr, lastErrAt, cv, cvAt, ver := a.lastErr, a.lastErrAt, a.configVersion, a.configAt, a.version
	a.mu.Unlock()
	for _, g := range gauges {
		fmt.Fprintf(bw, "# HELP %s %s\n# TYPE %s gauge\n%s %s\n", g.name, g.help, g.name, g.name, strconv.FormatFloat(g.f(), 'f', -1, 64))
	}
	fmt.Fprintf(bw, "# HELP stormwatch_agent_last_error_info The latest error, 1 when there was one.\n# TYPE stormwatch_agent_last_error_info gauge\n")
	if lastErr != "" {
		fmt.Fprintf(bw, "stormwatch_agent_last_error_info{error=\"%s\"} 1\n", label(lastErr))
		fmt.Fprintf(bw, "# HELP stormwatch_agent_last_error_timestamp_seconds When the latest error happened.\n# TYPE stormwatch_agent_last_error_timestamp_seconds gauge\nstormwatch_agent_last_error_timestamp_seconds %d\n", lastErrAt.Unix())
	}
	fmt.Fprintf(bw, "# HELP stormwatch_agent_config_info The server config version in use.\n# TYPE stormwatch_agent_config_info gauge\n")
	if cv != "" {
		fmt.Fprintf(bw, "stormwatch_agent_config_info{version=\"%s\"} 1\n", label(cv))
		fmt.Fprintf(bw, "# HELP stormwatch_agent_config_timestamp_seconds When that config version was applied.\n# TYPE stormwatch_agent_config_timestamp_seconds gauge\nstormwatch_agent_config_timestamp_seconds %d\n", cvAt.Unix())
	}
	fmt.Fprintf(bw, "# HELP stormwatch_agent_build_info The agent build.\n# TYPE stormwatch_agent_build_info gauge\nstormwatch_agent_build_info{version=\"%s\"} 1\n", label(ver))
	return bw.Flush()
}

// Handler serves /metrics.
func (a *Agent) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_ = a.WriteText(w)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	return mux
}

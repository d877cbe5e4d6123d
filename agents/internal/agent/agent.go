// Package agent runs the Stormwatch agent: enrollment, config polling, the probes, the
// shipper and the local /metrics endpoint.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"os"
	"strconv"
	"sync"
	"time"

	"stormwatch/agents/internal/client"
	"stormwatch/agents/internal/config"
	"stormwatch/agents/internal/metadata"
	"stormwatch/agents/internal/metrics"
	"stormwatch/agents/internal/probe/mesh"
	pathprobe "stormwatch/agents/internal/probe/path"
	"stormwatch/agents/internal/probe/throughput"
	"stormwatch/agents/internal/sample"
	"stormwatch/agents/internal/shipper"
)

// StorageManager runs the storage probe on the targets of the server config.
type StorageManager interface {
	Apply(targets []json.RawMessage)
	Run(ctx context.Context) error
}

// Deps are the parts main provides.
type Deps struct {
	Version string
	Logger  *slog.Logger
	// NewStorage builds the storage probe; nil leaves storage targets unmeasured.
	NewStorage func(emit func(sample.Storage), log *slog.Logger) StorageManager
	// Metadata overrides the cloud metadata endpoints (tests).
	MetadataEndpoints *metadata.Endpoints
}

// Metadata detects where the agent runs and applies the config's overrides.
func Metadata(ctx context.Context, cfg config.Config, d Deps) client.Metadata {
	var md client.Metadata
	if cfg.Metadata.DetectEnabled() {
		det := metadata.Detector{Endpoints: metadata.DefaultEndpoints, Timeout: cfg.Metadata.Timeout}
		if d.MetadataEndpoints != nil {
			det.Endpoints = *d.MetadataEndpoints
		}
		found, err := det.Detect(ctx)
		if err != nil {
			d.Logger.Info("no cloud metadata service answered; using config values", "err", err)
		}
		md = found
	}
	md = metadata.Override(md, client.Metadata{Provider: cfg.Metadata.Provider, Region: cfg.Metadata.Region,
		Zone: cfg.Metadata.Zone, Subnet: cfg.Metadata.Subnet, InstanceType: cfg.Metadata.InstanceType,
		PrivateIP: cfg.Metadata.PrivateIP, PublicIP: cfg.Metadata.PublicIP})
	if md.PrivateIP == "" {
		if u, err := url.Parse(cfg.APIURL); err == nil {
			md.PrivateIP = metadata.OutboundIP(u.Hostname())
		}
	}
	if md.Subnet == "" {
		// Off-cloud nothing names the subnet: the mesh interface's prefix does, so pairs on
		// different networks are never taken for one subnet.
		md.Subnet = metadata.InterfaceSubnet(md.PrivateIP)
	}
	return md
}

// AgentName is the configured name or the host name.
func AgentName(cfg config.Config) string {
	if cfg.Name != "" {
		return cfg.Name
	}
	h, _ := os.Hostname()
	return h
}

// meshAddresses are the address peers dial (the configured advertise address, else the
// self-loop's) and the one the self-loop dials: the listen IP, else the private IP (or
// loopback), with the port actually listened on, so that an advertised public address does
// not send the self-loop out through a NAT.
func meshAddresses(cfg config.Config, md client.Metadata, ln net.Addr) (advertised, self string) {
	_, port, _ := net.SplitHostPort(ln.String())
	host, _, _ := net.SplitHostPort(cfg.Mesh.Listen)
	switch ip := net.ParseIP(host); {
	case ip != nil && !ip.IsUnspecified():
		self = net.JoinHostPort(host, port)
	case md.PrivateIP != "":
		self = net.JoinHostPort(md.PrivateIP, port)
	default:
		self = net.JoinHostPort("127.0.0.1", port)
	}
	if cfg.Mesh.Advertise != "" {
		return cfg.Mesh.Advertise, self
	}
	return self, self
}

// loopbackHost reports whether a host:port names a loopback address (or localhost).
func loopbackHost(hostPort string) bool {
	host, _, err := net.SplitHostPort(hostPort)
	if err != nil {
		return false
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback()
	}
	return host == "localhost"
}

// loopbackURL reports whether the API is reached over loopback (the agent shares its host).
func loopbackURL(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && loopbackHost(net.JoinHostPort(u.Hostname(), "0"))
}

// Enroll registers the agent with its enrollment token and saves the state.
func Enroll(ctx context.Context, cfg config.Config, c *client.Client, md client.Metadata, meshAddr string, d Deps) (State, error) {
	tok, err := cfg.EnrollmentTokenValue()
	if err != nil {
		return State{}, err
	}
	if tok == "" {
		return State{}, errors.New("not enrolled yet and no enrollment token configured (enrollment_token or enrollment_token_file)")
	}
	name := AgentName(cfg)
	res, err := c.Enroll(ctx, client.EnrollRequest{EnrollmentToken: tok, Name: name, AgentVersion: d.Version,
		MeshAddress: meshAddr, Metadata: md})
	if err != nil {
		return State{}, err
	}
	st := State{AgentID: res.AgentID, AgentToken: res.AgentToken, OrgID: res.OrgID, Name: name, APIURL: cfg.APIURL}
	if err := SaveState(cfg.StateDir, st); err != nil {
		return State{}, err
	}
	d.Logger.Info("enrolled", "agent_id", st.AgentID, "name", name)
	return st, nil
}

// Run enrolls when needed, then measures and ships until ctx ends, and flushes.
func Run(ctx context.Context, cfg config.Config, d Deps) error {
	log := d.Logger
	m := metrics.New(d.Version)
	c, err := client.New(cfg.APIURL, cfg.CAFile, d.Version)
	if err != nil {
		return err
	}
	echo, err := mesh.Listen(cfg.Mesh.Listen, log)
	if err != nil {
		return fmt.Errorf("mesh listen %s: %w", cfg.Mesh.Listen, err)
	}
	defer echo.Close()
	var tput *throughput.Manager
	if cfg.Throughput.Listen != "" {
		// The probe is optional: a port already taken (several agents on one host) leaves it
		// off, and without a throughput_address the server schedules nothing here.
		if tput, err = throughput.Listen(cfg.Throughput.Listen, log); err != nil {
			log.Error("throughput probe off: cannot listen", "address", cfg.Throughput.Listen, "err", err)
			tput = nil
		} else {
			tput.SetNice(cfg.Throughput.Nice)
			defer tput.Close()
		}
	}
	md := Metadata(ctx, cfg, d)
	meshAddr, selfAddr := meshAddresses(cfg, md, echo.Addr())
	if loopbackHost(meshAddr) && !loopbackURL(cfg.APIURL) {
		// The API refuses it (422) unless its operator allows it: say what to set.
		log.Warn("the mesh address is loopback, which peers on other hosts cannot reach; set mesh.advertise",
			"mesh_address", meshAddr, "api_url", cfg.APIURL)
	}

	st, ok, err := LoadState(cfg.StateDir)
	if err != nil {
		return err
	}
	if ok && st.APIURL != "" && st.APIURL != cfg.APIURL {
		log.Warn("the API URL changed since enrollment; enrolling again", "was", st.APIURL, "now", cfg.APIURL)
		ok = false
	}
	if !ok {
		if st, err = retry(ctx, log, "enroll", func() (State, error) { return Enroll(ctx, cfg, c, md, meshAddr, d) }); err != nil {
			return err
		}
	}
	c.SetToken(st.AgentToken)
	// An empty throughput address tells the server the probe is off, so it stops scheduling
	// experiments to an address reported before.
	tputAddr := ""
	if tput != nil {
		tputAddr = ThroughputAddress(cfg, meshAddr, tput.Addr())
	}
	upd := client.SelfUpdate{AgentVersion: &d.Version, MeshAddress: &meshAddr, Metadata: &md, ThroughputAddress: &tputAddr}
	if err := c.PatchSelf(ctx, upd); err != nil {
		var se *client.StatusError
		if client.IsAgentDeleted(err) {
			// Deleted on purpose: re-enrolling by itself would bring it back, so it stops.
			log.Error("this agent was deleted from its org: not measuring; its spool is dropped; "+
				"enroll it again to rejoin", "err", err)
			_ = os.RemoveAll(cfg.Spool.Dir)
			return ErrAgentDeleted
		}
		if errors.As(err, &se) && se.Code == http.StatusUnauthorized {
			// The token was revoked or the agent deleted: enroll again if we can.
			log.Warn("agent token refused; enrolling again")
			if st, err = Enroll(ctx, cfg, c, md, meshAddr, d); err != nil {
				return err
			}
			c.SetToken(st.AgentToken)
			// Enrollment carries no throughput address: report it with the new token.
			if err := c.PatchSelf(ctx, upd); err != nil {
				log.Warn("could not update agent metadata", "err", err)
				m.SetError(err)
			}
		} else {
			log.Warn("could not update agent metadata", "err", err)
			m.SetError(err)
		}
	}
	log.Info("agent starting", "agent_id", st.AgentID, "name", st.Name, "mesh_address", meshAddr,
		"throughput_address", tputAddr, "provider", md.Provider, "region", md.Region, "zone", md.Zone)

	rec := mesh.NewRecorder()
	m.SetMeasuredSource(metrics.Mesh, func() uint64 { n, _ := rec.Measured(); return n })
	m.SetMeasuredSource(metrics.Quorum, func() uint64 { _, n := rec.Measured(); return n })
	prober := mesh.NewProber(st.AgentID, rec, log)
	// Replies are signed with the id peers know this agent by, so a wrong address shows.
	echo.SetID(st.AgentID)
	prober.SetSelfAddress(selfAddr)
	if cfg.Mesh.SendMode == "broadcast" {
		prober.SetSendMode(mesh.Broadcast)
	}
	m.AddGauge("stormwatch_agent_mesh_connected_peers", "Peers with an open mesh connection.", func() float64 { return float64(prober.Connected()) })
	// The API saying this agent was deleted (config poll or ingest) ends the run like a signal.
	runCtx, stopRun := context.WithCancelCause(ctx)
	defer stopRun(nil)
	onDeleted := func() { stopRun(ErrAgentDeleted) }
	ship, err := shipper.New(shipper.Options{AgentID: st.AgentID, SpoolDir: cfg.Spool.Dir, SpoolMaxBytes: cfg.Spool.MaxBytes,
		FlushDeadline: cfg.FlushDeadline, Metrics: m, Logger: log, OnDeleted: onDeleted}, c, rec)
	if err != nil {
		return err
	}
	var storage StorageManager
	if d.NewStorage != nil {
		storage = d.NewStorage(ship.AddStorage, log)
	}

	var metricsSrv *http.Server
	if cfg.Metrics.Listen != "" {
		ln, err := net.Listen("tcp", cfg.Metrics.Listen)
		if err != nil {
			return fmt.Errorf("metrics listen %s: %w", cfg.Metrics.Listen, err)
		}
		h := m.Handler()
		if cfg.Metrics.PProf {
			mux := http.NewServeMux()
			mux.Handle("/", h)
			mux.HandleFunc("/debug/pprof/", pprof.Index)
			mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
			h = mux
		}
		metricsSrv = &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = metricsSrv.Serve(ln) }()
		log.Info("metrics listening", "address", ln.Addr().String())
	}

	probeCtx, stopProbes := context.WithCancel(context.Background())
	echoCtx, stopEcho := context.WithCancel(context.Background())
	shipCtx, stopShip := context.WithCancel(context.Background())
	var probes sync.WaitGroup
	echoDone := make(chan struct{})
	go func() { defer close(echoDone); _ = echo.Serve(echoCtx) }()
	paths := pathprobe.NewManager(st.AgentID, log)
	probes.Add(3)
	go func() { defer probes.Done(); _ = prober.Run(probeCtx) }()
	go func() {
		defer probes.Done()
		_ = paths.Run(probeCtx, func(ctx context.Context, traces []pathprobe.TraceOut) error {
			return c.PostPaths(ctx, map[string]any{"traces": traces})
		})
	}()
	go func() {
		defer probes.Done()
		pollConfig(probeCtx, c, st.AgentID, prober, paths, ship, storage, tput, m, log, func() { ship.AgentDeleted() })
	}()
	if tput != nil {
		probes.Add(1)
		go func() { defer probes.Done(); _ = tput.Run(probeCtx, st.AgentID, ship.AddThroughput) }()
	}
	if storage != nil {
		probes.Add(1)
		go func() {
			defer probes.Done()
			if err := storage.Run(probeCtx); err != nil && probeCtx.Err() == nil {
				log.Error("storage probe stopped", "err", err)
				m.SetError(err)
			}
		}()
	}
	shipDone := make(chan struct{})
	go func() { defer close(shipDone); _ = ship.Run(shipCtx) }()

	<-runCtx.Done()
	deleted := errors.Is(context.Cause(runCtx), ErrAgentDeleted)
	if deleted {
		log.Info("stopping: this agent was deleted")
	} else {
		log.Info("stopping: flushing samples", "deadline", cfg.FlushDeadline)
	}
	// Probes stop first so that the shipper's last batch holds every recorded sample. The mesh
	// stops sending and waits for the outcome of its messages in flight (at most the timeout)
	// while the echo server still answers, so the self-loop loses nothing to the shutdown.
	stopProbes()
	probes.Wait()
	stopEcho()
	<-echoDone
	stopShip()
	<-shipDone
	if metricsSrv != nil {
		_ = metricsSrv.Close()
	}
	final := []any{}
	for k := metrics.Kind(0); k < metrics.NumKinds; k++ {
		final = append(final, k.String()+"_measured", m.MeasuredCount(k), k.String()+"_shipped", m.Shipped[k].Load(),
			k.String()+"_spooled", m.Spooled[k].Load(), k.String()+"_dropped", m.Dropped[k].Load(),
			k.String()+"_set_aside", m.SetAside[k].Load())
	}
	final = append(final, "spooled_batches_left", ship.SpooledBatches())
	log.Info("agent stopped", final...)
	if deleted {
		return ErrAgentDeleted
	}
	return nil
}

// ErrAgentDeleted ends Run when the API answers that this agent was deleted (410 Gone).
var ErrAgentDeleted = errors.New("this agent was deleted from its org")

// retry calls f with exponential backoff until it succeeds, ctx ends, or the API answers
// with a non-retryable error.
func retry[T any](ctx context.Context, log *slog.Logger, what string, f func() (T, error)) (T, error) {
	backoff := time.Second
	for {
		v, err := f()
		if err == nil || !client.IsRetryable(err) {
			return v, err
		}
		log.Warn(what+" failed; retrying", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return v, ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Minute)
	}
}

// pollConfig fetches the server config on start and whenever config_poll_s elapses, and
// applies what changed; a 304 costs nothing.
func pollConfig(ctx context.Context, c *client.Client, selfID string, prober *mesh.Prober, paths *pathprobe.Manager, ship *shipper.Shipper,
	storage StorageManager, tput *throughput.Manager, m *metrics.Agent, log *slog.Logger, onDeleted func()) {
	version := ""
	interval := 30 * time.Second
	failBackoff := time.Second
	for {
		cfg, err := c.Config(ctx, version)
		wait := interval
		switch {
		case err != nil && ctx.Err() != nil:
			return
		case client.IsAgentDeleted(err):
			log.Error("this agent was deleted from its org: measuring and shipping stop; "+
				"enroll it again to rejoin", "err", err)
			onDeleted()
			return
		case err != nil:
			log.Warn("config poll failed", "err", err)
			m.SetError(err)
			if version == "" {
				wait = failBackoff // nothing to measure with yet: try again soon
				failBackoff = min(2*failBackoff, interval)
			}
		case cfg != nil:
			apply(cfg, selfID, prober, paths, ship, storage, tput, log)
			version = cfg.Version
			m.SetConfigVersion(version)
			if cfg.ConfigPollS > 0 {
				interval = time.Duration(cfg.ConfigPollS) * time.Second
				wait = interval
			}
		}
		// Jitter keeps a fleet that started together from polling together.
		wait += time.Duration(mrand.Int64N(int64(wait)/10 + 1))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// PathSettings converts the server's path-trace config: every mesh peer but this agent.
func PathSettings(cfg *client.AgentConfig, selfID string) pathprobe.Settings {
	s := pathprobe.Settings{Interval: time.Duration(cfg.Mesh.PathTraceIntervalS) * time.Second,
		Proto: pathprobe.Proto(cfg.Mesh.PathTraceProto)}
	if s.Proto == "" {
		s.Proto = pathprobe.TCP
	}
	for _, r := range cfg.Paths.Requests {
		s.Requests = append(s.Requests, pathprobe.Request{ID: r.ID, Peer: r.Peer, Trigger: r.Trigger})
	}
	if !cfg.Mesh.Enabled {
		return s
	}
	for _, p := range cfg.Mesh.Peers {
		if p.AgentID != selfID && p.Address != "" {
			s.Targets = append(s.Targets, pathprobe.Target{ID: p.AgentID, Address: p.Address})
		}
	}
	return s
}

// MeshSettings converts the server's mesh config; groups absent from it get the defaults.
func MeshSettings(cfg *client.AgentConfig, selfID string) mesh.Settings {
	s := mesh.Settings{Enabled: cfg.Mesh.Enabled, RateHz: cfg.Mesh.RateHz, PayloadBytes: cfg.Mesh.PayloadBytes,
		Timeout: time.Duration(cfg.Mesh.TimeoutMs) * time.Millisecond}
	for _, p := range cfg.Mesh.Peers {
		s.Peers = append(s.Peers, mesh.Peer{ID: p.AgentID, Name: p.Name, Address: p.Address, Provider: p.Provider,
			Region: p.Region, Zone: p.Zone, Subnet: p.Subnet})
	}
	if cfg.Mesh.Groups == nil {
		s.Groups = mesh.DefaultGroups(selfID, s.Peers)
	} else {
		for _, g := range cfg.Mesh.Groups {
			s.Groups = append(s.Groups, mesh.Group{Name: g.Name, K: g.K, Members: g.Members})
		}
	}
	return s
}

// ThroughputAddress is where peers reach the throughput probe listening on ln: the configured
// throughput advertise address; else, when the probe binds all interfaces or the mesh
// advertise host, that host (a public IP set for the mesh serves both) with the port
// listened on; else the probe's own listen address, since the mesh host may be a proxy or
// an interface the probe does not listen on.
func ThroughputAddress(cfg config.Config, meshAddr string, ln net.Addr) string {
	if cfg.Throughput.Advertise != "" {
		return cfg.Throughput.Advertise
	}
	_, port, _ := net.SplitHostPort(ln.String())
	meshHost, _, _ := net.SplitHostPort(meshAddr)
	host, _, _ := net.SplitHostPort(cfg.Throughput.Listen)
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) || sameHost(host, meshHost) {
		return net.JoinHostPort(meshHost, port)
	}
	return net.JoinHostPort(host, port)
}

// sameHost compares two hosts, IP addresses by value (::1 and 0:0::1 are one).
func sameHost(a, b string) bool {
	if x, y := net.ParseIP(a), net.ParseIP(b); x != nil && y != nil {
		return x.Equal(y)
	}
	return a == b
}

// ThroughputExperiments converts the server's experiments; one with an unreadable token is
// left out (and logged), since it could never authenticate.
func ThroughputExperiments(cfg *client.AgentConfig, log *slog.Logger) []throughput.Experiment {
	var out []throughput.Experiment
	for _, x := range cfg.Throughput.Experiments {
		tok, err := throughput.DecodeToken(x.Token)
		if err != nil {
			log.Warn("throughput experiment ignored", "experiment_id", x.ID, "err", err)
			continue
		}
		out = append(out, throughput.Experiment{ID: x.ID, Role: throughput.Role(x.Role), PeerAgentID: x.PeerAgentID,
			PeerAddress: x.PeerAddress, Proto: x.Proto, StartAt: x.StartAt, DurationS: x.DurationS, Streams: x.Streams,
			UDPRateBitsPerS: x.UDPRateBitsPerS, UDPDatagramBytes: x.UDPDatagramBytes, Token: tok})
	}
	return out
}

func apply(cfg *client.AgentConfig, selfID string, prober *mesh.Prober, paths *pathprobe.Manager, ship *shipper.Shipper,
	storage StorageManager, tput *throughput.Manager, log *slog.Logger) {
	s := MeshSettings(cfg, selfID)
	prober.Apply(s)
	if paths != nil {
		paths.Apply(PathSettings(cfg, selfID))
	}
	if tput != nil {
		tput.Apply(ThroughputExperiments(cfg, log))
	}
	ship.SetLimits(cfg.Shipper.MaxBatchSamples, time.Duration(cfg.Shipper.MaxBatchAgeMs)*time.Millisecond)
	if storage != nil {
		storage.Apply(cfg.Storage.Targets)
	}
	log.Info("config applied", "version", cfg.Version, "mesh_enabled", s.Enabled, "rate_hz", s.RateHz,
		"payload_bytes", s.PayloadBytes, "peers", len(s.Peers), "groups", len(s.Groups),
		"storage_targets", len(cfg.Storage.Targets), "throughput_experiments", len(cfg.Throughput.Experiments), "poll_s", strconv.Itoa(cfg.ConfigPollS))
}

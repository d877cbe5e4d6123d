package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"stormwatch/agents/internal/client"
	"stormwatch/agents/internal/config"
	"stormwatch/agents/testbed/fakeapi"
)

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// finalCounts reads the "agent stopped" log record.
func (s *syncBuf) finalCounts(t *testing.T) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, line := range bytes.Split(s.b.Bytes(), []byte("\n")) {
		var rec map[string]any
		if json.Unmarshal(line, &rec) == nil && rec["msg"] == "agent stopped" {
			return rec
		}
	}
	t.Fatal("no final counts logged")
	return nil
}

func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type runningAgent struct {
	name   string
	logs   *syncBuf
	cancel context.CancelFunc
	done   chan error
}

func startAgent(t *testing.T, api, name string) *runningAgent {
	t.Helper()
	return startAgentWith(t, api, name, nil)
}

// startAgentWith starts an agent whose test configuration mutate changes first.
func startAgentWith(t *testing.T, api, name string, mutate func(*config.Config)) *runningAgent {
	t.Helper()
	dir := t.TempDir()
	detect := false
	cfg := config.Defaults()
	cfg.APIURL = api
	cfg.EnrollmentToken = "swe_testtoken"
	cfg.StateDir = dir
	cfg.Spool.Dir = filepath.Join(dir, "spool")
	cfg.Name = name
	cfg.Mesh.Listen = "127.0.0.1:0"
	cfg.Throughput.Listen = "127.0.0.1:0"
	cfg.Throughput.Nice = 0 // the streams' priority is tested in its package; here they must not starve
	cfg.Metrics.Listen = ""
	cfg.FlushDeadline = 5 * time.Second
	cfg.Metadata.Detect = &detect
	cfg.Metadata.Provider, cfg.Metadata.Region, cfg.Metadata.Zone = "local", "local-1", "local-1a"
	if mutate != nil {
		mutate(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	a := &runningAgent{name: name, logs: &syncBuf{}, done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	log := slog.New(slog.NewJSONHandler(a.logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	go func() { a.done <- Run(ctx, cfg, Deps{Version: "test", Logger: log}) }()
	t.Cleanup(func() { cancel(); <-a.done })
	return a
}

func (a *runningAgent) stop(t *testing.T) {
	a.cancel()
	if err := <-a.done; err != nil {
		t.Fatalf("%s: %v", a.name, err)
	}
	a.done <- nil // for the cleanup
}

func TestThreeAgentsEnrollMeshAndShipEverySampleOnceThroughAnOutage(t *testing.T) {
	api := fakeapi.New("swe_testtoken", 50, 256, 500)
	srv := httptest.NewServer(api)
	defer srv.Close()
	var agents []*runningAgent
	for i := range 3 {
		agents = append(agents, startAgent(t, srv.URL, fmt.Sprintf("agent-%d", i+1)))
	}
	pairs := func() int {
		seen := map[[2]string]bool{}
		for _, r := range api.MeshRows() {
			if r.Status == 0 {
				seen[[2]string{r.Src, r.Dst}] = true
			}
		}
		return len(seen)
	}
	waitFor(t, "all nine ordered pairs", 20*time.Second, func() bool { return pairs() == 9 })
	waitFor(t, "quorum samples", 10*time.Second, func() bool { return len(api.QuorumRows()) > 0 })

	// The API goes away under load, then comes back.
	api.SetDown(2)
	before := api.Refused.Load()
	waitFor(t, "failed deliveries during the outage", 10*time.Second, func() bool { return api.Refused.Load() >= before+6 })
	api.SetDown(0)

	for _, a := range agents {
		a.stop(t)
	}
	ids := api.AgentIDs()
	rows := api.MeshRows()
	seen := map[string]bool{}
	perSrc := map[string]int{}
	for _, r := range rows {
		k := fmt.Sprintf("%s/%s/%d", r.Src, r.Dst, r.Round)
		if seen[k] {
			t.Fatalf("sample %s stored twice", k)
		}
		seen[k] = true
		perSrc[r.Src]++
	}
	for _, a := range agents {
		fc := a.logs.finalCounts(t)
		measured := int(fc["mesh_measured"].(float64))
		if got := perSrc[ids[a.name]]; got != measured {
			t.Errorf("%s: %d mesh rows stored, %d measured (left in spool: %v)", a.name, got, measured, fc["spooled_batches_left"])
		}
		if fc["mesh_spooled"].(float64) == 0 {
			t.Logf("%s spooled nothing during the outage", a.name)
		}
	}

	// Quorum samples arrive once each, and each is the k-th fastest of its round's replies.
	type key struct {
		src   string
		round int64
	}
	replies := map[key][]int64{}
	asked := map[key]int{}
	for _, r := range rows {
		k := key{r.Src, r.Round}
		asked[k]++
		if r.Status == 0 {
			replies[k] = append(replies[k], r.RTTUS)
		}
	}
	qrows := api.QuorumRows()
	perSrcQ := map[string]int{}
	seenQ := map[string]bool{}
	okQ := 0
	for _, q := range qrows {
		id := fmt.Sprintf("%s/%s/%d", q.Src, q.Group, q.Round)
		if seenQ[id] {
			t.Fatalf("quorum sample %s stored twice", id)
		}
		seenQ[id] = true
		perSrcQ[q.Src]++
		// Every agent is in one zone: the group is a majority of the agents known at the time
		// (two of them while the third had not enrolled yet).
		if q.Group != "zone-majority" || q.K != q.N/2+1 || q.N < 2 || q.N > 3 {
			t.Fatalf("quorum sample %s: group %s k=%d n=%d, want a zone majority", id, q.Group, q.K, q.N)
		}
		k := key{q.Src, q.Round}
		if asked[k] != q.N {
			t.Fatalf("quorum sample %s: %d mesh samples stored for its round, want %d", id, asked[k], q.N)
		}
		rtts := slices.Clone(replies[k])
		slices.Sort(rtts)
		switch {
		case len(rtts) < q.K:
			if q.Status == 0 {
				t.Fatalf("quorum sample %s is ok with %d replies", id, len(rtts))
			}
		case q.Status != 0 || q.LatencyUS != rtts[q.K-1]:
			t.Fatalf("quorum sample %s: %d us (status %d), want the %d-th fastest of %v", id, q.LatencyUS, q.Status, q.K, rtts)
		default:
			okQ++
		}
	}
	if okQ == 0 {
		t.Fatal("no ok quorum sample was stored")
	}
	for _, a := range agents {
		fc := a.logs.finalCounts(t)
		if got, measured := perSrcQ[ids[a.name]], int(fc["quorum_measured"].(float64)); got != measured {
			t.Errorf("%s: %d quorum rows stored, %d measured", a.name, got, measured)
		}
	}
}

func TestStateIsKeptReadableOnlyByTheAgent(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	if err := SaveState(dir, State{AgentID: "a", AgentToken: "swa_x"}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, stateFile))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("state file mode %v, want 0600", fi.Mode().Perm())
	}
	st, ok, err := LoadState(dir)
	if err != nil || !ok || st.AgentToken != "swa_x" {
		t.Fatalf("%+v %v %v", st, ok, err)
	}
}

func TestTwoAgentsRunTheExperimentTheServerSchedulesAndShipWhatEachReceived(t *testing.T) {
	api := fakeapi.New("swe_testtoken", 10, 64, 1000)
	srv := httptest.NewServer(api)
	defer srv.Close()
	startAgent(t, srv.URL, "tput-a")
	startAgent(t, srv.URL, "tput-b")
	var a, b string
	waitFor(t, "both agents to report a throughput address", 10*time.Second, func() bool {
		ids := api.AgentIDs()
		a, b = ids["tput-a"], ids["tput-b"]
		return a != "" && b != "" && api.ThroughputAddress(a) != "" && api.ThroughputAddress(b) != ""
	})
	const seconds = 2
	for i, proto := range []string{"tcp", "udp"} {
		id := fmt.Sprintf("00000000-0000-4000-8000-%012d", i+1)
		// Config polls every second: both agents know of it well before it starts.
		api.Schedule(fakeapi.Experiment{ID: id, InitiatorID: a, ResponderID: b, Proto: proto,
			StartAt: time.Now().Add(3 * time.Second), DurationS: seconds, Streams: 2, UDPRateBitsPerS: 20e6,
			UDPDatagramBytes: 1200, Token: "c2VjcmV0LXRva2VuLW9mLTMyLWJ5dGVzLWZvci10ZXN0"})
		rows := func() []fakeapi.ThroughputRow {
			var out []fakeapi.ThroughputRow
			for _, r := range api.ThroughputRows() {
				if r.ExperimentID == id {
					out = append(out, r)
				}
			}
			return out
		}
		waitFor(t, proto+" samples of both directions", 30*time.Second, func() bool { return len(rows()) == 2*seconds })
		got := map[[2]string]int{}
		var sum float64
		for _, r := range rows() {
			got[[2]string{r.Src, r.Peer}]++
			if r.Direction != "receive" || r.Proto != proto || r.BytesPerS <= 0 {
				t.Fatalf("%s: row %+v", proto, r)
			}
			if (proto == "udp") != (r.LossRatio != nil && r.JitterUS != nil) {
				t.Fatalf("%s: loss and jitter are for UDP only: %+v", proto, r)
			}
			sum += r.BytesPerS
		}
		// Loose below: a loaded host delays the pacer (which catches up, so the mean holds
		// better than any one second); a pacing bug is far off either way.
		if mean := sum / (2 * seconds); proto == "udp" && (mean < 0.5*20e6/8 || mean > 1.1*20e6/8) {
			t.Fatalf("udp at 20 Mbit/s offered: %.4g bytes/s received on average", mean)
		}
		if got[[2]string{b, a}] != seconds || got[[2]string{a, b}] != seconds {
			t.Fatalf("%s: rows per (receiver, sender) %v, want %d each way", proto, got, seconds)
		}
	}
}

// reportedThroughputAddress waits for the agent to report a throughput address to the API.
func reportedThroughputAddress(t *testing.T, api *fakeapi.Server, name string) string {
	t.Helper()
	var addr string
	waitFor(t, name+" to report a throughput address", 10*time.Second, func() bool {
		addr = api.ThroughputAddress(api.AgentIDs()[name])
		return addr != ""
	})
	return addr
}

// answersAsTheProbe dials addr and reads the 32-byte nonce the throughput probe sends on
// every connection it accepts.
func answersAsTheProbe(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = io.ReadFull(c, make([]byte, 32))
	return err
}

func TestTheThroughputAddressReportedIsWhereTheProbeListens(t *testing.T) {
	for _, tc := range []struct {
		name     string
		listen   string // throughput.listen
		wantHost string
	}{
		// The mesh advertises another host (a proxy in front of the echo listener): the probe,
		// bound to one address of its own, is reached there.
		{"its own listen address when bound elsewhere than the mesh host", "127.0.0.1:0", "127.0.0.1"},
		{"the mesh host when bound to it", "127.0.0.2:0", "127.0.0.2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := fakeapi.New("swe_testtoken", 10, 64, 1000)
			srv := httptest.NewServer(api)
			defer srv.Close()
			startAgentWith(t, srv.URL, "tput-addr", func(c *config.Config) {
				c.Mesh.Advertise = "127.0.0.2:7301"
				c.Throughput.Listen = tc.listen
			})
			addr := reportedThroughputAddress(t, api, "tput-addr")
			if host, _, _ := net.SplitHostPort(addr); host != tc.wantHost {
				t.Fatalf("reported %q, want host %s", addr, tc.wantHost)
			}
			if err := answersAsTheProbe(addr); err != nil {
				t.Fatalf("the reported throughput address %s does not reach the probe: %v", addr, err)
			}
		})
	}
	t.Run("the configured advertise address as is", func(t *testing.T) {
		api := fakeapi.New("swe_testtoken", 10, 64, 1000)
		srv := httptest.NewServer(api)
		defer srv.Close()
		startAgentWith(t, srv.URL, "tput-adv", func(c *config.Config) {
			c.Mesh.Advertise = "127.0.0.2:7301"
			c.Throughput.Advertise = "127.0.0.3:7999" // e.g. a relay in front of the probe
		})
		if addr := reportedThroughputAddress(t, api, "tput-adv"); addr != "127.0.0.3:7999" {
			t.Fatalf("reported %q, want the configured 127.0.0.3:7999", addr)
		}
	})
}

func TestAnAgentWhoseProbeIsOffClearsTheAddressItReportedBefore(t *testing.T) {
	api := fakeapi.New("swe_testtoken", 10, 64, 1000)
	srv := httptest.NewServer(api)
	defer srv.Close()
	state := t.TempDir()
	a := startAgentWith(t, srv.URL, "tput-off", func(c *config.Config) { c.StateDir = state })
	id := ""
	waitFor(t, "a throughput address", 10*time.Second, func() bool {
		id = api.AgentIDs()["tput-off"]
		return id != "" && api.ThroughputAddress(id) != ""
	})
	a.stop(t)
	// The same agent (same state) again, its probe off: the server must not keep scheduling
	// experiments to the old address.
	startAgentWith(t, srv.URL, "tput-off", func(c *config.Config) {
		c.StateDir = state
		c.Throughput.Listen = ""
	})
	waitFor(t, "the old throughput address to be cleared", 10*time.Second, func() bool {
		return api.ThroughputAddress(id) == ""
	})
	if got := api.AgentIDs()["tput-off"]; got != id {
		t.Fatalf("agent id %s after the restart, want %s", got, id)
	}
}

func TestTheMeshAddressesFollowTheConfigTheMetadataAndTheListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	at := func(host string) string { return net.JoinHostPort(host, port) }
	for _, tc := range []struct {
		name, listen, advertise, privateIP string
		wantAdvertised, wantSelf           string
	}{
		{"a listen IP is used as is", "127.0.0.2:0", "", "10.0.0.5", at("127.0.0.2"), at("127.0.0.2")},
		{"all interfaces: the private IP", "0.0.0.0:0", "", "127.0.0.3", at("127.0.0.3"), at("127.0.0.3")},
		{"all interfaces, IPv6: the private IP", "[::]:0", "", "127.0.0.3", at("127.0.0.3"), at("127.0.0.3")},
		{"no host, no private IP: loopback", ":0", "", "", at("127.0.0.1"), at("127.0.0.1")},
		{"a host name: the private IP", "localhost:0", "", "127.0.0.4", at("127.0.0.4"), at("127.0.0.4")},
		// The self-loop never dials the advertised address, which may hairpin through a NAT.
		{"configured: peers dial it, the self-loop does not", "0.0.0.0:0", "203.0.113.7:7300", "127.0.0.5",
			"203.0.113.7:7300", at("127.0.0.5")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Defaults()
			cfg.Mesh.Listen, cfg.Mesh.Advertise = tc.listen, tc.advertise
			md := client.Metadata{PrivateIP: tc.privateIP}
			advertised, self := meshAddresses(cfg, md, ln.Addr())
			if advertised != tc.wantAdvertised || self != tc.wantSelf {
				t.Fatalf("advertised %q, self-loop %q; want %q, %q", advertised, self, tc.wantAdvertised, tc.wantSelf)
			}
		})
	}
}

func TestTheThroughputAddressDefaultsFollowWhereTheProbeListens(t *testing.T) {
	ln := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7710}
	for _, tc := range []struct {
		listen, advertise, mesh, want string
	}{
		{":7710", "", "203.0.113.7:7300", "203.0.113.7:7710"},                             // all interfaces: the mesh's public IP
		{"0.0.0.0:7710", "", "203.0.113.7:7300", "203.0.113.7:7710"},                      // the same, spelt out
		{"[::]:7710", "", "203.0.113.7:7300", "203.0.113.7:7710"},                         // all interfaces, IPv6
		{"10.253.1.1:7710", "", "10.253.1.1:7301", "10.253.1.1:7710"},                     // the mesh host itself
		{"127.0.0.1:7710", "", "10.253.1.1:7301", "127.0.0.1:7710"},                       // elsewhere: its own address
		{"localhost:7710", "", "10.253.1.1:7301", "localhost:7710"},                       // a host name, as written
		{"127.0.0.1:7710", "relay.example:9000", "10.253.1.1:7301", "relay.example:9000"}, // configured
	} {
		cfg := config.Defaults()
		cfg.Throughput.Listen, cfg.Throughput.Advertise = tc.listen, tc.advertise
		if got := ThroughputAddress(cfg, tc.mesh, ln); got != tc.want {
			t.Errorf("listen %q, advertise %q, mesh %q: %q, want %q", tc.listen, tc.advertise, tc.mesh, got, tc.want)
		}
	}
}

func TestAnAgentReEnrolledOnARefusedTokenStillReportsItsThroughputAddress(t *testing.T) {
	api := fakeapi.New("swe_testtoken", 10, 64, 1000)
	srv := httptest.NewServer(api)
	defer srv.Close()
	state := t.TempDir()
	// A saved token the API does not know (revoked, or the agent deleted).
	if err := SaveState(state, State{AgentID: "00000000-0000-4000-8000-00000000dead", AgentToken: "swa_revoked", APIURL: srv.URL}); err != nil {
		t.Fatal(err)
	}
	startAgentWith(t, srv.URL, "tput-reenrolled", func(c *config.Config) { c.StateDir = state })
	addr := reportedThroughputAddress(t, api, "tput-reenrolled")
	if err := answersAsTheProbe(addr); err != nil {
		t.Fatalf("the reported throughput address %s does not reach the probe: %v", addr, err)
	}
}

func TestALoopbackMeshAddressIsFlaggedOnlyWhenTheAPIIsElsewhere(t *testing.T) {
	tests := []struct {
		mesh, api string
		warn      bool
	}{
		{"127.0.0.1:7301", "https://stormwatch.example.com", true},
		{"[::1]:7301", "https://10.0.0.2:8000", true},
		{"localhost:7301", "https://10.0.0.2:8000", true},
		{"127.0.0.1:7301", "http://127.0.0.1:8000", false},
		{"127.0.0.1:7301", "http://[::1]:8000", false},
		{"127.0.0.1:7301", "http://localhost:8000", false},
		{"10.0.0.5:7301", "https://stormwatch.example.com", false},
	}
	for _, tc := range tests {
		if got := loopbackHost(tc.mesh) && !loopbackURL(tc.api); got != tc.warn {
			t.Errorf("mesh %s, api %s: warn %v, want %v", tc.mesh, tc.api, got, tc.warn)
		}
	}
}

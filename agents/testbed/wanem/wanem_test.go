package wanem

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"stormwatch/agents/internal/testutil"
)

// echoServer answers every byte it receives on a real loopback socket.
func echoServer(t testing.TB) string {
	return testutil.ServeTCP(t, func(c net.Conn) { _, _ = io.Copy(c, c) })
}

func startProxy(t testing.TB, p *Proxy) string {
	t.Helper()
	if err := p.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return p.Addr().String()
}

func fixed(up, down *Link) Chooser {
	return func(context.Context, []byte) (*Link, *Link, error) { return up, down, nil }
}

// roundTrips sends n small messages one at a time and returns each round trip.
func roundTrips(t testing.TB, addr string, n int, msg []byte) []time.Duration {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, len(msg))
	out := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		t0 := time.Now()
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			t.Fatal(err)
		}
		out = append(out, time.Since(t0))
	}
	return out
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func TestTheProxyAddsEachDirectionsDelayToTheRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name     string
		up, down time.Duration
	}{
		{"symmetric 10 ms", 5 * time.Millisecond, 5 * time.Millisecond},
		{"asymmetric 30 ms", 20 * time.Millisecond, 10 * time.Millisecond},
		{"cross-AZ 0.8 ms", 400 * time.Microsecond, 400 * time.Microsecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := startProxy(t, &Proxy{Upstream: echoServer(t), Choose: fixed(NewLink(tc.up, 1), NewLink(tc.down, 2))})
			rtts := roundTrips(t, addr, 40, []byte("ping-ping-ping"))
			want := tc.up + tc.down
			got := median(rtts)
			if got > want+want/10+3*time.Millisecond {
				t.Fatalf("median round trip %v, want %v (+10%% and 3 ms of scheduling on a loaded machine)", got, want)
			}
			// Never early: a late wake-up adds to a round trip, nothing takes from it.
			for _, r := range rtts {
				if r < want {
					t.Fatalf("a round trip of %v, under the emulated %v", r, want)
				}
			}
		})
	}
}

func TestJitterOnlyAddsToTheBaseDelayWithTheMedianJustAboveIt(t *testing.T) {
	l := NewLink(50*time.Millisecond, 7)
	l.JitterFrac = 0.05
	now := time.Now()
	var d []time.Duration
	for i := 0; i < 20001; i++ {
		d = append(d, l.Delay(now))
	}
	s := slices.Clone(d)
	slices.Sort(s)
	if s[0] < 50*time.Millisecond {
		t.Fatalf("a delay of %v, under the base 50 ms: jitter took delay away", s[0])
	}
	// Half-normal with σ = 2.5 ms: median 0.674 σ = 1.69 ms above the floor, p95 1.96 σ.
	if m := median(d); (m - 51686*time.Microsecond).Abs() > 150*time.Microsecond {
		t.Fatalf("median %v, want 51.69 ms (the floor plus 0.674 σ)", m)
	}
	if p95 := s[len(s)*19/20]; (p95 - 54900*time.Microsecond).Abs() > 300*time.Microsecond {
		t.Fatalf("p95 %v, want 54.9 ms (the floor plus 1.96 σ)", p95)
	}
}

func TestSpikesAreRareAndTensToHundredsOfTimesTheRoundTripUpToTheCap(t *testing.T) {
	l := NewLink(100*time.Microsecond, 3) // a 0.2 ms round trip
	l.SpikeProb, l.SpikeMinX, l.SpikeMaxX, l.SpikeCap = 0.001, 20, 300, 50*time.Millisecond
	now := time.Now()
	spikes, n := 0, 200000
	for i := 0; i < n; i++ {
		d := l.Delay(now)
		if d > time.Millisecond {
			spikes++
			extra := d - 100*time.Microsecond
			if extra < 4*time.Millisecond || extra > 50*time.Millisecond {
				t.Fatalf("spike of %v outside 20x..300x of 0.2 ms capped at 50 ms", extra)
			}
		}
	}
	if spikes < 140 || spikes > 260 { // 200 expected; 5 sigma either side
		t.Fatalf("%d spikes in %d chunks, want about 200", spikes, n)
	}
	l.SpikeCap = 10 * time.Millisecond
	for i := 0; i < 20000; i++ {
		if d := l.Delay(now); d > 10*time.Millisecond+100*time.Microsecond {
			t.Fatalf("a spike of %v passed the 10 ms cap", d)
		}
	}
}

func TestAStepChangesTheLevelFromItsTimeOn(t *testing.T) {
	start := time.Now()
	l := NewLink(10*time.Millisecond, 1)
	l.AddStep(Step{At: start.Add(time.Minute), Delta: 3 * time.Millisecond})
	if got := l.Level(start); got != 10*time.Millisecond {
		t.Fatalf("level before the step %v", got)
	}
	if got := l.Level(start.Add(2 * time.Minute)); got != 13*time.Millisecond {
		t.Fatalf("level after the step %v", got)
	}
	// Through a proxy: a step already begun shows in the measured round trip, against the
	// same path without it measured beside it (a loaded machine lengthens both alike).
	up := NewLink(5*time.Millisecond, 1)
	up.AddStep(Step{At: start.Add(-time.Second), Delta: 5 * time.Millisecond})
	echo := echoServer(t)
	stepped := startProxy(t, &Proxy{Upstream: echo, Choose: fixed(up, NewLink(5*time.Millisecond, 2))})
	plain := startProxy(t, &Proxy{Upstream: echo, Choose: fixed(NewLink(5*time.Millisecond, 3), NewLink(5*time.Millisecond, 4))})
	var withStep, without []time.Duration
	for i := 0; i < 5; i++ {
		withStep = append(withStep, roundTrips(t, stepped, 4, []byte("x"))...)
		without = append(without, roundTrips(t, plain, 4, []byte("x"))...)
	}
	m, base := median(withStep), median(without)
	if m < 14*time.Millisecond || m-base < 3*time.Millisecond || m-base > 7*time.Millisecond {
		t.Fatalf("median round trip after a 5 ms step on a 10 ms path: %v, %v without the step", m, base)
	}
}

func TestBandwidthLimitsTheTransferOfALargeObject(t *testing.T) {
	for _, mbit := range []float64{40, 160} {
		t.Run(fmt.Sprintf("%.0f Mbit/s", mbit), func(t *testing.T) {
			up := NewLink(time.Millisecond, 1)
			up.BytesPerS = mbit * 1e6 / 8
			addr := startProxy(t, &Proxy{Upstream: echoServer(t), Choose: fixed(up, NewLink(time.Millisecond, 2))})
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			size := 2 << 20
			t0 := time.Now()
			go func() { _, _ = c.Write(make([]byte, size)) }()
			if _, err := io.ReadFull(c, make([]byte, size)); err != nil {
				t.Fatal(err)
			}
			took := time.Since(t0)
			want := time.Duration(float64(size) / up.BytesPerS * float64(time.Second))
			if took < want || took > 2*want+100*time.Millisecond {
				t.Fatalf("2 MiB at %.0f Mbit/s took %v, want about %v", mbit, took, want)
			}
		})
	}
}

func TestTheProxyPassesAHalfCloseOn(t *testing.T) {
	addr := startProxy(t, &Proxy{Upstream: echoServer(t), Choose: fixed(NewLink(time.Millisecond, 1), NewLink(time.Millisecond, 2))})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = c.Write([]byte("last words"))
	_ = c.(*net.TCPConn).CloseWrite()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "last words" {
		t.Fatalf("read %q, %v: want the echo then EOF", got, err)
	}
}

// meshFrame is a frame header as the agent's mesh writes it, with a payload.
func meshFrame(sender [16]byte, payload int) []byte {
	b := make([]byte, meshHeaderLen+payload)
	binary.BigEndian.PutUint32(b[0:4], meshMagic)
	binary.BigEndian.PutUint32(b[4:8], uint32(payload))
	binary.BigEndian.PutUint64(b[8:16], 1)
	copy(b[16:32], sender[:])
	return b
}

func TestTheEmulatorDelaysEachMeshSenderByItsRegionsRoundTrip(t *testing.T) {
	table, err := DefaultTable()
	if err != nil {
		t.Fatal(err)
	}
	// A real HTTP server answering GET /api/v1/agents as the Stormwatch API does.
	ids := map[string]Site{
		"0b9f6f7e-3c1a-4d52-9a1e-1f2d3c4b5a60": {Provider: "aws", Region: "ap-south-1", Zone: "ap-south-1a"},
		"7c1e2d3f-4a5b-4c6d-8e9f-a0b1c2d3e4f5": {Provider: "gcp", Region: "asia-southeast1", Zone: "asia-southeast1-a"},
	}
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/agents" || r.Header.Get("Authorization") != "Bearer swk_test" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		var out []map[string]string
		for id, s := range ids {
			out = append(out, map[string]string{"id": id, "provider": s.Provider, "region": s.Region, "zone": s.Zone})
		}
		_ = json.NewEncoder(w).Encode(out)
	}))
	defer api.Close()
	cfg := Config{Seed: 1, Mesh: []MeshRoute{{Name: "dst", Listen: "127.0.0.1:0", Upstream: echoServer(t),
		Site: Site{Provider: "gcp", Region: "asia-southeast1", Zone: "asia-southeast1-b"}}}}
	em := New(cfg, table, &APIResolver{URL: api.URL, APIKey: "swk_test"}, nil)
	st, err := em.Listen()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = em.Serve(ctx) }()
	for id, want := range map[string]time.Duration{
		"0b9f6f7e-3c1a-4d52-9a1e-1f2d3c4b5a60": 60 * time.Millisecond,  // Mumbai -> Singapore
		"7c1e2d3f-4a5b-4c6d-8e9f-a0b1c2d3e4f5": 800 * time.Microsecond, // cross-AZ in Singapore
	} {
		var sender [16]byte
		b, _ := hex.DecodeString(strings.ReplaceAll(id, "-", ""))
		copy(sender[:], b)
		frame := meshFrame(sender, 64)
		m := median(roundTrips(t, st.Mesh["dst"], 15, frame))
		if m < want-want/20 || m > want+want/10+3*time.Millisecond {
			t.Errorf("sender %s: median round trip %v, want %v", id, m, want)
		}
	}
	// A sender the API does not know gets no path: the connection is closed.
	c, err := net.Dial("tcp", st.Mesh["dst"])
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = c.Write(meshFrame([16]byte{1}, 8))
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := c.Read(make([]byte, 8)); err == nil {
		t.Fatalf("an unknown sender got %d bytes back", n)
	}
}

func senderID(id string) [16]byte {
	var sender [16]byte
	b, _ := hex.DecodeString(strings.ReplaceAll(id, "-", ""))
	copy(sender[:], b)
	return sender
}

func TestARegionPairWithNoTableRowPassesThroughWithoutDelay(t *testing.T) {
	table, err := DefaultTable()
	if err != nil {
		t.Fatal(err)
	}
	const (
		known   = "0b9f6f7e-3c1a-4d52-9a1e-1f2d3c4b5a60" // aws/ap-south-1: 60 ms to Singapore
		unknown = "5d0c7a1e-2b3f-4c4d-9e5f-60718293a4b5" // azure/westeurope: no row in the table
	)
	ids := map[string]Site{
		known:   {Provider: "aws", Region: "ap-south-1", Zone: "ap-south-1a"},
		unknown: {Provider: "azure", Region: "westeurope", Zone: "westeurope-1"},
	}
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var out []map[string]string
		for id, s := range ids {
			out = append(out, map[string]string{"id": id, "provider": s.Provider, "region": s.Region, "zone": s.Zone})
		}
		_ = json.NewEncoder(w).Encode(out)
	}))
	defer api.Close()
	echo := echoServer(t)
	logs := &testutil.LogBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cfg := Config{Seed: 1, JitterFrac: 0.01, Spike: SpikeConfig{Prob: 0.001, MinX: 20, MaxX: 300, CapMs: 600},
		Mesh: []MeshRoute{{Name: "dst", Listen: "127.0.0.1:0", Upstream: echo,
			Site: Site{Provider: "gcp", Region: "asia-southeast1", Zone: "asia-southeast1-b"}}}}
	em := New(cfg, table, &APIResolver{URL: api.URL}, log)
	st, err := em.Listen()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = em.Serve(ctx) }()

	// Both sides of the comparison carry a mesh frame of the same size over real sockets.
	frame := meshFrame(senderID(unknown), 64)
	direct := median(roundTrips(t, echo, 30, frame))
	// Two connections of the unknown pair: both pass, and the pair is logged once.
	for i := 0; i < 2; i++ {
		via := median(roundTrips(t, st.Mesh["dst"], 30, frame))
		// The proxy's own cost is tens of microseconds; the smallest delay the table could
		// add is the 0.25 ms of one zone, its cross-region rows tens of ms. 20 ms is room
		// for a loaded machine, far below any inter-region row.
		if via > direct+20*time.Millisecond {
			t.Fatalf("connection %d of a pair without a row: median round trip %v, direct %v", i+1, via, direct)
		}
	}
	want := 60 * time.Millisecond
	if m := median(roundTrips(t, st.Mesh["dst"], 15, meshFrame(senderID(known), 64))); m < want-want/20 || m > want+want/10+3*time.Millisecond {
		t.Fatalf("a pair with a row: median round trip %v, want its %v", m, want)
	}
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(l), &rec) == nil && strings.Contains(fmt.Sprint(rec["msg"]), "no round trip") {
			lines = append(lines, rec)
		}
	}
	if len(lines) != 1 || lines[0]["level"] != "INFO" {
		t.Fatalf("want one info line for the pair without a row, got %v (log: %s)", lines, logs.String())
	}
	if fmt.Sprint(lines[0]["src"]) != "azure/westeurope" || fmt.Sprint(lines[0]["dst"]) != "gcp/asia-southeast1" {
		t.Fatalf("the line does not name the pair: %v", lines[0])
	}
}

func TestEveryRegionPairOfTheDefaultTableHasARoundTripAndASource(t *testing.T) {
	table, err := DefaultTable()
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range table.Regions {
		for _, b := range table.Regions[i+1:] {
			if d, ok := table.RTT(a.Key, b.Key); !ok || d <= 0 {
				t.Errorf("no round trip for %s - %s", a.Key, b.Key)
			}
		}
	}
	for _, p := range table.Pairs {
		if strings.TrimSpace(p.Source) == "" {
			t.Errorf("%s - %s has no source", p.A, p.B)
		}
	}
}

func TestStepsPickDistinctRegionPairsWithinTheirWindow(t *testing.T) {
	routes := []MeshRoute{{Site: Site{"aws", "a", "a1"}}, {Site: Site{"aws", "b", "b1"}}, {Site: Site{"gcp", "c", "c1"}}, {Site: Site{"gcp", "d", "d1"}}}
	// Only the pairs of at least 150 ms may step: a-b is too short to.
	rtt := func(x, y string) (time.Duration, bool) {
		if (x == "aws/a" && y == "aws/b") || (x == "aws/b" && y == "aws/a") {
			return 60 * time.Millisecond, true
		}
		return 200 * time.Millisecond, true
	}
	start := time.Now()
	for seed := uint64(1); seed < 20; seed++ {
		steps := PlanSteps(StepConfig{Pairs: 5, MinRTTMs: 150, MinMs: 3, MaxMs: 8, FirstAfterS: 60, SpreadS: 30}, routes, nil, rtt, start, seed)
		if len(steps) != 5 {
			t.Fatalf("%d steps, want the 5 pairs of at least 150 ms", len(steps))
		}
		for _, s := range steps {
			if s.A == "aws/a" && s.B == "aws/b" {
				t.Fatalf("a 60 ms pair stepped: %+v", s)
			}
		}
	}
	steps := PlanSteps(StepConfig{Pairs: 2, MinRTTMs: 150, MinMs: 3, MaxMs: 8, FirstAfterS: 60, SpreadS: 30}, routes, nil, rtt, start, 9)
	if len(steps) != 2 || (steps[0].A == steps[1].A && steps[0].B == steps[1].B) {
		t.Fatalf("steps %+v: want two distinct pairs", steps)
	}
	for _, s := range steps {
		if s.At.Before(start.Add(60*time.Second)) || s.At.After(start.Add(90*time.Second)) || s.DeltaMs < 3 || s.DeltaMs > 8 {
			t.Fatalf("step %+v outside 60-90 s and 3-8 ms", s)
		}
	}
}

// BenchmarkProxyAddedLatency measures what the emulator itself adds to a round trip on
// loopback (zero-delay links): the figure docs/demo.md quotes.
func BenchmarkProxyAddedLatency(b *testing.B) {
	echo := echoServer(b)
	direct := median(roundTrips(b, echo, 2000, make([]byte, 1024)))
	addr := startProxy(b, &Proxy{Upstream: echo, Choose: fixed(NewLink(0, 1), NewLink(0, 2))})
	b.ResetTimer()
	via := median(roundTrips(b, addr, max(b.N, 2000), make([]byte, 1024)))
	b.ReportMetric(float64(direct.Microseconds()), "direct-p50-us")
	b.ReportMetric(float64(via.Microseconds()), "proxied-p50-us")
	b.ReportMetric(float64((via - direct).Microseconds()), "added-p50-us")
}

func TestAnEmulatorInFrontOfOneAgentStepsPairsWithTheTablesOtherRegions(t *testing.T) {
	table, err := DefaultTable()
	if err != nil {
		t.Fatal(err)
	}
	routes := []MeshRoute{{Name: "only", Site: Site{"aws", "eu-west-1", "eu-west-1a"}}}
	start := time.Now()
	steps := PlanSteps(StepConfig{Pairs: 2, MinRTTMs: 150, MinMs: 3, MaxMs: 8, SpreadS: 30}, routes, table.RegionKeys(), table.RTT, start, 5)
	if len(steps) != 2 {
		t.Fatalf("%d steps, want 2 pairs of the route's region with the table's other regions", len(steps))
	}
	for _, s := range steps {
		if s.A != "aws/eu-west-1" && s.B != "aws/eu-west-1" {
			t.Fatalf("step %+v does not touch the route's region, so no path through this emulator moves", s)
		}
		if d, _ := table.RTT(s.A, s.B); d < 150*time.Millisecond {
			t.Fatalf("step %+v on a pair under 150 ms", s)
		}
	}
	// Pairs among the routes' own regions still come first.
	two := append(routes, MeshRoute{Name: "far", Site: Site{"aws", "ap-northeast-2", "ap-northeast-2a"}})
	first := PlanSteps(StepConfig{Pairs: 1, MinRTTMs: 150, MinMs: 3, MaxMs: 8}, two, table.RegionKeys(), table.RTT, start, 5)
	if len(first) != 1 || first[0].A != "aws/ap-northeast-2" || first[0].B != "aws/eu-west-1" {
		t.Fatalf("steps %+v: want the routes' own pair first", first)
	}
}

func TestADirectedStepMovesOnlyOneDirectionOfAPair(t *testing.T) {
	table, err := DefaultTable()
	if err != nil {
		t.Fatal(err)
	}
	mumbai := Site{Provider: "aws", Region: "ap-south-1", Zone: "ap-south-1a"}
	singapore := Site{Provider: "gcp", Region: "asia-southeast1", Zone: "asia-southeast1-a"}
	ids := map[[16]byte]Site{senderID("0b9f6f7e-3c1a-4d52-9a1e-1f2d3c4b5a60"): mumbai,
		senderID("7c1e2d3f-4a5b-4c6d-8e9f-a0b1c2d3e4f5"): singapore}
	steps := StepConfig{Directed: []DirectedStep{{From: "aws/ap-south-1", To: "gcp/asia-southeast1", DeltaMs: 20}}}
	if err := steps.Check(table); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Seed: 1, Steps: steps, Mesh: []MeshRoute{
		{Name: "mumbai", Listen: "127.0.0.1:0", Upstream: echoServer(t), Site: mumbai},
		{Name: "singapore", Listen: "127.0.0.1:0", Upstream: echoServer(t), Site: singapore}}}
	em := New(cfg, table, staticResolver(ids), nil)
	if got := em.Steps(); len(got) != 1 || !got[0].Directed || got[0].A != "aws/ap-south-1" {
		t.Fatalf("step schedule %+v, want the one directed step", got)
	}
	st, err := em.Listen()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = em.Serve(ctx) }()
	// Mumbai to Singapore is 60 ms in the table: Mumbai's agents now measure 80 ms, while
	// Singapore's agents still measure 60 ms to Mumbai.
	for _, tc := range []struct {
		sender string
		route  string
		want   time.Duration
	}{
		{"0b9f6f7e-3c1a-4d52-9a1e-1f2d3c4b5a60", "singapore", 80 * time.Millisecond},
		{"7c1e2d3f-4a5b-4c6d-8e9f-a0b1c2d3e4f5", "mumbai", 60 * time.Millisecond},
	} {
		m := median(roundTrips(t, st.Mesh[tc.route], 15, meshFrame(senderID(tc.sender), 64)))
		if m < tc.want-tc.want/20 || m > tc.want+tc.want/20+3*time.Millisecond {
			t.Errorf("sender %s to %s: median round trip %v, want %v", tc.sender, tc.route, m, tc.want)
		}
	}
	bad := StepConfig{Directed: []DirectedStep{{From: "aws/ap-south-1", To: "azure/westeurope", DeltaMs: 5}}}
	if err := bad.Check(table); err == nil || !strings.Contains(err.Error(), "azure/westeurope") {
		t.Fatalf("a directed step to a region without a table row: %v, want an error naming it", err)
	}
}

type staticResolver map[[16]byte]Site

func (r staticResolver) Resolve(_ context.Context, sender [16]byte) (Site, error) {
	if s, ok := r[sender]; ok {
		return s, nil
	}
	return Site{}, fmt.Errorf("unknown mesh sender %x", sender)
}

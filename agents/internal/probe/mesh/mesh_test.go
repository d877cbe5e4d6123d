package mesh

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"testing"
	"time"
	"unsafe"

	"stormwatch/agents/internal/sample"
	"stormwatch/agents/internal/testutil"
)

// flat is a decoded mesh sample for assertions.
type flat struct {
	peer   string
	sent   time.Time
	round  uint64
	rttUS  uint32
	status sample.Status
}

type flatQ struct {
	group     string
	round     uint64
	k, n      int
	latencyUS uint32
	status    sample.Status
}

// collector drains a recorder into decoded samples.
type collector struct {
	mu  sync.Mutex
	rec *Recorder
	m   []flat
	q   []flatQ
}

func (c *collector) drain() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, b := range c.rec.TakeMesh() {
		for _, s := range b.Mesh {
			c.m = append(c.m, flat{b.Peers[s.Peer], time.UnixMicro(b.BaseTimeUS + int64(s.TimeOffUS)),
				b.BaseRound + uint64(int64(s.RoundDelta)), s.RTTUS, s.Status})
		}
		for _, s := range b.Quorum {
			c.q = append(c.q, flatQ{b.Groups[s.Group], b.BaseRound + uint64(int64(s.RoundDelta)), int(s.K), int(s.N), s.LatencyUS, s.Status})
		}
	}
}

// waitFor polls cond until it holds or the deadline passes.
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

// sendMode is the mode of agents started by startAgent.
var sendMode = Spread

type testAgent struct {
	id     string
	srv    *EchoServer
	prober *Prober
	col    *collector
	cancel context.CancelFunc
	done   sync.WaitGroup
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func startEcho(t *testing.T, addr string) *EchoServer {
	t.Helper()
	var srv *EchoServer
	var err error
	// A port just released can take a moment to be free again.
	waitFor(t, "listen on "+addr, 5*time.Second, func() bool {
		srv, err = Listen(addr, quietLogger())
		return err == nil
	})
	return srv
}

func startAgent(t *testing.T, id string, addr string) *testAgent {
	t.Helper()
	rec := NewRecorder()
	a := &testAgent{id: id, srv: startEcho(t, addr), col: &collector{rec: rec}}
	a.srv.SetID(id) // signs its echoes as the agent does once enrolled
	a.prober = NewProber(id, rec, quietLogger())
	a.prober.SetSendMode(sendMode)
	ctx, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	a.done.Add(2)
	go func() { defer a.done.Done(); _ = a.srv.Serve(ctx) }()
	go func() { defer a.done.Done(); _ = a.prober.Run(ctx) }()
	return a
}

func (a *testAgent) stop() {
	a.cancel()
	a.done.Wait()
}

func settings(rate float64, payload int, timeout time.Duration, peers []Peer, groups []Group) Settings {
	return Settings{Enabled: true, RateHz: rate, PayloadBytes: payload, Timeout: timeout, Peers: peers, Groups: groups}
}

func meshOf(t *testing.T, n int, rate float64, payload int, timeout time.Duration, groups func([]Peer) []Group) ([]*testAgent, []Peer) {
	t.Helper()
	var agents []*testAgent
	var peers []Peer
	for i := range n {
		id := fmt.Sprintf("00000000-0000-4000-8000-00000000000%d", i+1)
		a := startAgent(t, id, "127.0.0.1:0")
		agents = append(agents, a)
		peers = append(peers, Peer{ID: id, Name: fmt.Sprintf("agent-%d", i+1), Address: a.srv.Addr().String()})
	}
	var gs []Group
	if groups != nil {
		gs = groups(peers)
	}
	for _, a := range agents {
		a.prober.Apply(settings(rate, payload, timeout, peers, gs))
	}
	t.Cleanup(func() {
		for _, a := range agents {
			a.stop()
		}
	})
	return agents, peers
}

func (c *collector) count(pred func(flat) bool) int {
	c.drain()
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, s := range c.m {
		if pred(s) {
			n++
		}
	}
	return n
}

func TestASampleFitsInSixteenBytes(t *testing.T) {
	if got := unsafe.Sizeof(sample.Mesh{}); got > 16 {
		t.Fatalf("sample.Mesh is %d bytes, want at most 16", got)
	}
	if got := unsafe.Sizeof(sample.Quorum{}); got > 16 {
		t.Fatalf("sample.Quorum is %d bytes, want at most 16", got)
	}
}

func TestThreeAgentsMeasureAllNineOrderedPairsIncludingSelf(t *testing.T) {
	for _, mode := range []struct {
		name string
		m    SendMode
	}{{"spread", Spread}, {"broadcast", Broadcast}} {
		t.Run(mode.name, func(t *testing.T) {
			sendMode = mode.m
			defer func() { sendMode = Spread }()
			agents, peers := meshOf(t, 3, 50, 1024, 500*time.Millisecond, nil)
			for _, a := range agents {
				for _, p := range peers {
					waitFor(t, fmt.Sprintf("ok samples %s->%s", a.id, p.ID), 10*time.Second, func() bool {
						return a.col.count(func(s flat) bool { return s.peer == p.ID && s.status == sample.StatusOK && s.rttUS > 0 }) >= 10
					})
				}
			}
			// Every round a sender reaches yields one sample per peer, never two.
			for _, a := range agents {
				a.col.mu.Lock()
				seen := map[string]bool{}
				for _, s := range a.col.m {
					key := fmt.Sprintf("%s/%d", s.peer, s.round)
					if seen[key] {
						t.Fatalf("%s recorded two samples for %s", a.id, key)
					}
					seen[key] = true
				}
				a.col.mu.Unlock()
			}
		})
	}
}

func TestAKilledAgentYieldsLossSamplesWithinTheTimeoutAndRecoversAfterRestart(t *testing.T) {
	const timeout = time.Second
	agents, peers := meshOf(t, 3, 50, 256, timeout, nil)
	victim := agents[2]
	vid := peers[2].ID
	addr := peers[2].Address
	waitFor(t, "mesh up", 10*time.Second, func() bool {
		return agents[0].col.count(func(s flat) bool { return s.peer == vid && s.status == sample.StatusOK }) > 5
	})
	victim.stop()
	killed := time.Now()
	var firstLoss time.Time
	// Which loss the first round records is a race with the kernel: a round in flight when the
	// peer's socket closes times out (1) or is reset (3), one sent after finds the port closed
	// (2); a loaded machine (make test under -race) gave no timeout at all in 5 s.
	lost := func(s flat) bool {
		return s.peer == vid && (s.status == sample.StatusTimeout || s.status == sample.StatusRefused ||
			s.status == sample.StatusError)
	}
	waitFor(t, "loss samples for the killed agent", 5*time.Second, func() bool {
		if agents[0].col.count(lost) > 0 {
			firstLoss = time.Now()
			return true
		}
		return false
	})
	// Polling adds a poll interval (and, on a loaded machine, some scheduling) to when the
	// loss was recorded.
	if d := firstLoss.Sub(killed); d > timeout+300*time.Millisecond {
		t.Fatalf("first loss sample %v after the kill, want within the %v timeout", d, timeout)
	}
	okBefore := agents[0].col.count(func(s flat) bool { return s.peer == vid && s.status == sample.StatusOK })
	restarted := startAgent(t, vid, addr)
	restarted.prober.Apply(settings(50, 256, timeout, peers, nil))
	defer restarted.stop()
	waitFor(t, "recovery after restart", 15*time.Second, func() bool {
		return agents[0].col.count(func(s flat) bool { return s.peer == vid && s.status == sample.StatusOK }) > okBefore+5
	})
}

// corruptingEcho echoes frames with one payload byte flipped.
func corruptingEcho(t *testing.T) string {
	return testutil.ServeTCP(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		buf := make([]byte, headerLen+64)
		for {
			if _, err := io.ReadFull(br, buf); err != nil {
				return
			}
			buf[headerLen+7] ^= 0xff
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	})
}

func TestACorruptedEchoIsRecordedAsCorrupt(t *testing.T) {
	addr := corruptingEcho(t)
	rec := NewRecorder()
	col := &collector{rec: rec}
	p := NewProber("00000000-0000-4000-8000-0000000000aa", rec, quietLogger())
	p.Apply(settings(50, 64, 500*time.Millisecond, []Peer{{ID: "bad", Name: "bad", Address: addr}}, nil))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitFor(t, "corrupt samples", 10*time.Second, func() bool {
		return col.count(func(s flat) bool { return s.status == sample.StatusCorrupt }) >= 5
	})
	if n := col.count(func(s flat) bool { return s.status == sample.StatusOK }); n != 0 {
		t.Fatalf("%d corrupted echoes were accepted as ok", n)
	}
}

func TestQuorumLatencyIsTheKthFastestReplyOfEachRound(t *testing.T) {
	tests := []struct {
		name string
		k    int
	}{{"majority", 2}, {"all", 3}, {"fastest", 1}}
	agents, _ := meshOf(t, 3, 50, 128, 500*time.Millisecond, func(ps []Peer) []Group {
		var gs []Group
		for _, tc := range tests {
			gs = append(gs, Group{Name: tc.name, K: tc.k, Members: []string{ps[0].ID, ps[1].ID, ps[2].ID}})
		}
		return gs
	})
	a := agents[0]
	waitFor(t, "quorum samples", 10*time.Second, func() bool {
		a.col.drain()
		a.col.mu.Lock()
		defer a.col.mu.Unlock()
		n := 0
		for _, q := range a.col.q {
			if q.status == sample.StatusOK {
				n++
			}
		}
		return n >= 30*len(tests)
	})
	a.col.mu.Lock()
	defer a.col.mu.Unlock()
	byRound := map[uint64][]uint32{}
	complete := map[uint64]int{}
	for _, s := range a.col.m {
		complete[s.round]++
		if s.status == sample.StatusOK {
			byRound[s.round] = append(byRound[s.round], s.rttUS)
		}
	}
	checked := 0
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, q := range a.col.q {
				if q.group != tc.name || complete[q.round] != 3 {
					continue
				}
				if q.k != tc.k || q.n != 3 {
					t.Fatalf("round %d: k=%d n=%d, want k=%d n=3", q.round, q.k, q.n, tc.k)
				}
				rtts := slices.Clone(byRound[q.round])
				slices.Sort(rtts)
				if len(rtts) < tc.k {
					if q.status != sample.StatusTimeout {
						t.Fatalf("round %d: %d replies for k=%d but status %v", q.round, len(rtts), tc.k, q.status)
					}
					continue
				}
				if q.status != sample.StatusOK || q.latencyUS != rtts[tc.k-1] {
					t.Fatalf("round %d: quorum %d us (%v), want the %d-th fastest of %v", q.round, q.latencyUS, q.status, tc.k, rtts)
				}
				checked++
			}
		})
	}
	if checked < 30 {
		t.Fatalf("only %d quorum samples checked", checked)
	}
}

func TestAQuorumIsNullWhenFewerThanKReplyArrive(t *testing.T) {
	rec := NewRecorder()
	clock := &roundClock{epoch: time.Now(), period: 10 * time.Millisecond, firstRound: 1}
	a, b, c := rec.PeerIndex("a"), rec.PeerIndex("b"), rec.PeerIndex("c")
	tr := newTracker([]Group{{Name: "g", K: 2, Members: []string{"a", "b", "c"}}},
		map[string]uint16{"a": a, "b": b, "c": c}, rec, clock, 64, 256)
	tr.report(a, 1, 300*time.Microsecond)
	tr.report(b, 1, -1)
	tr.report(c, 1, -1)
	tr.report(a, 2, 500*time.Microsecond)
	tr.report(c, 2, 200*time.Microsecond)
	tr.report(b, 2, 900*time.Microsecond)
	// A round one member was never sent (its link was not ready) has no quorum sample.
	tr.report(a, 3, 100*time.Microsecond)
	tr.report(b, 3, notAsked)
	tr.report(c, 3, 200*time.Microsecond)
	bs := rec.TakeMesh()
	var got []sample.Quorum
	for _, b := range bs {
		got = append(got, b.Quorum...)
	}
	if len(got) != 2 {
		t.Fatalf("got %d quorum samples, want 2 (none for the round not sent to every member)", len(got))
	}
	if got[0].Status != sample.StatusTimeout {
		t.Fatalf("round 1 with one reply: status %v, want timeout", got[0].Status)
	}
	if got[1].Status != sample.StatusOK || got[1].LatencyUS != 500 {
		t.Fatalf("round 2: %+v, want 500 us", got[1])
	}
}

func TestPeersAreAppliedWhileRunning(t *testing.T) {
	agents, peers := meshOf(t, 2, 50, 64, 500*time.Millisecond, nil)
	a := agents[0]
	a.prober.Apply(settings(50, 64, 500*time.Millisecond, peers[:1], nil))
	// The removed peer's messages in flight drain within the timeout; then nothing more.
	waitFor(t, "the removed peer's link to drain and close", 5*time.Second, func() bool { return a.prober.liveLinks() == 1 })
	mark := a.col.count(func(s flat) bool { return s.peer == peers[1].ID })
	self := a.col.count(func(s flat) bool { return s.peer == peers[0].ID })
	waitFor(t, "more self samples", 5*time.Second, func() bool {
		return a.col.count(func(s flat) bool { return s.peer == peers[0].ID }) > self+50
	})
	if n := a.col.count(func(s flat) bool { return s.peer == peers[1].ID }); n != mark {
		t.Fatalf("a removed peer still gets samples: %d -> %d", mark, n)
	}
	a.prober.Apply(settings(50, 64, 500*time.Millisecond, peers, nil))
	waitFor(t, "samples for the re-added peer", 5*time.Second, func() bool {
		return a.col.count(func(s flat) bool { return s.peer == peers[1].ID && s.status == sample.StatusOK }) > mark+5
	})
}

func TestDefaultGroupsAreZoneAndRegionMajorities(t *testing.T) {
	peers := []Peer{
		{ID: "a", Name: "a", Provider: "aws", Region: "r1", Zone: "z1"},
		{ID: "b", Name: "b", Provider: "aws", Region: "r1", Zone: "z1"},
		{ID: "c", Name: "c", Provider: "aws", Region: "r1", Zone: "z1"},
		{ID: "d", Name: "d", Provider: "aws", Region: "r1", Zone: "z2"},
		{ID: "e", Name: "e", Provider: "aws", Region: "r1", Zone: "z3"},
		{ID: "f", Name: "f", Provider: "aws", Region: "r2", Zone: "z9"},
	}
	gs := DefaultGroups("a", peers)
	if len(gs) != 2 {
		t.Fatalf("got %d groups", len(gs))
	}
	if gs[0].Name != "zone-majority" || gs[0].K != 2 || !slices.Equal(gs[0].Members, []string{"a", "b", "c"}) {
		t.Fatalf("zone group %+v", gs[0])
	}
	if gs[1].Name != "region-majority" || gs[1].K != 2 || !slices.Equal(gs[1].Members, []string{"a", "d", "e"}) {
		t.Fatalf("region group %+v", gs[1])
	}
}

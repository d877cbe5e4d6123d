package mesh

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"stormwatch/agents/internal/sample"
	"stormwatch/agents/internal/testutil"
)

// peerServer is a mesh peer with scripted behaviour: it reads frames of a known payload size,
// remembers which rounds each connection brought, and echoes them after delay, or never.
type peerServer struct {
	ln      net.Listener
	size    int
	delay   time.Duration
	silent  bool
	frames  atomic.Int64
	mu      sync.Mutex
	rounds  map[int][]uint64 // connection number -> rounds received, in order
	conns   int
	stopped chan struct{}
}

func startPeerServer(t *testing.T, size int, delay time.Duration, silent bool) *peerServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &peerServer{ln: ln, size: size, delay: delay, silent: silent, rounds: map[int][]uint64{}, stopped: make(chan struct{})}
	t.Cleanup(func() { close(s.stopped); ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns++
			n := s.conns
			s.mu.Unlock()
			go s.serve(c, n)
		}
	}()
	return s
}

func (s *peerServer) serve(c net.Conn, n int) {
	defer c.Close()
	type due struct {
		at    time.Time
		frame []byte
	}
	out := make(chan due, 1<<14)
	go func() {
		for d := range out {
			if s.silent {
				continue
			}
			select {
			case <-time.After(time.Until(d.at)): // the peer's scripted slowness
			case <-s.stopped:
				return
			}
			if _, err := c.Write(d.frame); err != nil {
				return
			}
		}
	}()
	defer close(out)
	for {
		f := make([]byte, headerLen+s.size)
		if _, err := io.ReadFull(c, f); err != nil {
			return
		}
		s.frames.Add(1)
		s.mu.Lock()
		// The round, without the bit that asks for the responder's id (this peer never signs).
		s.rounds[n] = append(s.rounds[n], binary.BigEndian.Uint64(f[8:16])&^askID)
		s.mu.Unlock()
		out <- due{time.Now().Add(s.delay), f}
	}
}

func (s *peerServer) received(conn int) []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]uint64(nil), s.rounds[conn]...)
}

// soloProber runs a prober with the given peers; its collector drains the recorder.
func soloProber(t *testing.T, id string) (*Prober, *collector) {
	t.Helper()
	rec := NewRecorder()
	p := NewProber(id, rec, quietLogger())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return p, &collector{rec: rec}
}

func TestAReplyBackAfterTheTimeoutIsALossNotALateOKSample(t *testing.T) {
	const timeout = 200 * time.Millisecond
	late := startPeerServer(t, 64, timeout+time.Millisecond, false)
	onTime := startPeerServer(t, 64, timeout-40*time.Millisecond, false)
	p, col := soloProber(t, "00000000-0000-4000-8000-0000000000a1")
	p.Apply(settings(20, 64, timeout, []Peer{
		{ID: "late", Name: "late", Address: late.ln.Addr().String()},
		{ID: "on-time", Name: "on-time", Address: onTime.ln.Addr().String()},
	}, nil))
	waitFor(t, "outcomes for 20 rounds of both peers", 10*time.Second, func() bool {
		return col.count(func(s flat) bool { return s.peer == "late" }) >= 20 &&
			col.count(func(s flat) bool { return s.peer == "on-time" && s.status == sample.StatusOK }) >= 20
	})
	if n := col.count(func(s flat) bool { return s.peer == "late" && s.status != sample.StatusTimeout }); n != 0 {
		t.Fatalf("%d replies back %v after the %v timeout were not recorded as losses", n, time.Millisecond, timeout)
	}
	if n := col.count(func(s flat) bool {
		return s.status == sample.StatusOK && time.Duration(s.rttUS)*time.Microsecond > timeout
	}); n != 0 {
		t.Fatalf("%d ok samples have an RTT above the timeout", n)
	}
}

func TestAPeerThatAcceptsButNeverEchoesYieldsLossSamplesWithinTheTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	silent := startPeerServer(t, 64, 0, true)
	p, col := soloProber(t, "00000000-0000-4000-8000-0000000000a2")
	p.Apply(settings(20, 64, timeout, []Peer{{ID: "silent", Name: "silent", Address: silent.ln.Addr().String()}}, nil))
	seenAt := map[uint64]time.Time{}
	var first time.Time
	waitFor(t, "loss samples for the first rounds sent", 10*time.Second, func() bool {
		col.drain()
		now := time.Now()
		col.mu.Lock()
		defer col.mu.Unlock()
		for _, s := range col.m {
			if _, ok := seenAt[s.round]; !ok {
				seenAt[s.round] = now
				if first.IsZero() || s.sent.Before(first) {
					first = s.sent
				}
			}
		}
		// The connection is reset after three timeouts without a reply, which ends what was in
		// flight on it at once; the rounds sent before that have only the timeout to go by.
		n := 0
		for _, s := range col.m {
			if s.sent.Before(first.Add(timeout)) {
				n++
			}
		}
		return !first.IsZero() && time.Since(first) > 2*timeout && n >= 4
	})
	if silent.frames.Load() == 0 {
		t.Fatal("the silent peer received nothing")
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	for _, s := range col.m {
		if !s.sent.Before(first.Add(timeout)) {
			continue
		}
		if s.status != sample.StatusTimeout {
			t.Fatalf("round %d: status %v, want a loss", s.round, s.status)
		}
		// Polling every 20 ms (and a loaded machine) adds to when the loss was seen.
		if d := seenAt[s.round].Sub(s.sent); d < timeout || d > timeout+300*time.Millisecond {
			t.Fatalf("round %d: loss recorded %v after the send, want right after the %v timeout", s.round, d, timeout)
		}
	}
}

func TestMessagesInFlightWhenALinkStopsStillGetTheirOutcome(t *testing.T) {
	const timeout = 500 * time.Millisecond
	for _, tc := range []struct {
		name   string
		change func(self, slow Peer) Settings
	}{
		{"the peer is removed", func(self, slow Peer) Settings { return settings(50, 64, timeout, []Peer{self}, nil) }},
		{"the rate changes", func(self, slow Peer) Settings { return settings(40, 64, timeout, []Peer{self, slow}, nil) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			slowSrv := startPeerServer(t, 64, 100*time.Millisecond, false)
			self := startEcho(t, "127.0.0.1:0")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() { _ = self.Serve(ctx) }()
			p, col := soloProber(t, "00000000-0000-4000-8000-0000000000a3")
			selfPeer := Peer{ID: "00000000-0000-4000-8000-0000000000a3", Name: "self", Address: self.Addr().String()}
			slow := Peer{ID: "slow", Name: "slow", Address: slowSrv.ln.Addr().String()}
			p.Apply(settings(50, 64, timeout, []Peer{selfPeer, slow}, nil))
			waitFor(t, "replies from the slow peer", 10*time.Second, func() bool {
				return col.count(func(s flat) bool { return s.peer == "slow" && s.status == sample.StatusOK }) >= 20
			})
			p.Apply(tc.change(selfPeer, slow))
			sentBefore := len(slowSrv.received(1))
			waitFor(t, "the old links to drain", 5*time.Second, func() bool {
				return p.liveLinks() == len(tc.change(selfPeer, slow).Peers)
			})
			got := map[uint64][]sample.Status{}
			col.drain()
			col.mu.Lock()
			for _, s := range col.m {
				if s.peer == "slow" {
					got[s.round] = append(got[s.round], s.status)
				}
			}
			col.mu.Unlock()
			rounds := slowSrv.received(1)
			if len(rounds) < sentBefore || len(rounds) < 20 {
				t.Fatalf("the slow peer received %d rounds on the first connection", len(rounds))
			}
			for _, r := range rounds {
				if st := got[r]; len(st) != 1 || st[0] != sample.StatusOK {
					t.Fatalf("round %d, received and echoed by the peer: outcomes %v, want one ok (%d rounds in all)", r, st, len(rounds))
				}
			}
		})
	}
}

func TestRecordingNeverHoldsUpSending(t *testing.T) {
	const timeout = 100 * time.Millisecond
	echo := startPeerServer(t, 64, 0, false)
	silent := startPeerServer(t, 64, 0, true)
	p, col := soloProber(t, "00000000-0000-4000-8000-0000000000a4")
	p.Apply(settings(50, 64, timeout, []Peer{
		{ID: "echo", Name: "echo", Address: echo.ln.Addr().String()},
		{ID: "silent", Name: "silent", Address: silent.ln.Addr().String()},
	}, nil))
	waitFor(t, "replies and losses being recorded", 10*time.Second, func() bool {
		return col.count(func(s flat) bool { return s.peer == "echo" && s.status == sample.StatusOK }) > 5 &&
			col.count(func(s flat) bool { return s.peer == "silent" && s.status == sample.StatusTimeout }) > 5
	})
	// Every path that records now blocks on the recorder: sending must go on regardless.
	const hold = 600 * time.Millisecond
	p.rec.mu.Lock()
	before := echo.frames.Load()
	start := time.Now()
	time.Sleep(hold) // the length of the stall being imposed, not a wait for an event
	sent := echo.frames.Load() - before
	held := time.Since(start)
	p.rec.mu.Unlock()
	if want := int64(0.7 * 50 * held.Seconds()); sent < want {
		t.Fatalf("%d messages sent in the %v the recorder was held, want at least %d", sent, held, want)
	}
	after := col.count(func(s flat) bool { return s.peer == "silent" && s.status == sample.StatusTimeout })
	waitFor(t, "losses recorded once the recorder is free again", 5*time.Second, func() bool {
		return col.count(func(s flat) bool { return s.peer == "silent" && s.status == sample.StatusTimeout }) > after+10
	})
}

// resettingPeer accepts every connection, reads one frame of a size-byte payload so that a
// message is in flight, and resets the connection (RST, not FIN).
func resettingPeer(t *testing.T, size int) string {
	return testutil.ServeTCP(t, func(c net.Conn) {
		_, _ = io.ReadFull(c, make([]byte, headerLen+size))
		_ = c.(*net.TCPConn).SetLinger(0)
	})
}

// closedPort is a loopback address nothing listens on: a dial to it is refused.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestALossRecordsWhyThePeerDidNotAnswer(t *testing.T) {
	const timeout = 500 * time.Millisecond
	for _, tc := range []struct {
		name string
		addr func(t *testing.T) string
		want sample.Status
	}{
		{"the port is closed: refused", closedPort, sample.StatusRefused},
		{"the peer accepts then resets: error", func(t *testing.T) string { return resettingPeer(t, 64) }, sample.StatusError},
		{"the peer never answers: timeout", func(t *testing.T) string { return startPeerServer(t, 64, 0, true).ln.Addr().String() }, sample.StatusTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, col := soloProber(t, "00000000-0000-4000-8000-0000000000a5")
			p.Apply(settings(20, 64, timeout, []Peer{{ID: "peer", Name: "peer", Address: tc.addr(t)}}, nil))
			waitFor(t, "10 outcomes for the peer", 15*time.Second, func() bool {
				return col.count(func(s flat) bool { return s.peer == "peer" }) >= 10
			})
			got := map[sample.Status]int{}
			col.mu.Lock()
			for _, s := range col.m {
				got[s.status]++
			}
			col.mu.Unlock()
			if len(got) != 1 || got[tc.want] == 0 {
				t.Fatalf("statuses %v, want every loss to be %v (%d)", got, tc.want, tc.want)
			}
		})
	}
}

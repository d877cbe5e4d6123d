package path

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"runtime"
	"sync"
	"testing"
	"time"
)

type shipped struct {
	mu     sync.Mutex
	traces []TraceOut
	fail   int // fail this many sends first
	got    chan struct{}
}

func (s *shipped) send(_ context.Context, ts []TraceOut) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail > 0 {
		s.fail--
		return errors.New("api down")
	}
	s.traces = append(s.traces, ts...)
	select {
	case s.got <- struct{}{}:
	default:
	}
	return nil
}

func (s *shipped) byPeer() map[string][]TraceOut {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string][]TraceOut{}
	for _, t := range s.traces {
		out[t.DstAgentID] = append(out[t.DstAgentID], t)
	}
	return out
}

func TestTheManagerTracesEveryPeerEachIntervalAndShipsThroughAnOutage(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("path tracing needs Linux")
	}
	a, b := listen(t, "127.0.0.1:0"), listen(t, "127.0.0.1:0")
	m := NewManager("self", slog.New(slog.NewTextHandler(io.Discard, nil)))
	m.Options = Options{ProbeTimeout: time.Second}
	m.Apply(Settings{Interval: 300 * time.Millisecond, Proto: TCP, Targets: []Target{
		{ID: "peer-a", Address: a.String()}, {ID: "peer-b", Address: b.String()}}})
	s := &shipped{fail: 3, got: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = m.Run(ctx, s.send) }()
	defer func() { cancel(); <-done }()
	deadline := time.After(20 * time.Second)
	for {
		by := s.byPeer()
		if len(by["peer-a"]) >= 3 && len(by["peer-b"]) >= 3 {
			break
		}
		select {
		case <-s.got:
		case <-time.After(time.Second):
		case <-deadline:
			t.Fatalf("traces shipped per peer: a %d, b %d", len(by["peer-a"]), len(by["peer-b"]))
		}
	}
	ids := map[string]bool{}
	for peer, ts := range s.byPeer() {
		for i, tr := range ts {
			if ids[tr.ID] {
				t.Fatalf("trace id %s shipped twice", tr.ID)
			}
			ids[tr.ID] = true
			if !tr.Reached || len(tr.Hops) != 1 || tr.Proto != TCP || tr.Trigger != "schedule" ||
				tr.Hops[0].RTTMedUS == nil || tr.DstAddress != "127.0.0.1" {
				t.Fatalf("%s trace %d: %+v", peer, i, tr)
			}
			if i > 0 {
				prev, _ := time.Parse(time.RFC3339Nano, ts[i-1].StartedAt)
				cur, _ := time.Parse(time.RFC3339Nano, tr.StartedAt)
				// Each peer once per interval: the three failed sends kept their traces,
				// and no peer was traced twice in one interval.
				if gap := cur.Sub(prev); gap < 200*time.Millisecond {
					t.Fatalf("%s traced %v after its previous trace, want about the interval", peer, gap)
				}
			}
		}
	}
}

func TestAnIntervalOfZeroTracesNothing(t *testing.T) {
	m := NewManager("self", slog.New(slog.NewTextHandler(io.Discard, nil)))
	m.Apply(Settings{Interval: 0, Proto: TCP, Targets: []Target{{ID: "p", Address: "127.0.0.1:1"}}})
	s := &shipped{got: make(chan struct{}, 1)}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_ = m.Run(ctx, s.send)
	if n := len(s.byPeer()); n != 0 {
		t.Fatalf("%d peers traced with scheduling off", n)
	}
}

func TestARequestedTraceRunsOnceAheadOfTheScheduleAndNamesItsRequest(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("path tracing needs Linux")
	}
	a := listen(t, "127.0.0.1:0")
	m := NewManager("self", slog.New(slog.NewTextHandler(io.Discard, nil)))
	m.Options = Options{ProbeTimeout: time.Second}
	settings := Settings{Interval: 0, Proto: TCP, Targets: []Target{{ID: "peer-a", Address: a.String()}},
		Requests: []Request{{ID: "req-1", Peer: "peer-a", Trigger: "alert"}, {ID: "req-2", Peer: "gone", Trigger: "request"}}}
	m.Apply(settings)
	s := &shipped{got: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = m.Run(ctx, s.send) }()
	defer func() { cancel(); <-done }()
	select {
	case <-s.got:
	case <-time.After(10 * time.Second):
		t.Fatal("no requested trace shipped")
	}
	// The config still lists the request (the server has not seen the trace yet): no second.
	m.Apply(settings)
	time.Sleep(300 * time.Millisecond) // nothing to wait for: a second trace would take ~1 ms
	ts := s.byPeer()["peer-a"]
	if len(ts) != 1 || ts[0].RequestID != "req-1" || ts[0].Trigger != "alert" || !ts[0].Reached {
		t.Fatalf("traces for the request: %+v", ts)
	}
	if n := len(s.byPeer()["gone"]); n != 0 {
		t.Fatalf("%d traces to a peer this agent does not mesh with", n)
	}
}

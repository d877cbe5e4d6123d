package wanem

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"
)

// pathChooser routes a connection by its first byte: each byte value is one path with its own
// pair of links, all through one proxy as the emulator's mesh routes are.
func pathChooser(paths map[byte][2]*Link) Chooser {
	return func(_ context.Context, peek []byte) (*Link, *Link, error) {
		p, ok := paths[peek[0]]
		if !ok {
			return nil, nil, errors.New("no such path")
		}
		return p[0], p[1], nil
	}
}

// pathRoundTrips opens one connection on path id and times n one-byte round trips.
func pathRoundTrips(t *testing.T, addr string, id byte, n int) []time.Duration {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte{id}); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1)
	if _, err := c.Read(buf); err != nil {
		t.Fatal(err)
	}
	out := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		t0 := time.Now()
		if _, err := c.Write(buf); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Read(buf); err != nil {
			t.Fatal(err)
		}
		out = append(out, time.Since(t0))
	}
	return out
}

// steadyPathMoves measures the median round trip of a steady path ('q', one-way delay steady)
// through the same proxy as a busy path ('s', 5 ms each way) before and after change acts on
// the busy path while that path keeps its traffic going.
func steadyPathMoves(t *testing.T, steady time.Duration, change func(addr string, busyUp *Link)) (before, after time.Duration) {
	busyUp := NewLink(5*time.Millisecond, 1)
	paths := map[byte][2]*Link{
		's': {busyUp, NewLink(5*time.Millisecond, 2)},
		'q': {NewLink(steady, 3), NewLink(steady, 4)},
	}
	addr := startProxy(t, &Proxy{Upstream: echoServer(t), PeekBytes: 1, Choose: pathChooser(paths)})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			pathRoundTrips(t, addr, 's', 20)
		}
	}()
	defer func() { cancel(); wg.Wait() }()
	// Warm up: the steady path's timing correction settles before the baseline is taken.
	pathRoundTrips(t, addr, 'q', 300)
	before = median(pathRoundTrips(t, addr, 'q', 400))
	change(addr, busyUp)
	after = median(pathRoundTrips(t, addr, 'q', 400))
	t.Logf("steady path median %v before, %v after (%+v)", before, after, after-before)
	return before, after
}

func TestAStepOnOnePathLeavesAnotherPathThroughTheSameProxyUnmoved(t *testing.T) {
	for _, tc := range []struct {
		name   string
		steady time.Duration
	}{
		{"steady 10 ms path", 5 * time.Millisecond},
		{"steady pass-through path", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, after := steadyPathMoves(t, tc.steady, func(_ string, busyUp *Link) {
				busyUp.AddStep(Step{At: time.Now(), Delta: 5 * time.Millisecond})
			})
			if d := (after - before).Abs(); d > Precision {
				t.Fatalf("the steady path moved by %v when another path stepped (stated precision %v)", after-before, Precision)
			}
		})
	}
}

// A reader that drains slowly makes its own path's chunks leave late; that lateness must not
// teach the timing correction of any other path (the proxy once shared one correction).
func TestAStalledPathLeavesAnotherPathThroughTheSameProxyUnmoved(t *testing.T) {
	before, after := steadyPathMoves(t, 5*time.Millisecond, func(addr string, _ *Link) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := c.Write([]byte{'s'}); err != nil {
			t.Fatal(err)
		}
		// Send far more than the reader drains: once the socket buffers fill, the proxy's
		// writes back block and its queued chunks leave long after they were due.
		written := make(chan struct{})
		go func() {
			tick := time.NewTicker(5 * time.Millisecond)
			defer tick.Stop()
			buf := make([]byte, 16<<10)
			for range tick.C {
				if _, err := c.Read(buf); err != nil {
					return
				}
			}
		}()
		go func() {
			buf := make([]byte, 64<<10)
			for i := 0; ; i++ {
				if _, err := c.Write(buf); err != nil {
					return
				}
				if i == 32 {
					close(written)
				}
			}
		}()
		select {
		case <-written:
		case <-time.After(time.Minute):
			t.Fatal("the stalled path never took 2 MB")
		}
	})
	if d := (after - before).Abs(); d > Precision {
		t.Fatalf("the steady path moved by %v when another path stalled (stated precision %v)", after-before, Precision)
	}
}

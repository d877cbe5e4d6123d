package wanem

import (
	"io"
	"net"
	"slices"
	"testing"
	"time"
)

// pinger keeps one connection to addr and times one small round trip per call.
func pinger(t *testing.T, addr string) func() time.Duration {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	noDelay(c)
	msg := []byte("ping-ping-ping-ping-ping-ping-pi")
	buf := make([]byte, len(msg))
	ping := func() time.Duration {
		t0 := time.Now()
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			t.Fatal(err)
		}
		return time.Since(t0)
	}
	ping() // the proxy dials upstream on the first message: not part of a round trip
	return ping
}

func TestAHopIsLearnedFromOneChunkTurnsOnly(t *testing.T) {
	t0 := time.Now()
	for _, tc := range []struct {
		name   string
		turns  func(h *hop)
		oneWay time.Duration
	}{
		{"no turn yet", func(*hop) {}, 0},
		{"one turn of 100 µs", func(h *hop) {
			h.sending(t0)
			h.replied(t0.Add(100 * time.Microsecond))
		}, 50*time.Microsecond - hopGuard},
		{"a reply's later chunks do not count", func(h *hop) {
			h.sending(t0)
			h.replied(t0.Add(100 * time.Microsecond))
			h.replied(t0.Add(900 * time.Microsecond))
		}, 50*time.Microsecond - hopGuard},
		{"a message of two chunks does not count", func(h *hop) {
			h.sending(t0)
			h.sending(t0.Add(time.Millisecond))
			h.replied(t0.Add(5 * time.Millisecond))
		}, 0},
		{"the fastest of the recent turns", func(h *hop) {
			for i := 1; i <= 100; i++ { // 100 turns of 2..200 µs: the last 64 are 74..200
				at := t0.Add(time.Duration(i) * time.Second)
				h.sending(at)
				h.replied(at.Add(time.Duration(i*2) * time.Microsecond))
			}
		}, 74*time.Microsecond/2 - hopGuard},
		{"a loaded machine's slow turns are not taken off", func(h *hop) {
			h.sending(t0)
			h.replied(t0.Add(4 * time.Millisecond))
		}, hopCap - hopGuard},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &hop{}
			tc.turns(h)
			if got := h.oneWay(); got != tc.oneWay {
				t.Fatalf("one way %v, want %v", got, tc.oneWay)
			}
		})
	}
	var none *hop
	none.sending(t0)
	none.replied(t0)
	if none.oneWay() != 0 {
		t.Fatal("a nil hop takes something off")
	}
}

func TestAnEchoPathTakesTheProxysOwnHopOffItsDelayButNeverGoesUnderIt(t *testing.T) {
	const oneWay = 400 * time.Microsecond // a 0.8 ms cross-AZ round trip
	echo := echoServer(t)
	plain := startProxy(t, &Proxy{Upstream: echo, Choose: fixed(NewLink(oneWay, 1), NewLink(oneWay, 2))})
	corrected := startProxy(t, &Proxy{Upstream: echo, Echo: true, Choose: fixed(NewLink(oneWay, 3), NewLink(oneWay, 4))})
	pa, pb := pinger(t, plain), pinger(t, corrected)
	var gained, rtts []time.Duration
	for i := 0; i < 200; i++ {
		a, b := pa(), pb()
		gained = append(gained, a-b)
		rtts = append(rtts, b)
	}
	// How much faster the corrected path is depends on the machine (on a fast one the hop,
	// less its guard, is nothing): the estimate's arithmetic is TestAHopIsLearnedFromOneChunkTurnsOnly's,
	// and what must hold here is the floor.
	slices.Sort(rtts)
	if rtts[0] < 2*oneWay {
		t.Fatalf("a corrected round trip of %v, under the emulated %v", rtts[0], 2*oneWay)
	}
	t.Logf("corrected round trips min %v, median %v (emulated %v); median gain over the plain path %v",
		rtts[0], rtts[len(rtts)/2], 2*oneWay, median(gained))
}

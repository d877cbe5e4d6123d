package wanem

import (
	"io"
	"net"
	"slices"
	"testing"
	"time"

	"stormwatch/agents/internal/testutil"
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
			h.sending(t0, 0)
			h.replied(t0.Add(100 * time.Microsecond))
		}, 50*time.Microsecond - hopGuard},
		{"a reply's later chunks do not count", func(h *hop) {
			h.sending(t0, 0)
			h.replied(t0.Add(100 * time.Microsecond))
			h.replied(t0.Add(900 * time.Microsecond))
		}, 50*time.Microsecond - hopGuard},
		{"a message of two chunks does not count", func(h *hop) {
			h.sending(t0, 0)
			h.sending(t0.Add(time.Millisecond), 0)
			h.replied(t0.Add(5 * time.Millisecond))
		}, 0},
		{"the fastest of the recent turns", func(h *hop) {
			for i := 1; i <= 100; i++ { // 100 turns of 2..200 µs: the last 64 are 74..200
				at := t0.Add(time.Duration(i) * time.Second)
				h.sending(at, 0)
				h.replied(at.Add(time.Duration(i*2) * time.Microsecond))
			}
		}, 74*time.Microsecond/2 - hopGuard},
		{"a loaded machine's slow turns are not taken off", func(h *hop) {
			h.sending(t0, 0)
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
	none.sending(t0, 0)
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

// slowEveryOther echoes each message, holding every second reply for extra first: a far side
// whose turn varies, as an echo server's does on a loaded machine.
func slowEveryOther(t *testing.T, extra time.Duration) string {
	return testutil.ServeTCP(t, func(c net.Conn) {
		noDelay(c)
		buf := make([]byte, 64<<10)
		for i := 0; ; i++ {
			n, err := c.Read(buf)
			if err != nil {
				return
			}
			if i%2 == 1 {
				time.Sleep(extra)
			}
			if _, err := c.Write(buf[:n]); err != nil {
				return
			}
		}
	})
}

func TestAFarSideSlowerThanItsFastestTurnIsTakenOutOfTheReplysDelay(t *testing.T) {
	// A 20 ms round trip whose far side holds every second reply 3 ms: the emulated network
	// is the same for both, so are their round trips, and neither comes in under the table.
	const oneWay, extra = 10 * time.Millisecond, 3 * time.Millisecond
	addr := startProxy(t, &Proxy{Upstream: slowEveryOther(t, extra), Echo: true,
		Choose: fixed(NewLink(oneWay, 1), NewLink(oneWay, 2))})
	ping := pinger(t, addr) // its first message is the far side's first: the next is held
	var fast, slow []time.Duration
	for i := 0; i < 60; i++ {
		slow = append(slow, ping())
		fast = append(fast, ping())
	}
	for _, d := range [][]time.Duration{fast, slow} {
		if m := slices.Min(d); m < 2*oneWay {
			t.Fatalf("a round trip of %v, under the emulated %v", m, 2*oneWay)
		}
	}
	if gap := median(slow) - median(fast); gap > extra/3 {
		t.Fatalf("replies held %v longer by the far side came back %v later (medians %v and %v):"+
			" the reply's delay should have taken it in", extra, gap, median(slow), median(fast))
	}
	t.Logf("medians %v (prompt far side) and %v (far side %v slower), emulated %v",
		median(fast), median(slow), extra, 2*oneWay)
}

func TestAReplysCreditIsTheRequestsLatenessAndTheTurnBeyondTheFastest(t *testing.T) {
	t0 := time.Now()
	h := &hop{}
	h.sending(t0, 200*time.Microsecond)
	if got := h.replied(t0.Add(100 * time.Microsecond)); got != 200*time.Microsecond {
		t.Fatalf("first turn's credit %v, want the request's 200µs lateness", got)
	}
	h.sending(t0.Add(time.Second), 0)
	if got := h.replied(t0.Add(time.Second + time.Millisecond)); got != 900*time.Microsecond {
		t.Fatalf("a 1 ms turn after a 100 µs one: credit %v, want 900µs", got)
	}
	if got := h.replied(t0.Add(2 * time.Second)); got != 0 {
		t.Fatalf("a reply to nothing timed got credit %v", got)
	}
	h.sending(t0.Add(3*time.Second), time.Millisecond)
	h.sending(t0.Add(3*time.Second+time.Millisecond), 0)
	if got := h.replied(t0.Add(4 * time.Second)); got != 0 {
		t.Fatalf("a two-chunk message's reply got credit %v", got)
	}
	var none *hop
	if none.replied(t0) != 0 {
		t.Fatal("a nil hop gives credit")
	}
}

package shaper

import (
	"context"
	"math"
	"net"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// arrivals records what a receiver got and when.
type arrivals struct {
	mu sync.Mutex
	t  []time.Time
	n  []int
}

func (a *arrivals) add(n int) {
	a.mu.Lock()
	a.t = append(a.t, time.Now())
	a.n = append(a.n, n)
	a.mu.Unlock()
}

func (a *arrivals) last() time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.t) == 0 {
		return time.Time{}
	}
	return a.t[len(a.t)-1]
}

func (a *arrivals) total() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := 0
	for _, n := range a.n {
		s += n
	}
	return s
}

// rate is the bytes per second received in [from, to).
func (a *arrivals) rate(from, to time.Time) float64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := 0
	for i, t := range a.t {
		if !t.Before(from) && t.Before(to) {
			s += a.n[i]
		}
	}
	return float64(s) / to.Sub(from).Seconds()
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

// flood writes to a TCP connection until it fails.
func flood(c net.Conn) {
	buf := make([]byte, 128<<10)
	for {
		if _, err := c.Write(buf); err != nil {
			return
		}
	}
}

func drain(c net.Conn, got *arrivals) {
	buf := make([]byte, 128<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			got.add(n)
		}
		if err != nil {
			return
		}
	}
}

// pace sends size-byte datagrams at bytesPerS until ctx ends.
func pace(ctx context.Context, write func([]byte) error, size int, bytesPerS float64) {
	buf := make([]byte, size)
	start := time.Now()
	sent := 0
	for ctx.Err() == nil {
		for float64(sent) < time.Since(start).Seconds()*bytesPerS {
			_ = write(buf)
			sent += size
		}
		time.Sleep(time.Millisecond)
	}
}

func TestEachDirectionForwardsAtTheHighRateThenAtTheLowRateAfterTheVolume(t *testing.T) {
	const high, low, after = 4e6, 1.5e6, 6e6 // the switch comes 1.5 s in
	for _, tc := range []struct {
		name  string
		proto string
		dir   Direction
	}{
		{"tcp, client to upstream", "tcp", Up},
		{"tcp, upstream to client", "tcp", Down},
		{"udp policed, client to upstream", "udp", Up},
		{"udp policed, upstream to client", "udp", Down},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			got := &arrivals{}
			var upstream string
			if tc.proto == "tcp" {
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				defer ln.Close()
				upstream = ln.Addr().String()
				go func() {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					defer c.Close()
					context.AfterFunc(ctx, func() { c.Close() })
					if tc.dir == Up {
						drain(c, got)
					} else {
						flood(c)
					}
				}()
			} else {
				uc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
				if err != nil {
					t.Fatal(err)
				}
				defer uc.Close()
				_ = uc.SetReadBuffer(4 << 20)
				upstream = uc.LocalAddr().String()
				go func() {
					buf := make([]byte, 64<<10)
					for {
						n, from, err := uc.ReadFromUDPAddrPort(buf)
						if err != nil {
							return
						}
						if tc.dir == Up {
							got.add(n)
							continue
						}
						// The client's first datagram says where to send: twice the high rate.
						go pace(ctx, func(b []byte) error { _, err := uc.WriteToUDPAddrPort(b, from); return err }, 8000, 2*high)
						return
					}
				}()
			}
			s, err := Listen(Config{Listen: "127.0.0.1:0", Upstream: upstream, HighBytesPerS: high, LowBytesPerS: low, SwitchAfterBytes: after})
			if err != nil {
				t.Fatal(err)
			}
			served := make(chan struct{})
			go func() { defer close(served); _ = s.Serve(ctx) }()
			defer func() { cancel(); <-served }()

			c, err := net.Dial(tc.proto, s.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			context.AfterFunc(ctx, func() { c.Close() })
			if tc.proto == "udp" {
				_ = c.(*net.UDPConn).SetReadBuffer(4 << 20)
			}
			switch {
			case tc.proto == "tcp" && tc.dir == Up:
				go flood(c)
			case tc.proto == "tcp":
				go drain(c, got)
			case tc.dir == Up:
				go pace(ctx, func(b []byte) error { _, err := c.Write(b); return err }, 8000, 2*high)
			default:
				_, _ = c.Write([]byte("hello"))
				go drain(c, got)
			}
			waitFor(t, "the low rate for a second after the switch", 15*time.Second, func() bool {
				st := s.Stats(tc.dir)
				return !st.SwitchedAt.IsZero() && time.Since(st.SwitchedAt) > 1200*time.Millisecond
			})
			st := s.Stats(tc.dir)
			got.mu.Lock()
			first := got.t[0]
			got.mu.Unlock()
			// Never above a rate by more than 5%; below it by up to 15%, as a loaded host's late
			// wakeups of sender, relay and receiver can only slow what arrives.
			if hi := got.rate(first.Add(100*time.Millisecond), st.SwitchedAt.Add(-50*time.Millisecond)); hi > 1.05*high || hi < 0.85*high {
				t.Errorf("before the switch: %.4g bytes/s, want %.4g +5%% -15%%", hi, high)
			}
			if lo := got.rate(st.SwitchedAt.Add(100*time.Millisecond), st.SwitchedAt.Add(1100*time.Millisecond)); lo > 1.05*low || lo < 0.85*low {
				t.Errorf("after the switch: %.4g bytes/s, want %.4g +5%% -15%%", lo, low)
			}
			// The volume before the switch is the configured one: the receiver got it by then.
			if b := got.rate(first, st.SwitchedAt.Add(5*time.Millisecond)) * st.SwitchedAt.Add(5*time.Millisecond).Sub(first).Seconds(); math.Abs(b-after) > 0.05*after {
				t.Errorf("received before the switch: %.4g bytes, want %.4g ± 5%%", b, float64(after))
			}
			if st.Bytes < int64(got.total())-int64(chunkBytes) {
				t.Errorf("the shaper counts %d bytes forwarded, the receiver got %d", st.Bytes, got.total())
			}
			if tc.dir == Up {
				if other := s.Stats(Down); !other.SwitchedAt.IsZero() {
					t.Errorf("the other direction switched too (%d bytes)", other.Bytes)
				}
			}
		})
	}
}

func TestADirectionIdleForTheRefillTimeStartsAgainAtTheHighRate(t *testing.T) {
	// The refill time is well above a loaded machine's scheduling stalls: a stall that long
	// in the middle of a send would rightly start a new episode there.
	const high, low, after, refill = 4e6, 1e6, 2e6, time.Second
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := &arrivals{}
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		drain(c, got)
	}()
	s, err := Listen(Config{Listen: "127.0.0.1:0", Upstream: ln.Addr().String(), HighBytesPerS: high,
		LowBytesPerS: low, SwitchAfterBytes: after, RefillAfterIdle: refill})
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { defer close(served); _ = s.Serve(ctx) }()
	defer func() { cancel(); <-served }()
	c, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sent := 0
	send := func(n int) {
		if _, err := c.Write(make([]byte, n)); err != nil {
			t.Fatal(err)
		}
		sent += n
		waitFor(t, "the receiver to get what was sent", 30*time.Second, func() bool { return got.total() >= sent })
	}
	send(3e6) // past the volume: the direction is at the low rate
	first := s.Stats(Up)
	if first.SwitchedAt.IsZero() {
		t.Fatal("the direction never switched")
	}
	// Idle for longer than the refill time: the next bytes go at the high rate again, and
	// the new episode switches again after its own volume.
	waitFor(t, "the refill time to pass", 30*time.Second, func() bool { return time.Since(got.last()) > 2*refill })
	send(1.5e6)
	st := s.Stats(Up)
	if lim := s.dirs[Up].lim.Limit(); lim != rate.Limit(high) || st.Bytes != 1.5e6 || !st.SwitchedAt.IsZero() {
		t.Errorf("after the idle time: limit %v, %d bytes, switched at %v; want the high rate, a fresh 1.5e6 bytes, no switch", lim, st.Bytes, st.SwitchedAt)
	}
	send(1e6) // 2.5 MB in this episode: past its volume, so at the low rate again
	st = s.Stats(Up)
	if lim := s.dirs[Up].lim.Limit(); lim != rate.Limit(low) || !st.SwitchedAt.After(first.SwitchedAt) {
		t.Errorf("past the new episode's volume: limit %v, switched at %v; want the low rate and a new switch", lim, st.SwitchedAt)
	}
}

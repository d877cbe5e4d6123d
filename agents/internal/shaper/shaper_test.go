package shaper

import (
	"context"
	"math"
	"net"
	"sync"
	"testing"
	"time"
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
			if hi := got.rate(first.Add(100*time.Millisecond), st.SwitchedAt.Add(-50*time.Millisecond)); math.Abs(hi-high) > 0.05*high {
				t.Errorf("before the switch: %.4g bytes/s, want %.4g ± 5%%", hi, high)
			}
			if lo := got.rate(st.SwitchedAt.Add(100*time.Millisecond), st.SwitchedAt.Add(1100*time.Millisecond)); math.Abs(lo-low) > 0.05*low {
				t.Errorf("after the switch: %.4g bytes/s, want %.4g ± 5%%", lo, low)
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

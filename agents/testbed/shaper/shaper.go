// Package shaper is a TCP and UDP relay that imitates the traffic shaping seed 004 §IV found
// on some cloud paths: each direction forwards at a high rate until a set volume has passed,
// then at a low rate. TCP waits for tokens (TCP pushes back on the sender); UDP drops what
// the bucket cannot take, as a policer does. It serves the throughput tests and bench.
package shaper

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// Config sets one shaper; rates are in bytes per second and apply to each direction.
type Config struct {
	Listen           string // TCP and UDP, same port
	Upstream         string // TCP and UDP, same port
	HighBytesPerS    float64
	LowBytesPerS     float64
	SwitchAfterBytes int64
	// RefillAfterIdle, when set, starts a direction again at the high rate with a fresh
	// volume once it has forwarded nothing for this long, as burst credits refill on the
	// shaped paths seed 004 measured; zero keeps the low rate for good after the switch.
	RefillAfterIdle time.Duration
}

// chunkBytes is the most one TCP read forwards at once.
const chunkBytes = 64 << 10

// catchUp is how much time's worth of tokens a bucket holds: a relay goroutine that the
// host's scheduler wakes late forwards what it owes at once, so the rate holds on a busy
// machine. A direction that had nothing to forward for idleGap starts again with an empty
// bucket, so what it banked while idle does not go out as a burst.
const (
	catchUp = 200 * time.Millisecond
	idleGap = 50 * time.Millisecond
)

// Direction is one way through the shaper: Up is client → upstream, Down the way back.
type Direction int

const (
	Up Direction = iota
	Down
)

// bucket is the token bucket of one direction, shared by every connection and flow.
type bucket struct {
	lim         *rate.Limiter
	high, low   rate.Limit
	switchAfter int64
	refill      time.Duration
	last        time.Time // the last byte forwarded
	bytes       atomic.Int64
	mu          sync.Mutex
	switchedAt  time.Time
	first       time.Time // the first byte forwarded
	slots       []int64   // bytes forwarded per slot since first
}

// slot is the resolution of the timeline a direction keeps of what it forwarded.
const slot = 10 * time.Millisecond

func newBucket(c Config) *bucket {
	burst := max(chunkBytes, int(c.HighBytesPerS*catchUp.Seconds()))
	lim := rate.NewLimiter(rate.Limit(c.HighBytesPerS), burst)
	lim.AllowN(time.Now(), burst) // starts empty: the first bytes go at the rate, not in a burst
	return &bucket{lim: lim, high: rate.Limit(c.HighBytesPerS), low: rate.Limit(c.LowBytesPerS),
		switchAfter: c.SwitchAfterBytes, refill: c.RefillAfterIdle}
}

// resume empties the bucket when the direction was idle for gap, and starts its volume
// again at the high rate when it forwarded nothing for the refill time.
func (b *bucket) resume(gap time.Duration) {
	if gap < idleGap {
		return
	}
	now := time.Now()
	if t := b.lim.TokensAt(now); t >= 1 {
		b.lim.AllowN(now, int(t))
	}
	if b.refill <= 0 {
		return
	}
	b.mu.Lock()
	fresh := !b.last.IsZero() && now.Sub(b.last) >= b.refill
	if fresh {
		// A new episode: its own volume and timeline, so a long-lived shaper keeps no history.
		b.bytes.Store(0)
		b.first, b.slots, b.last, b.switchedAt = time.Time{}, nil, time.Time{}, time.Time{}
	}
	b.mu.Unlock()
	if fresh {
		b.lim.SetLimit(b.high)
	}
}

// passed counts n forwarded bytes and switches to the low rate once the volume is reached.
func (b *bucket) passed(n int) {
	now := time.Now()
	b.mu.Lock()
	if b.first.IsZero() {
		b.first = now
	}
	i := int(now.Sub(b.first) / slot)
	for len(b.slots) <= i {
		b.slots = append(b.slots, 0)
	}
	b.slots[i] += int64(n)
	b.last = now
	total := b.bytes.Add(int64(n))
	switched := total >= b.switchAfter && total-int64(n) < b.switchAfter
	if switched {
		b.switchedAt = now
	}
	b.mu.Unlock()
	if switched {
		b.lim.SetLimit(b.low)
	}
}

// Stats is what one direction did.
type Stats struct {
	Bytes      int64     // forwarded
	SwitchedAt time.Time // zero until the volume was reached
	first      time.Time
	slots      []int64
}

// BytesBetween is what the direction forwarded from a to b, to within a 10 ms slot at
// each end (a partly covered slot counts in proportion).
func (st Stats) BytesBetween(a, b time.Time) float64 {
	var sum float64
	for i, n := range st.slots {
		s := st.first.Add(time.Duration(i) * slot)
		e := s.Add(slot)
		lo, hi := max(s.UnixNano(), a.UnixNano()), min(e.UnixNano(), b.UnixNano())
		if hi > lo {
			sum += float64(n) * float64(hi-lo) / float64(slot)
		}
	}
	return sum
}

// Shaper relays TCP connections and UDP flows to the upstream.
type Shaper struct {
	c      Config
	tcp    net.Listener
	udp    *net.UDPConn
	dirs   [2]*bucket
	wg     sync.WaitGroup
	mu     sync.Mutex
	closer []io.Closer
}

// Listen opens the shaper's TCP and UDP sockets.
func Listen(c Config) (*Shaper, error) {
	if c.HighBytesPerS <= 0 || c.LowBytesPerS <= 0 {
		return nil, errors.New("shaper: rates must be positive")
	}
	ln, err := net.Listen("tcp", c.Listen)
	if err != nil {
		return nil, err
	}
	ua, err := net.ResolveUDPAddr("udp", ln.Addr().String())
	if err != nil {
		ln.Close()
		return nil, err
	}
	udp, err := net.ListenUDP("udp", ua)
	if err != nil {
		ln.Close()
		return nil, err
	}
	_ = udp.SetReadBuffer(4 << 20)
	_ = udp.SetWriteBuffer(4 << 20)
	return &Shaper{c: c, tcp: ln, udp: udp, dirs: [2]*bucket{newBucket(c), newBucket(c)}}, nil
}

// Addr is the address clients dial, for TCP and UDP alike.
func (s *Shaper) Addr() string { return s.tcp.Addr().String() }

// Stats reports one direction.
func (s *Shaper) Stats(d Direction) Stats {
	b := s.dirs[d]
	b.mu.Lock()
	defer b.mu.Unlock()
	return Stats{Bytes: b.bytes.Load(), SwitchedAt: b.switchedAt, first: b.first, slots: append([]int64(nil), b.slots...)}
}

// Serve relays until ctx ends, then closes every connection and flow.
func (s *Shaper) Serve(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() {
		s.tcp.Close()
		s.udp.Close()
		s.mu.Lock()
		for _, c := range s.closer {
			_ = c.Close()
		}
		s.mu.Unlock()
	})
	defer stop()
	s.wg.Add(1)
	go func() { defer s.wg.Done(); s.serveUDP(ctx) }()
	for {
		c, err := s.tcp.Accept()
		if err != nil {
			break
		}
		s.wg.Add(1)
		go func() { defer s.wg.Done(); s.relayTCP(ctx, c) }()
	}
	<-ctx.Done()
	s.wg.Wait()
	return nil
}

func (s *Shaper) track(c io.Closer) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closer = append(s.closer, c)
	return true
}

func (s *Shaper) relayTCP(ctx context.Context, c net.Conn) {
	defer c.Close()
	var d net.Dialer
	up, err := d.DialContext(ctx, "tcp", s.c.Upstream)
	if err != nil {
		return
	}
	defer up.Close()
	s.track(c)
	s.track(up)
	done := make(chan struct{}, 2)
	go func() { s.pipe(ctx, up, c, s.dirs[Up]); done <- struct{}{} }()
	go func() { s.pipe(ctx, c, up, s.dirs[Down]); done <- struct{}{} }()
	<-done
	<-done
}

// pipe copies src to dst through b, passing on a half-close.
func (s *Shaper) pipe(ctx context.Context, dst, src net.Conn, b *bucket) {
	buf := make([]byte, chunkBytes)
	for {
		start := time.Now()
		n, err := src.Read(buf)
		if n > 0 {
			b.resume(time.Since(start))
			if werr := b.lim.WaitN(ctx, n); werr != nil {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				_ = src.Close()
				return
			}
			b.passed(n)
		}
		if err != nil {
			if tc, ok := dst.(*net.TCPConn); ok {
				_ = tc.CloseWrite()
			}
			return
		}
	}
}

// serveUDP relays datagrams: each client address gets its own upstream socket, whose
// replies go back to that client.
func (s *Shaper) serveUDP(ctx context.Context) {
	flows := map[netip.AddrPort]*net.UDPConn{}
	buf := make([]byte, 64<<10)
	up := s.dirs[Up]
	for {
		start := time.Now()
		n, from, err := s.udp.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		f, ok := flows[from]
		if !ok {
			var d net.Dialer
			c, err := d.DialContext(ctx, "udp", s.c.Upstream)
			if err != nil {
				continue
			}
			f = c.(*net.UDPConn)
			_ = f.SetReadBuffer(4 << 20)
			_ = f.SetWriteBuffer(4 << 20)
			flows[from] = f
			s.track(f)
			s.wg.Add(1)
			go func() { defer s.wg.Done(); s.udpReplies(f, from) }()
		}
		up.resume(time.Since(start))
		if !up.lim.AllowN(time.Now(), n) {
			continue // policed
		}
		if _, err := f.Write(buf[:n]); err == nil {
			up.passed(n)
		}
	}
}

func (s *Shaper) udpReplies(f *net.UDPConn, client netip.AddrPort) {
	buf := make([]byte, 64<<10)
	down := s.dirs[Down]
	for {
		start := time.Now()
		n, err := f.Read(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		down.resume(time.Since(start))
		if !down.lim.AllowN(time.Now(), n) {
			continue
		}
		if _, err := s.udp.WriteToUDPAddrPort(buf[:n], client); err == nil {
			down.passed(n)
		}
	}
}

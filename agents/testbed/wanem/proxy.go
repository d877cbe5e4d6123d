package wanem

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Chooser picks the links of a new connection: up carries client→upstream bytes, down the
// replies. peek holds the first PeekBytes the client sent (empty when PeekBytes is 0).
type Chooser func(ctx context.Context, peek []byte) (up, down *Link, err error)

// Proxy accepts TCP connections on Listen and forwards each to Upstream through its links.
type Proxy struct {
	Upstream  string
	PeekBytes int
	Choose    Chooser
	Log       *slog.Logger
	// Echo says the upstream answers each message as soon as it has it (the mesh's echo
	// servers): the proxy then measures the hop it adds and takes it off the delay (see hop).
	Echo bool

	ln net.Listener
	wg sync.WaitGroup
	mu sync.Mutex
	cs map[net.Conn]struct{}
}

// chunkBytes is the largest read forwarded as one delayed chunk; queueChunks chunks may wait
// in one direction before the reader stops reading (and TCP pushes back on the sender).
const (
	timerSlack  = 1200 * time.Microsecond
	chunkBytes  = 32 << 10
	queueChunks = 512
)

// Listen opens the proxy's listener.
func (p *Proxy) Listen(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	p.ln = ln
	p.cs = map[net.Conn]struct{}{}
	return nil
}

// Addr is the address the proxy listens on.
func (p *Proxy) Addr() net.Addr { return p.ln.Addr() }

// Serve forwards connections until ctx ends, then closes them all.
func (p *Proxy) Serve(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { p.ln.Close() })
	defer stop()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			p.closeAll()
			p.wg.Wait()
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		p.track(c, true)
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer p.track(c, false)
			p.handle(ctx, c)
		}()
	}
}

func (p *Proxy) track(c net.Conn, add bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if add {
		p.cs[c] = struct{}{}
	} else {
		delete(p.cs, c)
	}
}

func (p *Proxy) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.cs {
		c.Close()
	}
}

func (p *Proxy) handle(ctx context.Context, client net.Conn) {
	defer client.Close()
	noDelay(client)
	peek := make([]byte, p.PeekBytes)
	if p.PeekBytes > 0 {
		_ = client.SetReadDeadline(time.Now().Add(30 * time.Second))
		if _, err := io.ReadFull(client, peek); err != nil {
			return
		}
		_ = client.SetReadDeadline(time.Time{})
	}
	up, down, err := p.Choose(ctx, peek)
	if err != nil {
		if p.Log != nil {
			p.Log.Warn("wanem: no path for connection", "remote", client.RemoteAddr(), "err", err)
		}
		return
	}
	d := net.Dialer{Timeout: 5 * time.Second}
	server, err := d.DialContext(ctx, "tcp", p.Upstream)
	if err != nil {
		if p.Log != nil {
			p.Log.Warn("wanem: upstream unreachable", "upstream", p.Upstream, "err", err)
		}
		return
	}
	defer server.Close()
	noDelay(server)
	var h *hop
	if p.Echo {
		h = &hop{}
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.forward(server, client, up, peek, h, true) }()
	go func() { defer wg.Done(); p.forward(client, server, down, nil, h, false) }()
	wg.Wait()
}

func noDelay(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
}

type chunk struct {
	b   []byte
	due time.Time
}

// forward copies src to dst, each read held until its due time: its arrival plus the link's
// delay, never before the chunk ahead of it (a TCP stream stays in order), and with a
// bandwidth limit no sooner than the link can have carried it. first is sent ahead of the
// rest, stamped when the copy starts.
func (p *Proxy) forward(dst, src net.Conn, l *Link, first []byte, h *hop, request bool) {
	q := make(chan chunk, queueChunks)
	// Chunks queued or being written. A chunk already due when it is read, with none ahead of
	// it, is written by the reader itself: handing it to the writer would add the writer's
	// wake-up, about the whole of a same-zone path's 0.25 ms on a loaded two-core machine.
	var pending atomic.Int64
	write := func(b []byte, due time.Time) error {
		if request {
			now := time.Now()
			h.sending(now, now.Sub(due))
		}
		_, err := dst.Write(b)
		return err
	}
	go func() {
		defer close(q)
		var last, txFree time.Time
		stamp := func(b []byte, now time.Time) error {
			var credit time.Duration
			if !request {
				credit = h.replied(now)
			}
			tx := now
			if l.BytesPerS > 0 {
				tx = maxTime(now, txFree).Add(time.Duration(float64(len(b)) / l.BytesPerS * float64(time.Second)))
				txFree = tx
			}
			// A chunk never leaves before the link's delay, less the hop the proxy adds and
			// what its round trip already lost to this machine (credit), has passed: jitter,
			// spikes and late wake-ups only ever add to the table's figure.
			due := maxTime(tx.Add(max(l.Delay(now)-h.oneWay()-credit, 0)), last)
			last = due
			if pending.Load() == 0 && !time.Now().Before(due) {
				return write(b, due)
			}
			pending.Add(1)
			q <- chunk{b, due}
			return nil
		}
		if len(first) > 0 {
			if stamp(first, time.Now()) != nil {
				src.Close()
				return
			}
		}
		sr := newStampedReader(src)
		for {
			b := make([]byte, chunkBytes)
			var (
				n   int
				err error
				at  time.Time
			)
			if sr != nil {
				n, at, err = sr.read(b)
			} else {
				n, err = src.Read(b)
				at = time.Now()
			}
			if n > 0 {
				if werr := stamp(b[:n], at); werr != nil {
					src.Close()
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	var t *time.Timer
	for c := range q {
		// The runtime's timers wake about a millisecond late here: sleep to just before the
		// due time, then yield until it (sub-millisecond intra-region paths stay true). A
		// chunk is never written early: on a loaded machine a late wake-up shows as a slightly
		// longer round trip, as queueing would on a real path, never as a shorter one.
		if wait := time.Until(c.due) - timerSlack; wait > 0 {
			if t == nil {
				t = time.NewTimer(wait)
			} else {
				t.Reset(wait)
			}
			<-t.C
		}
		for time.Now().Before(c.due) {
			runtime.Gosched()
		}
		err := write(c.b, c.due)
		pending.Add(-1)
		if err != nil {
			src.Close()
			for range q {
				pending.Add(-1)
			}
			return
		}
	}
	// The sender finished: pass the half-close on so the far side sees EOF too.
	if tc, ok := dst.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	} else {
		dst.Close()
	}
}

// hop is what the proxy adds to one connection's round trips. A path through it crosses two
// loopback hops each way where a network crosses one, and wakes the proxy twice: without
// taking that off, a 0.8 ms cross-AZ round trip came out at 1.1 ms on a quiet two-core
// machine and 1.5–1.8 ms on a loaded one. The proxy sees the same cost on its upstream side:
// from writing a message to the echo server to reading the reply is one hop each way and one
// wake-up of a process, which is what the client's side adds. The fastest of the recent
// turns is taken off (half in each direction), so what is taken off is what the hop always
// costs, and never more than hopCap each way: on a loaded machine every turn waits for the
// echo server's process to be scheduled, and taking that off (a low decile, then even the
// fastest turn) put minimums up to 3.9 ms under the table. A busy machine shows as a longer
// round trip, never as one under the table.
// A turn of more than one chunk each way (a large message, or a second message sent before
// the reply) is not a hop's cost and is not counted. A nil hop takes nothing off.
//
// A one-chunk turn's reply also gets a credit: how late this proxy wrote the request, plus
// how much longer the far side took than its fastest recent turn. Both are this machine's
// scheduling, not the emulated network (a loaded machine wakes the proxy and the echo server
// late), and the reply's delay takes them in, so the round trip is what the links say. The
// floor stays: the round trip's fastest possible parts are all still in it, so the credit
// can take off only what was added beyond them (hop_test.go, the far side held 3 ms).
type hop struct {
	mu      sync.Mutex
	sent    time.Time     // when the open turn's message was written upstream (zero: none open)
	late    time.Duration // how long after its due time that message was written
	chunks  int           // chunks written upstream in the open turn
	turns   []time.Duration
	next    int
	oneWayN atomic.Int64
}

// hopTurns is how many recent turns the estimate comes from (half a minute at the demo's
// 2 rounds/s); hopCap is the most taken off each way, about what the extra loopback hop and
// wake-up cost on a quiet two-core machine.
const (
	hopTurns = 64
	hopCap   = 75 * time.Microsecond
	// hopGuard is left of the estimate each way: the client's side of a hop can run a few
	// microseconds faster than the fastest upstream turn (a corrected 0.8 ms round trip
	// once came in 4.7 µs under it in a clean-clone make test).
	hopGuard = 15 * time.Microsecond
)

// sending notes a chunk written upstream at now, late after its due time.
func (h *hop) sending(now time.Time, late time.Duration) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.sent.IsZero() {
		h.sent, h.late = now, max(late, 0)
	}
	h.chunks++
}

// replied notes a reply's chunk read at now and returns the credit its delay may take off
// (zero but for the first chunk of a one-chunk turn's reply).
func (h *hop) replied(now time.Time) time.Duration {
	if h == nil {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.sent.IsZero() {
		return 0 // the rest of a reply, or a reply to nothing this proxy timed
	}
	var credit time.Duration
	if h.chunks == 1 {
		turn := now.Sub(h.sent)
		credit = h.late + turn - h.note(turn)
	}
	h.sent, h.late, h.chunks = time.Time{}, 0, 0
	return credit
}

// note keeps a turn among the recent ones and returns the fastest of them.
func (h *hop) note(turn time.Duration) time.Duration {
	if len(h.turns) < hopTurns {
		h.turns = append(h.turns, turn)
	} else {
		h.turns[h.next] = turn
		h.next = (h.next + 1) % hopTurns
	}
	fastest := slices.Min(h.turns)
	h.oneWayN.Store(int64(max(min(fastest/2, hopCap)-hopGuard, 0)))
	return fastest
}

// oneWay is the share of the hop taken off each direction's delay.
func (h *hop) oneWay() time.Duration {
	if h == nil {
		return 0
	}
	return time.Duration(h.oneWayN.Load())
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

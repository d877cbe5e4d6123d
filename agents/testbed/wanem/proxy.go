package wanem

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"runtime"
	"sync"
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
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.forward(server, client, up, peek) }()
	go func() { defer wg.Done(); p.forward(client, server, down, nil) }()
	wg.Wait()
}

func noDelay(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
}

type chunk struct {
	b     []byte
	due   time.Time
	delay time.Duration // what the link added
}

// forward copies src to dst, each read held until its due time: its arrival plus the link's
// delay, never before the chunk ahead of it (a TCP stream stays in order), and with a
// bandwidth limit no sooner than the link can have carried it. first is sent ahead of the
// rest, stamped when the copy starts.
func (p *Proxy) forward(dst, src net.Conn, l *Link, first []byte) {
	q := make(chan chunk, queueChunks)
	go func() {
		defer close(q)
		var last, txFree time.Time
		stamp := func(b []byte) {
			now := time.Now()
			tx := now
			if l.BytesPerS > 0 {
				tx = maxTime(now, txFree).Add(time.Duration(float64(len(b)) / l.BytesPerS * float64(time.Second)))
				txFree = tx
			}
			due := maxTime(tx.Add(l.Delay(now)), last)
			last = due
			q <- chunk{b, due, due.Sub(now)}
		}
		if len(first) > 0 {
			stamp(first)
		}
		for {
			b := make([]byte, chunkBytes)
			n, err := src.Read(b)
			if n > 0 {
				stamp(b[:n])
			}
			if err != nil {
				return
			}
		}
	}()
	var t *time.Timer
	for c := range q {
		// The runtime's timers wake about a millisecond late here: sleep to just before the
		// due time, then yield until it (sub-millisecond intra-region paths stay true). On a
		// loaded machine a timer's wake-up is later still: chunks long enough to sleep aim
		// that much early (see noteLateness); only they teach the correction, and only to
		// their own link, so one path's delay or step never moves another's.
		timed := c.delay > 2*timerSlack
		target := c.due
		if timed {
			target = c.due.Add(-min(time.Duration(l.lateness.Load()), c.delay/2))
		}
		if wait := time.Until(target) - timerSlack; wait > 0 {
			if t == nil {
				t = time.NewTimer(wait)
			} else {
				t.Reset(wait)
			}
			<-t.C
		}
		for time.Now().Before(target) {
			runtime.Gosched()
		}
		if timed {
			l.noteLateness(time.Since(c.due))
		}
		if _, err := dst.Write(c.b); err != nil {
			src.Close()
			for range q {
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

// maxCompensation bounds the correction: a stall longer than this is the machine's, not a
// scheduling habit, and is left to show.
const maxCompensation = 20 * time.Millisecond

// noteLateness moves the link's correction by a 32nd of a write's lateness. Lateness is
// measured against the true due time, correction included, so the correction settles where
// writes are on time on average (an integral controller). Half a chunk's delay at most is
// ever taken off, so a short path keeps most of its delay whatever the machine does.
func (l *Link) noteLateness(late time.Duration) {
	next := l.lateness.Load() + int64(late)/32
	l.lateness.Store(min(max(next, 0), int64(maxCompensation)))
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

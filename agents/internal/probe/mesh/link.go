package mesh

import (
	"context"
	"crypto/rand"
	"errors"
	"io"
	mrand "math/rand/v2"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"stormwatch/agents/internal/sample"
)

// inflight is a message waiting for its outcome.
type inflight struct {
	seq   uint64
	round uint64
	sent  time.Time
	gen   uint64   // connection it was written to; 0 when it could not be written
	tr    *tracker // the tracker of the plan it was sent under
	skip  bool     // not sent: the link was not ready; only the quorum hears of it
	// st is why its connection is gone, once known (refused, reset); zero: a timeout.
	st sample.Status
}

// lossStatus is the status of a message without an echo: the reason the agent knows, else
// a timeout.
func lossStatus(e inflight) sample.Status {
	if e.st != sample.StatusOK {
		return e.st
	}
	return sample.StatusTimeout
}

// statusOf classifies a connection's failure as docs/methodology.md defines the statuses: a
// refused dial is 2, a reset by the peer 3 (another error); anything else, a stall or a dial
// that timed out, is a timeout.
func statusOf(err error) sample.Status {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return sample.StatusRefused
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return sample.StatusError
	}
	return sample.StatusTimeout
}

// ring is a FIFO of messages in flight; it grows only when full.
type ring struct {
	buf        []inflight
	head, size int
}

func (q *ring) push(e inflight) {
	if q.size == len(q.buf) {
		nb := make([]inflight, max(16, 2*len(q.buf)))
		for i := range q.size {
			nb[i] = q.buf[(q.head+i)%len(q.buf)]
		}
		q.buf, q.head = nb, 0
	}
	q.buf[(q.head+q.size)%len(q.buf)] = e
	q.size++
}

func (q *ring) front() *inflight { return &q.buf[q.head] }

func (q *ring) pop() inflight {
	e := q.buf[q.head]
	q.buf[q.head] = inflight{}
	q.head = (q.head + 1) % len(q.buf)
	q.size--
	return e
}

// link measures one peer over one connection at a time.
type link struct {
	p       *Prober
	peer    Peer
	peerID  [16]byte // the id the peer's replies must carry
	idx     uint16
	payload []byte // random, fixed for the link: echoes are compared against it
	size    int
	timeout time.Duration
	ctx     context.Context // ends dialing
	cancel  context.CancelFunc
	frame   []byte       // the next frame; pacer only
	slot    int          // the send instant of the current round; pacer only
	sortRTT int64        // rtt when the round was planned; pacer only
	rtt     atomic.Int64 // moving average of ok RTTs in nanoseconds, 0 before the first

	mu       sync.Mutex
	conn     *rawConn
	gen      uint64
	sentSeq  uint64
	recvSeq  uint64
	lastRecv time.Time
	q        ring
	down     sample.Status // why there is no connection: the last dial's or connection's failure
	ready    bool          // the first dial attempt is over
	dialing  bool
	busy     bool // a writer goroutine finishes a partial write
	stopping bool // draining: no more sends, closes when nothing is in flight
	closed   bool
}

func (p *Prober) newLink(pe Peer) *link {
	ctx, cancel := context.WithCancel(p.ctx)
	s := p.settings
	payload := make([]byte, s.PayloadBytes)
	_, _ = rand.Read(payload)
	frame := make([]byte, headerLen+s.PayloadBytes)
	copy(frame[headerLen:], payload)
	l := &link{p: p, peer: pe, peerID: senderBytes(pe.ID), idx: p.rec.PeerIndex(pe.ID), payload: payload, size: s.PayloadBytes,
		timeout: s.Timeout, frame: frame, ctx: ctx, cancel: cancel}
	p.liveMu.Lock()
	p.live[l] = struct{}{}
	p.liveMu.Unlock()
	p.wake()    // the reaper's next look must come within this link's timeout
	p.wg.Add(1) // done in finish
	l.mu.Lock()
	l.dialing = true
	l.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		// The first attempt before the first round, so a live peer is not a loss.
		ok := l.dial()
		l.mu.Lock()
		l.ready = true
		l.dialing = false
		l.mu.Unlock()
		if !ok {
			l.startDial()
		}
	}()
	return l
}

// send writes round r to the peer; it runs on the pacer and neither records nor waits.
func (l *link) send(r uint64, tr *tracker) {
	l.mu.Lock()
	c, gen := l.conn, l.gen
	if !l.ready {
		l.q.push(inflight{round: r, sent: time.Now(), tr: tr, skip: true})
		l.mu.Unlock()
		return
	}
	if c == nil || l.busy {
		// The message cannot be handed to the socket: a loss of this round, which the
		// reaper records, for the reason the connection is missing.
		e := inflight{round: r, sent: time.Now(), tr: tr}
		if c == nil {
			e.st = l.down
		}
		l.q.push(e)
		l.mu.Unlock()
		if c == nil {
			l.startDial()
		}
		return
	}
	putHeader(l.frame, l.size, r|askID, l.p.sender)
	seq := l.sentSeq
	l.sentSeq++
	// The clock starts here, with the frame ready, right before it is handed to the socket.
	l.q.push(inflight{seq: seq, round: r, sent: time.Now(), gen: gen, tr: tr})
	l.mu.Unlock()
	n, err := c.tryWrite(l.frame)
	switch {
	case err != nil:
		l.fail(gen, err)
	case n < len(l.frame):
		l.finishWrite(c, gen, n)
	}
}

// finishWrite writes the rest of a frame the socket took only in part, on its own goroutine
// (the peer reads slowly or not at all); the link sends nothing else meanwhile.
func (l *link) finishWrite(c *rawConn, gen uint64, n int) {
	rest := slices.Clone(l.frame[n:])
	l.mu.Lock()
	l.busy = true
	l.mu.Unlock()
	l.p.wg.Add(1)
	go func() {
		defer l.p.wg.Done()
		_ = c.SetWriteDeadline(time.Now().Add(l.timeout))
		if _, err := c.Write(rest); err != nil {
			l.fail(gen, err)
		}
		_ = c.SetWriteDeadline(time.Time{})
		l.mu.Lock()
		l.busy = false
		l.mu.Unlock()
	}()
}

// record writes the outcome of one message; never called on the pacer.
func (l *link) record(e inflight, rtt time.Duration, st sample.Status) {
	if !e.skip {
		l.p.rec.AddMesh(e.sent, e.round, l.size, l.idx, rtt, st)
	}
	switch {
	case e.skip:
		rtt = notAsked
	case st != sample.StatusOK:
		rtt = -1
	}
	e.tr.report(l.idx, e.round, rtt)
}

// dead reports whether e's connection is gone (or it never had one). Caller holds mu.
func (l *link) dead(e *inflight) bool {
	return e.skip || e.gen == 0 || e.gen != l.gen || l.conn == nil
}

// expire records the messages whose outcome is known by now: those past the timeout and those
// whose connection is gone. It resets a connection that answered nothing for three timeouts,
// and closes a draining link with nothing left in flight. It returns when the next message
// expires (zero when none is in flight).
func (l *link) expire(now time.Time) time.Time {
	l.mu.Lock()
	lost := false
	for l.q.size > 0 {
		e := l.q.front()
		if !l.dead(e) && now.Sub(e.sent) <= l.timeout {
			break
		}
		x := l.q.pop()
		lost = lost || !x.skip
		st := sample.StatusTimeout
		if l.dead(&x) {
			st = lossStatus(x)
		}
		l.mu.Unlock()
		l.record(x, 0, st)
		l.mu.Lock()
	}
	var next time.Time
	if l.q.size > 0 {
		next = l.q.front().sent.Add(l.timeout)
	}
	stalled := l.conn != nil && lost && now.Sub(l.lastRecv) > 3*l.timeout
	gen := l.gen
	done := l.stopping && l.q.size == 0 && !l.busy
	l.mu.Unlock()
	if stalled {
		l.fail(gen, io.ErrNoProgress)
		l.p.wake()
	}
	if done {
		l.finish()
	}
	return next
}

// fail ends the connection of generation gen; what was in flight on it is lost, which the
// reaper records. The socket is shut down, not closed: only its reader closes it, since a
// close waits for every call in progress on it, the reader's included.
func (l *link) fail(gen uint64, err error) {
	l.mu.Lock()
	if l.gen != gen || l.conn == nil {
		l.mu.Unlock()
		return
	}
	c := l.conn
	l.conn = nil
	l.p.connected.Add(-1)
	stopping := l.stopping
	// What was in flight on it is lost for the reason it failed.
	st := statusOf(err)
	l.down = st
	for i := range l.q.size {
		if e := &l.q.buf[(l.q.head+i)%len(l.q.buf)]; e.gen == gen {
			e.st = st
		}
	}
	l.mu.Unlock()
	c.shutdown()
	l.p.log.Debug("mesh connection lost", "peer", l.peer.Name, "address", l.peer.Address, "err", err)
	l.p.wake()
	if !stopping {
		l.startDial()
	}
}

// beginDrain stops the link from being sent to and from dialing; it closes once every
// message in flight has an outcome.
func (l *link) beginDrain() {
	l.mu.Lock()
	if l.stopping {
		l.mu.Unlock()
		return
	}
	l.stopping = true
	l.mu.Unlock()
	l.cancel()
	l.p.wake()
}

// finish closes a drained link.
func (l *link) finish() {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	c := l.conn
	l.conn = nil
	l.gen++
	l.mu.Unlock()
	if c != nil {
		c.shutdown() // its reader closes it
		l.p.connected.Add(-1)
	}
	l.p.liveMu.Lock()
	delete(l.p.live, l)
	l.p.liveMu.Unlock()
	l.p.wg.Done()
}

func (l *link) startDial() {
	l.mu.Lock()
	if l.dialing || l.conn != nil || l.stopping || l.ctx.Err() != nil {
		l.mu.Unlock()
		return
	}
	l.dialing = true
	l.mu.Unlock()
	l.p.wg.Add(1)
	go func() {
		defer l.p.wg.Done()
		l.redial()
	}()
}

// redial reconnects with exponential backoff and jitter until it succeeds or the link stops.
func (l *link) redial() {
	backoff := 50 * time.Millisecond
	for {
		jitter := time.Duration(mrand.Int64N(int64(backoff)/2 + 1))
		t := time.NewTimer(backoff/2 + jitter)
		select {
		case <-l.ctx.Done():
			t.Stop()
			l.mu.Lock()
			l.dialing = false
			l.mu.Unlock()
			return
		case <-t.C:
		}
		if l.dial() {
			l.mu.Lock()
			l.dialing = false
			l.mu.Unlock()
			return
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// dial opens a connection and starts its reader; it reports whether it succeeded.
func (l *link) dial() bool {
	d := net.Dialer{Timeout: min(l.timeout, 3*time.Second), KeepAlive: 15 * time.Second}
	c, err := d.DialContext(l.ctx, "tcp", l.peer.Address)
	if err != nil {
		l.p.log.Debug("mesh dial failed", "peer", l.peer.Name, "address", l.peer.Address, "err", err)
		l.mu.Lock()
		l.down = statusOf(err)
		l.mu.Unlock()
		return false
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	rc, err := newRawConn(c)
	if err != nil {
		c.Close()
		return false
	}
	l.mu.Lock()
	if l.stopping || l.closed {
		l.mu.Unlock()
		c.Close()
		return false
	}
	l.gen++
	l.conn, l.sentSeq, l.recvSeq, l.lastRecv = rc, 0, 0, time.Now()
	gen := l.gen
	l.p.wg.Add(1) // under mu, before stopping can be set and the link finish
	l.mu.Unlock()
	l.p.connected.Add(1)
	l.p.wake() // what was queued without a connection is now known lost
	go func() {
		defer l.p.wg.Done()
		l.read(rc, gen)
	}()
	return true
}

var errStale = errors.New("mesh: connection replaced")

// read matches echoes to sent messages: TCP keeps order, so the i-th echo answers the i-th
// message of the connection. It records what it matches, on its own goroutine.
func (l *link) read(c *rawConn, gen uint64) {
	flen := headerLen + l.size
	fr := newFrameReader(c, max(16<<10, 2*flen))
	consume := func(b []byte, now time.Time) (int, int, error) {
		used := 0
		for len(b)-used >= flen {
			f := b[used : used+flen]
			used += flen
			e, found, err := l.match(gen, now)
			if err != nil {
				return used, flen, err
			}
			if !found {
				continue // the reply of a message already recorded as lost
			}
			chk := checkEcho(f, l.size, e.round, l.p.sender, l.peerID, l.payload)
			l.noteEcho(chk, now)
			switch {
			case chk.st != sample.StatusOK:
				// Not the peer's echo of this message: a loss with its reason, never an RTT.
				l.record(e, 0, chk.st)
				if chk.resync {
					return used, flen, io.ErrUnexpectedEOF // framing is lost: start a clean connection
				}
			case now.Sub(e.sent) > l.timeout:
				// Back, but not within the timeout: a loss like one that never came back.
				l.record(e, 0, sample.StatusTimeout)
			default:
				rtt := now.Sub(e.sent)
				l.record(e, rtt, sample.StatusOK)
				if avg := l.rtt.Load(); avg == 0 {
					l.rtt.Store(int64(rtt))
				} else {
					l.rtt.Store(avg + (int64(rtt)-avg)/8)
				}
			}
		}
		l.mu.Lock()
		done := l.stopping && l.q.size == 0 && !l.busy && l.gen == gen
		l.mu.Unlock()
		if done {
			l.finish()
			return used, flen, errStale
		}
		return used, flen, nil
	}
	err := fr.loop(consume)
	if err != errStale {
		l.fail(gen, err)
	}
	c.Close()
}

// match takes the message the next echo of connection gen answers, recording on the way the
// messages ahead of it whose connection is gone.
func (l *link) match(gen uint64, now time.Time) (inflight, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gen != gen {
		return inflight{}, false, errStale
	}
	seq := l.recvSeq
	l.recvSeq++
	l.lastRecv = now
	for l.q.size > 0 {
		e := l.q.front()
		if !l.dead(e) {
			if e.seq != seq {
				return inflight{}, false, nil
			}
			return l.q.pop(), true, nil
		}
		x := l.q.pop()
		l.mu.Unlock()
		l.record(x, 0, lossStatus(x))
		l.mu.Lock()
		if l.gen != gen {
			return inflight{}, false, errStale
		}
	}
	return inflight{}, false, nil
}

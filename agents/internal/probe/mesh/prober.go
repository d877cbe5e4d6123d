package mesh

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"stormwatch/agents/internal/sample"
)

// Peer is one destination of the mesh, the agent itself included.
type Peer struct {
	ID       string
	Name     string
	Address  string
	Provider string
	Region   string
	Zone     string
	Subnet   string
}

// Settings are the mesh parameters of the server's config.
type Settings struct {
	Enabled      bool
	RateHz       float64
	PayloadBytes int
	Timeout      time.Duration
	Peers        []Peer
	Groups       []Group
}

func (s Settings) timing() [3]float64 {
	return [3]float64{s.RateHz, float64(s.PayloadBytes), float64(s.Timeout)}
}

// roundClock maps round numbers to their nominal start times on the monotonic clock.
type roundClock struct {
	epoch      time.Time // start of firstRound; carries a monotonic reading
	period     time.Duration
	firstRound uint64
}

func (c *roundClock) start(r uint64) time.Time {
	return c.epoch.Add(time.Duration(r-c.firstRound) * c.period)
}

// SendMode is how sends are placed within a round.
type SendMode int

const (
	// Spread gives every link its own random phase within the round: replies come back one
	// at a time, at the cost of one timer wakeup per message.
	Spread SendMode = iota
	// Broadcast sends to every peer back to back, in a random order, at a random point of
	// each round (a fresh one every round, so agents never stay in lockstep): one wakeup per
	// round, as StormCloud broadcasts.
	Broadcast
)

// Prober runs the sending side of the mesh: one link per peer.
type Prober struct {
	selfID string
	sender [16]byte
	rec    *Recorder
	log    *slog.Logger

	mu        sync.Mutex
	ctx       context.Context
	settings  Settings
	clock     *roundClock
	tracker   atomic.Pointer[tracker]
	links     map[string]*link
	nextRound uint64 // first round of the next clock
	running   bool
	selfAddr  string // where the self-loop dials, when not the advertised address
	mode      SendMode
	bc        *broadcaster

	connected atomic.Int64
}

// NewProber returns a prober for the agent selfID that records into rec.
func NewProber(selfID string, rec *Recorder, log *slog.Logger) *Prober {
	return &Prober{selfID: selfID, sender: senderBytes(selfID), rec: rec, log: log,
		links: map[string]*link{}, nextRound: 1}
}

// Run keeps the mesh going with the latest settings until ctx ends.
func (p *Prober) Run(ctx context.Context) error {
	p.mu.Lock()
	p.ctx = ctx
	p.running = true
	p.reconfigure(p.settings, true)
	p.mu.Unlock()
	<-ctx.Done()
	p.mu.Lock()
	p.stopLinks()
	p.running = false
	p.mu.Unlock()
	return nil
}

// Apply switches to new settings while running: peers are added and removed one by one;
// a change of rate, payload or timeout restarts every link on a new round clock.
func (p *Prober) Apply(s Settings) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.running {
		p.settings = s
		return
	}
	full := s.timing() != p.settings.timing() || s.Enabled != p.settings.Enabled
	p.reconfigure(s, full)
}

// SetSendMode chooses how sends are placed in the round; it applies to links started later.
func (p *Prober) SetSendMode(m SendMode) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode = m
}

// SetSelfAddress makes the self-loop dial addr instead of the advertised address (which may
// be a public IP that would hairpin through a NAT); it is still a real TCP connection.
func (p *Prober) SetSelfAddress(addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.selfAddr = addr
}

// Connected is the number of peers with an open connection.
func (p *Prober) Connected() int64 { return p.connected.Load() }

// reconfigure applies s. Caller holds mu.
func (p *Prober) reconfigure(s Settings, full bool) {
	p.settings = s
	if full {
		p.stopLinks()
	}
	if !s.Enabled || s.RateHz <= 0 || s.PayloadBytes < 0 || s.PayloadBytes > maxPayloadBytes || s.Timeout <= 0 {
		p.stopLinks()
		p.tracker.Store(nil)
		return
	}
	if full || p.clock == nil {
		period := time.Duration(float64(time.Second) / s.RateHz)
		// Agents stagger their start by a random fraction of a round.
		p.clock = &roundClock{epoch: time.Now().Add(period + time.Duration(mrand.Int64N(int64(period)))),
			period: period, firstRound: p.nextRound}
	}
	peerSet := map[string]bool{}
	for _, pe := range s.Peers {
		peerSet[pe.ID] = true
	}
	timeoutRounds := int(s.Timeout/p.clock.period) + 1
	p.tracker.Store(newTracker(s.Groups, peerSet, p.rec, p.clock, s.PayloadBytes, max(256, 4*timeoutRounds+16)))

	for id, l := range p.links {
		if !peerSet[id] {
			l.stop()
			delete(p.links, id)
		}
	}
	for _, pe := range s.Peers {
		if pe.ID == p.selfID && p.selfAddr != "" {
			pe.Address = p.selfAddr
		}
		if l, ok := p.links[pe.ID]; ok {
			if l.peer.Address == pe.Address {
				continue
			}
			l.stop()
		}
		l := p.newLink(pe)
		p.links[pe.ID] = l
		go l.run()
	}
	if p.mode == Broadcast {
		if p.bc == nil {
			p.bc = startBroadcaster(p.ctx, p.clock, s.Timeout)
		}
		ls := make([]*link, 0, len(p.links))
		for _, l := range p.links {
			ls = append(ls, l)
		}
		p.bc.links.Store(&ls)
	}
}

// stopLinks ends every link and remembers where the round numbering stopped. Caller holds mu.
func (p *Prober) stopLinks() {
	if p.bc != nil {
		p.bc.stop()
		p.bc = nil
	}
	for id, l := range p.links {
		l.stop()
		delete(p.links, id)
	}
	if p.clock != nil {
		if now := time.Now(); now.After(p.clock.epoch) {
			p.nextRound = max(p.nextRound, p.clock.firstRound+uint64(now.Sub(p.clock.epoch)/p.clock.period)+2)
		}
	}
}

type inflight struct {
	seq   uint64
	round uint64
	sent  time.Time
}

// link measures one peer: a sender loop on the round clock, a reader per connection.
type link struct {
	p         *Prober
	peer      Peer
	idx       uint16
	clock     *roundClock
	payload   []byte // random, fixed for the link: echoes are compared against it
	size      int
	timeout   time.Duration
	phase     time.Duration
	ctx       context.Context
	cancel    context.CancelFunc
	done      chan struct{}
	sl        *sleeper       // the sending goroutine waits on it; stop closes it
	frame     []byte         // the next frame; only the sending goroutine touches it
	wdGen     uint64         // connection whose write deadline was last extended; sender only
	wdRefresh time.Time      // when the sender next extends the write deadline
	ready     atomic.Bool    // the first dial attempt is over
	bcast     bool           // a broadcaster sends for this link
	readers   sync.WaitGroup // stop waits for them, so nothing is recorded for a removed peer

	mu       sync.Mutex
	conn     *rawConn
	gen      uint64
	sentSeq  uint64
	recvSeq  uint64
	lastRecv time.Time
	queue    []inflight
	dialing  bool
	stopped  bool
}

func (p *Prober) newLink(pe Peer) *link {
	ctx, cancel := context.WithCancel(p.ctx)
	s := p.settings
	payload := make([]byte, s.PayloadBytes)
	_, _ = rand.Read(payload)
	frame := make([]byte, headerLen+s.PayloadBytes)
	copy(frame[headerLen:], payload)
	return &link{p: p, peer: pe, idx: p.rec.PeerIndex(pe.ID), clock: p.clock, payload: payload,
		size: s.PayloadBytes, timeout: s.Timeout, frame: frame, bcast: p.mode == Broadcast,
		// Each link sends at its own random point of the round so that neither one agent's
		// sends nor different agents' sends line up (seed 003 saw timer alignment move p50).
		phase: time.Duration(mrand.Int64N(int64(p.clock.period))),
		ctx:   ctx, cancel: cancel, done: make(chan struct{}), sl: newSleeper()}
}

func (l *link) stop() {
	l.cancel()
	l.sl.Close()
	<-l.done
	l.closeConn()
	l.readers.Wait()
}

func (l *link) record(sent time.Time, round uint64, rtt time.Duration, st sample.Status) {
	l.p.rec.AddMesh(sent, round, l.size, l.idx, rtt, st)
	if st != sample.StatusOK {
		rtt = -1
	}
	l.p.tracker.Load().report(l.peer.ID, round, rtt)
}

func (l *link) run() {
	defer close(l.done)
	l.dial() // the first attempt before the first round, so a live peer is not a loss
	l.ready.Store(true)
	if l.bcast {
		<-l.ctx.Done()
		return
	}
	frame := l.frame
	now := time.Now()
	r := l.clock.firstRound
	if now.After(l.clock.epoch) {
		r += uint64(now.Sub(l.clock.epoch)/l.clock.period) + 1
	}
	for {
		at := l.clock.start(r).Add(l.phase)
		_ = l.sl.sleep(time.Until(at)) // an error is a stop, seen below
		if l.ctx.Err() != nil {
			return
		}
		l.expire(time.Now())
		l.send(frame, r)
		r++
		// After a stall longer than the timeout (a suspended VM), resume at the current round
		// instead of bursting the backlog; the skipped rounds were never sent.
		if behind := time.Since(l.clock.start(r).Add(l.phase)); behind > l.timeout && behind > 10*l.clock.period {
			r += uint64(behind / l.clock.period)
		}
	}
}

func (l *link) send(frame []byte, r uint64) {
	l.mu.Lock()
	c, gen := l.conn, l.gen
	if c == nil {
		l.mu.Unlock()
		// No connection: the message cannot reach the peer, which is a loss of this round.
		l.record(time.Now(), r, 0, sample.StatusTimeout)
		l.startDial()
		return
	}
	putHeader(frame, l.size, r, l.p.sender)
	seq := l.sentSeq
	l.sentSeq++
	// The clock starts here, with the frame ready, right before it is handed to the socket.
	t := time.Now()
	l.queue = append(l.queue, inflight{seq: seq, round: r, sent: t})
	l.mu.Unlock()
	wd := l.timeout
	if l.bcast {
		// One goroutine writes for every peer: a peer that stopped reading must not hold up
		// the others for long.
		wd = min(wd, l.clock.period)
	}
	// A write deadline is a runtime timer to re-arm: set one of 2 wd at most once every wd,
	// which still gives every write between wd and 2 wd, rather than one per write.
	if gen != l.wdGen || t.After(l.wdRefresh) {
		_ = c.SetWriteDeadline(t.Add(2 * wd))
		l.wdGen, l.wdRefresh = gen, t.Add(wd)
	}
	if _, err := c.Write(frame); err != nil {
		l.fail(gen, err)
	}
}

// expire turns messages older than the timeout into loss samples, and resets a connection
// that has answered nothing for three timeouts.
func (l *link) expire(now time.Time) {
	l.mu.Lock()
	var lost []inflight
	for len(l.queue) > 0 && now.Sub(l.queue[0].sent) > l.timeout {
		lost = append(lost, l.queue[0])
		l.queue = l.queue[1:]
	}
	stalled := l.conn != nil && len(lost) > 0 && now.Sub(l.lastRecv) > 3*l.timeout
	gen := l.gen
	l.mu.Unlock()
	for _, e := range lost {
		l.record(e.sent, e.round, 0, sample.StatusTimeout)
	}
	if stalled {
		l.fail(gen, io.ErrNoProgress)
	}
}

// fail closes the connection of generation gen; what was in flight on it is lost.
func (l *link) fail(gen uint64, err error) {
	l.mu.Lock()
	if l.gen != gen || l.conn == nil {
		l.mu.Unlock()
		return
	}
	l.conn.Close()
	l.conn = nil
	l.p.connected.Add(-1)
	lost := l.queue
	l.queue = nil
	l.mu.Unlock()
	l.p.log.Debug("mesh connection lost", "peer", l.peer.Name, "address", l.peer.Address, "err", err)
	for _, e := range lost {
		l.record(e.sent, e.round, 0, sample.StatusTimeout)
	}
	l.startDial()
}

func (l *link) closeConn() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopped = true
	if l.conn != nil {
		l.conn.Close()
		l.conn = nil
		l.p.connected.Add(-1)
	}
	l.gen++
}

func (l *link) startDial() {
	l.mu.Lock()
	if l.dialing || l.conn != nil || l.ctx.Err() != nil {
		l.mu.Unlock()
		return
	}
	l.dialing = true
	l.mu.Unlock()
	go l.redial()
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
	if l.stopped || l.ctx.Err() != nil {
		l.mu.Unlock()
		c.Close()
		return false
	}
	l.gen++
	l.conn, l.sentSeq, l.recvSeq, l.queue, l.lastRecv = rc, 0, 0, nil, time.Now()
	gen := l.gen
	l.readers.Add(1) // under mu and before stopped is set, so stop's Wait sees it
	l.mu.Unlock()
	l.p.connected.Add(1)
	go l.read(rc, gen)
	return true
}

// read matches echoes to sent messages: TCP keeps order, so the i-th echo answers the i-th
// message of the connection.
func (l *link) read(c *rawConn, gen uint64) {
	defer l.readers.Done()
	br := bufio.NewReaderSize(c, max(64<<10, 2*(headerLen+l.size)))
	buf := make([]byte, headerLen+l.size)
	want := make([]byte, headerLen)
	for {
		_, err := io.ReadFull(br, buf)
		now := time.Now()
		if err != nil {
			l.fail(gen, err)
			return
		}
		l.mu.Lock()
		if l.gen != gen {
			l.mu.Unlock()
			return
		}
		seq := l.recvSeq
		l.recvSeq++
		l.lastRecv = now
		var e inflight
		found := len(l.queue) > 0 && l.queue[0].seq == seq
		if found {
			e = l.queue[0]
			l.queue = l.queue[1:]
		}
		l.mu.Unlock()
		if !found {
			continue // the reply of a message already recorded as lost
		}
		putHeader(want, l.size, e.round, l.p.sender)
		if bytes.Equal(buf[:headerLen], want) && bytes.Equal(buf[headerLen:], l.payload) {
			l.record(e.sent, e.round, now.Sub(e.sent), sample.StatusOK)
			continue
		}
		l.record(e.sent, e.round, 0, sample.StatusCorrupt)
		if binary.BigEndian.Uint32(buf[0:4]) != frameMagic {
			l.fail(gen, io.ErrUnexpectedEOF) // framing is lost: start a clean connection
			return
		}
	}
}

// SortedPeerIDs lists peer ids in order; used to compare configurations.
func SortedPeerIDs(ps []Peer) []string {
	ids := make([]string, 0, len(ps))
	for _, p := range ps {
		ids = append(ids, p.ID)
	}
	slices.Sort(ids)
	return ids
}

// broadcaster sends one round to every link at a random point of each round.
type broadcaster struct {
	links  atomic.Pointer[[]*link]
	cancel context.CancelFunc
	done   chan struct{}
	sl     *sleeper
}

func startBroadcaster(parent context.Context, clock *roundClock, timeout time.Duration) *broadcaster {
	ctx, cancel := context.WithCancel(parent)
	b := &broadcaster{cancel: cancel, done: make(chan struct{}), sl: newSleeper()}
	go b.run(ctx, clock, timeout)
	return b
}

func (b *broadcaster) stop() {
	b.cancel()
	b.sl.Close()
	<-b.done
}

func (b *broadcaster) run(ctx context.Context, clock *roundClock, timeout time.Duration) {
	defer close(b.done)
	r := clock.firstRound
	if now := time.Now(); now.After(clock.epoch) {
		r += uint64(now.Sub(clock.epoch)/clock.period) + 1
	}
	var order []int
	for {
		offset := time.Duration(mrand.Int64N(int64(clock.period)))
		_ = b.sl.sleep(time.Until(clock.start(r).Add(offset))) // an error is a stop, seen below
		if ctx.Err() != nil {
			return
		}
		ls := *b.links.Load()
		order = order[:0]
		for i := range ls {
			order = append(order, i)
		}
		mrand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		now := time.Now()
		for _, i := range order {
			l := ls[i]
			if !l.ready.Load() || l.ctx.Err() != nil {
				continue
			}
			l.expire(now)
			l.send(l.frame, r)
		}
		r++
		if behind := time.Since(clock.start(r)); behind > timeout && behind > 10*clock.period {
			r += uint64(behind / clock.period)
		}
	}
}

package mesh

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"log/slog"
	"math"
	mrand "math/rand/v2"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
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
	// Spread sends at DefaultSlots random instants of each round, drawn afresh every round,
	// each peer at one of them chosen at random: a peer's send time is uniform over the round
	// and independent from round to round and from agent to agent, so agents never send in
	// lockstep, while the agent wakes DefaultSlots times a round instead of once per peer.
	Spread SendMode = iota
	// Broadcast sends to every peer back to back at one random instant of each round, as
	// StormCloud broadcasts.
	Broadcast
)

// DefaultSlots is the number of send instants per round in Spread mode.
const DefaultSlots = 2

// Prober runs the sending side of the mesh. One pacer goroutine sends every round on one
// timer; one reader goroutine per connection matches echoes; one reaper goroutine records
// the messages whose reply did not come back within the timeout. The pacer never records.
type Prober struct {
	selfID string
	sender [16]byte
	rec    *Recorder
	log    *slog.Logger

	mu        sync.Mutex
	ctx       context.Context
	settings  Settings
	clock     *roundClock
	links     map[string]*link // the links of the latest plan
	pc        *pacer
	nextRound uint64 // first round of the next clock
	running   bool
	selfAddr  string // where the self-loop dials, when not the advertised address
	mode      SendMode
	slots     int

	planMu sync.Mutex
	next   *plan   // published by reconfigure, taken by the pacer at a round boundary
	drop   []*link // links left out of the plans published since the pacer last took one

	liveMu sync.Mutex
	live   map[*link]struct{} // links not closed yet: the reaper's set
	nudge  chan struct{}
	wg     sync.WaitGroup // links, readers and dialers: Run waits for them

	connected atomic.Int64

	idLog      identityLog
	unverified atomic.Uint64 // ok replies from echo servers that do not sign them
	wrongPeer  atomic.Uint64 // replies signed by another agent than the peer
}

// plan is what the pacer sends from a round on: its links and the tracker of their groups.
type plan struct {
	links []*link
	tr    *tracker
}

// NewProber returns a prober for the agent selfID that records into rec.
func NewProber(selfID string, rec *Recorder, log *slog.Logger) *Prober {
	return &Prober{selfID: selfID, sender: senderBytes(selfID), rec: rec, log: log,
		links: map[string]*link{}, nextRound: 1, slots: DefaultSlots, live: map[*link]struct{}{},
		nudge: make(chan struct{}, 1)}
}

// Run keeps the mesh going with the latest settings until ctx ends. Then it stops sending and
// waits until every message in flight has its outcome (at most the timeout), so that none
// vanishes unrecorded.
func (p *Prober) Run(ctx context.Context) error {
	reapCtx, stopReap := context.WithCancel(context.Background())
	reaped := make(chan struct{})
	go func() { defer close(reaped); p.reap(reapCtx) }()
	p.mu.Lock()
	p.ctx = ctx
	p.running = true
	p.reconfigure(p.settings, true)
	p.mu.Unlock()
	<-ctx.Done()
	p.mu.Lock()
	p.stopAll()
	p.running = false
	p.mu.Unlock()
	p.wg.Wait()
	stopReap()
	<-reaped
	return nil
}

// Apply switches to new settings while running: peers are added and removed one by one from
// the next round on; a change of rate, payload or timeout restarts every link on a new round
// clock. Links that leave drain: their messages in flight still get a reply or a loss.
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

// SetSendMode chooses how sends are placed in the round; it applies from the next clock.
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

// liveLinks is the number of links not closed yet, draining ones included.
func (p *Prober) liveLinks() int {
	p.liveMu.Lock()
	defer p.liveMu.Unlock()
	return len(p.live)
}

// Connected is the number of peers with an open connection.
func (p *Prober) Connected() int64 { return p.connected.Load() }

// UnverifiedReplies is the number of replies accepted without the peer's id.
func (p *Prober) UnverifiedReplies() uint64 { return p.unverified.Load() }

// WrongPeerReplies is the number of replies signed by another agent than the peer.
func (p *Prober) WrongPeerReplies() uint64 { return p.wrongPeer.Load() }

func validSettings(s Settings) bool {
	return s.Enabled && s.RateHz > 0 && s.PayloadBytes >= 0 && s.PayloadBytes <= maxPayloadBytes && s.Timeout > 0
}

// reconfigure applies s. Caller holds mu.
func (p *Prober) reconfigure(s Settings, full bool) {
	p.settings = s
	if full || !validSettings(s) {
		p.stopAll()
	}
	if !validSettings(s) {
		return
	}
	if p.pc == nil {
		period := time.Duration(float64(time.Second) / s.RateHz)
		// Agents stagger their start by a random fraction of a round.
		p.clock = &roundClock{epoch: time.Now().Add(period + time.Duration(mrand.Int64N(int64(period)))),
			period: period, firstRound: p.nextRound}
	}
	ids := map[string]uint16{}
	var removed []*link
	keep := map[string]*link{}
	for _, pe := range s.Peers {
		if pe.ID == p.selfID && p.selfAddr != "" {
			pe.Address = p.selfAddr
		}
		ids[pe.ID] = p.rec.PeerIndex(pe.ID)
		if l, ok := p.links[pe.ID]; ok && l.peer.Address == pe.Address {
			keep[pe.ID] = l
			continue
		}
		keep[pe.ID] = p.newLink(pe)
	}
	for id, l := range p.links {
		if keep[id] != l {
			removed = append(removed, l)
		}
	}
	p.links = keep
	pl := &plan{links: make([]*link, 0, len(keep))}
	for _, pe := range s.Peers {
		if l := keep[pe.ID]; l != nil && !slices.Contains(pl.links, l) {
			pl.links = append(pl.links, l)
		}
	}
	timeoutRounds := int(s.Timeout/p.clock.period) + 1
	pl.tr = newTracker(s.Groups, ids, p.rec, p.clock, s.PayloadBytes, max(256, 4*timeoutRounds+16))
	p.planMu.Lock()
	p.next = pl
	p.drop = append(p.drop, removed...)
	p.planMu.Unlock()
	if p.pc == nil {
		slots := p.slots
		if p.mode == Broadcast {
			slots = 1
		}
		p.pc = startPacer(p, p.clock, s.Timeout, slots)
	}
}

// stopAll stops the pacer, lets every link drain and remembers where the round numbering
// stopped. Caller holds mu.
func (p *Prober) stopAll() {
	if p.pc != nil {
		p.pc.stop()
		p.pc = nil
	}
	p.planMu.Lock()
	drop := p.drop
	p.next, p.drop = nil, nil
	p.planMu.Unlock()
	for _, l := range drop {
		l.beginDrain()
	}
	for id, l := range p.links {
		l.beginDrain()
		delete(p.links, id)
	}
	if p.clock != nil {
		if now := time.Now(); now.After(p.clock.epoch) {
			p.nextRound = max(p.nextRound, p.clock.firstRound+uint64(now.Sub(p.clock.epoch)/p.clock.period)+2)
		}
	}
}

// takePlan returns the plan published since the last call, or nil, and drains the links
// that left. Pacer goroutine only.
func (p *Prober) takePlan() *plan {
	p.planMu.Lock()
	pl, drop := p.next, p.drop
	p.next, p.drop = nil, nil
	p.planMu.Unlock()
	for _, l := range drop {
		l.beginDrain()
	}
	return pl
}

// wake makes the reaper look at every link now.
func (p *Prober) wake() {
	select {
	case p.nudge <- struct{}{}:
	default:
	}
}

// pacer sends rounds on one timer. For every round it draws the send instants afresh and
// assigns each link to one of them at random; the links of one instant are sent back to
// back, the farthest first.
type pacer struct {
	p       *Prober
	clock   *roundClock
	timeout time.Duration
	slots   int
	tk      *ticker
	done    chan struct{}

	pl      *plan
	round   uint64
	started bool
	offs    []time.Duration // the round's send instants, sorted
	order   []*link         // the round's links in send order
	at      []time.Time     // when each of order is sent
	next    int             // the next of order to send
}

func startPacer(p *Prober, clock *roundClock, timeout time.Duration, slots int) *pacer {
	pc := &pacer{p: p, clock: clock, timeout: timeout, slots: slots, tk: newTicker(), done: make(chan struct{})}
	go func() {
		defer close(pc.done)
		pc.tk.run(pc.step)
	}()
	return pc
}

func (pc *pacer) stop() {
	pc.tk.Close()
	<-pc.done
}

// step sends what is due at now and returns how long to wait for the next send.
func (pc *pacer) step(now time.Time) time.Duration {
	for {
		if pc.next == len(pc.order) {
			pc.planRound(now)
			if len(pc.order) == 0 {
				return max(pc.clock.start(pc.round+1).Sub(now), time.Microsecond)
			}
		}
		if d := pc.at[pc.next].Sub(now); d > 0 {
			return d
		}
		pc.order[pc.next].send(pc.round, pc.pl.tr)
		pc.next++
		now = time.Now()
	}
}

// planRound moves to the next round: the latest plan, fresh send instants and assignment.
func (pc *pacer) planRound(now time.Time) {
	c := pc.clock
	if !pc.started {
		pc.started = true
		pc.round = c.firstRound
		if now.After(c.epoch) {
			pc.round += uint64(now.Sub(c.epoch)/c.period) + 1
		}
	} else {
		pc.round++
		// After a stall longer than the timeout (a suspended VM), resume at the current round
		// instead of bursting the backlog; the skipped rounds were never sent.
		if behind := now.Sub(c.start(pc.round)); behind > pc.timeout && behind > 10*c.period {
			pc.round += uint64(behind / c.period)
		}
	}
	if pl := pc.p.takePlan(); pl != nil {
		pc.pl = pl
	}
	pc.order, pc.at, pc.next = pc.order[:0], pc.at[:0], 0
	if pc.pl == nil || len(pc.pl.links) == 0 {
		return
	}
	ls := pc.pl.links
	s := min(pc.slots, len(ls))
	pc.offs = pc.offs[:0]
	for range s {
		pc.offs = append(pc.offs, time.Duration(mrand.Int64N(int64(c.period))))
	}
	slices.Sort(pc.offs)
	start := c.start(pc.round)
	// A random slot per link; within a slot the farthest peers first: a reply that comes back
	// before the rest of its burst is written is read only after it, which would add our own
	// sends to its RTT, so the fastest links (the self-loop above all) go last. Ties in a
	// random order.
	pc.order = append(pc.order, ls...)
	mrand.Shuffle(len(pc.order), func(i, j int) { pc.order[i], pc.order[j] = pc.order[j], pc.order[i] })
	for _, l := range pc.order {
		l.slot = mrand.IntN(s)
		l.sortRTT = l.rtt.Load()
		if l.sortRTT == 0 {
			l.sortRTT = math.MaxInt64 // not measured yet: possibly far
		}
	}
	slices.SortStableFunc(pc.order, func(a, b *link) int {
		if a.slot != b.slot {
			return a.slot - b.slot
		}
		return cmp.Compare(b.sortRTT, a.sortRTT)
	})
	for _, l := range pc.order {
		pc.at = append(pc.at, start.Add(pc.offs[l.slot]))
	}
}

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

// reap records losses: it looks at every link when the next message expires, when a
// connection fails, and when links start draining.
func (p *Prober) reap(ctx context.Context) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	var ls []*link
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.nudge:
		case <-t.C:
		}
		now := time.Now()
		ls = ls[:0]
		p.liveMu.Lock()
		for l := range p.live {
			ls = append(ls, l)
		}
		p.liveMu.Unlock()
		wait := time.Hour
		for _, l := range ls {
			// A message sent after this pass expires a timeout from now at the earliest.
			wait = min(wait, l.timeout)
			if next := l.expire(now); !next.IsZero() {
				wait = min(wait, next.Sub(now)+time.Microsecond)
			}
		}
		t.Reset(max(wait, time.Microsecond))
	}
}

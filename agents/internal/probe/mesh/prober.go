package mesh

import (
	"context"
	"log/slog"
	mrand "math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"
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

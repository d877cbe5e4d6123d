package mesh

import (
	"cmp"
	"math"
	mrand "math/rand/v2"
	"slices"
	"time"
)

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

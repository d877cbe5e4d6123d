// Package wanem is a user-space WAN emulator for the demo fleet: TCP proxies that hold every
// chunk of a stream for a per-pair one-way delay (half a round trip from a table of public
// inter-region figures) with jitter, rare tail spikes (seed 003 Lesson 3) and level steps at
// random times (Lesson 11), and optionally a bandwidth limit (storage endpoints). It sits
// between agents, never inside one: an agent measures what crosses it like any network.
package wanem

import (
	"math"
	"math/rand/v2"
	"sync"
	"time"
)

// Link is the behaviour of one direction of one emulated path.
type Link struct {
	// OneWay is the base one-way delay (half the table's round trip).
	OneWay time.Duration
	// JitterFrac scales the jitter: a half-normal delay added to OneWay whose σ is this
	// fraction of it. Queues only ever hold a packet longer, so OneWay is the floor (no chunk
	// is faster than the table) and the median sits 0.67 σ above it.
	JitterFrac float64
	// SpikeProb is the chance that a chunk is held for a tail spike of SpikeMinX..SpikeMaxX
	// times the round trip, at most SpikeCap (so a spike shows as a slow reply, not a loss).
	SpikeProb            float64
	SpikeMinX, SpikeMaxX float64
	SpikeCap             time.Duration
	// BytesPerS limits throughput (0: unlimited): a chunk of n bytes leaves n/BytesPerS after
	// the previous one.
	BytesPerS float64

	mu    sync.Mutex
	rng   *rand.Rand
	steps []Step
}

// Step raises (or lowers) the one-way delay by Delta from At on.
type Step struct {
	At    time.Time
	Delta time.Duration
}

// NewLink returns a link with its own random source.
func NewLink(oneWay time.Duration, seed uint64) *Link {
	return &Link{OneWay: oneWay, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// AddStep schedules a level change of the one-way delay.
func (l *Link) AddStep(s Step) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.steps = append(l.steps, s)
}

// Level is the one-way delay without jitter or spikes at t (base plus the steps begun).
func (l *Link) Level(t time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.level(t)
}

func (l *Link) level(t time.Time) time.Duration {
	d := l.OneWay
	for _, s := range l.steps {
		if !t.Before(s.At) {
			d += s.Delta
		}
	}
	return max(d, 0)
}

// Delay draws the one-way delay of a chunk sent at t.
func (l *Link) Delay(t time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	base := l.level(t)
	d := float64(base)
	if l.JitterFrac > 0 {
		d += math.Abs(l.rng.NormFloat64()) * l.JitterFrac * float64(base)
	}
	if l.SpikeProb > 0 && l.rng.Float64() < l.SpikeProb {
		x := l.SpikeMinX + l.rng.Float64()*(l.SpikeMaxX-l.SpikeMinX)
		spike := x * 2 * float64(base)
		if l.SpikeCap > 0 {
			spike = math.Min(spike, float64(l.SpikeCap))
		}
		d += spike
	}
	return time.Duration(max(d, 0))
}

// Precision is how far a path's median round trip (a few hundred round trips) may move when
// nothing of its own changes, on a loaded two-core machine: paths share no state (each link
// has its own random source and steps, each connection its own estimate of the proxy's
// hop), only the machine's scheduler, so another path's step, delay or stalled reader moves
// it by no more than that noise.
const Precision = 2 * time.Millisecond

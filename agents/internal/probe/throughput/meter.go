package throughput

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// meter counts what the receiver of one direction gets, into whole seconds from the first
// byte on: each read is put in the second it completed in, so a late cut moves nothing.
type meter struct {
	started   chan struct{}
	startOnce sync.Once
	t0        atomic.Int64 // unix ns of the first byte
	secs      []secCount

	// UDP, reader only: the previous datagram's transit (arrival - send, ns) and the running
	// RFC 3550 jitter estimate.
	lastTransit int64
	haveTransit bool
	jitterNS    float64
}

type secCount struct {
	bytes     atomic.Int64
	datagrams atomic.Int64
	nextSeq   atomic.Uint64 // highest sequence number seen in this second + 1
	firstSeq  atomic.Uint64 // lowest sequence number seen in this second + 1 (0: none)
	jitterNS  atomic.Uint64 // float64 bits of the jitter after this second's last datagram
	hasJitter atomic.Bool
}

func newMeter(seconds int) *meter {
	return &meter{started: make(chan struct{}), secs: make([]secCount, seconds)}
}

// start marks the first byte; only the first call counts.
func (m *meter) start(now time.Time) {
	m.startOnce.Do(func() {
		m.t0.Store(now.UnixNano())
		close(m.started)
	})
}

// sec is the second now falls in, or nil past the last one.
func (m *meter) sec(now time.Time) *secCount {
	m.start(now)
	i := (now.UnixNano() - m.t0.Load()) / int64(time.Second)
	if i < 0 || i >= int64(len(m.secs)) {
		return nil
	}
	return &m.secs[i]
}

// addTCP counts n bytes read from a stream.
func (m *meter) addTCP(n int, now time.Time) {
	if n <= 0 {
		return
	}
	if s := m.sec(now); s != nil {
		s.bytes.Add(int64(n))
	}
}

// addUDP counts one datagram: its bytes, its sequence number for loss, and its transit time
// for the RFC 3550 §6.4.1 jitter estimate J += (|D| - J) / 16. One reader calls it.
func (m *meter) addUDP(n int, seq uint64, sentNS int64, now time.Time) {
	transit := now.UnixNano() - sentNS
	if m.haveTransit {
		m.jitterNS += (math.Abs(float64(transit-m.lastTransit)) - m.jitterNS) / 16
	}
	m.lastTransit, m.haveTransit = transit, true
	s := m.sec(now)
	if s == nil {
		return
	}
	s.bytes.Add(int64(n))
	s.datagrams.Add(1)
	if seq+1 > s.nextSeq.Load() {
		s.nextSeq.Store(seq + 1)
	}
	if f := s.firstSeq.Load(); f == 0 || seq+1 < f {
		s.firstSeq.Store(seq + 1)
	}
	s.jitterNS.Store(math.Float64bits(m.jitterNS))
	s.hasJitter.Store(true)
}

// second is one sample of a direction.
type second struct {
	end       time.Time
	bytesPerS float64
	lossRatio *float64 // UDP only
	jitterUS  *int64   // UDP only
}

var errNoData = errors.New("no data arrived")

// cutGrace is how long after a second ends its count is read: reads that completed in it
// have been counted by then.
const cutGrace = 50 * time.Millisecond

// sample waits for the first byte (at most firstByte), then emits each second once it is
// over. It returns early, with what it emitted, when ctx ends.
func (m *meter) sample(ctx context.Context, udp bool, firstByte time.Duration, emit func(second)) error {
	wait := time.NewTimer(firstByte)
	defer wait.Stop()
	select {
	case <-m.started:
	case <-wait.C:
		return errNoData
	case <-ctx.Done():
		return ctx.Err()
	}
	t0 := time.Unix(0, m.t0.Load())
	var nextSeq uint64 // over every second so far
	var jitter float64
	prevEmpty := false
	tick := time.NewTimer(time.Hour)
	defer tick.Stop()
	for k := range m.secs {
		end := t0.Add(time.Duration(k+1) * time.Second)
		tick.Reset(time.Until(end.Add(cutGrace)))
		select {
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		}
		c := &m.secs[k]
		s := second{end: end, bytesPerS: float64(c.bytes.Load())}
		if udp {
			got := c.datagrams.Load()
			if prevEmpty && got > 0 {
				// What was sent between the last arrival before and the first of this second
				// belongs to the empty second(s), which already count as all lost.
				nextSeq = max(nextSeq, c.firstSeq.Load()-1)
			}
			prevEmpty = got == 0
			sent := int64(0)
			if n := c.nextSeq.Load(); n > nextSeq {
				sent, nextSeq = int64(n-nextSeq), n
			}
			loss := 0.0
			switch {
			case sent > 0:
				loss = max(0, float64(sent-got)/float64(sent)) // a late duplicate of an earlier second can push got past sent
			case got == 0:
				loss = 1 // nothing arrived while the sender was sending
			}
			if c.hasJitter.Load() {
				jitter = math.Float64frombits(c.jitterNS.Load())
			}
			j := int64(math.Round(jitter / 1e3))
			s.lossRatio, s.jitterUS = &loss, &j
		}
		emit(s)
	}
	return nil
}

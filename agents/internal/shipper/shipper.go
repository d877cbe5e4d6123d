// Package shipper batches samples into the columnar JSON of docs/api.md, gzips them and
// delivers them at least once: retries with backoff and jitter, Retry-After, a bounded
// on-disk spool while the API is unreachable, and stable batch ids so the API stores each
// batch once.
package shipper

import (
	"context"
	"errors"
	"log/slog"
	mrand "math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"stormwatch/agents/internal/client"
	"stormwatch/agents/internal/metrics"
	"stormwatch/agents/internal/sample"
)

// MeshSource hands over buffered mesh and quorum samples.
type MeshSource interface {
	TakeMesh() []*sample.MeshBlock
	Pending() int
}

// Poster delivers one gzip-compressed batch.
type Poster interface {
	PostBatch(ctx context.Context, gz []byte) (client.IngestResult, error)
}

// Options configure a Shipper.
type Options struct {
	AgentID         string
	SpoolDir        string
	SpoolMaxBytes   int64
	FlushDeadline   time.Duration
	MaxBatchSamples int           // default 20000
	MaxBatchAge     time.Duration // default 2 s
	BackoffBase     time.Duration // default 500 ms
	BackoffMax      time.Duration // default 60 s
	Metrics         *metrics.Agent
	Logger          *slog.Logger
	// OnDeleted is called once when the API answers that this agent was deleted (410).
	OnDeleted func()
}

// Shipper cuts batches and sends them.
type Shipper struct {
	o      Options
	poster Poster
	mesh   MeshSource
	spool  *spool
	queue  chan *item

	mu         sync.Mutex
	storage    []sample.Storage
	throughput []sample.Throughput

	enc encoder // Run's goroutine only

	maxSamples atomic.Int64
	maxAge     atomic.Int64
	finalCut   chan struct{}
	// flushFailed is set once a delivery fails during the final flush; sender goroutine only.
	flushFailed bool
	// deleted is set once the API says this agent was deleted: nothing is sent or kept since.
	deleted atomic.Bool
}

// New opens the spool and returns a shipper; mesh may be nil.
func New(o Options, poster Poster, mesh MeshSource) (*Shipper, error) {
	if o.Metrics == nil {
		o.Metrics = metrics.New("")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.FlushDeadline <= 0 {
		o.FlushDeadline = 10 * time.Second
	}
	if o.BackoffBase <= 0 {
		o.BackoffBase = 500 * time.Millisecond
	}
	if o.BackoffMax <= 0 {
		o.BackoffMax = 60 * time.Second
	}
	sp, err := openSpool(o.SpoolDir, o.SpoolMaxBytes, o.Metrics)
	if err != nil {
		return nil, err
	}
	s := &Shipper{o: o, poster: poster, mesh: mesh, spool: sp, queue: make(chan *item, 2), finalCut: make(chan struct{})}
	s.SetLimits(o.MaxBatchSamples, o.MaxBatchAge)
	return s, nil
}

// SetLimits changes when batches are cut (the server config's "shipper" section).
func (s *Shipper) SetLimits(maxSamples int, maxAge time.Duration) {
	if maxSamples <= 0 {
		maxSamples = 20000
	}
	// Keeps a batch far below the API's 64 MiB decompressed bound.
	maxSamples = min(maxSamples, 200000)
	if maxAge <= 0 {
		maxAge = 2 * time.Second
	}
	s.maxSamples.Store(int64(maxSamples))
	s.maxAge.Store(int64(maxAge))
}

// AddStorage queues one storage sample (docs/api.md "storage" section).
func (s *Shipper) AddStorage(x sample.Storage) {
	s.mu.Lock()
	s.storage = append(s.storage, x)
	s.mu.Unlock()
	s.o.Metrics.Measured[metrics.Storage].Add(1)
}

// AddThroughput queues one throughput sample (docs/api.md "throughput" section).
func (s *Shipper) AddThroughput(x sample.Throughput) {
	s.mu.Lock()
	s.throughput = append(s.throughput, x)
	s.mu.Unlock()
	s.o.Metrics.Measured[metrics.Throughput].Add(1)
}

func (s *Shipper) pending() int {
	s.mu.Lock()
	n := len(s.storage) + len(s.throughput)
	s.mu.Unlock()
	if s.mesh != nil {
		n += s.mesh.Pending()
	}
	return n
}

// Run cuts and sends batches until ctx ends, then cuts what is left and tries to deliver it
// within the flush deadline; whatever is still unsent waits in the spool for the next start.
func (s *Shipper) Run(ctx context.Context) error {
	hardCtx, hardCancel := context.WithCancel(context.Background())
	defer hardCancel()
	senderDone := make(chan struct{})
	go func() {
		defer close(senderDone)
		s.sendLoop(hardCtx)
	}()
	tick := time.NewTicker(min(time.Duration(s.maxAge.Load())/4, 250*time.Millisecond))
	defer tick.Stop()
	lastCut := time.Now()
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case now := <-tick.C:
			n := s.pending()
			if n == 0 {
				lastCut = now
				continue
			}
			if n >= int(s.maxSamples.Load()) || now.Sub(lastCut) >= time.Duration(s.maxAge.Load()) {
				s.cut()
				lastCut = now
			}
		}
	}
	timer := time.AfterFunc(s.o.FlushDeadline, hardCancel)
	defer timer.Stop()
	s.cut()
	close(s.finalCut)
	<-senderDone
	// Anything the sender did not take goes to disk with its batch id.
	for {
		select {
		case it := <-s.queue:
			if s.deleted.Load() {
				s.countDropped(it.counts)
				continue
			}
			if err := s.spool.put(it); err != nil {
				s.o.Logger.Error("spooling on shutdown failed; batch dropped", "batch", it.id, "err", err)
				s.o.Metrics.SetError(err)
				if !errors.Is(err, errTooLarge) {
					for k, n := range it.counts {
						s.o.Metrics.Dropped[k].Add(uint64(n))
					}
				}
			}
		default:
			return nil
		}
	}
}

// cut turns everything buffered into batches of at most maxSamples samples.
func (s *Shipper) cut() {
	var blocks []*sample.MeshBlock
	if s.mesh != nil {
		blocks = s.mesh.TakeMesh()
	}
	s.mu.Lock()
	st, tp := s.storage, s.throughput
	s.storage, s.throughput = nil, nil
	s.mu.Unlock()
	for _, c := range split(blocks, st, tp, int(s.maxSamples.Load())) {
		if s.deleted.Load() {
			s.countDropped(c.counts())
			continue
		}
		it := &item{id: newBatchID(), counts: c.counts()}
		it.gz = s.enc.batch(it.id, s.o.AgentID, &c)
		select {
		case s.queue <- it:
		default:
			// The sender is behind (the API is slow or down): keep the batch on disk.
			if err := s.spool.put(it); err != nil {
				s.o.Logger.Error("spooling failed; batch dropped", "batch", it.id, "err", err)
				s.o.Metrics.SetError(err)
				if !errors.Is(err, errTooLarge) {
					for k, n := range it.counts {
						s.o.Metrics.Dropped[k].Add(uint64(n))
					}
				}
			}
		}
	}
}

// split divides samples into batch contents of at most max samples each.
func split(blocks []*sample.MeshBlock, st []sample.Storage, tp []sample.Throughput, max int) []content {
	var out []content
	var cur content
	n := 0
	flush := func() {
		if n > 0 {
			out = append(out, cur)
			cur, n = content{}, 0
		}
	}
	for _, b := range blocks {
		m, q := b.Mesh, b.Quorum
		for len(m)+len(q) > 0 {
			room := max - n
			tm := min(room, len(m))
			tq := min(room-tm, len(q))
			nb := *b
			nb.Mesh, nb.Quorum = m[:tm], q[:tq]
			cur.mesh = append(cur.mesh, &nb)
			n += tm + tq
			m, q = m[tm:], q[tq:]
			if n >= max {
				flush()
			}
		}
	}
	for len(st) > 0 {
		k := min(max-n, len(st))
		cur.storage = append(cur.storage, st[:k]...)
		n += k
		st = st[k:]
		if n >= max {
			flush()
		}
	}
	for len(tp) > 0 {
		k := min(max-n, len(tp))
		cur.throughput = append(cur.throughput, tp[:k]...)
		n += k
		tp = tp[k:]
		if n >= max {
			flush()
		}
	}
	flush()
	return out
}

func (s *Shipper) flushing() bool {
	select {
	case <-s.finalCut:
		return true
	default:
		return false
	}
}

// sendLoop delivers batches one at a time: fresh ones first, then the spool's oldest.
func (s *Shipper) sendLoop(hardCtx context.Context) {
	for {
		it := s.next(hardCtx)
		if it == nil {
			return
		}
		s.deliver(hardCtx, it)
	}
}

func (s *Shipper) next(hardCtx context.Context) *item {
	for {
		select {
		case it := <-s.queue:
			return it
		default:
		}
		if hardCtx.Err() != nil || (s.flushing() && s.flushFailed) {
			return nil // spooled batches stay durable for the next start
		}
		// While flushing, the spool is drained too as long as the API answers.
		if it, _ := s.spool.claimOldest(); it != nil {
			return it
		}
		if s.flushing() {
			return nil
		}
		select {
		case it := <-s.queue:
			return it
		case <-s.finalCut:
		case <-hardCtx.Done():
			return nil
		}
	}
}

// deliver sends it until it is accepted, rejected for good, or the shipper stops; a batch
// that has to wait is written to the spool first so a crash cannot lose it.
func (s *Shipper) deliver(hardCtx context.Context, it *item) {
	log := s.o.Logger
	for attempt := 0; ; attempt++ {
		if s.deleted.Load() {
			s.countDropped(it.counts)
			if it.path != "" {
				s.spool.release(it.path, true)
			}
			return
		}
		res, err := s.poster.PostBatch(hardCtx, it.gz)
		if err == nil {
			aside := setAside(res)
			for k, n := range it.counts {
				s.o.Metrics.Shipped[k].Add(uint64(n - aside[k]))
				s.o.Metrics.SetAside[k].Add(uint64(aside[k]))
			}
			s.o.Metrics.BatchesSent.Add(1)
			if res.Duplicate {
				s.o.Metrics.BatchesDuplicate.Add(1)
			}
			if it.path != "" {
				s.spool.release(it.path, true)
			}
			return
		}
		s.o.Metrics.SendFailures.Add(1)
		s.o.Metrics.SetError(err)
		var se *client.StatusError
		isStatus := errors.As(err, &se)
		tooLarge := isStatus && se.Code == http.StatusRequestEntityTooLarge
		retryLater := false
		if tooLarge {
			halves, herr := halve(it.id, it.gz)
			switch {
			case herr == nil && it.path == "":
				s.deliverHalves(hardCtx, it, halves)
				return
			case herr == nil:
				rerr := s.spool.replace(it.path, halves)
				if rerr == nil {
					s.deliverHalves(hardCtx, it, halves)
					return
				}
				// The batch stays whole on disk: try again later, like a failed send.
				log.Error("splitting a spooled batch failed", "batch", it.id, "err", rerr)
				s.o.Metrics.SetError(rerr)
				retryLater = true
			case !errors.Is(herr, errSingleSample):
				log.Error("batch too large for the API cannot be split", "batch", it.id, "err", herr)
			}
		}
		if s.flushing() && (!tooLarge || retryLater) {
			s.flushFailed = true // the API is not answering: stop trying and keep the rest on disk
		}
		if client.IsAgentDeleted(err) {
			s.markDeleted(it, err)
			return
		}
		if isStatus && !se.Retryable() && se.Code != http.StatusUnauthorized && !retryLater {
			// The API will never take this batch (one sample over its body limit, 422, 403...):
			// keeping it would block everything behind it.
			log.Error("batch rejected; its samples are dropped", "batch", it.id, "samples", it.counts.Total(), "err", err)
			s.o.Metrics.BatchesRejected.Add(1)
			for k, n := range it.counts {
				s.o.Metrics.Dropped[k].Add(uint64(n))
			}
			if it.path != "" {
				s.spool.release(it.path, true)
			}
			return
		}
		if it.path == "" {
			if perr := s.spool.put(it); perr != nil {
				log.Error("spooling failed", "batch", it.id, "err", perr)
				s.o.Metrics.SetError(perr)
			} else {
				s.spool.claim(it.path)
			}
		}
		if hardCtx.Err() != nil {
			s.releaseClaim(it)
			return
		}
		wait := s.backoff(attempt)
		if isStatus && se.RetryAfter > 0 {
			wait = se.RetryAfter + time.Duration(mrand.Int64N(int64(se.RetryAfter)/10+1))
		}
		log.Warn("batch not delivered, retrying", "batch", it.id, "attempt", attempt+1, "wait", wait, "err", err)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-s.finalCut:
			// Shutting down: the batch is on disk; the flush goes to what is only in memory.
			t.Stop()
			s.releaseClaim(it)
			return
		case <-hardCtx.Done():
			t.Stop()
			s.releaseClaim(it)
			return
		}
	}
}

// deliverHalves sends the two halves of a batch the API found too large, each split again
// if it is still too large; a spooled parent has already been replaced by them on disk.
func (s *Shipper) deliverHalves(hardCtx context.Context, parent *item, halves [2]*item) {
	s.o.Metrics.BatchesSplit.Add(1)
	s.o.Logger.Info("batch too large for the API, sent as two halves", "batch", parent.id,
		"samples", parent.counts.Total(), "halves", []string{halves[0].id, halves[1].id})
	for _, h := range halves {
		s.deliver(hardCtx, h)
	}
}

// markDeleted stops shipping for good: this batch, the spool and whatever comes later are
// dropped, since no batch of a deleted agent will ever be stored.
func (s *Shipper) markDeleted(it *item, err error) {
	s.countDropped(it.counts)
	if it.path != "" {
		s.spool.release(it.path, true)
	}
	if s.AgentDeleted() {
		s.o.Logger.Error("this agent was deleted from its org: measuring and shipping stop; "+
			"enroll it again to rejoin", "err", err)
	}
}

// AgentDeleted stops shipping for good and drops the spool; true the first time only.
func (s *Shipper) AgentDeleted() bool {
	if s.deleted.Swap(true) {
		return false
	}
	s.countDropped(s.spool.clear())
	if s.o.OnDeleted != nil {
		s.o.OnDeleted()
	}
	return true
}

func (s *Shipper) countDropped(c Counts) {
	for k, n := range c {
		s.o.Metrics.Dropped[k].Add(uint64(n))
	}
}

// Deleted reports whether the API answered that this agent was deleted.
func (s *Shipper) Deleted() bool { return s.deleted.Load() }

func (s *Shipper) releaseClaim(it *item) {
	if it.path != "" {
		s.spool.release(it.path, false)
	}
}

// backoff is exponential with equal jitter: half fixed, half random.
func (s *Shipper) backoff(attempt int) time.Duration {
	d := s.o.BackoffBase << min(attempt, 20)
	if d <= 0 || d > s.o.BackoffMax {
		d = s.o.BackoffMax
	}
	return d/2 + time.Duration(mrand.Int64N(int64(d/2)+1))
}

// SpooledBatches is the number of batches waiting on disk.
func (s *Shipper) SpooledBatches() int { return s.spool.len() }

// setAside counts, per kind, the rows an ingest answer says were left out of a stored batch.
func setAside(res client.IngestResult) Counts {
	var c Counts
	for _, sections := range res.SetAside {
		for section, n := range sections {
			if k, ok := metrics.KindNamed(section); ok {
				c[k] += n
			}
		}
	}
	return c
}

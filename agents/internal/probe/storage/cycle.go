package storage

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/http/httptrace"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"stormwatch/agents/internal/sample"
)

// Operation and variant names of docs/api.md.
const (
	opPut            = "put"
	opGet            = "get"
	opGetFirst       = "get_first"
	opReadAfterWrite = "read_after_write"
	opListAfterWrite = "list_after_write"
	opRTT            = "rtt"

	variantPlain      = "plain"
	variantGzip9      = "gzip9"
	variantReplicated = "replicated"
	variantConcurrent = "concurrent"

	contentBinary = "binary"
	contentText   = "text"

	rttProbes = 3
)

// runner executes the cycles of one target.
type runner struct {
	t    *Target
	emit func(sample.Storage)
	log  *slog.Logger
	tr   *http.Transport
	st   store
	addr string

	binary, text []byte
	rng          *mrand.ChaCha8
	run          string // distinguishes this process's keys from earlier runs
	cycle        uint64
	rttUS        *int64 // this cycle's RTT estimate, stamped on every sample
}

func newRunner(t *Target, emit func(sample.Storage), log *slog.Logger) *runner {
	var seed [32]byte
	_, _ = rand.Read(seed[:])
	var id [4]byte
	_, _ = rand.Read(id[:])
	bin, txt := t.largest()
	return &runner{
		t:      t,
		emit:   emit,
		log:    log,
		tr:     newTransport(),
		binary: make([]byte, bin),
		text:   make([]byte, txt),
		rng:    mrand.NewChaCha8(seed),
		run:    hex.EncodeToString(id[:]),
	}
}

func (r *runner) close() { r.tr.CloseIdleConnections() }

// connect resolves the credentials and builds the SDK client, once per target start.
func (r *runner) connect(ctx context.Context) error {
	if r.st != nil {
		return nil
	}
	sec, err := r.t.Credentials.resolve(r.t.Provider)
	if err != nil {
		return fmt.Errorf("%w: %v", errCredentials, err)
	}
	st, err := newStore(ctx, r.t, sec, r.tr)
	if err != nil {
		return fmt.Errorf("%w: %v", errCredentials, err)
	}
	r.st, r.addr = st, r.t.endpointAddr(sec)
	return nil
}

func (r *runner) statusOf(err error) int {
	if r.st == nil {
		return 0
	}
	return r.st.statusOf(err)
}

func (r *runner) key(name string) string {
	return fmt.Sprintf("%s%s-%d/%s", r.t.Prefix, r.run, r.cycle, name)
}

// fill draws fresh objects for the cycle: random binary, and base64 text of random bytes.
func (r *runner) fill() {
	_, _ = r.rng.Read(r.binary)
	// Text is encoded chunk by chunk in place: 3 random bytes become 4 base64 characters.
	var raw [3 << 10]byte
	var enc [4 << 10]byte
	for off := 0; off < len(r.text); off += len(enc) {
		_, _ = r.rng.Read(raw[:])
		base64.StdEncoding.Encode(enc[:], raw[:])
		copy(r.text[off:], enc[:])
	}
}

func (r *runner) data(content string, size int64) []byte {
	if content == contentText {
		return r.text[:size]
	}
	return r.binary[:size]
}

// runCycle is one pass of seed 000 §3 plus the configured variants.
func (r *runner) runCycle(ctx context.Context) {
	r.cycle++
	// Connecting first names the endpoint (an Azure account's host) for the first RTT;
	// building a client sends no request.
	connErr := r.connect(ctx)
	r.measureRTT(ctx)
	if connErr != nil {
		r.log.Warn("storage target unusable this cycle", "err", redact(connErr))
		r.emitUnusable(ctx, connErr)
		return
	}
	if r.cycle == 1 {
		// A crash leaves at most one cycle's objects behind: remove them first.
		r.cleanup(ctx)
	}
	r.fill()
	defer r.cleanup(ctx)

	for _, c := range r.t.Contents {
		for _, size := range r.sizes(c, &r.t.Sizes) {
			r.putGet(ctx, variantPlain, c, size)
		}
	}
	if g := r.t.Variants.Gzip9; g != nil && g.Enabled {
		for _, c := range g.Contents {
			for _, size := range r.sizes(c, g.Sizes) {
				r.putGet(ctx, variantGzip9, c, size)
			}
		}
	}
	if v := r.t.Variants.Replication; v != nil && v.Enabled {
		for _, size := range v.Sizes {
			r.replicated(ctx, v.Copies, size)
		}
	}
	if v := r.t.Variants.Consistency; v != nil && v.Enabled {
		if v.ReadAfterWrite == nil || *v.ReadAfterWrite {
			r.consistency(ctx, v, opReadAfterWrite)
		}
		if v.ListAfterWrite == nil || *v.ListAfterWrite {
			r.consistency(ctx, v, opListAfterWrite)
		}
	}
	if v := r.t.Variants.Concurrency; v != nil && v.Enabled {
		r.concurrency(ctx, v)
	}
}

func (r *runner) sizes(content string, s *Sizes) []int64 {
	if content == contentText {
		return s.Text
	}
	return s.Binary
}

// result is one timed request.
type result struct {
	start  time.Time
	lat    time.Duration
	ttfb   time.Duration // 0: no response byte seen
	err    error
	status sample.Status
	class  string
}

// do times fn from request issued to transfer complete, with TTFB from the HTTP trace.
func (r *runner) do(ctx context.Context, fn func(context.Context) error) result {
	opCtx, cancel := context.WithTimeout(ctx, r.t.opTimeout())
	defer cancel()
	var first atomic.Int64
	start := time.Now()
	trace := &httptrace.ClientTrace{GotFirstResponseByte: func() {
		first.CompareAndSwap(0, max(int64(time.Since(start)), 1))
	}}
	err := fn(httptrace.WithClientTrace(opCtx, trace))
	res := result{start: start, lat: time.Since(start), ttfb: time.Duration(first.Load()), err: err}
	if err != nil {
		res.status, res.class = classify(opCtx, r.statusOf, err)
	}
	return res
}

func (r *runner) base(op, variant, content string, size int64) sample.Storage {
	return sample.Storage{
		TargetID:    r.t.TargetID,
		Op:          op,
		Variant:     variant,
		Content:     content,
		SizeBytes:   size,
		StoredBytes: size,
		Copies:      1,
		Concurrency: 1,
		Attempt:     1,
		RTTUS:       r.rttUS,
	}
}

func (r *runner) record(s sample.Storage, res result) {
	s.TimeUS = res.start.UnixMicro()
	if res.err == nil {
		lat := res.lat.Microseconds()
		s.LatencyUS = &lat
		if res.ttfb > 0 {
			t := res.ttfb.Microseconds()
			s.TTFBUS = &t
		}
		s.Status = sample.StatusOK
	} else {
		s.Status, s.ErrorClass = res.status, res.class
	}
	r.emit(s)
}

// retried applies seed 000's rule: retry once; after two failures the caller abandons
// the size for this cycle. Nothing is recorded for an attempt cut short by shutdown.
// stored, when set, is the stored size learnt while timing (gzip9); quietOK leaves a
// successful attempt unrecorded (the write that precedes a consistency measurement).
func (r *runner) retried(ctx context.Context, s *sample.Storage, stored *atomic.Int64, quietOK bool, fn func(context.Context) error) bool {
	for attempt := 1; attempt <= 2; attempt++ {
		res := r.do(ctx, fn)
		if ctx.Err() != nil {
			return false
		}
		if res.err == nil && quietOK {
			return true
		}
		rec := *s
		rec.Attempt = attempt
		if stored != nil {
			rec.StoredBytes = stored.Load()
		}
		r.record(rec, res)
		if res.err == nil {
			return true
		}
		r.log.Debug("storage operation failed", "op", s.Op, "variant", s.Variant,
			"size_bytes", s.SizeBytes, "attempt", attempt, "error_class", res.class, "err", redact(res.err))
	}
	return false
}

// countTo reads an object to the end and checks its length.
func countTo(want int64) func(io.Reader) error {
	return func(body io.Reader) error {
		n, err := io.Copy(io.Discard, body)
		if err != nil {
			return err
		}
		if n != want {
			return fmt.Errorf("%w: read %d bytes, want %d", errCorrupt, n, want)
		}
		return nil
	}
}

// putGet uploads then downloads one object; gzip9 compresses inside the timed PUT and
// decompresses inside the timed GET (seed 000 §3.2.2).
func (r *runner) putGet(ctx context.Context, variant, content string, size int64) {
	key := r.key(fmt.Sprintf("%s-%s-%d", variant, content, size))
	data := r.data(content, size)
	put := r.base(opPut, variant, content, size)
	get := r.base(opGet, variant, content, size)
	var stored atomic.Int64
	stored.Store(size)
	putFn := func(c context.Context) error { return r.st.put(c, key, data) }
	getFn := func(c context.Context) error { return r.st.get(c, key, countTo(size)) }
	if variant == variantGzip9 {
		putFn = func(c context.Context) error {
			z, err := gzip9(data)
			if err != nil {
				return err
			}
			stored.Store(int64(len(z)))
			return r.st.put(c, key, z)
		}
		getFn = func(c context.Context) error {
			return r.st.get(c, key, func(body io.Reader) error {
				zr, err := gzip.NewReader(body)
				if err != nil {
					return fmt.Errorf("%w: %v", errCorrupt, err)
				}
				if err := countTo(size)(zr); err != nil {
					return err
				}
				return zr.Close()
			})
		}
	}
	if !r.retried(ctx, &put, &stored, false, putFn) {
		return
	}
	get.StoredBytes = stored.Load()
	r.retried(ctx, &get, nil, false, getFn)
}

func gzip9(data []byte) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(len(data)/2 + 64)
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(data); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// replicated stores F copies, fetches all of them in parallel, and derives first-of-k for
// k = 1..F from the copies' latencies (seed 000 §3.2.1: every copy is read in full).
func (r *runner) replicated(ctx context.Context, f int, size int64) {
	data := r.data(contentBinary, size)
	keys := make([]string, f)
	for i := range keys {
		keys[i] = r.key(fmt.Sprintf("replicated-%d-copy%d", size, i+1))
		put := r.base(opPut, variantReplicated, contentBinary, size)
		put.Copies = f
		k := keys[i]
		if !r.retried(ctx, &put, nil, false, func(c context.Context) error { return r.st.put(c, k, data) }) {
			return
		}
	}
	results := make([]result, f)
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			results[i] = r.do(ctx, func(c context.Context) error { return r.st.get(c, keys[i], countTo(size)) })
		}()
	}
	close(gate)
	wg.Wait()
	if ctx.Err() != nil {
		return
	}
	for _, res := range results {
		s := r.base(opGet, variantReplicated, contentBinary, size)
		s.Copies, s.Concurrency = f, f
		r.record(s, res)
	}
	for k := 1; k <= f; k++ {
		best := -1
		for i := 0; i < k; i++ {
			if results[i].err == nil && (best < 0 || results[i].lat < results[best].lat) {
				best = i
			}
		}
		s := r.base(opGetFirst, variantReplicated, contentBinary, size)
		s.Copies, s.Concurrency = k, k
		res := results[0]
		if best >= 0 {
			res = results[best]
		}
		res.start = results[0].start
		r.record(s, res)
	}
}

// consistency writes a fresh object and polls until a read (or a listing) shows it; the
// latency is the time from the write's completion to the completion of the first read
// that saw it (CloudCmp §4.2).
func (r *runner) consistency(ctx context.Context, v *ConsistencyVariant, op string) {
	size := v.SizeBytes
	key := r.key(fmt.Sprintf("%s-%d", op, size))
	data := make([]byte, size)
	_, _ = r.rng.Read(data)
	s := r.base(op, variantPlain, contentBinary, size)
	// A failed write is recorded under this op (seed 000's retry rule); a successful one
	// only starts the clock.
	if !r.retried(ctx, &s, nil, true, func(c context.Context) error { return r.st.put(c, key, data) }) {
		return
	}
	written := time.Now()
	deadline := written.Add(time.Duration(v.MaxWaitMS) * time.Millisecond)
	poll := time.Duration(v.PollIntervalMS) * time.Millisecond
	var visible func(context.Context) error
	if op == opReadAfterWrite {
		visible = func(c context.Context) error {
			return r.st.get(c, key, func(body io.Reader) error {
				got, err := io.ReadAll(body)
				if err != nil {
					return err
				}
				if !bytes.Equal(got, data) {
					return errNotVisible
				}
				return nil
			})
		}
	} else {
		visible = func(c context.Context) error {
			keys, err := r.st.list(c, r.key(""))
			if err != nil {
				return err
			}
			if !slices.Contains(keys, key) {
				return errNotVisible
			}
			return nil
		}
	}
	rec := r.base(op, variantPlain, contentBinary, size)
	rec.TimeUS = written.UnixMicro()
	for {
		res := r.do(ctx, visible)
		if ctx.Err() != nil {
			return
		}
		if res.err == nil {
			lat := time.Since(written).Microseconds()
			rec.LatencyUS = &lat
			rec.Status = sample.StatusOK
			r.emit(rec)
			return
		}
		notYet := errors.Is(res.err, errNotVisible) || res.class == classNotFound
		if !notYet {
			rec.Status, rec.ErrorClass = res.status, res.class
			r.emit(rec)
			return
		}
		if time.Now().After(deadline) {
			rec.Status, rec.ErrorClass = sample.StatusTimeout, classTimeout
			r.emit(rec)
			return
		}
		if !sleep(ctx, poll) {
			return
		}
	}
}

var errNotVisible = errors.New("write not visible yet")

// concurrency uploads one object and, for each level n, issues n parallel GETs of it;
// every GET is a sample carrying the run's aggregate throughput (CloudCmp Table 5).
func (r *runner) concurrency(ctx context.Context, v *ConcurrencyVariant) {
	size := v.SizeBytes
	key := r.key(fmt.Sprintf("concurrent-%d", size))
	data := r.data(contentBinary, size)
	put := r.base(opPut, variantConcurrent, contentBinary, size)
	if !r.retried(ctx, &put, nil, false, func(c context.Context) error { return r.st.put(c, key, data) }) {
		return
	}
	for _, n := range v.Levels {
		results := make([]result, n)
		var wg sync.WaitGroup
		gate := make(chan struct{})
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-gate
				results[i] = r.do(ctx, func(c context.Context) error { return r.st.get(c, key, countTo(size)) })
			}()
		}
		began := time.Now()
		close(gate)
		wg.Wait()
		wall := time.Since(began)
		if ctx.Err() != nil {
			return
		}
		ok := 0
		for _, res := range results {
			if res.err == nil {
				ok++
			}
		}
		var bps *float64
		if ok > 0 && wall > 0 {
			v := float64(int64(ok)*size) / wall.Seconds()
			bps = &v
		}
		for _, res := range results {
			s := r.base(opGet, variantConcurrent, contentBinary, size)
			s.Concurrency = n
			s.BytesPerS = bps
			r.record(s, res)
		}
	}
}

// measureRTT times TCP connects to the endpoint; their minimum is the cycle's RTT, the
// figure seed 000 subtracts for its RTT-adjusted latencies.
func (r *runner) measureRTT(ctx context.Context) {
	r.rttUS = nil
	addr := r.addr
	if addr == "" {
		// Credentials that do not resolve leave an Azure account's host unknown.
		if r.t.Endpoint == "" && r.t.Provider == ProviderAzure {
			return
		}
		addr = r.t.endpointAddr(Secret{})
	}
	timeout := min(r.t.opTimeout(), 10*time.Second)
	var best int64 = -1
	for i := 0; i < rttProbes; i++ {
		s := r.base(opRTT, variantPlain, contentBinary, 0)
		s.StoredBytes = 0
		s.RTTUS = nil
		res := r.do(ctx, func(c context.Context) error {
			c, cancel := context.WithTimeout(c, timeout)
			defer cancel()
			conn, err := (&net.Dialer{}).DialContext(c, "tcp", addr)
			if err != nil {
				return err
			}
			return conn.Close()
		})
		if ctx.Err() != nil {
			return
		}
		if res.err == nil {
			us := res.lat.Microseconds()
			s.RTTUS = &us
			if best < 0 || us < best {
				best = us
			}
		}
		res.ttfb = 0
		r.record(s, res)
	}
	if best >= 0 {
		r.rttUS = &best
	}
}

// emitUnusable records a failed PUT for every plain size when the target cannot be used.
func (r *runner) emitUnusable(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return
	}
	status, class := classify(ctx, nil, err)
	now := time.Now()
	for _, c := range r.t.Contents {
		for _, size := range r.sizes(c, &r.t.Sizes) {
			s := r.base(opPut, variantPlain, c, size)
			s.TimeUS = now.UnixMicro()
			s.Status, s.ErrorClass = status, class
			r.emit(s)
		}
	}
}

// cleanup deletes everything under the target's prefix. It runs on its own deadline so
// objects are removed even when the agent is shutting down.
func (r *runner) cleanup(parent context.Context) {
	if r.st == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), 2*r.t.opTimeout()+30*time.Second)
	defer cancel()
	lctx, lcancel := context.WithTimeout(ctx, r.t.opTimeout())
	keys, err := r.st.list(lctx, r.t.Prefix)
	lcancel()
	if err != nil {
		r.log.Warn("storage clean-up: listing failed", "prefix", r.t.Prefix, "err", redact(err))
	}
	failed := 0
	for _, k := range keys {
		dctx, dcancel := context.WithTimeout(ctx, r.t.opTimeout())
		if err := r.st.del(dctx, k); err != nil && r.st.statusOf(err) != http.StatusNotFound {
			failed++
		}
		dcancel()
	}
	if failed > 0 {
		r.log.Warn("storage clean-up: some deletes failed", "prefix", r.t.Prefix, "failed", failed, "of", len(keys))
	}
}

// sleep waits d or until ctx is done; false means ctx is done.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

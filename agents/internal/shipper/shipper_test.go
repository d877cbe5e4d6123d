package shipper

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"stormwatch/agents/internal/client"
	"stormwatch/agents/internal/metrics"
	"stormwatch/agents/internal/sample"
)

// fakeIngest is an ingest endpoint that stores each batch id once, like the API.
type fakeIngest struct {
	mu       sync.Mutex
	mode     string // "ok", "drop" (connection cut), "503", "429", "lose-answer", "410"
	retryS   int
	failures int // remaining failures for 503/429/lose-answer; -1 = forever
	stored   map[string]map[string]int
	attempts map[string][]time.Time
	maxBody  int64               // > 0: bodies over it are answered 413, like the API
	latency  map[string][]string // batch id -> its storage.latency_us column
	setAside string              // a section whose rows the answer sets aside, as about a deleted peer
	srv      *httptest.Server
}

func newFakeIngest(t *testing.T) *fakeIngest {
	f := &fakeIngest{mode: "ok", stored: map[string]map[string]int{}, attempts: map[string][]time.Time{},
		latency: map[string][]string{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeIngest) set(mode string, failures, retryS int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mode, f.failures, f.retryS = mode, failures, retryS
}

func decodeBatch(r *http.Request) (map[string]any, error) {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			return nil, err
		}
		body = zr
	}
	var b map[string]any
	dec := json.NewDecoder(body)
	dec.UseNumber()
	return b, dec.Decode(&b)
}

func sectionCounts(b map[string]any) (map[string]int, error) {
	out := map[string]int{}
	for _, sec := range []string{"mesh", "quorum", "storage", "throughput"} {
		m, ok := b[sec].(map[string]any)
		if !ok {
			continue
		}
		n := -1
		for k, v := range m {
			if k == "peers" || k == "groups" || k == "targets" {
				continue
			}
			col := v.([]any)
			if n >= 0 && len(col) != n {
				return nil, fmt.Errorf("%s.%s has %d elements, want %d", sec, k, len(col), n)
			}
			n = len(col)
		}
		out[sec] = n
	}
	return out, nil
}

func (f *fakeIngest) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/api/v1/ingest/batches" || r.Header.Get("Authorization") != "Bearer swa_test" {
		http.Error(w, "no", http.StatusUnauthorized)
		return
	}
	f.mu.Lock()
	limit := f.maxBody
	f.mu.Unlock()
	if limit > 0 && r.ContentLength > limit {
		http.Error(w, fmt.Sprintf("batch body over the %d-byte limit", limit), http.StatusRequestEntityTooLarge)
		return
	}
	b, err := decodeBatch(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusUnprocessableEntity)
		return
	}
	counts, err := sectionCounts(b)
	if err != nil {
		http.Error(w, err.Error(), http.StatusUnprocessableEntity)
		return
	}
	id := b["batch_id"].(string)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.attempts[id] = append(f.attempts[id], time.Now())
	failing := f.failures != 0
	if failing && f.failures > 0 {
		f.failures--
	}
	switch {
	case f.mode == "drop" && failing:
		hj, _ := w.(http.Hijacker)
		c, _, _ := hj.Hijack()
		c.Close()
		return
	case f.mode == "410":
		http.Error(w, `{"detail":"agent_deleted: this agent was deleted from its org"}`, http.StatusGone)
		return
	case (f.mode == "503" || f.mode == "429") && failing:
		if f.retryS > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(f.retryS))
		}
		code := http.StatusServiceUnavailable
		if f.mode == "429" {
			code = http.StatusTooManyRequests
		}
		http.Error(w, "later", code)
		return
	}
	_, dup := f.stored[id]
	if !dup {
		f.stored[id] = counts
		if st, ok := b["storage"].(map[string]any); ok {
			for _, v := range st["latency_us"].([]any) {
				f.latency[id] = append(f.latency[id], fmt.Sprint(v))
			}
		}
	}
	if f.mode == "lose-answer" && failing {
		http.Error(w, "answer lost", http.StatusBadGateway) // stored, but the agent never hears
		return
	}
	code := http.StatusAccepted
	if dup {
		code = http.StatusOK
	}
	w.WriteHeader(code)
	answer := map[string]any{"batch_id": id, "accepted": counts, "duplicate": dup}
	if n := counts[f.setAside]; n > 0 && !dup {
		answer["set_aside"] = map[string]any{"deleted_peer": map[string]int{f.setAside: n}}
	}
	_ = json.NewEncoder(w).Encode(answer)
}

func (f *fakeIngest) totals() (samples int, batches int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.stored {
		for _, n := range c {
			samples += n
		}
	}
	return samples, len(f.stored)
}

func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type harness struct {
	s      *Shipper
	m      *metrics.Agent
	cancel context.CancelFunc
	done   chan struct{}
}

func startShipper(t *testing.T, url, dir string, tweak func(*Options)) *harness {
	t.Helper()
	c, err := client.New(url, "", "test")
	if err != nil {
		t.Fatal(err)
	}
	c.SetToken("swa_test")
	m := metrics.New("test")
	o := Options{AgentID: "00000000-0000-4000-8000-000000000001", SpoolDir: dir, SpoolMaxBytes: 64 << 20,
		FlushDeadline: 3 * time.Second, MaxBatchSamples: 100, MaxBatchAge: 100 * time.Millisecond,
		BackoffBase: 20 * time.Millisecond, BackoffMax: 200 * time.Millisecond, Metrics: m,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if tweak != nil {
		tweak(&o)
	}
	s, err := New(o, c, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &harness{s: s, m: m, cancel: cancel, done: make(chan struct{})}
	go func() { defer close(h.done); _ = s.Run(ctx) }()
	t.Cleanup(h.stop)
	return h
}

func (h *harness) stop() {
	h.cancel()
	<-h.done
}

func storageSample(i int) sample.Storage {
	lat := int64(1000 + i)
	return sample.Storage{TimeUS: time.Now().UnixMicro(), TargetID: "00000000-0000-4000-8000-0000000000f1", Op: "put",
		Variant: "plain", Content: "binary", SizeBytes: 1024, StoredBytes: 1024, Copies: 1, Concurrency: 1, Attempt: 1,
		LatencyUS: &lat}
}

func TestBatchesAreCutBySizeAndByAge(t *testing.T) {
	f := newFakeIngest(t)
	h := startShipper(t, f.srv.URL, t.TempDir(), func(o *Options) { o.MaxBatchAge = time.Hour })
	for i := range 100 {
		h.s.AddStorage(storageSample(i))
	}
	waitFor(t, "a full batch", 5*time.Second, func() bool { n, _ := f.totals(); return n >= 100 })
	if n, b := f.totals(); n != 100 || b != 1 {
		t.Fatalf("stored %d samples in %d batches, want 100 in 1", n, b)
	}
	for i := range 30 {
		h.s.AddStorage(storageSample(i))
	}
	h.s.SetLimits(100, 100*time.Millisecond)
	waitFor(t, "the rest by age", 5*time.Second, func() bool { n, _ := f.totals(); return n == 130 })
}

func TestRetriesKeepTheBatchIDAndObeyRetryAfter(t *testing.T) {
	for _, mode := range []string{"503", "429"} {
		t.Run(mode, func(t *testing.T) {
			f := newFakeIngest(t)
			f.set(mode, 2, 1)
			h := startShipper(t, f.srv.URL, t.TempDir(), nil)
			h.s.AddStorage(storageSample(1))
			waitFor(t, "delivery", 10*time.Second, func() bool { n, _ := f.totals(); return n == 1 })
			f.mu.Lock()
			defer f.mu.Unlock()
			if len(f.attempts) != 1 {
				t.Fatalf("%d batch ids for one batch", len(f.attempts))
			}
			for _, ts := range f.attempts {
				if len(ts) != 3 {
					t.Fatalf("%d attempts, want 3", len(ts))
				}
				for i := 1; i < len(ts); i++ {
					if gap := ts[i].Sub(ts[i-1]); gap < time.Second {
						t.Fatalf("retried after %v despite Retry-After: 1", gap)
					}
				}
			}
		})
	}
}

func TestABatchWhoseAnswerWasLostIsStoredOnce(t *testing.T) {
	f := newFakeIngest(t)
	f.set("lose-answer", 1, 0)
	h := startShipper(t, f.srv.URL, t.TempDir(), nil)
	for i := range 10 {
		h.s.AddStorage(storageSample(i))
	}
	waitFor(t, "acknowledged delivery", 5*time.Second, func() bool { return h.m.BatchesSent.Load() == 1 })
	if n, b := f.totals(); n != 10 || b != 1 {
		t.Fatalf("stored %d samples in %d batches, want 10 in 1", n, b)
	}
	if h.m.BatchesDuplicate.Load() != 1 || h.m.Shipped[metrics.Storage].Load() != 10 {
		t.Fatalf("duplicate=%d shipped=%d", h.m.BatchesDuplicate.Load(), h.m.Shipped[metrics.Storage].Load())
	}
}

func TestWhileTheAPIIsUnreachableBatchesAreSpooledAndDrainedAfterwards(t *testing.T) {
	f := newFakeIngest(t)
	f.set("drop", -1, 0)
	dir := t.TempDir()
	h := startShipper(t, f.srv.URL, dir, nil)
	total := 0
	for round := range 8 {
		for i := range 50 {
			h.s.AddStorage(storageSample(round*50 + i))
			total++
		}
		waitFor(t, "a cut", 5*time.Second, func() bool { return h.s.pending() == 0 })
	}
	waitFor(t, "spooled batches", 5*time.Second, func() bool { return h.s.SpooledBatches() >= 3 })
	if h.m.Spooled[metrics.Storage].Load() == 0 {
		t.Fatal("spooled counter not moving")
	}
	f.set("ok", 0, 0)
	waitFor(t, "drain", 10*time.Second, func() bool { n, _ := f.totals(); return n == total })
	waitFor(t, "empty spool", 5*time.Second, func() bool { return h.s.SpooledBatches() == 0 })
	entries, _ := os.ReadDir(dir)
	if len(entries) != 0 {
		t.Fatalf("%d files left in the spool", len(entries))
	}
	if got := h.m.Shipped[metrics.Storage].Load(); got != uint64(total) {
		t.Fatalf("shipped %d, want %d", got, total)
	}
}

func TestAFullSpoolDropsTheOldestBatchAndCountsIt(t *testing.T) {
	m := metrics.New("test")
	sp, err := openSpool(t.TempDir(), 1000, m)
	if err != nil {
		t.Fatal(err)
	}
	mk := func(n int) *item {
		var c Counts
		c[metrics.Mesh] = n
		return &item{id: newBatchID(), gz: bytes.Repeat([]byte{1}, 400), counts: c}
	}
	first := mk(7)
	for _, it := range []*item{first, mk(3), mk(5)} {
		if err := sp.put(it); err != nil {
			t.Fatal(err)
		}
	}
	if sp.len() != 2 || m.Dropped[metrics.Mesh].Load() != 7 {
		t.Fatalf("entries=%d dropped=%d, want 2 and 7", sp.len(), m.Dropped[metrics.Mesh].Load())
	}
	if _, err := os.Stat(first.path); !os.IsNotExist(err) {
		t.Fatal("the oldest batch is still on disk")
	}
	it, _ := sp.claimOldest()
	if it == nil || it.counts[metrics.Mesh] != 3 {
		t.Fatalf("oldest left is %+v, want the 3-sample batch", it)
	}
	// A batch being sent is never evicted.
	if err := sp.put(mk(9)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(it.path); err != nil {
		t.Fatal("a claimed batch was evicted")
	}
}

func TestStoppingFlushesWithinTheDeadline(t *testing.T) {
	f := newFakeIngest(t)
	h := startShipper(t, f.srv.URL, t.TempDir(), func(o *Options) { o.MaxBatchAge = time.Hour })
	for i := range 42 {
		h.s.AddStorage(storageSample(i))
	}
	h.stop()
	if n, _ := f.totals(); n != 42 {
		t.Fatalf("flushed %d samples on stop, want 42", n)
	}
}

func TestWhenTheAPIIsDownAtStopTheBatchWaitsOnDiskAndIsSentWithItsIDOnNextStart(t *testing.T) {
	f := newFakeIngest(t)
	f.set("drop", -1, 0)
	dir := t.TempDir()
	h := startShipper(t, f.srv.URL, dir, func(o *Options) { o.MaxBatchAge = time.Hour; o.FlushDeadline = time.Second })
	for i := range 17 {
		h.s.AddStorage(storageSample(i))
	}
	h.stop()
	if h.s.SpooledBatches() != 1 {
		t.Fatalf("%d spooled batches after stop, want 1", h.s.SpooledBatches())
	}
	f.mu.Lock()
	var firstID string
	for id := range f.attempts {
		firstID = id
	}
	f.mu.Unlock()
	f.set("ok", 0, 0)
	h2 := startShipper(t, f.srv.URL, dir, nil)
	waitFor(t, "drain after restart", 5*time.Second, func() bool { n, _ := f.totals(); return n == 17 })
	f.mu.Lock()
	_, same := f.stored[firstID]
	f.mu.Unlock()
	if !same {
		t.Fatal("the spooled batch was sent under a new id")
	}
	_ = h2
}

func TestABatchIsEncodedAsTheAPIDescribes(t *testing.T) {
	lat := int64(5000)
	bps := 1.5e6
	loss := 0.01
	c := &content{
		mesh: []*sample.MeshBlock{{BaseTimeUS: 1_700_000_000_000_000, BaseRound: 10, PayloadBytes: 1024,
			Peers: []string{"p0", "p1"}, Groups: []string{"g"},
			Mesh: []sample.Mesh{{TimeOffUS: 0, RoundDelta: 0, RTTUS: 412, Peer: 1, Status: sample.StatusOK},
				{TimeOffUS: 10, RoundDelta: 1, RTTUS: 0, Peer: 0, Status: sample.StatusTimeout}},
			Quorum: []sample.Quorum{{TimeOffUS: -5, RoundDelta: 0, LatencyUS: 500, Group: 0, K: 2, N: 3, Status: sample.StatusOK}}}},
		storage: []sample.Storage{{TimeUS: 1, TargetID: "t", Op: "get", Variant: "gzip9", Content: "text", SizeBytes: 10,
			StoredBytes: 5, Copies: 1, Concurrency: 1, Attempt: 2, LatencyUS: &lat, BytesPerS: &bps},
			{TimeUS: 2, TargetID: "t", Op: "put", Variant: "plain", Content: "binary", Status: sample.StatusError, ErrorClass: "network"}},
		throughput: []sample.Throughput{{TimeUS: 3, PeerID: "q", Proto: "udp", ExperimentID: "e", Direction: "send", BytesPerS: 1e9, LossRatio: &loss}},
	}
	// One encoder renders every batch of a shipper: what an earlier batch left in its buffers,
	// dictionaries or gzip writer must not show, and a returned batch stays as it was.
	var x encoder
	other := &content{mesh: []*sample.MeshBlock{{Peers: []string{"zz", "yy"}, Groups: []string{"h"},
		Mesh: make([]sample.Mesh, 3), Quorum: make([]sample.Quorum, 2)}}}
	_ = x.batch("o", "a", other)
	gz := x.batch("b", "a", c)
	_ = x.batch("o2", "a", other)
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.NewDecoder(zr).Decode(&got); err != nil {
		t.Fatal(err)
	}
	want := `{"agent_id":"a","batch_id":"b",` +
		`"mesh":{"payload_bytes":[1024,1024],"peer_idx":[0,1],"peers":["p1","p0"],"round":[10,11],"rtt_us":[412,null],"status":[0,1],"time_us":[1700000000000000,1700000000000010]},` +
		`"quorum":{"group_idx":[0],"groups":["g"],"k":[2],"latency_us":[500],"n":[3],"round":[10],"status":[0],"time_us":[1699999999999995]},` +
		`"storage":{"attempt":[2,0],"bytes_per_s":[1500000,null],"concurrency":[1,0],"content":["text","binary"],"copies":[1,0],"error_class":[null,"network"],"latency_us":[5000,null],"op":["get","put"],"rtt_us":[null,null],"size_bytes":[10,0],"status":[0,3],"stored_bytes":[5,0],"target_idx":[0,0],"targets":["t"],"time_us":[1,2],"ttfb_us":[null,null],"variant":["gzip9","plain"]},` +
		`"throughput":{"bytes_per_s":[1000000000],"direction":["send"],"experiment_id":["e"],"jitter_us":[null],"loss_ratio":[0.01],"peer_idx":[0],"peers":["q"],"proto":["udp"],"time_us":[3]}}`
	norm, _ := json.Marshal(got)
	if string(norm) != want {
		t.Fatalf("encoded\n%s\nwant\n%s", norm, want)
	}
}

func TestSplitKeepsEverySampleOnce(t *testing.T) {
	b := &sample.MeshBlock{Peers: []string{"p"}, Groups: []string{"g"}, Mesh: make([]sample.Mesh, 250), Quorum: make([]sample.Quorum, 30)}
	parts := split([]*sample.MeshBlock{b}, make([]sample.Storage, 15), nil, 100)
	total := 0
	for _, p := range parts {
		n := p.counts().Total()
		if n > 100 {
			t.Fatalf("a batch of %d samples", n)
		}
		total += n
	}
	if total != 295 || len(parts) != 3 {
		t.Fatalf("%d samples in %d batches, want 295 in 3", total, len(parts))
	}
}

func (f *fakeIngest) posts() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, a := range f.attempts {
		n += len(a)
	}
	return n
}

func TestADeletedAgentStopsShippingAndDropsItsSpool(t *testing.T) {
	f := newFakeIngest(t)
	f.set("drop", -1, 0)
	dir := t.TempDir()
	var deletedCalls atomic.Int32
	h := startShipper(t, f.srv.URL, dir, func(o *Options) { o.OnDeleted = func() { deletedCalls.Add(1) } })
	for i := range 300 {
		h.s.AddStorage(storageSample(i))
	}
	waitFor(t, "a spooled batch", 10*time.Second, func() bool { return h.s.pending() == 0 && h.s.SpooledBatches() >= 1 })
	f.set("410", 0, 0)
	waitFor(t, "the deletion to be noticed", 20*time.Second, func() bool { return deletedCalls.Load() == 1 })
	waitFor(t, "an empty spool", 10*time.Second, func() bool {
		entries, _ := os.ReadDir(dir)
		return h.s.SpooledBatches() == 0 && len(entries) == 0
	})
	// New samples are neither sent nor spooled.
	posted := f.posts()
	for i := range 300 {
		h.s.AddStorage(storageSample(1000 + i))
	}
	waitFor(t, "a cut", 10*time.Second, func() bool { return h.s.pending() == 0 })
	h.stop()
	if got := f.posts(); got != posted {
		t.Fatalf("%d batches posted after the agent was deleted", got-posted)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("%d files left in the spool of a deleted agent", len(entries))
	}
	if n, _ := f.totals(); n != 0 {
		t.Fatalf("%d samples stored for a deleted agent", n)
	}
	if got := h.m.Dropped[metrics.Storage].Load(); got != 600 {
		t.Fatalf("dropped %d samples, want all 600", got)
	}
	if got := deletedCalls.Load(); got != 1 {
		t.Fatalf("OnDeleted called %d times, want once", got)
	}
}

func TestAnUnavailableAPIKeepsTheBatchAndTheShipperRunning(t *testing.T) {
	f := newFakeIngest(t)
	f.set("503", 3, 0)
	h := startShipper(t, f.srv.URL, t.TempDir(), nil)
	for i := range 50 {
		h.s.AddStorage(storageSample(i))
	}
	waitFor(t, "delivery after 503s", 20*time.Second, func() bool { n, _ := f.totals(); return n == 50 })
	if h.m.Dropped[metrics.Storage].Load() != 0 || h.s.Deleted() {
		t.Fatal("a 503 dropped samples or stopped the shipper")
	}
}

// The API stores a batch but sets aside its rows about a peer deleted meanwhile: those
// samples are counted as set aside, not shipped, so the agent's counters still add up to
// what the database holds.
func TestRowsTheAPISetsAsideAreCountedAsSetAsideNotShipped(t *testing.T) {
	f := newFakeIngest(t)
	f.setAside = "throughput"
	h := startShipper(t, f.srv.URL, t.TempDir(), nil)
	for i := range 5 {
		h.s.AddThroughput(sample.Throughput{TimeUS: int64(i + 1), PeerID: "00000000-0000-4000-8000-0000000000d1",
			Proto: "tcp", ExperimentID: "e", Direction: "send", BytesPerS: 1e6})
	}
	want := []string{`stormwatch_agent_samples_set_aside_total{kind="throughput"} 5`,
		`stormwatch_agent_samples_shipped_total{kind="throughput"} 0`}
	var text string
	deadline := time.Now().Add(10 * time.Second)
	for {
		var buf bytes.Buffer
		if err := h.m.WriteText(&buf); err != nil {
			t.Fatal(err)
		}
		text = buf.String()
		if n, _ := f.totals(); n == 5 && strings.Contains(text, want[0]) && strings.Contains(text, want[1]) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the batch was answered with 5 rows set aside, want %q in:\n%s", want, text)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

package shipper

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"stormwatch/agents/internal/metrics"
	"stormwatch/agents/internal/sample"
	"stormwatch/agents/internal/testutil"
)

const testAgentID = "00000000-0000-4000-8000-000000000001"

func (f *fakeIngest) setMaxBody(n int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.maxBody = n
}

// latencyCounts is how many times each storage sample (told apart by its latency) was stored.
func (f *fakeIngest) latencyCounts() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]int{}
	for _, vs := range f.latency {
		for _, v := range vs {
			out[v]++
		}
	}
	return out
}

// assertEachOnce checks that samples storageSample(0..n-1) were each stored exactly once.
func assertEachOnce(t *testing.T, f *fakeIngest, n int) {
	t.Helper()
	got := f.latencyCounts()
	if len(got) != n {
		t.Fatalf("%d distinct samples stored, want %d", len(got), n)
	}
	for i := range n {
		if c := got[strconv.Itoa(1000+i)]; c != 1 {
			t.Fatalf("sample %d stored %d times", i, c)
		}
	}
}

func encodedSize(n int) int {
	xs := make([]sample.Storage, n)
	for i := range xs {
		xs[i] = storageSample(i)
	}
	var x encoder
	return len(x.batch(newBatchID(), testAgentID, &content{storage: xs}))
}

// assertSplitAndStoredOnce: want samples arrived in two or more batches, each sample once,
// all counted as shipped and none as dropped.
func assertSplitAndStoredOnce(t *testing.T, f *fakeIngest, m *metrics.Agent, want int) {
	t.Helper()
	n, batches := f.totals()
	if n != want || batches < 2 {
		t.Fatalf("stored %d samples in %d batches, want %d in 2 or more", n, batches, want)
	}
	assertEachOnce(t, f, want)
	// The shipper counts a batch once it has read the answer, after the server stored it.
	waitFor(t, "every sample counted as shipped", 10*time.Second, func() bool {
		return m.Shipped[metrics.Storage].Load() >= uint64(want)
	})
	if got := m.Shipped[metrics.Storage].Load(); got != uint64(want) {
		t.Fatalf("shipped counter %d, want %d", got, want)
	}
	if got := m.Dropped[metrics.Storage].Load(); got != 0 {
		t.Fatalf("dropped counter %d, want 0", got)
	}
}

func TestABatchTwiceTheBodyLimitArrivesWholeInSmallerBatches(t *testing.T) {
	f := newFakeIngest(t)
	f.setMaxBody(int64(encodedSize(100) / 2))
	h := startShipper(t, f.srv.URL, t.TempDir(), func(o *Options) { o.MaxBatchAge = time.Hour })
	for i := range 100 {
		h.s.AddStorage(storageSample(i))
	}
	waitFor(t, "every sample stored", 30*time.Second, func() bool { n, _ := f.totals(); return n >= 100 })
	assertSplitAndStoredOnce(t, f, h.m, 100)
	if h.m.BatchesSplit.Load() == 0 {
		t.Fatal("no batch counted as split")
	}
}

func TestASingleSampleOverTheBodyLimitIsDroppedAndCounted(t *testing.T) {
	f := newFakeIngest(t)
	f.setMaxBody(int64(encodedSize(1) / 2))
	var logs testutil.LogBuffer
	h := startShipper(t, f.srv.URL, t.TempDir(), func(o *Options) {
		o.MaxBatchAge = time.Hour
		o.MaxBatchSamples = 3
		o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	for i := range 3 {
		h.s.AddStorage(storageSample(i))
	}
	waitFor(t, "three samples dropped", 30*time.Second, func() bool { return h.m.Dropped[metrics.Storage].Load() >= 3 })
	// The shipper goes on: what fits is still delivered.
	f.setMaxBody(0)
	for i := 3; i < 5; i++ {
		h.s.AddStorage(storageSample(i))
	}
	h.s.SetLimits(2, time.Hour)
	waitFor(t, "the next batch", 30*time.Second, func() bool { n, _ := f.totals(); return n >= 2 })
	if got := h.m.Dropped[metrics.Storage].Load(); got != 3 {
		t.Fatalf("dropped counter %d, want 3", got)
	}
	if got := h.m.Shipped[metrics.Storage].Load(); got != 2 {
		t.Fatalf("shipped counter %d, want 2", got)
	}
	if got := strings.Count(logs.String(), "413"); got != 3 {
		t.Fatalf("%d log records name the 413, want one per dropped sample:\n%s", got, logs.String())
	}
}

func TestASpooledBatchOverTheBodyLimitIsSplitAndDrainedAfterARestart(t *testing.T) {
	f := newFakeIngest(t)
	f.set("503", -1, 0)
	dir := t.TempDir()
	h := startShipper(t, f.srv.URL, dir, func(o *Options) { o.MaxBatchAge = time.Hour })
	for i := range 100 {
		h.s.AddStorage(storageSample(i))
	}
	waitFor(t, "the batch on disk", 30*time.Second, func() bool { return h.s.SpooledBatches() == 1 })
	h.stop()

	f.set("ok", 0, 0)
	f.setMaxBody(int64(encodedSize(100) / 2))
	h2 := startShipper(t, f.srv.URL, dir, nil)
	waitFor(t, "the spool drained", 30*time.Second, func() bool {
		n, _ := f.totals()
		return n >= 100 && h2.s.SpooledBatches() == 0
	})
	assertSplitAndStoredOnce(t, f, h2.m, 100)
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(des) != 0 {
		t.Fatalf("%d files left in the spool", len(des))
	}
}

// spoolBatch is a 10-sample batch written to the spool at dir.
func spoolBatch(t *testing.T, sp *spool) *item {
	t.Helper()
	xs := make([]sample.Storage, 10)
	for i := range xs {
		xs[i] = storageSample(i)
	}
	var x encoder
	c := &content{storage: xs}
	it := &item{id: newBatchID(), counts: c.counts()}
	it.gz = x.batch(it.id, testAgentID, c)
	if err := sp.put(it); err != nil {
		t.Fatal(err)
	}
	return it
}

func spoolIDs(sp *spool) []string {
	var ids []string
	for _, e := range sp.entries {
		ids = append(ids, e.id)
	}
	return ids
}

func TestASplitCutShortByACrashLeavesEverySampleOnceInTheSpool(t *testing.T) {
	t.Run("both halves written", func(t *testing.T) {
		dir := t.TempDir()
		sp, err := openSpool(dir, 64<<20, metrics.New("test"))
		if err != nil {
			t.Fatal(err)
		}
		parent := spoolBatch(t, sp)
		halves, err := halve(parent.id, parent.gz)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range halves {
			if err := sp.put(h); err != nil { // the parent is still there: killed before removing it
				t.Fatal(err)
			}
		}
		again, err := openSpool(dir, 64<<20, metrics.New("test"))
		if err != nil {
			t.Fatal(err)
		}
		ids := spoolIDs(again)
		if len(ids) != 2 || ids[0] != halves[0].id || ids[1] != halves[1].id {
			t.Fatalf("spool after restart holds %v, want the two halves %s %s", ids, halves[0].id, halves[1].id)
		}
	})
	t.Run("one half written", func(t *testing.T) {
		dir := t.TempDir()
		sp, err := openSpool(dir, 64<<20, metrics.New("test"))
		if err != nil {
			t.Fatal(err)
		}
		parent := spoolBatch(t, sp)
		halves, err := halve(parent.id, parent.gz)
		if err != nil {
			t.Fatal(err)
		}
		if err := sp.put(halves[0]); err != nil {
			t.Fatal(err)
		}
		again, err := openSpool(dir, 64<<20, metrics.New("test"))
		if err != nil {
			t.Fatal(err)
		}
		if ids := spoolIDs(again); len(ids) != 1 || ids[0] != parent.id {
			t.Fatalf("spool after restart holds %v, want only the parent %s", ids, parent.id)
		}
	})
}

func TestHalvesAreValidBatchesWithStableIDs(t *testing.T) {
	xs := make([]sample.Storage, 7)
	for i := range xs {
		xs[i] = storageSample(i)
	}
	var x encoder
	gz := x.batch("00000000-0000-4000-8000-0000000000aa", testAgentID, &content{storage: xs})
	a, err := halve("00000000-0000-4000-8000-0000000000aa", gz)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := halve("00000000-0000-4000-8000-0000000000aa", gz)
	if a[0].id != b[0].id || a[1].id != b[1].id || a[0].id == a[1].id {
		t.Fatalf("half ids %s %s, then %s %s: want stable and distinct", a[0].id, a[1].id, b[0].id, b[1].id)
	}
	if a[0].counts[metrics.Storage] != 3 || a[1].counts[metrics.Storage] != 4 {
		t.Fatalf("halves of 7 hold %v and %v", a[0].counts, a[1].counts)
	}
	for _, h := range append(a[:], mustHalf(t, a[1], 1)) {
		zr, err := gzip.NewReader(bytes.NewReader(h.gz))
		if err != nil {
			t.Fatal(err)
		}
		var body map[string]any
		dec := json.NewDecoder(zr)
		dec.UseNumber()
		if err := dec.Decode(&body); err != nil {
			t.Fatal(err)
		}
		if body["batch_id"] != h.id || body["agent_id"] != testAgentID {
			t.Fatalf("half %s carries batch_id %v agent_id %v", h.id, body["batch_id"], body["agent_id"])
		}
		counts, err := sectionCounts(body)
		if err != nil {
			t.Fatal(err)
		}
		if counts["storage"] != h.counts[metrics.Storage] {
			t.Fatalf("half %s holds %d rows, counted %d", h.id, counts["storage"], h.counts[metrics.Storage])
		}
		st := body["storage"].(map[string]any)
		if len(st["targets"].([]any)) != 1 {
			t.Fatalf("half %s names targets %v, want only the one it uses", h.id, st["targets"])
		}
	}
	one := x.batch(newBatchID(), testAgentID, &content{storage: xs[:1]})
	if _, err := halve("x", one); err != errSingleSample {
		t.Fatalf("halving one sample: %v, want errSingleSample", err)
	}
}

func mustHalf(t *testing.T, it *item, h int) *item {
	t.Helper()
	halves, err := halve(it.id, it.gz)
	if err != nil {
		t.Fatal(err)
	}
	return halves[h]
}

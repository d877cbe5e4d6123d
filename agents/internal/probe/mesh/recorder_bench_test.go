package mesh

import (
	"fmt"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"stormwatch/agents/internal/sample"
)

// bufferedBytesPerSample feeds a recorder as an agent with the given peers and quorum groups
// does at rate rounds/s, takes everything every cut as the shipper does, and measures the
// live heap 10 times a second. For each cut cycle it divides the mean heap growth since the
// cycle began (right after a cut, nothing buffered) by the mean number of samples buffered:
// what a buffered sample costs over a cycle. It returns the median over the cycles after the
// first, so that a one-time allocation elsewhere in the process does not count.
func bufferedBytesPerSample(peers, groups int, rate float64, cut time.Duration, cuts int) float64 {
	rec := NewRecorder()
	idx := make([]uint16, peers)
	for i := range idx {
		idx[i] = rec.PeerIndex(fmt.Sprintf("00000000-0000-4000-8000-%012d", i))
	}
	keys := make([]uint16, groups)
	for i := range keys {
		keys[i] = rec.QuorumKey(fmt.Sprintf("group-%d", i), peers/2+1, peers)
	}
	period := time.Duration(float64(time.Second) / rate)
	perCut := int(cut / period)
	every := max(1, int(100*time.Millisecond/period))
	var ms runtime.MemStats
	liveHeap := func() float64 {
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return float64(ms.HeapAlloc)
	}
	t0 := time.Now()
	var perCycle []float64
	var heap, buffered float64
	base := liveHeap()
	for r := range perCut * cuts {
		start := t0.Add(time.Duration(r) * period)
		for _, p := range idx {
			at := start.Add(time.Duration(mrand.Int64N(int64(period))))
			rec.AddMesh(at, uint64(r+1), 1024, p, time.Duration(40+mrand.IntN(400))*time.Microsecond, sample.StatusOK)
		}
		for _, k := range keys {
			rec.AddQuorum(start, uint64(r+1), 1024, k, 90*time.Microsecond, sample.StatusOK)
		}
		if (r+1)%every == 0 {
			heap += liveHeap() - base
			buffered += float64(rec.Pending())
		}
		if (r+1)%perCut == 0 {
			_ = rec.TakeMesh() // the shipper encodes these and lets them go
			if r+1 > perCut {
				perCycle = append(perCycle, heap/buffered)
			}
			heap, buffered = 0, 0
			base = liveHeap()
		}
	}
	runtime.KeepAlive(rec)
	slices.Sort(perCycle)
	n := len(perCycle)
	return (perCycle[(n-1)/2] + perCycle[n/2]) / 2
}

func TestABufferedSampleCostsAtMostSixteenBytesAtProductionCuts(t *testing.T) {
	if got := unsafe.Sizeof(record{}); got != 12 {
		t.Fatalf("a buffered record is %d bytes, want 12", got)
	}
	// The base workload (8 peers at 100 rounds/s, two default quorum groups) at the server's
	// default cut (max_batch_age_ms 2000), measured in a process of its own: goroutines of
	// other tests would move the heap.
	if os.Getenv("MESH_BYTES_PER_SAMPLE") == "measure" {
		fmt.Printf("bytes-per-sample=%.3f\n", bufferedBytesPerSample(8, 2, 100, 2*time.Second, 6))
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestABufferedSampleCostsAtMostSixteenBytesAtProductionCuts$", "-test.count=1")
	cmd.Env = append(os.Environ(), "MESH_BYTES_PER_SAMPLE=measure")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("measuring process: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`bytes-per-sample=([0-9.]+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("measuring process printed no figure:\n%s", out)
	}
	got, _ := strconv.ParseFloat(string(m[1]), 64)
	if got > 16 {
		t.Fatalf("a buffered sample costs %.2f heap bytes, want at most 16", got)
	}
	t.Logf("%.2f heap bytes per buffered sample", got)
}

func TestTakenSamplesComeBackAsRecorded(t *testing.T) {
	rec := NewRecorder()
	a, b := rec.PeerIndex("a"), rec.PeerIndex("b")
	g := rec.QuorumKey("g", 2, 3)
	t0 := time.UnixMicro(1_700_000_000_000_000)
	var want []flat
	// Enough for several chunks, a payload change and a round jump beyond an int16 offset.
	for i := range 1000 {
		round := uint64(10 + i)
		payload := 1024
		if i >= 700 {
			payload, round = 64, uint64(100000+i)
		}
		st, rtt := sample.StatusOK, time.Duration(i)*time.Microsecond
		if i%7 == 0 {
			st = sample.StatusTimeout
		}
		peer, id := a, "a"
		if i%2 == 1 {
			peer, id = b, "b"
		}
		sent := t0.Add(time.Duration(i) * time.Millisecond)
		rec.AddMesh(sent, round, payload, peer, rtt, st)
		if st != sample.StatusOK {
			rtt = 0
		}
		want = append(want, flat{id, sent, round, uint32(rtt / time.Microsecond), st})
		if i%10 == 0 {
			rec.AddQuorum(sent, round, payload, g, 77*time.Microsecond, sample.StatusOK)
		}
	}
	if rec.Pending() != 1100 {
		t.Fatalf("pending %d, want 1100", rec.Pending())
	}
	col := &collector{rec: rec}
	col.drain()
	if len(col.m) != len(want) || len(col.q) != 100 {
		t.Fatalf("took %d mesh and %d quorum samples, want %d and 100", len(col.m), len(col.q), len(want))
	}
	for i := range want {
		if !col.m[i].sent.Equal(want[i].sent) || col.m[i].peer != want[i].peer || col.m[i].round != want[i].round ||
			col.m[i].rttUS != want[i].rttUS || col.m[i].status != want[i].status {
			t.Fatalf("sample %d: got %+v, want %+v", i, col.m[i], want[i])
		}
	}
	for _, q := range col.q {
		if q.group != "g" || q.k != 2 || q.n != 3 || q.latencyUS != 77 || q.status != sample.StatusOK {
			t.Fatalf("quorum sample %+v", q)
		}
	}
	if rec.Pending() != 0 {
		t.Fatalf("pending %d after taking everything", rec.Pending())
	}
}

// BenchmarkRecorderBytesPerSample reports the heap bytes a buffered sample costs at the base
// workload and the production cut cadence (bench/agent quotes it), and the record size.
func BenchmarkRecorderBytesPerSample(b *testing.B) {
	var got float64
	for range b.N {
		got = bufferedBytesPerSample(8, 2, 100, 2*time.Second, 5)
	}
	b.ReportMetric(got, "B/sample")
	b.ReportMetric(float64(unsafe.Sizeof(record{})), "record-B")
}

// BenchmarkRecorderAddMesh is the cost of recording one sample.
func BenchmarkRecorderAddMesh(b *testing.B) {
	rec := NewRecorder()
	p := rec.PeerIndex("a")
	t0 := time.Now()
	b.ReportAllocs()
	for i := range b.N {
		rec.AddMesh(t0.Add(time.Duration(i)*10*time.Microsecond), uint64(i/8), 1024, p, 412*time.Microsecond, sample.StatusOK)
		if i%2000 == 1999 {
			_ = rec.TakeMesh()
		}
	}
}

package mesh

import (
	"runtime"
	"testing"
	"time"
	"unsafe"

	"stormwatch/agents/internal/sample"
)

// BenchmarkRecorderBytesPerSample reports the heap bytes a buffered mesh sample costs,
// measured on the recorder itself (bench/agent quotes it).
func BenchmarkRecorderBytesPerSample(b *testing.B) {
	rec := NewRecorder()
	peers := make([]uint16, 8)
	for i := range peers {
		peers[i] = rec.PeerIndex(string(rune('a' + i)))
	}
	t0 := time.Now()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rec.AddMesh(t0.Add(time.Duration(i)*10*time.Microsecond), uint64(i/8), 1024, peers[i%8], 412*time.Microsecond, sample.StatusOK)
	}
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(b.N), "B/sample")
	b.ReportMetric(float64(unsafe.Sizeof(sample.Mesh{})), "sizeof-B")
	runtime.KeepAlive(rec)
}

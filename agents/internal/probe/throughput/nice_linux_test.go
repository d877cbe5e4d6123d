package throughput

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// nicedThreads counts this process's threads at nice value n.
func nicedThreads(t *testing.T, n int) int {
	t.Helper()
	tasks, err := filepath.Glob("/proc/self/task/*/stat")
	if err != nil {
		t.Fatal(err)
	}
	count := 0
	for _, p := range tasks {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // the thread ended
		}
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if v, err := strconv.Atoi(fields[16]); err == nil && v == n { // field 19 of proc(5)
			count++
		}
	}
	return count
}

func TestTCPStreamsRunOnThreadsAtTheNiceValueAndLeaveNoneBehind(t *testing.T) {
	const nice = 17 // distinct from anything the test binary runs at
	a, b := startAgent(t), startAgent(t)
	a.m.SetNice(nice)
	b.m.SetNice(nice)
	ini, resp := pair(a, b, b.m.Addr().String(), Experiment{Proto: "tcp", Streams: 3, DurationS: 2, StartAt: time.Now()})
	b.m.Apply([]Experiment{resp})
	a.m.Apply([]Experiment{ini})
	most := 0
	waitFor(t, "the experiment's samples", 30*time.Second, func() bool {
		most = max(most, nicedThreads(t, nice))
		return len(a.got.all()) == 2 && len(b.got.all()) == 2
	})
	// Each direction has 3 writer threads and 3 reader threads.
	if most < 3 {
		t.Fatalf("at most %d threads at nice %d during the experiment, want the streams' (3 a side)", most, nice)
	}
	waitFor(t, "no thread left at that nice value", 10*time.Second, func() bool { return nicedThreads(t, nice) == 0 })
}

package throughput

import (
	"context"
	"math"
	"testing"
	"time"
)

// datagram is one arrival fed to a meter: sequence number, send and arrival offsets.
type datagram struct {
	seq          uint64
	sent, arrive time.Duration
}

// stream makes n datagrams per second for seconds, sent evenly; transit gives each one's
// one-way time and keep says whether it arrives.
func stream(perSecond, seconds int, transit func(i int) time.Duration, keep func(i int) bool) []datagram {
	var out []datagram
	gap := time.Second / time.Duration(perSecond)
	for i := range perSecond * seconds {
		if keep != nil && !keep(i) {
			continue
		}
		sent := time.Duration(i) * gap
		out = append(out, datagram{uint64(i), sent, sent + transit(i)})
	}
	return out
}

// measure feeds a meter as if the datagrams had arrived in the past and returns its seconds.
func measure(t *testing.T, seconds int, ds []datagram) []second {
	t.Helper()
	m := newMeter(seconds)
	base := time.Now().Add(-time.Duration(seconds+2) * time.Second)
	for _, d := range ds {
		m.addUDP(1000, d.seq, base.Add(d.sent).UnixNano(), base.Add(d.arrive))
	}
	var out []second
	if err := m.sample(context.Background(), true, time.Second, func(s second) { out = append(out, s) }); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestUDPLossAndJitterPerSecondOnShapesThatCouldFoolThem(t *testing.T) {
	const ms = time.Millisecond
	for _, tc := range []struct {
		name     string
		ds       []datagram
		loss     []float64 // per second
		jitterUS float64   // at the end of the last second
		tol      float64   // on the jitter, µs
	}{
		{name: "steady transit: no loss, no jitter",
			ds:   stream(1000, 3, func(int) time.Duration { return 5 * ms }, nil),
			loss: []float64{0, 0, 0}, jitterUS: 0, tol: 0.5},
		{name: "transit alternating 5 and 7 ms: jitter tends to 2 ms",
			ds:   stream(1000, 3, func(i int) time.Duration { return 5*ms + time.Duration(i%2)*2*ms }, nil),
			loss: []float64{0, 0, 0}, jitterUS: 2000, tol: 20},
		{name: "a queue building 10 us per datagram is 10 us of jitter, not the drift",
			ds:   stream(1000, 3, func(i int) time.Duration { return 5*ms + time.Duration(i)*10*time.Microsecond }, nil),
			loss: []float64{0, 0, 0}, jitterUS: 10, tol: 0.5},
		{name: "one datagram in four lost",
			ds:   stream(1000, 3, func(int) time.Duration { return ms }, func(i int) bool { return i%4 != 3 }),
			loss: []float64{0.25, 0.25, 0.25}, jitterUS: 0, tol: 0.5},
		{name: "the second second lost entirely",
			ds:   stream(1000, 3, func(int) time.Duration { return ms }, func(i int) bool { return i < 1000 || i >= 2000 }),
			loss: []float64{0, 1, 0}, jitterUS: 0, tol: 0.5},
		{name: "half of the second second lost, in one block",
			ds:   stream(1000, 3, func(int) time.Duration { return ms }, func(i int) bool { return i < 1250 || i >= 1750 }),
			loss: []float64{0, 0.5, 0}, jitterUS: 0, tol: 0.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := measure(t, len(tc.loss), tc.ds)
			if len(got) != len(tc.loss) {
				t.Fatalf("%d seconds, want %d", len(got), len(tc.loss))
			}
			for i, s := range got {
				if math.Abs(*s.lossRatio-tc.loss[i]) > 0.002 {
					t.Errorf("second %d: loss %.4f, want %.4f", i+1, *s.lossRatio, tc.loss[i])
				}
			}
			if j := float64(*got[len(got)-1].jitterUS); math.Abs(j-tc.jitterUS) > tc.tol {
				t.Errorf("jitter %v us, want %v ± %v", j, tc.jitterUS, tc.tol)
			}
		})
	}
}

func TestReorderedDatagramsAreNotCountedAsLoss(t *testing.T) {
	ds := stream(1000, 2, func(int) time.Duration { return time.Millisecond }, nil)
	for i := 0; i+1 < len(ds); i += 2 { // each pair arrives swapped, 0.5 ms apart
		ds[i].arrive, ds[i+1].arrive = ds[i+1].arrive, ds[i].arrive
		ds[i], ds[i+1] = ds[i+1], ds[i]
	}
	for i, s := range measure(t, 2, ds) {
		if *s.lossRatio != 0 {
			t.Errorf("second %d: loss %.4f, want 0", i+1, *s.lossRatio)
		}
		if s.bytesPerS != 1000*1000 {
			t.Errorf("second %d: %v bytes, want %v", i+1, s.bytesPerS, 1000*1000)
		}
	}
}

func TestTCPBytesGoToTheSecondTheyArrivedInHoweverLateTheCut(t *testing.T) {
	m := newMeter(3)
	base := time.Now().Add(-5 * time.Second)
	for i, n := range []int{100, 200, 300} {
		for k := range 10 { // ten reads spread over second i
			m.addTCP(n, base.Add(time.Duration(i)*time.Second+time.Duration(k)*90*time.Millisecond))
		}
	}
	m.addTCP(1<<20, base.Add(3500*time.Millisecond)) // after the last second: not counted
	var got []float64
	if err := m.sample(context.Background(), false, time.Second, func(s second) {
		got = append(got, s.bytesPerS)
		if s.lossRatio != nil || s.jitterUS != nil {
			t.Errorf("a TCP second has loss or jitter: %+v", s)
		}
	}); err != nil {
		t.Fatal(err)
	}
	want := []float64{1000, 2000, 3000}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("seconds %v, want %v", got, want)
		}
	}
}

func TestAReceiverThatGetsNothingGivesUpAfterTheFirstByteLimit(t *testing.T) {
	m := newMeter(3)
	start := time.Now()
	err := m.sample(context.Background(), false, 200*time.Millisecond, func(second) { t.Error("a second was emitted") })
	if err != errNoData {
		t.Fatalf("err %v, want %v", err, errNoData)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("gave up after %v", d)
	}
}

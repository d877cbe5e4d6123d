package throughput

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"math"
	"sort"
	"sync"
	"testing"
	"time"

	"stormwatch/agents/internal/sample"
	"stormwatch/agents/testbed/shaper"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// sink collects what a manager ships.
type sink struct {
	mu sync.Mutex
	xs []sample.Throughput
}

func (s *sink) add(x sample.Throughput) {
	s.mu.Lock()
	s.xs = append(s.xs, x)
	s.mu.Unlock()
}

func (s *sink) all() []sample.Throughput {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := append([]sample.Throughput(nil), s.xs...)
	sort.Slice(out, func(i, j int) bool { return out[i].TimeUS < out[j].TimeUS })
	return out
}

func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func newUUID() string {
	var b [idLen]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmtUUID(b)
}

type testAgent struct {
	id  string
	m   *Manager
	got *sink
}

func startAgent(t *testing.T) *testAgent {
	t.Helper()
	a := &testAgent{id: newUUID(), got: &sink{}}
	m, err := Listen("127.0.0.1:0", quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	a.m = m
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = m.Run(ctx, a.id, a.got.add) }()
	t.Cleanup(func() { cancel(); <-done })
	return a
}

// pair returns the initiator's and the responder's view of one experiment.
func pair(a, b *testAgent, peerAddress string, base Experiment) (Experiment, Experiment) {
	base.ID = newUUID()
	base.Token = make([]byte, 32)
	_, _ = rand.Read(base.Token)
	ini, resp := base, base
	ini.Role, ini.PeerAgentID, ini.PeerAddress = Initiator, b.id, peerAddress
	resp.Role, resp.PeerAgentID = Responder, a.id
	return ini, resp
}

func startShaper(t *testing.T, upstream string, high, low float64, after int64) *shaper.Shaper {
	t.Helper()
	s, err := shaper.Listen(shaper.Config{Listen: "127.0.0.1:0", Upstream: upstream, HighBytesPerS: high,
		LowBytesPerS: low, SwitchAfterBytes: after})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return s
}

// within fails unless got is within frac of want.
func within(t *testing.T, what string, got, want, frac float64) {
	t.Helper()
	if math.Abs(got-want) > frac*math.Abs(want) {
		t.Errorf("%s: %.4g, want %.4g ± %.0f%%", what, got, want, 100*frac)
	}
}

// edgeSkew is how much later than the shaper's write a loaded machine may let the receiver
// read it (a 5.4% miss on one second was 22 ms of it at 4 MB/s).
const edgeSkew = 25 * time.Millisecond

func TestExperimentsThroughAShaperRecordTheShapersRatesAndSwitchWithin5Percent(t *testing.T) {
	const seconds = 4
	for _, tc := range []struct {
		name      string
		exp       Experiment
		high, low float64 // bytes/s through the shaper
		after     int64
	}{
		{name: "tcp, 4 streams", exp: Experiment{Proto: "tcp", Streams: 4},
			high: 4e6, low: 1.5e6, after: 6e6},
		{name: "udp above the shaper's rates", exp: Experiment{Proto: "udp", UDPRateBitsPerS: 12e6, UDPDatagramBytes: 8000},
			high: 1e6, low: 0.4e6, after: 1.5e6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := startAgent(t), startAgent(t)
			sh := startShaper(t, b.m.Addr().String(), tc.high, tc.low, tc.after)
			tc.exp.StartAt, tc.exp.DurationS = time.Now(), seconds
			ini, resp := pair(a, b, sh.Addr(), tc.exp)
			b.m.Apply([]Experiment{resp})
			a.m.Apply([]Experiment{ini})
			waitFor(t, "both directions' samples", 3*seconds*time.Second+20*time.Second, func() bool {
				return len(a.got.all()) == seconds && len(b.got.all()) == seconds
			})
			for _, dir := range []struct {
				name     string
				receiver *testAgent
				sender   *testAgent
				shaped   shaper.Direction
			}{{"forward", b, a, shaper.Up}, {"reverse", a, b, shaper.Down}} {
				xs := dir.receiver.got.all()
				st := sh.Stats(dir.shaped)
				if st.SwitchedAt.IsZero() {
					t.Fatalf("%s: the shaper never switched (%d bytes)", dir.name, st.Bytes)
				}
				for _, x := range xs {
					if x.ExperimentID != ini.ID || x.PeerID != dir.sender.id || x.Direction != "receive" || x.Proto != tc.exp.Proto {
						t.Fatalf("%s: sample %+v does not name the experiment, the sender and direction receive", dir.name, x)
					}
					if (tc.exp.Proto == "udp") != (x.LossRatio != nil && x.JitterUS != nil) {
						t.Fatalf("%s: loss and jitter must be set for UDP only: %+v", dir.name, x)
					}
				}
				t0 := time.UnixMicro(xs[0].TimeUS).Add(-time.Second)
				// Each second as the receiver saw it against what the shaper forwarded then.
				var highs, lows []float64
				for i, x := range xs {
					end := time.UnixMicro(x.TimeUS)
					start := end.Add(-time.Second)
					label := fmt.Sprintf("%s second %d", dir.name, i+1)
					// The receiver reads what the shaper wrote a scheduling delay later: on a loaded
					// machine (make test runs suites side by side) up to edgeSkew at either edge.
					lo := st.BytesBetween(start.Add(edgeSkew), end.Add(-edgeSkew)) * 0.95
					hi := st.BytesBetween(start.Add(-edgeSkew), end.Add(edgeSkew)) * 1.05
					if x.BytesPerS < lo || x.BytesPerS > hi {
						t.Errorf("%s bytes against the shaper's: %.4g, want %.4g ± 5%% with %v of skew at its edges (%.4g to %.4g)",
							label, x.BytesPerS, st.BytesBetween(start, end), edgeSkew, lo, hi)
					}
					switch {
					case !end.After(st.SwitchedAt):
						highs = append(highs, x.BytesPerS)
					case !start.Before(st.SwitchedAt):
						lows = append(lows, x.BytesPerS)
					}
				}
				if len(highs) == 0 || len(lows) == 0 {
					t.Fatalf("%s: want whole seconds before and after the switch at %v", dir.name, st.SwitchedAt.Sub(t0))
				}
				high, low := mean(highs), mean(lows)
				// The switch, located from the samples alone: the second that spans it is part
				// high, part low; the volume before it is what came at the high level.
				var before float64
				var switchAt time.Time
				for _, x := range xs {
					end := time.UnixMicro(x.TimeUS)
					if x.BytesPerS >= high-0.05*(high-low) {
						before += x.BytesPerS
						continue
					}
					f := max(0, (x.BytesPerS-low)/(high-low))
					before += f * high
					switchAt = end.Add(-time.Second).Add(time.Duration(f * float64(time.Second)))
					break
				}
				within(t, dir.name+" bytes before the switch", before, float64(tc.after), 0.05)
				// The switch is located from the bytes of the second that spans it, which the
				// checks above hold to 5% (with edgeSkew at its edges): 5% of the high rate over
				// the step is that much of a second, plus the skew.
				tol := 0.05*high/(high-low) + edgeSkew.Seconds()
				if got, want := switchAt.Sub(t0).Seconds(), st.SwitchedAt.Sub(t0).Seconds(); math.Abs(got-want) > tol {
					t.Errorf("%s offset of the switch: %.3f s, want %.3f ± %.3f s", dir.name, got, want, tol)
				}
			}
		})
	}
}

func mean(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

package mesh

import (
	"testing"
	"time"
)

func TestATickerCallsItsStepNoEarlierThanAskedAndCloseEndsIt(t *testing.T) {
	for _, tc := range []struct {
		name     string
		fallback bool
	}{{"timerfd", false}, {"runtime timer", true}} {
		t.Run(tc.name, func(t *testing.T) {
			tk := newTicker()
			run := tk.run
			if tc.fallback {
				run = tk.runFallback
			}
			waits := []time.Duration{0, 2 * time.Millisecond, 5 * time.Millisecond, 1 * time.Millisecond}
			var calls []time.Time
			run(func(now time.Time) time.Duration {
				calls = append(calls, now)
				if len(calls) > len(waits) {
					return -1
				}
				return waits[len(calls)-1]
			})
			if len(calls) != len(waits)+1 {
				t.Fatalf("step called %d times, want %d", len(calls), len(waits)+1)
			}
			for i, w := range waits {
				if got := calls[i+1].Sub(calls[i]); got < w {
					t.Fatalf("call %d came %v after the previous one, asked for %v", i+1, got, w)
				}
			}
			done := make(chan struct{})
			waiting := make(chan struct{})
			go func() {
				defer close(done)
				run(func(time.Time) time.Duration { close(waiting); return time.Hour })
			}()
			<-waiting
			tk.Close()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("Close did not end the run")
			}
		})
	}
}

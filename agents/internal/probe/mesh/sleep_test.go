package mesh

import (
	"testing"
	"time"
)

func TestSleeperWaitsAtLeastTheDurationAndCloseEndsAWait(t *testing.T) {
	for _, tc := range []struct {
		name string
		new  func() interface {
			sleep(time.Duration) error
			Close()
		}
	}{
		{"timerfd or fallback", func() interface {
			sleep(time.Duration) error
			Close()
		} {
			return newSleeper()
		}},
		{"runtime timer", func() interface {
			sleep(time.Duration) error
			Close()
		} {
			return newTimerSleeper()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.new()
			for _, d := range []time.Duration{0, -time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond} {
				start := time.Now()
				if err := s.sleep(d); err != nil {
					t.Fatalf("sleep(%v): %v", d, err)
				}
				if got := time.Since(start); got < d {
					t.Fatalf("sleep(%v) returned after %v", d, got)
				}
			}
			done := make(chan error, 1)
			go func() { done <- s.sleep(time.Hour) }()
			s.Close()
			select {
			case err := <-done:
				if err == nil {
					t.Fatal("a sleep ended by Close returned no error")
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Close did not end the sleep")
			}
			if err := s.sleep(time.Hour); err == nil {
				t.Fatal("a sleep after Close returned no error")
			}
		})
	}
}

package mesh

import (
	"errors"
	"sync"
	"time"
)

var errSleeperClosed = errors.New("mesh: sleeper closed")

// timerSleeper waits on a runtime timer; Close ends a wait in progress.
type timerSleeper struct {
	t    *time.Timer
	done chan struct{}
	once sync.Once
}

func newTimerSleeper() *timerSleeper {
	return &timerSleeper{t: time.NewTimer(time.Hour), done: make(chan struct{})}
}

func (s *timerSleeper) sleep(d time.Duration) error {
	select {
	case <-s.done:
		return errSleeperClosed
	default:
	}
	if d <= 0 {
		return nil
	}
	s.t.Reset(d)
	select {
	case <-s.done:
		return errSleeperClosed
	case <-s.t.C:
		return nil
	}
}

func (s *timerSleeper) Close() {
	s.once.Do(func() { close(s.done); s.t.Stop() })
}

// runFallback is ticker.run on a runtime timer.
func (t *ticker) runFallback(step func(now time.Time) time.Duration) {
	for {
		d := step(time.Now())
		if d < 0 {
			return
		}
		if t.fb.sleep(d) != nil {
			return
		}
	}
}

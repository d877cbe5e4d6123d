//go:build !linux

package mesh

import (
	"net"
	"time"
)

// rawConn is the connection itself where raw socket calls are not used.
type rawConn struct {
	net.Conn
}

func newRawConn(c net.Conn) (*rawConn, error) { return &rawConn{Conn: c}, nil }

// shutdown ends both directions of the connection; its reader closes it.
func (r *rawConn) shutdown() { shutdownConn(r.Conn) }

// tryWrite writes p; without raw socket calls it may wait, up to the write deadline.
func (r *rawConn) tryWrite(p []byte) (int, error) { return r.Write(p) }

func (f *frameReader) loop(consume consumeFunc) error { return f.readLoop(f.r.Read, consume) }

// ticker calls a step function at the times it asks for, on a runtime timer.
type ticker struct {
	fb *timerSleeper
}

func newTicker() *ticker { return &ticker{fb: newTimerSleeper()} }

func (t *ticker) run(step func(now time.Time) time.Duration) { t.runFallback(step) }

func (t *ticker) Close() { t.fb.Close() }

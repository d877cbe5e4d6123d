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
func (r *rawConn) shutdown() {
	if tc, ok := r.Conn.(*net.TCPConn); ok {
		_ = tc.CloseRead()
		_ = tc.CloseWrite()
	}
}

// tryWrite writes p; without raw socket calls it may wait, up to the write deadline.
func (r *rawConn) tryWrite(p []byte) (int, error) { return r.Write(p) }

// frameReader reads a connection into one buffer and hands the bytes to a consumer.
type frameReader struct {
	r   *rawConn
	buf []byte
	n   int
}

func newFrameReader(r *rawConn, size int) *frameReader {
	return &frameReader{r: r, buf: make([]byte, size)}
}

type consumeFunc func(b []byte, now time.Time) (used, need int, err error)

func (f *frameReader) loop(consume consumeFunc) error {
	for {
		n, err := f.r.Read(f.buf[f.n:])
		if n > 0 {
			f.n += n
			used, need, cerr := consume(f.buf[:f.n], time.Now())
			copy(f.buf, f.buf[used:f.n])
			f.n -= used
			if need > len(f.buf) {
				nb := make([]byte, need)
				copy(nb, f.buf[:f.n])
				f.buf = nb
			}
			if cerr != nil {
				return cerr
			}
		}
		if err != nil {
			return err
		}
	}
}

// ticker calls a step function at the times it asks for, on a runtime timer.
type ticker struct {
	fb *timerSleeper
}

func newTicker() *ticker { return &ticker{fb: newTimerSleeper()} }

func (t *ticker) run(step func(now time.Time) time.Duration) { t.runFallback(step) }

func (t *ticker) Close() { t.fb.Close() }

package mesh

import (
	"net"
	"time"
)

// frameReader reads a connection into one buffer and hands the bytes to a consumer.
type frameReader struct {
	r   *rawConn
	buf []byte
	n   int // bytes in buf not consumed yet
}

func newFrameReader(r *rawConn, size int) *frameReader {
	return &frameReader{r: r, buf: make([]byte, size)}
}

// consumeFunc takes the unconsumed bytes b, which the last read completed at now, and returns
// how many it used, the number of bytes the next frame needs (to grow the buffer), and an
// error that ends the loop.
type consumeFunc func(b []byte, now time.Time) (used, need int, err error)

// feed hands the buffered bytes to consume and keeps what it left for the next read.
func (f *frameReader) feed(consume consumeFunc, now time.Time) error {
	used, need, err := consume(f.buf[:f.n], now)
	copy(f.buf, f.buf[used:f.n])
	f.n -= used
	if need > len(f.buf) {
		nb := make([]byte, need)
		copy(nb, f.buf[:f.n])
		f.buf = nb
	}
	return err
}

// readLoop reads with read until consume or the connection fails.
func (f *frameReader) readLoop(read func([]byte) (int, error), consume consumeFunc) error {
	for {
		n, err := read(f.buf[f.n:])
		if n > 0 {
			f.n += n
			if cerr := f.feed(consume, time.Now()); cerr != nil {
				return cerr
			}
		}
		if err != nil {
			return err
		}
	}
}

// shutdownConn ends both directions of a TCP connection without closing it, where raw socket
// calls are not used.
func shutdownConn(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseRead()
		_ = tc.CloseWrite()
	}
}

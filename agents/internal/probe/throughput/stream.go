package throughput

import (
	"net"
	"time"
)

// sharedPayload is what every TCP stream writes: its content is never read back.
var sharedPayload = make([]byte, streamBufBytes)

// writeStreamPolled writes until the connection is closed under it, through the runtime's
// poller (where stream_linux.go's own threads are not available).
func writeStreamPolled(c net.Conn) {
	for {
		if _, err := c.Write(sharedPayload); err != nil {
			return
		}
	}
}

// readStreamPolled counts what arrives until the connection ends.
func readStreamPolled(c net.Conn, rx *meter) {
	buf := make([]byte, streamBufBytes)
	for {
		n, err := c.Read(buf)
		rx.addTCP(n, time.Now())
		if err != nil {
			return
		}
	}
}

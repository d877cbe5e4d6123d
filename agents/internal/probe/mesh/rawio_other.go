//go:build !linux

package mesh

import "net"

// rawConn is the connection itself where raw socket calls are not used.
type rawConn struct {
	net.Conn
}

func newRawConn(c net.Conn) (*rawConn, error) { return &rawConn{Conn: c}, nil }

// sleeper waits on a runtime timer where timerfd is not available.
type sleeper struct {
	*timerSleeper
}

func newSleeper() *sleeper { return &sleeper{newTimerSleeper()} }

package testutil

import (
	"net"
	"testing"
)

// ServeTCP listens on a loopback port until the test ends and runs handle, in its own
// goroutine, on every connection it accepts; the connection is closed when handle returns.
// It returns the address to dial.
func ServeTCP(t testing.TB, handle func(c net.Conn)) string {
	t.Helper()
	return ServeTCPOn(t, "127.0.0.1:0", handle)
}

// ServeTCPOn is ServeTCP on addr (e.g. "[::1]:0").
func ServeTCPOn(t testing.TB, addr string, handle func(c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); handle(c) }()
		}
	}()
	return ln.Addr().String()
}

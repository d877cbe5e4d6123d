package wanem

import (
	"net"
	"testing"
	"time"
)

// A read is dated when its data reached this host, not when the reader got to it: bytes that
// waited 30 ms in the socket are dated 30 ms back, so a busy proxy's late wake-up does not
// lengthen the emulated link.
func TestAReadIsDatedByItsArrivalNotByWhenItWasRead(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	sr := newStampedReader(server)
	if sr == nil {
		t.Fatal("no kernel receive times on a TCP socket")
	}
	for _, wait := range []time.Duration{0, 30 * time.Millisecond} {
		before := time.Now()
		if _, err := client.Write([]byte("ping")); err != nil {
			t.Fatal(err)
		}
		written := time.Now()
		time.Sleep(wait) // the reader is busy elsewhere: the bytes wait in the socket
		b := make([]byte, 16)
		n, at, err := sr.read(b)
		returned := time.Now()
		if err != nil || string(b[:n]) != "ping" {
			t.Fatalf("read %q, %v", b[:n], err)
		}
		if at.Before(before) || at.After(written.Add(5*time.Millisecond)) {
			t.Errorf("wait %v: dated %v after the write began, want within it (written after %v)",
				wait, at.Sub(before), written.Sub(before))
		}
		if returned.Sub(at) < wait {
			t.Errorf("wait %v: dated only %v before the read returned", wait, returned.Sub(at))
		}
	}
}

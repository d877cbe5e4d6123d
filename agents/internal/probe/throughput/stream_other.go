//go:build !linux

package throughput

import "net"

func writeStream(c net.Conn, _ int) { writeStreamPolled(c) }

func readStream(c net.Conn, rx *meter, _ int) { readStreamPolled(c, rx) }

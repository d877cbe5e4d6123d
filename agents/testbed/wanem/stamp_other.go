//go:build !linux

package wanem

import (
	"net"
	"time"
)

// stampedReader has no kernel receive times off Linux: reads are dated when they return.
type stampedReader struct{}

func newStampedReader(net.Conn) *stampedReader { return nil }

func (s *stampedReader) read([]byte) (int, time.Time, error) { panic("unreachable") }

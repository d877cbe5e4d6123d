// Package testutil holds helpers shared by the agent's tests; production code never imports it.
package testutil

import (
	"bytes"
	"sync"
)

// LogBuffer is a log sink that goroutines under test may write while the test reads it.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *LogBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *LogBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

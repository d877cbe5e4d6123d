package storage

import (
	"io"
	"net"
	"sync"
	"testing"
)

// faultyEndpoint accepts TCP connections and then either stalls (reads the request and
// never answers) or drops them (closes at once), to play a sick storage endpoint.
type faultyEndpoint struct {
	ln    net.Listener
	mode  string // stall | drop
	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

func startFaultyEndpoint(t *testing.T, mode string) *faultyEndpoint {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &faultyEndpoint{ln: ln, mode: mode}
	f.wg.Add(1)
	go f.serve()
	t.Cleanup(f.close)
	return f
}

func (f *faultyEndpoint) url() string { return "http://" + f.ln.Addr().String() }

func (f *faultyEndpoint) serve() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		if f.mode == "drop" {
			// Linger 0 turns the close into a reset, as a crashed middlebox would.
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			_ = c.Close()
			continue
		}
		f.mu.Lock()
		f.conns = append(f.conns, c)
		f.mu.Unlock()
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			_, _ = io.Copy(io.Discard, c)
		}()
	}
}

func (f *faultyEndpoint) close() {
	_ = f.ln.Close()
	f.mu.Lock()
	for _, c := range f.conns {
		_ = c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}

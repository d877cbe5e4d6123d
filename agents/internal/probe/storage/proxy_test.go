package storage

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// faultyEndpoint accepts TCP connections and then stalls (reads the request and never
// answers), drops them (resets at once), or forwards them to a real endpoint holding back
// every response by a delay, to play a sick or distant storage endpoint.
type faultyEndpoint struct {
	ln       net.Listener
	mode     string // stall | drop | delay
	upstream string // host:port, for delay
	delay    time.Duration
	mu       sync.Mutex
	conns    []net.Conn
	wg       sync.WaitGroup
}

// startDelayingProxy forwards to upstream, delaying the first bytes of each response.
func startDelayingProxy(t *testing.T, upstream string, delay time.Duration) *faultyEndpoint {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &faultyEndpoint{ln: ln, mode: "delay", upstream: upstream, delay: delay}
	f.wg.Add(1)
	go f.serve()
	t.Cleanup(f.close)
	return f
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
		if f.mode == "delay" {
			f.forward(c)
			continue
		}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			_, _ = io.Copy(io.Discard, c)
		}()
	}
}

// forward relays one connection; after the client has sent bytes, the next bytes coming
// back (the response) wait f.delay, so each HTTP exchange gains the delay once.
func (f *faultyEndpoint) forward(c net.Conn) {
	u, err := net.Dial("tcp", f.upstream)
	if err != nil {
		_ = c.Close()
		return
	}
	f.mu.Lock()
	f.conns = append(f.conns, u)
	f.mu.Unlock()
	var requested atomic.Bool
	f.wg.Add(2)
	go func() {
		defer f.wg.Done()
		defer u.Close()
		buf := make([]byte, 64<<10)
		for {
			n, err := c.Read(buf)
			if n > 0 {
				requested.Store(true)
				if _, werr := u.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	go func() {
		defer f.wg.Done()
		defer c.Close()
		buf := make([]byte, 64<<10)
		for {
			n, err := u.Read(buf)
			if n > 0 {
				if requested.Swap(false) {
					time.Sleep(f.delay)
				}
				if _, werr := c.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
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

// failingGets is an HTTP proxy in front of an emulator that passes every request through
// except GETs of objects whose key ends with suffix: those it answers 503 ("503") or
// drops by resetting the connection ("reset"). PUTs of the same key pass, so a size can
// be written and then fail to read.
type failingGets struct {
	srv   *httptest.Server
	fails atomic.Int64
}

func startFailingGetsProxy(t *testing.T, upstream *url.URL, suffix, mode string) *failingGets {
	t.Helper()
	f := &failingGets{}
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: upstream.Scheme, Host: upstream.Host})
	// Bytes pass as they are: never let the proxy's own client decompress.
	rp.Transport = &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 64}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, suffix) {
			rp.ServeHTTP(w, r)
			return
		}
		f.fails.Add(1)
		if mode == "503" {
			http.Error(w, "unavailable", http.StatusServiceUnavailable)
			return
		}
		c, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		// Linger 0 turns the close into a reset, as a crashed middlebox would.
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		_ = c.Close()
	}))
	t.Cleanup(f.srv.Close)
	return f
}

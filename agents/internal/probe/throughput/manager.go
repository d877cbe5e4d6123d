package throughput

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"stormwatch/agents/internal/sample"
)

const (
	streamBufBytes = 256 << 10 // one read or write of a TCP stream
	socketBufBytes = 4 << 20   // UDP socket buffers, so bursts of the pacer are not dropped locally
	handshakeLimit = 10 * time.Second
	firstByteLimit = 15 * time.Second
	// phaseSlack is how much longer than duration_s a direction may take before it is abandoned.
	phaseSlack = 30 * time.Second
)

// Manager runs the experiments of the config: it listens for responders' control and data
// connections (TCP and UDP on one port) and starts initiators at their start_at. An agent
// runs one experiment at a time and each experiment once.
type Manager struct {
	self [idLen]byte
	emit func(sample.Throughput)
	log  *slog.Logger
	tcp  *net.TCPListener
	udp  *net.UDPConn

	mu   sync.Mutex
	exps map[string]Experiment
	ran  map[string]bool
	busy bool
	wake chan struct{}

	active atomic.Pointer[session] // the responder's running experiment
	nice   int                     // of the TCP streams' threads (Linux)
	wg     sync.WaitGroup
}

// Listen opens the throughput port: TCP for control and streams, UDP on the same number.
func Listen(addr string, log *slog.Logger) (*Manager, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	tcp := ln.(*net.TCPListener)
	ua, err := net.ResolveUDPAddr("udp", tcp.Addr().String())
	if err != nil {
		tcp.Close()
		return nil, err
	}
	if host, _, _ := net.SplitHostPort(addr); host == "" {
		ua.IP = nil // the TCP side listens on every address: so does UDP
	}
	udp, err := net.ListenUDP("udp", ua)
	if err != nil {
		tcp.Close()
		return nil, fmt.Errorf("udp %s: %w", ua, err)
	}
	_ = udp.SetReadBuffer(socketBufBytes)
	_ = udp.SetWriteBuffer(socketBufBytes)
	return &Manager{log: log, tcp: tcp, udp: udp,
		exps: map[string]Experiment{}, ran: map[string]bool{}, wake: make(chan struct{}, 1)}, nil
}

// SetNice sets the nice value of the threads that move the TCP streams' bytes (Linux; 0-19;
// set before Run). 19 yields the CPU to everything else, the mesh probe first, when CPUs are
// short: throughput is then measured lower than the network could carry, never the mesh's
// RTTs higher.
func (m *Manager) SetNice(n int) { m.nice = min(max(n, 0), 19) }

// Addr is the TCP address listened on (UDP uses the same port).
func (m *Manager) Addr() net.Addr { return m.tcp.Addr() }

// Close releases the sockets of a manager that will not Run (Run closes them itself).
func (m *Manager) Close() {
	_ = m.tcp.Close()
	_ = m.udp.Close()
}

// Apply replaces the experiments; invalid entries are logged and left out.
func (m *Manager) Apply(exps []Experiment) {
	next := map[string]Experiment{}
	for _, e := range exps {
		if err := e.check(); err != nil {
			m.log.Warn("throughput experiment ignored", "experiment_id", e.ID, "err", err)
			continue
		}
		next[fmtUUID(e.id)] = e
	}
	m.mu.Lock()
	m.exps = next
	m.mu.Unlock()
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// Run serves responders and starts initiators as agent selfID until ctx ends, then waits for
// what runs; emit receives the seconds this agent received.
func (m *Manager) Run(ctx context.Context, selfID string, emit func(sample.Throughput)) error {
	self, err := parseUUID(selfID)
	if err != nil {
		m.tcp.Close()
		m.udp.Close()
		return fmt.Errorf("agent id: %w", err)
	}
	m.self, m.emit = self, emit
	stop := context.AfterFunc(ctx, func() { m.tcp.Close(); m.udp.Close() })
	defer stop()
	m.wg.Add(2)
	go func() { defer m.wg.Done(); m.accept(ctx) }()
	go func() { defer m.wg.Done(); m.readUDP() }()
	m.schedule(ctx)
	m.tcp.Close()
	m.udp.Close()
	m.wg.Wait()
	return nil
}

// schedule starts each initiator experiment at its start_at.
func (m *Manager) schedule(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := time.Now()
		next := now.Add(time.Minute)
		m.mu.Lock()
		var due []Experiment
		for id, e := range m.exps {
			if e.Role != Initiator || m.ran[id] {
				continue
			}
			switch {
			case now.Sub(e.StartAt) > StartWindow:
				m.ran[id] = true
				m.log.Warn("throughput experiment missed: its start window has passed", "experiment_id", id, "start_at", e.StartAt)
			case !e.StartAt.After(now):
				due = append(due, e)
			case e.StartAt.Before(next):
				next = e.StartAt
			}
		}
		m.mu.Unlock()
		for _, e := range due {
			if reason := m.claim(e.ID); reason != "" {
				m.log.Warn("throughput experiment not started", "experiment_id", e.ID, "reason", reason)
				continue
			}
			m.wg.Add(1)
			go func() {
				defer m.wg.Done()
				defer m.release()
				if err := m.initiate(ctx, e); err != nil && ctx.Err() == nil {
					m.log.Warn("throughput experiment failed", "experiment_id", e.ID, "role", Initiator, "err", err)
				}
			}()
		}
		timer.Reset(time.Until(next))
		select {
		case <-ctx.Done():
			return
		case <-m.wake:
		case <-timer.C:
		}
	}
}

// claim marks an experiment as run and the agent busy, or says why it cannot run.
func (m *Manager) claim(id string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ran[id] {
		return "experiment already ran"
	}
	if m.busy {
		return "agent busy with another experiment"
	}
	m.ran[id], m.busy = true, true
	return ""
}

func (m *Manager) release() {
	m.mu.Lock()
	m.busy = false
	m.mu.Unlock()
}

// spareProcs lets the runtime run one goroutine more than the experiment's streams at once
// (the agent runs on one by default), so that the mesh probe never waits for a stream's
// thread to give its processor back; the returned func restores the setting.
func spareProcs(e Experiment) func() {
	want := 2 // UDP: the pacer or the reader, and the mesh
	if e.Proto == "tcp" {
		want = e.Streams + 1
	}
	prev := runtime.GOMAXPROCS(0)
	if prev >= want {
		return func() {}
	}
	runtime.GOMAXPROCS(want)
	return func() { runtime.GOMAXPROCS(prev) }
}

// record ships one second the agent received.
func (m *Manager) record(e *Experiment, x second) {
	m.emit(sample.Throughput{TimeUS: x.end.UnixMicro(), PeerID: e.PeerAgentID, Proto: e.Proto, ExperimentID: e.ID,
		Direction: "receive", BytesPerS: x.bytesPerS, LossRatio: x.lossRatio, JitterUS: x.jitterUS})
}

// connSet closes the connections of one direction together.
type connSet struct {
	mu     sync.Mutex
	cs     []io.Closer
	closed bool
}

func (s *connSet) add(c io.Closer) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.cs = append(s.cs, c)
	return true
}

func (s *connSet) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for _, c := range s.cs {
		// A shutdown reaches the stream threads' own descriptors of the socket too.
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.CloseRead()
			_ = tc.CloseWrite()
		}
		_ = c.Close()
	}
	s.cs = nil
}

func fmtUUID(b [idLen]byte) string {
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// mustUUID parses an id that check already validated.
func mustUUID(s string) [idLen]byte {
	b, _ := parseUUID(s)
	return b
}

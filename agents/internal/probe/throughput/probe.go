package throughput

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"strings"
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

// session is one run of an experiment as seen by the responder.
type session struct {
	e      Experiment
	key    []byte
	ukey   [udpKeyLen]byte
	fwd    chan net.Conn // streams the responder reads
	rev    chan net.Conn // streams the responder writes
	hello  chan netip.AddrPort
	udpRx  atomic.Pointer[meter]
	closed chan struct{}
}

func (m *Manager) accept(ctx context.Context) {
	for {
		c, err := m.tcp.Accept()
		if err != nil {
			return
		}
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			m.serve(ctx, c)
		}()
	}
}

// serve answers one connection: the challenge, then a control connection or a data stream.
func (m *Manager) serve(ctx context.Context, c net.Conn) {
	nonce := make([]byte, nonceLen)
	_, _ = rand.Read(nonce)
	_ = c.SetDeadline(time.Now().Add(handshakeLimit))
	hello := make([]byte, helloLen)
	if _, err := c.Write(nonce); err != nil {
		c.Close()
		return
	}
	if _, err := io.ReadFull(c, hello); err != nil {
		c.Close()
		return
	}
	var id [idLen]byte
	copy(id[:], hello[1:])
	mac := hello[1+idLen : 1+idLen+macLen]
	switch kind := hello[0]; kind {
	case kindControl:
		var peer [idLen]byte
		copy(peer[:], hello[1+idLen+macLen:])
		m.respond(ctx, c, nonce, id, mac, peer)
	case kindTCPForward, kindTCPReverse:
		s := m.active.Load()
		if s == nil || s.e.id != id || !hmac.Equal(mac, dataMAC(s.key, nonce, id, kind)) {
			m.log.Warn("throughput data connection refused", "remote", c.RemoteAddr().String())
			c.Close()
			return
		}
		_ = c.SetDeadline(time.Time{})
		to := s.fwd
		if kind == kindTCPReverse {
			to = s.rev
		}
		select {
		case to <- c:
		case <-s.closed:
			c.Close()
		}
	default:
		c.Close()
	}
}

// refuse ends a control connection with a one-line reason.
func (m *Manager) refuse(c net.Conn, id [idLen]byte, reason string) {
	m.log.Warn("throughput experiment refused", "experiment_id", fmtUUID(id), "remote", c.RemoteAddr().String(), "reason", reason)
	_, _ = c.Write([]byte("ERR " + reason + "\n"))
	c.Close()
}

// respond checks a control connection against the config and runs the responder's side.
func (m *Manager) respond(ctx context.Context, c net.Conn, nonce []byte, id [idLen]byte, mac []byte, peer [idLen]byte) {
	idStr := fmtUUID(id)
	m.mu.Lock()
	e, ok := m.exps[idStr]
	m.mu.Unlock()
	switch {
	case !ok:
		m.refuse(c, id, "experiment not scheduled for this agent")
		return
	case e.Role != Responder:
		m.refuse(c, id, "this agent is not the experiment's responder")
		return
	case !hmac.Equal(mac, controlMAC(e.Token, nonce, id)):
		m.refuse(c, id, "bad HMAC")
		return
	case peer != mustUUID(e.PeerAgentID):
		m.refuse(c, id, "wrong peer")
		return
	}
	if d := time.Since(e.StartAt); d > StartWindow || d < -StartWindow {
		m.refuse(c, id, "outside the start window")
		return
	}
	if reason := m.claim(idStr); reason != "" {
		m.refuse(c, id, reason)
		return
	}
	defer m.release()
	key := sessionKey(e.Token, nonce)
	s := &session{e: e, key: key, ukey: udpKey(key), fwd: make(chan net.Conn, 16), rev: make(chan net.Conn, 16),
		hello: make(chan netip.AddrPort, 1), closed: make(chan struct{})}
	// The forward meter is in place before OK, so the first datagrams are counted.
	rx := newMeter(e.DurationS)
	if e.Proto == "udp" {
		s.udpRx.Store(rx)
	}
	m.active.Store(s)
	defer func() {
		m.active.Store(nil)
		close(s.closed)
		for _, ch := range []chan net.Conn{s.fwd, s.rev} {
		drain:
			for {
				select {
				case c := <-ch:
					c.Close()
				default:
					break drain
				}
			}
		}
	}()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	defer c.Close()
	_ = c.SetDeadline(time.Time{})
	if _, err := c.Write([]byte("OK\n")); err != nil {
		return
	}
	m.log.Info("throughput experiment started", "experiment_id", idStr, "role", Responder, "proto", e.Proto)
	defer spareProcs(e)()
	if err := m.respondPhases(ctx, c, s, rx); err != nil && ctx.Err() == nil {
		m.log.Warn("throughput experiment failed", "experiment_id", idStr, "role", Responder, "err", err)
		return
	}
	m.log.Info("throughput experiment done", "experiment_id", idStr, "role", Responder)
}

func (m *Manager) respondPhases(ctx context.Context, c net.Conn, s *session, rx *meter) error {
	e := &s.e
	ctrl := bufio.NewReader(c)
	// Forward: the responder receives and ends the direction.
	var streams connSet
	phaseCtx, endPhase := context.WithCancel(ctx)
	if e.Proto != "udp" {
		go func() {
			for {
				select {
				case dc := <-s.fwd:
					if !streams.add(dc) {
						dc.Close()
						continue
					}
					go readStream(dc, rx, m.nice)
				case <-phaseCtx.Done():
					return
				}
			}
		}()
	}
	err := rx.sample(ctx, e.Proto == "udp", firstByteLimit, func(x second) { m.record(e, x) })
	endPhase()
	s.udpRx.Store(nil)
	streams.closeAll()
	if err != nil {
		_, _ = c.Write([]byte("ERR forward: " + err.Error() + "\n"))
		return fmt.Errorf("forward: %w", err)
	}
	if _, err := c.Write([]byte("DONE\n")); err != nil {
		return err
	}
	// Reverse: the responder sends until the initiator says the direction is done.
	stopSend := make(chan struct{})
	var senders sync.WaitGroup
	var out connSet
	go func() {
		defer senders.Wait()
		if e.Proto == "udp" {
			select {
			case to := <-s.hello:
				senders.Add(1)
				go func() {
					defer senders.Done()
					sendUDP(stopSend, e, s.ukey, func(b []byte) error {
						_, err := m.udp.WriteToUDPAddrPort(b, to)
						return err
					})
				}()
			case <-stopSend:
			}
			return
		}
		// Writing starts once every stream is there, so all of them start together.
		var dcs []net.Conn
		for len(dcs) < e.Streams {
			select {
			case dc := <-s.rev:
				if !out.add(dc) {
					dc.Close()
					return
				}
				dcs = append(dcs, dc)
			case <-stopSend:
				return
			}
		}
		for _, dc := range dcs {
			senders.Add(1)
			go func() { defer senders.Done(); writeStream(dc, m.nice) }()
		}
	}()
	_ = c.SetReadDeadline(time.Now().Add(e.duration() + firstByteLimit + phaseSlack))
	line, err := ctrl.ReadString('\n')
	close(stopSend)
	out.closeAll()
	if err != nil {
		return fmt.Errorf("reverse: %w", err)
	}
	if line != "DONE\n" {
		return fmt.Errorf("reverse: initiator said %q", strings.TrimSpace(line))
	}
	return nil
}

// initiate runs the initiator's side: the challenge, then forward, then reverse.
func (m *Manager) initiate(ctx context.Context, e Experiment) error {
	m.log.Info("throughput experiment started", "experiment_id", e.ID, "role", Initiator, "proto", e.Proto, "peer", e.PeerAddress)
	defer spareProcs(e)()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c, nonce, err := dialHello(ctx, e.PeerAddress, kindControl, e.id, func(nonce []byte) []byte {
		return controlMAC(e.Token, nonce, e.id)
	}, m.self)
	if err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	defer c.Close()
	ctrl := bufio.NewReader(c)
	_ = c.SetReadDeadline(time.Now().Add(handshakeLimit))
	line, err := ctrl.ReadString('\n')
	if err != nil {
		return fmt.Errorf("control: %w", err)
	}
	if line != "OK\n" {
		return fmt.Errorf("responder refused: %s", strings.TrimSpace(line))
	}
	key := sessionKey(e.Token, nonce)
	ukey := udpKey(key)
	dialStream := func(kind byte) (net.Conn, error) {
		dc, _, err := dialHello(ctx, e.PeerAddress, kind, e.id, func(n []byte) []byte { return dataMAC(key, n, e.id, kind) }, [idLen]byte{})
		if err == nil {
			_ = dc.SetDeadline(time.Time{})
		}
		return dc, err
	}

	// Forward: send until the responder says the direction is done.
	var streams connSet
	stopSend := make(chan struct{})
	var senders sync.WaitGroup
	if e.Proto == "udp" {
		uc, err := dialUDP(ctx, e.PeerAddress)
		if err != nil {
			return err
		}
		streams.add(uc)
		senders.Add(1)
		go func() {
			defer senders.Done()
			sendUDP(stopSend, &e, ukey, func(b []byte) error { _, err := uc.Write(b); return err })
		}()
	} else {
		// Every stream is connected before any writes, so all of them start together.
		var dcs []net.Conn
		for range e.Streams {
			dc, err := dialStream(kindTCPForward)
			if err != nil {
				close(stopSend)
				streams.closeAll()
				return fmt.Errorf("forward stream: %w", err)
			}
			streams.add(dc)
			dcs = append(dcs, dc)
		}
		for _, dc := range dcs {
			senders.Add(1)
			go func() { defer senders.Done(); writeStream(dc, m.nice) }()
		}
	}
	_ = c.SetReadDeadline(time.Now().Add(e.duration() + firstByteLimit + phaseSlack))
	line, err = ctrl.ReadString('\n')
	close(stopSend)
	streams.closeAll()
	senders.Wait()
	if err != nil {
		return fmt.Errorf("forward: %w", err)
	}
	if line != "DONE\n" {
		return fmt.Errorf("forward: responder said %q", strings.TrimSpace(line))
	}

	// Reverse: receive, then tell the responder the direction is done.
	rx := newMeter(e.DurationS)
	var in connSet
	defer in.closeAll()
	if e.Proto == "udp" {
		uc, err := dialUDP(ctx, e.PeerAddress)
		if err != nil {
			return err
		}
		in.add(uc)
		go readUDP(uc, rx, e.id, ukey)
		go sayHello(uc, rx, e.id, ukey)
	} else {
		for range e.Streams {
			dc, err := dialStream(kindTCPReverse)
			if err != nil {
				return fmt.Errorf("reverse stream: %w", err)
			}
			in.add(dc)
			go readStream(dc, rx, m.nice)
		}
	}
	err = rx.sample(ctx, e.Proto == "udp", firstByteLimit, func(x second) { m.record(&e, x) })
	in.closeAll()
	if err != nil {
		_, _ = c.Write([]byte("ERR reverse: " + err.Error() + "\n"))
		return fmt.Errorf("reverse: %w", err)
	}
	if _, err := c.Write([]byte("DONE\n")); err != nil {
		return err
	}
	m.log.Info("throughput experiment done", "experiment_id", e.ID, "role", Initiator)
	return nil
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

// readUDP feeds the responder's running experiment from the shared UDP socket.
func (m *Manager) readUDP() {
	buf := make([]byte, 64<<10)
	for {
		n, from, err := m.udp.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		s := m.active.Load()
		if s == nil {
			continue
		}
		h, err := readUDPHeader(buf[:n], s.e.id, s.ukey)
		if err != nil {
			continue
		}
		switch h.kind {
		case kindUDPData:
			if rx := s.udpRx.Load(); rx != nil {
				rx.addUDP(n, h.seq, h.sentNS, time.Now())
			}
		case kindUDPHello:
			select {
			case s.hello <- from:
			default:
			}
		}
	}
}

// dialHello opens a connection to addr and answers the responder's nonce with kind, id,
// mac(nonce) and self; it returns the connection and the nonce.
func dialHello(ctx context.Context, addr string, kind byte, id [idLen]byte, mac func([]byte) []byte, self [idLen]byte) (net.Conn, []byte, error) {
	d := net.Dialer{Timeout: handshakeLimit}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	_ = c.SetDeadline(time.Now().Add(handshakeLimit))
	nonce := make([]byte, nonceLen)
	if _, err := io.ReadFull(c, nonce); err != nil {
		c.Close()
		return nil, nil, fmt.Errorf("reading the nonce: %w", err)
	}
	msg := make([]byte, 0, helloLen)
	msg = append(msg, kind)
	msg = append(msg, id[:]...)
	msg = append(msg, mac(nonce)...)
	msg = append(msg, self[:]...)
	if _, err := c.Write(msg); err != nil {
		c.Close()
		return nil, nil, err
	}
	return c, nonce, nil
}

func dialUDP(ctx context.Context, addr string) (*net.UDPConn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "udp", addr)
	if err != nil {
		return nil, err
	}
	uc := c.(*net.UDPConn)
	_ = uc.SetReadBuffer(socketBufBytes)
	_ = uc.SetWriteBuffer(socketBufBytes)
	return uc, nil
}

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

// readUDP feeds rx from the initiator's own socket in the reverse direction.
func readUDP(c *net.UDPConn, rx *meter, id [idLen]byte, key [udpKeyLen]byte) {
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // an ICMP error reported on a connected socket
		}
		if h, err := readUDPHeader(buf[:n], id, key); err == nil && h.kind == kindUDPData {
			rx.addUDP(n, h.seq, h.sentNS, time.Now())
		}
	}
}

// sayHello tells the responder where to send, again every 200 ms until data arrives, since
// a datagram may be lost.
func sayHello(c *net.UDPConn, rx *meter, id [idLen]byte, key [udpKeyLen]byte) {
	b := make([]byte, udpHeaderLen)
	putUDPHeader(b, kindUDPHello, id, key, 0, 0)
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for range firstByteLimit / (200 * time.Millisecond) {
		if _, err := c.Write(b); errors.Is(err, net.ErrClosed) {
			return
		}
		select {
		case <-rx.started:
			return
		case <-t.C:
		}
	}
}

// sendUDP sends datagrams of e.UDPDatagramBytes at e.UDPRateBitsPerS until stop closes.
// One buffer is reused; the pacer sends whatever is due, then sleeps until the next one.
func sendUDP(stop <-chan struct{}, e *Experiment, key [udpKeyLen]byte, write func([]byte) error) {
	b := make([]byte, e.UDPDatagramBytes)
	interval := float64(e.UDPDatagramBytes*8) * 1e9 / float64(e.UDPRateBitsPerS) // ns per datagram
	start := time.Now()
	var seq uint64
	for {
		select {
		case <-stop:
			return
		default:
		}
		now := time.Now()
		due := uint64(float64(now.Sub(start).Nanoseconds())/interval) + 1
		for ; seq < due; seq++ {
			putUDPHeader(b, kindUDPData, e.id, key, seq, time.Now().UnixNano())
			if err := write(b); errors.Is(err, net.ErrClosed) {
				return
			}
		}
		if d := time.Until(start.Add(time.Duration(float64(seq) * interval))); d > 0 {
			time.Sleep(d)
		}
	}
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

package throughput

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

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

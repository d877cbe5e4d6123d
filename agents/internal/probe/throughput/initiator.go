package throughput

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"
)

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

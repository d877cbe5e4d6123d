package throughput

import (
	"context"
	"errors"
	"net"
	"time"
)

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

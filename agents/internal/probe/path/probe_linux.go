//go:build linux

package path

import (
	"context"
	"encoding/binary"
	"errors"
	"net/netip"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// ICMP types and codes the error queue reports (RFC 792, RFC 4443).
const (
	icmpUnreach        = 3
	icmpPortUnreach    = 3
	icmpTimeExceeded   = 11
	icmp6Unreach       = 1
	icmp6PortUnreach   = 4
	icmp6TimeExceeded  = 3
	extendedErrLen     = 16 // struct sock_extended_err
	errQueueControlLen = 512
)

// probeOnce sends one probe with the given TTL on a socket of its own and waits for what
// comes back on that socket, at most o.ProbeTimeout.
func probeOnce(ctx context.Context, dst netip.AddrPort, ttl int, o Options) (Probe, error) {
	v6 := dst.Addr().Is6()
	family, typ := unix.AF_INET, unix.SOCK_DGRAM
	if v6 {
		family = unix.AF_INET6
	}
	if o.Proto == TCP {
		typ = unix.SOCK_STREAM
	}
	fd, err := unix.Socket(family, typ|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return Probe{}, os.NewSyscallError("socket", err)
	}
	f := os.NewFile(uintptr(fd), "path-probe") // pollable: the runtime's poller waits for us
	defer f.Close()
	if err := setupSocket(fd, v6, ttl); err != nil {
		return Probe{}, err
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return Probe{}, err
	}
	deadline := time.Now().Add(o.ProbeTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = f.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = f.SetDeadline(time.Now()) })
	defer stop()

	sa := sockaddr(dst)
	var sent time.Time
	var out Probe
	var opErr error
	if o.Proto == UDP {
		payload := make([]byte, o.PayloadBytes)
		payload[0] = byte(ttl)
		if err := unix.Connect(fd, sa); err != nil {
			return Probe{}, os.NewSyscallError("connect", err)
		}
		sent = time.Now()
		if _, err := unix.Write(fd, payload); err != nil {
			return Probe{}, os.NewSyscallError("send", err)
		}
		// An error (ICMP) raises POLLERR, which the poller reports to readers.
		err = rc.Read(func(fd uintptr) bool {
			var done bool
			out, done, opErr = readErrQueue(int(fd), sent)
			if done || opErr != nil {
				return true
			}
			// A reply from a service on that port: the destination answered.
			var b [1]byte
			if _, _, rerr := unix.Recvfrom(int(fd), b[:], unix.MSG_DONTWAIT); rerr == nil {
				out = Probe{Answer: Reached, From: dst.Addr(), RTT: time.Since(sent)}
				return true
			}
			return false
		})
	} else {
		setLingerZero(fd) // a reached echo port gets a reset, not a TIME_WAIT per probe
		sent = time.Now()
		if cerr := unix.Connect(fd, sa); cerr != nil && !errors.Is(cerr, unix.EINPROGRESS) {
			if errors.Is(cerr, unix.ECONNREFUSED) {
				return Probe{Answer: Reached, From: dst.Addr(), RTT: time.Since(sent)}, nil
			}
			return Probe{}, os.NewSyscallError("connect", cerr)
		}
		// The connect ends writable (SYN-ACK) or in error (reset, or ICMP with the error queue).
		err = rc.Write(func(fd uintptr) bool {
			var done bool
			out, done, opErr = readErrQueue(int(fd), sent)
			if done || opErr != nil {
				return true
			}
			soErr, gerr := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_ERROR)
			if gerr != nil {
				opErr = os.NewSyscallError("getsockopt", gerr)
				return true
			}
			switch {
			case soErr == int(unix.ECONNREFUSED):
				out = Probe{Answer: Reached, From: dst.Addr(), RTT: time.Since(sent)}
				return true
			case soErr != 0:
				// An ICMP error whose queue entry we did not get (it is reported once): an
				// answer from someone unknown on the way.
				out = Probe{Answer: TimeExceeded, RTT: time.Since(sent)}
				return true
			}
			if _, perr := unix.Getpeername(int(fd)); perr == nil {
				out = Probe{Answer: Reached, From: dst.Addr(), RTT: time.Since(sent)}
				return true
			}
			return false // still connecting
		})
	}
	if opErr != nil {
		return Probe{}, opErr
	}
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return Probe{Answer: NoAnswer}, nil
		}
		return Probe{}, err
	}
	return out, nil
}

func setupSocket(fd int, v6 bool, ttl int) error {
	set := func(level, opt, v int, name string) error {
		if err := unix.SetsockoptInt(fd, level, opt, v); err != nil {
			return os.NewSyscallError("setsockopt "+name, err)
		}
		return nil
	}
	if v6 {
		if err := set(unix.SOL_IPV6, unix.IPV6_RECVERR, 1, "IPV6_RECVERR"); err != nil {
			return err
		}
		if err := set(unix.SOL_IPV6, unix.IPV6_UNICAST_HOPS, ttl, "IPV6_UNICAST_HOPS"); err != nil {
			return err
		}
	} else {
		if err := set(unix.SOL_IP, unix.IP_RECVERR, 1, "IP_RECVERR"); err != nil {
			return err
		}
		if err := set(unix.SOL_IP, unix.IP_TTL, ttl, "IP_TTL"); err != nil {
			return err
		}
	}
	// The kernel's receive time of the ICMP answer: the round trip then leaves out how late
	// this process woke up to read it.
	return set(unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1, "SO_TIMESTAMPNS")
}

func setLingerZero(fd int) {
	_ = unix.SetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0})
}

func sockaddr(dst netip.AddrPort) unix.Sockaddr {
	if dst.Addr().Is4() {
		return &unix.SockaddrInet4{Port: int(dst.Port()), Addr: dst.Addr().As4()}
	}
	return &unix.SockaddrInet6{Port: int(dst.Port()), Addr: dst.Addr().As16()}
}

// readErrQueue takes one entry off the socket's error queue: done is false when it is empty.
func readErrQueue(fd int, sent time.Time) (Probe, bool, error) {
	buf := make([]byte, 64)
	oob := make([]byte, errQueueControlLen)
	_, oobn, _, _, err := unix.Recvmsg(fd, buf, oob, unix.MSG_ERRQUEUE|unix.MSG_DONTWAIT)
	if errors.Is(err, unix.EAGAIN) {
		return Probe{}, false, nil
	}
	if err != nil {
		return Probe{}, false, os.NewSyscallError("recvmsg errqueue", err)
	}
	rtt := time.Since(sent)
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil {
		return Probe{}, false, err
	}
	var p Probe
	found := false
	for _, m := range msgs {
		switch {
		case m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SCM_TIMESTAMPNS &&
			len(m.Data) >= 16:
			ts := time.Unix(int64(binary.NativeEndian.Uint64(m.Data[0:8])),
				int64(binary.NativeEndian.Uint64(m.Data[8:16])))
			// The wall clock of both ends; a step of the clock between them falls back to
			// the monotonic time of the read.
			if k := ts.Sub(sent.Round(0)); k > 0 && k <= rtt {
				rtt = k
			}
		case (m.Header.Level == unix.SOL_IP && m.Header.Type == unix.IP_RECVERR) ||
			(m.Header.Level == unix.SOL_IPV6 && m.Header.Type == unix.IPV6_RECVERR):
			if len(m.Data) < extendedErrLen {
				continue
			}
			origin, typ, code := m.Data[4], m.Data[5], m.Data[6]
			p.From = offender(m.Data[extendedErrLen:])
			p.Code = code
			found = true
			switch {
			case origin == unix.SO_EE_ORIGIN_ICMP && typ == icmpTimeExceeded,
				origin == unix.SO_EE_ORIGIN_ICMP6 && typ == icmp6TimeExceeded:
				p.Answer = TimeExceeded
			case origin == unix.SO_EE_ORIGIN_ICMP && typ == icmpUnreach && code == icmpPortUnreach,
				origin == unix.SO_EE_ORIGIN_ICMP6 && typ == icmp6Unreach && code == icmp6PortUnreach:
				p.Answer = Reached
			case origin == unix.SO_EE_ORIGIN_ICMP && typ == icmpUnreach,
				origin == unix.SO_EE_ORIGIN_ICMP6 && typ == icmp6Unreach:
				p.Answer = Unreachable
			default:
				found = false // a local error (e.g. EMSGSIZE): not an answer
			}
		}
	}
	if !found {
		return Probe{}, false, nil
	}
	p.RTT = rtt
	return p, true, nil
}

// offender parses the sockaddr after a sock_extended_err: the router that answered.
func offender(b []byte) netip.Addr {
	if len(b) < 2 {
		return netip.Addr{}
	}
	switch binary.NativeEndian.Uint16(b[0:2]) {
	case unix.AF_INET:
		if len(b) >= 8 {
			return netip.AddrFrom4([4]byte(b[4:8]))
		}
	case unix.AF_INET6:
		if len(b) >= 24 {
			return netip.AddrFrom16([16]byte(b[8:24])).Unmap()
		}
	}
	return netip.Addr{}
}

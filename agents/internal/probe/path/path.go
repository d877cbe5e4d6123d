// Package path traces the hops between this agent and a peer, unprivileged: probes leave with
// increasing TTL on ordinary UDP or TCP sockets, and the routers' ICMP time-exceeded (and the
// destination's port-unreachable, SYN-ACK or reset) come back through the socket itself, its
// error queue (IP_RECVERR) as tracepath reads it. No raw socket and no CAP_NET_RAW.
//
// A TCP trace dials the peer's mesh echo port, so a firewall that passes the mesh passes the
// trace. Each probe has its own socket, so every answer on it is that probe's; probes of one
// hop may take different equal-cost paths (ECMP), and the hop then lists each router that
// answered at its TTL.
//
// Cost, by construction: at most MaxHops × Probes probes (90 by default), one in flight at a
// time, each a 52-byte UDP datagram or a 60-byte SYN (IPv4); a hop that does not answer
// costs ProbeTimeout per probe, and MaxSilent such hops in a row end the trace.
package path

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"time"
)

// Proto is how probes travel.
type Proto string

const (
	UDP Proto = "udp"
	TCP Proto = "tcp"
)

// Options bound a trace. Zero fields take the defaults in brackets.
type Options struct {
	Proto        Proto         // [UDP]
	MaxHops      int           // highest TTL tried [30]
	Probes       int           // probes per hop [3]
	ProbeTimeout time.Duration // wait for one probe's answer [1 s]
	MaxSilent    int           // hops in a row with no answer that end the trace [5]
	PayloadBytes int           // UDP payload [24]
}

func (o Options) withDefaults() Options {
	if o.Proto == "" {
		o.Proto = UDP
	}
	if o.MaxHops <= 0 {
		o.MaxHops = 30
	}
	if o.Probes <= 0 {
		o.Probes = 3
	}
	if o.ProbeTimeout <= 0 {
		o.ProbeTimeout = time.Second
	}
	if o.MaxSilent <= 0 {
		o.MaxSilent = 5
	}
	if o.PayloadBytes <= 0 {
		o.PayloadBytes = 24
	}
	return o
}

// Answer is what came back for one probe.
type Answer uint8

const (
	NoAnswer     Answer = iota // nothing within the probe timeout
	TimeExceeded               // a router on the way: ICMP time exceeded
	Reached                    // the destination: port unreachable (UDP), SYN-ACK or reset (TCP)
	Unreachable                // a router or the destination refused: ICMP unreachable, not port
)

func (a Answer) String() string {
	return [...]string{"none", "time_exceeded", "reached", "unreachable"}[a]
}

// Probe is one probe's outcome.
type Probe struct {
	Answer Answer
	From   netip.Addr    // who answered (zero when nobody did)
	RTT    time.Duration // send to answer (zero when nobody did)
	Code   uint8         // the ICMP code of an Unreachable answer
}

// Hop is every probe sent at one TTL.
type Hop struct {
	TTL    int
	Probes []Probe
	// Addrs are the distinct routers that answered at this TTL, in order of first answer:
	// more than one is per-flow load balancing (ECMP siblings), still one hop.
	Addrs    []netip.Addr
	Sent     int
	Lost     int
	MinRTT   time.Duration
	MedRTT   time.Duration
	MaxRTT   time.Duration
	Reached  bool // the destination answered at this TTL
	Refusing bool // an ICMP unreachable (not port) ended the trace here
}

// Trace is one trace from this host to Dst.
type Trace struct {
	Dst     netip.AddrPort
	Proto   Proto
	Started time.Time
	Elapsed time.Duration
	Hops    []Hop
	Reached bool
}

// ErrUnsupported is returned where the platform has no IP_RECVERR.
var ErrUnsupported = errors.New("path tracing needs Linux (IP_RECVERR)")

// prober sends one probe with the given TTL and waits for its answer; a probe nobody answered
// is a NoAnswer, not an error. An error says the probe could not be sent at all.
type prober func(ctx context.Context, dst netip.AddrPort, ttl int, o Options) (Probe, error)

// Run traces the path to dst: TTL 1, 2, … until the destination answers, a router refuses,
// MaxSilent hops in a row stay silent, MaxHops is reached or ctx ends (the hops so far are
// returned with ctx's error).
func Run(ctx context.Context, dst netip.AddrPort, o Options) (Trace, error) {
	return run(ctx, dst, o, probeOnce)
}

func run(ctx context.Context, dst netip.AddrPort, o Options, send prober) (Trace, error) {
	o = o.withDefaults()
	if o.Proto != UDP && o.Proto != TCP {
		return Trace{}, errors.New("path: proto must be udp or tcp")
	}
	dst = netip.AddrPortFrom(dst.Addr().Unmap(), dst.Port())
	t := Trace{Dst: dst, Proto: o.Proto, Started: time.Now().UTC()}
	start := time.Now()
	defer func() { t.Elapsed = time.Since(start) }()
	silent := 0
	for ttl := 1; ttl <= o.MaxHops; ttl++ {
		h := Hop{TTL: ttl}
		for range o.Probes {
			if err := ctx.Err(); err != nil {
				t.Elapsed = time.Since(start)
				return t, err
			}
			p, err := send(ctx, dst, ttl, o)
			if err != nil {
				if ctx.Err() != nil {
					break
				}
				t.Elapsed = time.Since(start)
				return t, err
			}
			h.Probes = append(h.Probes, p)
		}
		summarize(&h)
		t.Hops = append(t.Hops, h)
		if h.Reached || h.Refusing {
			t.Reached = h.Reached
			break
		}
		if len(h.Addrs) == 0 {
			silent++
			if silent >= o.MaxSilent {
				break
			}
		} else {
			silent = 0
		}
		if err := ctx.Err(); err != nil {
			t.Elapsed = time.Since(start)
			return t, err
		}
	}
	t.Elapsed = time.Since(start)
	return t, nil
}

// summarize fills a hop's responders, loss and RTT statistics from its probes.
func summarize(h *Hop) {
	var rtts []time.Duration
	h.Sent = len(h.Probes)
	for _, p := range h.Probes {
		if p.Answer == NoAnswer {
			h.Lost++
			continue
		}
		rtts = append(rtts, p.RTT)
		if !slices.Contains(h.Addrs, p.From) && p.From.IsValid() {
			h.Addrs = append(h.Addrs, p.From)
		}
		switch p.Answer {
		case Reached:
			h.Reached = true
		case Unreachable:
			h.Refusing = true
		}
	}
	if len(rtts) == 0 {
		return
	}
	slices.Sort(rtts)
	h.MinRTT, h.MaxRTT = rtts[0], rtts[len(rtts)-1]
	if n := len(rtts); n%2 == 1 {
		h.MedRTT = rtts[n/2]
	} else {
		h.MedRTT = (rtts[n/2-1] + rtts[n/2]) / 2
	}
}

package path

import (
	"context"
	"net"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"stormwatch/agents/internal/testutil"
)

// listen is a TCP listener on addr that accepts and closes, for the lifetime of the test.
func listen(t *testing.T, addr string) netip.AddrPort {
	t.Helper()
	if ln, err := net.Listen("tcp", addr); err != nil {
		t.Skipf("no %s here: %v", addr, err) // a host without IPv6
	} else {
		ln.Close()
	}
	return netip.MustParseAddrPort(testutil.ServeTCPOn(t, addr, func(net.Conn) {}))
}

// closedUDPPort is a UDP port with nothing bound on it (bound, then released).
func closedUDPPort(t *testing.T, host string) netip.AddrPort {
	t.Helper()
	c, err := net.ListenPacket("udp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Skipf("no %s here: %v", host, err)
	}
	ap := c.LocalAddr().(*net.UDPAddr).AddrPort()
	c.Close()
	return ap
}

func TestATraceToThisHostReachesItInOneHop(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("path tracing needs Linux")
	}
	tests := []struct {
		name  string
		proto Proto
		dst   func(t *testing.T) netip.AddrPort
	}{
		{"udp to a closed port answers port unreachable", UDP, func(t *testing.T) netip.AddrPort { return closedUDPPort(t, "127.0.0.1") }},
		{"tcp to a listening port connects", TCP, func(t *testing.T) netip.AddrPort { return listen(t, "127.0.0.1:0") }},
		{"tcp to a closed port is reset", TCP, func(t *testing.T) netip.AddrPort { return closedUDPPort(t, "127.0.0.1") }},
		{"udp over IPv6", UDP, func(t *testing.T) netip.AddrPort { return closedUDPPort(t, "::1") }},
		{"tcp over IPv6", TCP, func(t *testing.T) netip.AddrPort { return listen(t, "[::1]:0") }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dst := tc.dst(t)
			tr, err := Run(context.Background(), dst, Options{Proto: tc.proto, ProbeTimeout: 2 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if !tr.Reached || len(tr.Hops) != 1 {
				t.Fatalf("trace %+v, want the destination reached at TTL 1", tr)
			}
			h := tr.Hops[0]
			if h.Sent != 3 || h.Lost != 0 || len(h.Addrs) != 1 || h.Addrs[0] != dst.Addr() {
				t.Fatalf("hop %+v, want 3 answers from %s", h, dst.Addr())
			}
			if h.MinRTT <= 0 || h.MinRTT > h.MedRTT || h.MedRTT > h.MaxRTT || h.MaxRTT > time.Second {
				t.Fatalf("hop RTTs min %v med %v max %v", h.MinRTT, h.MedRTT, h.MaxRTT)
			}
		})
	}
}

// script answers probes from a table by TTL, in turn per probe.
type script map[int][]Probe

func (s script) prober() (prober, *int) {
	sent := new(int)
	next := map[int]int{}
	return func(_ context.Context, _ netip.AddrPort, ttl int, _ Options) (Probe, error) {
		*sent++
		ps := s[ttl]
		if len(ps) == 0 {
			return Probe{}, nil
		}
		p := ps[next[ttl]%len(ps)]
		next[ttl]++
		return p, nil
	}, sent
}

func TestTheTraceLoopGroupsAnswersIntoHops(t *testing.T) {
	r1, r2a, r2b := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("192.0.2.3")
	dst := netip.MustParseAddrPort("198.51.100.7:7300")
	ms := time.Millisecond
	te := func(a netip.Addr, rtt time.Duration) Probe { return Probe{Answer: TimeExceeded, From: a, RTT: rtt} }
	tests := []struct {
		name    string
		script  script
		opts    Options
		hops    int
		reached bool
		sent    int
		check   func(t *testing.T, tr Trace)
	}{
		{
			name: "ECMP siblings at one TTL are one hop with two routers",
			script: script{1: {te(r1, 1*ms)}, 2: {te(r2a, 5*ms), te(r2b, 7*ms), te(r2a, 6*ms)},
				3: {{Answer: Reached, From: dst.Addr(), RTT: 9 * ms}}},
			hops: 3, reached: true, sent: 9,
			check: func(t *testing.T, tr Trace) {
				h := tr.Hops[1]
				if len(h.Addrs) != 2 || h.Addrs[0] != r2a || h.Addrs[1] != r2b {
					t.Fatalf("hop 2 routers %v, want [%s %s]", h.Addrs, r2a, r2b)
				}
				if h.MinRTT != 5*ms || h.MedRTT != 6*ms || h.MaxRTT != 7*ms {
					t.Fatalf("hop 2 RTTs %v %v %v", h.MinRTT, h.MedRTT, h.MaxRTT)
				}
			},
		},
		{
			name:   "a silent hop in the middle is kept, with its loss, and the trace goes on",
			script: script{1: {te(r1, ms)}, 3: {{Answer: Reached, From: dst.Addr(), RTT: 3 * ms}}},
			hops:   3, reached: true, sent: 9,
			check: func(t *testing.T, tr Trace) {
				if h := tr.Hops[1]; h.Lost != 3 || len(h.Addrs) != 0 || h.MedRTT != 0 {
					t.Fatalf("silent hop %+v", h)
				}
			},
		},
		{
			name:   "MaxSilent hops in a row end the trace",
			script: script{1: {te(r1, ms)}},
			opts:   Options{MaxSilent: 4},
			hops:   5, reached: false, sent: 15,
		},
		{
			name:   "a router's unreachable ends the trace",
			script: script{1: {te(r1, ms)}, 2: {{Answer: Unreachable, From: r2a, RTT: 2 * ms, Code: 13}}},
			hops:   2, reached: false, sent: 6,
			check: func(t *testing.T, tr Trace) {
				if !tr.Hops[1].Refusing {
					t.Fatal("hop 2 should be refusing")
				}
			},
		},
		{
			name: "MaxHops bounds a path that never arrives",
			script: func() script {
				s := script{}
				for i := 1; i <= 40; i++ {
					s[i] = []Probe{te(r1, ms)}
				}
				return s
			}(),
			opts: Options{MaxHops: 8, Probes: 2},
			hops: 8, reached: false, sent: 16,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			send, sent := tc.script.prober()
			tr, err := run(context.Background(), dst, tc.opts, send)
			if err != nil {
				t.Fatal(err)
			}
			if len(tr.Hops) != tc.hops || tr.Reached != tc.reached || *sent != tc.sent {
				t.Fatalf("%d hops reached %v after %d probes, want %d hops reached %v after %d",
					len(tr.Hops), tr.Reached, *sent, tc.hops, tc.reached, tc.sent)
			}
			if tc.check != nil {
				tc.check(t, tr)
			}
		})
	}
}

func TestACancelledTraceReturnsItsHopsSoFar(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	send := func(context.Context, netip.AddrPort, int, Options) (Probe, error) {
		n++
		if n == 4 {
			cancel()
		}
		return Probe{Answer: TimeExceeded, From: netip.MustParseAddr("192.0.2.1"), RTT: time.Millisecond}, nil
	}
	tr, err := run(ctx, netip.MustParseAddrPort("198.51.100.7:1"), Options{}, send)
	if err == nil || len(tr.Hops) != 1 || n != 4 {
		t.Fatalf("err %v, %d hops after %d probes; want the cancel, hop 1 and 4 probes", err, len(tr.Hops), n)
	}
}

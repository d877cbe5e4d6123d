//go:build linux

package path

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"stormwatch/agents/testbed/linkem"
)

// routedNet is a chain of network namespaces built for one test: a host, routers with
// forwarding on, and a destination, joined by veth pairs or by delayed user-space links.
// Every name carries the test process's pid; Cleanup deletes them all, also on failure.
type routedNet struct {
	t      *testing.T
	prefix string
	net    int // second octet of the 10.x addresses
	pid    int
}

// sweepStale deletes the namespaces of earlier runs whose process is gone (a run killed
// before its cleanup).
func sweepStale() {
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, line := range strings.Split(string(out), "\n") {
		var pid int
		name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		if _, err := fmt.Sscanf(name, "swp%d-", &pid); err != nil || pid == os.Getpid() {
			continue
		}
		if err := unix.Kill(pid, 0); errors.Is(err, unix.ESRCH) {
			_ = exec.Command("ip", "netns", "del", name).Run()
		}
	}
}

func newRoutedNet(t *testing.T) *routedNet {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED LOUDLY: routed namespace tests need CAP_NET_ADMIN (run as root)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("SKIPPED LOUDLY: routed namespace tests need iproute2's ip")
	}
	pid := os.Getpid()
	sweepStale()
	n := &routedNet{t: t, prefix: fmt.Sprintf("swp%d-", pid), net: 100 + pid%100, pid: pid}
	probe := n.ns("probe")
	if out, err := exec.Command("ip", "netns", "add", probe).CombinedOutput(); err != nil {
		t.Skipf("SKIPPED LOUDLY: this process may not create network namespaces: %v: %s", err, out)
	}
	n.run("ip", "netns", "del", probe)
	return n
}

func (n *routedNet) ns(short string) string { return n.prefix + short }

func (n *routedNet) run(args ...string) {
	n.t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		n.t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
}

func (n *routedNet) in(ns string, args ...string) {
	n.t.Helper()
	n.run(append([]string{"ip", "netns", "exec", n.ns(ns)}, args...)...)
}

// add creates a namespace; routers forward, and nobody rate-limits ICMP errors (a trace's
// probes come faster than the kernel's default of one per second per destination).
func (n *routedNet) add(short string, router bool) {
	n.t.Helper()
	name := n.ns(short)
	n.run("ip", "netns", "add", name)
	n.t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	n.in(short, "ip", "link", "set", "lo", "up")
	n.in(short, "sysctl", "-qw", "net.ipv4.icmp_ratelimit=0")
	if router {
		n.in(short, "sysctl", "-qw", "net.ipv4.ip_forward=1")
	}
}

// addr is 10.<net>.<subnet>.<host>.
func (n *routedNet) addr(subnet, host int) string {
	return fmt.Sprintf("10.%d.%d.%d", n.net, subnet, host)
}

// veth joins a (host 1) and b (host 2) on subnet /24 with no delay.
func (n *routedNet) veth(a, b string, subnet int) {
	n.t.Helper()
	ia, ib := fmt.Sprintf("v%s%d", b, subnet), fmt.Sprintf("v%s%d", a, subnet) // named for the far end
	n.run("ip", "link", "add", ia, "netns", n.ns(a), "type", "veth", "peer", "name", ib, "netns", n.ns(b))
	n.up(a, ia, n.addr(subnet, 1))
	n.up(b, ib, n.addr(subnet, 2))
}

// wire joins a (host 1) and b (host 2) on subnet /24 through a user-space link that holds
// every frame for delay each way.
func (n *routedNet) wire(ctx context.Context, a, b string, subnet int, delay time.Duration) {
	n.t.Helper()
	// Made in this namespace, then moved: the pid keeps parallel runs' names apart.
	ia, ib := fmt.Sprintf("swt%da%d", n.pid%1000000, subnet), fmt.Sprintf("swt%db%d", n.pid%1000000, subnet)
	l, err := linkem.Open(ia, n.ns(a), ib, n.ns(b), delay)
	if err != nil {
		n.t.Fatal(err)
	}
	done := make(chan struct{})
	lctx, cancel := context.WithCancel(ctx)
	go func() { defer close(done); l.Run(lctx) }()
	n.t.Cleanup(func() { cancel(); <-done; l.Close() })
	n.up(a, ia, n.addr(subnet, 1))
	n.up(b, ib, n.addr(subnet, 2))
}

func (n *routedNet) up(ns, dev, addr string) {
	n.t.Helper()
	n.in(ns, "ip", "addr", "add", addr+"/24", "dev", dev)
	n.in(ns, "ip", "link", "set", dev, "up")
}

func (n *routedNet) route(ns, dst, via string) {
	n.t.Helper()
	n.in(ns, "ip", "route", "add", dst, "via", via)
}

// inNS runs f on a thread of its own inside namespace ns: sockets f opens belong to ns. The
// thread is never unlocked, so the runtime retires it when f returns.
func inNS[T any](t *testing.T, ns string, f func() (T, error)) (T, error) {
	t.Helper()
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		fd, err := unix.Open("/var/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			ch <- result{err: err}
			return
		}
		v, err := f()
		ch <- result{v, err}
	}()
	r := <-ch
	return r.v, r.err
}

// A host, three routers and a destination in a chain; the links between the routers and to
// the destination hold frames 10, 15 and 25 ms each way, WAN-like: each crossing of a
// user-space link also costs a wake-up of its thread, a few hundred microseconds on an idle
// virtual machine (its CPUs sleep), which against 2-5 ms links came to 10-17% of a hop.
func TestATraceReportsEveryRouterOfAFourHopPathWithRTTsThatAddUpToTheLinksDelays(t *testing.T) {
	n := newRoutedNet(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, ns := range []string{"h", "r1", "r2", "r3", "d"} {
		n.add(ns, ns[0] == 'r')
	}
	delays := []time.Duration{10 * time.Millisecond, 15 * time.Millisecond, 25 * time.Millisecond}
	n.veth("r1", "h", 1)
	n.wire(ctx, "r1", "r2", 2, delays[0])
	n.wire(ctx, "r2", "r3", 3, delays[1])
	n.wire(ctx, "r3", "d", 4, delays[2])
	n.route("h", "default", n.addr(1, 1))
	n.route("r1", "default", n.addr(2, 2))
	n.route("r2", "default", n.addr(3, 2))
	n.route("r2", n.addr(1, 0)+"/24", n.addr(2, 1))
	n.route("r3", "default", n.addr(3, 1))
	n.route("d", "default", n.addr(4, 1))
	routers := []string{n.addr(1, 1), n.addr(2, 2), n.addr(3, 2), n.addr(4, 2)}
	// What each hop's round trip should be: twice the delays up to it.
	want := []time.Duration{0, 2 * delays[0], 2 * (delays[0] + delays[1]), 2 * (delays[0] + delays[1] + delays[2])}

	for _, proto := range []Proto{UDP, TCP} {
		t.Run(string(proto), func(t *testing.T) {
			dst := netip.MustParseAddrPort(n.addr(4, 2) + ":33434")
			tr, err := inNS(t, n.ns("h"), func() (Trace, error) {
				return Run(ctx, dst, Options{Proto: proto, Probes: 5, ProbeTimeout: 2 * time.Second})
			})
			if err != nil {
				t.Fatal(err)
			}
			if !tr.Reached || len(tr.Hops) != 4 {
				t.Fatalf("%d hops, reached %v; want the destination at hop 4: %+v", len(tr.Hops), tr.Reached, tr.Hops)
			}
			for i, h := range tr.Hops {
				if len(h.Addrs) != 1 || h.Addrs[0].String() != routers[i] || h.Lost != 0 {
					t.Errorf("hop %d: %v (lost %d of %d), want %s", h.TTL, h.Addrs, h.Lost, h.Sent, routers[i])
				}
				t.Logf("hop %d %v min %v med %v max %v", h.TTL, h.Addrs, h.MinRTT, h.MedRTT, h.MaxRTT)
				if i == 0 {
					continue
				}
				// Each hop adds its link's round trip: the fastest probe of a hop less the
				// fastest of the hop before is within 10% of twice the link's delay (plus a
				// veth and a tap crossing, tens of microseconds). Medians also carry how late
				// this machine woke the link emulator (milliseconds under make test's load).
				added, link := h.MinRTT-tr.Hops[i-1].MinRTT, want[i]-want[i-1]
				if slack := link/10 + 100*time.Microsecond; added < link-link/10 || added > link+slack {
					t.Errorf("hop %d adds %v to the round trip, want %v (±10%%)", h.TTL, added, link)
				}
				if h.MinRTT < want[i] {
					t.Errorf("hop %d: fastest round trip %v, under the links' %v", h.TTL, h.MinRTT, want[i])
				}
			}
		})
	}
}

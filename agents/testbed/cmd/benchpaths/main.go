//go:build linux

// Command benchpaths measures what path tracing costs the mesh (make bench-paths,
// docs/paths.md): a chain of network namespaces (a host, three routers, a destination) joined
// by delayed user-space links, the mesh probing host to destination, and phases with and
// without traces at a fixed rate. It prints the trace's time and hop count, how far the
// mesh's RTT median moved while traces ran, and the CPU tracing took. Needs root
// (CAP_NET_ADMIN) for the namespaces.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"stormwatch/agents/internal/probe/mesh"
	pathprobe "stormwatch/agents/internal/probe/path"
	"stormwatch/agents/internal/sample"
	"stormwatch/agents/testbed/linkem"
)

const meshPort = 7300

type result struct {
	ShiftUS      float64 `json:"shift_us"`
	ShiftLoUS    float64 `json:"shift_lo_us"`
	ShiftHiUS    float64 `json:"shift_hi_us"`
	TraceMs      float64 `json:"trace_ms"`
	Hops         int     `json:"hops"`
	Traces       int     `json:"traces"`
	QuietP50US   float64 `json:"quiet_p50_us"`
	TracingP50US float64 `json:"tracing_p50_us"`
	Samples      int     `json:"samples"`
	CPUPct       float64 `json:"cpu_pct"`
	PerMin       float64 `json:"traces_per_min"`
}

func main() {
	role := flag.String("role", "", "internal: echo or measure (run inside a namespace)")
	addr := flag.String("addr", "", "internal: the destination's mesh address")
	phase := flag.Duration("phase", 20*time.Second, "length of each quiet and each tracing phase")
	rounds := flag.Int("rounds", 3, "quiet/tracing phase pairs")
	perMin := flag.Float64("traces-per-min", 6, "traces per minute while tracing (an agent with 60 peers at the default 600 s interval)")
	rate := flag.Float64("mesh-hz", 20, "mesh rounds per second")
	delay := flag.Duration("link-delay", 0, "one-way delay of the links past the first router "+
		"(testbed/linkem); 0: plain veth links, whose round trips vary by microseconds where a "+
		"user-space link's vary by a hundred, so the mesh's shift can be resolved to a few")
	flag.Parse()
	var err error
	switch *role {
	case "echo":
		err = echo(*addr)
	case "measure":
		err = measure(*addr, *phase, *rounds, *perMin, *rate)
	case "":
		err = parent(*phase, *rounds, *perMin, *rate, *delay)
	default:
		err = fmt.Errorf("unknown role %q", *role)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchpaths:", err)
		os.Exit(1)
	}
}

func echo(addr string) error {
	srv, err := mesh.Listen(addr, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return srv.Serve(ctx)
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	return v[len(v)/2]
}

// measure probes the destination and alternates quiet and tracing phases.
func measure(addr string, phase time.Duration, rounds int, perMin, rate float64) error {
	dst, err := netip.ParseAddrPort(addr)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	rec := mesh.NewRecorder()
	p := mesh.NewProber("bench-host", rec, log)
	p.Apply(mesh.Settings{Enabled: true, RateHz: rate, PayloadBytes: 64, Timeout: time.Second,
		Peers: []mesh.Peer{{ID: "bench-dst", Name: "dst", Address: addr}}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = p.Run(ctx) }()
	time.Sleep(3 * time.Second) // connected and steady

	var quiet, tracing, shifts []float64
	var quietCPU, tracingCPU, quietWall, tracingWall time.Duration
	var traceMs []float64
	hops := 0
	take := func(into *[]float64) {
		for _, b := range rec.TakeMesh() {
			for _, s := range b.Mesh {
				if s.Status == sample.StatusOK {
					*into = append(*into, float64(s.RTTUS))
				}
			}
		}
	}
	every := time.Duration(float64(time.Minute) / perMin)
	for range rounds {
		take(new([]float64)) // what came before the phase
		c0, w0 := cpuTime(), time.Now()
		time.Sleep(phase)
		var q, tr []float64
		take(&q)
		quiet = append(quiet, q...)
		quietCPU += cpuTime() - c0
		quietWall += time.Since(w0)

		c0, w0 = cpuTime(), time.Now()
		end := w0.Add(phase)
		for next := w0; next.Before(end); next = next.Add(every) {
			time.Sleep(time.Until(next))
			tr, err := pathprobe.Run(ctx, dst, pathprobe.Options{Proto: pathprobe.TCP})
			if err != nil {
				return err
			}
			if !tr.Reached {
				return fmt.Errorf("trace did not reach %s: %+v", dst, tr.Hops)
			}
			traceMs = append(traceMs, float64(tr.Elapsed.Microseconds())/1000)
			hops = len(tr.Hops)
		}
		time.Sleep(time.Until(end))
		take(&tr)
		tracing = append(tracing, tr...)
		// Each round's tracing median against the quiet one just before it: the machine's
		// slow drift (other work on it) cancels, where pooled medians would carry it.
		shifts = append(shifts, median(tr)-median(q))
		tracingCPU += cpuTime() - c0
		tracingWall += time.Since(w0)
	}
	cpu := (tracingCPU.Seconds()/tracingWall.Seconds() - quietCPU.Seconds()/quietWall.Seconds()) * 100
	slices.Sort(shifts)
	r := result{ShiftUS: median(shifts), ShiftLoUS: shifts[len(shifts)/4],
		ShiftHiUS: shifts[(3*len(shifts))/4], TraceMs: median(traceMs), Hops: hops, Traces: len(traceMs),
		QuietP50US: median(quiet), TracingP50US: median(tracing), Samples: len(quiet) + len(tracing),
		CPUPct: max(cpu, 0), PerMin: perMin}
	return json.NewEncoder(os.Stdout).Encode(r)
}

// parent builds the network, runs the echo server and the measurer inside it, and prints.
func parent(phase time.Duration, rounds int, perMin, rate float64, linkDelay time.Duration) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("needs root (CAP_NET_ADMIN) to build network namespaces")
	}
	pid := os.Getpid()
	ns := func(s string) string { return fmt.Sprintf("swb%d-%s", pid, s) }
	addr := func(subnet, host int) string { return fmt.Sprintf("10.%d.%d.%d", 100+pid%100, subnet, host) }
	run := func(args ...string) error {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	in := func(n string, args ...string) error {
		return run(append([]string{"ip", "netns", "exec", ns(n)}, args...)...)
	}
	names := []string{"h", "r1", "r2", "r3", "d"}
	defer func() {
		for _, n := range names {
			_ = exec.Command("ip", "netns", "del", ns(n)).Run()
		}
	}()
	for _, n := range names {
		if err := run("ip", "netns", "add", ns(n)); err != nil {
			return err
		}
		if err := in(n, "ip", "link", "set", "lo", "up"); err != nil {
			return err
		}
		_ = in(n, "sysctl", "-qw", "net.ipv4.icmp_ratelimit=0")
		if n[0] == 'r' {
			if err := in(n, "sysctl", "-qw", "net.ipv4.ip_forward=1"); err != nil {
				return err
			}
		}
	}
	up := func(n, dev, a string) error {
		if err := in(n, "ip", "addr", "add", a+"/24", "dev", dev); err != nil {
			return err
		}
		return in(n, "ip", "link", "set", dev, "up")
	}
	if err := run("ip", "link", "add", "vh", "netns", ns("r1"), "type", "veth", "peer", "name", "vr",
		"netns", ns("h")); err != nil {
		return err
	}
	if err := up("r1", "vh", addr(1, 1)); err != nil {
		return err
	}
	if err := up("h", "vr", addr(1, 2)); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i, l := range [][2]string{{"r1", "r2"}, {"r2", "r3"}, {"r3", "d"}} {
		subnet := i + 2
		a, b := fmt.Sprintf("swb%da%d", pid%1000000, subnet), fmt.Sprintf("swb%db%d", pid%1000000, subnet)
		if linkDelay == 0 {
			if err := run("ip", "link", "add", a, "netns", ns(l[0]), "type", "veth", "peer", "name", b,
				"netns", ns(l[1])); err != nil {
				return err
			}
		} else {
			link, err := linkem.Open(a, ns(l[0]), b, ns(l[1]), linkDelay)
			if err != nil {
				return err
			}
			done := make(chan struct{})
			go func() { defer close(done); link.Run(ctx) }()
			defer func() { cancel(); <-done; link.Close() }()
		}
		if err := up(l[0], a, addr(subnet, 1)); err != nil {
			return err
		}
		if err := up(l[1], b, addr(subnet, 2)); err != nil {
			return err
		}
	}
	routes := [][3]string{{"h", "default", addr(1, 1)}, {"r1", "default", addr(2, 2)},
		{"r2", "default", addr(3, 2)}, {"r2", addr(1, 0) + "/24", addr(2, 1)},
		{"r3", "default", addr(3, 1)}, {"d", "default", addr(4, 1)}}
	for _, r := range routes {
		if err := in(r[0], "ip", "route", "add", r[1], "via", r[2]); err != nil {
			return err
		}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	dst := fmt.Sprintf("%s:%d", addr(4, 2), meshPort)
	echoCmd := exec.Command("ip", "netns", "exec", ns("d"), self, "-role", "echo", "-addr", dst)
	echoCmd.Stderr = os.Stderr
	if err := echoCmd.Start(); err != nil {
		return err
	}
	defer func() { _ = echoCmd.Process.Signal(syscall.SIGTERM); _ = echoCmd.Wait() }()
	time.Sleep(300 * time.Millisecond)
	m := exec.Command("ip", "netns", "exec", ns("h"), self, "-role", "measure", "-addr", dst,
		"-phase", phase.String(), "-rounds", fmt.Sprint(rounds),
		"-traces-per-min", fmt.Sprint(perMin), "-mesh-hz", fmt.Sprint(rate))
	m.Stderr = os.Stderr
	out, err := m.Output()
	if err != nil {
		return fmt.Errorf("measure: %w", err)
	}
	var r result
	if err := json.Unmarshal(out, &r); err != nil {
		return fmt.Errorf("measure said %q: %w", out, err)
	}
	fmt.Fprintf(os.Stderr, "bench paths: %d hops, links %v each way, %d traces, mesh %d samples at %.0f Hz, "+
		"p50 quiet %.0f us, tracing %.0f us; per-round shift quartiles %.0f / %.0f / %.0f us over %d rounds\n",
		r.Hops, linkDelay, r.Traces, r.Samples, rate, r.QuietP50US, r.TracingP50US,
		r.ShiftLoUS, r.ShiftUS, r.ShiftHiUS, rounds)
	fmt.Printf("paths: trace %.1f ms for %d hops, mesh p50 shift %.0f us, agent cpu %.2f%% of a core at %.0f traces/min\n",
		r.TraceMs, r.Hops, r.ShiftUS, r.CPUPct, r.PerMin)
	return nil
}

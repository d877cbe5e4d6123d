// Command agent-bench measures the Stormwatch agent at StormCloud's base workload (seed 003
// §4.1: 100 rounds/s, 1024-byte payloads, 8 nodes, self-loop) on loopback, against an
// in-process fake ingest API serving the API's default config (batches cut every 2 s), so
// that only the agents, as shipped, are measured:
//
//	(a) 8 agents and 8 StormCloud nodes (seed 003's tool, built by run.sh outside the
//	    repository) in turns at the same workload: CPU % of one core and RSS per node of
//	    each, node-to-node RTT p50/p99/p99.99 of each from its own records (the agents'
//	    shipped samples, StormCloud's CSV rows), and the ratio of their CPU per node; bytes
//	    per buffered sample from the recorder's heap at the same cadence;
//	(b) 2 agents and `sockperf ping-pong --tcp --full-rtt -m 1024` at the same rate, side by
//	    side in windows over -pair-duration, each tool's two ends on the same two CPUs: the
//	    median over windows of each one's p50.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"stormwatch/agents/testbed/fakeapi"
)

var cpuProfile, sendMode string

const enrollToken = "swe_benchbenchbenchbenchbenchbench00"

func main() {
	bin := flag.String("agent-bin", "agents/bin/stormwatch-agent", "agent binary")
	agentsDir := flag.String("agents-dir", "agents", "agents module (for the recorder memory benchmark)")
	n := flag.Int("n", 8, "agents in the mesh phase")
	rate := flag.Float64("rate", 100, "rounds per second")
	payload := flag.Int("payload", 1024, "payload bytes")
	duration := flag.Duration("duration", 60*time.Second, "measurement time of the mesh phase, for each tool")
	alternations := flag.Int("alternations", 2, "turns of the agents and StormCloud in the mesh phase (each measured for duration/alternations)")
	scDir := flag.String("sc-bin", "", "directory holding StormCloud's node and master (run.sh builds them)")
	pairDuration := flag.Duration("pair-duration", 60*time.Second, "measurement time of the pair phase (in windows of about 5 s)")
	sockperf := flag.String("sockperf", "sockperf", "sockperf binary")
	flag.StringVar(&sendMode, "send-mode", "spread", "mesh.send_mode of the agents: spread or broadcast")
	flag.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the first mesh agent, taken during the window, to this file")
	flag.Parse()
	if err := run(*bin, *agentsDir, *scDir, *alternations, *n, *rate, *payload, *duration, *pairDuration, *sockperf); err != nil {
		fmt.Fprintln(os.Stderr, "agent-bench:", err)
		os.Exit(1)
	}
}

// fleet is a fake API with agent processes meshing through it.
type fleet struct {
	api   *fakeapi.Server
	srv   *http.Server
	url   string
	procs []*exec.Cmd
	names []string
	dir   string
	mu    sync.Mutex
	pairs map[[2]string]bool
	rows  []row // every shipped mesh sample since the fleet meshed
	keep  atomic.Bool
}

// row is one shipped mesh sample.
type row struct {
	timeUS int64 // when it was sent
	rttUS  int64 // -1 unless ok
	self   bool
}

// API defaults of the served config (backend/stormwatch/services/agents.py).
const (
	apiMaxBatchSamples = 20000
	apiMaxBatchAgeMs   = 2000
)

// startFleet starts n agents meshing through a fake API; with cpus, agent i runs on CPU
// cpus[i % len(cpus)].
func startFleet(bin string, n int, rate float64, payload int, tag string, cpus []string) (*fleet, error) {
	f := &fleet{api: fakeapi.New(enrollToken, rate, payload, 1000), pairs: map[[2]string]bool{}}
	f.api.SetShipper(apiMaxBatchSamples, apiMaxBatchAgeMs)
	f.api.KeepRows = false
	f.api.OnMesh = f.onMesh
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f.url = "http://" + ln.Addr().String()
	f.srv = &http.Server{Handler: f.api}
	go func() { _ = f.srv.Serve(ln) }()
	if f.dir, err = os.MkdirTemp("", "stormwatch-bench-"+tag+"-"); err != nil {
		return nil, err
	}
	for i := range n {
		name := fmt.Sprintf("bench-%s-%d", tag, i+1)
		state := filepath.Join(f.dir, name)
		logf, err := os.Create(state + ".log")
		if err != nil {
			return nil, err
		}
		// No throughput probe: the agents share one host and its one port, and only the
		// mesh is measured here.
		args := []string{"run", "-throughput-listen", ""}
		cmd := exec.Command(bin, args...)
		if cpus != nil {
			cmd = exec.Command("taskset", append([]string{"-c", cpus[i%len(cpus)], bin}, args...)...)
		}
		cmd.Env = append(os.Environ(),
			"STORMWATCH_API_URL="+f.url, "STORMWATCH_ENROLLMENT_TOKEN="+enrollToken,
			"STORMWATCH_STATE_DIR="+state, "STORMWATCH_NAME="+name,
			"STORMWATCH_MESH_LISTEN=127.0.0.1:0", "STORMWATCH_METRICS_LISTEN=127.0.0.1:0",
			"STORMWATCH_METADATA_DETECT=false", "STORMWATCH_PROVIDER=local", "STORMWATCH_REGION=loopback",
			"STORMWATCH_ZONE=loopback-a", "STORMWATCH_LOG_LEVEL=warn", "STORMWATCH_MESH_SEND_MODE="+sendMode)
		if i == 0 && cpuProfile != "" && tag == "mesh" {
			cmd.Env = append(cmd.Env, "STORMWATCH_METRICS_PPROF=true", "STORMWATCH_METRICS_LISTEN="+profileAddr)
		}
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		f.procs = append(f.procs, cmd)
		f.names = append(f.names, name)
	}
	return f, nil
}

func (f *fleet) onMesh(rows []fakeapi.MeshRow) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range rows {
		if r.Status == 0 {
			f.pairs[[2]string{r.Src, r.Dst}] = true
		}
		if f.keep.Load() {
			f.rows = append(f.rows, row{timeUS: r.TimeUS, rttUS: r.RTTUS, self: r.Src == r.Dst})
		}
	}
}

// window returns the samples sent within [from, to): node-to-node RTTs and self-loop RTTs
// (sorted, microseconds), and how many samples were ok and how many lost or failed.
func (f *fleet) window(from, to time.Time) (rtts, self []int64, ok, lost int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, b := from.UnixMicro(), to.UnixMicro()
	for _, r := range f.rows {
		switch {
		case r.timeUS < a || r.timeUS >= b:
		case r.rttUS < 0:
			lost++
		case r.self:
			ok++
			self = append(self, r.rttUS)
		default:
			ok++
			rtts = append(rtts, r.rttUS)
		}
	}
	slices.Sort(rtts)
	slices.Sort(self)
	return rtts, self, ok, lost
}

// settle waits until every sample sent before now has been shipped: one batch age, the
// shipper's cut tick and the request.
func settle() { time.Sleep(time.Duration(apiMaxBatchAgeMs)*time.Millisecond + 1500*time.Millisecond) }

// waitMeshed waits until every ordered pair, self included, has delivered an RTT.
func (f *fleet) waitMeshed(n int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		f.mu.Lock()
		got := len(f.pairs)
		f.mu.Unlock()
		if got == n*n {
			return nil
		}
		for _, p := range f.procs {
			if p.ProcessState != nil {
				return fmt.Errorf("an agent exited; see %s", f.dir)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("only %d of %d pairs measured after %v; logs in %s", len(f.pairs), n*n, timeout, f.dir)
}

func (f *fleet) stop() {
	for _, p := range f.procs {
		_ = p.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range f.procs {
		done := make(chan struct{})
		go func() { _ = p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = p.Process.Kill()
			<-done
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = f.srv.Shutdown(ctx)
	_ = os.RemoveAll(f.dir)
}

// usage accumulates the CPU time and the largest RSS of n processes over measured windows.
type usage struct {
	ticks, sys, rss []int64
	secs            float64
}

func newUsage(n int) *usage {
	return &usage{ticks: make([]int64, n), sys: make([]int64, n), rss: make([]int64, n)}
}

// measure adds what the processes use during the next d and returns the window's bounds.
// turn is the window's own mean CPU per process in % of a core.
func (u *usage) measure(ps []int, d time.Duration) (t0, t1 time.Time, turn float64, err error) {
	u0, s0 := make([]int64, len(ps)), make([]int64, len(ps))
	t0 = time.Now()
	for i, p := range ps {
		if u0[i], s0[i], err = cpuSplit(p); err != nil {
			return t0, t0, 0, err
		}
	}
	time.Sleep(d)
	t1 = time.Now()
	var ticks int64
	for i, p := range ps {
		u1, s1, err := cpuSplit(p)
		if err != nil {
			return t0, t1, 0, err
		}
		dt := u1 + s1 - u0[i] - s0[i]
		ticks += dt
		u.ticks[i] += dt
		u.sys[i] += s1 - s0[i]
		u.rss[i] = max(u.rss[i], rssKB(p))
	}
	secs := t1.Sub(t0).Seconds()
	u.secs += secs
	return t0, t1, float64(ticks) / clkTck / secs / float64(len(ps)) * 100, nil
}

// cpu is process i's CPU in % of one core over the measured windows.
func (u *usage) cpu(i int) float64 { return float64(u.ticks[i]) / clkTck / u.secs * 100 }

// kernel is the kernel's share of process i's CPU, in %.
func (u *usage) kernel(i int) float64 { return float64(u.sys[i]) / float64(max(u.ticks[i], 1)) * 100 }

// kernelMean is the mean kernel CPU per process in % of one core.
func (u *usage) kernelMean() float64 {
	var t int64
	for _, v := range u.sys {
		t += v
	}
	return float64(t) / clkTck / u.secs * 100 / float64(len(u.sys))
}

// summary is the mean and max CPU per process and the mean RSS.
func (u *usage) summary() (mean, top float64, rss int64) {
	for i := range u.ticks {
		mean += u.cpu(i)
		top = max(top, u.cpu(i))
		rss += u.rss[i]
	}
	n := len(u.ticks)
	return mean / float64(n), top, rss / int64(n)
}

func pids(ps []*exec.Cmd) []int {
	out := make([]int, len(ps))
	for i, p := range ps {
		out[i] = p.Process.Pid
	}
	return out
}

// cpuSplit is utime and stime of a process in clock ticks (/proc/<pid>/stat fields 14 and 15).
func cpuSplit(pid int) (int64, int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	u, _ := strconv.ParseInt(fields[11], 10, 64)
	st, _ := strconv.ParseInt(fields[12], 10, 64)
	return u, st, nil
}

func rssKB(pid int) int64 {
	fh, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb
		}
	}
	return 0
}

// pct is the nearest-rank percentile of sorted xs.
func pct(xs []int64, p float64) int64 {
	if len(xs) == 0 {
		return -1
	}
	i := int(math.Ceil(p/100*float64(len(xs)))) - 1
	return xs[min(max(i, 0), len(xs)-1)]
}

const clkTck = 100 // USER_HZ on Linux

func run(bin, agentsDir, scDir string, alternations int, n int, rate float64, payload int, duration, pairDuration time.Duration, sockperf string) error {
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("agent binary: %w (build it with make -C agents build)", err)
	}
	recordB, heapB, err := recorderBytes(agentsDir)
	if err != nil {
		return err
	}
	fmt.Printf("buffered sample: %d-byte record; measured heap per buffered sample at 2 s cuts (8 peers, 100 rounds/s) = %.2f B (StormCloud: 52 B)\n", recordB, heapB)

	// (a) the mesh at the base workload, the agents and StormCloud in turns
	slice := duration / time.Duration(alternations)
	fmt.Printf("phase a: %d nodes, %.0f rounds/s, %d-byte payload, self-loop; Stormwatch agents (send mode %s, batches every %d ms to the fake API) and StormCloud nodes in %d alternations of %v each\n",
		n, rate, payload, sendMode, apiMaxBatchAgeMs, alternations, slice)
	agentU, scU := newUsage(n), newUsage(n)
	var rtts, self, scRTTs, scSelf []int64
	var ok, lost int
	for k := range alternations {
		fa, err := startFleet(bin, n, rate, payload, "mesh", nil)
		if err != nil {
			return err
		}
		t0, t1, agentTurn, err := func() (time.Time, time.Time, float64, error) {
			defer fa.stop()
			if err := fa.waitMeshed(n, 60*time.Second); err != nil {
				return time.Time{}, time.Time{}, 0, err
			}
			fa.api.SetPollS(30) // the default poll interval during the measurement
			fa.keep.Store(true)
			time.Sleep(3 * time.Second)
			if k == 0 && cpuProfile != "" {
				go saveProfile(slice)
			}
			t0, t1, turn, err := agentU.measure(pids(fa.procs), slice)
			if err != nil {
				return t0, t1, 0, err
			}
			settle()
			return t0, t1, turn, nil
		}()
		if err != nil {
			return err
		}
		r, sl, o, l := fa.window(t0, t1)
		rtts, self, ok, lost = append(rtts, r...), append(self, sl...), ok+o, lost+l
		fmt.Printf("  %d. agents    %s-%s: cpu %.2f%% per node, %d node-to-node samples, p50 %d us; host load %s\n",
			k+1, t0.Format("15:04:05"), t1.Format("15:04:05"), agentTurn, len(r), pct(r, 50), loadAvg())

		// Fresh StormCloud nodes every turn, as the agents: a node keeps the ticker of every
		// experiment it ran firing (it never stops it, and its go.mod's go 1.19 keeps Go's
		// pre-1.23 timers, which are never collected), so a reused node would be measured
		// with the turns before it still ticking.
		t0, t1, r, sl, scTurn, err := scTurnRun(scDir, n, rate, payload, slice, scU)
		if err != nil {
			return err
		}
		scRTTs, scSelf = append(scRTTs, r...), append(scSelf, sl...)
		fmt.Printf("  %d. StormCloud %s-%s: cpu %.2f%% per node, %d node-to-node samples, p50 %d us; host load %s\n",
			k+1, t0.Format("15:04:05"), t1.Format("15:04:05"), scTurn, len(r), pct(r, 50), loadAvg())
	}
	slices.Sort(rtts)
	slices.Sort(self)
	slices.Sort(scRTTs)
	slices.Sort(scSelf)
	for i := range n {
		fmt.Printf("  node %d: agent cpu %.2f%% of a core (%.0f%% kernel), rss %d KiB; StormCloud cpu %.2f%% (%.0f%% kernel), rss %d KiB\n",
			i+1, agentU.cpu(i), agentU.kernel(i), agentU.rss[i], scU.cpu(i), scU.kernel(i), scU.rss[i])
	}
	aMean, aMax, aRSS := agentU.summary()
	sMean, sMax, sRSS := scU.summary()
	ratio := aMean / sMean
	fmt.Printf("  cpu per node: agent mean %.2f%%, max %.2f%%; StormCloud mean %.2f%%, max %.2f%% of a core; ratio of means %.3f\n",
		aMean, aMax, sMean, sMax, ratio)
	// The kernel's part (loopback TCP for both ends, wakeups) is what sending and echoing
	// cost before any user-space work: the floor of the ratio at this workload.
	fmt.Printf("  kernel cpu per node: agent %.2f%%, StormCloud %.2f%% of a core; the agent's kernel time alone is %.2f of StormCloud's cpu\n",
		agentU.kernelMean(), scU.kernelMean(), agentU.kernelMean()/sMean)
	fmt.Printf("  rss per node: agent mean %d KiB, StormCloud mean %d KiB\n", aRSS, sRSS)
	fmt.Printf("  agent samples sent in its windows: %d ok, %d lost or failed\n", ok, lost)
	fmt.Printf("  node-to-node RTT, agent (%d samples, its shipped samples): p50 %d us, p99 %d us, p99.99 %d us, max %d us\n",
		len(rtts), pct(rtts, 50), pct(rtts, 99), pct(rtts, 99.99), pct(rtts, 100))
	fmt.Printf("  node-to-node RTT, StormCloud (%d samples, its CSV records): p50 %d us, p99 %d us, p99.99 %d us, max %d us\n",
		len(scRTTs), pct(scRTTs, 50), pct(scRTTs, 99), pct(scRTTs, 99.99), pct(scRTTs, 100))
	fmt.Printf("  self-loop RTT p50: agent %d us (%d samples), StormCloud %d us (%d samples)\n",
		pct(self, 50), len(self), pct(scSelf, 50), len(scSelf))
	if len(rtts) == 0 || len(scRTTs) == 0 {
		return errors.New("no node-to-node samples from one of the tools")
	}

	// (b) a pair and sockperf side by side, in windows
	pair50, sp50, err := pairPhase(bin, rate, payload, pairDuration, sockperf)
	if err != nil {
		return err
	}
	fmt.Printf("agent: cpu %.2f%% of a core, sc %.2f%%, ratio %.3f, %.1f B/sample, mesh p50 %d us, sc p50 %d us, pair p50 %.0f us, sockperf p50 %.1f us\n",
		aMean, sMean, ratio, heapB, pct(rtts, 50), pct(scRTTs, 50), pair50, sp50)
	return nil
}

// scTurnRun starts n StormCloud nodes, runs one experiment, measures its CPU over slice
// into u and returns the window's bounds, its node-to-node and self-loop RTTs and the
// turn's CPU per node.
func scTurnRun(scDir string, n int, rate float64, payload int, slice time.Duration, u *usage) (t0, t1 time.Time, rtts, self []int64, turn float64, err error) {
	sc, err := startSC(scDir, n, rate, payload, slice)
	if err != nil {
		return t0, t1, nil, nil, 0, err
	}
	defer sc.stop()
	if err = sc.begin(); err != nil {
		return t0, t1, nil, nil, 0, err
	}
	time.Sleep(3 * time.Second)
	if t0, t1, turn, err = u.measure(pids(sc.procs), slice); err != nil {
		return t0, t1, nil, nil, 0, err
	}
	if err = sc.end(); err != nil {
		return t0, t1, nil, nil, 0, err
	}
	rtts, self, err = sc.records(t0, t1)
	return t0, t1, rtts, self, turn, err
}

// pairPhase compares two agents with sockperf ping-pong over loopback at the same rate and
// payload, running at the same time in consecutive windows of about 5 s (sockperf runs once
// per window; agent samples belong to a window by their send time). Each tool's two ends run
// on different CPUs, the same two for both, as two VMs would. On this VM where the scheduler
// puts the two ends, and how long a CPU has been idle, move the RTT more than anything
// measured (sockperf alone: about 30 us with both ends on one CPU, 110-200 us across two
// idle ones); side by side on the same CPUs both see the same placement, the same host state
// and the same activity, and idle CPUs poll rather than halt (holdCPUsAwake). The medians
// over windows of each one's p50 are compared, so a passing disturbance moves one window,
// not the result.
func pairPhase(bin string, rate float64, payload int, d time.Duration, sockperf string) (float64, float64, error) {
	windows := max(3, int(d/(5*time.Second)))
	w := d / time.Duration(windows)
	cpus := pairCPUs()
	where := "unpinned (fewer than 2 CPUs or no taskset)"
	if cpus != nil {
		where = fmt.Sprintf("agent 1 and the sockperf client on CPU %s, agent 2 and the sockperf server on CPU %s", cpus[0], cpus[1])
	}
	idle := "CPU idle states as configured"
	if release, err := holdCPUsAwake(); err == nil {
		defer release()
		idle = "CPUs kept out of halt (/dev/cpu_dma_latency = 0)"
	}
	fmt.Printf("phase b: 2 agents and sockperf ping-pong --tcp --full-rtt -m %d, both at %.0f msg/s at the same time, %d windows of %v; %s; %s\n",
		payload, rate, windows, w, where, idle)
	fb, err := startFleet(bin, 2, rate, payload, "pair", cpus)
	if err != nil {
		return 0, 0, err
	}
	defer fb.stop()
	if err := fb.waitMeshed(2, 60*time.Second); err != nil {
		return 0, 0, err
	}
	fb.api.SetPollS(30)
	fb.keep.Store(true)
	sp, err := startSockperfServer(sockperf, cpus)
	if err != nil {
		return 0, 0, err
	}
	defer sp.stop()
	type span struct {
		from, to time.Time
		sp50     float64
	}
	var spans []span
	for range windows {
		from := time.Now()
		p50, err := sp.pingPong(payload, rate, w)
		if err != nil {
			return 0, 0, err
		}
		spans = append(spans, span{from, time.Now(), p50})
	}
	settle()
	var agent50, sock50 []float64
	var all []int64
	for i, s := range spans {
		rtts, _, _, _ := fb.window(s.from, s.to)
		all = append(all, rtts...)
		fmt.Printf("  window %d: agent pair p50 %d us (%d samples), sockperf p50 %.1f us\n", i+1, pct(rtts, 50), len(rtts), s.sp50)
		agent50 = append(agent50, float64(pct(rtts, 50)))
		sock50 = append(sock50, s.sp50)
	}
	slices.Sort(all)
	a, b := median(agent50), median(sock50)
	fmt.Printf("  agent pair RTT over all windows (%d samples): p50 %d us, p99 %d us\n", len(all), pct(all, 50), pct(all, 99))
	fmt.Printf("  median of window p50s: agent pair %.0f us, sockperf %.1f us (difference %+.1f us)\n", a, b, a-b)
	return a, b, nil
}

// holdCPUsAwake asks the kernel for zero wake-up latency (PM QoS, as cyclictest does) until
// release: idle CPUs then poll instead of halting. A wake from halt costs this VM 50-100 us
// (sockperf's p50 across two CPUs: about 160 us halting, 100 us polling), varies with how
// long each CPU slept, and favours whichever tool keeps its CPU busier between messages;
// polling leaves the tools' own costs to compare.
func holdCPUsAwake() (release func(), err error) {
	f, err := os.OpenFile("/dev/cpu_dma_latency", os.O_WRONLY, 0)
	if err != nil {
		return nil, err
	}
	if _, err := f.Write([]byte{0, 0, 0, 0}); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() { _ = f.Close() }, nil
}

// pairCPUs returns two CPUs of this process's affinity to split each pair over, or nil.
func pairCPUs() []string {
	if _, err := exec.LookPath("taskset"); err != nil {
		return nil
	}
	out, err := exec.Command("taskset", "-c", "-p", strconv.Itoa(os.Getpid())).Output()
	if err != nil {
		return nil
	}
	// "pid 123's current affinity list: 0-3,6"
	list := strings.TrimSpace(string(out[bytes.LastIndexByte(out, ':')+1:]))
	var cpus []string
	for _, part := range strings.Split(list, ",") {
		lo, hi, found := strings.Cut(part, "-")
		a, err1 := strconv.Atoi(lo)
		b := a
		var err2 error
		if found {
			b, err2 = strconv.Atoi(hi)
		}
		if err1 != nil || err2 != nil {
			return nil
		}
		for c := a; c <= b && len(cpus) < 2; c++ {
			cpus = append(cpus, strconv.Itoa(c))
		}
	}
	if len(cpus) < 2 {
		return nil
	}
	return cpus
}

func median(xs []float64) float64 {
	xs = slices.Clone(xs)
	slices.Sort(xs)
	n := len(xs)
	if n == 0 {
		return -1
	}
	return (xs[(n-1)/2] + xs[n/2]) / 2
}

var benchLine = regexp.MustCompile(`([0-9.]+) B/sample\s+([0-9.]+) record-B`)

// recorderBytes runs the recorder's memory benchmark in the agents module: the heap bytes per
// buffered sample at the base workload and the production cut cadence, and the record size.
func recorderBytes(agentsDir string) (int, float64, error) {
	cmd := exec.Command("go", "test", "-run", "^$", "-bench", "BenchmarkRecorderBytesPerSample", "-benchtime", "1x", "./internal/probe/mesh/")
	cmd.Dir = agentsDir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, 0, fmt.Errorf("recorder benchmark: %v\n%s", err, out)
	}
	m := benchLine.FindStringSubmatch(string(out))
	if m == nil {
		return 0, 0, fmt.Errorf("recorder benchmark: unexpected output\n%s", out)
	}
	heap, _ := strconv.ParseFloat(m[1], 64)
	size, _ := strconv.ParseFloat(m[2], 64)
	return int(size), heap, nil
}

var p50Line = regexp.MustCompile(`percentile 50\.000 =\s+([0-9.]+)`)

type sockperfServer struct {
	bin, port string
	cmd       *exec.Cmd
	cpus      []string
}

// startSockperfServer runs a sockperf TCP server on a free loopback port, on cpus[1] if cpus
// is set (and its clients on cpus[0]).
func startSockperfServer(bin string, cpus []string) (*sockperfServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	srv := exec.Command(bin, "server", "--tcp", "-i", "127.0.0.1", "-p", port)
	if cpus != nil {
		srv = exec.Command("taskset", "-c", cpus[1], bin, "server", "--tcp", "-i", "127.0.0.1", "-p", port)
	}
	if err := srv.Start(); err != nil {
		return nil, fmt.Errorf("sockperf server: %w", err)
	}
	return &sockperfServer{bin: bin, port: port, cmd: srv, cpus: cpus}, nil
}

func (s *sockperfServer) stop() { _ = s.cmd.Process.Kill(); _ = s.cmd.Wait() }

// pingPong runs a full-RTT ping-pong client at rate msg/s for d and returns its p50.
func (s *sockperfServer) pingPong(payload int, rate float64, d time.Duration) (float64, error) {
	var out []byte
	var err error
	for attempt := 0; attempt < 20; attempt++ {
		args := []string{"ping-pong", "--tcp", "--full-rtt", "-m", strconv.Itoa(payload), "-i", "127.0.0.1",
			"-p", s.port, "-t", strconv.Itoa(max(1, int(d.Seconds()))), "--mps", strconv.Itoa(int(rate))}
		cli := exec.Command(s.bin, args...)
		if s.cpus != nil {
			cli = exec.Command("taskset", append([]string{"-c", s.cpus[0], s.bin}, args...)...)
		}
		out, err = cli.CombinedOutput()
		if m := p50Line.FindStringSubmatch(string(out)); m != nil {
			return strconv.ParseFloat(m[1], 64)
		}
		time.Sleep(100 * time.Millisecond) // the server may still be binding its port
	}
	return 0, fmt.Errorf("sockperf ping-pong: %v\n%s", err, out)
}

var profileAddr = func() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "127.0.0.1:0"
	}
	defer ln.Close()
	return ln.Addr().String()
}()

// saveProfile fetches a CPU profile of the first agent covering most of the window.
func saveProfile(window time.Duration) {
	secs := max(1, int(window.Seconds())-2)
	resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", profileAddr, secs))
	if err != nil {
		fmt.Fprintln(os.Stderr, "profile:", err)
		return
	}
	defer resp.Body.Close()
	f, err := os.Create(cpuProfile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "profile:", err)
		return
	}
	defer f.Close()
	_, _ = io.Copy(f, resp.Body)
}

// loadAvg is the 1-minute load average of the host.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	if f := strings.Fields(string(b)); len(f) > 0 {
		return f[0]
	}
	return "?"
}

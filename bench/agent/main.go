// Command agent-bench measures the Stormwatch agent at StormCloud's base workload (seed 003
// §4.1: 100 rounds/s, 1024-byte payloads, 8 nodes) on loopback, against an in-process fake
// ingest API so that only the agents are measured:
//
//	(a) 8 agents for -duration: CPU % of one core and RSS per agent, node-to-node RTT
//	    p50/p99/p99.99, bytes per buffered sample;
//	(b) 2 agents beside `sockperf ping-pong --tcp --full-rtt -m 1024` at the same rate: p50 of each.
package main

import (
	"bufio"
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

	"stormwatch/agents/fakeapi"
)

var cpuProfile, sendMode string

const enrollToken = "swe_benchbenchbenchbenchbenchbench00"

func main() {
	bin := flag.String("agent-bin", "agents/bin/stormwatch-agent", "agent binary")
	agentsDir := flag.String("agents-dir", "agents", "agents module (for the recorder memory benchmark)")
	n := flag.Int("n", 8, "agents in the mesh phase")
	rate := flag.Float64("rate", 100, "rounds per second")
	payload := flag.Int("payload", 1024, "payload bytes")
	duration := flag.Duration("duration", 60*time.Second, "measurement window of the mesh phase")
	pairDuration := flag.Duration("pair-duration", 30*time.Second, "measurement window of the pair phase")
	sockperf := flag.String("sockperf", "sockperf", "sockperf binary")
	flag.StringVar(&sendMode, "send-mode", "spread", "mesh.send_mode of the agents: spread or broadcast")
	flag.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the first mesh agent, taken during the window, to this file")
	flag.Parse()
	if err := run(*bin, *agentsDir, *n, *rate, *payload, *duration, *pairDuration, *sockperf); err != nil {
		fmt.Fprintln(os.Stderr, "agent-bench:", err)
		os.Exit(1)
	}
}

// fleet is a fake API with agent processes meshing through it.
type fleet struct {
	api     *fakeapi.Server
	srv     *http.Server
	url     string
	procs   []*exec.Cmd
	names   []string
	dir     string
	mu      sync.Mutex
	pairs   map[[2]string]bool
	rtts    []int64 // node-to-node (not self) RTTs in the window, microseconds
	selfRTT []int64
	lost    int
	ok      int
	collect atomic.Bool
}

func startFleet(bin string, n int, rate float64, payload int, tag string) (*fleet, error) {
	f := &fleet{api: fakeapi.New(enrollToken, rate, payload, 1000), pairs: map[[2]string]bool{}}
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
		cmd := exec.Command(bin, "run")
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
		if !f.collect.Load() {
			continue
		}
		if r.Status != 0 {
			f.lost++
			continue
		}
		f.ok++
		if r.Src == r.Dst {
			f.selfRTT = append(f.selfRTT, r.RTTUS)
		} else {
			f.rtts = append(f.rtts, r.RTTUS)
		}
	}
}

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

// cpuTicks is utime+stime of a process in clock ticks (/proc/<pid>/stat fields 14 and 15).
func cpuTicks(pid int) (int64, error) {
	u, s, err := cpuSplit(pid)
	return u + s, err
}

// cpuSplit is utime and stime of a process in clock ticks.
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

func run(bin, agentsDir string, n int, rate float64, payload int, duration, pairDuration time.Duration, sockperf string) error {
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("agent binary: %w (build it with make -C agents build)", err)
	}
	sizeof, heapB, err := recorderBytes(agentsDir)
	if err != nil {
		return err
	}
	fmt.Printf("buffered mesh sample: unsafe.Sizeof = %d B; heap per sample while buffering = %.2f B (StormCloud: 52 B)\n", sizeof, heapB)

	// (a) the mesh at the base workload
	fmt.Printf("phase a: %d agents, %.0f rounds/s, %d-byte payload, send mode %s, %v window\n", n, rate, payload, sendMode, duration)
	fa, err := startFleet(bin, n, rate, payload, "mesh")
	if err != nil {
		return err
	}
	defer fa.stop()
	if err := fa.waitMeshed(n, 60*time.Second); err != nil {
		return err
	}
	fa.api.SetPollS(30) // the default poll interval during the measurement
	time.Sleep(3 * time.Second)
	t0 := time.Now()
	ticks0 := make([]int64, n)
	sys0 := make([]int64, n)
	for i, p := range fa.procs {
		if ticks0[i], err = cpuTicks(p.Process.Pid); err != nil {
			return err
		}
		_, sys0[i], _ = cpuSplit(p.Process.Pid)
	}
	load0 := loadAvg()
	fa.collect.Store(true)
	if cpuProfile != "" {
		go saveProfile(duration)
	}
	time.Sleep(duration)
	elapsed := time.Since(t0).Seconds()
	var cpus, sysShare []float64
	var rss []int64
	for i, p := range fa.procs {
		t1, err := cpuTicks(p.Process.Pid)
		if err != nil {
			return err
		}
		_, s1, _ := cpuSplit(p.Process.Pid)
		cpus = append(cpus, float64(t1-ticks0[i])/clkTck/elapsed*100)
		sysShare = append(sysShare, float64(s1-sys0[i])/float64(max(t1-ticks0[i], 1))*100)
		rss = append(rss, rssKB(p.Process.Pid))
	}
	// Let the last batches (max_batch_age 500 ms) arrive before reading the RTTs.
	time.Sleep(2 * time.Second)
	fa.collect.Store(false)
	fa.mu.Lock()
	rtts := slices.Clone(fa.rtts)
	self := slices.Clone(fa.selfRTT)
	ok, lost := fa.ok, fa.lost
	fa.mu.Unlock()
	fa.stop()
	slices.Sort(rtts)
	slices.Sort(self)
	maxCPU, sumCPU := 0.0, 0.0
	for i, c := range cpus {
		fmt.Printf("  %s: cpu %.2f%% of a core (%.0f%% of it in the kernel), rss %d KiB\n", fa.names[i], c, sysShare[i], rss[i])
		maxCPU = max(maxCPU, c)
		sumCPU += c
	}
	fmt.Printf("  cpu per agent: mean %.2f%%, max %.2f%% of a core\n", sumCPU/float64(n), maxCPU)
	// The host is shared: its load moves these figures (a busy host even lowers the cost of a
	// wakeup), so runs are compared together with it.
	fmt.Printf("  host load average (1 min): %s at the start of the window, %s at its end\n", load0, loadAvg())
	fmt.Printf("  samples: %d ok, %d lost or failed\n", ok, lost)
	fmt.Printf("  node-to-node RTT (%d samples): p50 %d us, p99 %d us, p99.99 %d us, max %d us\n",
		len(rtts), pct(rtts, 50), pct(rtts, 99), pct(rtts, 99.99), pct(rtts, 100))
	fmt.Printf("  self-loop RTT (%d samples): p50 %d us, p99.99 %d us\n", len(self), pct(self, 50), pct(self, 99.99))
	if len(rtts) == 0 {
		return errors.New("no node-to-node samples were shipped")
	}

	// (b) a pair beside sockperf
	fmt.Printf("phase b: 2 agents and sockperf ping-pong --tcp --full-rtt -m %d at %.0f msg/s, %v window\n", payload, rate, pairDuration)
	fb, err := startFleet(bin, 2, rate, payload, "pair")
	if err != nil {
		return err
	}
	defer fb.stop()
	if err := fb.waitMeshed(2, 60*time.Second); err != nil {
		return err
	}
	fb.api.SetPollS(30)
	fb.collect.Store(true)
	sp50, err := runSockperf(sockperf, payload, rate, pairDuration)
	if err != nil {
		return err
	}
	time.Sleep(2 * time.Second)
	fb.collect.Store(false)
	fb.mu.Lock()
	pair := slices.Clone(fb.rtts)
	fb.mu.Unlock()
	fb.stop()
	slices.Sort(pair)
	fmt.Printf("  agent pair RTT (%d samples): p50 %d us, p99 %d us\n", len(pair), pct(pair, 50), pct(pair, 99))
	fmt.Printf("  sockperf full RTT: p50 %.1f us\n", sp50)
	fmt.Printf("agent: cpu %.2f%% of a core, %d B/sample, mesh p50 %d us, mesh p99.99 %d us, pair p50 %d us, sockperf p50 %.1f us\n",
		maxCPU, sizeof, pct(rtts, 50), pct(rtts, 99.99), pct(pair, 50), sp50)
	return nil
}

var benchLine = regexp.MustCompile(`([0-9.]+) B/sample\s+([0-9.]+) sizeof-B`)

// recorderBytes runs the recorder's memory benchmark in the agents module.
func recorderBytes(agentsDir string) (int, float64, error) {
	cmd := exec.Command("go", "test", "-run", "^$", "-bench", "BenchmarkRecorderBytesPerSample", "-benchtime", "1000000x", "./internal/probe/mesh/")
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

// runSockperf runs a sockperf TCP server and a full-RTT ping-pong client at rate msg/s.
func runSockperf(bin string, payload int, rate float64, d time.Duration) (float64, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	srv := exec.Command(bin, "server", "--tcp", "-i", "127.0.0.1", "-p", port)
	if err := srv.Start(); err != nil {
		return 0, fmt.Errorf("sockperf server: %w", err)
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	var out []byte
	for attempt := 0; attempt < 20; attempt++ {
		time.Sleep(100 * time.Millisecond) // the server needs a moment to bind; retried below
		cli := exec.Command(bin, "ping-pong", "--tcp", "--full-rtt", "-m", strconv.Itoa(payload), "-i", "127.0.0.1",
			"-p", port, "-t", strconv.Itoa(int(d.Seconds())), "--mps", strconv.Itoa(int(rate)))
		out, err = cli.CombinedOutput()
		if m := p50Line.FindStringSubmatch(string(out)); m != nil {
			return strconv.ParseFloat(m[1], 64)
		}
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

// Command throughput-bench runs the agent's TCP throughput probe and nuttcp (the tool of
// seed 004 §III-A, a reference only) in turns on loopback, with the two agents' mesh probe
// running all along, and prints
//
//	throughput: agent <x> Gbit/s, nuttcp <y> Gbit/s, ratio <r>, mesh p50 shift <d> us
//
// Two real agent processes enroll with an in-process fake API (stormwatch/agents/testbed/fakeapi),
// mesh with each other, and run the experiments it schedules for them (forward then reverse,
// -duration each, -streams TCP streams); nuttcp runs for -duration with as many streams. The
// agent's figure is the mean of every per-second sample the agents shipped (both directions),
// nuttcp's the mean of its reported rates. The mesh p50 shift is the agent-to-agent mesh RTT
// p50 while the agents' experiments run minus the p50 over idle windows of the same length
// just before them.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"time"

	"stormwatch/agents/testbed/fakeapi"
)

const enrollToken = "swe_benchbenchbenchbenchbenchbench00"

func main() {
	bin := flag.String("agent-bin", "agents/bin/stormwatch-agent", "agent binary")
	nuttcp := flag.String("nuttcp", "nuttcp", "nuttcp binary")
	rounds := flag.Int("rounds", 3, "turns of the agent and nuttcp")
	duration := flag.Int("duration", 10, "seconds of each run (the agent's experiment runs this long each way)")
	streams := flag.Int("streams", 4, "TCP streams of both tools")
	rate := flag.Float64("mesh-rate", 20, "mesh rounds per second")
	flag.Parse()
	if err := run(*bin, *nuttcp, *rounds, *duration, *streams, *rate); err != nil {
		fmt.Fprintln(os.Stderr, "throughput-bench:", err)
		os.Exit(1)
	}
}

type fleet struct {
	api   *fakeapi.Server
	url   string
	dir   string
	procs []*exec.Cmd
	ids   []string
}

func startFleet(bin string, rate float64) (*fleet, error) {
	f := &fleet{api: fakeapi.New(enrollToken, rate, 64, 1000)}
	f.api.SetShipper(20000, 1000)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f.url = "http://" + ln.Addr().String()
	go func() { _ = (&http.Server{Handler: f.api, ReadHeaderTimeout: 5 * time.Second}).Serve(ln) }()
	if f.dir, err = os.MkdirTemp("", "stormwatch-bench-throughput-"); err != nil {
		return nil, err
	}
	for _, name := range []string{"tput-a", "tput-b"} {
		logf, err := os.Create(filepath.Join(f.dir, name+".log"))
		if err != nil {
			return nil, err
		}
		cmd := exec.Command(bin, "run")
		cmd.Env = append(os.Environ(), "STORMWATCH_API_URL="+f.url, "STORMWATCH_ENROLLMENT_TOKEN="+enrollToken,
			"STORMWATCH_STATE_DIR="+filepath.Join(f.dir, name), "STORMWATCH_NAME="+name,
			"STORMWATCH_MESH_LISTEN=127.0.0.1:0", "STORMWATCH_THROUGHPUT_LISTEN=127.0.0.1:0",
			"STORMWATCH_METRICS_LISTEN=127.0.0.1:0", "STORMWATCH_METADATA_DETECT=false", "STORMWATCH_PROVIDER=local",
			"STORMWATCH_REGION=loopback", "STORMWATCH_ZONE=loopback-a", "STORMWATCH_LOG_LEVEL=warn")
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			f.stop()
			return nil, err
		}
		f.procs = append(f.procs, cmd)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		ids := f.api.AgentIDs()
		a, b := ids["tput-a"], ids["tput-b"]
		if a != "" && b != "" && f.api.ThroughputAddress(a) != "" && f.api.ThroughputAddress(b) != "" && f.meshed(a, b) {
			f.ids = []string{a, b}
			return f, nil
		}
		if time.Now().After(deadline) {
			f.stop()
			return nil, fmt.Errorf("the agents did not enroll, listen and mesh within a minute; logs in %s", f.dir)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (f *fleet) meshed(a, b string) bool {
	seen := map[[2]string]bool{}
	for _, r := range f.api.MeshRows() {
		if r.Status == 0 {
			seen[[2]string{r.Src, r.Dst}] = true
		}
	}
	return seen[[2]string{a, b}] && seen[[2]string{b, a}]
}

func (f *fleet) stop() {
	for _, p := range f.procs {
		_ = p.Process.Signal(os.Interrupt)
	}
	for _, p := range f.procs {
		_ = p.Wait()
	}
}

// meshRTTs returns the agent-to-agent RTTs (us) of probes sent in [from, to).
func (f *fleet) meshRTTs(from, to time.Time) []int64 {
	var out []int64
	for _, r := range f.api.MeshRows() {
		if r.Src != r.Dst && r.Status == 0 && r.TimeUS >= from.UnixMicro() && r.TimeUS < to.UnixMicro() {
			out = append(out, r.RTTUS)
		}
	}
	return out
}

// waitShipped waits until the mesh samples sent before t have reached the API.
func (f *fleet) waitShipped(t time.Time) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		n := 0
		for _, r := range f.api.MeshRows() {
			if r.Src != r.Dst && r.TimeUS >= t.UnixMicro() {
				n++
			}
		}
		if n >= 2 {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return errors.New("mesh samples stopped arriving")
}

func p50(xs []int64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return float64(s[len(s)/2])
	}
	return float64(s[len(s)/2-1]+s[len(s)/2]) / 2
}

// experiment schedules one TCP experiment and returns its per-second rates (bytes/s) and
// the time it ran.
func (f *fleet) experiment(round, seconds, streams int, lead time.Duration) (rates []float64, from, to time.Time, err error) {
	id := fmt.Sprintf("00000000-0000-4000-8000-%012d", round)
	start := time.Now().Add(lead).Truncate(time.Second)
	f.api.Schedule(fakeapi.Experiment{ID: id, InitiatorID: f.ids[0], ResponderID: f.ids[1], Proto: "tcp", StartAt: start,
		DurationS: seconds, Streams: streams, Token: "YmVuY2gtdG9rZW4tb2YtMzItYnl0ZXMtZm9yLXJ1bnM"})
	deadline := start.Add(time.Duration(2*seconds)*time.Second + 60*time.Second)
	for time.Now().Before(deadline) {
		var xs []fakeapi.ThroughputRow
		for _, r := range f.api.ThroughputRows() {
			if r.ExperimentID == id {
				xs = append(xs, r)
			}
		}
		if len(xs) == 2*seconds {
			from, to = time.UnixMicro(xs[0].TimeUS), time.UnixMicro(xs[0].TimeUS)
			for _, r := range xs {
				rates = append(rates, r.BytesPerS)
				if t := time.UnixMicro(r.TimeUS); t.Add(-time.Second).Before(from) {
					from = t.Add(-time.Second)
				} else if t.After(to) {
					to = t
				}
			}
			return rates, from, to, nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return nil, from, to, fmt.Errorf("experiment %d: samples missing; logs in %s", round, f.dir)
}

var mbps = regexp.MustCompile(`=\s*([0-9.]+) Mbps`)

// runNuttcp sends for seconds over streams streams to a nuttcp server on loopback and
// returns its rate in bytes/s.
func runNuttcp(ctx context.Context, bin string, ctl, data, seconds, streams int) (float64, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, err := exec.CommandContext(ctx, bin, "-T"+strconv.Itoa(seconds), "-N"+strconv.Itoa(streams),
			"-P"+strconv.Itoa(ctl), "-p"+strconv.Itoa(data), "127.0.0.1").CombinedOutput()
		if m := mbps.FindSubmatch(out); err == nil && m != nil {
			v, _ := strconv.ParseFloat(string(m[1]), 64)
			return v * 1e6 / 8, nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("nuttcp: %v: %s", err, out)
		}
		time.Sleep(200 * time.Millisecond) // the server may still be starting
	}
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

func run(bin, nuttcp string, rounds, seconds, streams int, rate float64) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ctl, err := freePort()
	if err != nil {
		return err
	}
	data, err := freePort()
	if err != nil {
		return err
	}
	srv := exec.CommandContext(ctx, nuttcp, "-S", "--nofork", "-P"+strconv.Itoa(ctl), "-p"+strconv.Itoa(data))
	if err := srv.Start(); err != nil {
		return fmt.Errorf("nuttcp server: %w", err)
	}
	defer func() { cancel(); _ = srv.Wait() }()

	f, err := startFleet(bin, rate)
	if err != nil {
		return err
	}
	defer f.stop()
	var agentRates, nuttcpRates []float64
	var idle, busy []int64
	for r := 1; r <= rounds; r++ {
		// The experiment starts after a quiet stretch as long as itself (config polls every
		// second), whose mesh RTTs are the baseline.
		quiet := time.Now()
		rates, from, to, err := f.experiment(r, seconds, streams, time.Duration(2*seconds+2)*time.Second)
		if err != nil {
			return err
		}
		if err := f.waitShipped(to.Add(time.Second)); err != nil {
			return err
		}
		roundIdle, roundBusy := f.meshRTTs(quiet.Add(time.Second), from), f.meshRTTs(from, to)
		idle, busy = append(idle, roundIdle...), append(busy, roundBusy...)
		agentRates = append(agentRates, rates...)
		n, err := runNuttcp(ctx, nuttcp, ctl, data, seconds, streams)
		if err != nil {
			return err
		}
		nuttcpRates = append(nuttcpRates, n)
		fmt.Printf("round %d: agent %.2f Gbit/s (%d seconds), nuttcp %.2f Gbit/s; mesh p50 idle %.0f us (%d RTTs), during the experiment %.0f us (%d)\n",
			r, mean(rates)*8/1e9, len(rates), n*8/1e9, p50(roundIdle), len(roundIdle), p50(roundBusy), len(roundBusy))
	}
	x, y := mean(agentRates)*8/1e9, mean(nuttcpRates)*8/1e9
	fmt.Printf("throughput: agent %.2f Gbit/s, nuttcp %.2f Gbit/s, ratio %.2f, mesh p50 shift %.0f us\n",
		x, y, x/y, p50(busy)-p50(idle))
	return nil
}

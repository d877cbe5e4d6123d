package main

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// StormCloud (seed 003's tool, UNH-CLT) run beside the agents at the same workload: its
// nodes echo and record, its master starts and stops an experiment. It is a reference
// only, built by run.sh outside the repository.

// scEpochUS is StormCloud's record epoch (2023-01-01T00:00:00Z in microseconds): its CSV
// start and end times count from it.
const scEpochUS = 1672531200000000

// scTimeoutMs is the communication timeout given to both tools (the fake API's timeout_ms).
const scTimeoutMs = 1000

type scFleet struct {
	node, master string
	dir, config  string
	procs        []*exec.Cmd
	exited       []chan struct{} // closed when the node's process has exited
	ids          []string
	window       int // experiments started so far: each writes its own CSV prefix
}

// startSC starts n StormCloud nodes on loopback ports, each in its own directory (a node
// writes its records under raw_data/ of its working directory), and writes the master's
// config for the workload.
func startSC(binDir string, n int, rate float64, payload int, window time.Duration) (*scFleet, error) {
	f := &scFleet{node: filepath.Join(binDir, "node"), master: filepath.Join(binDir, "master")}
	for _, b := range []string{f.node, f.master} {
		if _, err := os.Stat(b); err != nil {
			return nil, fmt.Errorf("StormCloud binary: %w (run.sh builds it)", err)
		}
	}
	var err error
	if f.dir, err = os.MkdirTemp("", "stormwatch-bench-sc-"); err != nil {
		return nil, err
	}
	addrs := make([]string, 0, n)
	for i := range n {
		id := fmt.Sprintf("1.%d", i+1)
		dir := filepath.Join(f.dir, id)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return nil, err
		}
		port, err := f.startNode(id, dir)
		if err != nil {
			return nil, err
		}
		f.ids = append(f.ids, id)
		addrs = append(addrs, fmt.Sprintf("%q: \"tcp://127.0.0.1:%d\"", id, port))
	}
	// Every row of a window stays in memory until the experiment stops, as StormCloud keeps
	// hours of rows before writing them out.
	rows := int(rate*float64(n)*(window.Seconds()+30)) + 1
	members := strings.Join(addrs, ", ")
	f.config = filepath.Join(f.dir, "config.json")
	cfg := fmt.Sprintf(`{"cluster_membership": {"private_address": {%s}, "public_address": {%s}},
 "testing_duration_minutes": 600, "payload_size": %d, "testing_rate_s": %d, "self_loop": true,
 "csv_prefix": "w%%d", "csv_row_output_limit": %d, "mem_row_output_limit": %d, "communication_timeout_ms": %d}
`, members, members, payload, int(rate), rows, rows, scTimeoutMs)
	return f, os.WriteFile(f.config, []byte(cfg), 0o644)
}

// startNode starts node id in dir on a free port and waits until it accepts connections.
// The port is free when picked but may be taken before the node binds it (the node then
// exits), so it tries again on another.
func (f *scFleet) startNode(id, dir string) (int, error) {
	var last string
	for range 5 {
		port, err := freePort()
		if err != nil {
			return 0, err
		}
		logPath := filepath.Join(dir, "log")
		logf, err := os.Create(logPath)
		if err != nil {
			return 0, err
		}
		cmd := exec.Command(f.node, "-id="+id, "-port="+strconv.Itoa(port), "-log_level=warning")
		cmd.Dir, cmd.Stdout, cmd.Stderr = dir, logf, logf
		if err := cmd.Start(); err != nil {
			logf.Close()
			return 0, err
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); logf.Close(); close(exited) }()
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		deadline := time.Now().Add(15 * time.Second)
		for time.Now().Before(deadline) {
			select {
			case <-exited:
				b, _ := os.ReadFile(logPath)
				last = fmt.Sprintf("node %s exited on port %d: %s", id, port, b)
				deadline = time.Time{}
				continue
			default:
			}
			if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
				c.Close()
				f.procs = append(f.procs, cmd)
				f.exited = append(f.exited, exited)
				return port, nil
			}
			time.Sleep(50 * time.Millisecond)
		}
		if last == "" {
			_ = cmd.Process.Kill()
			<-exited
			last = fmt.Sprintf("node %s did not listen on port %d", id, port)
		}
	}
	return 0, fmt.Errorf("StormCloud: %s", last)
}

// alive reports the nodes that have exited, with their logs.
func (f *scFleet) alive() error {
	for i, ch := range f.exited {
		select {
		case <-ch:
			b, _ := os.ReadFile(filepath.Join(f.dir, f.ids[i], "log"))
			return fmt.Errorf("StormCloud node %s exited: %s", f.ids[i], b)
		default:
		}
	}
	return nil
}

// begin starts an experiment on every node through the master; the nodes' listeners may
// still be coming up, so it retries until the master reports success.
func (f *scFleet) begin() error {
	f.window++
	cfg, err := os.ReadFile(f.config)
	if err != nil {
		return err
	}
	path := filepath.Join(f.dir, fmt.Sprintf("config-w%d.json", f.window))
	if err := os.WriteFile(path, []byte(strings.Replace(string(cfg), "w%d", fmt.Sprintf("w%d", f.window), 1)), 0o644); err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := f.runMaster("-start", "-config="+path)
		if err == nil {
			return nil
		}
		if aerr := f.alive(); aerr != nil {
			return aerr
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("StormCloud master -start: %v\n%s", err, out)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// runMaster runs the master once; it reports failure only in its log, so an ERROR line
// counts as one.
func (f *scFleet) runMaster(args ...string) ([]byte, error) {
	cmd := exec.Command(f.master, append(args, "-log_level=warning")...)
	cmd.Dir = f.dir
	out, err := cmd.CombinedOutput()
	if err == nil && strings.Contains(string(out), "ERROR") {
		err = errors.New("master logged an error")
	}
	return out, err
}

// end stops the experiment; each node then writes its rows out.
func (f *scFleet) end() error {
	if out, err := f.runMaster("-stop", "-config="+filepath.Join(f.dir, fmt.Sprintf("config-w%d.json", f.window))); err != nil {
		return fmt.Errorf("StormCloud master -stop: %v\n%s", err, out)
	}
	return nil
}

// records waits until every node has written the current experiment's CSV (a node flushes
// at its next tick after the stop) and returns the RTTs of the rows sent within
// [from, to): node-to-node and self-loop, sorted, in microseconds.
func (f *scFleet) records(from, to time.Time) (rtts, self []int64, err error) {
	a, b := from.UnixMicro()-scEpochUS, to.UnixMicro()-scEpochUS
	for _, id := range f.ids {
		path := filepath.Join(f.dir, id, "raw_data", fmt.Sprintf("w%d_%s_0.csv", f.window, id))
		if err := waitWritten(path, 30*time.Second); err != nil {
			return nil, nil, err
		}
		fh, err := os.Open(path)
		if err != nil {
			return nil, nil, err
		}
		sc := bufio.NewScanner(fh)
		sc.Scan() // header: thisNodeId,roundNumber,remoteNodeId,startTime,endTime
		for sc.Scan() {
			c := strings.Split(sc.Text(), ",")
			if len(c) != 5 {
				continue
			}
			start, _ := strconv.ParseInt(c[3], 10, 64)
			end, _ := strconv.ParseInt(c[4], 10, 64)
			switch {
			case start < a || start >= b:
			case c[0] == c[2]:
				self = append(self, end-start)
			default:
				rtts = append(rtts, end-start)
			}
		}
		fh.Close()
	}
	slices.Sort(rtts)
	slices.Sort(self)
	return rtts, self, nil
}

// waitWritten waits until path exists and its size has held for half a second.
func waitWritten(path string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	last, stable := int64(-1), 0
	for time.Now().Before(deadline) {
		if st, err := os.Stat(path); err == nil && st.Size() > 0 {
			if st.Size() == last {
				stable++
			} else {
				last, stable = st.Size(), 0
			}
			if stable >= 5 {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("StormCloud did not write %s within %v", path, timeout)
}

func (f *scFleet) stop() {
	for _, p := range f.procs {
		_ = p.Process.Signal(syscall.SIGTERM)
	}
	for i, p := range f.procs {
		select {
		case <-f.exited[i]:
		case <-time.After(5 * time.Second):
			_ = p.Process.Kill()
			<-f.exited[i]
		}
	}
	_ = os.RemoveAll(f.dir)
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// Command wanem is the demo fleet's user-space WAN emulator (this kernel has no netem): TCP
// proxies adding per-pair delay, jitter, tail spikes and steps between the demo agents, and a
// latency and bandwidth profile in front of each storage emulator. See docs/demo.md.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"stormwatch/agents/testbed/wanem"
)

func main() {
	cfgPath := flag.String("config", "", "emulator configuration (JSON)")
	flag.Parse()
	// Chunks due within the runtime timers' millisecond are awaited by goroutines that yield
	// (see Proxy.forward), and a P busy yielding does not poll the network: with one P per
	// core, a loaded fleet's replies waited for another P to go idle (cross-AZ 1.9 ms against
	// the table's 0.8 at load 10-16; 1.4 ms with spare Ps at load 9-10). Spare Ps keep reads prompt.
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(max(runtime.NumCPU(), spareProcs))
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	if err := run(*cfgPath, log); err != nil {
		fmt.Fprintln(os.Stderr, "wanem:", err)
		os.Exit(1)
	}
}

func run(path string, log *slog.Logger) error {
	if path == "" {
		return fmt.Errorf("-config is required")
	}
	cfg, err := wanem.LoadConfig(path)
	if err != nil {
		return err
	}
	table, err := wanem.DefaultTable()
	if err != nil {
		return err
	}
	if cfg.TableFile != "" {
		b, err := os.ReadFile(cfg.TableFile)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(b, &table); err != nil {
			return fmt.Errorf("%s: %w", cfg.TableFile, err)
		}
	}
	if err := cfg.Steps.Check(table); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	res := &wanem.APIResolver{URL: cfg.APIURL, APIKey: os.Getenv("STORMWATCH_WANEM_API_KEY")}
	em := wanem.New(cfg, table, res, log)
	st, err := em.Listen()
	if err != nil {
		return err
	}
	if cfg.StatusFile != "" {
		if err := wanem.WriteStatus(cfg.StatusFile, st); err != nil {
			return err
		}
	}
	log.Info("wanem listening", "mesh_routes", len(st.Mesh), "storage_endpoints", len(st.Storage), "steps", len(st.Steps))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return em.Serve(ctx)
}

// spareProcs is the emulator's least number of Ps (GOMAXPROCS), whatever the core count.
const spareProcs = 8

// Command shaper relays TCP and UDP to an upstream at a high rate that drops to a low rate
// after a set volume in each direction (testbed/shaper), for throughput tests and benches.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"stormwatch/agents/testbed/shaper"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	fs := flag.NewFlagSet("shaper", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:7711", "TCP and UDP listen address")
	upstream := fs.String("upstream", "", "TCP and UDP address to relay to (host:port)")
	high := fs.Float64("high-mbit", 850, "rate before the switch, Mbit/s per direction")
	low := fs.Float64("low-mbit", 400, "rate after the switch, Mbit/s per direction")
	after := fs.Int64("switch-after-bytes", 8<<30, "bytes per direction at the high rate")
	refill := fs.Duration("refill-after-idle", 0, "idle time after which a direction starts again at the high rate (0: never)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *upstream == "" {
		fmt.Fprintln(os.Stderr, "shaper: -upstream is required")
		return 2
	}
	s, err := shaper.Listen(shaper.Config{Listen: *listen, Upstream: *upstream, HighBytesPerS: *high * 1e6 / 8,
		LowBytesPerS: *low * 1e6 / 8, SwitchAfterBytes: *after, RefillAfterIdle: *refill})
	if err != nil {
		fmt.Fprintln(os.Stderr, "shaper:", err)
		return 1
	}
	fmt.Printf("shaper: %s -> %s, %.0f Mbit/s, then %.0f Mbit/s after %d bytes\n", s.Addr(), *upstream, *high, *low, *after)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	_ = s.Serve(ctx)
	for _, d := range []struct {
		name string
		dir  shaper.Direction
	}{{"up", shaper.Up}, {"down", shaper.Down}} {
		st := s.Stats(d.dir)
		fmt.Printf("shaper: %s %d bytes, switched at %v\n", d.name, st.Bytes, st.SwitchedAt)
	}
	return 0
}

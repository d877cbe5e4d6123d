//go:build linux

// Command linkem runs one delayed point-to-point Ethernet link between two network
// namespaces (testbed/linkem) until SIGTERM: routed test networks use it where a link needs
// a delay this kernel (no netem) cannot add. It prints "ready" once both ends exist.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"stormwatch/agents/testbed/linkem"
)

func main() {
	a := flag.String("a", "", "the first end's interface name")
	nsA := flag.String("ns-a", "", "the network namespace it goes to")
	b := flag.String("b", "", "the second end's interface name")
	nsB := flag.String("ns-b", "", "the network namespace it goes to")
	delay := flag.Duration("delay", 0, "one-way delay, each direction")
	flag.Parse()
	if *a == "" || *b == "" {
		fmt.Fprintln(os.Stderr, "linkem: -a and -b are required")
		os.Exit(2)
	}
	l, err := linkem.Open(*a, *nsA, *b, *nsB, *delay)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	fmt.Println("ready")
	l.Run(ctx)
	_ = l.Close()
}

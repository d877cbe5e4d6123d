package main

import (
	"os"
	"runtime"
)

// One P by default: the mesh needs a fraction of a core, and a second P only adds scheduler
// hand-offs (an idle thread woken to spin for every goroutine the netpoller readies). On 8
// loopback agents at 100 rounds/s with 1024-byte payloads this took the CPU per agent from
// about 6.4% to 5.6% of a core. GOMAXPROCS in the environment still decides.
func init() {
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
}

//go:build linux

// Package linkem is a point-to-point Ethernet link with a one-way delay, in user space, for
// routed test networks on a kernel without netem: two TAP devices, each moved into the
// network namespace of one end, and every frame read from one is written to the other once
// the delay has passed. Routers and hosts on either side see an ordinary interface; TTLs,
// ICMP and routing are the kernel's, untouched (the frames are Ethernet, below IP).
package linkem

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Link is a delayed wire between two TAP devices.
type Link struct {
	Delay time.Duration // one way, each direction
	a, b  int           // the devices' file descriptors
	wg    sync.WaitGroup
}

// Open creates TAP devices nameA and nameB in this process's namespace and moves each into
// its namespace (an empty name keeps it here). Close (or the process's exit) removes them.
func Open(nameA, nsA, nameB, nsB string, delay time.Duration) (*Link, error) {
	a, err := tap(nameA)
	if err != nil {
		return nil, err
	}
	b, err := tap(nameB)
	if err != nil {
		unix.Close(a)
		return nil, err
	}
	for _, m := range [][2]string{{nameA, nsA}, {nameB, nsB}} {
		if m[1] == "" {
			continue
		}
		if out, err := exec.Command("ip", "link", "set", m[0], "netns", m[1]).CombinedOutput(); err != nil {
			unix.Close(a)
			unix.Close(b)
			return nil, fmt.Errorf("linkem: move %s to %s: %v: %s", m[0], m[1], err, out)
		}
	}
	return &Link{Delay: delay, a: a, b: b}, nil
}

func tap(name string) (int, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("linkem: open /dev/net/tun: %w", err)
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return -1, err
	}
	ifr.SetUint16(unix.IFF_TAP | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("linkem: create tap %s: %w", name, err)
	}
	return fd, nil
}

// Run relays frames both ways until ctx ends.
func (l *Link) Run(ctx context.Context) {
	l.wg.Add(2)
	go func() { defer l.wg.Done(); l.relay(ctx, l.a, l.b) }()
	go func() { defer l.wg.Done(); l.relay(ctx, l.b, l.a) }()
	l.wg.Wait()
}

// Close removes both devices; call it after Run has returned.
func (l *Link) Close() error {
	return errors.Join(unix.Close(l.a), unix.Close(l.b))
}

type frame struct {
	b   []byte
	due time.Time
}

// Each direction of a link is one thread that waits in the kernel (ppoll with the time to the
// next frame's due), not on the runtime's timers, poller or channels: on a loaded two-core
// machine those woke the relay milliseconds late (a 4-hop trace of 20 ms came out at 24 ms,
// and with a channel between reader and writer threads once at 38 ms), which is this
// machine's scheduling, not the link. The thread is locked and, where the process may
// (root), real-time (SCHED_FIFO), so a frame is served when due. It spins at most spinFor
// before a due time and otherwise sleeps in the kernel, so it cannot starve the machine (and
// the kernel keeps 5% of each second for other tasks anyway).
const (
	spinFor    = 50 * time.Microsecond
	idleWait   = 100 * time.Millisecond // how often an idle direction looks at ctx
	rtPrio     = 10
	queueLimit = 1024 // frames waiting in one direction before new ones drop
)

func (l *Link) relay(ctx context.Context, src, dst int) {
	runtime.LockOSThread() // never unlocked: the runtime retires the thread when relay returns
	_ = unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO,
		Priority: rtPrio}, 0)
	var q []frame
	pfd := []unix.PollFd{{Fd: int32(src), Events: unix.POLLIN}}
	for ctx.Err() == nil {
		wait := idleWait
		if len(q) > 0 {
			wait = max(time.Until(q[0].due)-spinFor, 0)
		}
		ts := unix.NsecToTimespec(wait.Nanoseconds())
		n, err := unix.Ppoll(pfd, &ts, nil)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return
		}
		if n > 0 && pfd[0].Revents&unix.POLLIN != 0 {
			b := make([]byte, 65536)
			if m, err := unix.Read(src, b); err == nil && len(q) < queueLimit {
				q = append(q, frame{b[:m], time.Now().Add(l.Delay)})
			}
		}
		for len(q) > 0 && time.Until(q[0].due) <= spinFor {
			for time.Now().Before(q[0].due) {
			}
			_, _ = unix.Write(dst, q[0].b) // a device that is down drops the frame, as a wire would
			q[0] = frame{}
			q = q[1:]
		}
	}
}

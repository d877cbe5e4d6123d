package throughput

import (
	"errors"
	"net"
	"runtime"
	"syscall"
	"time"
)

// The data plane can yield the CPU to the mesh probe beside it: each TCP stream is moved to
// a blocking socket driven by a thread of its own, at the manager's nice value.

// niceThread pins the calling goroutine to its thread and sets that thread's nice value; the
// returned func sets it back and hands the thread back to the runtime, or, where lowering a
// nice value is not permitted, leaves it locked so that the runtime discards it.
func niceThread(nice int) (restore func()) {
	runtime.LockOSThread()
	tid := syscall.Gettid()
	if nice == 0 || syscall.Setpriority(syscall.PRIO_PROCESS, tid, nice) != nil {
		return runtime.UnlockOSThread
	}
	return func() {
		if syscall.Setpriority(syscall.PRIO_PROCESS, tid, 0) == nil {
			runtime.UnlockOSThread()
		}
	}
}

// blockingFD returns a duplicate of c's socket in blocking mode, which only this stream's
// thread uses from then on; ok is false for anything but a TCP connection.
func blockingFD(c net.Conn) (fd int, ok bool) {
	tc, isTCP := c.(*net.TCPConn)
	if !isTCP {
		return 0, false
	}
	sc, err := tc.SyscallConn()
	if err != nil {
		return 0, false
	}
	fd = -1
	if err := sc.Control(func(raw uintptr) { fd, _ = syscall.Dup(int(raw)) }); err != nil || fd < 0 {
		return 0, false
	}
	if err := syscall.SetNonblock(fd, false); err != nil {
		syscall.Close(fd)
		return 0, false
	}
	return fd, true
}

// writeStream writes until the connection is shut down under it.
func writeStream(c net.Conn, nice int) {
	fd, ok := blockingFD(c)
	if !ok {
		writeStreamPolled(c)
		return
	}
	defer syscall.Close(fd)
	defer niceThread(nice)()
	for {
		if _, err := syscall.Write(fd, sharedPayload); err != nil && !errors.Is(err, syscall.EINTR) {
			return
		}
	}
}

// readStream counts what arrives until the connection ends.
func readStream(c net.Conn, rx *meter, nice int) {
	fd, ok := blockingFD(c)
	if !ok {
		readStreamPolled(c, rx)
		return
	}
	defer syscall.Close(fd)
	defer niceThread(nice)()
	buf := make([]byte, streamBufBytes)
	for {
		n, err := syscall.Read(fd, buf)
		if err != nil && errors.Is(err, syscall.EINTR) {
			continue
		}
		if n <= 0 || err != nil {
			return
		}
		rx.addTCP(n, time.Now())
	}
}

package mesh

import (
	"io"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// rawConn reads and writes a connection's non-blocking socket with raw system calls and waits
// in the netpoller as net.Conn does. A raw call skips the runtime's syscall entry and exit;
// entering one wakes the runtime's monitor thread from its idle sleep into a run of 20 us
// sleeps, which at a few thousand socket calls a second cost more CPU than the calls. The
// socket never blocks, so each call lasts as long as the copy.
type rawConn struct {
	c  net.Conn
	rc syscall.RawConn

	wbuf    []byte
	wn      int
	werr    syscall.Errno
	writeFn func(uintptr) bool
	tryFn   func(uintptr)
}

func newRawConn(c net.Conn) (*rawConn, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return &rawConn{c: c}, nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil, err
	}
	r := &rawConn{c: c, rc: rc}
	r.writeFn, r.tryFn = r.doWrite, r.doTry
	return r, nil
}

// loop reads until consume or the connection fails. It stays inside one RawConn.Read: when a
// read leaves the socket empty (it returned less than it could take), the next wait goes to
// the netpoller without the read that would only return EAGAIN, which a bufio fill or a new
// Read call (it forgets readiness seen before it) would cost on every frame.
func (f *frameReader) loop(consume consumeFunc) error {
	if f.r.rc == nil {
		return f.readLoop(f.r.c.Read, consume)
	}
	var rerr, cerr error
	drained := false
	err := f.r.rc.Read(func(fd uintptr) bool {
		for {
			if drained {
				drained = false
				return false
			}
			room := len(f.buf) - f.n
			n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&f.buf[f.n])), uintptr(room))
			switch e {
			case 0:
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				return false
			default:
				rerr = os.NewSyscallError("read", e)
				return true
			}
			if n == 0 {
				rerr = io.EOF
				return true
			}
			now := time.Now()
			drained = int(n) < room
			f.n += int(n)
			if cerr = f.feed(consume, now); cerr != nil {
				return true
			}
		}
	})
	switch {
	case err != nil:
		return err
	case rerr != nil:
		return rerr
	}
	return cerr
}

func (r *rawConn) doWrite(fd uintptr) bool {
	for r.wn < len(r.wbuf) {
		n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&r.wbuf[r.wn])), uintptr(len(r.wbuf)-r.wn))
		switch e {
		case 0:
			r.wn += int(n)
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false // wait until writable, or until the write deadline
		default:
			r.werr = e
			return true
		}
	}
	return true
}

// doTry writes what the socket takes now; Control cannot wait for writability.
func (r *rawConn) doTry(fd uintptr) { r.doWrite(fd) }

// Write writes all of p; it honours the connection's write deadline.
func (r *rawConn) Write(p []byte) (int, error) { return r.write(p, true) }

// tryWrite writes as much of p as the socket takes now and never waits: a full socket
// returns fewer bytes and no error. One goroutine at a time may write.
func (r *rawConn) tryWrite(p []byte) (int, error) { return r.write(p, false) }

func (r *rawConn) write(p []byte, wait bool) (int, error) {
	if r.rc == nil {
		return r.c.Write(p)
	}
	if len(p) == 0 {
		return 0, nil
	}
	r.wbuf, r.wn, r.werr = p, 0, 0
	var err error
	if wait {
		err = r.rc.Write(r.writeFn)
	} else {
		err = r.rc.Control(r.tryFn)
	}
	r.wbuf = nil
	switch {
	case err != nil:
		return r.wn, err
	case r.werr != 0:
		return r.wn, os.NewSyscallError("write", r.werr)
	}
	return r.wn, nil
}

// shutdown ends both directions of the connection without waiting for calls in progress:
// the reader sees the end of the stream and closes it.
func (r *rawConn) shutdown() {
	if r.rc == nil {
		shutdownConn(r.c)
		return
	}
	_ = r.rc.Control(func(fd uintptr) { _ = syscall.Shutdown(int(fd), syscall.SHUT_RDWR) })
}

func (r *rawConn) Close() error                       { return r.c.Close() }
func (r *rawConn) SetWriteDeadline(t time.Time) error { return r.c.SetWriteDeadline(t) }

// ticker calls a step function at the times it asks for, waiting on a timerfd in the
// netpoller instead of a runtime timer: the monitor thread also wakes for every runtime timer
// that expires. It falls back to a runtime timer when the timerfd fails.
type ticker struct {
	f      *os.File
	rc     syscall.RawConn
	fb     *timerSleeper
	closed atomic.Bool
}

type itimerspec struct {
	interval syscall.Timespec
	value    syscall.Timespec
}

const clockMonotonic = 1

func newTicker() *ticker {
	t := &ticker{fb: newTimerSleeper()}
	fd, _, e := syscall.RawSyscall(syscall.SYS_TIMERFD_CREATE, clockMonotonic, syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if e != 0 {
		return t
	}
	f := os.NewFile(fd, "timerfd")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return t
	}
	t.f, t.rc = f, rc
	return t
}

// run calls step until it returns a negative duration or the ticker is closed; step returns
// how long to wait before its next call. Like frameReader.loop it stays inside one
// RawConn.Read, so a wakeup costs one timerfd_settime: the expiry is not read, since the
// netpoller's edge-triggered registration reports every expiry and timerfd_settime clears
// the count, and a wakeup before the time asked for (the edge of an expiry already
// handled) waits again.
func (t *ticker) run(step func(now time.Time) time.Duration) {
	if t.rc == nil {
		t.runFallback(step)
		return
	}
	var spec itimerspec
	var serr syscall.Errno
	var due time.Time
	stopped := false
	err := t.rc.Read(func(fd uintptr) bool {
		now := time.Now()
		if now.Before(due) {
			return false
		}
		for {
			d := step(now)
			if d < 0 {
				stopped = true
				return true
			}
			if d == 0 {
				now = time.Now()
				continue
			}
			spec.value = syscall.NsecToTimespec(int64(d))
			_, _, serr = syscall.RawSyscall6(syscall.SYS_TIMERFD_SETTIME, fd, 0, uintptr(unsafe.Pointer(&spec)), 0, 0, 0)
			if serr != 0 {
				return true
			}
			// The expiry comes at least d after this call, so no earlier than now+d.
			due = now.Add(d)
			return false
		}
	})
	if stopped || t.closed.Load() {
		return
	}
	if err != nil || serr != 0 {
		t.runFallback(step)
	}
}

// Close ends a run in progress and every later one.
func (t *ticker) Close() {
	t.closed.Store(true)
	t.fb.Close()
	if t.f != nil {
		t.f.Close()
	}
}

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

	rbuf   []byte
	rn     int
	rerr   syscall.Errno
	readFn func(uintptr) bool

	wbuf    []byte
	wn      int
	werr    syscall.Errno
	writeFn func(uintptr) bool
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
	r.readFn, r.writeFn = r.doRead, r.doWrite
	return r, nil
}

func (r *rawConn) doRead(fd uintptr) bool {
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&r.rbuf[0])), uintptr(len(r.rbuf)))
		switch e {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false // wait in the netpoller until the socket is readable
		case 0:
			r.rn, r.rerr = int(n), 0
		default:
			r.rn, r.rerr = 0, e
		}
		return true
	}
}

func (r *rawConn) Read(p []byte) (int, error) {
	if r.rc == nil {
		return r.c.Read(p)
	}
	if len(p) == 0 {
		return 0, nil
	}
	r.rbuf = p
	err := r.rc.Read(r.readFn)
	r.rbuf = nil
	switch {
	case err != nil:
		return 0, err
	case r.rerr != 0:
		return 0, os.NewSyscallError("read", r.rerr)
	case r.rn == 0:
		return 0, io.EOF
	}
	return r.rn, nil
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

// Write writes all of p; it honours the connection's write deadline.
func (r *rawConn) Write(p []byte) (int, error) {
	if r.rc == nil {
		return r.c.Write(p)
	}
	if len(p) == 0 {
		return 0, nil
	}
	r.wbuf, r.wn, r.werr = p, 0, 0
	err := r.rc.Write(r.writeFn)
	r.wbuf = nil
	switch {
	case err != nil:
		return r.wn, err
	case r.werr != 0:
		return r.wn, os.NewSyscallError("write", r.werr)
	}
	return r.wn, nil
}

func (r *rawConn) Close() error                       { return r.c.Close() }
func (r *rawConn) SetWriteDeadline(t time.Time) error { return r.c.SetWriteDeadline(t) }
func (r *rawConn) RemoteAddr() net.Addr               { return r.c.RemoteAddr() }

// sleeper waits for the next send on a timerfd in the netpoller instead of a runtime timer:
// the monitor thread also wakes for every runtime timer that expires, which would double the
// wakeups of a mesh sending hundreds of messages a second. It falls back to a runtime timer
// when the timerfd fails.
type sleeper struct {
	f      *os.File
	rc     syscall.RawConn
	spec   itimerspec
	serr   syscall.Errno
	setFn  func(uintptr)
	readFn func(uintptr) bool
	buf    [8]byte
	useFB  bool // only the sleeping goroutine touches it
	fb     *timerSleeper
	closed atomic.Bool
}

type itimerspec struct {
	interval syscall.Timespec
	value    syscall.Timespec
}

const clockMonotonic = 1

func newSleeper() *sleeper {
	s := &sleeper{fb: newTimerSleeper(), useFB: true}
	fd, _, e := syscall.RawSyscall(syscall.SYS_TIMERFD_CREATE, clockMonotonic, syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if e != 0 {
		return s
	}
	f := os.NewFile(fd, "timerfd")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return s
	}
	s.f, s.rc, s.useFB = f, rc, false
	s.setFn, s.readFn = s.doSet, s.doRead
	return s
}

func (s *sleeper) doSet(fd uintptr) {
	_, _, s.serr = syscall.RawSyscall6(syscall.SYS_TIMERFD_SETTIME, fd, 0, uintptr(unsafe.Pointer(&s.spec)), 0, 0, 0)
}

func (s *sleeper) doRead(fd uintptr) bool {
	_, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&s.buf[0])), 8)
	return e != syscall.EAGAIN
}

// sleep waits d; it returns an error at once when the sleeper is closed.
func (s *sleeper) sleep(d time.Duration) error {
	if !s.useFB {
		if d <= 0 {
			return nil
		}
		s.spec.value = syscall.NsecToTimespec(int64(d))
		err := s.rc.Control(s.setFn)
		if err == nil && s.serr == 0 {
			err = s.rc.Read(s.readFn)
		}
		if (err == nil && s.serr == 0) || s.closed.Load() {
			return err
		}
		s.useFB = true
	}
	return s.fb.sleep(d)
}

// Close ends a sleep in progress and every later one.
func (s *sleeper) Close() {
	s.closed.Store(true)
	s.fb.Close()
	if s.f != nil {
		s.f.Close()
	}
}

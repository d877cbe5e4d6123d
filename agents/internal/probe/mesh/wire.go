// Package mesh measures round-trip times between agents with the TCP echo mesh of seed 003
// (StormCloud, "Cloudy Forecast" §3): every agent sends rounds to every peer, itself
// included, over long-lived TCP connections with TCP_NODELAY, and echoes what it receives.
package mesh

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Frame layout (big endian): magic u32 | payload length u32 | round u64 | id [16] | payload.
// A message is an "SWM1" frame carrying the sender's id. The top bit of its round field
// (askID) asks the echo server to prove who it is: its reply is then the same frame as an
// "SWM2" frame carrying the responder's id instead. Any other frame, and every frame at an
// echo server that knows no id, comes back byte for byte: an agent of the previous version
// echoes asked frames that way too, which the prober accepts as an unverified reply.
const (
	headerLen       = 32
	frameMagic      = 0x53574d31 // "SWM1": a message, or an echo that proves nothing
	replyMagic      = 0x53574d32 // "SWM2": an echo carrying the responder's id
	askID           = uint64(1) << 63
	maxPayloadBytes = 16 << 20
)

// senderBytes turns an agent id into the 16 bytes carried in every frame: the UUID itself when
// the id is one, otherwise a hash of it.
func senderBytes(id string) [16]byte {
	var out [16]byte
	if b, err := hex.DecodeString(strings.ReplaceAll(id, "-", "")); err == nil && len(b) == 16 {
		copy(out[:], b)
		return out
	}
	h := sha256.Sum256([]byte(id))
	copy(out[:], h[:16])
	return out
}

func putHeader(b []byte, payload int, round uint64, sender [16]byte) {
	binary.BigEndian.PutUint32(b[0:4], frameMagic)
	binary.BigEndian.PutUint32(b[4:8], uint32(payload))
	binary.BigEndian.PutUint64(b[8:16], round)
	copy(b[16:32], sender[:])
}

// EchoServer answers every frame it receives with the same bytes on the same connection,
// signed with its agent's id when the sender asks for it.
type EchoServer struct {
	ln  net.Listener
	log *slog.Logger
	id  atomic.Pointer[[16]byte] // nil until SetID: asked frames come back as they are
	wg  sync.WaitGroup
	mu  sync.Mutex
	cs  map[net.Conn]struct{}
}

// SetID is the agent id the server puts in the replies that ask for it; set it before Serve.
func (s *EchoServer) SetID(id string) {
	b := senderBytes(id)
	s.id.Store(&b)
}

// Listen opens the echo listener on addr (e.g. ":7300" or "127.0.0.1:0").
func Listen(addr string, log *slog.Logger) (*EchoServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &EchoServer{ln: ln, log: log, cs: map[net.Conn]struct{}{}}, nil
}

// Addr is the address the server listens on.
func (s *EchoServer) Addr() net.Addr { return s.ln.Addr() }

// Serve accepts connections until ctx ends, then closes every connection.
func (s *EchoServer) Serve(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { s.ln.Close() })
	defer stop()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			s.closeAll()
			s.wg.Wait()
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(true)
		}
		rc, err := newRawConn(c)
		if err != nil {
			c.Close()
			continue
		}
		s.mu.Lock()
		s.cs[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go s.echo(c, rc)
	}
}

// Close stops the listener and every connection.
func (s *EchoServer) Close() error {
	err := s.ln.Close()
	s.closeAll()
	return err
}

func (s *EchoServer) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.cs {
		c.Close()
	}
}

var errBadFrame = errors.New("mesh echo: bad frame")

// echo answers frames as they arrive: all complete frames of one read go back in one write,
// made from inside the read loop without waiting; only a full socket makes it wait.
func (s *EchoServer) echo(c net.Conn, rc *rawConn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.cs, c)
		s.mu.Unlock()
		c.Close()
	}()
	fr := newFrameReader(rc, 16<<10)
	var pending []byte
	consume := func(b []byte, _ time.Time) (int, int, error) {
		used, need := 0, 0
		var err error
		for {
			if len(b)-used < headerLen {
				need = headerLen
				break
			}
			h := b[used : used+headerLen]
			n := int(binary.BigEndian.Uint32(h[4:8]))
			if binary.BigEndian.Uint32(h[0:4]) != frameMagic || n > maxPayloadBytes {
				s.log.Debug("mesh echo: bad frame, closing", "remote", c.RemoteAddr())
				err = errBadFrame
				break
			}
			if len(b)-used < headerLen+n {
				need = headerLen + n
				break
			}
			if id := s.id.Load(); id != nil && binary.BigEndian.Uint64(h[8:16])&askID != 0 {
				// Signed in place: the bytes go back from this buffer and are consumed.
				binary.BigEndian.PutUint32(h[0:4], replyMagic)
				copy(h[16:32], id[:])
			}
			used += headerLen + n
		}
		if used > 0 {
			w, werr := rc.tryWrite(b[:used])
			switch {
			case werr != nil:
				return used, need, werr
			case w < used:
				pending = append(pending[:0], b[w:used]...)
				return used, need, errWouldBlock
			}
		}
		return used, need, err
	}
	for {
		err := fr.loop(consume)
		if err != errWouldBlock {
			return
		}
		if _, err := rc.Write(pending); err != nil {
			return
		}
	}
}

var errWouldBlock = errors.New("mesh: socket full")

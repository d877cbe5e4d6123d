package mesh

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"sync"
	"time"

	"stormwatch/agents/internal/sample"
)

// identityLogEvery bounds the log lines about one peer's replies to one a minute: a wrong
// address answers every round.
const identityLogEvery = time.Minute

// echoCheck is what one echo proves.
type echoCheck struct {
	st         sample.Status // ok, corrupt (reset the connection when framing is lost) or wrong peer
	unverified bool          // ok from an echo server that does not sign (previous version)
	resync     bool          // the header is not a frame: framing is lost
	from       [16]byte      // the id the reply carries
}

// checkEcho compares an echo with the message of round sent to peer: an SWM2 reply must
// carry peer's id, an SWM1 reply must be the message itself, and the rest must match.
func checkEcho(f []byte, size int, round uint64, self, peer [16]byte, payload []byte) echoCheck {
	var c echoCheck
	copy(c.from[:], f[16:32])
	magic := binary.BigEndian.Uint32(f[0:4])
	if magic != frameMagic && magic != replyMagic {
		return echoCheck{st: sample.StatusCorrupt, resync: true}
	}
	if binary.BigEndian.Uint32(f[4:8]) != uint32(size) || binary.BigEndian.Uint64(f[8:16]) != round|askID ||
		!bytes.Equal(f[headerLen:], payload) {
		c.st = sample.StatusCorrupt
		return c
	}
	switch {
	case magic == frameMagic && c.from == self:
		c.st, c.unverified = sample.StatusOK, true
	case magic == frameMagic:
		c.st = sample.StatusCorrupt
	case c.from != peer:
		c.st = sample.StatusWrongPeer
	default:
		c.st = sample.StatusOK
	}
	return c
}

// identityLog writes at most one line per peer and kind a minute about replies that do not
// prove their peer.
type identityLog struct {
	mu   sync.Mutex
	last map[string]time.Time // peer id + kind -> last line
}

func (g *identityLog) due(key string, now time.Time) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.last == nil {
		g.last = map[string]time.Time{}
	}
	if t, ok := g.last[key]; ok && now.Sub(t) < identityLogEvery {
		return false
	}
	g.last[key] = now
	return true
}

// noteEcho logs a reply that does not prove its peer, rate-limited per peer.
func (l *link) noteEcho(c echoCheck, now time.Time) {
	p := l.p
	switch {
	case c.st == sample.StatusWrongPeer:
		p.wrongPeer.Add(1)
		if p.idLog.due(l.peer.ID+"/wrong", now) {
			p.log.Warn("mesh reply from another agent than the peer: its address leads elsewhere; rounds are losses (wrong_peer)",
				"peer", l.peer.Name, "peer_id", l.peer.ID, "address", l.peer.Address, "answered_by", formatID(c.from),
				"wrong_peer_replies", p.wrongPeer.Load())
		}
	case c.unverified:
		p.unverified.Add(1)
		if p.idLog.due(l.peer.ID+"/unverified", now) {
			p.log.Info("mesh peer echoes without its id (previous agent version): replies accepted unverified",
				"peer", l.peer.Name, "peer_id", l.peer.ID, "address", l.peer.Address,
				"unverified_replies", p.unverified.Load())
		}
	}
}

// formatID shows 16 id bytes as the UUID they usually are.
func formatID(b [16]byte) string {
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

package mesh

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"stormwatch/agents/internal/sample"
	"stormwatch/agents/internal/testutil"
)

const (
	peerX = "00000000-0000-4000-8000-0000000000b1"
	peerY = "00000000-0000-4000-8000-0000000000b2"
)

// lockedBuf is the shared test log sink.
type lockedBuf = testutil.LogBuffer

// servedEcho runs a real echo server on loopback signing with id ("" signs nothing, as the
// previous version).
func servedEcho(t *testing.T, id string) *EchoServer {
	t.Helper()
	srv := startEcho(t, "127.0.0.1:0")
	if id != "" {
		srv.SetID(id)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return srv
}

func TestAnEchoProvesWhichPeerAnswered(t *testing.T) {
	tests := []struct {
		name       string
		signer     string // the id the echo server at the peer's address signs with
		want       sample.Status
		unverified bool
	}{
		{"signed by the peer dialled", peerX, sample.StatusOK, false},
		{"signed by another agent", peerY, sample.StatusWrongPeer, false},
		{"unsigned, from an agent of the previous version", "", sample.StatusOK, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := servedEcho(t, tc.signer)
			logs := &lockedBuf{}
			rec := NewRecorder()
			col := &collector{rec: rec}
			p := NewProber("00000000-0000-4000-8000-0000000000a9", rec, slog.New(slog.NewTextHandler(logs, nil)))
			p.Apply(settings(50, 64, 2*time.Second, []Peer{{ID: peerX, Name: "x", Address: srv.Addr().String()}}, nil))
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); _ = p.Run(ctx) }()
			defer func() { cancel(); <-done }()
			waitFor(t, "20 samples of "+tc.want.String(), 20*time.Second, func() bool {
				return col.count(func(s flat) bool { return s.status == tc.want }) >= 20
			})
			if n := col.count(func(s flat) bool { return s.status != tc.want }); n != 0 {
				t.Fatalf("%d samples are not %s", n, tc.want)
			}
			switch tc.want {
			case sample.StatusOK:
				if n := col.count(func(s flat) bool { return s.rttUS == 0 }); n != 0 {
					t.Fatalf("%d ok samples have no RTT", n)
				}
			default:
				if n := col.count(func(s flat) bool { return s.rttUS != 0 }); n != 0 {
					t.Fatalf("%d %s samples carry an RTT", n, tc.want)
				}
				if got := p.WrongPeerReplies(); got < 20 {
					t.Fatalf("%d wrong-peer replies counted, want at least 20", got)
				}
				// One line a minute per peer however many rounds answer wrong.
				if n := strings.Count(logs.String(), "mesh reply from another agent"); n != 1 {
					t.Fatalf("%d wrong-peer log lines for one peer within a minute, want 1:\n%s", n, logs.String())
				}
				if !strings.Contains(logs.String(), "answered_by="+peerY) {
					t.Fatalf("the log does not name who answered:\n%s", logs.String())
				}
			}
			if got := p.UnverifiedReplies() > 0; got != tc.unverified {
				t.Fatalf("unverified replies counted: %v, want %v", got, tc.unverified)
			}
		})
	}
}

// The ghost: an enrolled peer whose address is loopback, so every agent that dials it
// reaches its own echo server. No agent may record an RTT for it.
func TestAGhostPeerOnLoopbackGetsNoRTTFromAnyAgent(t *testing.T) {
	agents, peers := meshOf(t, 3, 50, 256, 2*time.Second, nil)
	const ghost = "00000000-0000-4000-8000-00000000dead"
	withGhost := append(append([]Peer(nil), peers...), Peer{ID: ghost, Name: "ghost", Address: peers[0].Address})
	for _, a := range agents {
		a.prober.Apply(settings(50, 256, 2*time.Second, withGhost, nil))
	}
	for _, a := range agents {
		waitFor(t, a.id+": wrong_peer samples for the ghost and ok ones for every real peer", 20*time.Second, func() bool {
			if a.col.count(func(s flat) bool { return s.peer == ghost && s.status == sample.StatusWrongPeer }) < 10 {
				return false
			}
			for _, p := range peers {
				if a.col.count(func(s flat) bool { return s.peer == p.ID && s.status == sample.StatusOK }) < 10 {
					return false
				}
			}
			return true
		})
		if n := a.col.count(func(s flat) bool { return s.peer == ghost && s.status == sample.StatusOK }); n != 0 {
			t.Fatalf("%s recorded %d ok samples for a peer that does not exist", a.id, n)
		}
	}
}

// An agent of the previous version never asks for the id: its frames come back byte for byte,
// as it checks them. An asked frame comes back as SWM2 with the server's id.
func TestTheEchoServerAnswersEachVersionInItsOwnFormat(t *testing.T) {
	srv := servedEcho(t, peerX)
	c, err := net.DialTimeout("tcp", srv.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	payload := []byte("0123456789abcdef")
	frame := func(round uint64) []byte {
		f := make([]byte, headerLen+len(payload))
		putHeader(f, len(payload), round, senderBytes(peerY))
		copy(f[headerLen:], payload)
		return f
	}
	old := frame(7)
	asked := frame(8 | askID)
	if _, err := c.Write(append(append([]byte(nil), old...), asked...)); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 2*len(old))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[:len(old)], old) {
		t.Fatalf("an unasked frame came back changed: % x", got[:headerLen])
	}
	reply := got[len(old):]
	x := senderBytes(peerX)
	if binary.BigEndian.Uint32(reply[0:4]) != replyMagic || !bytes.Equal(reply[16:32], x[:]) ||
		!bytes.Equal(reply[4:16], asked[4:16]) || !bytes.Equal(reply[headerLen:], payload) {
		t.Fatalf("an asked frame came back as % x, want SWM2 with the server's id", reply[:headerLen])
	}
}

package throughput

import (
	"bufio"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// handshake speaks the control protocol by hand and returns the responder's line.
func handshake(t *testing.T, addr string, id [idLen]byte, self [idLen]byte, mac func(nonce []byte) []byte) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	nonce := make([]byte, nonceLen)
	if _, err := io.ReadFull(c, nonce); err != nil {
		t.Fatal(err)
	}
	msg := append([]byte{kindControl}, id[:]...)
	msg = append(msg, mac(nonce)...)
	msg = append(msg, self[:]...)
	if _, err := c.Write(msg); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatalf("no answer line: %v", err)
	}
	return strings.TrimSpace(line)
}

func TestAResponderRefusesWhatItsConfigDoesNotScheduleAndSaysWhy(t *testing.T) {
	a, b := startAgent(t), startAgent(t)
	base := Experiment{Proto: "tcp", Streams: 1, DurationS: 1, StartAt: time.Now()}
	ok, okResp := pair(a, b, b.m.Addr().String(), base)
	late, lateResp := pair(a, b, b.m.Addr().String(), base)
	lateResp.StartAt = time.Now().Add(-5 * time.Minute)
	mine, _ := pair(a, b, b.m.Addr().String(), base)
	mineAsInitiator := mine
	mineAsInitiator.PeerAgentID = a.id
	mineAsInitiator.StartAt = time.Now().Add(50 * time.Second) // not started while the test runs
	ran, ranResp := pair(a, b, b.m.Addr().String(), base)
	b.m.Apply([]Experiment{okResp, lateResp, mineAsInitiator, ranResp})
	if reason := b.m.claim(fmtUUID(mustUUID(ran.ID))); reason != "" {
		t.Fatal(reason)
	}
	b.m.release()
	// A challenge answered once, replayed on a new connection (which gets a new nonce).
	var captured []byte
	handshakeOnce := handshake(t, b.m.Addr().String(), mustUUID(okResp.ID), [idLen]byte{}, func(n []byte) []byte {
		captured = controlMAC(ok.Token, n, mustUUID(ok.ID))
		return captured
	})
	if handshakeOnce != "ERR wrong peer" {
		t.Fatalf("a valid HMAC from another agent id: %q, want ERR wrong peer", handshakeOnce)
	}
	self := mustUUID(a.id)
	for _, tc := range []struct {
		name string
		id   string
		mac  func(nonce []byte) []byte
		want string
	}{
		{"an experiment not in the config", newUUID(), func(n []byte) []byte { return controlMAC(ok.Token, n, mustUUID(ok.ID)) },
			"ERR experiment not scheduled for this agent"},
		{"a wrong HMAC", ok.ID, func(n []byte) []byte {
			return controlMAC([]byte("not the token of this experiment"), n, mustUUID(ok.ID))
		},
			"ERR bad HMAC"},
		{"a replayed challenge answer", ok.ID, func([]byte) []byte { return captured }, "ERR bad HMAC"},
		{"outside the start window", late.ID, func(n []byte) []byte { return controlMAC(late.Token, n, mustUUID(late.ID)) },
			"ERR outside the start window"},
		{"an experiment where this agent is the initiator", mine.ID, func(n []byte) []byte { return controlMAC(mine.Token, n, mustUUID(mine.ID)) },
			"ERR this agent is not the experiment's responder"},
		{"an experiment that already ran", ran.ID, func(n []byte) []byte { return controlMAC(ran.Token, n, mustUUID(ran.ID)) },
			"ERR experiment already ran"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := handshake(t, b.m.Addr().String(), mustUUID(tc.id), self, tc.mac); got != tc.want {
				t.Fatalf("answer %q, want %q", got, tc.want)
			}
		})
	}
	t.Run("while another experiment runs", func(t *testing.T) {
		if reason := b.m.claim(newUUID()); reason != "" {
			t.Fatal(reason)
		}
		defer b.m.release()
		if got := handshake(t, b.m.Addr().String(), mustUUID(ok.ID), self, func(n []byte) []byte { return controlMAC(ok.Token, n, mustUUID(ok.ID)) }); got != "ERR agent busy with another experiment" {
			t.Fatalf("answer %q, want ERR agent busy with another experiment", got)
		}
	})
	if got := b.got.all(); len(got) != 0 {
		t.Fatalf("a refused experiment recorded samples: %+v", got)
	}
	// The scheduled one is still accepted with the right answer.
	if got := handshake(t, b.m.Addr().String(), mustUUID(ok.ID), self, func(n []byte) []byte { return controlMAC(ok.Token, n, mustUUID(ok.ID)) }); got != "OK" {
		t.Fatalf("the scheduled experiment: %q, want OK", got)
	}
}

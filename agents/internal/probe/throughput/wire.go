// Package throughput runs the throughput experiments the server schedules between two agents
// (seed 004 §III): TCP with parallel streams or UDP at an offered rate, first initiator →
// responder ("forward"), then responder → initiator ("reverse"), one sample per second
// recorded by the receiver of each direction. docs/agents.md "Throughput" describes the wire
// protocol.
package throughput

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// Connection kinds: the first byte the initiator sends after the responder's nonce.
const (
	kindControl    = 'C'
	kindTCPForward = 'T' // a stream the initiator writes and the responder reads
	kindTCPReverse = 't' // a stream the responder writes and the initiator reads
	kindUDPData    = 'U'
	kindUDPHello   = 'H' // the initiator's datagram that tells the responder where to send
)

const (
	nonceLen = 32
	idLen    = 16
	macLen   = sha256.Size
	// helloLen is what the initiator sends on any connection after the nonce: kind, experiment
	// id, HMAC, and (on control connections) its own agent id.
	helloLen = 1 + idLen + macLen + idLen
	// udpHeaderLen is kind, experiment id, data key, sequence number and send time (ns).
	udpHeaderLen = 1 + idLen + udpKeyLen + 8 + 8
	udpKeyLen    = 16
	// MinDatagramBytes and MaxDatagramBytes bound udp_datagram_bytes (the contract's range).
	MinDatagramBytes = 64
	MaxDatagramBytes = 8972
)

// parseUUID turns a textual UUID into its 16 bytes.
func parseUUID(s string) ([idLen]byte, error) {
	var out [idLen]byte
	h := strings.ReplaceAll(s, "-", "")
	if len(h) != 2*idLen {
		return out, fmt.Errorf("%q is not a UUID", s)
	}
	if _, err := hex.Decode(out[:], []byte(h)); err != nil {
		return out, fmt.Errorf("%q is not a UUID", s)
	}
	return out, nil
}

// controlMAC is HMAC-SHA256(token, nonce || experiment id), the contract's challenge answer.
func controlMAC(token, nonce []byte, id [idLen]byte) []byte {
	m := hmac.New(sha256.New, token)
	m.Write(nonce)
	m.Write(id[:])
	return m.Sum(nil)
}

// sessionKey derives the key of one run's data connections from the token and the control
// connection's nonce, so a data connection of an earlier run cannot be replayed into this one.
func sessionKey(token, controlNonce []byte) []byte {
	m := hmac.New(sha256.New, token)
	m.Write([]byte("stormwatch throughput data"))
	m.Write(controlNonce)
	return m.Sum(nil)
}

// dataMAC authenticates one TCP data stream: HMAC(session key, its own nonce || id || kind).
func dataMAC(key, nonce []byte, id [idLen]byte, kind byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(nonce)
	m.Write(id[:])
	m.Write([]byte{kind})
	return m.Sum(nil)
}

// udpKey is the tag every datagram of one run carries: checking it costs a 16-byte compare,
// where an HMAC per datagram would cost more than the datagram's own processing.
func udpKey(key []byte) [udpKeyLen]byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("udp"))
	var k [udpKeyLen]byte
	copy(k[:], m.Sum(nil))
	return k
}

// putUDPHeader writes a datagram header into b.
func putUDPHeader(b []byte, kind byte, id [idLen]byte, key [udpKeyLen]byte, seq uint64, sentNS int64) {
	b[0] = kind
	copy(b[1:], id[:])
	copy(b[1+idLen:], key[:])
	binary.BigEndian.PutUint64(b[1+idLen+udpKeyLen:], seq)
	binary.BigEndian.PutUint64(b[1+idLen+udpKeyLen+8:], uint64(sentNS))
}

// udpHeader is a decoded datagram header.
type udpHeader struct {
	kind   byte
	seq    uint64
	sentNS int64
}

var errNotOurs = errors.New("datagram of another experiment")

// readUDPHeader decodes b when it belongs to experiment id with key.
func readUDPHeader(b []byte, id [idLen]byte, key [udpKeyLen]byte) (udpHeader, error) {
	if len(b) < udpHeaderLen {
		return udpHeader{}, errNotOurs
	}
	if string(b[1:1+idLen]) != string(id[:]) || !hmac.Equal(b[1+idLen:1+idLen+udpKeyLen], key[:]) {
		return udpHeader{}, errNotOurs
	}
	return udpHeader{kind: b[0], seq: binary.BigEndian.Uint64(b[1+idLen+udpKeyLen:]),
		sentNS: int64(binary.BigEndian.Uint64(b[1+idLen+udpKeyLen+8:]))}, nil
}

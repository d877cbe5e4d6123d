package throughput

import (
	"encoding/base64"
	"errors"
	"fmt"
	"time"
)

// Role is the agent's side of an experiment.
type Role string

const (
	Initiator Role = "initiator"
	Responder Role = "responder"
)

// Experiment is one entry of the server config's throughput.experiments.
type Experiment struct {
	ID               string
	Role             Role
	PeerAgentID      string
	PeerAddress      string // initiator only: the responder's control address
	Proto            string // tcp | udp
	StartAt          time.Time
	DurationS        int // per direction
	Streams          int // TCP parallel streams
	UDPRateBitsPerS  int64
	UDPDatagramBytes int
	Token            []byte // the per-experiment secret, decoded

	id [idLen]byte
}

// StartWindow is how far from start_at the responder still accepts an experiment.
const StartWindow = 60 * time.Second

// DecodeToken decodes the config's base64url token (padded or not).
func DecodeToken(s string) ([]byte, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		b, err = base64.URLEncoding.DecodeString(s)
	}
	if err != nil {
		return nil, errors.New("token is not base64url")
	}
	if len(b) < 16 {
		return nil, errors.New("token is shorter than 16 bytes")
	}
	return b, nil
}

// check validates an experiment and fills its binary id.
func (e *Experiment) check() error {
	var err error
	if e.id, err = parseUUID(e.ID); err != nil {
		return fmt.Errorf("id: %w", err)
	}
	if _, err := parseUUID(e.PeerAgentID); err != nil {
		return fmt.Errorf("peer_agent_id: %w", err)
	}
	switch e.Role {
	case Initiator:
		if e.PeerAddress == "" {
			return errors.New("initiator without peer_address")
		}
	case Responder:
	default:
		return fmt.Errorf("role %q: want initiator or responder", e.Role)
	}
	switch e.Proto {
	case "tcp":
		if e.Streams < 1 || e.Streams > 16 {
			return fmt.Errorf("streams %d: want 1-16", e.Streams)
		}
	case "udp":
		if e.UDPDatagramBytes < MinDatagramBytes || e.UDPDatagramBytes > MaxDatagramBytes {
			return fmt.Errorf("udp_datagram_bytes %d: want %d-%d", e.UDPDatagramBytes, MinDatagramBytes, MaxDatagramBytes)
		}
		if e.UDPRateBitsPerS <= 0 {
			return fmt.Errorf("udp_rate_bits_per_s %d: want > 0", e.UDPRateBitsPerS)
		}
	default:
		return fmt.Errorf("proto %q: want tcp or udp", e.Proto)
	}
	if e.DurationS < 1 || e.DurationS > 3600 {
		return fmt.Errorf("duration_s %d: want 1-3600", e.DurationS)
	}
	if len(e.Token) < 16 {
		return errors.New("token missing or shorter than 16 bytes")
	}
	return nil
}

// duration is the length of one direction.
func (e *Experiment) duration() time.Duration { return time.Duration(e.DurationS) * time.Second }

// Package sample holds the measurement records every probe emits and the shipper
// encodes into the columnar batch of docs/api.md.
package sample

// Status classifies the outcome of one measurement (docs/api.md, "Status codes").
type Status uint8

const (
	StatusOK      Status = 0
	StatusTimeout Status = 1 // for the mesh, a loss
	StatusRefused Status = 2
	StatusError   Status = 3
	StatusCorrupt Status = 4 // the echo did not match what was sent
	// StatusWrongPeer is a mesh loss: the echo came back intact but signed by another agent
	// than the peer dialled (its address leads elsewhere, e.g. loopback).
	StatusWrongPeer Status = 5
)

func (s Status) String() string {
	switch s {
	case StatusOK:
		return "ok"
	case StatusTimeout:
		return "timeout"
	case StatusRefused:
		return "refused"
	case StatusError:
		return "error"
	case StatusCorrupt:
		return "corrupt"
	case StatusWrongPeer:
		return "wrong_peer"
	}
	return "unknown"
}

// Storage is one object-storage operation (seed 000 §3, seed 002 §5).
type Storage struct {
	TimeUS      int64  // unix microseconds when the request was issued
	TargetID    string // server-side storage target id
	Op          string // put | get | get_first | read_after_write | list_after_write | rtt
	Variant     string // plain | gzip9 | replicated | concurrent
	Content     string // binary | text
	SizeBytes   int64
	StoredBytes int64 // bytes on the wire after compression
	Copies      int   // F for replication, k for get_first, else 1
	Concurrency int   // parallel operations, else 1
	Attempt     int   // 1 or 2
	LatencyUS   *int64
	TTFBUS      *int64
	RTTUS       *int64
	BytesPerS   *float64
	Status      Status
	ErrorClass  string // timeout | auth | not_found | throttled | server_error | network; "" when ok
}

// Throughput is one second of a throughput experiment (seed 004).
type Throughput struct {
	TimeUS       int64
	PeerID       string
	Proto        string // tcp | udp
	ExperimentID string
	Direction    string // send | receive
	BytesPerS    float64
	LossRatio    *float64
	JitterUS     *int64
}

// Mesh is one buffered mesh observation packed into 16 bytes (StormCloud needs 52, seed 003
// §3). Time and round are offsets from the MeshBlock that holds it; the payload size is the
// block's; the destination is an index into the block's peer table.
type Mesh struct {
	TimeOffUS  int32  // send time minus the block's BaseTimeUS
	RoundDelta int32  // round minus the block's BaseRound
	RTTUS      uint32 // valid only when Status is StatusOK (≤ 600 s fits)
	Peer       uint16 // index into the block's peer table
	Status     Status
	_          uint8
}

// Quorum is the latency of one round for one group, also packed into 16 bytes.
type Quorum struct {
	TimeOffUS  int32
	RoundDelta int32
	LatencyUS  uint32 // k-th fastest reply; valid only when Status is StatusOK
	Group      uint8  // index into the block's group table
	K          uint8
	N          uint8
	Status     Status // StatusTimeout when fewer than K replies arrived
}

// MeshBlock is a run of mesh and quorum samples that share a base time, base round and
// payload size. Peers and Groups map the compact indices back to ids.
type MeshBlock struct {
	BaseTimeUS   int64
	BaseRound    uint64
	PayloadBytes int
	Peers        []string
	Groups       []string
	Mesh         []Mesh
	Quorum       []Quorum
}

// Len is the number of samples in the block.
func (b *MeshBlock) Len() int { return len(b.Mesh) + len(b.Quorum) }

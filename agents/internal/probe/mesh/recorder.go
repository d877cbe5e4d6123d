package mesh

import (
	"sync"
	"sync/atomic"
	"time"

	"stormwatch/agents/internal/sample"
)

// Blocks are fixed-size chunks, sealed when full and never grown, so a buffered sample costs
// its 16 bytes and not the slack of a doubling slice.
const (
	blockCap       = 4096
	quorumBlockCap = 1024
)

// Recorder buffers mesh and quorum samples in 16-byte records. Only reader and timeout paths
// call it, never the goroutine that writes to a socket, and it holds its lock for an append.
type Recorder struct {
	mu        sync.Mutex
	peers     []string // append-only: an index handed out stays valid for the process
	peerIdx   map[string]uint16
	groups    []string
	groupIdx  map[string]uint8
	sealed    []*sample.MeshBlock
	curMesh   *sample.MeshBlock // a block holds mesh or quorum samples, each in fixed chunks
	curQuorum *sample.MeshBlock
	pending   int

	measuredMesh   atomic.Uint64
	measuredQuorum atomic.Uint64
}

// NewRecorder returns an empty recorder.
func NewRecorder() *Recorder {
	return &Recorder{peerIdx: map[string]uint16{}, groupIdx: map[string]uint8{}}
}

// PeerIndex returns the stable compact index of a peer id.
func (r *Recorder) PeerIndex(id string) uint16 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if i, ok := r.peerIdx[id]; ok {
		return i
	}
	i := uint16(len(r.peers))
	r.peers = append(r.peers, id)
	r.peerIdx[id] = i
	return i
}

// GroupIndex returns the stable compact index of a group name.
func (r *Recorder) GroupIndex(name string) uint8 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if i, ok := r.groupIdx[name]; ok {
		return i
	}
	i := uint8(len(r.groups))
	r.groups = append(r.groups, name)
	r.groupIdx[name] = i
	return i
}

// blockFor returns the open block of the kind (quorum or mesh) that can hold a sample at
// (t, round, payload), sealing it when full, when an offset would overflow or the payload
// size changed. Caller holds mu.
func (r *Recorder) blockFor(quorum bool, tUS int64, round uint64, payload int) *sample.MeshBlock {
	cur := &r.curMesh
	if quorum {
		cur = &r.curQuorum
	}
	if c := *cur; c != nil && c.PayloadBytes == payload && (len(c.Mesh) < cap(c.Mesh) || len(c.Quorum) < cap(c.Quorum)) {
		dt := tUS - c.BaseTimeUS
		dr := int64(round) - int64(c.BaseRound)
		if dt > -1<<31 && dt < 1<<31-1 && dr > -1<<31 && dr < 1<<31-1 {
			return c
		}
	}
	r.seal(cur)
	b := &sample.MeshBlock{BaseTimeUS: tUS, BaseRound: round, PayloadBytes: payload}
	if quorum {
		b.Quorum = make([]sample.Quorum, 0, quorumBlockCap)
	} else {
		b.Mesh = make([]sample.Mesh, 0, blockCap)
	}
	*cur = b
	return b
}

// seal closes an open block. Caller holds mu.
func (r *Recorder) seal(cur **sample.MeshBlock) {
	b := *cur
	if b == nil {
		return
	}
	b.Peers = r.peers
	b.Groups = r.groups
	if b.Len() > 0 {
		r.sealed = append(r.sealed, b)
	}
	*cur = nil
}

// AddMesh records one mesh sample. rtt is ignored unless st is StatusOK.
func (r *Recorder) AddMesh(sent time.Time, round uint64, payload int, peer uint16, rtt time.Duration, st sample.Status) {
	tUS := sent.UnixMicro()
	var rttUS uint32
	if st == sample.StatusOK {
		rttUS = uint32(rtt / time.Microsecond)
	}
	r.mu.Lock()
	b := r.blockFor(false, tUS, round, payload)
	b.Mesh = append(b.Mesh, sample.Mesh{TimeOffUS: int32(tUS - b.BaseTimeUS),
		RoundDelta: int32(int64(round) - int64(b.BaseRound)), RTTUS: rttUS, Peer: peer, Status: st})
	r.pending++
	r.mu.Unlock()
	r.measuredMesh.Add(1)
}

// AddQuorum records one quorum sample; latency is ignored unless st is StatusOK.
func (r *Recorder) AddQuorum(t time.Time, round uint64, payload int, group uint8, k, n int, latency time.Duration, st sample.Status) {
	tUS := t.UnixMicro()
	var lat uint32
	if st == sample.StatusOK {
		lat = uint32(latency / time.Microsecond)
	}
	r.mu.Lock()
	b := r.blockFor(true, tUS, round, payload)
	b.Quorum = append(b.Quorum, sample.Quorum{TimeOffUS: int32(tUS - b.BaseTimeUS),
		RoundDelta: int32(int64(round) - int64(b.BaseRound)), LatencyUS: lat, Group: group,
		K: uint8(k), N: uint8(n), Status: st})
	r.pending++
	r.mu.Unlock()
	r.measuredQuorum.Add(1)
}

// Pending is the number of samples buffered and not yet taken.
func (r *Recorder) Pending() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pending
}

// TakeMesh hands every buffered block to the caller and starts afresh.
func (r *Recorder) TakeMesh() []*sample.MeshBlock {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seal(&r.curMesh)
	r.seal(&r.curQuorum)
	out := r.sealed
	r.sealed = nil
	r.pending = 0
	return out
}

// Measured returns how many mesh and quorum samples were recorded since start.
func (r *Recorder) Measured() (mesh, quorum uint64) {
	return r.measuredMesh.Load(), r.measuredQuorum.Load()
}

package mesh

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"stormwatch/agents/internal/sample"
)

// record is one buffered sample in 12 bytes: time and round are offsets from its chunk, val
// is the RTT (or quorum latency) in microseconds, or statusBase|status when the status is not
// ok, and idx is the peer index (mesh) or the quorum key index (quorum).
type record struct {
	timeOffUS  int32
	val        uint32
	roundDelta int16
	idx        uint16
}

const (
	statusBase = 0xFFFFFFF0
	// A chunk's records fill one allocation size class exactly: 2 KiB of mesh samples, 1 KiB
	// of quorum samples (a fifth as many at the base workload).
	meshChunkRecs   = 2048 / 12
	quorumChunkRecs = 1024 / 12
)

// chunk is a run of samples sharing a base time, base round and payload size. Chunks are
// small, fixed and chained: a buffered sample costs its 12 bytes, a share of its chunk's
// header and at most one partly filled chunk per kind, which keeps it under 16 bytes at the
// production cut cadence (64 KiB blocks cost 41 there).
type chunk struct {
	next       *chunk
	baseTimeUS int64
	baseRound  uint64
	payload    int
	recs       []record // fixed capacity, never grown
}

// chain is the list of chunks of one kind; the newest is last.
type chain struct {
	first, last *chunk
	recs        int
}

// quorumKey is a group and its k and n, as recorded with a quorum sample.
type quorumKey struct {
	group uint8
	k, n  uint8
}

// Recorder buffers mesh and quorum samples. The probe's reader goroutines and its loss
// recorder call it, never the goroutine that sends; it holds its lock for an append.
type Recorder struct {
	mu      sync.Mutex
	peers   []string // append-only: an index handed out stays valid for the process
	peerIdx map[string]uint16
	groups  []string
	keys    []quorumKey
	keyIdx  map[quorumKey]uint16
	mesh    chain
	quorum  chain
	pending int

	measuredMesh   atomic.Uint64
	measuredQuorum atomic.Uint64
}

// NewRecorder returns an empty recorder.
func NewRecorder() *Recorder {
	return &Recorder{peerIdx: map[string]uint16{}, keyIdx: map[quorumKey]uint16{},
		mesh: chain{recs: meshChunkRecs}, quorum: chain{recs: quorumChunkRecs}}
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

// QuorumKey returns the stable compact index of a group with its k and n.
func (r *Recorder) QuorumKey(name string, k, n int) uint16 {
	r.mu.Lock()
	defer r.mu.Unlock()
	g := -1
	for i, x := range r.groups {
		if x == name {
			g = i
			break
		}
	}
	if g < 0 {
		g = len(r.groups)
		r.groups = append(r.groups, name)
	}
	key := quorumKey{group: uint8(g), k: uint8(k), n: uint8(n)}
	if i, ok := r.keyIdx[key]; ok {
		return i
	}
	i := uint16(len(r.keys))
	r.keys = append(r.keys, key)
	r.keyIdx[key] = i
	return i
}

// add appends one record to c, opening a chunk when the last is full, when an offset would
// not fit, or when the payload size changed. Caller holds mu.
func (r *Recorder) add(c *chain, tUS int64, round uint64, payload int, val uint32, idx uint16) {
	r.pending++
	if h := c.last; h != nil && len(h.recs) < cap(h.recs) && h.payload == payload {
		dt := tUS - h.baseTimeUS
		dr := int64(round - h.baseRound)
		if dt >= math.MinInt32 && dt <= math.MaxInt32 && dr >= math.MinInt16 && dr <= math.MaxInt16 {
			h.recs = append(h.recs, record{timeOffUS: int32(dt), val: val, roundDelta: int16(dr), idx: idx})
			return
		}
	}
	h := &chunk{baseTimeUS: tUS, baseRound: round, payload: payload, recs: make([]record, 1, c.recs)}
	h.recs[0] = record{val: val, idx: idx}
	if c.last == nil {
		c.first = h
	} else {
		c.last.next = h
	}
	c.last = h
}

func encodeVal(d time.Duration, st sample.Status) uint32 {
	if st != sample.StatusOK {
		return statusBase | uint32(st)
	}
	us := d / time.Microsecond
	return uint32(min(max(us, 0), statusBase-1))
}

func decodeVal(v uint32) (uint32, sample.Status) {
	if v >= statusBase {
		return 0, sample.Status(v - statusBase)
	}
	return v, sample.StatusOK
}

// AddMesh records one mesh sample. rtt is ignored unless st is StatusOK.
func (r *Recorder) AddMesh(sent time.Time, round uint64, payload int, peer uint16, rtt time.Duration, st sample.Status) {
	tUS := sent.UnixMicro()
	val := encodeVal(rtt, st)
	r.mu.Lock()
	r.add(&r.mesh, tUS, round, payload, val, peer)
	r.mu.Unlock()
	r.measuredMesh.Add(1)
}

// AddQuorum records one quorum sample of the key from QuorumKey; latency is ignored unless
// st is StatusOK.
func (r *Recorder) AddQuorum(t time.Time, round uint64, payload int, key uint16, latency time.Duration, st sample.Status) {
	tUS := t.UnixMicro()
	val := encodeVal(latency, st)
	r.mu.Lock()
	r.add(&r.quorum, tUS, round, payload, val, key)
	r.mu.Unlock()
	r.measuredQuorum.Add(1)
}

// Pending is the number of samples buffered and not yet taken.
func (r *Recorder) Pending() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pending
}

// TakeMesh hands every buffered sample to the caller, one block per chunk, and starts afresh.
func (r *Recorder) TakeMesh() []*sample.MeshBlock {
	r.mu.Lock()
	mesh, quorum := r.mesh.first, r.quorum.first
	r.mesh.first, r.mesh.last, r.quorum.first, r.quorum.last = nil, nil, nil, nil
	r.pending = 0
	peers, groups, keys := r.peers, r.groups, r.keys
	r.mu.Unlock()
	var out []*sample.MeshBlock
	for h := mesh; h != nil; h = h.next {
		b := &sample.MeshBlock{BaseTimeUS: h.baseTimeUS, BaseRound: h.baseRound, PayloadBytes: h.payload,
			Peers: peers, Groups: groups, Mesh: make([]sample.Mesh, len(h.recs))}
		for i, x := range h.recs {
			v, st := decodeVal(x.val)
			b.Mesh[i] = sample.Mesh{TimeOffUS: x.timeOffUS, RoundDelta: int32(x.roundDelta), RTTUS: v, Peer: x.idx, Status: st}
		}
		out = append(out, b)
	}
	for h := quorum; h != nil; h = h.next {
		b := &sample.MeshBlock{BaseTimeUS: h.baseTimeUS, BaseRound: h.baseRound, PayloadBytes: h.payload,
			Peers: peers, Groups: groups, Quorum: make([]sample.Quorum, len(h.recs))}
		for i, x := range h.recs {
			v, st := decodeVal(x.val)
			k := keys[x.idx]
			b.Quorum[i] = sample.Quorum{TimeOffUS: x.timeOffUS, RoundDelta: int32(x.roundDelta), LatencyUS: v,
				Group: k.group, K: k.k, N: k.n, Status: st}
		}
		out = append(out, b)
	}
	return out
}

// Measured returns how many mesh and quorum samples were recorded since start.
func (r *Recorder) Measured() (mesh, quorum uint64) {
	return r.measuredMesh.Load(), r.measuredQuorum.Load()
}

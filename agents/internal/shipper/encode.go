package shipper

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"math"
	"strconv"

	"stormwatch/agents/internal/metrics"
	"stormwatch/agents/internal/sample"
)

// Counts is how many samples of each kind a batch holds.
type Counts [metrics.NumKinds]int

// Total is the number of samples.
func (c Counts) Total() int {
	n := 0
	for _, v := range c {
		n += v
	}
	return n
}

// content is the samples of one batch before encoding.
type content struct {
	mesh       []*sample.MeshBlock
	storage    []sample.Storage
	throughput []sample.Throughput
}

func (c *content) counts() Counts {
	var n Counts
	for _, b := range c.mesh {
		n[metrics.Mesh] += len(b.Mesh)
		n[metrics.Quorum] += len(b.Quorum)
	}
	n[metrics.Storage] = len(c.storage)
	n[metrics.Throughput] = len(c.throughput)
	return n
}

// newBatchID returns a random (version 4) UUID.
func newBatchID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// dict assigns dense indices to ids in order of first use.
type dict struct {
	idx map[string]int
	ids []string
}

func (d *dict) reset() {
	clear(d.idx)
	d.ids = d.ids[:0]
}

func (d *dict) index(id string) int {
	if d.idx == nil {
		d.idx = map[string]int{}
	}
	if i, ok := d.idx[id]; ok {
		return i
	}
	d.idx[id] = len(d.ids)
	d.ids = append(d.ids, id)
	return len(d.ids) - 1
}

// enc writes JSON by hand: the columns are long and their element types known.
type enc struct{ b []byte }

func (e *enc) raw(s string) { e.b = append(e.b, s...) }

func (e *enc) str(s string) {
	q, _ := json.Marshal(s)
	e.b = append(e.b, q...)
}

func (e *enc) key(first *bool, k string) {
	if !*first {
		e.b = append(e.b, ',')
	}
	*first = false
	e.str(k)
	e.b = append(e.b, ':')
}

func intCol[T any](e *enc, first *bool, k string, xs []T, f func(T) int64) {
	e.key(first, k)
	e.b = append(e.b, '[')
	for i, x := range xs {
		if i > 0 {
			e.b = append(e.b, ',')
		}
		e.b = strconv.AppendInt(e.b, f(x), 10)
	}
	e.b = append(e.b, ']')
}

// nullIntCol writes f's value, or null when ok is false.
func nullIntCol[T any](e *enc, first *bool, k string, xs []T, f func(T) (int64, bool)) {
	e.key(first, k)
	e.b = append(e.b, '[')
	for i, x := range xs {
		if i > 0 {
			e.b = append(e.b, ',')
		}
		if v, ok := f(x); ok {
			e.b = strconv.AppendInt(e.b, v, 10)
		} else {
			e.b = append(e.b, "null"...)
		}
	}
	e.b = append(e.b, ']')
}

// nullFloatCol writes f's value, or null when absent or not finite (JSON has no NaN).
func nullFloatCol[T any](e *enc, first *bool, k string, xs []T, f func(T) (float64, bool)) {
	e.key(first, k)
	e.b = append(e.b, '[')
	for i, x := range xs {
		if i > 0 {
			e.b = append(e.b, ',')
		}
		if v, ok := f(x); ok && !math.IsNaN(v) && !math.IsInf(v, 0) {
			e.b = strconv.AppendFloat(e.b, v, 'g', -1, 64)
		} else {
			e.b = append(e.b, "null"...)
		}
	}
	e.b = append(e.b, ']')
}

func strCol[T any](e *enc, first *bool, k string, xs []T, f func(T) (string, bool)) {
	e.key(first, k)
	e.b = append(e.b, '[')
	for i, x := range xs {
		if i > 0 {
			e.b = append(e.b, ',')
		}
		if v, ok := f(x); ok {
			e.str(v)
		} else {
			e.b = append(e.b, "null"...)
		}
	}
	e.b = append(e.b, ']')
}

func (e *enc) strList(first *bool, k string, ids []string) {
	strCol(e, first, k, ids, func(s string) (string, bool) { return s, true })
}

type meshRow struct {
	timeUS  int64
	peer    int
	round   int64
	payload int
	rttUS   uint32
	status  sample.Status
}

type quorumRow struct {
	timeUS  int64
	group   int
	round   int64
	k, n    int
	latency uint32
	status  sample.Status
}

// encoder renders batches; it keeps its buffers and its gzip writer from one batch to the next,
// so that a cut costs little more than the compressed bytes it returns.
type encoder struct {
	e             enc
	peers, groups dict
	mrows         []meshRow
	qrows         []quorumRow
	zbuf          bytes.Buffer
	zw            *gzip.Writer
}

// batch returns the gzip-compressed JSON of a batch, in a slice of its own.
func (x *encoder) batch(batchID, agentID string, c *content) []byte {
	body := x.json(batchID, agentID, c)
	x.zbuf.Reset()
	if x.zw == nil {
		x.zw, _ = gzip.NewWriterLevel(&x.zbuf, gzip.BestSpeed)
	} else {
		x.zw.Reset(&x.zbuf)
	}
	_, _ = x.zw.Write(body)
	_ = x.zw.Close()
	return bytes.Clone(x.zbuf.Bytes())
}

// json renders a batch exactly as docs/api.md "Ingest" describes it, into the encoder's
// buffer; the result is valid until the next call.
func (x *encoder) json(batchID, agentID string, c *content) []byte {
	e := &x.e
	e.b = e.b[:0]
	e.raw(`{"batch_id":`)
	e.str(batchID)
	e.raw(`,"agent_id":`)
	e.str(agentID)

	peers, groups := &x.peers, &x.groups
	peers.reset()
	groups.reset()
	mrows, qrows := x.mrows[:0], x.qrows[:0]
	defer func() { x.mrows, x.qrows = mrows[:0], qrows[:0] }()
	for _, b := range c.mesh {
		for _, s := range b.Mesh {
			mrows = append(mrows, meshRow{b.BaseTimeUS + int64(s.TimeOffUS), peers.index(b.Peers[s.Peer]),
				int64(b.BaseRound) + int64(s.RoundDelta), b.PayloadBytes, s.RTTUS, s.Status})
		}
		for _, s := range b.Quorum {
			qrows = append(qrows, quorumRow{b.BaseTimeUS + int64(s.TimeOffUS), groups.index(b.Groups[s.Group]),
				int64(b.BaseRound) + int64(s.RoundDelta), int(s.K), int(s.N), s.LatencyUS, s.Status})
		}
	}
	if len(mrows) > 0 {
		e.raw(`,"mesh":{`)
		f := true
		e.strList(&f, "peers", peers.ids)
		intCol(e, &f, "time_us", mrows, func(r meshRow) int64 { return r.timeUS })
		intCol(e, &f, "peer_idx", mrows, func(r meshRow) int64 { return int64(r.peer) })
		intCol(e, &f, "round", mrows, func(r meshRow) int64 { return r.round })
		intCol(e, &f, "payload_bytes", mrows, func(r meshRow) int64 { return int64(r.payload) })
		nullIntCol(e, &f, "rtt_us", mrows, func(r meshRow) (int64, bool) { return int64(r.rttUS), r.status == sample.StatusOK })
		intCol(e, &f, "status", mrows, func(r meshRow) int64 { return int64(r.status) })
		e.raw("}")
	}
	if len(qrows) > 0 {
		e.raw(`,"quorum":{`)
		f := true
		e.strList(&f, "groups", groups.ids)
		intCol(e, &f, "time_us", qrows, func(r quorumRow) int64 { return r.timeUS })
		intCol(e, &f, "group_idx", qrows, func(r quorumRow) int64 { return int64(r.group) })
		intCol(e, &f, "round", qrows, func(r quorumRow) int64 { return r.round })
		intCol(e, &f, "k", qrows, func(r quorumRow) int64 { return int64(r.k) })
		intCol(e, &f, "n", qrows, func(r quorumRow) int64 { return int64(r.n) })
		nullIntCol(e, &f, "latency_us", qrows, func(r quorumRow) (int64, bool) { return int64(r.latency), r.status == sample.StatusOK })
		intCol(e, &f, "status", qrows, func(r quorumRow) int64 { return int64(r.status) })
		e.raw("}")
	}
	if len(c.storage) > 0 {
		var targets dict
		idx := make([]int, len(c.storage))
		for i, s := range c.storage {
			idx[i] = targets.index(s.TargetID)
		}
		xs := c.storage
		e.raw(`,"storage":{`)
		f := true
		e.strList(&f, "targets", targets.ids)
		intCol(e, &f, "time_us", xs, func(s sample.Storage) int64 { return s.TimeUS })
		intCol(e, &f, "target_idx", idx, func(i int) int64 { return int64(i) })
		strCol(e, &f, "op", xs, func(s sample.Storage) (string, bool) { return s.Op, true })
		strCol(e, &f, "variant", xs, func(s sample.Storage) (string, bool) { return s.Variant, true })
		strCol(e, &f, "content", xs, func(s sample.Storage) (string, bool) { return s.Content, true })
		intCol(e, &f, "size_bytes", xs, func(s sample.Storage) int64 { return s.SizeBytes })
		intCol(e, &f, "stored_bytes", xs, func(s sample.Storage) int64 { return s.StoredBytes })
		intCol(e, &f, "copies", xs, func(s sample.Storage) int64 { return int64(s.Copies) })
		intCol(e, &f, "concurrency", xs, func(s sample.Storage) int64 { return int64(s.Concurrency) })
		intCol(e, &f, "attempt", xs, func(s sample.Storage) int64 { return int64(s.Attempt) })
		ptr := func(p *int64) (int64, bool) {
			if p == nil {
				return 0, false
			}
			return *p, true
		}
		nullIntCol(e, &f, "latency_us", xs, func(s sample.Storage) (int64, bool) { return ptr(s.LatencyUS) })
		nullIntCol(e, &f, "ttfb_us", xs, func(s sample.Storage) (int64, bool) { return ptr(s.TTFBUS) })
		nullIntCol(e, &f, "rtt_us", xs, func(s sample.Storage) (int64, bool) { return ptr(s.RTTUS) })
		nullFloatCol(e, &f, "bytes_per_s", xs, func(s sample.Storage) (float64, bool) {
			if s.BytesPerS == nil {
				return 0, false
			}
			return *s.BytesPerS, true
		})
		intCol(e, &f, "status", xs, func(s sample.Storage) int64 { return int64(s.Status) })
		strCol(e, &f, "error_class", xs, func(s sample.Storage) (string, bool) {
			return s.ErrorClass, s.Status != sample.StatusOK && s.ErrorClass != ""
		})
		e.raw("}")
	}
	if len(c.throughput) > 0 {
		var tp dict
		idx := make([]int, len(c.throughput))
		for i, s := range c.throughput {
			idx[i] = tp.index(s.PeerID)
		}
		xs := c.throughput
		e.raw(`,"throughput":{`)
		f := true
		e.strList(&f, "peers", tp.ids)
		intCol(e, &f, "time_us", xs, func(s sample.Throughput) int64 { return s.TimeUS })
		intCol(e, &f, "peer_idx", idx, func(i int) int64 { return int64(i) })
		strCol(e, &f, "proto", xs, func(s sample.Throughput) (string, bool) { return s.Proto, true })
		strCol(e, &f, "experiment_id", xs, func(s sample.Throughput) (string, bool) { return s.ExperimentID, true })
		strCol(e, &f, "direction", xs, func(s sample.Throughput) (string, bool) { return s.Direction, true })
		nullFloatCol(e, &f, "bytes_per_s", xs, func(s sample.Throughput) (float64, bool) { return s.BytesPerS, true })
		nullFloatCol(e, &f, "loss_ratio", xs, func(s sample.Throughput) (float64, bool) {
			if s.LossRatio == nil {
				return 0, false
			}
			return *s.LossRatio, true
		})
		nullIntCol(e, &f, "jitter_us", xs, func(s sample.Throughput) (int64, bool) {
			if s.JitterUS == nil {
				return 0, false
			}
			return *s.JitterUS, true
		})
		e.raw("}")
	}
	e.raw("}")
	return e.b
}

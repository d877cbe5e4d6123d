package shipper

import (
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"

	"stormwatch/agents/internal/metrics"
)

// errSingleSample is a batch of one sample: it cannot be split any further.
var errSingleSample = errors.New("a batch of one sample cannot be split")

// sectionShape names, per section of docs/api.md "Ingest", its dictionary and the column of
// indices into it; every other key of a section is a column with one element per sample.
var sectionShape = []struct {
	name      string
	kind      metrics.Kind
	dict, idx string
}{
	{"mesh", metrics.Mesh, "peers", "peer_idx"},
	{"quorum", metrics.Quorum, "groups", "group_idx"},
	{"storage", metrics.Storage, "targets", "target_idx"},
	{"throughput", metrics.Throughput, "peers", "peer_idx"},
}

// childBatchID derives a half's batch id from its parent's (a name-based, version 5 UUID), so
// a half sent again, even after a restart, carries the same id and the API stores it once.
func childBatchID(parentID string, half int) string {
	sum := sha1.Sum([]byte(parentID + "/" + strconv.Itoa(half)))
	b := sum[:16]
	b[6] = b[6]&0x0f | 0x50
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

type section struct {
	dict []json.RawMessage
	idx  []int
	cols map[string][]json.RawMessage
	rows int
}

// halve splits an encoded batch into two valid batches holding the first and the second half
// of its samples (in section order), each with an id derived from its parent's.
func halve(parentID string, gz []byte) ([2]*item, error) {
	var out [2]*item
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return out, fmt.Errorf("batch %s: %w", parentID, err)
	}
	body, err := io.ReadAll(zr)
	if err != nil {
		return out, fmt.Errorf("batch %s: %w", parentID, err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return out, fmt.Errorf("batch %s: %w", parentID, err)
	}
	var agentID string
	if err := json.Unmarshal(top["agent_id"], &agentID); err != nil {
		return out, fmt.Errorf("batch %s: agent_id: %w", parentID, err)
	}
	secs := make([]*section, len(sectionShape))
	total := 0
	for i, sh := range sectionShape {
		raw, ok := top[sh.name]
		if !ok {
			continue
		}
		s, err := parseSection(raw, sh.dict, sh.idx)
		if err != nil {
			return out, fmt.Errorf("batch %s: %s: %w", parentID, sh.name, err)
		}
		secs[i] = s
		total += s.rows
	}
	if total < 2 {
		return out, errSingleSample
	}
	// Sample positions [lo, hi) of the whole batch, counted across sections in order.
	bounds := [2][2]int{{0, total / 2}, {total / 2, total}}
	for h, bd := range bounds {
		it := &item{id: childBatchID(parentID, h)}
		var e enc
		e.raw(`{"batch_id":`)
		e.str(it.id)
		e.raw(`,"agent_id":`)
		e.str(agentID)
		start := 0
		for i, s := range secs {
			if s == nil {
				continue
			}
			lo, hi := max(bd[0]-start, 0), min(bd[1]-start, s.rows)
			start += s.rows
			if lo >= hi {
				continue
			}
			sh := sectionShape[i]
			e.raw(`,`)
			e.str(sh.name)
			e.raw(`:`)
			writeSlice(&e, s, sh.dict, sh.idx, lo, hi)
			it.counts[sh.kind] = hi - lo
		}
		e.raw("}")
		var zb bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&zb, gzip.BestSpeed)
		_, _ = zw.Write(e.b)
		_ = zw.Close()
		it.gz = zb.Bytes()
		out[h] = it
	}
	return out, nil
}

func parseSection(raw json.RawMessage, dictKey, idxKey string) (*section, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	s := &section{cols: map[string][]json.RawMessage{}, rows: -1}
	for k, v := range m {
		switch k {
		case dictKey:
			if err := json.Unmarshal(v, &s.dict); err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			continue
		case idxKey:
			if err := json.Unmarshal(v, &s.idx); err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			if s.rows >= 0 && len(s.idx) != s.rows {
				return nil, fmt.Errorf("%s has %d elements, others %d", k, len(s.idx), s.rows)
			}
			s.rows = len(s.idx)
			continue
		}
		var col []json.RawMessage
		if err := json.Unmarshal(v, &col); err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		if s.rows >= 0 && len(col) != s.rows {
			return nil, fmt.Errorf("%s has %d elements, others %d", k, len(col), s.rows)
		}
		s.rows = len(col)
		s.cols[k] = col
	}
	if s.idx == nil {
		return nil, fmt.Errorf("no %s column", idxKey)
	}
	for _, i := range s.idx {
		if i < 0 || i >= len(s.dict) {
			return nil, fmt.Errorf("%s %d out of range", idxKey, i)
		}
	}
	return s, nil
}

// writeSlice writes rows [lo, hi) of s with a dictionary of only the entries they use.
func writeSlice(e *enc, s *section, dictKey, idxKey string, lo, hi int) {
	remap := map[int]int{}
	var used []json.RawMessage
	idx := make([]int, 0, hi-lo)
	for _, i := range s.idx[lo:hi] {
		j, ok := remap[i]
		if !ok {
			j = len(used)
			remap[i] = j
			used = append(used, s.dict[i])
		}
		idx = append(idx, j)
	}
	first := true
	e.raw("{")
	e.key(&first, dictKey)
	writeRaw(e, used)
	intCol(e, &first, idxKey, idx, func(i int) int64 { return int64(i) })
	keys := make([]string, 0, len(s.cols))
	for k := range s.cols {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		e.key(&first, k)
		writeRaw(e, s.cols[k][lo:hi])
	}
	e.raw("}")
}

func writeRaw(e *enc, xs []json.RawMessage) {
	e.b = append(e.b, '[')
	for i, x := range xs {
		if i > 0 {
			e.b = append(e.b, ',')
		}
		e.b = append(e.b, x...)
	}
	e.b = append(e.b, ']')
}

package shipper

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"stormwatch/agents/internal/metrics"
)

// errTooLarge is a batch bigger than the whole spool; its samples are counted as dropped.
var errTooLarge = errors.New("larger than the spool")

// item is one encoded batch, in memory or in the spool.
type item struct {
	id     string
	gz     []byte
	counts Counts
	path   string // spool file, "" while only in memory
}

// spool is a bounded on-disk queue of encoded batches. A file is named
// <seq>-<batch id>-<mesh>-<quorum>-<storage>-<throughput>.gz so it can be listed, counted and
// sent again with the same batch id after a restart.
type spool struct {
	dir string
	max int64
	m   *metrics.Agent

	mu      sync.Mutex
	entries []spoolEntry // oldest first
	bytes   int64
	seq     uint64
	claimed map[string]bool // being sent: never evicted under the sender's feet
}

type spoolEntry struct {
	path   string
	id     string
	size   int64
	counts Counts
}

func openSpool(dir string, maxBytes int64, m *metrics.Agent) (*spool, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	s := &spool{dir: dir, max: maxBytes, m: m, claimed: map[string]bool{}}
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, de := range des {
		name := de.Name()
		if strings.HasSuffix(name, ".tmp") {
			_ = os.Remove(filepath.Join(dir, name)) // a write cut short by a crash
			continue
		}
		e, seq, ok := parseSpoolName(name)
		if !ok {
			continue
		}
		info, err := de.Info()
		if err != nil {
			continue
		}
		e.path = filepath.Join(dir, name)
		e.size = info.Size()
		s.entries = append(s.entries, e)
		s.bytes += e.size
		s.seq = max(s.seq, seq)
	}
	slices.SortFunc(s.entries, func(a, b spoolEntry) int { return strings.Compare(a.path, b.path) })
	s.finishSplits()
	s.publish()
	return s, nil
}

// finishSplits settles a split cut short by a crash (see replace): a batch whose two halves
// are both on disk is removed; a lone half beside its batch is removed. Caller owns s.
func (s *spool) finishSplits() {
	byID := map[string]bool{}
	for _, e := range s.entries {
		byID[e.id] = true
	}
	gone := map[string]bool{}
	for _, e := range s.entries {
		c0, c1 := childBatchID(e.id, 0), childBatchID(e.id, 1)
		switch {
		case byID[c0] && byID[c1]:
			gone[e.id] = true
		case byID[c0]:
			gone[c0] = true
		case byID[c1]:
			gone[c1] = true
		}
	}
	if len(gone) == 0 {
		return
	}
	s.entries = slices.DeleteFunc(s.entries, func(e spoolEntry) bool {
		if !gone[e.id] {
			return false
		}
		_ = os.Remove(e.path)
		s.bytes -= e.size
		return true
	})
}

func parseSpoolName(name string) (spoolEntry, uint64, bool) {
	var e spoolEntry
	base, ok := strings.CutSuffix(name, ".gz")
	if !ok {
		return e, 0, false
	}
	parts := strings.Split(base, "_")
	if len(parts) != 2+int(metrics.NumKinds) {
		return e, 0, false
	}
	seq, err := strconv.ParseUint(parts[0], 10, 64)
	if err != nil {
		return e, 0, false
	}
	e.id = parts[1]
	for k := range int(metrics.NumKinds) {
		n, err := strconv.Atoi(parts[2+k])
		if err != nil {
			return e, 0, false
		}
		e.counts[k] = n
	}
	return e, seq, true
}

// publish updates the spool gauges. Caller holds mu or owns s.
func (s *spool) publish() {
	s.m.SpoolBytes.Store(s.bytes)
	s.m.SpoolFiles.Store(int64(len(s.entries)))
}

// put writes it to disk and drops the oldest unclaimed batches while over the bound.
func (s *spool) put(it *item) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	size := int64(len(it.gz))
	if size > s.max {
		s.countDropped(it.counts)
		return fmt.Errorf("batch %s (%d bytes): %w", it.id, size, errTooLarge)
	}
	for s.bytes+size > s.max {
		if !s.evictOldest() {
			break
		}
	}
	s.seq++
	name := fmt.Sprintf("%020d_%s", s.seq, it.id)
	for _, n := range it.counts {
		name += "_" + strconv.Itoa(n)
	}
	path := filepath.Join(s.dir, name+".gz")
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(it.gz); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	it.path = path
	s.entries = append(s.entries, spoolEntry{path: path, id: it.id, size: size, counts: it.counts})
	s.bytes += size
	for k, n := range it.counts {
		s.m.Spooled[k].Add(uint64(n))
	}
	s.publish()
	return nil
}

// replace puts the halves of the claimed batch at path in its place, claimed: both are written
// in full and renamed before the batch is removed, so a crash at any point leaves on disk
// either the batch or its two halves (openSpool removes whichever is extra).
func (s *spool) replace(path string, halves [2]*item) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	at := slices.IndexFunc(s.entries, func(e spoolEntry) bool { return e.path == path })
	if at < 0 {
		return fmt.Errorf("%s is no longer in the spool", path)
	}
	_, seq, _ := parseSpoolName(filepath.Base(path))
	var tmps [2]string
	defer func() {
		for _, t := range tmps {
			if t != "" {
				_ = os.Remove(t)
			}
		}
	}()
	var final [2]string
	for i, h := range halves {
		// The parent's sequence number keeps the halves where it was in the queue.
		name := fmt.Sprintf("%020d_%s", seq, h.id)
		for _, n := range h.counts {
			name += "_" + strconv.Itoa(n)
		}
		final[i] = filepath.Join(s.dir, name+".gz")
		tmps[i] = final[i] + ".tmp"
		if err := writeSynced(tmps[i], h.gz); err != nil {
			return err
		}
	}
	for i := range halves {
		if err := os.Rename(tmps[i], final[i]); err != nil {
			if i == 1 {
				_ = os.Remove(final[0])
			}
			return err
		}
		tmps[i] = ""
	}
	syncDir(s.dir)
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		// Both halves are on disk beside the batch: openSpool keeps the halves after a restart.
		return err
	}
	parent := s.entries[at]
	s.bytes -= parent.size
	delete(s.claimed, path)
	var news []spoolEntry
	for i, h := range halves {
		h.path = final[i]
		size := int64(len(h.gz))
		news = append(news, spoolEntry{path: h.path, id: h.id, size: size, counts: h.counts})
		s.bytes += size
		s.claimed[h.path] = true
	}
	s.entries = slices.Replace(s.entries, at, at+1, news...)
	s.publish()
	return nil
}

func writeSynced(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// syncDir makes renames in dir durable before the next step depends on them.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}

// evictOldest removes the oldest batch that is not being sent. Caller holds mu.
func (s *spool) evictOldest() bool {
	for i, e := range s.entries {
		if s.claimed[e.path] {
			continue
		}
		_ = os.Remove(e.path)
		s.entries = slices.Delete(s.entries, i, i+1)
		s.bytes -= e.size
		s.countDropped(e.counts)
		s.publish()
		return true
	}
	return false
}

func (s *spool) countDropped(c Counts) {
	for k, n := range c {
		s.m.Dropped[k].Add(uint64(n))
	}
}

// claimOldest returns the oldest unclaimed batch and marks it as being sent.
func (s *spool) claimOldest() (*item, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := 0; i < len(s.entries); i++ {
		e := s.entries[i]
		if s.claimed[e.path] {
			continue
		}
		gz, err := os.ReadFile(e.path)
		if err != nil {
			// An unreadable file cannot be sent: forget it and count its samples as dropped.
			_ = os.Remove(e.path)
			s.entries = slices.Delete(s.entries, i, i+1)
			s.bytes -= e.size
			s.countDropped(e.counts)
			s.publish()
			i--
			continue
		}
		s.claimed[e.path] = true
		return &item{id: e.id, gz: gz, counts: e.counts, path: e.path}, nil
	}
	return nil, nil
}

// claim marks a batch just written by the sender itself as being sent.
func (s *spool) claim(path string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.claimed[path] = true
}

// release forgets a claim; with remove, the batch leaves the spool.
func (s *spool) release(path string, remove bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.claimed, path)
	if !remove {
		return
	}
	_ = os.Remove(path)
	for i, e := range s.entries {
		if e.path == path {
			s.entries = slices.Delete(s.entries, i, i+1)
			s.bytes -= e.size
			break
		}
	}
	s.publish()
}

func (s *spool) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.entries)
}

// clear deletes every spooled batch (claimed ones too) and returns their sample counts.
func (s *spool) clear() Counts {
	s.mu.Lock()
	defer s.mu.Unlock()
	var total Counts
	for _, e := range s.entries {
		_ = os.Remove(e.path)
		for k, n := range e.counts {
			total[k] += n
		}
	}
	s.entries, s.bytes, s.claimed = nil, 0, map[string]bool{}
	s.publish()
	return total
}

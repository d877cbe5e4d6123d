package mesh

import (
	"slices"
	"sync"
	"time"

	"stormwatch/agents/internal/sample"
)

// Group is a quorum group: the latency of a round is the K-th fastest reply of its members.
type Group struct {
	Name    string
	K       int
	Members []string // agent ids
}

type groupState struct {
	g       Group
	idx     uint8
	unknown int // members that are not peers: they never reply
}

const (
	slotEmpty uint8 = iota
	slotOpen
	slotDone
)

type groupSlot struct {
	round    uint64
	state    uint8
	reported []bool
	rtts     []time.Duration // -1 when the member's sample was not ok
	count    int
}

// tracker collects, per round, the outcome of every group member and emits the quorum sample
// once all members have one (a reply, a loss or a corrupt echo).
type tracker struct {
	mu      sync.Mutex
	groups  []groupState
	byPeer  map[string][]memberPos
	slots   [][]groupSlot // [group][round % size]
	size    uint64
	clock   *roundClock
	payload int
	rec     *Recorder
}

type memberPos struct{ group, pos int }

func newTracker(groups []Group, peers map[string]bool, rec *Recorder, clock *roundClock, payload int, ringSize int) *tracker {
	t := &tracker{byPeer: map[string][]memberPos{}, size: uint64(ringSize), clock: clock, payload: payload, rec: rec}
	for _, g := range groups {
		if g.K <= 0 || g.K > len(g.Members) || len(g.Members) > 255 {
			continue
		}
		st := groupState{g: g, idx: rec.GroupIndex(g.Name)}
		for pos, m := range g.Members {
			if peers[m] {
				t.byPeer[m] = append(t.byPeer[m], memberPos{group: len(t.groups), pos: pos})
			} else {
				st.unknown++
			}
		}
		t.groups = append(t.groups, st)
		slots := make([]groupSlot, ringSize)
		for i := range slots {
			slots[i].reported = make([]bool, len(g.Members))
			slots[i].rtts = make([]time.Duration, len(g.Members))
		}
		t.slots = append(t.slots, slots)
	}
	return t
}

// report records peer's outcome of round; rtt < 0 means no valid reply.
func (t *tracker) report(peer string, round uint64, rtt time.Duration) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, mp := range t.byPeer[peer] {
		gs := &t.groups[mp.group]
		s := &t.slots[mp.group][round%t.size]
		switch {
		case s.state != slotEmpty && s.round > round:
			continue // older than the ring: that round was already emitted
		case s.round == round && s.state == slotDone:
			continue
		case s.round == round && s.state == slotOpen:
		default:
			if s.state == slotOpen {
				t.emit(gs, s) // evicted before completion: what is missing never arrived
			}
			s.state, s.round, s.count = slotOpen, round, gs.unknown
			clear(s.reported)
		}
		if s.reported[mp.pos] {
			continue
		}
		s.reported[mp.pos] = true
		s.rtts[mp.pos] = rtt
		s.count++
		if s.count == len(gs.g.Members) {
			t.emit(gs, s)
		}
	}
}

// emit writes the quorum sample of a slot and frees it. Caller holds mu.
func (t *tracker) emit(gs *groupState, s *groupSlot) {
	var ok []time.Duration
	for i, r := range s.reported {
		if r && s.rtts[i] >= 0 {
			ok = append(ok, s.rtts[i])
		}
	}
	k, n := gs.g.K, len(gs.g.Members)
	start := t.clock.start(s.round)
	if len(ok) >= k {
		slices.Sort(ok)
		t.rec.AddQuorum(start, s.round, t.payload, gs.idx, k, n, ok[k-1], sample.StatusOK)
	} else {
		t.rec.AddQuorum(start, s.round, t.payload, gs.idx, k, n, 0, sample.StatusTimeout)
	}
	s.state = slotDone
}

// DefaultGroups builds the groups used when the server sends none: a majority of the agent's
// zone (itself included) and a majority across the zones of its region, one member per zone
// (seed 003 §4.1 measures exactly these two quorums).
func DefaultGroups(selfID string, peers []Peer) []Group {
	var self *Peer
	for i := range peers {
		if peers[i].ID == selfID {
			self = &peers[i]
		}
	}
	if self == nil {
		return nil
	}
	var out []Group
	var zone []string
	for _, p := range peers {
		if p.Zone == self.Zone && p.Region == self.Region && p.Provider == self.Provider {
			zone = append(zone, p.ID)
		}
	}
	if len(zone) >= 2 {
		out = append(out, Group{Name: "zone-majority", K: len(zone)/2 + 1, Members: zone})
	}
	byZone := map[string]string{self.Zone: self.ID}
	zones := []string{self.Zone}
	sorted := slices.Clone(peers)
	slices.SortFunc(sorted, func(a, b Peer) int {
		if a.Name < b.Name {
			return -1
		} else if a.Name > b.Name {
			return 1
		}
		return 0
	})
	for _, p := range sorted {
		if p.Region != self.Region || p.Provider != self.Provider {
			continue
		}
		if _, seen := byZone[p.Zone]; !seen {
			byZone[p.Zone] = p.ID
			zones = append(zones, p.Zone)
		}
	}
	if len(zones) >= 2 {
		members := make([]string, 0, len(zones))
		for _, z := range zones {
			members = append(members, byZone[z])
		}
		out = append(out, Group{Name: "region-majority", K: len(members)/2 + 1, Members: members})
	}
	return out
}

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
	key     uint16 // the recorder's quorum key of (name, k, n)
	unknown int    // members that are not peers: they never reply
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
	unasked  bool // a member was not sent the round: it has no quorum sample
}

// notAsked is reported for a member the round was not sent to (its link was not ready).
const notAsked time.Duration = -2

// tracker collects, per round, the outcome of every group member and emits the quorum sample
// once all members have one (a reply, a loss, a corrupt echo, or no message at all).
type tracker struct {
	mu      sync.Mutex
	groups  []groupState
	byPeer  [][]memberPos // indexed by the recorder's peer index
	slots   [][]groupSlot // [group][round % size]
	size    uint64
	clock   *roundClock
	payload int
	rec     *Recorder
	scratch []time.Duration // the ok replies of the slot being emitted
}

type memberPos struct{ group, pos int }

// newTracker builds the tracker of groups; peers maps the ids of the links to their recorder
// indices.
func newTracker(groups []Group, peers map[string]uint16, rec *Recorder, clock *roundClock, payload int, ringSize int) *tracker {
	t := &tracker{size: uint64(ringSize), clock: clock, payload: payload, rec: rec}
	most := 0
	for _, g := range groups {
		if g.K <= 0 || g.K > len(g.Members) || len(g.Members) > 255 {
			continue
		}
		st := groupState{g: g, key: rec.QuorumKey(g.Name, g.K, len(g.Members))}
		for pos, m := range g.Members {
			idx, ok := peers[m]
			if !ok {
				st.unknown++
				continue
			}
			for int(idx) >= len(t.byPeer) {
				t.byPeer = append(t.byPeer, nil)
			}
			t.byPeer[idx] = append(t.byPeer[idx], memberPos{group: len(t.groups), pos: pos})
		}
		t.groups = append(t.groups, st)
		slots := make([]groupSlot, ringSize)
		for i := range slots {
			slots[i].reported = make([]bool, len(g.Members))
			slots[i].rtts = make([]time.Duration, len(g.Members))
		}
		t.slots = append(t.slots, slots)
		most = max(most, len(g.Members))
	}
	t.scratch = make([]time.Duration, 0, most)
	return t
}

// report records the outcome of round for the peer of recorder index peer; rtt < 0 means no
// valid reply.
func (t *tracker) report(peer uint16, round uint64, rtt time.Duration) {
	if t == nil || int(peer) >= len(t.byPeer) {
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
			s.state, s.round, s.count, s.unasked = slotOpen, round, gs.unknown, false
			clear(s.reported)
		}
		if s.reported[mp.pos] {
			continue
		}
		s.reported[mp.pos] = true
		s.rtts[mp.pos] = rtt
		s.unasked = s.unasked || rtt == notAsked
		s.count++
		if s.count == len(gs.g.Members) {
			t.emit(gs, s)
		}
	}
}

// emit writes the quorum sample of a slot and frees it. Caller holds mu.
func (t *tracker) emit(gs *groupState, s *groupSlot) {
	s.state = slotDone
	if s.unasked {
		return
	}
	ok := t.scratch[:0]
	for i, r := range s.reported {
		if r && s.rtts[i] >= 0 {
			ok = append(ok, s.rtts[i])
		}
	}
	k := gs.g.K
	start := t.clock.start(s.round)
	if len(ok) >= k {
		slices.Sort(ok)
		t.rec.AddQuorum(start, s.round, t.payload, gs.key, ok[k-1], sample.StatusOK)
	} else {
		t.rec.AddQuorum(start, s.round, t.payload, gs.key, 0, sample.StatusTimeout)
	}
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

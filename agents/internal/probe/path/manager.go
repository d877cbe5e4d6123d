package path

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"hash/fnv"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"
)

// UDPPort is where UDP traces aim: a port nothing listens on, so the destination answers
// port unreachable (the traceroute convention).
const UDPPort = 33434

// Target is a peer to trace to: its id and its mesh address (host:port).
type Target struct {
	ID      string
	Address string
}

// Request is a trace the server asks for: to a peer, now, for a reason.
type Request struct {
	ID      string
	Peer    string
	Trigger string
}

// Settings come from the server's config.
type Settings struct {
	Interval time.Duration // 0: no scheduled traces
	Proto    Proto
	Targets  []Target  // the peers, this agent excluded
	Requests []Request // asked for now; each is traced once, ahead of the schedule
}

// HopOut and TraceOut are a trace as POST /api/v1/ingest/paths takes it.
type HopOut struct {
	TTL      int      `json:"ttl"`
	Addrs    []string `json:"addrs"`
	Sent     int      `json:"sent"`
	Lost     int      `json:"lost"`
	RTTMinUS *int64   `json:"rtt_min_us,omitempty"`
	RTTMedUS *int64   `json:"rtt_med_us,omitempty"`
	RTTMaxUS *int64   `json:"rtt_max_us,omitempty"`
	Reached  bool     `json:"reached"`
}

type TraceOut struct {
	ID         string   `json:"id"`
	RequestID  string   `json:"request_id,omitempty"`
	DstAgentID string   `json:"dst_agent_id"`
	DstAddress string   `json:"dst_address"`
	StartedAt  string   `json:"started_at"`
	Proto      Proto    `json:"proto"`
	Trigger    string   `json:"trigger"`
	Reached    bool     `json:"reached"`
	ElapsedMs  int64    `json:"elapsed_ms"`
	Hops       []HopOut `json:"hops"`
}

// Encode turns a trace into what the server takes.
func Encode(t Trace, dstID, trigger string) TraceOut {
	out := TraceOut{ID: newID(), DstAgentID: dstID, DstAddress: t.Dst.Addr().String(),
		StartedAt: t.Started.UTC().Format(time.RFC3339Nano), Proto: t.Proto, Trigger: trigger,
		Reached: t.Reached, ElapsedMs: t.Elapsed.Milliseconds()}
	us := func(d time.Duration) *int64 { v := d.Microseconds(); return &v }
	for _, h := range t.Hops {
		o := HopOut{TTL: h.TTL, Addrs: []string{}, Sent: h.Sent, Lost: h.Lost, Reached: h.Reached}
		for _, a := range h.Addrs {
			o.Addrs = append(o.Addrs, a.String())
		}
		if h.Sent > h.Lost {
			o.RTTMinUS, o.RTTMedUS, o.RTTMaxUS = us(h.MinRTT), us(h.MedRTT), us(h.MaxRTT)
		}
		out.Hops = append(out.Hops, o)
	}
	return out
}

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // RFC 4122 variant
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// Sender ships traces; an error keeps them for the next try.
type Sender func(ctx context.Context, traces []TraceOut) error

// Manager traces the path to every peer every Interval, one trace at a time, each peer at
// its own offset in the interval (from a hash of the two ids) so a fleet's traces spread
// out; it ships each trace as it ends and keeps up to maxPending unsent ones through an
// API outage.
type Manager struct {
	SelfID  string
	Log     *slog.Logger
	Options Options // per-trace bounds; Proto comes from Settings

	mu       sync.Mutex
	settings Settings
	changed  chan struct{}
}

const (
	maxPending  = 200
	firstWithin = 30 * time.Second
)

func NewManager(selfID string, log *slog.Logger) *Manager {
	return &Manager{SelfID: selfID, Log: log, changed: make(chan struct{}, 1)}
}

// Apply takes new settings; the schedule follows at once.
func (m *Manager) Apply(s Settings) {
	m.mu.Lock()
	m.settings = s
	m.mu.Unlock()
	select {
	case m.changed <- struct{}{}:
	default:
	}
}

// offset is where in each interval the trace to peer falls.
func (m *Manager) offset(peer string, interval time.Duration) time.Duration {
	h := fnv.New64a()
	h.Write([]byte(m.SelfID + "|" + peer))
	return time.Duration(h.Sum64() % uint64(interval))
}

// Run traces and ships until ctx ends.
func (m *Manager) Run(ctx context.Context, send Sender) error {
	next := map[string]time.Time{} // peer -> when its next trace is due
	served := map[string]bool{}    // requests traced (the config lists them until the trace is in)
	var pending []TraceOut
	for {
		m.mu.Lock()
		s := m.settings
		m.mu.Unlock()
		now := time.Now()
		var due *Target
		wake := now.Add(time.Minute)
		if s.Interval > 0 {
			live := map[string]bool{}
			for i, t := range s.Targets {
				live[t.ID] = true
				at, ok := next[t.ID]
				if !ok {
					// A peer new to this agent (or this agent new) is traced within
					// firstWithin, spread by the hash, so a fresh fleet has its paths in the
					// first minute rather than the first interval; then once per interval.
					at = now.Add(m.offset(t.ID, min(s.Interval, firstWithin)))
					next[t.ID] = at
				}
				if !at.After(now) && due == nil {
					due = &s.Targets[i]
				} else if at.Before(wake) {
					wake = at
				}
			}
			for id := range next {
				if !live[id] {
					delete(next, id)
				}
			}
		}
		// A request goes ahead of the schedule, once; the config lists it until its trace is in.
		listed := map[string]bool{}
		for _, r := range s.Requests {
			listed[r.ID] = true
		}
		for id := range served {
			if !listed[id] {
				delete(served, id)
			}
		}
		var asked *Request
		for i, r := range s.Requests {
			if !served[r.ID] {
				asked = &s.Requests[i]
				break
			}
		}
		if asked != nil {
			served[asked.ID] = true
			addr := ""
			for _, t := range s.Targets {
				if t.ID == asked.Peer {
					addr = t.Address
				}
			}
			if addr == "" {
				m.Log.Warn("path trace asked for a peer this agent does not mesh with", "peer", asked.Peer)
			} else if tr, err := m.trace(ctx, Target{ID: asked.Peer, Address: addr}, s.Proto); err == nil {
				out := Encode(tr, asked.Peer, asked.Trigger)
				out.RequestID = asked.ID
				pending = append(pending, out)
			} else if ctx.Err() == nil {
				m.Log.Warn("path trace failed", "peer", asked.Peer, "address", addr, "err", err)
			}
		} else if due != nil {
			next[due.ID] = next[due.ID].Add(s.Interval)
			if tr, err := m.trace(ctx, *due, s.Proto); err == nil {
				pending = append(pending, Encode(tr, due.ID, "schedule"))
			} else if ctx.Err() == nil {
				m.Log.Warn("path trace failed", "peer", due.ID, "address", due.Address, "err", err)
			}
		}
		if len(pending) > 0 {
			if err := send(ctx, pending); err == nil {
				pending = nil
			} else if ctx.Err() == nil {
				m.Log.Warn("path traces not shipped; kept for the next try", "traces", len(pending), "err", err)
				if len(pending) > maxPending {
					pending = pending[len(pending)-maxPending:]
				}
			}
		}
		if due != nil || asked != nil {
			continue // more may be due
		}
		select {
		case <-ctx.Done():
			return nil
		case <-m.changed:
		case <-time.After(time.Until(wake)):
		}
	}
}

func (m *Manager) trace(ctx context.Context, t Target, proto Proto) (Trace, error) {
	host, portS, err := net.SplitHostPort(t.Address)
	if err != nil {
		return Trace{}, err
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return Trace{}, err
	}
	if len(addrs) == 0 {
		return Trace{}, &net.DNSError{Err: "no address", Name: host, IsNotFound: true}
	}
	port, _ := strconv.Atoi(portS)
	if proto == UDP {
		port = UDPPort
	}
	o := m.Options
	o.Proto = proto
	return Run(ctx, netip.AddrPortFrom(addrs[0].Unmap(), uint16(port)), o)
}

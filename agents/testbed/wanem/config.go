package wanem

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"sort"
	"time"
)

//go:embed rtt_table.json
var defaultTable []byte

// Table holds public inter-region round trips, each with its source.
type Table struct {
	Regions []struct {
		Key  string `json:"key"`
		City string `json:"city"`
	} `json:"regions"`
	IntraRegion struct {
		SameZoneRTTMs float64 `json:"same_zone_rtt_ms"`
		CrossAZRTTMs  float64 `json:"cross_az_rtt_ms"`
		Source        string  `json:"source"`
	} `json:"intra_region"`
	Pairs []struct {
		A      string  `json:"a"`
		B      string  `json:"b"`
		RTTMs  float64 `json:"rtt_ms"`
		Source string  `json:"source"`
	} `json:"pairs"`
}

// DefaultTable is the table built into the emulator (rtt_table.json).
func DefaultTable() (Table, error) {
	var t Table
	err := json.Unmarshal(defaultTable, &t)
	return t, err
}

// RTT is the table's round trip between two regions ("provider/region"), either order.
func (t Table) RTT(a, b string) (time.Duration, bool) {
	for _, p := range t.Pairs {
		if (p.A == a && p.B == b) || (p.A == b && p.B == a) {
			return ms(p.RTTMs), true
		}
	}
	return 0, false
}

func ms(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }

// Site is where an emulated agent runs.
type Site struct {
	Provider string `json:"provider"`
	Region   string `json:"region"`
	Zone     string `json:"zone"`
}

// RegionKey is "provider/region", the table's key.
func (s Site) RegionKey() string { return s.Provider + "/" + s.Region }

// ErrNoRoundTrip: the table has no row for a pair of regions.
var ErrNoRoundTrip = errors.New("no round trip in the table")

// PathRTT is the emulated round trip between two sites; ErrNoRoundTrip when the table has no
// row for their regions.
func (t Table) PathRTT(a, b Site) (time.Duration, error) {
	if a.RegionKey() == b.RegionKey() {
		if a.Zone == b.Zone {
			return ms(t.IntraRegion.SameZoneRTTMs), nil
		}
		return ms(t.IntraRegion.CrossAZRTTMs), nil
	}
	if d, ok := t.RTT(a.RegionKey(), b.RegionKey()); ok {
		return d, nil
	}
	return 0, fmt.Errorf("%w between %s and %s", ErrNoRoundTrip, a.RegionKey(), b.RegionKey())
}

// Config is the emulator's configuration file (JSON).
type Config struct {
	// APIURL and the API key in $STORMWATCH_WANEM_API_KEY resolve mesh senders (the agent id
	// in every frame) to their site through GET /api/v1/agents.
	APIURL     string      `json:"api_url"`
	Seed       uint64      `json:"seed"`
	JitterFrac float64     `json:"jitter_frac"`
	Spike      SpikeConfig `json:"spike"`
	Steps      StepConfig  `json:"steps"`
	Mesh       []MeshRoute `json:"mesh"`
	Storage    []Storage   `json:"storage"`
	// StatusFile receives the listen addresses and the step schedule once listening.
	StatusFile string `json:"status_file"`
	// TableFile replaces the built-in table when set.
	TableFile string `json:"table_file"`
}

// SpikeConfig: rare tail spikes of MinX..MaxX times the round trip (seed 003 Lesson 3),
// capped so that they stay replies rather than losses.
type SpikeConfig struct {
	Prob  float64 `json:"prob"`
	MinX  float64 `json:"min_x"`
	MaxX  float64 `json:"max_x"`
	CapMs float64 `json:"cap_ms"`
}

// StepConfig: Pairs cross-region region pairs step by MinMs..MaxMs of round trip at a random
// time between FirstAfterS and FirstAfterS+SpreadS after start (seed 003 Lesson 11). Only
// pairs of at least MinRTTMs step, so a step stays a small share of the pair's round trip.
// Pairs among the routes' own regions are drawn first, then pairs of a route's region with
// any other region of the table (agents elsewhere whose paths cross this emulator), so an
// emulator in front of one agent steps too. Directed adds steps of one direction each.
type StepConfig struct {
	Pairs       int            `json:"pairs"`
	MinRTTMs    float64        `json:"min_rtt_ms"`
	MinMs       float64        `json:"min_ms"`
	MaxMs       float64        `json:"max_ms"`
	FirstAfterS float64        `json:"first_after_s"`
	SpreadS     float64        `json:"spread_s"`
	Directed    []DirectedStep `json:"directed"`
}

// DirectedStep raises the round trip that agents in From measure to agents in To (both
// "provider/region") by DeltaMs, AfterS seconds after start; To's round trip to From stays.
type DirectedStep struct {
	From    string  `json:"from"`
	To      string  `json:"to"`
	DeltaMs float64 `json:"delta_rtt_ms"`
	AfterS  float64 `json:"after_s"`
}

// Check rejects directed steps the emulator could not apply: a region pair the table has no
// round trip for passes through undelayed, so it cannot step either.
func (c StepConfig) Check(t Table) error {
	for i, d := range c.Directed {
		if d.From == "" || d.To == "" {
			return fmt.Errorf("steps.directed[%d]: from and to are required (provider/region)", i)
		}
		if d.From != d.To {
			if _, ok := t.RTT(d.From, d.To); !ok {
				return fmt.Errorf("steps.directed[%d]: %w between %s and %s", i, ErrNoRoundTrip, d.From, d.To)
			}
		}
		if d.AfterS < 0 {
			return fmt.Errorf("steps.directed[%d]: after_s must not be negative", i)
		}
	}
	return nil
}

// MeshRoute is one agent's echo listener behind the emulator.
type MeshRoute struct {
	Name     string `json:"name"`
	Listen   string `json:"listen"`
	Upstream string `json:"upstream"`
	Site
}

// Storage is an object-storage endpoint behind the emulator with its own profile.
type Storage struct {
	Name       string  `json:"name"`
	Listen     string  `json:"listen"`
	Upstream   string  `json:"upstream"`
	RTTMs      float64 `json:"rtt_ms"`
	JitterFrac float64 `json:"jitter_frac"`
	MbitPerS   float64 `json:"mbit_per_s"`
}

// LoadConfig reads a configuration file.
func LoadConfig(path string) (Config, error) {
	var c Config
	b, err := os.ReadFile(path)
	if err != nil {
		return c, err
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// ScheduledStep is a step of one region pair, as written to the status file. A directed step
// moves only the round trips that agents in A measure to agents in B.
type ScheduledStep struct {
	A        string    `json:"a"`
	B        string    `json:"b"`
	Directed bool      `json:"directed"`
	At       time.Time `json:"at"`
	DeltaMs  float64   `json:"delta_rtt_ms"`
}

// Applies tells whether the step moves the path from agents in src to a route in dst.
func (s ScheduledStep) Applies(src, dst string) bool {
	if s.Directed {
		return s.A == src && s.B == dst
	}
	return (s.A == src && s.B == dst) || (s.A == dst && s.B == src)
}

// PlanSteps picks the stepping region pairs (with a round trip of at least c.MinRTTMs by rtt)
// and their times: pairs among the routes' regions first, then pairs of a route's region with
// one of others (the table's regions); c.Directed follow as they are.
func PlanSteps(c StepConfig, routes []MeshRoute, others []string, rtt func(a, b string) (time.Duration, bool), start time.Time, seed uint64) []ScheduledStep {
	own := map[string]bool{}
	for _, r := range routes {
		own[r.RegionKey()] = true
	}
	keys := sortedKeys(own)
	away := map[string]bool{}
	for _, k := range others {
		if !own[k] {
			away[k] = true
		}
	}
	awayKeys := sortedKeys(away)
	long := func(a, b string) bool { d, ok := rtt(a, b); return ok && d >= ms(c.MinRTTMs) }
	var inner, outer [][2]string
	for i := range keys {
		for j := i + 1; j < len(keys); j++ {
			if long(keys[i], keys[j]) {
				inner = append(inner, [2]string{keys[i], keys[j]})
			}
		}
		for _, k := range awayKeys {
			if long(keys[i], k) {
				outer = append(outer, [2]string{min(keys[i], k), max(keys[i], k)})
			}
		}
	}
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	rng.Shuffle(len(inner), func(i, j int) { inner[i], inner[j] = inner[j], inner[i] })
	rng.Shuffle(len(outer), func(i, j int) { outer[i], outer[j] = outer[j], outer[i] })
	pairs := append(inner, outer...)
	var out []ScheduledStep
	for i := 0; i < c.Pairs && i < len(pairs); i++ {
		at := start.Add(time.Duration((c.FirstAfterS + rng.Float64()*c.SpreadS) * float64(time.Second)))
		delta := c.MinMs + rng.Float64()*(c.MaxMs-c.MinMs)
		out = append(out, ScheduledStep{A: pairs[i][0], B: pairs[i][1], At: at.UTC(), DeltaMs: delta})
	}
	for _, d := range c.Directed {
		at := start.Add(time.Duration(d.AfterS * float64(time.Second)))
		out = append(out, ScheduledStep{A: d.From, B: d.To, Directed: true, At: at.UTC(), DeltaMs: d.DeltaMs})
	}
	return out
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// RegionKeys are the table's region keys.
func (t Table) RegionKeys() []string {
	out := make([]string, 0, len(t.Regions))
	for _, r := range t.Regions {
		out = append(out, r.Key)
	}
	return out
}

// seedFor derives a link's random seed from the emulator's seed and the path's name.
func seedFor(seed uint64, name string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	return seed ^ h.Sum64()
}

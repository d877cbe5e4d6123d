package wanem

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// Mesh frames start with magic u32 | payload length u32 | round u64 | sender id [16]
// (agents/internal/probe/mesh/wire.go): the emulator reads the sender from the first header.
const (
	meshHeaderLen = 32
	meshMagic     = 0x53574d31
)

// Resolver maps a mesh sender id (the agent's UUID as 16 bytes) to its site.
type Resolver interface {
	Resolve(ctx context.Context, sender [16]byte) (Site, error)
}

// Emulator runs every proxy of a configuration.
type Emulator struct {
	cfg      Config
	table    Table
	resolver Resolver
	log      *slog.Logger
	start    time.Time
	steps    []ScheduledStep
	proxies  []*Proxy
	names    []string

	mu      sync.Mutex
	links   map[string]*Link
	unknown map[[2]string]bool // region pairs without a row, logged once each
}

// New prepares the emulator; Listen opens its listeners.
func New(cfg Config, table Table, r Resolver, log *slog.Logger) *Emulator {
	if cfg.Seed == 0 {
		cfg.Seed = uint64(time.Now().UnixNano())
	}
	e := &Emulator{cfg: cfg, table: table, resolver: r, log: log, start: time.Now(), links: map[string]*Link{},
		unknown: map[[2]string]bool{}}
	e.steps = PlanSteps(cfg.Steps, cfg.Mesh, table.RegionKeys(), table.RTT, e.start, cfg.Seed)
	return e
}

// Steps is the step schedule.
func (e *Emulator) Steps() []ScheduledStep { return e.steps }

// Status is what the status file holds.
type Status struct {
	Mesh    map[string]string `json:"mesh"`    // route name -> listen address
	Storage map[string]string `json:"storage"` // endpoint name -> listen address
	Steps   []ScheduledStep   `json:"steps"`
	Start   time.Time         `json:"start"`
}

// Listen opens every listener and returns where each listens.
func (e *Emulator) Listen() (Status, error) {
	st := Status{Mesh: map[string]string{}, Storage: map[string]string{}, Steps: e.steps, Start: e.start.UTC()}
	for _, r := range e.cfg.Mesh {
		dst := r
		p := &Proxy{Upstream: r.Upstream, PeekBytes: meshHeaderLen, Log: e.log, Echo: true,
			Choose: func(ctx context.Context, peek []byte) (*Link, *Link, error) { return e.meshLinks(ctx, peek, dst) }}
		if err := p.Listen(r.Listen); err != nil {
			return st, fmt.Errorf("mesh route %s: %w", r.Name, err)
		}
		e.proxies = append(e.proxies, p)
		e.names = append(e.names, r.Name)
		st.Mesh[r.Name] = p.Addr().String()
	}
	for _, s := range e.cfg.Storage {
		up, down := e.storageLinks(s)
		p := &Proxy{Upstream: s.Upstream, Log: e.log,
			Choose: func(context.Context, []byte) (*Link, *Link, error) { return up, down, nil }}
		if err := p.Listen(s.Listen); err != nil {
			return st, fmt.Errorf("storage endpoint %s: %w", s.Name, err)
		}
		e.proxies = append(e.proxies, p)
		e.names = append(e.names, s.Name)
		st.Storage[s.Name] = p.Addr().String()
	}
	return st, nil
}

// Serve runs the proxies until ctx ends.
func (e *Emulator) Serve(ctx context.Context) error {
	errs := make(chan error, len(e.proxies))
	for _, p := range e.proxies {
		go func() { errs <- p.Serve(ctx) }()
	}
	var all []error
	for range e.proxies {
		if err := <-errs; err != nil {
			all = append(all, err)
		}
	}
	return errors.Join(all...)
}

func (e *Emulator) spiky(l *Link) {
	l.JitterFrac = e.cfg.JitterFrac
	l.SpikeProb = e.cfg.Spike.Prob
	l.SpikeMinX, l.SpikeMaxX = e.cfg.Spike.MinX, e.cfg.Spike.MaxX
	l.SpikeCap = ms(e.cfg.Spike.CapMs)
}

// meshLinks finds the sender of a new mesh connection and the links from its site to dst's.
// Each direction of each (sender, destination) path keeps its own link, so its random draws
// and steps belong to that path.
func (e *Emulator) meshLinks(ctx context.Context, peek []byte, dst MeshRoute) (*Link, *Link, error) {
	if len(peek) < meshHeaderLen || uint32(peek[0])<<24|uint32(peek[1])<<16|uint32(peek[2])<<8|uint32(peek[3]) != meshMagic {
		return nil, nil, errors.New("not a mesh frame")
	}
	var sender [16]byte
	copy(sender[:], peek[16:32])
	src, err := e.resolver.Resolve(ctx, sender)
	if err != nil {
		return nil, nil, err
	}
	id := hex.EncodeToString(sender[:])
	rtt, err := e.table.PathRTT(src, dst.Site)
	if errors.Is(err, ErrNoRoundTrip) {
		// An agent from a region the table lacks (a real one joining the demo) still meshes:
		// its path carries nothing but the proxy's own cost.
		e.noteUnknown(src.RegionKey(), dst.RegionKey())
		return e.passLink(id + ">" + dst.Name), e.passLink(dst.Name + ">" + id), nil
	}
	if err != nil {
		return nil, nil, err
	}
	return e.link(id+">"+dst.Name, rtt/2, src.RegionKey(), dst.RegionKey()),
		e.link(dst.Name+">"+id, rtt/2, src.RegionKey(), dst.RegionKey()), nil
}

func (e *Emulator) link(name string, oneWay time.Duration, a, b string) *Link {
	e.mu.Lock()
	defer e.mu.Unlock()
	if l, ok := e.links[name]; ok {
		return l
	}
	l := NewLink(oneWay, seedFor(e.cfg.Seed, name))
	e.spiky(l)
	for _, s := range e.steps {
		if s.Applies(a, b) {
			// Half the round-trip step in each direction.
			l.AddStep(Step{At: s.At, Delta: ms(s.DeltaMs / 2)})
		}
	}
	e.links[name] = l
	return l
}

// passLink is a link that adds no delay: no base, jitter, spikes or steps.
func (e *Emulator) passLink(name string) *Link {
	e.mu.Lock()
	defer e.mu.Unlock()
	if l, ok := e.links[name]; ok {
		return l
	}
	l := NewLink(0, seedFor(e.cfg.Seed, name))
	e.links[name] = l
	return l
}

// noteUnknown logs a region pair without a table row the first time it is seen.
func (e *Emulator) noteUnknown(src, dst string) {
	k := [2]string{min(src, dst), max(src, dst)}
	e.mu.Lock()
	seen := e.unknown[k]
	e.unknown[k] = true
	e.mu.Unlock()
	if !seen && e.log != nil {
		e.log.Info("wanem: no round trip in the table for this region pair; passing it through without delay",
			"src", src, "dst", dst)
	}
}

func (e *Emulator) storageLinks(s Storage) (*Link, *Link) {
	mk := func(dir string) *Link {
		l := NewLink(ms(s.RTTMs/2), seedFor(e.cfg.Seed, s.Name+dir))
		l.JitterFrac = s.JitterFrac
		l.BytesPerS = s.MbitPerS * 1e6 / 8
		return l
	}
	return mk(">"), mk("<")
}

// APIResolver resolves senders from the Stormwatch API's agent list (provider, region, zone
// of each agent's metadata), refreshed when an unknown sender appears.
type APIResolver struct {
	URL    string
	APIKey string
	HTTP   *http.Client

	mu      sync.Mutex
	sites   map[[16]byte]Site
	fetched time.Time
}

// Resolve implements Resolver.
func (r *APIResolver) Resolve(ctx context.Context, sender [16]byte) (Site, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s, ok := r.sites[sender]; ok {
		return s, nil
	}
	// A new agent enrolled since the last fetch: fetch again, at most once a second.
	if wait := time.Second - time.Since(r.fetched); wait > 0 {
		select {
		case <-ctx.Done():
			return Site{}, ctx.Err()
		case <-time.After(wait):
		}
	}
	if err := r.fetch(ctx); err != nil {
		return Site{}, err
	}
	if s, ok := r.sites[sender]; ok {
		return s, nil
	}
	return Site{}, fmt.Errorf("unknown mesh sender %x", sender)
}

func (r *APIResolver) fetch(ctx context.Context) error {
	r.fetched = time.Now()
	c := r.HTTP
	if c == nil {
		c = &http.Client{Timeout: 10 * time.Second}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(r.URL, "/")+"/api/v1/agents", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+r.APIKey)
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /api/v1/agents: HTTP %d", resp.StatusCode)
	}
	var agents []struct {
		ID string `json:"id"`
		Site
	}
	if err := json.NewDecoder(resp.Body).Decode(&agents); err != nil {
		return err
	}
	sites := map[[16]byte]Site{}
	for _, a := range agents {
		b, err := hex.DecodeString(strings.ReplaceAll(a.ID, "-", ""))
		if err != nil || len(b) != 16 {
			continue
		}
		var k [16]byte
		copy(k[:], b)
		sites[k] = a.Site
	}
	r.sites = sites
	return nil
}

// WriteStatus writes the status file atomically.
func WriteStatus(path string, st Status) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

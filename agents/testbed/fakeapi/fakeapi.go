// Package fakeapi is an in-memory stand-in for the agent endpoints of the Stormwatch API
// (docs/api.md): enrollment, config with ETag, self update and idempotent ingest. Tests and
// bench/agent use it to exercise agents without the backend.
package fakeapi

import (
	"compress/gzip"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"stormwatch/agents/internal/client"
)

// MeshRow is one stored mesh sample.
type MeshRow struct {
	Src, Dst     string
	TimeUS       int64
	Round        int64
	PayloadBytes int
	RTTUS        int64 // -1 when null
	Status       int
}

// QuorumRow is one stored quorum sample.
type QuorumRow struct {
	Src, Group string
	TimeUS     int64
	Round      int64
	K, N       int
	LatencyUS  int64 // -1 when null
	Status     int
}

type agentRec struct {
	id, name, token, meshAddr string
	tputAddr                  string
	md                        client.Metadata
}

// Experiment is a throughput experiment the server lists for its two agents.
type Experiment struct {
	ID, InitiatorID, ResponderID string
	Proto                        string
	StartAt                      time.Time
	DurationS, Streams           int
	UDPRateBitsPerS              int64
	UDPDatagramBytes             int
	Token                        string // base64url
}

// ThroughputRow is one stored throughput sample.
type ThroughputRow struct {
	Src, Peer    string // the shipping agent (the receiver) and the sender
	TimeUS       int64
	Proto        string
	ExperimentID string
	Direction    string
	BytesPerS    float64
	LossRatio    *float64
	JitterUS     *int64
}

// Server implements the endpoints.
type Server struct {
	EnrollmentToken string

	mu        sync.Mutex
	agents    []*agentRec
	mesh      client.MeshConfig
	shipper   client.ShipperConfig
	pollS     int
	storage   []json.RawMessage
	batches   map[string]bool
	meshRows  []MeshRow
	quorum    []QuorumRow
	storageN  int
	exps      []Experiment
	tputRows  []ThroughputRow
	KeepRows  bool // keep every mesh row (tests); otherwise only RTTs via OnMesh
	OnMesh    func(rows []MeshRow)
	down      atomic.Int32 // 0 up, 1 answer 503 with Retry-After, 2 cut connections
	Requests  atomic.Int64
	Duplicate atomic.Int64
	Refused   atomic.Int64 // ingest requests failed on purpose by SetDown
}

// New returns a server with the given mesh parameters.
func New(enrollToken string, rateHz float64, payload, timeoutMs int) *Server {
	return &Server{EnrollmentToken: enrollToken, batches: map[string]bool{}, pollS: 1, KeepRows: true,
		mesh:    client.MeshConfig{Enabled: true, RateHz: rateHz, PayloadBytes: payload, TimeoutMs: timeoutMs},
		shipper: client.ShipperConfig{MaxBatchSamples: 20000, MaxBatchAgeMs: 500}}
}

// SetGroups sets the quorum groups sent to agents (nil: agents use their defaults).
func (s *Server) SetGroups(g []client.MeshGroup) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mesh.Groups = g
}

// SetShipper sets the shipper section of the served config (the API's default is 20000
// samples and 2000 ms).
func (s *Server) SetShipper(maxSamples, maxAgeMs int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.shipper = client.ShipperConfig{MaxBatchSamples: maxSamples, MaxBatchAgeMs: maxAgeMs}
}

// SetPollS sets config_poll_s of the served config.
func (s *Server) SetPollS(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pollS = n
}

// SetDown makes ingest fail: 0 up, 1 with 503 and Retry-After, 2 by cutting the connection.
func (s *Server) SetDown(mode int32) { s.down.Store(mode) }

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// ServeHTTP routes the agent endpoints.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.Requests.Add(1)
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/api/v1/agents/enroll":
		s.enroll(w, r)
	case r.Method == http.MethodPatch && r.URL.Path == "/api/v1/agent/self":
		s.patch(w, r)
	case r.Method == http.MethodGet && r.URL.Path == "/api/v1/agent/config":
		s.config(w, r)
	case r.Method == http.MethodPost && r.URL.Path == "/api/v1/ingest/batches":
		s.ingest(w, r)
	default:
		http.NotFound(w, r)
	}
}

func (s *Server) auth(r *http.Request) *agentRec {
	tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.agents {
		if a.token == tok {
			return a
		}
	}
	return nil
}

func (s *Server) enroll(w http.ResponseWriter, r *http.Request) {
	var req client.EnrollRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.EnrollmentToken != s.EnrollmentToken {
		http.Error(w, "bad enrollment", http.StatusUnauthorized)
		return
	}
	s.mu.Lock()
	var a *agentRec
	for _, x := range s.agents {
		if x.name == req.Name {
			a = x // enrolling again re-issues the token
		}
	}
	if a == nil {
		a = &agentRec{id: newID(), name: req.Name}
		s.agents = append(s.agents, a)
	}
	a.token = "swa_" + strings.ReplaceAll(newID(), "-", "")
	a.meshAddr, a.md = req.MeshAddress, req.Metadata
	s.mu.Unlock()
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(client.EnrollResponse{AgentID: a.id, AgentToken: a.token, OrgID: "00000000-0000-4000-8000-000000000000"})
}

func (s *Server) patch(w http.ResponseWriter, r *http.Request) {
	a := s.auth(r)
	if a == nil {
		http.Error(w, "unknown token", http.StatusUnauthorized)
		return
	}
	var u client.SelfUpdate
	if err := json.NewDecoder(r.Body).Decode(&u); err != nil {
		http.Error(w, err.Error(), http.StatusUnprocessableEntity)
		return
	}
	s.mu.Lock()
	if u.MeshAddress != nil {
		a.meshAddr = *u.MeshAddress
	}
	if u.Metadata != nil {
		a.md = *u.Metadata
	}
	if u.ThroughputAddress != nil {
		a.tputAddr = *u.ThroughputAddress
	}
	s.mu.Unlock()
	_ = json.NewEncoder(w).Encode(map[string]string{"agent_id": a.id})
}

func (s *Server) config(w http.ResponseWriter, r *http.Request) {
	a := s.auth(r)
	if a == nil {
		http.Error(w, "unknown token", http.StatusUnauthorized)
		return
	}
	s.mu.Lock()
	cfg := client.AgentConfig{AgentID: a.id, ConfigPollS: s.pollS, Mesh: s.mesh, Shipper: s.shipper,
		Storage: client.StorageConfig{Targets: s.storage}}
	cfg.Mesh.Peers = nil
	for _, x := range s.agents {
		if x.meshAddr == "" {
			continue
		}
		cfg.Mesh.Peers = append(cfg.Mesh.Peers, client.MeshPeer{AgentID: x.id, Name: x.name, Address: x.meshAddr,
			Provider: x.md.Provider, Region: x.md.Region, Zone: x.md.Zone, Subnet: x.md.Subnet})
	}
	cfg.Throughput.Experiments = []client.ThroughputExperiment{}
	for _, e := range s.exps {
		x := client.ThroughputExperiment{ID: e.ID, Proto: e.Proto, StartAt: e.StartAt.UTC().Truncate(time.Second),
			DurationS: e.DurationS, Streams: e.Streams, UDPRateBitsPerS: e.UDPRateBitsPerS,
			UDPDatagramBytes: e.UDPDatagramBytes, Token: e.Token}
		switch a.id {
		case e.InitiatorID:
			x.Role, x.PeerAgentID = "initiator", e.ResponderID
			for _, p := range s.agents {
				if p.id == e.ResponderID {
					x.PeerAddress = p.tputAddr
				}
			}
		case e.ResponderID:
			x.Role, x.PeerAgentID = "responder", e.InitiatorID
		default:
			continue
		}
		cfg.Throughput.Experiments = append(cfg.Throughput.Experiments, x)
	}
	s.mu.Unlock()
	if cfg.Storage.Targets == nil {
		cfg.Storage.Targets = []json.RawMessage{}
	}
	body, _ := json.Marshal(cfg)
	sum := sha256.Sum256(body)
	cfg.Version = hex.EncodeToString(sum[:8])
	w.Header().Set("ETag", `"`+cfg.Version+`"`)
	if r.Header.Get("If-None-Match") == `"`+cfg.Version+`"` {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	_ = json.NewEncoder(w).Encode(cfg)
}

type batch struct {
	BatchID string `json:"batch_id"`
	AgentID string `json:"agent_id"`
	Mesh    *struct {
		Peers        []string `json:"peers"`
		TimeUS       []int64  `json:"time_us"`
		PeerIdx      []int    `json:"peer_idx"`
		Round        []int64  `json:"round"`
		PayloadBytes []int    `json:"payload_bytes"`
		RTTUS        []*int64 `json:"rtt_us"`
		Status       []int    `json:"status"`
	} `json:"mesh"`
	Quorum *struct {
		Groups    []string `json:"groups"`
		TimeUS    []int64  `json:"time_us"`
		GroupIdx  []int    `json:"group_idx"`
		Round     []int64  `json:"round"`
		K         []int    `json:"k"`
		N         []int    `json:"n"`
		LatencyUS []*int64 `json:"latency_us"`
		Status    []int    `json:"status"`
	} `json:"quorum"`
	Storage *struct {
		TimeUS []int64 `json:"time_us"`
	} `json:"storage"`
	Throughput *struct {
		Peers        []string   `json:"peers"`
		TimeUS       []int64    `json:"time_us"`
		PeerIdx      []int      `json:"peer_idx"`
		Proto        []string   `json:"proto"`
		ExperimentID []string   `json:"experiment_id"`
		Direction    []string   `json:"direction"`
		BytesPerS    []float64  `json:"bytes_per_s"`
		LossRatio    []*float64 `json:"loss_ratio"`
		JitterUS     []*int64   `json:"jitter_us"`
	} `json:"throughput"`
}

func (s *Server) ingest(w http.ResponseWriter, r *http.Request) {
	if s.down.Load() != 0 {
		s.Refused.Add(1)
	}
	switch s.down.Load() {
	case 1:
		w.Header().Set("Retry-After", "1")
		http.Error(w, "database unavailable", http.StatusServiceUnavailable)
		return
	case 2:
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				c.Close()
				return
			}
		}
	}
	a := s.auth(r)
	if a == nil {
		http.Error(w, "unknown token", http.StatusUnauthorized)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	var b batch
	if err := json.NewDecoder(body).Decode(&b); err != nil {
		http.Error(w, err.Error(), http.StatusUnprocessableEntity)
		return
	}
	if b.AgentID != a.id {
		http.Error(w, "agent_id is not the token's agent", http.StatusForbidden)
		return
	}
	var rows []MeshRow
	var qrows []QuorumRow
	if m := b.Mesh; m != nil {
		n := len(m.TimeUS)
		if len(m.PeerIdx) != n || len(m.Round) != n || len(m.PayloadBytes) != n || len(m.RTTUS) != n || len(m.Status) != n {
			http.Error(w, "mesh columns differ in length", http.StatusUnprocessableEntity)
			return
		}
		for i := range n {
			if m.PeerIdx[i] < 0 || m.PeerIdx[i] >= len(m.Peers) {
				http.Error(w, "mesh.peer_idx out of range at "+strconv.Itoa(i), http.StatusUnprocessableEntity)
				return
			}
			rtt := int64(-1)
			if m.RTTUS[i] != nil {
				rtt = *m.RTTUS[i]
			}
			if (m.Status[i] == 0) != (rtt >= 0) {
				http.Error(w, "mesh.rtt_us must be set exactly when status is 0", http.StatusUnprocessableEntity)
				return
			}
			rows = append(rows, MeshRow{Src: a.id, Dst: m.Peers[m.PeerIdx[i]], TimeUS: m.TimeUS[i], Round: m.Round[i],
				PayloadBytes: m.PayloadBytes[i], RTTUS: rtt, Status: m.Status[i]})
		}
	}
	if q := b.Quorum; q != nil {
		n := len(q.TimeUS)
		if len(q.GroupIdx) != n || len(q.Round) != n || len(q.K) != n || len(q.N) != n || len(q.LatencyUS) != n || len(q.Status) != n {
			http.Error(w, "quorum columns differ in length", http.StatusUnprocessableEntity)
			return
		}
		for i := range n {
			if q.GroupIdx[i] < 0 || q.GroupIdx[i] >= len(q.Groups) {
				http.Error(w, "quorum.group_idx out of range at "+strconv.Itoa(i), http.StatusUnprocessableEntity)
				return
			}
			if q.K[i] < 1 || q.K[i] > q.N[i] {
				http.Error(w, "quorum.k must be between 1 and n at "+strconv.Itoa(i), http.StatusUnprocessableEntity)
				return
			}
			lat := int64(-1)
			if q.LatencyUS[i] != nil {
				lat = *q.LatencyUS[i]
			}
			if (q.Status[i] == 0) != (lat >= 0) {
				http.Error(w, "quorum.latency_us must be set exactly when status is 0", http.StatusUnprocessableEntity)
				return
			}
			qrows = append(qrows, QuorumRow{Src: a.id, Group: q.Groups[q.GroupIdx[i]], TimeUS: q.TimeUS[i], Round: q.Round[i],
				K: q.K[i], N: q.N[i], LatencyUS: lat, Status: q.Status[i]})
		}
	}
	nStorage := 0
	if b.Storage != nil {
		nStorage = len(b.Storage.TimeUS)
	}
	var trows []ThroughputRow
	if tp := b.Throughput; tp != nil {
		n := len(tp.TimeUS)
		if len(tp.PeerIdx) != n || len(tp.Proto) != n || len(tp.ExperimentID) != n || len(tp.Direction) != n ||
			len(tp.BytesPerS) != n || len(tp.LossRatio) != n || len(tp.JitterUS) != n {
			http.Error(w, "throughput columns differ in length", http.StatusUnprocessableEntity)
			return
		}
		for i := range n {
			if tp.PeerIdx[i] < 0 || tp.PeerIdx[i] >= len(tp.Peers) {
				http.Error(w, "throughput.peer_idx out of range", http.StatusUnprocessableEntity)
				return
			}
			trows = append(trows, ThroughputRow{Src: a.id, Peer: tp.Peers[tp.PeerIdx[i]], TimeUS: tp.TimeUS[i], Proto: tp.Proto[i],
				ExperimentID: tp.ExperimentID[i], Direction: tp.Direction[i], BytesPerS: tp.BytesPerS[i],
				LossRatio: tp.LossRatio[i], JitterUS: tp.JitterUS[i]})
		}
	}
	key := a.id + "/" + b.BatchID
	s.mu.Lock()
	dup := s.batches[key]
	if !dup {
		s.batches[key] = true
		if s.KeepRows {
			s.meshRows = append(s.meshRows, rows...)
			s.quorum = append(s.quorum, qrows...)
		}
		s.storageN += nStorage
		s.tputRows = append(s.tputRows, trows...)
	}
	onMesh := s.OnMesh
	s.mu.Unlock()
	code := http.StatusAccepted
	if dup {
		s.Duplicate.Add(1)
		code = http.StatusOK
	} else if onMesh != nil {
		onMesh(rows)
	}
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"batch_id": b.BatchID, "duplicate": dup,
		"accepted": map[string]int{"mesh": len(rows), "quorum": len(qrows), "storage": nStorage, "throughput": len(trows)}})
}

// MeshRows returns a copy of the stored mesh rows.
func (s *Server) MeshRows() []MeshRow {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.meshRows)
}

// QuorumRows returns a copy of the stored quorum rows.
func (s *Server) QuorumRows() []QuorumRow {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.quorum)
}

// Schedule lists an experiment for its two agents from their next config on.
func (s *Server) Schedule(e Experiment) {
	s.mu.Lock()
	s.exps = append(s.exps, e)
	s.mu.Unlock()
}

// ThroughputAddress is the address an agent reported for its throughput probe ("" if none).
func (s *Server) ThroughputAddress(agentID string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.agents {
		if a.id == agentID {
			return a.tputAddr
		}
	}
	return ""
}

// ThroughputRows returns a copy of the stored throughput rows.
func (s *Server) ThroughputRows() []ThroughputRow {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.tputRows)
}

// AgentIDs maps agent names to ids.
func (s *Server) AgentIDs() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]string{}
	for _, a := range s.agents {
		out[a.name] = a.id
	}
	return out
}

// String summarises the server for logs.
func (s *Server) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf("fakeapi: %d agents, %d batches, %d mesh rows", len(s.agents), len(s.batches), len(s.meshRows))
}

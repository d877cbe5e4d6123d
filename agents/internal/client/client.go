// Package client talks to the Stormwatch API as an agent (docs/api.md, "Agents", "Ingest").
package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Metadata describes where the agent runs.
type Metadata struct {
	Provider     string `json:"provider,omitempty"`
	Region       string `json:"region,omitempty"`
	Zone         string `json:"zone,omitempty"`
	Subnet       string `json:"subnet,omitempty"`
	InstanceType string `json:"instance_type,omitempty"`
	PrivateIP    string `json:"private_ip,omitempty"`
	PublicIP     string `json:"public_ip,omitempty"`
}

// EnrollRequest is the body of POST /api/v1/agents/enroll.
type EnrollRequest struct {
	EnrollmentToken string   `json:"enrollment_token"`
	Name            string   `json:"name"`
	AgentVersion    string   `json:"agent_version"`
	MeshAddress     string   `json:"mesh_address"`
	Metadata        Metadata `json:"metadata"`
}

// EnrollResponse is its answer.
type EnrollResponse struct {
	AgentID    string `json:"agent_id"`
	AgentToken string `json:"agent_token"`
	OrgID      string `json:"org_id"`
}

// SelfUpdate is the body of PATCH /api/v1/agent/self; nil fields are left out.
type SelfUpdate struct {
	AgentVersion *string   `json:"agent_version,omitempty"`
	MeshAddress  *string   `json:"mesh_address,omitempty"`
	Metadata     *Metadata `json:"metadata,omitempty"`
	// ThroughputAddress is where peers reach the throughput probe; sent only when it listens.
	ThroughputAddress *string `json:"throughput_address,omitempty"`
}

// AgentConfig is GET /api/v1/agent/config.
type AgentConfig struct {
	Version     string           `json:"version"`
	AgentID     string           `json:"agent_id"`
	ConfigPollS int              `json:"config_poll_s"`
	Mesh        MeshConfig       `json:"mesh"`
	Storage     StorageConfig    `json:"storage"`
	Shipper     ShipperConfig    `json:"shipper"`
	Throughput  ThroughputConfig `json:"throughput"`
	Paths       PathsConfig      `json:"paths"`
}

// PathsConfig carries the traces the server asks for (docs/paths.md).
type PathsConfig struct {
	Requests []PathRequest `json:"requests"`
}

// PathRequest asks for one trace to a peer now, for a reason (trigger).
type PathRequest struct {
	ID      string `json:"id"`
	Peer    string `json:"peer"`
	Trigger string `json:"trigger"`
}

// ThroughputConfig lists the throughput experiments this agent takes part in.
type ThroughputConfig struct {
	Experiments []ThroughputExperiment `json:"experiments"`
}

// ThroughputExperiment is one experiment as the server lists it for this agent.
type ThroughputExperiment struct {
	ID               string    `json:"id"`
	Role             string    `json:"role"`
	PeerAgentID      string    `json:"peer_agent_id"`
	PeerAddress      string    `json:"peer_address"`
	Proto            string    `json:"proto"`
	StartAt          time.Time `json:"start_at"`
	DurationS        int       `json:"duration_s"`
	Streams          int       `json:"streams"`
	UDPRateBitsPerS  int64     `json:"udp_rate_bits_per_s"`
	UDPDatagramBytes int       `json:"udp_datagram_bytes"`
	Token            string    `json:"token"`
}

// MeshConfig is the mesh part of the agent config.
type MeshConfig struct {
	Enabled      bool    `json:"enabled"`
	RateHz       float64 `json:"rate_hz"`
	PayloadBytes int     `json:"payload_bytes"`
	TimeoutMs    int     `json:"timeout_ms"`
	// PathTraceIntervalS is how often to trace the path to each peer (0: only when asked).
	PathTraceIntervalS int         `json:"path_trace_interval_s"`
	PathTraceProto     string      `json:"path_trace_proto"`
	Peers              []MeshPeer  `json:"peers"`
	Groups             []MeshGroup `json:"groups"` // nil when the server sent none: the agent's defaults apply
}

// MeshPeer is one peer of the mesh, the agent itself included.
type MeshPeer struct {
	AgentID  string `json:"agent_id"`
	Name     string `json:"name"`
	Address  string `json:"address"`
	Provider string `json:"provider"`
	Region   string `json:"region"`
	Zone     string `json:"zone"`
	Subnet   string `json:"subnet"`
}

// MeshGroup is a quorum group.
type MeshGroup struct {
	Name    string   `json:"name"`
	K       int      `json:"k"`
	Members []string `json:"members"`
}

// StorageConfig carries the storage targets, passed raw to the storage probe.
type StorageConfig struct {
	Targets []json.RawMessage `json:"targets"`
}

// ShipperConfig sets how batches are cut.
type ShipperConfig struct {
	MaxBatchSamples int `json:"max_batch_samples"`
	MaxBatchAgeMs   int `json:"max_batch_age_ms"`
}

// IngestResult is the answer to a batch.
type IngestResult struct {
	BatchID   string         `json:"batch_id"`
	Accepted  map[string]int `json:"accepted"`
	Duplicate bool           `json:"duplicate"`
	// reason ("deleted_peer") -> section -> rows of the batch the API did not store
	SetAside map[string]map[string]int `json:"set_aside"`
}

// StatusError is a non-2xx answer.
type StatusError struct {
	Op         string
	Code       int
	RetryAfter time.Duration // from Retry-After, 0 when absent
	Body       string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s: HTTP %d: %s", e.Op, e.Code, e.Body)
}

// Retryable reports whether the same request may succeed later.
func (e *StatusError) Retryable() bool {
	return e.Code == http.StatusTooManyRequests || e.Code == http.StatusRequestTimeout || e.Code >= 500
}

// IsAgentDeleted reports whether the API answered that this agent was deleted (410 Gone):
// nothing it sends will ever be taken again under this identity.
func IsAgentDeleted(err error) bool {
	var se *StatusError
	return errors.As(err, &se) && se.Code == http.StatusGone
}

// IsRetryable reports whether err is worth retrying: network errors and retryable statuses.
func IsRetryable(err error) bool {
	var se *StatusError
	if errors.As(err, &se) {
		return se.Retryable()
	}
	return err != nil
}

// Client is an agent's API client.
type Client struct {
	base      *url.URL
	http      *http.Client
	userAgent string

	mu    sync.RWMutex
	token string
}

// New returns a client for apiURL; caFile adds trusted CAs (certificate checks stay on).
func New(apiURL, caFile, version string) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(apiURL, "/"))
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 4
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, err
		}
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: no certificates found", caFile)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &Client{base: u, http: &http.Client{Transport: tr, Timeout: 30 * time.Second},
		userAgent: "stormwatch-agent/" + version}, nil
}

// SetToken sets the agent token sent with every authenticated request.
func (c *Client) SetToken(tok string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.token = tok
}

func (c *Client) do(ctx context.Context, op, method, path string, body io.Reader, hdr http.Header, auth bool) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base.String()+path, body)
	if err != nil {
		return nil, err
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	req.Header.Set("User-Agent", c.userAgent)
	req.Header.Set("Accept", "application/json")
	if auth {
		c.mu.RLock()
		req.Header.Set("Authorization", "Bearer "+c.token)
		c.mu.RUnlock()
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if resp.StatusCode >= 300 && resp.StatusCode != http.StatusNotModified {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
		return nil, &StatusError{Op: op, Code: resp.StatusCode, RetryAfter: retryAfter(resp.Header.Get("Retry-After")), Body: strings.TrimSpace(string(b))}
	}
	return resp, nil
}

// retryAfter reads delay-seconds or an HTTP date.
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

func jsonBody(v any) (io.Reader, http.Header, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, nil, err
	}
	return bytes.NewReader(b), http.Header{"Content-Type": {"application/json"}}, nil
}

// Enroll registers the agent with an enrollment token.
func (c *Client) Enroll(ctx context.Context, r EnrollRequest) (EnrollResponse, error) {
	var out EnrollResponse
	body, hdr, err := jsonBody(r)
	if err != nil {
		return out, err
	}
	resp, err := c.do(ctx, "enroll", http.MethodPost, "/api/v1/agents/enroll", body, hdr, false)
	if err != nil {
		return out, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return out, fmt.Errorf("enroll: %w", err)
	}
	if out.AgentID == "" || out.AgentToken == "" {
		return out, errors.New("enroll: answer without agent_id or agent_token")
	}
	return out, nil
}

// PatchSelf updates the agent's version, mesh address or metadata.
func (c *Client) PatchSelf(ctx context.Context, u SelfUpdate) error {
	body, hdr, err := jsonBody(u)
	if err != nil {
		return err
	}
	resp, err := c.do(ctx, "update self", http.MethodPatch, "/api/v1/agent/self", body, hdr, true)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
}

// PostPaths sends path traces (docs/paths.md); body is the JSON of {"traces": [...]}. The
// traces carry their own ids, so a retry after an error stores nothing twice.
func (c *Client) PostPaths(ctx context.Context, body any) error {
	b, hdr, err := jsonBody(body)
	if err != nil {
		return err
	}
	resp, err := c.do(ctx, "post paths", http.MethodPost, "/api/v1/ingest/paths", b, hdr, true)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
}

// Config fetches the agent config. With the version of the config in hand it asks
// If-None-Match and returns (nil, nil) when nothing changed.
func (c *Client) Config(ctx context.Context, haveVersion string) (*AgentConfig, error) {
	hdr := http.Header{}
	if haveVersion != "" {
		hdr.Set("If-None-Match", `"`+haveVersion+`"`)
	}
	resp, err := c.do(ctx, "get config", http.MethodGet, "/api/v1/agent/config", nil, hdr, true)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotModified {
		return nil, nil
	}
	var cfg AgentConfig
	if err := json.NewDecoder(resp.Body).Decode(&cfg); err != nil {
		return nil, fmt.Errorf("get config: %w", err)
	}
	if cfg.Version == "" {
		cfg.Version = strings.Trim(resp.Header.Get("ETag"), `"`)
	}
	return &cfg, nil
}

// PostBatch sends one gzip-compressed batch.
func (c *Client) PostBatch(ctx context.Context, gz []byte) (IngestResult, error) {
	var out IngestResult
	hdr := http.Header{"Content-Type": {"application/json"}, "Content-Encoding": {"gzip"}}
	resp, err := c.do(ctx, "ingest", http.MethodPost, "/api/v1/ingest/batches", bytes.NewReader(gz), hdr, true)
	if err != nil {
		return out, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return out, fmt.Errorf("ingest: %w", err)
	}
	return out, nil
}

// Package storage measures object-storage latency (seed 000 §3, CloudCmp §5.2) against
// S3 and S3-compatible endpoints, Azure Blob and Google Cloud Storage.
package storage

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"sort"
	"strings"
	"time"
)

// Providers a target can name.
const (
	ProviderS3    = "s3"
	ProviderAzure = "azure"
	ProviderGCS   = "gcs"
)

// Defaults of seed 000 §3: binary 1 kB–10 MB, base64 text 1 kB–50 MB, every 10 minutes.
var (
	defaultBinarySizes = []int64{1 << 10, 10 << 10, 100 << 10, 1 << 20, 10 << 20}
	defaultTextSizes   = []int64{1 << 10, 10 << 10, 100 << 10, 1 << 20, 10 << 20, 25 << 20, 50 << 20}
	defaultLevels      = []int{1, 2, 4, 8, 16, 32}
)

const (
	defaultIntervalS        = 600
	defaultOpTimeoutMS      = 120_000
	defaultCopies           = 3
	defaultConsistencySize  = 1 << 10
	defaultPollIntervalMS   = 10
	defaultConsistencyMaxMS = 30_000
	defaultConcurrencySize  = 10 << 20
	maxObjectBytes          = 1 << 30 // generated in memory, so bounded
)

// Target is one entry of the agent config's storage.targets array (docs/storage-probes.md).
type Target struct {
	TargetID    string      `json:"target_id"`
	Provider    string      `json:"provider"`
	Endpoint    string      `json:"endpoint,omitempty"`
	Region      string      `json:"region,omitempty"`
	Bucket      string      `json:"bucket"` // container for Azure
	Prefix      string      `json:"prefix,omitempty"`
	PathStyle   bool        `json:"path_style,omitempty"`
	IntervalS   int         `json:"interval_s,omitempty"`
	OpTimeoutMS int         `json:"op_timeout_ms,omitempty"`
	Contents    []string    `json:"contents,omitempty"`
	Sizes       Sizes       `json:"sizes_bytes"`
	Variants    Variants    `json:"variants"`
	Credentials Credentials `json:"credentials"`
}

// Sizes lists object sizes per content kind.
type Sizes struct {
	Binary []int64 `json:"binary,omitempty"`
	Text   []int64 `json:"text,omitempty"`
}

// Variants configures the candidate techniques of seed 000 §3.2 and the CloudCmp tests.
type Variants struct {
	Gzip9       *GzipVariant        `json:"gzip9,omitempty"`
	Replication *ReplicationVariant `json:"replication,omitempty"`
	Consistency *ConsistencyVariant `json:"consistency,omitempty"`
	Concurrency *ConcurrencyVariant `json:"concurrency,omitempty"`
}

// GzipVariant compresses at level 9 before PUT and decompresses after GET (seed 000 §3.2.2).
type GzipVariant struct {
	Enabled  bool     `json:"enabled"`
	Contents []string `json:"contents,omitempty"` // default ["text"]: random binary does not compress
	Sizes    *Sizes   `json:"sizes_bytes,omitempty"`
}

// ReplicationVariant stores F copies and fetches them in parallel (seed 000 §3.2.1).
type ReplicationVariant struct {
	Enabled bool    `json:"enabled"`
	Copies  int     `json:"copies,omitempty"`
	Sizes   []int64 `json:"sizes_bytes,omitempty"` // binary objects; default the binary sizes
}

// ConsistencyVariant measures time to consistency (CloudCmp §4.2, §5.2.1).
type ConsistencyVariant struct {
	Enabled        bool  `json:"enabled"`
	ReadAfterWrite *bool `json:"read_after_write,omitempty"`
	ListAfterWrite *bool `json:"list_after_write,omitempty"`
	SizeBytes      int64 `json:"size_bytes,omitempty"`
	PollIntervalMS int   `json:"poll_interval_ms,omitempty"`
	MaxWaitMS      int   `json:"max_wait_ms,omitempty"`
}

// ConcurrencyVariant issues n parallel GETs of one object for each level (CloudCmp Table 5).
type ConcurrencyVariant struct {
	Enabled   bool  `json:"enabled"`
	Levels    []int `json:"levels,omitempty"`
	SizeBytes int64 `json:"size_bytes,omitempty"`
}

// Credentials names where the secret lives; only "inline" carries it in the config.
type Credentials struct {
	Source string `json:"source"` // env | file | inline | none
	Path   string `json:"path,omitempty"`
	// Env-variable names for source "env"; empty means the provider's usual name.
	AccessKeyIDVar        string `json:"access_key_id_var,omitempty"`
	SecretAccessKeyVar    string `json:"secret_access_key_var,omitempty"`
	SessionTokenVar       string `json:"session_token_var,omitempty"`
	AccountNameVar        string `json:"account_name_var,omitempty"`
	AccountKeyVar         string `json:"account_key_var,omitempty"`
	SASTokenVar           string `json:"sas_token_var,omitempty"`
	ServiceAccountJSONVar string `json:"service_account_json_var,omitempty"`
	// Inline secrets (delivered only over the agent's authenticated config channel).
	Secret
}

// Secret is what a credentials reference resolves to.
type Secret struct {
	AccessKeyID        string `json:"access_key_id,omitempty"`
	SecretAccessKey    string `json:"secret_access_key,omitempty"`
	SessionToken       string `json:"session_token,omitempty"`
	AccountName        string `json:"account_name,omitempty"`
	AccountKey         string `json:"account_key,omitempty"`
	SASToken           string `json:"sas_token,omitempty"`
	ServiceAccountJSON string `json:"service_account_json,omitempty"`
}

// String never prints secrets: targets end up in log lines.
func (c Credentials) String() string {
	if c.Source == "file" {
		return "file:" + c.Path
	}
	return c.Source
}

// String redacts every secret field.
func (Secret) String() string { return "[redacted]" }

// ParseTarget decodes one config entry, applies the defaults and validates it.
func ParseTarget(raw json.RawMessage) (*Target, error) {
	var t Target
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		return nil, fmt.Errorf("storage target: %w", err)
	}
	if err := t.normalize(); err != nil {
		if t.TargetID != "" {
			return nil, fmt.Errorf("storage target %s: %w", t.TargetID, err)
		}
		return nil, fmt.Errorf("storage target: %w", err)
	}
	return &t, nil
}

func (t *Target) normalize() error {
	if t.TargetID == "" {
		return errors.New("target_id is required")
	}
	switch t.Provider {
	case ProviderS3, ProviderAzure, ProviderGCS:
	default:
		return fmt.Errorf("provider %q is not one of s3, azure, gcs", t.Provider)
	}
	if t.Bucket == "" {
		return errors.New("bucket is required")
	}
	if t.Endpoint != "" {
		u, err := url.Parse(t.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("endpoint %q is not an http(s) URL", t.Endpoint)
		}
	}
	if t.Prefix == "" {
		t.Prefix = "stormwatch-probe/" + t.TargetID + "/"
	}
	if !strings.HasSuffix(t.Prefix, "/") {
		t.Prefix += "/"
	}
	if t.Provider == ProviderS3 && t.Region == "" {
		t.Region = "us-east-1"
	}
	if t.IntervalS == 0 {
		t.IntervalS = defaultIntervalS
	}
	if t.IntervalS < 0 {
		return errors.New("interval_s must be positive")
	}
	if t.OpTimeoutMS == 0 {
		t.OpTimeoutMS = defaultOpTimeoutMS
	}
	if t.OpTimeoutMS < 0 {
		return errors.New("op_timeout_ms must be positive")
	}
	if len(t.Contents) == 0 {
		t.Contents = []string{"binary", "text"}
	}
	if err := checkContents(t.Contents); err != nil {
		return err
	}
	if t.Sizes.Binary == nil {
		t.Sizes.Binary = append([]int64(nil), defaultBinarySizes...)
	}
	if t.Sizes.Text == nil {
		t.Sizes.Text = append([]int64(nil), defaultTextSizes...)
	}
	if err := checkSizes(t.Sizes.Binary, t.Sizes.Text); err != nil {
		return err
	}
	if g := t.Variants.Gzip9; g != nil && g.Enabled {
		if len(g.Contents) == 0 {
			g.Contents = []string{"text"}
		}
		if err := checkContents(g.Contents); err != nil {
			return fmt.Errorf("gzip9: %w", err)
		}
		if g.Sizes == nil {
			g.Sizes = &Sizes{Binary: t.Sizes.Binary, Text: t.Sizes.Text}
		}
		if err := checkSizes(g.Sizes.Binary, g.Sizes.Text); err != nil {
			return fmt.Errorf("gzip9: %w", err)
		}
	}
	if r := t.Variants.Replication; r != nil && r.Enabled {
		if r.Copies == 0 {
			r.Copies = defaultCopies
		}
		if r.Copies < 1 || r.Copies > 16 {
			return errors.New("replication: copies must be 1..16")
		}
		if r.Sizes == nil {
			r.Sizes = t.Sizes.Binary
		}
		if err := checkSizes(r.Sizes); err != nil {
			return fmt.Errorf("replication: %w", err)
		}
	}
	if c := t.Variants.Consistency; c != nil && c.Enabled {
		if c.SizeBytes == 0 {
			c.SizeBytes = defaultConsistencySize
		}
		if c.PollIntervalMS == 0 {
			c.PollIntervalMS = defaultPollIntervalMS
		}
		if c.MaxWaitMS == 0 {
			c.MaxWaitMS = defaultConsistencyMaxMS
		}
		if c.PollIntervalMS < 0 || c.MaxWaitMS < 0 {
			return errors.New("consistency: poll_interval_ms and max_wait_ms must be positive")
		}
		if c.SizeBytes < 64 || c.SizeBytes > maxObjectBytes {
			return errors.New("consistency: size_bytes must be 64 B..1 GiB")
		}
	}
	if c := t.Variants.Concurrency; c != nil && c.Enabled {
		if c.Levels == nil {
			c.Levels = append([]int(nil), defaultLevels...)
		}
		for _, n := range c.Levels {
			if n < 1 || n > 256 {
				return errors.New("concurrency: levels must be 1..256")
			}
		}
		if c.SizeBytes == 0 {
			c.SizeBytes = defaultConcurrencySize
		}
		if err := checkSizes([]int64{c.SizeBytes}); err != nil {
			return fmt.Errorf("concurrency: %w", err)
		}
	}
	switch t.Credentials.Source {
	case "env", "inline", "none":
	case "file":
		if t.Credentials.Path == "" {
			return errors.New("credentials: source file needs a path")
		}
	case "":
		return errors.New("credentials.source is required (env, file, inline or none)")
	default:
		return fmt.Errorf("credentials.source %q is not one of env, file, inline, none", t.Credentials.Source)
	}
	return nil
}

func checkContents(cs []string) error {
	for _, c := range cs {
		if c != "binary" && c != "text" {
			return fmt.Errorf("content %q is not binary or text", c)
		}
	}
	return nil
}

func checkSizes(lists ...[]int64) error {
	for _, l := range lists {
		for _, s := range l {
			if s < 1 || s > maxObjectBytes {
				return fmt.Errorf("size %d is outside 1 B..1 GiB", s)
			}
		}
	}
	return nil
}

func (t *Target) interval() time.Duration  { return time.Duration(t.IntervalS) * time.Second }
func (t *Target) opTimeout() time.Duration { return time.Duration(t.OpTimeoutMS) * time.Millisecond }

// largest returns the biggest object of each content kind a cycle needs.
func (t *Target) largest() (binary, text int64) {
	upd := func(content string, sizes []int64) {
		for _, s := range sizes {
			if content == "text" && s > text {
				text = s
			} else if content == "binary" && s > binary {
				binary = s
			}
		}
	}
	for _, c := range t.Contents {
		if c == "text" {
			upd(c, t.Sizes.Text)
		} else {
			upd(c, t.Sizes.Binary)
		}
	}
	if g := t.Variants.Gzip9; g != nil && g.Enabled {
		for _, c := range g.Contents {
			if c == "text" {
				upd(c, g.Sizes.Text)
			} else {
				upd(c, g.Sizes.Binary)
			}
		}
	}
	if r := t.Variants.Replication; r != nil && r.Enabled {
		upd("binary", r.Sizes)
	}
	if c := t.Variants.Concurrency; c != nil && c.Enabled {
		upd("binary", []int64{c.SizeBytes})
	}
	return binary, text
}

// endpointAddr is the host:port whose TCP connect time is the cycle's RTT.
func (t *Target) endpointAddr(sec Secret) string {
	if t.Endpoint != "" {
		u, _ := url.Parse(t.Endpoint)
		port := u.Port()
		if port == "" {
			port = "443"
			if u.Scheme == "http" {
				port = "80"
			}
		}
		return net.JoinHostPort(u.Hostname(), port)
	}
	switch t.Provider {
	case ProviderS3:
		return "s3." + t.Region + ".amazonaws.com:443"
	case ProviderAzure:
		return sec.AccountName + ".blob.core.windows.net:443"
	default:
		return "storage.googleapis.com:443"
	}
}

// resolve reads the secret the credentials reference names.
func (c Credentials) resolve(provider string) (Secret, error) {
	switch c.Source {
	case "none":
		return Secret{}, nil
	case "inline":
		return c.Secret, nil
	case "file":
		b, err := os.ReadFile(c.Path)
		if err != nil {
			return Secret{}, fmt.Errorf("credentials file: %w", err)
		}
		var probe map[string]any
		if err := json.Unmarshal(b, &probe); err != nil {
			return Secret{}, fmt.Errorf("credentials file %s is not JSON", c.Path)
		}
		// A GCS service-account key file is used as it is.
		if _, ok := probe["type"]; ok && provider == ProviderGCS {
			return Secret{ServiceAccountJSON: string(b)}, nil
		}
		var s Secret
		if err := json.Unmarshal(b, &s); err != nil {
			return Secret{}, fmt.Errorf("credentials file %s: %w", c.Path, err)
		}
		return s, nil
	case "env":
		get := func(name, def string) (string, bool) {
			if name == "" {
				name = def
			}
			v, ok := os.LookupEnv(name)
			return v, ok
		}
		var s Secret
		var missing []string
		need := func(dst *string, name, def string) {
			v, ok := get(name, def)
			if !ok || v == "" {
				if name == "" {
					name = def
				}
				missing = append(missing, name)
			}
			*dst = v
		}
		switch provider {
		case ProviderS3:
			need(&s.AccessKeyID, c.AccessKeyIDVar, "AWS_ACCESS_KEY_ID")
			need(&s.SecretAccessKey, c.SecretAccessKeyVar, "AWS_SECRET_ACCESS_KEY")
			s.SessionToken, _ = get(c.SessionTokenVar, "AWS_SESSION_TOKEN")
		case ProviderAzure:
			need(&s.AccountName, c.AccountNameVar, "AZURE_STORAGE_ACCOUNT")
			if v, ok := get(c.SASTokenVar, "AZURE_STORAGE_SAS_TOKEN"); ok && v != "" {
				s.SASToken = v
			} else {
				need(&s.AccountKey, c.AccountKeyVar, "AZURE_STORAGE_KEY")
			}
		case ProviderGCS:
			need(&s.ServiceAccountJSON, c.ServiceAccountJSONVar, "GOOGLE_SERVICE_ACCOUNT_JSON")
		}
		if len(missing) > 0 {
			sort.Strings(missing)
			return Secret{}, fmt.Errorf("credentials: environment variables not set: %s", strings.Join(missing, ", "))
		}
		return s, nil
	}
	return Secret{}, fmt.Errorf("credentials: unknown source %q", c.Source)
}

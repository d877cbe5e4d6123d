// Package config loads the agent's local configuration: a strict YAML file (unknown keys
// are errors), then environment variables, then command-line flags, over defaults.
package config

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Config is the agent's local configuration. What to measure comes from the server.
type Config struct {
	APIURL              string        `yaml:"api_url"`
	EnrollmentToken     string        `yaml:"enrollment_token"`
	EnrollmentTokenFile string        `yaml:"enrollment_token_file"`
	AllowPlainHTTP      bool          `yaml:"allow_plain_http"` // http:// to a non-loopback API
	CAFile              string        `yaml:"ca_file"`          // extra CA bundle for a private PKI
	StateDir            string        `yaml:"state_dir"`
	Name                string        `yaml:"name"`
	Mesh                Mesh          `yaml:"mesh"`
	Throughput          Throughput    `yaml:"throughput"`
	Metadata            Metadata      `yaml:"metadata"`
	Metrics             Metrics       `yaml:"metrics"`
	Spool               Spool         `yaml:"spool"`
	FlushDeadline       time.Duration `yaml:"flush_deadline"`
	LogLevel            string        `yaml:"log_level"`
}

// Mesh is where the echo server listens and the address peers should dial.
type Mesh struct {
	Listen    string `yaml:"listen"`
	Advertise string `yaml:"advertise"` // default: the detected private IP with the listen port
	// SendMode places sends in the round: "spread" (each peer at its own random phase) or
	// "broadcast" (all peers back to back at a random point of each round).
	SendMode string `yaml:"send_mode"`
}

// Throughput is where the throughput probe listens (TCP and UDP on one port) for the
// experiments other agents start; empty Listen disables the probe.
type Throughput struct {
	Listen string `yaml:"listen"`
	// Advertise is the address peers dial for experiments; default: the mesh advertise
	// host with the listen port when Listen binds all interfaces or that host, else the
	// listen address itself.
	Advertise string `yaml:"advertise"`
	// Nice is the CPU priority (0-19) of the threads moving the TCP streams' bytes: 19 leaves
	// the CPU to the mesh probe first when it is short.
	Nice int `yaml:"nice"`
}

// Metadata overrides what the cloud metadata services report.
type Metadata struct {
	Detect       *bool         `yaml:"detect"` // default true
	Timeout      time.Duration `yaml:"timeout"`
	Provider     string        `yaml:"provider"`
	Region       string        `yaml:"region"`
	Zone         string        `yaml:"zone"`
	Subnet       string        `yaml:"subnet"`
	InstanceType string        `yaml:"instance_type"`
	PrivateIP    string        `yaml:"private_ip"`
	PublicIP     string        `yaml:"public_ip"`
}

// DetectEnabled reports whether the metadata services should be queried.
func (m Metadata) DetectEnabled() bool { return m.Detect == nil || *m.Detect }

// Metrics is the local Prometheus endpoint; empty Listen disables it.
type Metrics struct {
	Listen string `yaml:"listen"`
	PProf  bool   `yaml:"pprof"` // also serve /debug/pprof/ there, for profiling the agent
}

// Spool is the bounded on-disk queue used while the API is unreachable.
type Spool struct {
	Dir      string `yaml:"dir"`
	MaxBytes int64  `yaml:"max_bytes"`
}

// Defaults returns the configuration used when nothing overrides it.
func Defaults() Config {
	return Config{
		StateDir:      "/var/lib/stormwatch-agent",
		Mesh:          Mesh{Listen: ":7300", SendMode: "spread"},
		Throughput:    Throughput{Listen: ":7710", Nice: 19},
		Metadata:      Metadata{Timeout: 2 * time.Second},
		Metrics:       Metrics{Listen: "127.0.0.1:9309"},
		Spool:         Spool{MaxBytes: 256 << 20},
		FlushDeadline: 10 * time.Second,
		LogLevel:      "info",
	}
}

// Parse decodes YAML strictly into c, over whatever c already holds.
func Parse(data []byte, c *Config) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	// An empty file is an empty document, which yaml.v3 reports as io.EOF.
	if err := dec.Decode(c); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

// Load builds the configuration: defaults, then the file (the -config flag or
// STORMWATCH_CONFIG), then the environment, then flags. args are the command's arguments.
func Load(args []string, getenv func(string) string) (Config, error) {
	c := Defaults()
	fs := flag.NewFlagSet("stormwatch-agent", flag.ContinueOnError)
	path := fs.String("config", getenv("STORMWATCH_CONFIG"), "YAML configuration file")
	flags := map[string]*string{}
	for _, o := range options {
		flags[o.key] = fs.String(o.key, "", o.help)
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if *path != "" {
		data, err := os.ReadFile(*path)
		if err != nil {
			return c, err
		}
		if err := Parse(data, &c); err != nil {
			return c, fmt.Errorf("%s: %w", *path, err)
		}
	}
	for _, o := range options {
		if v := getenv(o.env()); v != "" {
			if err := o.set(&c, v); err != nil {
				return c, fmt.Errorf("%s: %w", o.env(), err)
			}
		}
	}
	var err error
	fs.Visit(func(f *flag.Flag) {
		if p, ok := flags[f.Name]; ok && err == nil {
			for _, o := range options {
				if o.key == f.Name {
					if e := o.set(&c, *p); e != nil {
						err = fmt.Errorf("-%s: %w", f.Name, e)
					}
				}
			}
		}
	})
	if err != nil {
		return c, err
	}
	if c.Spool.Dir == "" && c.StateDir != "" {
		c.Spool.Dir = filepath.Join(c.StateDir, "spool")
	}
	return c, c.Validate()
}

type option struct {
	key  string // flag name; env is STORMWATCH_ + upper snake
	help string
	set  func(*Config, string) error
}

func (o option) env() string {
	return "STORMWATCH_" + strings.ToUpper(strings.ReplaceAll(o.key, "-", "_"))
}

func str(f func(*Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error { *f(c) = v; return nil }
}

var options = []option{
	{"api-url", "API base URL, e.g. https://stormwatch.example.com", str(func(c *Config) *string { return &c.APIURL })},
	{"enrollment-token", "enrollment token (swe_...)", str(func(c *Config) *string { return &c.EnrollmentToken })},
	{"enrollment-token-file", "file holding the enrollment token", str(func(c *Config) *string { return &c.EnrollmentTokenFile })},
	{"allow-plain-http", "allow http:// to a non-loopback API (true/false)", func(c *Config, v string) error {
		b, err := strconv.ParseBool(v)
		c.AllowPlainHTTP = b
		return err
	}},
	{"ca-file", "PEM bundle of extra CAs trusted for the API", str(func(c *Config) *string { return &c.CAFile })},
	{"state-dir", "directory for the agent token and id", str(func(c *Config) *string { return &c.StateDir })},
	{"name", "agent name (default: host name)", str(func(c *Config) *string { return &c.Name })},
	{"mesh-listen", "mesh echo listen address", str(func(c *Config) *string { return &c.Mesh.Listen })},
	{"mesh-advertise", "mesh address peers dial (host:port)", str(func(c *Config) *string { return &c.Mesh.Advertise })},
	{"mesh-send-mode", "spread or broadcast", str(func(c *Config) *string { return &c.Mesh.SendMode })},
	{"throughput-listen", "throughput probe listen address, TCP and UDP (empty: off)", str(func(c *Config) *string { return &c.Throughput.Listen })},
	{"throughput-advertise", "throughput address peers dial (host:port; default: see docs/agents.md)", str(func(c *Config) *string { return &c.Throughput.Advertise })},
	{"throughput-nice", "nice value (0-19) of the throughput streams' threads", func(c *Config, v string) error {
		n, err := strconv.Atoi(v)
		c.Throughput.Nice = n
		return err
	}},
	{"metrics-listen", "Prometheus /metrics listen address (empty: off)", str(func(c *Config) *string { return &c.Metrics.Listen })},
	{"metrics-pprof", "serve /debug/pprof/ on the metrics listener (true/false)", func(c *Config, v string) error {
		b, err := strconv.ParseBool(v)
		c.Metrics.PProf = b
		return err
	}},
	{"spool-dir", "spool directory (default: <state-dir>/spool)", str(func(c *Config) *string { return &c.Spool.Dir })},
	{"spool-max-bytes", "spool size bound in bytes", func(c *Config, v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		c.Spool.MaxBytes = n
		return err
	}},
	{"flush-deadline", "time to flush on SIGTERM, e.g. 10s", func(c *Config, v string) error {
		d, err := time.ParseDuration(v)
		c.FlushDeadline = d
		return err
	}},
	{"log-level", "debug, info, warn or error", str(func(c *Config) *string { return &c.LogLevel })},
	{"provider", "metadata override: provider", str(func(c *Config) *string { return &c.Metadata.Provider })},
	{"region", "metadata override: region", str(func(c *Config) *string { return &c.Metadata.Region })},
	{"zone", "metadata override: zone", str(func(c *Config) *string { return &c.Metadata.Zone })},
	{"subnet", "metadata override: subnet", str(func(c *Config) *string { return &c.Metadata.Subnet })},
	{"instance-type", "metadata override: instance type", str(func(c *Config) *string { return &c.Metadata.InstanceType })},
	{"private-ip", "metadata override: private IP", str(func(c *Config) *string { return &c.Metadata.PrivateIP })},
	{"public-ip", "metadata override: public IP", str(func(c *Config) *string { return &c.Metadata.PublicIP })},
	{"metadata-detect", "query cloud metadata services (true/false)", func(c *Config, v string) error {
		b, err := strconv.ParseBool(v)
		c.Metadata.Detect = &b
		return err
	}},
}

// Validate checks values that have no safe interpretation.
func (c Config) Validate() error {
	var errs []error
	if c.APIURL == "" {
		errs = append(errs, errors.New("api_url is required"))
	} else if err := checkAPIURL(c.APIURL, c.AllowPlainHTTP); err != nil {
		errs = append(errs, err)
	}
	if c.EnrollmentToken != "" && c.EnrollmentTokenFile != "" {
		errs = append(errs, errors.New("set enrollment_token or enrollment_token_file, not both"))
	}
	if c.EnrollmentToken != "" && !strings.HasPrefix(c.EnrollmentToken, "swe_") {
		errs = append(errs, errors.New("enrollment_token must start with swe_"))
	}
	if c.StateDir == "" {
		errs = append(errs, errors.New("state_dir is required"))
	}
	if err := checkHostPort("mesh.listen", c.Mesh.Listen, false); err != nil {
		errs = append(errs, err)
	}
	if c.Mesh.Advertise != "" {
		if err := checkHostPort("mesh.advertise", c.Mesh.Advertise, true); err != nil {
			errs = append(errs, err)
		}
	}
	if c.Throughput.Listen != "" {
		if err := checkHostPort("throughput.listen", c.Throughput.Listen, false); err != nil {
			errs = append(errs, err)
		}
	}
	if c.Throughput.Advertise != "" {
		if err := checkHostPort("throughput.advertise", c.Throughput.Advertise, true); err != nil {
			errs = append(errs, err)
		}
	}
	if c.Throughput.Nice < 0 || c.Throughput.Nice > 19 {
		errs = append(errs, fmt.Errorf("throughput.nice %d: want 0-19", c.Throughput.Nice))
	}
	if c.Metrics.Listen != "" {
		if err := checkHostPort("metrics.listen", c.Metrics.Listen, false); err != nil {
			errs = append(errs, err)
		}
	}
	if c.Spool.MaxBytes < 1<<20 {
		errs = append(errs, errors.New("spool.max_bytes must be at least 1048576"))
	}
	if c.FlushDeadline <= 0 || c.FlushDeadline > 5*time.Minute {
		errs = append(errs, errors.New("flush_deadline must be within (0, 5m]"))
	}
	if c.Metadata.Timeout <= 0 || c.Metadata.Timeout > 30*time.Second {
		errs = append(errs, errors.New("metadata.timeout must be within (0, 30s]"))
	}
	if c.Mesh.SendMode != "spread" && c.Mesh.SendMode != "broadcast" {
		errs = append(errs, fmt.Errorf("mesh.send_mode %q: want spread or broadcast", c.Mesh.SendMode))
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("log_level %q: want debug, info, warn or error", c.LogLevel))
	}
	for _, ip := range []struct{ k, v string }{{"metadata.private_ip", c.Metadata.PrivateIP}, {"metadata.public_ip", c.Metadata.PublicIP}} {
		if ip.v != "" && net.ParseIP(ip.v) == nil {
			errs = append(errs, fmt.Errorf("%s %q is not an IP address", ip.k, ip.v))
		}
	}
	return errors.Join(errs...)
}

// checkAPIURL allows https anywhere; plain http only to loopback or when explicitly allowed,
// since the agent token travels in every request.
func checkAPIURL(raw string, allowPlain bool) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("api_url %q is not an absolute URL", raw)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if allowPlain || IsLoopbackHost(u.Hostname()) {
			return nil
		}
		return fmt.Errorf("api_url %q: plain http is only allowed to a loopback host; use https or set allow_plain_http", raw)
	}
	return fmt.Errorf("api_url %q: scheme must be https or http", raw)
}

// IsLoopbackHost reports whether host names this machine's loopback interface.
func IsLoopbackHost(host string) bool {
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func checkHostPort(key, v string, needHost bool) error {
	host, port, err := net.SplitHostPort(v)
	if err != nil {
		return fmt.Errorf("%s %q: %w", key, v, err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("%s %q: bad port", key, v)
	}
	if needHost && host == "" {
		return fmt.Errorf("%s %q: a host is required", key, v)
	}
	return nil
}

// EnrollmentTokenValue returns the token from the config or its file.
func (c Config) EnrollmentTokenValue() (string, error) {
	if c.EnrollmentTokenFile == "" {
		return c.EnrollmentToken, nil
	}
	b, err := os.ReadFile(c.EnrollmentTokenFile)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

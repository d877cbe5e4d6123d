package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestGoodFilesLoad(t *testing.T) {
	tests := []struct {
		file  string
		check func(t *testing.T, c Config)
	}{
		{"full.yaml", func(t *testing.T, c Config) {
			if c.Name != "aws-use1-a-1" || c.Mesh.Advertise != "10.0.1.5:7300" || c.Metadata.Zone != "us-east-1a" ||
				c.Spool.MaxBytes != 100<<20 || c.FlushDeadline != 5*time.Second || c.Metadata.DetectEnabled() ||
				c.Metadata.Timeout != time.Second || c.LogLevel != "debug" || c.Throughput.Listen != ":7711" || c.Throughput.Nice != 10 ||
				c.Throughput.Advertise != "10.0.1.5:7711" {
				t.Fatalf("unexpected %+v", c)
			}
		}},
		{"minimal.yaml", func(t *testing.T, c Config) {
			d := Defaults()
			if c.StateDir != d.StateDir || c.Mesh.Listen != ":7300" || c.Metrics.Listen != d.Metrics.Listen ||
				c.Throughput.Listen != ":7710" || c.Throughput.Nice != 19 ||
				c.Spool.Dir != filepath.Join(d.StateDir, "spool") || !c.Metadata.DetectEnabled() || c.FlushDeadline != 10*time.Second {
				t.Fatalf("defaults not applied: %+v", c)
			}
		}},
		{"loopback_http.yaml", func(t *testing.T, c Config) {
			if c.APIURL != "http://127.0.0.1:8000" {
				t.Fatalf("api_url %q", c.APIURL)
			}
		}},
		{"plain_http_allowed.yaml", func(t *testing.T, c Config) {
			if !c.AllowPlainHTTP {
				t.Fatal("allow_plain_http not read")
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			c, err := Load([]string{"-config", filepath.Join("testdata", tc.file)}, env(nil))
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c)
		})
	}
}

func TestInvalidFilesAreRejectedWithTheReason(t *testing.T) {
	tests := []struct {
		file string
		want []string
	}{
		{"invalid_unknown_key.yaml", []string{"enrolment_token", "not found"}},
		{"invalid_unknown_nested_key.yaml", []string{"rate_hz"}},
		{"invalid_plain_http.yaml", []string{"plain http"}},
		{"invalid_types.yaml", []string{"lots"}},
		{"invalid_values.yaml", []string{"flush_deadline", "mesh.listen", "private_ip", "log_level", "throughput.listen", "throughput.nice", "throughput.advertise"}},
		{"invalid_syntax.yaml", []string{"yaml"}},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			_, err := Load([]string{"-config", filepath.Join("testdata", tc.file)}, env(nil))
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestEnvironmentOverridesTheFileAndFlagsOverrideTheEnvironment(t *testing.T) {
	e := env(map[string]string{
		"STORMWATCH_CONFIG":          filepath.Join("testdata", "full.yaml"),
		"STORMWATCH_NAME":            "from-env",
		"STORMWATCH_MESH_LISTEN":     ":7400",
		"STORMWATCH_SPOOL_MAX_BYTES": "2097152",
		"STORMWATCH_FLUSH_DEADLINE":  "3s",
	})
	c, err := Load([]string{"-name", "from-flag"}, e)
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "from-flag" || c.Mesh.Listen != ":7400" || c.Spool.MaxBytes != 2<<20 || c.FlushDeadline != 3*time.Second {
		t.Fatalf("overrides not applied: %+v", c)
	}
	if c.Metadata.Region != "us-east-1" {
		t.Fatalf("file value lost: %+v", c.Metadata)
	}
}

func TestBadEnvironmentValuesAreErrors(t *testing.T) {
	tests := map[string]string{
		"STORMWATCH_SPOOL_MAX_BYTES":  "many",
		"STORMWATCH_FLUSH_DEADLINE":   "soon",
		"STORMWATCH_ALLOW_PLAIN_HTTP": "perhaps",
	}
	for k, v := range tests {
		t.Run(k, func(t *testing.T) {
			_, err := Load(nil, env(map[string]string{"STORMWATCH_API_URL": "https://x.example", k: v}))
			if err == nil || !strings.Contains(err.Error(), k) {
				t.Fatalf("error %v does not name %s", err, k)
			}
		})
	}
}

func TestPlainHTTPIsOnlyForLoopbackOrWhenAllowed(t *testing.T) {
	tests := []struct {
		url   string
		allow bool
		ok    bool
	}{
		{"https://api.example.com", false, true},
		{"http://127.0.0.1:8000", false, true},
		{"http://[::1]:8000", false, true},
		{"http://localhost:8000", false, true},
		{"http://10.0.0.5:8000", false, false},
		{"http://10.0.0.5:8000", true, true},
		{"ftp://api.example.com", true, false},
		{"api.example.com", false, false},
	}
	for _, tc := range tests {
		err := checkAPIURL(tc.url, tc.allow)
		if (err == nil) != tc.ok {
			t.Errorf("%s allow=%v: err=%v, want ok=%v", tc.url, tc.allow, err, tc.ok)
		}
	}
}

func TestTheEnrollmentTokenIsReadFromItsFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "tok")
	if err := os.WriteFile(p, []byte("swe_fromfile\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := Config{EnrollmentTokenFile: p}
	tok, err := c.EnrollmentTokenValue()
	if err != nil || tok != "swe_fromfile" {
		t.Fatalf("token %q, %v", tok, err)
	}
}

func TestAnEmptyFileGivesTheDefaults(t *testing.T) {
	c := Defaults()
	if err := Parse(nil, &c); err != nil {
		t.Fatal(err)
	}
	if c.Mesh.Listen != ":7300" {
		t.Fatalf("%+v", c)
	}
}

func TestAnEmptyThroughputListenTurnsTheProbeOff(t *testing.T) {
	c, err := Load([]string{"-config", filepath.Join("testdata", "minimal.yaml"), "-throughput-listen", ""}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Throughput.Listen != "" {
		t.Fatalf("throughput.listen %q, want empty", c.Throughput.Listen)
	}
}

func TestTheThroughputAdvertiseAddressComesFromTheFileTheEnvironmentOrAFlag(t *testing.T) {
	file := filepath.Join("testdata", "full.yaml")
	c, err := Load([]string{"-config", file}, env(map[string]string{"STORMWATCH_THROUGHPUT_ADVERTISE": "10.9.9.9:7712"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Throughput.Advertise != "10.9.9.9:7712" {
		t.Fatalf("throughput.advertise %q, want the environment's", c.Throughput.Advertise)
	}
	c, err = Load([]string{"-config", file, "-throughput-advertise", "relay.example:7713"}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Throughput.Advertise != "relay.example:7713" {
		t.Fatalf("throughput.advertise %q, want the flag's", c.Throughput.Advertise)
	}
	if _, err := Load([]string{"-config", file, "-throughput-advertise", "7713"}, env(nil)); err == nil ||
		!strings.Contains(err.Error(), "throughput.advertise") {
		t.Fatalf("a bad throughput.advertise: error %v, want one naming the key", err)
	}
}

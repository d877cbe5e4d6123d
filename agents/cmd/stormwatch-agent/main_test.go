package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestCommands(t *testing.T) {
	tests := []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"version"}, 0, version},
		{nil, 2, "usage"},
		{[]string{"frobnicate"}, 2, "unknown command"},
		{[]string{"check-config", "-api-url", "https://api.example.com", "-state-dir", "/tmp/x"}, 0, "configuration is valid"},
		{[]string{"check-config", "-api-url", "http://api.example.com"}, 2, "plain http"},
		{[]string{"run", "-no-such-flag"}, 2, "no-such-flag"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			t.Setenv("STORMWATCH_CONFIG", "")
			code := run(tc.args, &out, &errb)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr %s", code, tc.code, errb.String())
			}
			if !strings.Contains(out.String()+errb.String(), tc.out) {
				t.Fatalf("output lacks %q:\n%s%s", tc.out, out.String(), errb.String())
			}
		})
	}
}

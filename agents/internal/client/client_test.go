package client

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestEnrollSendsTheTokenAndReturnsTheAgentCredentials(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req EnrollRequest
		if r.URL.Path != "/api/v1/agents/enroll" || r.Header.Get("Authorization") != "" || json.NewDecoder(r.Body).Decode(&req) != nil {
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		if req.EnrollmentToken != "swe_ok" || req.Metadata.Zone != "z1" || req.MeshAddress != "10.0.0.1:7300" {
			http.Error(w, "bad token", http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"agent_id":"a1","agent_token":"swa_t","org_id":"o1"}`))
	}))
	defer srv.Close()
	c, _ := New(srv.URL, "", "test")
	res, err := c.Enroll(context.Background(), EnrollRequest{EnrollmentToken: "swe_ok", Name: "n", MeshAddress: "10.0.0.1:7300", Metadata: Metadata{Zone: "z1"}})
	if err != nil || res.AgentID != "a1" || res.AgentToken != "swa_t" {
		t.Fatalf("%+v %v", res, err)
	}
	_, err = c.Enroll(context.Background(), EnrollRequest{EnrollmentToken: "swe_bad"})
	var se *StatusError
	if !errors.As(err, &se) || se.Code != http.StatusUnauthorized || se.Retryable() {
		t.Fatalf("bad token: %v", err)
	}
}

func TestConfigIsPolledWithItsETagAndA304MeansUnchanged(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer swa_t" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		w.Header().Set("ETag", `"v1"`)
		if r.Header.Get("If-None-Match") == `"v1"` {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		_, _ = w.Write([]byte(`{"version":"v1","agent_id":"a1","config_poll_s":30,"mesh":{"enabled":true,"rate_hz":10,
			"payload_bytes":1024,"timeout_ms":1000,"peers":[{"agent_id":"a1","address":"h:1"}]},
			"storage":{"targets":[{"id":"t1"}]},"shipper":{"max_batch_samples":5,"max_batch_age_ms":7}}`))
	}))
	defer srv.Close()
	c, _ := New(srv.URL, "", "test")
	c.SetToken("swa_t")
	cfg, err := c.Config(context.Background(), "")
	if err != nil || cfg == nil || cfg.Version != "v1" || cfg.Mesh.RateHz != 10 || len(cfg.Mesh.Peers) != 1 ||
		cfg.Mesh.Groups != nil || len(cfg.Storage.Targets) != 1 || cfg.Shipper.MaxBatchAgeMs != 7 {
		t.Fatalf("%+v %v", cfg, err)
	}
	again, err := c.Config(context.Background(), cfg.Version)
	if err != nil || again != nil {
		t.Fatalf("unchanged config: %+v %v", again, err)
	}
}

func TestPatchSelfSendsOnlyTheGivenFields(t *testing.T) {
	var got map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPatch || r.URL.Path != "/api/v1/agent/self" {
			http.NotFound(w, r)
			return
		}
		_ = json.NewDecoder(r.Body).Decode(&got)
		_, _ = w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	c, _ := New(srv.URL, "", "test")
	addr := "10.0.0.2:7300"
	if err := c.PatchSelf(context.Background(), SelfUpdate{MeshAddress: &addr}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got["mesh_address"] != addr {
		t.Fatalf("sent %v", got)
	}
}

func TestRetryAfterIsReadInSecondsOrAsADate(t *testing.T) {
	tests := []struct {
		in       string
		min, max time.Duration
	}{
		{"", 0, 0},
		{"3", 3 * time.Second, 3 * time.Second},
		{time.Now().Add(10 * time.Second).UTC().Format(http.TimeFormat), 8 * time.Second, 10 * time.Second},
		{"soon", 0, 0},
	}
	for _, tc := range tests {
		if got := retryAfter(tc.in); got < tc.min || got > tc.max {
			t.Errorf("Retry-After %q: %v, want within [%v, %v]", tc.in, got, tc.min, tc.max)
		}
	}
}

package metrics

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestMetricsAreServedInPrometheusTextFormat(t *testing.T) {
	a := New("1.2.3")
	a.Shipped[Mesh].Add(7)
	a.Dropped[Storage].Add(2)
	a.SetMeasuredSource(Mesh, func() uint64 { return 9 })
	a.SetError(errors.New(`api said "no"`))
	a.SetConfigVersion("abc")
	srv := httptest.NewServer(a.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	body := string(b)
	for _, want := range []string{
		`stormwatch_agent_samples_measured_total{kind="mesh"} 9`,
		`stormwatch_agent_samples_shipped_total{kind="mesh"} 7`,
		`stormwatch_agent_samples_dropped_total{kind="storage"} 2`,
		`stormwatch_agent_last_error_info{error="api said \"no\""} 1`,
		`stormwatch_agent_config_info{version="abc"} 1`,
		"# TYPE stormwatch_agent_samples_spooled_total counter",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("missing %q in\n%s", want, body)
		}
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("content type %q", ct)
	}
}

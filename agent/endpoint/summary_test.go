package endpoint

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/agent/endpoint/endpointtest"
	"github.com/outpost-edge/outpost/agent/endpoint/wire"
)

func TestSummaryAndMetrics(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	nc := uint64(250_000_000)
	sum := wire.Summary{Kind: wire.KindSummary, Node: wire.NodeStats{NodeName: "edge-1",
		CPU: &wire.CPUStats{Time: at, WindowNanos: int64(10 * time.Second), UsageNanoCores: &nc, UsageCoreNanoSeconds: 42}}}
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "up 1\n") })
	h := New(Config{Runtime: endpointtest.New(), Summary: func() wire.Summary { return sum }, Metrics: metrics})

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/stats/summary", nil))
	var got wire.Summary
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || rec.Code != http.StatusOK {
		t.Fatalf("summary: %d %s (%v)", rec.Code, rec.Body, err)
	}
	if got.Node.NodeName != "edge-1" || got.Node.CPU == nil || *got.Node.CPU.UsageNanoCores != nc || !got.Node.CPU.Time.Equal(at) {
		t.Errorf("summary = %+v, want what the sampler gave", got)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK || rec.Body.String() != "up 1\n" {
		t.Errorf("metrics: %d %q", rec.Code, rec.Body)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/stats/summary", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST summary: %d, want 405", rec.Code)
	}

	// An agent without a sampler says it serves no such thing.
	bare := New(Config{Runtime: endpointtest.New()})
	rec = httptest.NewRecorder()
	bare.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/stats/summary", nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("summary without a sampler: %d, want 404", rec.Code)
	}
}

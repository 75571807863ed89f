package main

import "testing"

// metricSum reads the counters the write and release sections report:
// every sample of the name, labelled or not, and no other metric whose
// name it begins.
func TestMetricSum(t *testing.T) {
	body := []byte(`# HELP outpost_api_requests_total Requests.
# TYPE outpost_api_requests_total counter
outpost_api_requests_total{code="200",verb="get"} 12
outpost_api_requests_total{code="201",verb="create",note="a b"} 3.5
outpost_api_requests_total_other 100
outpost_raft_sent_ahead_total 7
`)
	if sum, n := metricSum(body, "outpost_api_requests_total"); sum != 15.5 || n != 2 {
		t.Fatalf("requests: %v over %d samples, want 15.5 over 2", sum, n)
	}
	if sum, n := metricSum(body, "outpost_raft_sent_ahead_total"); sum != 7 || n != 1 {
		t.Fatalf("sent ahead: %v over %d samples, want 7 over 1", sum, n)
	}
	if _, n := metricSum(body, "outpost_raft_answered_early_total"); n != 0 {
		t.Fatalf("a missing metric has %d samples", n)
	}
}

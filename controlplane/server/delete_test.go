package server

import (
	"net/http"
	"strings"
	"testing"

	"github.com/outpost-edge/outpost/controlplane/api"
)

func boundPodJSON(name, node string, grace *int64) map[string]any {
	p := podJSON(name, nil)
	spec := p["spec"].(map[string]any)
	spec["nodeName"] = node
	if grace != nil {
		spec["terminationGracePeriodSeconds"] = *grace
	}
	return p
}

// Graceful deletion over HTTP (issue 10 item 1): DELETE of a pod a node
// runs answers with the pod marked terminating; only that node (or a
// force delete) removes it; bad options are refused with nothing changed.
func TestGracefulPodDelete(t *testing.T) {
	s := startServer(t, testConfig(t))
	c := admin(t, s)
	n1 := c.as(addToken(t, c, api.TokenSpec{Role: api.RoleNode, NodeName: "n1"}))
	n2 := c.as(addToken(t, c, api.TokenSpec{Role: api.RoleNode, NodeName: "n2"}))
	const pods = "/api/v1/namespaces/default/pods/"
	seven := int64(7)
	c.must(http.StatusCreated, "POST", "/api/v1/namespaces/default/pods", boundPodJSON("web", "n1", &seven))
	c.must(http.StatusCreated, "POST", "/api/v1/namespaces/default/pods", boundPodJSON("db", "n1", nil))
	c.must(http.StatusCreated, "POST", "/api/v1/namespaces/default/pods", podJSON("pending", nil))

	// Bad options: refused, nothing written.
	before := appliedIndex(s)
	for _, bad := range []struct {
		path string
		body any
		want string
	}{
		{pods + "web?gracePeriodSeconds=-3", nil, "gracePeriodSeconds: Invalid value: -3: must be greater than or equal to 0"},
		{pods + "web?gracePeriodSeconds=soon", nil, `is not a whole number of seconds`},
		{pods + "web?gracePeriodSeconds=5", map[string]any{"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 9},
			"the gracePeriodSeconds in the query (5) and in the body (9) differ"},
	} {
		r := c.do("DELETE", bad.path, bad.body)
		if r.code < 400 || r.code >= 500 || !strings.Contains(string(r.body), bad.want) {
			t.Errorf("DELETE %s: %d %s; want a 4xx saying %q", bad.path, r.code, r.body, bad.want)
		}
	}
	if after := appliedIndex(s); after != before {
		t.Fatalf("refused deletes wrote: index %d → %d", before, after)
	}

	// Unbound: gone at once.
	c.must(http.StatusOK, "DELETE", pods+"pending", nil)
	c.must(http.StatusNotFound, "GET", pods+"pending", nil)

	// Bound: terminating with the pod's own grace period.
	got := decode[api.Pod](t, c.must(http.StatusOK, "DELETE", pods+"web", nil))
	if got.DeletionTimestamp == nil || got.DeletionGracePeriodSeconds == nil || *got.DeletionGracePeriodSeconds != 7 {
		t.Fatalf("DELETE answered deletionTimestamp %v grace %v; want the pod terminating with its 7 s", got.DeletionTimestamp, got.DeletionGracePeriodSeconds)
	}
	// The body's grace period shortens it.
	got = decode[api.Pod](t, c.must(http.StatusOK, "DELETE", pods+"web", map[string]any{"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 2}))
	if *got.DeletionGracePeriodSeconds != 2 {
		t.Fatalf("second DELETE with 2 s: grace %d", *got.DeletionGracePeriodSeconds)
	}
	c.must(http.StatusOK, "GET", pods+"web", nil)

	// Another node may not finish it; its own node may.
	n2.must(http.StatusForbidden, "DELETE", pods+"web?gracePeriodSeconds=0", nil)
	n1.must(http.StatusOK, "DELETE", pods+"web?gracePeriodSeconds=0", nil)
	c.must(http.StatusNotFound, "GET", pods+"web", nil)

	// A force delete by a user removes it at once.
	c.must(http.StatusOK, "DELETE", pods+"db?gracePeriodSeconds=0", nil)
	c.must(http.StatusNotFound, "GET", pods+"db", nil)
}

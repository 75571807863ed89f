package server

import (
	"fmt"
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

// The eviction API (issue 10 item 7): an eviction that would break the
// pod's disruption budget is refused with 429 naming the budget; one it
// allows is a graceful delete; bad input is refused with nothing changed.
func TestEvictionRespectsBudget(t *testing.T) {
	s := startServer(t, testConfig(t))
	c := admin(t, s)
	const pods = "/api/v1/namespaces/default/pods/"
	for _, name := range []string{"web-1", "web-2"} {
		p := boundPodJSON(name, "n1", nil)
		p["metadata"].(map[string]any)["labels"] = map[string]any{"app": "web"}
		c.must(http.StatusCreated, "POST", "/api/v1/namespaces/default/pods", p)
		st := decode[api.Pod](t, c.must(http.StatusOK, "GET", pods+name, nil))
		st.Status.Phase = api.PodRunning
		st.Status.Conditions = []api.PodCondition{{Type: api.PodReady, Status: api.ConditionTrue}}
		c.must(http.StatusOK, "PUT", pods+name+"/status", st)
	}
	const pdbs = "/apis/policy/v1/namespaces/default/poddisruptionbudgets"
	bad := map[string]any{"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": map[string]any{"name": "both"},
		"spec": map[string]any{"minAvailable": 1, "maxUnavailable": 1, "selector": map[string]any{"matchLabels": map[string]any{"app": "web"}}}}
	if r := c.do("POST", pdbs, bad); r.code != http.StatusUnprocessableEntity || !strings.Contains(string(r.body), "minAvailable and maxUnavailable cannot be both set") {
		t.Fatalf("budget with both: %d %s", r.code, r.body)
	}
	c.must(http.StatusCreated, "POST", pdbs, map[string]any{"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": map[string]any{"name": "web"},
		"spec": map[string]any{"minAvailable": 1, "selector": map[string]any{"matchLabels": map[string]any{"app": "web"}}}})

	evict := func(name string) reply {
		return c.do("POST", pods+name+"/eviction", map[string]any{"apiVersion": "policy/v1", "kind": "Eviction", "metadata": map[string]any{"name": name, "namespace": "default"}})
	}
	before := appliedIndex(s)
	if r := c.do("POST", pods+"web-1/eviction", map[string]any{"apiVersion": "policy/v1", "kind": "Eviction", "metadata": map[string]any{"name": "web-2"}}); r.code != http.StatusUnprocessableEntity ||
		!strings.Contains(string(r.body), "metadata.name") {
		t.Fatalf("eviction naming another pod: %d %s", r.code, r.body)
	}
	if r := evict("nosuch"); r.code != http.StatusNotFound {
		t.Fatalf("eviction of a pod that does not exist: %d %s", r.code, r.body)
	}
	if after := appliedIndex(s); after != before {
		t.Fatalf("refused evictions wrote: %d → %d", before, after)
	}
	if r := evict("web-1"); r.code != http.StatusCreated {
		t.Fatalf("first eviction: %d %s", r.code, r.body)
	}
	p := decode[api.Pod](t, c.must(http.StatusOK, "GET", pods+"web-1", nil))
	if p.DeletionTimestamp == nil || !strings.Contains(fmt.Sprint(p.Status.Conditions), "EvictionByEvictionAPI") {
		t.Fatalf("evicted pod: deletionTimestamp %v, conditions %+v; want it terminating with a DisruptionTarget condition", p.DeletionTimestamp, p.Status.Conditions)
	}
	r := evict("web-2")
	if r.code != http.StatusTooManyRequests || !strings.Contains(string(r.body), "The disruption budget web needs 1 healthy pods and has 1 currently") {
		t.Fatalf("second eviction: %d %s; want 429 naming the budget", r.code, r.body)
	}
	if p := decode[api.Pod](t, c.must(http.StatusOK, "GET", pods+"web-2", nil)); p.DeletionTimestamp != nil {
		t.Fatal("the refused eviction deleted the pod")
	}
}

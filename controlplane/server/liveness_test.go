package server

import (
	"net/http"
	"testing"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// The heartbeat call: a node for itself only, POST only, a missing Node
// is a NotFound naming it (the agent registers again), and a heartbeat
// renews the leader's liveness without a raft entry (issue 9 item 8).
func TestNodeHeartbeatEndpoint(t *testing.T) {
	s := startServer(t, testConfig(t))
	c := admin(t, s)
	c.must(http.StatusCreated, "POST", "/api/v1/nodes", map[string]any{"metadata": map[string]any{"name": "n1"},
		"status": map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "True"}}}})
	n1 := c.as(addToken(t, c, api.TokenSpec{Role: api.RoleNode, NodeName: "n1"}))
	n2 := c.as(addToken(t, c, api.TokenSpec{Role: api.RoleNode, NodeName: "n2"}))
	const path = "/apis/outpost.io/v1/nodes/n1/heartbeat"

	before := appliedIndex(s)
	for range 5 {
		hb := decode[api.NodeHeartbeat](t, n1.must(http.StatusOK, "POST", path, nil))
		if hb.Ready != api.ConditionTrue || len(hb.Servers) == 0 || hb.Servers[0] != s.URL() {
			t.Fatalf("heartbeat reply %+v, want Ready True and this server's URL", hb)
		}
	}
	if d := appliedIndex(s) - before; d != 0 {
		t.Errorf("5 heartbeats applied %d raft entries, want 0", d)
	}
	if _, ok := s.NodeHeartbeat("n1"); !ok {
		t.Error("the leader holds no heartbeat of n1")
	}

	n2.must(http.StatusForbidden, "POST", path, nil)
	n1.must(http.StatusMethodNotAllowed, "GET", path, nil)
	r := n2.do("POST", "/apis/outpost.io/v1/nodes/n2/heartbeat", nil)
	if st := r.status(); st.Code != http.StatusNotFound || st.Details == nil || st.Details.Name != "n2" {
		t.Fatalf("heartbeat of a missing node: %d %s, want 404 naming n2", r.code, r)
	}
	// The servers list is for nodes (and admins) only.
	list := decode[api.ServerList](t, n1.must(http.StatusOK, "GET", "/apis/outpost.io/v1/servers", nil))
	if len(list.Servers) != 1 || list.Servers[0] != s.URL() {
		t.Fatalf("servers %v, want [%s]", list.Servers, s.URL())
	}
	dev := c.as(addToken(t, c, api.TokenSpec{Role: api.RoleDeveloper, Namespaces: []string{"default"}}))
	dev.must(http.StatusForbidden, "GET", "/apis/outpost.io/v1/servers", nil)
}

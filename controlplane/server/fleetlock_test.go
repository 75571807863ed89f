package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// zincati makes exactly Zincati's FleetLock request: POST
// BASE/v1/OP with fleet-lock-protocol: true and its JSON body.
func zincati(c *tc, base, op, id, group string) reply {
	c.t.Helper()
	body := []byte(`{"client_params":{"id":"` + id + `","group":"` + group + `"}}`)
	return c.do(http.MethodPost, base+"v1/"+op, body, "fleet-lock-protocol", "true")
}

func fleetErr(t *testing.T, r reply) fleetLockError {
	t.Helper()
	var e fleetLockError
	if err := json.Unmarshal(r.body, &e); err != nil {
		t.Fatalf("error body %q is not FleetLock's {kind, value}: %v", r.body, err)
	}
	return e
}

// UPD-8 item 6: FleetLock clients take places in a pool's
// maxUnavailable, shared with the pool's own updating nodes; a lock is
// refused beyond it with the protocol's error body, released on
// steady-state, and the token travels in the URL Zincati is given.
func TestFleetLock(t *testing.T) {
	s := startServer(t, testConfig(t))
	admin := admin(t, s)
	two := api.FromInt(2)
	admin.must(http.StatusCreated, "POST", "/apis/machineconfiguration.openshift.io/v1/machineconfigpools", &api.MachineConfigPool{
		ObjectMeta: api.ObjectMeta{Name: "worker"},
		Spec:       api.MachineConfigPoolSpec{MaxUnavailable: &two, NodeSelector: &api.LabelSelector{MatchLabels: map[string]string{"role": "worker"}}},
	})
	token := addToken(t, admin, api.TokenSpec{Role: api.RoleFleetLock, Description: "zincati"})
	anon := newTC(t, s, "")
	base := "/fleetlock/" + token + "/"

	for _, id := range []string{"host-a", "host-a", "host-b"} { // a second lock of a holder is granted again
		if r := zincati(anon, base, "pre-reboot", id, "default"); r.code != http.StatusOK {
			t.Fatalf("pre-reboot %s: %d %s", id, r.code, r.body)
		}
	}
	r := zincati(anon, base, "pre-reboot", "host-c", "default")
	if e := fleetErr(t, r); r.code != http.StatusLocked || e.Kind != "failed_lock" || !strings.Contains(e.Value, "maxUnavailable 2") {
		t.Errorf("third lock of maxUnavailable 2: %d %+v, want 423 failed_lock", r.code, e)
	}
	if r := zincati(anon, base, "steady-state", "host-a", "default"); r.code != http.StatusOK {
		t.Fatalf("steady-state: %d %s", r.code, r.body)
	}
	if r := zincati(anon, base, "pre-reboot", "host-c", "default"); r.code != http.StatusOK {
		t.Errorf("lock after a release: %d %s", r.code, r.body)
	}
	// The holders are on the pool, for `describe` and the controller.
	var pool api.MachineConfigPool
	if err := json.Unmarshal(admin.must(http.StatusOK, "GET", "/apis/machineconfiguration.openshift.io/v1/machineconfigpools/worker", nil).body, &pool); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, h := range api.FleetLockHolders(&pool) {
		ids = append(ids, h.ID)
	}
	if strings.Join(ids, ",") != "host-b,host-c" {
		t.Errorf("holders %v, want host-b and host-c", ids)
	}

	// One limit with the pool's own nodes: a node updating takes a place.
	for _, id := range []string{"host-b", "host-c"} {
		zincati(anon, base, "steady-state", id, "default")
	}
	pool.Status.MachineCount, pool.Status.UnavailableMachineCount = 3, 1
	pool.ResourceVersion = ""
	pool.Annotations = nil
	admin.must(http.StatusOK, "PUT", "/apis/machineconfiguration.openshift.io/v1/machineconfigpools/worker/status", &pool)
	if r := zincati(anon, base, "pre-reboot", "host-a", "worker"); r.code != http.StatusOK {
		t.Fatalf("lock with one node updating: %d %s", r.code, r.body)
	}
	r = zincati(anon, base, "pre-reboot", "host-b", "worker")
	if e := fleetErr(t, r); r.code != http.StatusLocked || !strings.Contains(e.Value, "1 nodes updating") {
		t.Errorf("lock beyond the shared limit: %d %+v", r.code, e)
	}

	// Refusals, each with the protocol's body.
	for _, tt := range []struct {
		name string
		r    reply
		code int
		kind string
	}{
		{"no token", zincati(anon, "/", "pre-reboot", "x", "default"), http.StatusUnauthorized, "unauthorized"},
		{"bad token", zincati(anon, "/fleetlock/abcdef.0123456789abcdef/", "pre-reboot", "x", "default"), http.StatusUnauthorized, "unauthorized"},
		{"no header", anon.do(http.MethodPost, base+"v1/pre-reboot", []byte(`{"client_params":{"id":"x","group":"default"}}`)), http.StatusBadRequest, "missing_header"},
		{"no id", zincati(anon, base, "pre-reboot", "", "default"), http.StatusBadRequest, "bad_params"},
		{"bad JSON", anon.do(http.MethodPost, base+"v1/pre-reboot", []byte(`{"client_params":`), "fleet-lock-protocol", "true"), http.StatusBadRequest, "bad_body"},
		{"unknown group", zincati(anon, base, "pre-reboot", "x", "gpu"), http.StatusNotFound, "unknown_group"},
		{"unknown operation", zincati(anon, base, "reboot-now", "x", "default"), http.StatusNotFound, "not_found"},
		{"developer token", zincati(anon, "/fleetlock/"+addToken(t, admin, api.TokenSpec{Role: api.RoleDeveloper, Namespaces: []string{"a"}})+"/", "pre-reboot", "x", "default"), http.StatusForbidden, "forbidden"},
		{"join token", zincati(anon, "/fleetlock/"+addToken(t, admin, api.TokenSpec{Role: api.RoleNode})+"/", "pre-reboot", "x", "default"), http.StatusForbidden, "forbidden"},
	} {
		if e := fleetErr(t, tt.r); tt.r.code != tt.code || e.Kind != tt.kind {
			t.Errorf("%s: %d %+v, want %d %s", tt.name, tt.r.code, e, tt.code, tt.kind)
		}
	}
	// A paused pool grants no lock.
	admin.must(http.StatusOK, "PUT", "/apis/machineconfiguration.openshift.io/v1/machineconfigpools/worker", func() *api.MachineConfigPool {
		var p api.MachineConfigPool
		_ = json.Unmarshal(admin.must(http.StatusOK, "GET", "/apis/machineconfiguration.openshift.io/v1/machineconfigpools/worker", nil).body, &p)
		p.Spec.Paused = true
		return &p
	}())
	if r := zincati(anon, base, "pre-reboot", "host-z", "worker"); r.code != http.StatusLocked || fleetErr(t, r).Kind != "paused" {
		t.Errorf("lock of a paused pool: %d %s", r.code, r.body)
	}
	// An Authorization header works on /v1/... directly; the token can
	// do nothing else.
	node := newTC(t, s, token)
	if r := zincati(node, "/", "steady-state", "host-a", "worker"); r.code != http.StatusOK {
		t.Errorf("steady-state with a header: %d %s", r.code, r.body)
	}
	if r := node.do(http.MethodGet, "/api/v1/nodes", nil); r.code != http.StatusForbidden {
		t.Errorf("a fleetlock token listing nodes: %d, want 403", r.code)
	}
}

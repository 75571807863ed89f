package server

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// Kubernetes' read semantics, off the query.
func TestReadModeOf(t *testing.T) {
	tests := []struct {
		query string
		mode  int
		rv    uint64
		bad   bool
	}{
		{"", readLatest, 0, false},
		{"labelSelector=a%3Db", readLatest, 0, false},
		{"resourceVersion=", readLatest, 0, false},
		{"resourceVersion=0", readAny, 0, false},
		{"resourceVersion=42", readNotOlder, 42, false},
		{"resourceVersion=x", 0, 0, true},
		{"consistent=true", readLatest, 0, false},
		{"consistent=true&resourceVersion=0", readLatest, 0, false},
		{"consistent=false", readAny, 0, false},
		{"consistent=false&resourceVersion=42", readAny, 0, false},
	}
	for _, tt := range tests {
		q, err := url.ParseQuery(tt.query)
		if err != nil {
			t.Fatal(err)
		}
		mode, rv, err := readModeOf(q)
		if tt.bad {
			if se, ok := err.(*api.StatusError); !ok || se.Code() != http.StatusBadRequest {
				t.Errorf("%q: got %v, want a 400", tt.query, err)
			}
			continue
		}
		if err != nil || mode != tt.mode || rv != tt.rv {
			t.Errorf("%q: got mode %d rv %d err %v, want mode %d rv %d", tt.query, mode, rv, err, tt.mode, tt.rv)
		}
	}
}

// A plain get or list on a follower reflects every write acknowledged
// before it, and any resourceVersion the caller has seen is honoured.
func TestFollowerReadsAreCurrent(t *testing.T) {
	leader := startServer(t, testConfig(t))
	cfg := testConfig(t)
	cfg.ID, cfg.BootstrapExpect = "s2", 0
	cfg.Join = []string{leader.Node().Status().RaftAddr}
	follower := startServer(t, cfg)
	lc, fc := admin(t, leader), admin(t, follower)
	const path = "/api/v1/namespaces/default/pods"
	var last *api.Pod
	for i := range 5 {
		if i == 0 {
			last = decode[api.Pod](t, lc.must(http.StatusCreated, "POST", path, podJSON("p", map[string]string{"n": "a"})))
			continue
		}
		// Read-modify-write, as clients do: the stored pod has the
		// tolerations admission added, which an update may not remove.
		last.Labels = map[string]string{"n": string(rune('a' + i))}
		last = decode[api.Pod](t, lc.must(http.StatusOK, "PUT", path+"/p", last))
	}
	got := decode[api.Pod](t, fc.must(http.StatusOK, "GET", path+"/p", nil))
	if got.ResourceVersion != last.ResourceVersion {
		t.Fatalf("plain get on the follower: rv %s, want %s", got.ResourceVersion, last.ResourceVersion)
	}
	l := decode[struct{ Items []api.Pod }](t, fc.must(http.StatusOK, "GET", path, nil))
	if len(l.Items) != 1 || l.Items[0].ResourceVersion != last.ResourceVersion {
		t.Fatalf("plain list on the follower: %+v, want rv %s", l.Items, last.ResourceVersion)
	}
	got = decode[api.Pod](t, fc.must(http.StatusOK, "GET", path+"/p?resourceVersion="+last.ResourceVersion, nil))
	if got.ResourceVersion != last.ResourceVersion {
		t.Fatalf("get not older than %s on the follower: rv %s", last.ResourceVersion, got.ResourceVersion)
	}
}

// A server whose leader is gone (the other voter of two is down) cannot
// know what was committed since: a read that asks for the latest state is
// a 503 saying why, not an answer from a possibly stale copy. A read that
// asks for any state gets this server's own copy, which it had caught up.
func TestReadWithoutLeaderIsUnavailable(t *testing.T) {
	leader := startServer(t, testConfig(t))
	cfg := testConfig(t)
	cfg.ID, cfg.BootstrapExpect = "s2", 0
	cfg.Join = []string{leader.Node().Status().RaftAddr}
	follower := startServer(t, cfg)
	admin(t, leader).must(http.StatusCreated, "POST", "/api/v1/namespaces/default/pods", podJSON("p", nil))
	waitReady(t, follower)
	if err := leader.Close(); err != nil {
		t.Fatal(err)
	}
	c := admin(t, follower)
	for _, p := range []string{
		"/api/v1/namespaces/default/pods",
		"/api/v1/namespaces/default/pods/p",
		"/api/v1/namespaces/default/pods?watch=true&timeoutSeconds=1",
		"/api/v1/namespaces/default/pods?consistent=true&resourceVersion=0",
	} {
		r := c.do("GET", p, nil)
		msg := r.status().Message
		if r.code != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" ||
			!strings.Contains(msg, "cannot serve an up-to-date read: the cluster has no raft leader") || !strings.Contains(msg, "resourceVersion=0") {
			t.Errorf("GET %s without a leader: %d %s", p, r.code, r.body)
		}
	}
	for _, p := range []string{
		"/api/v1/namespaces/default/pods?resourceVersion=0",
		"/api/v1/namespaces/default/pods?consistent=false",
		"/api/v1/namespaces/default/pods?watch=true&resourceVersion=0&timeoutSeconds=1",
	} {
		c.must(http.StatusOK, "GET", p, nil)
	}
}

// After the whole cluster stopped, a server restarted alone holds only its
// last snapshot and cannot learn what was committed after it: it answers
// nothing that depends on its store, not even a read of its own copy or
// the authentication of a token, until it has applied a read index
// obtained after it started (issue 9 item 1). /healthz still answers;
// /readyz says why it is not ready. Once a quorum is back it serves.
func TestRestartedServerServesNothingUntilCaughtUp(t *testing.T) {
	leader := startServer(t, fixedPorts(t, testConfig(t)))
	lcfg := leader.cfg
	cfg := fixedPorts(t, testConfig(t))
	cfg.ID, cfg.BootstrapExpect = "s2", 0
	cfg.Join = []string{leader.Node().Status().RaftAddr}
	follower := startServer(t, cfg)
	admin(t, leader).must(http.StatusCreated, "POST", "/api/v1/namespaces/default/pods", podJSON("p", nil))
	waitReady(t, follower)
	if err := follower.Close(); err != nil {
		t.Fatal(err)
	}
	if err := leader.Close(); err != nil {
		t.Fatal(err)
	}

	lone := startUnready(t, cfg)
	c := admin(t, lone)
	for _, p := range []string{
		"/api/v1/namespaces/default/pods?resourceVersion=0",
		"/api/v1/namespaces/default/pods/p?consistent=false",
		"/api/v1/namespaces/default/pods",
		"/api/v1/namespaces/default/pods?watch=true&resourceVersion=0&timeoutSeconds=1",
		"/apis/outpost.io/v1/tokens",
		"/readyz",
	} {
		r := c.do("GET", p, nil)
		msg := r.status().Message
		if r.code != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" ||
			!strings.Contains(msg, "has not yet applied the cluster's latest state") || !strings.Contains(msg, "no raft leader") {
			t.Errorf("GET %s before catching up: %d %s", p, r.code, r.body)
		}
	}
	if r := c.do("POST", "/api/v1/namespaces/default/pods", podJSON("q", nil)); r.code != http.StatusServiceUnavailable {
		t.Errorf("POST before catching up: %d %s", r.code, r.body)
	}
	if r := c.do("GET", "/healthz", nil); r.code != http.StatusOK {
		t.Errorf("GET /healthz before catching up: %d %s", r.code, r.body)
	}

	// The other voter comes back: a leader is elected, the lone server
	// applies the log and serves again.
	lcfg.Registry = nil
	startServer(t, lcfg)
	waitReady(t, lone)
	c.must(http.StatusOK, "GET", "/api/v1/namespaces/default/pods/p", nil)
}

package server

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
	"github.com/outpost-edge/outpost/raftstore"
)

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond) // polling interval, not synchronisation
	}
}

func TestFollowerForwardsWrites(t *testing.T) {
	leader := startServer(t, testConfig(t))
	cfg := testConfig(t)
	cfg.ID = "s2"
	cfg.BootstrapExpect = 0
	cfg.Join = []string{leader.Node().Status().RaftAddr}
	follower := startServer(t, cfg)
	if follower.Node().IsLeader() {
		t.Fatal("the joining server leads")
	}
	lc, fc := admin(t, leader), admin(t, follower)
	if leader.AdminConfig().Token != follower.AdminConfig().Token {
		t.Fatal("servers of one cluster derived different admin tokens")
	}

	// A create through the follower lands on the leader, warnings and all.
	hello := `{"metadata":{"name":"fwd"},"spec":{"hostIPC":false,"containers":[{"name":"a","image":"b"}]}}`
	r := fc.must(http.StatusCreated, "POST", "/api/v1/namespaces/default/pods", hello)
	if len(r.header.Values("Warning")) == 0 {
		t.Error("the forwarded reply lost its warnings")
	}
	p := decode[api.Pod](t, r)
	lc.must(http.StatusOK, "GET", "/api/v1/namespaces/default/pods/fwd", nil)
	// A consistent read on the follower sees it at once.
	got := decode[api.Pod](t, fc.must(http.StatusOK, "GET", "/api/v1/namespaces/default/pods/fwd?consistent=true", nil))
	if got.ResourceVersion != p.ResourceVersion {
		t.Fatalf("consistent read on the follower: rv %s, want %s", got.ResourceVersion, p.ResourceVersion)
	}
	// Errors come back as the leader's Status.
	r = fc.do("POST", "/api/v1/namespaces/default/pods", hello)
	if r.code != http.StatusConflict || r.status().Reason != api.ReasonAlreadyExists {
		t.Fatalf("duplicate through the follower: %d %s", r.code, r.body)
	}
	// A token made on the leader works on the follower right away.
	tok := addToken(t, lc, api.TokenSpec{Role: api.RoleDeveloper, Namespaces: []string{"default"}})
	fc.as(tok).must(http.StatusOK, "GET", "/api/v1/namespaces/default/pods/fwd", nil)
	// A forwarded request that reaches a non-leader is refused, not
	// forwarded again.
	before := appliedIndex(follower)
	r = fc.do("POST", "/api/v1/namespaces/default/pods", podJSON("loop", nil), hopHeader, "s9")
	if r.code != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" {
		t.Fatalf("hop-marked write on a follower: %d %s", r.code, r.body)
	}
	if appliedIndex(follower) != before {
		t.Fatal("a refused forwarded write changed the store")
	}
	// Membership changes are forwarded too: the quorum check refuses to
	// remove the leader of a two-voter... or one-voter configuration.
	peers := decode[raftPeerList](t, fc.must(http.StatusOK, "GET", "/apis/outpost.io/v1/raft/peers", nil))
	if len(peers.Items) != 2 {
		t.Fatalf("peers: %+v", peers.Items)
	}
	r = fc.do("DELETE", "/apis/outpost.io/v1/raft/peers/s1", nil)
	if r.code != http.StatusConflict {
		t.Fatalf("removing the only healthy quorum through the follower: %d %s", r.code, r.body)
	}
}

func TestEventsExpire(t *testing.T) {
	cfg := testConfig(t)
	cfg.EventTTL = 2 * time.Second
	s := startServer(t, cfg)
	c := admin(t, s)
	old := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	c.must(http.StatusCreated, "POST", "/api/v1/namespaces/default/events", `{"metadata":{"name":"old"},
	  "involvedObject":{"kind":"Pod","name":"x","namespace":"default"},"reason":"Test","lastTimestamp":"`+old+`"}`)
	c.must(http.StatusCreated, "POST", "/api/v1/namespaces/default/events", `{"metadata":{"name":"new"},
	  "involvedObject":{"kind":"Pod","name":"x","namespace":"default"},"reason":"Test","lastTimestamp":"`+time.Now().UTC().Format(time.RFC3339)+`"}`)
	waitFor(t, 10*time.Second, "the old event to expire", func() bool {
		return c.do("GET", "/api/v1/namespaces/default/events/old", nil).code == http.StatusNotFound
	})
	c.must(http.StatusOK, "GET", "/api/v1/namespaces/default/events/new", nil)
}

func TestCloseReleasesEverything(t *testing.T) {
	baseline := runtime.NumGoroutine()
	cfg := testConfig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	c := admin(t, s)
	c.must(http.StatusOK, "GET", "/api/v1/namespaces", nil)
	c.hc.Transport.(*http.Transport).CloseIdleConnections()
	apiAddr := strings.TrimPrefix(s.URL(), "https://")
	raftAddr := s.Node().Status().RaftAddr
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	for _, a := range []string{apiAddr, raftAddr} {
		ln, err := net.Listen("tcp", a)
		if err != nil {
			t.Errorf("port %s not released: %v", a, err)
			continue
		}
		ln.Close()
	}
	waitFor(t, 5*time.Second, "the server's goroutines to end", func() bool {
		return runtime.NumGoroutine() <= baseline+2
	})
}

func TestRunServesUntilCancelled(t *testing.T) {
	cfg := testConfig(t)
	cfg.ClusterSecret = ""
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()

	// The admin config appears and works.
	var cc client.Config
	waitFor(t, 10*time.Second, "the admin config", func() bool {
		var err error
		cc, err = client.LoadConfig(cfg.AdminConfigPath)
		return err == nil && cc.Token != ""
	})
	cl, err := client.New(cc)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "readiness", func() bool {
		_, _, err := cl.Do(ctx, "GET", "/readyz", nil, nil)
		return err == nil
	})
	if _, err := cl.Get(ctx, api.ResourceForKind("Namespace"), "", NamespaceSystem, client.GetOptions{Consistent: true}); err != nil {
		t.Fatalf("namespace %s: %v", NamespaceSystem, err)
	}
	fi, err := os.Stat(filepath.Join(cfg.DataDir, secretFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("generated secret file: %v, mode %v", err, fi.Mode())
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}

func TestLoadSecret(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{DataDir: dir, BootstrapExpect: 3, Join: []string{"x:1"}}
	if _, err := loadSecret(&cfg); err == nil || !strings.Contains(err.Error(), "--cluster-secret is required") {
		t.Fatalf("several servers without a secret: %v", err)
	}
	cfg.ClusterSecret = testSecret
	got, err := loadSecret(&cfg)
	if err != nil || got != testSecret {
		t.Fatalf("given secret: %q, %v", got, err)
	}
	// Saved: a restart without the flag uses it, a different one is refused.
	cfg.ClusterSecret = ""
	if got, err := loadSecret(&cfg); err != nil || got != testSecret {
		t.Fatalf("saved secret: %q, %v", got, err)
	}
	cfg.ClusterSecret = testSecret + "-other"
	if _, err := loadSecret(&cfg); err == nil || !strings.Contains(err.Error(), "differs") {
		t.Fatalf("different secret: %v", err)
	}
	// A lone server generates one.
	lone := Config{DataDir: t.TempDir(), BootstrapExpect: 1}
	a, err := loadSecret(&lone)
	if err != nil || len(a) < 32 {
		t.Fatalf("generated: %q, %v", a, err)
	}
	if b, _ := loadSecret(&lone); b != a {
		t.Fatal("the generated secret was not kept")
	}
}

// A second server on a data directory in use is told so before it binds a
// port, not "raft: open log store …/raft.db: timeout".
func TestSecondServerOnADataDirInUse(t *testing.T) {
	cfg := testConfig(t)
	startServer(t, cfg)
	second := cfg
	second.ID = "s2"
	second.Logger = testLogger(t)
	s, err := Start(context.Background(), second)
	if err == nil {
		s.Close()
		t.Fatal("a second server started on a data directory in use")
	}
	want := "data directory " + cfg.DataDir + " is in use by another outpost process (raft.db is locked)"
	if !errors.Is(err, raftstore.ErrDataDirInUse) || err.Error() != want {
		t.Fatalf("second Start: %v\nwant %q", err, want)
	}
}

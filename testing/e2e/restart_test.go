package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/auth"
	"github.com/outpost-edge/outpost/controlplane/client"
	"github.com/outpost-edge/outpost/controlplane/pki"
	"github.com/outpost-edge/outpost/testing/proc"
)

// After every server was killed at once, a restarted server holds its
// last snapshot and learns what was committed after it only from a
// leader. It must answer nothing that depends on its store before it has
// applied the log tail (issue 9 item 1). Found by an attacker's test: a
// token deleted before the crash, but after the last snapshot, was
// accepted for hundreds of reads and creates, a valid token got 401 and
// existing objects 404. Here the deleted token, hammered at every server
// from before they start until after they are ready, gets no 2xx; valid
// tokens (one from the snapshot, one from the tail) get no 401, and
// existing pods no 404.
func TestRestartedClusterServesNothingStale(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	// Snapshots every 2,000 entries: the first phase crosses the
	// threshold once, the tail stays below it.
	const threshold = 2000
	c, cfg, cl := startCluster(ctx, t, 3,
		"--raft-snapshot-threshold", strconv.Itoa(threshold), "--raft-snapshot-interval", "1s")
	deleted := createToken(ctx, t, cl)
	valid := createToken(ctx, t, cl)
	keep := &api.Pod{ObjectMeta: api.ObjectMeta{Name: "keep", Namespace: "default"},
		Spec: api.PodSpec{Containers: []api.Container{{Name: "c", Image: "img:1"}}}}
	if _, _, err := cl.Create(ctx, keep); err != nil {
		t.Fatal(err)
	}
	tokID, _, _ := strings.Cut(deleted, ".")
	tok, err := cl.Get(ctx, api.ResourceForKind("Token"), "", tokID, client.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created, _ := strconv.ParseUint(tok.GetObjectMeta().ResourceVersion, 10, 64)

	// Past the threshold, then wait until every server snapshotted a
	// state that holds the token.
	writeServices(ctx, t, cl, "before", threshold+200)
	for _, s := range c.Servers {
		waitSnapshot(ctx, t, s, created)
	}
	gone, err := cl.Delete(ctx, api.ResourceForKind("Token"), "", tokID, nil)
	if err != nil {
		t.Fatal(err)
	}
	deletedAt, _ := strconv.ParseUint(gone.GetObjectMeta().ResourceVersion, 10, 64)
	// A token created in the tail exists only once the tail is applied.
	fresh := createToken(ctx, t, cl)
	// The tail after the deletion: long, and below the threshold.
	writeServices(ctx, t, cl, "tail", threshold/2)
	for _, s := range c.Servers {
		if idx := snapshotIndex(t, s); idx >= deletedAt {
			t.Fatalf("%s took a snapshot at index %d, after the deletion at %d: the test needs it in the unsnapshotted tail", s.ID, idx, deletedAt)
		}
	}
	c.KillAll()

	tlsCfg, err := pki.ClientTLSConfig(cfg.CAData)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg}, Timeout: 5 * time.Second}
	var tally tallies
	hctx, stopHammer := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, s := range c.Servers {
		base := "https://" + s.APIAddr
		for _, req := range []hammerReq{
			{"deleted", "GET", "/api/v1/namespaces/default/pods/keep", deleted},
			{"deleted", "GET", "/api/v1/namespaces/default/pods?resourceVersion=0", deleted},
			{"deleted", "POST", "/api/v1/namespaces/default/pods", deleted},
			{"valid", "GET", "/api/v1/namespaces/default/pods/keep?resourceVersion=0", valid},
			{"valid", "GET", "/api/v1/namespaces/default/services/tail-1?resourceVersion=0", fresh},
		} {
			wg.Go(func() { hammer(hctx, hc, base, req, &tally) })
		}
	}
	if err := c.StartAll(ctx); err != nil {
		t.Fatal(err)
	}
	// Some more once every server is ready: the token must now be refused
	// everywhere.
	select {
	case <-time.After(time.Second): // how long to go on, not synchronisation
	case <-ctx.Done():
	}
	stopHammer()
	wg.Wait()

	t.Logf("replies by token and code: %v", tally.snapshot())
	if n := tally.count("deleted", func(code int) bool { return code >= 200 && code < 300 }); n > 0 {
		t.Errorf("the deleted token was accepted %d times after the restart", n)
	}
	if n := tally.count("valid", func(code int) bool { return code == http.StatusUnauthorized }); n > 0 {
		t.Errorf("a valid token got 401 %d times after the restart", n)
	}
	if n := tally.count("valid", func(code int) bool { return code == http.StatusNotFound }); n > 0 {
		t.Errorf("an existing pod got 404 %d times after the restart", n)
	}
	// The test means something only if it reached the servers while they
	// were catching up, and after.
	if tally.count("", func(code int) bool { return code == http.StatusServiceUnavailable }) == 0 {
		t.Error("no request reached a server before it had caught up")
	}
	if tally.count("valid", func(code int) bool { return code == http.StatusOK }) == 0 ||
		tally.count("deleted", func(code int) bool { return code == http.StatusUnauthorized }) == 0 {
		t.Error("no request reached a caught-up server")
	}
}

type hammerReq struct {
	token, method, path, secret string
}

// hammer sends req until ctx ends, counting replies by status code;
// connection errors (a server not started yet) are not replies.
func hammer(ctx context.Context, hc *http.Client, base string, req hammerReq, tally *tallies) {
	body := `{"apiVersion":"v1","kind":"Pod","metadata":{"generateName":"h-"},"spec":{"containers":[{"name":"c","image":"img:1"}]}}`
	for ctx.Err() == nil {
		var rd *strings.Reader
		if req.method == "POST" {
			rd = strings.NewReader(body)
		} else {
			rd = strings.NewReader("")
		}
		r, err := http.NewRequestWithContext(ctx, req.method, base+req.path, rd)
		if err != nil {
			return
		}
		r.Header.Set("Authorization", "Bearer "+req.secret)
		r.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(r)
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Millisecond): // server not listening yet
			}
			continue
		}
		resp.Body.Close()
		tally.add(req.token, resp.StatusCode)
	}
}

// tallies counts replies by token and status code.
type tallies struct {
	mu sync.Mutex
	m  map[string]map[int]int
}

func (t *tallies) add(token string, code int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[string]map[int]int{}
	}
	if t.m[token] == nil {
		t.m[token] = map[int]int{}
	}
	t.m[token][code]++
}

// count sums the replies to token ("" for any) whose code matches.
func (t *tallies) count(token string, match func(int) bool) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for tok, codes := range t.m {
		if token != "" && tok != token {
			continue
		}
		for code, k := range codes {
			if match(code) {
				n += k
			}
		}
	}
	return n
}

func (t *tallies) snapshot() map[string]map[int]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]map[int]int{}
	for tok, codes := range t.m {
		out[tok] = map[int]int{}
		for c, k := range codes {
			out[tok][c] = k
		}
	}
	return out
}

// createToken stores a new cluster-admin token and returns it.
func createToken(ctx context.Context, t *testing.T, cl *client.Client) string {
	t.Helper()
	id, secret := auth.NewToken()
	tok := &api.Token{ObjectMeta: api.ObjectMeta{Name: id},
		Spec: api.TokenSpec{Role: api.RoleClusterAdmin, SecretHash: auth.HashSecret(secret)}}
	if _, err := cl.CreateToken(ctx, tok); err != nil {
		t.Fatal(err)
	}
	return id + "." + secret
}

// writeServices creates n headless services from 8 clients: one raft
// entry each, as no controller acts on them.
func writeServices(ctx context.Context, t *testing.T, cl *client.Client, prefix string, n int) {
	t.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(n) {
					return
				}
				svc := &api.Service{ObjectMeta: api.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, i), Namespace: "default"},
					Spec: api.ServiceSpec{ClusterIP: "None"}}
				if _, _, err := cl.Create(ctx, svc); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatalf("writing %s services: %v", prefix, err)
	default:
	}
}

// snapshotIndex is the index of the newest raft snapshot in s's data
// directory, 0 without one.
func snapshotIndex(t *testing.T, s *proc.Server) uint64 {
	t.Helper()
	metas, _ := filepath.Glob(filepath.Join(s.Dir, "raft", "snapshots", "*", "meta.json"))
	var newest uint64
	for _, p := range metas {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // being written
		}
		var m struct{ Index uint64 }
		if json.Unmarshal(b, &m) == nil {
			newest = max(newest, m.Index)
		}
	}
	return newest
}

// waitSnapshot waits until s has a snapshot at index at least idx.
func waitSnapshot(ctx context.Context, t *testing.T, s *proc.Server, idx uint64) {
	t.Helper()
	for snapshotIndex(t, s) < idx {
		select {
		case <-ctx.Done():
			t.Fatalf("%s took no snapshot at index %d or later", s.ID, idx)
		case <-time.After(50 * time.Millisecond): // polling files, bounded by ctx
		}
	}
}

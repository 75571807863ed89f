package client

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// deadAddr is an address nothing listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func countingServer(t *testing.T, code int) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_, _ = w.Write([]byte(`{}`))
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// A request that cannot reach the server in use goes to the next one,
// reads and writes alike (a refused connection was never seen), and the
// client stays with the one that answered.
func TestFailsOverToTheNextServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	alive, hits := countingServer(t, http.StatusOK)
	dead := "http://" + deadAddr(t)
	c, err := New(Config{Server: dead, Servers: []string{alive.URL}, Insecure: true, Token: "a.b"})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut} {
		if _, _, err := c.Do(ctx, m, "/api/v1/nodes", nil, []byte("{}")); err != nil {
			t.Fatalf("%s with the first server dead: %v", m, err)
		}
	}
	if hits.Load() != 3 {
		t.Errorf("the live server got %d requests, want 3", hits.Load())
	}
	if c.Server() != alive.URL {
		t.Errorf("Server() = %s, want the one that answered, %s", c.Server(), alive.URL)
	}
	// The dead one backs off: it comes first in no request for a while.
	if got := c.Servers(); len(got) != 2 || got[0] != alive.URL {
		t.Errorf("Servers() = %v, want %s first", got, alive.URL)
	}
}

// A server that takes a request and never answers (its link cut:
// packets dropped, no reset) holds it until the caller's deadline; the
// client then moves on, so the next request, bounded the same way, goes
// to another server. A request the caller cancels moves nothing.
func TestDeadlineMovesToTheNextServer(t *testing.T) {
	release := make(chan struct{})
	var hung atomic.Int64
	silent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hung.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(release); silent.Close() })
	alive, hits := countingServer(t, http.StatusOK)
	c, err := New(Config{Server: silent.URL, Servers: []string{alive.URL}, Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(context.Background())
	go func() {
		for hung.Load() == 0 {
			time.Sleep(time.Millisecond) // until the request is in
		}
		cancel()
	}()
	if _, _, err := c.Do(cctx, http.MethodPost, "/api/v1/nodes/n/heartbeat", nil, nil); err == nil {
		t.Fatal("a cancelled request succeeded")
	}
	if c.Server() != silent.URL {
		t.Fatalf("a cancelled request moved the client to %s", c.Server())
	}
	for i := range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		_, _, err := c.Do(ctx, http.MethodPost, "/api/v1/nodes/n/heartbeat", nil, nil)
		cancel()
		if i == 0 && err == nil {
			t.Fatal("the silent server answered")
		}
		if i == 1 && err != nil {
			t.Fatalf("the request after the one that ran out of time: %v", err)
		}
	}
	if hits.Load() != 1 || hung.Load() != 2 {
		t.Errorf("hits: silent server %d, live server %d; want 2 and 1", hung.Load(), hits.Load())
	}
}

// A 503 (refused before the raft log: a server without a leader, or
// catching up) sends the request to the next server; a 504 (may have
// been applied) does not.
func TestServiceUnavailableTriesTheNextServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	busy, busyHits := countingServer(t, http.StatusServiceUnavailable)
	ok, okHits := countingServer(t, http.StatusOK)
	c, err := New(Config{Server: busy.URL, Servers: []string{ok.URL}, Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Do(ctx, http.MethodPost, "/api/v1/nodes", nil, []byte("{}")); err != nil {
		t.Fatalf("POST with the first server answering 503: %v", err)
	}
	if busyHits.Load() != 1 || okHits.Load() != 1 {
		t.Errorf("hits: 503 server %d, ok server %d; want 1 and 1", busyHits.Load(), okHits.Load())
	}

	unknown, unknownHits := countingServer(t, http.StatusGatewayTimeout)
	other, otherHits := countingServer(t, http.StatusOK)
	c2, err := New(Config{Server: unknown.URL, Servers: []string{other.URL}, Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c2.Do(ctx, http.MethodPost, "/api/v1/nodes", nil, []byte("{}")); err == nil {
		t.Fatal("a 504 was retried elsewhere and succeeded: a write of unknown outcome must not be repeated")
	}
	if unknownHits.Load() != 1 || otherHits.Load() != 0 {
		t.Errorf("hits: 504 server %d, other %d; want 1 and 0", unknownHits.Load(), otherHits.Load())
	}
}

// SetServers keeps the server in use current and refuses bad URLs.
func TestSetServers(t *testing.T) {
	c, err := New(Config{Server: "https://a:6443"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SetServers([]string{"https://b:6443", "https://a:6443", "https://b:6443"}); err != nil {
		t.Fatal(err)
	}
	if got := c.Servers(); len(got) != 2 || got[0] != "https://a:6443" || got[1] != "https://b:6443" {
		t.Errorf("Servers() = %v, want [https://a:6443 https://b:6443]", got)
	}
	if err := c.SetServers([]string{"http://c:6443"}); err == nil {
		t.Error("a plain http server was accepted into an https client")
	}
	if err := c.SetServers(nil); err == nil {
		t.Error("an empty server list was accepted")
	}
}

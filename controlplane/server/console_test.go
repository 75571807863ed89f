package server

import (
	"net/http"
	"strings"
	"testing"

	"github.com/outpost-edge/outpost/controlplane/console"
)

// TestConsoleServedWithoutToken: the console's files are served to anyone
// (they hold no cluster data, issue 15 item 3), with the console's
// headers, while every API path beside them still needs a token.
func TestConsoleServedWithoutToken(t *testing.T) {
	s := startServer(t, testConfig(t))
	anon := newTC(t, s, "")
	for _, p := range []string{"/ui/", "/ui/app.js", "/ui/app.css"} {
		r := anon.do("GET", p, nil)
		if r.code != http.StatusOK {
			t.Fatalf("GET %s without a token: %d %s, want 200", p, r.code, r)
		}
		if got := r.header.Get("Content-Security-Policy"); got != console.ContentSecurityPolicy {
			t.Errorf("GET %s: CSP %q", p, got)
		}
		if r.header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: no X-Content-Type-Options: nosniff", p)
		}
	}
	if r := anon.as("bogus.token").do("GET", "/ui/", nil); r.code != http.StatusOK {
		t.Errorf("GET /ui/ with a bad token: %d, want 200 (the files ignore tokens)", r.code)
	}
	if r := anon.do("GET", "/ui/nope.js", nil); r.code != http.StatusNotFound {
		t.Errorf("GET /ui/nope.js: %d, want 404", r.code)
	}
	if r := anon.do("POST", "/ui/app.js", "x"); r.code != http.StatusMethodNotAllowed {
		t.Errorf("POST /ui/app.js: %d, want 405", r.code)
	}
	// The API and paths that merely start like the console's still need
	// a token.
	for _, p := range []string{"/api/v1/nodes", "/apis/outpost.io/v1/raft/peers", "/uix", "/api/v1/namespaces/default/pods"} {
		if r := anon.do("GET", p, nil); r.code != http.StatusUnauthorized {
			t.Errorf("GET %s without a token: %d %s, want 401", p, r.code, r)
		}
	}
	adm := admin(t, s)
	if r := adm.do("GET", "/api/v1/nodes", nil); r.code != http.StatusOK {
		t.Errorf("GET /api/v1/nodes as admin: %d %s", r.code, r)
	}
	if r := adm.do("GET", "/ui/", nil); r.code != http.StatusOK || !strings.Contains(r.String(), "outpost console") {
		t.Errorf("GET /ui/ as admin: %d", r.code)
	}
}

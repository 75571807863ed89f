package server

import (
	"net/http"
	"strings"
	"testing"
)

// TestBrowserAtRootGoesToConsole: a web browser opening the server's
// address without a token is redirected to the console; API clients (no
// text/html in Accept, or a token) keep the API's answers.
func TestBrowserAtRootGoesToConsole(t *testing.T) {
	s := startServer(t, testConfig(t))
	anon := newTC(t, s, "")
	anon.hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	const browserAccept = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"

	for _, method := range []string{"GET", "HEAD"} {
		r := anon.do(method, "/", nil, "Accept", browserAccept)
		if r.code != http.StatusFound || r.header.Get("Location") != "/ui/" {
			t.Errorf("%s / from a browser: %d, Location %q; want 302 to /ui/", method, r.code, r.header.Get("Location"))
		}
	}
	for what, hdr := range map[string][]string{
		"no Accept":        nil,
		"JSON":             {"Accept", "application/json"},
		"a token":          {"Accept", browserAccept, "Authorization", "Bearer bogus.token"},
		"a POST":           {"Accept", browserAccept},
		"another path":     {"Accept", browserAccept},
		"text/htmlx typed": {"Accept", "text/htmlx"},
	} {
		method, path := "GET", "/"
		switch what {
		case "a POST":
			method = "POST"
		case "another path":
			path = "/api/v1/nodes"
		}
		r := anon.do(method, path, nil, hdr...)
		if r.code != http.StatusUnauthorized || !strings.Contains(r.String(), `"kind":"Status"`) {
			t.Errorf("%s %s with %s: %d %s; want the API's 401 Status", method, path, what, r.code, r)
		}
	}
}

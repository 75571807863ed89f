package console

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func serve(t *testing.T, h http.Handler, method, path string, hdr map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

func TestFilesServed(t *testing.T) {
	h := New()
	for _, name := range []string{"index.html", "app.js", "api.js", "table.js", "format.js", "pages.js", "cluster.js", "app.css"} {
		if !slices.Contains(h.Files(), name) {
			t.Errorf("%s is not embedded; files: %v", name, h.Files())
		}
	}
	cases := []struct{ path, ctype, contains string }{
		{"/ui/", "text/html; charset=utf-8", `<script type="module" src="app.js">`},
		{"/ui/index.html", "text/html; charset=utf-8", "<title>outpost console</title>"},
		{"/ui/app.js", "text/javascript; charset=utf-8", "import"},
		{"/ui/app.css", "text/css; charset=utf-8", "body"},
	}
	for _, c := range cases {
		w := serve(t, h, "GET", c.path, nil)
		if w.Code != http.StatusOK {
			t.Errorf("GET %s: %d, want 200", c.path, w.Code)
			continue
		}
		if got := w.Header().Get("Content-Type"); got != c.ctype {
			t.Errorf("GET %s: Content-Type %q, want %q", c.path, got, c.ctype)
		}
		if !strings.Contains(w.Body.String(), c.contains) {
			t.Errorf("GET %s: body lacks %q", c.path, c.contains)
		}
		for k, want := range map[string]string{
			"Content-Security-Policy": ContentSecurityPolicy,
			"X-Content-Type-Options":  "nosniff",
			"Cache-Control":           "no-cache",
			"X-Frame-Options":         "DENY",
		} {
			if got := w.Header().Get(k); got != want {
				t.Errorf("GET %s: %s = %q, want %q", c.path, k, got, want)
			}
		}
	}
}

func TestRedirectAndNotFound(t *testing.T) {
	h := New()
	w := serve(t, h, "GET", "/ui", nil)
	if w.Code != http.StatusMovedPermanently || w.Header().Get("Location") != "/ui/" {
		t.Errorf("GET /ui: %d Location %q, want 301 to /ui/", w.Code, w.Header().Get("Location"))
	}
	for _, p := range []string{"/ui/nope.js", "/ui/static/app.js", "/ui/../console.go", "/ui/pages"} {
		if w := serve(t, h, "GET", p, nil); w.Code != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", p, w.Code)
		}
	}
	for _, m := range []string{"POST", "PUT", "DELETE"} {
		w := serve(t, h, m, "/ui/app.js", nil)
		if w.Code != http.StatusMethodNotAllowed || w.Header().Get("Allow") != "GET, HEAD" {
			t.Errorf("%s /ui/app.js: %d Allow %q, want 405 with Allow", m, w.Code, w.Header().Get("Allow"))
		}
	}
}

func TestETagRevalidation(t *testing.T) {
	h := New()
	first := serve(t, h, "GET", "/ui/app.js", nil)
	etag := first.Header().Get("ETag")
	if etag == "" {
		t.Fatal("no ETag")
	}
	if w := serve(t, h, "GET", "/ui/app.js", map[string]string{"If-None-Match": etag}); w.Code != http.StatusNotModified || w.Body.Len() != 0 {
		t.Errorf("revalidation with the ETag: %d and %d bytes, want 304 without a body", w.Code, w.Body.Len())
	}
	if w := serve(t, h, "GET", "/ui/app.js", map[string]string{"If-None-Match": `"other"`}); w.Code != http.StatusOK {
		t.Errorf("revalidation with another ETag: %d, want 200", w.Code)
	}
	if w := serve(t, h, "HEAD", "/ui/app.js", nil); w.Code != http.StatusOK || w.Body.Len() != 0 {
		t.Errorf("HEAD: %d with %d bytes, want 200 without a body", w.Code, w.Body.Len())
	}
}

// TestNoInlineScriptOrRemoteResources holds the files to what the CSP
// allows, so a page that would break under it fails here rather than in
// a browser: no inline script or style, no event-handler attributes, no
// other origin, and the token never put in a URL.
func TestNoInlineScriptOrRemoteResources(t *testing.T) {
	h := New()
	inline := regexp.MustCompile(`<script(?:\s[^>]*)?>\s*[^<\s]|<style|\son[a-z]+=|style=`)
	remote := regexp.MustCompile(`(?i)(?:src|href)=["']?(?:https?:)?//|@import|url\(\s*['"]?(?:https?:)?//`)
	for _, name := range h.Files() {
		body := string(h.files[name].body)
		if strings.HasSuffix(name, ".html") && inline.MatchString(body) {
			t.Errorf("%s has inline script, style or handler: %q", name, inline.FindString(body))
		}
		if remote.MatchString(body) {
			t.Errorf("%s loads from another origin: %q", name, remote.FindString(body))
		}
		if strings.Contains(body, "access_token") || strings.Contains(body, "token=") {
			t.Errorf("%s puts the token in a URL", name)
		}
		if strings.Contains(body, "localStorage") {
			t.Errorf("%s uses localStorage: the token belongs in sessionStorage, gone with the tab", name)
		}
	}
}

func TestMatch(t *testing.T) {
	for p, want := range map[string]bool{"/ui": true, "/ui/": true, "/ui/app.js": true, "/uix": false, "/api/ui": false, "/": false} {
		if got := Match(p); got != want {
			t.Errorf("Match(%q) = %v, want %v", p, got, want)
		}
	}
}

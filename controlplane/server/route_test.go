package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/core"
	"github.com/outpost-edge/outpost/raftstore"
)

func TestRoutes(t *testing.T) {
	for _, tt := range []struct {
		method, path string
		// want is "verb resource ns name sub", or the error code.
		want string
	}{
		{"GET", "/api/v1/namespaces/default/pods", "list pods default  "},
		{"GET", "/api/v1/pods", "list pods   "},
		{"GET", "/api/v1/namespaces/default/pods/p", "get pods default p "},
		{"GET", "/api/v1/namespaces/default/pods/p/status", "get pods default p status"},
		{"PUT", "/api/v1/namespaces/default/pods/p/status", "update pods default p status"},
		{"POST", "/api/v1/namespaces/default/pods/p/binding", "create pods default p binding"},
		{"GET", "/api/v1/namespaces/default/pods/p/binding", "405"},
		{"PUT", "/api/v1/namespaces/default/pods/p/binding", "405"},
		{"GET", "/api/v1/watch/namespaces/default/pods", "watch pods default  "},
		{"GET", "/api/v1/watch/pods/p", "404"},
		{"GET", "/api/v1/namespaces", "list namespaces   "},
		{"GET", "/api/v1/namespaces/team", "get namespaces  team "},
		{"PUT", "/api/v1/namespaces/team/status", "update namespaces  team status"},
		{"DELETE", "/api/v1/namespaces/team", "delete namespaces  team "},
		{"GET", "/api/v1/nodes/n1/status", "get nodes  n1 status"},
		{"GET", "/api/v1/namespaces/default/nodes", "404"},
		{"GET", "/api/v1/pods/p", "404"},
		{"GET", "/api/v1/namespaces/default/services/s/status", "get services default s status"},
		{"GET", "/api/v1/namespaces/default/events/e/status", "404"},
		{"GET", "/api/v1/namespaces/default/pods/p/logs", "404"},
		{"GET", "/api/v1/namespaces/default/pods/p/status/x", "404"},
		{"GET", "/api/v1/deployments", "404"},
		{"GET", "/apis/apps/v1/namespaces/ns/deployments/d", "get deployments ns d "},
		{"GET", "/apis/outpost.io/v1/tokens", "list tokens   "},
		{"DELETE", "/api/v1/namespaces/default/pods", "405"},
		{"POST", "/api/v1/namespaces/default/pods/p", "405"},
		{"PATCH", "/api/v1/namespaces/default/pods/p", "405"},
		{"POST", "/api/v1/watch/namespaces/default/pods", "405"},
	} {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			var segs [10]string
			n, ok := segments(tt.path, segs[:])
			if !ok {
				t.Fatalf("segments(%q) failed", tt.path)
			}
			group, rest := "", segs[2:n]
			if segs[0] == "apis" {
				group, rest = segs[1], segs[3:n]
			}
			rt, err := parseResourcePath(group, rest)
			var got string
			if err == nil {
				var verb string
				verb, err = verbFor(tt.method, &rt, false)
				if err == nil {
					got = strings.Join([]string{verb, rt.res.Plural, rt.ns, rt.name, rt.sub}, " ")
				}
			}
			if err != nil {
				got = strconv.Itoa(statusOf(err).Code())
			}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestSegments(t *testing.T) {
	var segs [3]string
	for _, tt := range []struct {
		path string
		n    int
		ok   bool
	}{
		{"/", 0, true},
		{"/a/b/", 2, true},
		{"/a//b", 1, false},
		{"/a/b/c/d", 3, false},
	} {
		n, ok := segments(tt.path, segs[:])
		if n != tt.n || ok != tt.ok {
			t.Errorf("segments(%q) = %d, %v; want %d, %v", tt.path, n, ok, tt.n, tt.ok)
		}
	}
}

func TestWarningHeaders(t *testing.T) {
	w := httptest.NewRecorder()
	addWarnings(w, api.Warnings{`spec.dnsPolicy: accepted but not acted on by outpost`, "a \"quoted\" \\ value\nwith a newline"})
	got := w.Header().Values("Warning")
	want := []string{
		`299 - "spec.dnsPolicy: accepted but not acted on by outpost"`,
		`299 - "a \"quoted\" \\ value with a newline"`,
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestContentTypes(t *testing.T) {
	for _, tt := range []struct {
		ct   string
		code int
	}{
		{"", 0},
		{"application/json", 0},
		{"application/json; charset=utf-8", 0},
		{"application/yaml", http.StatusUnsupportedMediaType},
		{"text/plain", http.StatusUnsupportedMediaType},
		{"application/merge-patch+json", http.StatusUnsupportedMediaType},
	} {
		r := httptest.NewRequest("POST", "/", strings.NewReader("{}"))
		if tt.ct != "" {
			r.Header.Set("Content-Type", tt.ct)
		}
		err := checkContentType(r)
		code := 0
		if err != nil {
			code = statusOf(err).Code()
		}
		if code != tt.code {
			t.Errorf("Content-Type %q: got %d, want %d", tt.ct, code, tt.code)
		}
	}
}

func TestNewUID(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		u := core.NewUID()
		if len(u) != 36 || u[8] != '-' || u[13] != '-' || u[14] != '4' || u[18] != '-' || u[23] != '-' || !strings.ContainsRune("89ab", rune(u[19])) {
			t.Fatalf("%q is not a version 4 UUID", u)
		}
		if seen[u] {
			t.Fatalf("duplicate %q", u)
		}
		seen[u] = true
	}
}

func TestRaftErrorCodes(t *testing.T) {
	for _, tt := range []struct {
		err  error
		code int
	}{
		{fmt.Errorf("apply: %w", raftstore.ErrUnknownOutcome), http.StatusGatewayTimeout},
		{fmt.Errorf("apply: %w", raftstore.ErrNoLeader), http.StatusServiceUnavailable},
		{&raftstore.NotLeaderError{}, http.StatusServiceUnavailable},
		{raftstore.ErrClosed, http.StatusServiceUnavailable},
		{fmt.Errorf("x: %w", context.DeadlineExceeded), http.StatusGatewayTimeout},
		{api.NewConflict(api.ResourceForKind("Pod"), "p", "stale"), http.StatusConflict},
	} {
		se := statusOf(raftError(tt.err, "apply the write"))
		if se.Code() != tt.code {
			t.Errorf("%v: got %d, want %d", tt.err, se.Code(), tt.code)
		}
		if tt.code == http.StatusGatewayTimeout && errors.Is(tt.err, raftstore.ErrUnknownOutcome) && !strings.Contains(se.Status.Message, "may or may not") {
			t.Errorf("unknown outcome message %q does not say the write may have happened", se.Status.Message)
		}
		if tt.code == http.StatusServiceUnavailable && (se.Status.Details == nil || se.Status.Details.RetryAfterSeconds == 0) {
			t.Errorf("%v: 503 without a retry hint", tt.err)
		}
	}
	if c := statusOf(membershipError(fmt.Errorf("%w: it would leave no voters", raftstore.ErrQuorum), "s1")).Code(); c != http.StatusConflict {
		t.Errorf("quorum refusal: %d", c)
	}
	if c := statusOf(membershipError(fmt.Errorf("%q: %w", "x", raftstore.ErrUnknownServer), "x")).Code(); c != http.StatusNotFound {
		t.Errorf("unknown server: %d", c)
	}
}

func TestReadBodyLimit(t *testing.T) {
	for _, tt := range []struct {
		name   string
		length int64
		body   string
		code   int
	}{
		{"declared too long", 11, strings.Repeat("x", 11), http.StatusRequestEntityTooLarge},
		{"chunked too long", -1, strings.Repeat("x", 11), http.StatusRequestEntityTooLarge},
		{"chunked at the limit", -1, strings.Repeat("x", 10), 0},
		{"declared at the limit", 10, strings.Repeat("x", 10), 0},
	} {
		r := httptest.NewRequest("POST", "/", strings.NewReader(tt.body))
		r.ContentLength = tt.length
		got, err := readBody(httptest.NewRecorder(), r, 10)
		code := 0
		if err != nil {
			code = statusOf(err).Code()
		}
		if code != tt.code || (err == nil && string(got) != tt.body) {
			t.Errorf("%s: got %d %q, want %d", tt.name, code, got, tt.code)
		}
	}
}

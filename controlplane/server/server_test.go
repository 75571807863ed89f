package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/auth"
)

func TestCRUDRoundTrip(t *testing.T) {
	s := startServer(t, testConfig(t))
	c := admin(t, s)
	const path = "/api/v1/namespaces/default/pods"

	created := decode[api.Pod](t, c.must(http.StatusCreated, "POST", path, podJSON("web", map[string]string{"app": "web"})))
	if created.UID == "" || created.CreationTimestamp == nil || created.ResourceVersion == "" {
		t.Fatalf("server-set fields missing: uid=%q created=%v rv=%q", created.UID, created.CreationTimestamp, created.ResourceVersion)
	}
	if len(created.UID) != 36 || created.UID[14] != '4' {
		t.Errorf("uid %q is not a version 4 UUID", created.UID)
	}
	if created.Spec.SchedulerName != api.DefaultSchedulerName {
		t.Errorf("defaults not applied: schedulerName %q", created.Spec.SchedulerName)
	}

	got := decode[api.Pod](t, c.must(http.StatusOK, "GET", path+"/web", nil))
	if got.UID != created.UID || got.ResourceVersion != created.ResourceVersion {
		t.Fatalf("GET returned %s/%s, created %s/%s", got.UID, got.ResourceVersion, created.UID, created.ResourceVersion)
	}
	got = decode[api.Pod](t, c.must(http.StatusOK, "GET", path+"/web?consistent=true", nil))
	if got.UID != created.UID {
		t.Fatalf("consistent GET returned uid %s", got.UID)
	}

	// Update with the resourceVersion read: accepted, new version.
	got.Labels["tier"] = "front"
	updated := decode[api.Pod](t, c.must(http.StatusOK, "PUT", path+"/web", got))
	if updated.Labels["tier"] != "front" || updated.ResourceVersion == got.ResourceVersion {
		t.Fatalf("update not applied: labels %v rv %s (was %s)", updated.Labels, updated.ResourceVersion, got.ResourceVersion)
	}
	if updated.UID != created.UID || !updated.CreationTimestamp.Equal(created.CreationTimestamp.Time) {
		t.Errorf("update changed server-owned metadata")
	}

	// The stale version is refused and changes nothing.
	before := appliedIndex(s)
	got.Labels["tier"] = "back"
	r := c.do("PUT", path+"/web", got)
	if r.code != http.StatusConflict || r.status().Reason != api.ReasonConflict {
		t.Fatalf("stale update: got %d %s, want 409 Conflict", r.code, r.body)
	}
	if !strings.Contains(r.status().Message, "modified") {
		t.Errorf("conflict message does not say why: %q", r.status().Message)
	}
	if appliedIndex(s) != before {
		t.Errorf("a refused update moved the applied index %d → %d", before, appliedIndex(s))
	}
	now := decode[api.Pod](t, c.must(http.StatusOK, "GET", path+"/web", nil))
	if now.Labels["tier"] != "front" || now.ResourceVersion != updated.ResourceVersion {
		t.Fatalf("state changed by a refused update: %v rv %s", now.Labels, now.ResourceVersion)
	}

	// Delete with a stale precondition fails; with the right one it works.
	r = c.do("DELETE", path+"/web?resourceVersion="+created.ResourceVersion, nil)
	if r.code != http.StatusConflict {
		t.Fatalf("delete with stale resourceVersion: got %d %s", r.code, r.body)
	}
	body := map[string]any{"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": map[string]any{"uid": updated.UID, "resourceVersion": updated.ResourceVersion}}
	del := decode[api.Pod](t, c.must(http.StatusOK, "DELETE", path+"/web", body))
	if del.Name != "web" {
		t.Errorf("delete returned %q", del.Name)
	}
	r = c.do("GET", path+"/web", nil)
	if r.code != http.StatusNotFound || r.status().Reason != api.ReasonNotFound {
		t.Fatalf("GET after delete: %d %s", r.code, r.body)
	}
}

func TestUpdateWithoutResourceVersionAndSubresources(t *testing.T) {
	s := startServer(t, testConfig(t))
	c := admin(t, s)
	const path = "/api/v1/namespaces/default/pods"
	c.must(http.StatusCreated, "POST", path, podJSON("p", nil))

	// Status written through /status.
	p := decode[api.Pod](t, c.must(http.StatusOK, "GET", path+"/p", nil))
	p.Status.Phase = api.PodRunning
	p.Spec.NodeName = "sneaky" // a status write must not change the spec
	p.ResourceVersion = ""     // unconditional
	st := decode[api.Pod](t, c.must(http.StatusOK, "PUT", path+"/p/status", p))
	if st.Status.Phase != api.PodRunning || st.Spec.NodeName != "" {
		t.Fatalf("status update: phase %q nodeName %q, want Running and unchanged spec", st.Status.Phase, st.Spec.NodeName)
	}

	// A main write keeps the stored status.
	st.Status.Phase = api.PodFailed
	st.Labels = map[string]string{"x": "y"}
	st.ResourceVersion = ""
	main := decode[api.Pod](t, c.must(http.StatusOK, "PUT", path+"/p", st))
	if main.Status.Phase != api.PodRunning || main.Labels["x"] != "y" {
		t.Fatalf("main update: phase %q labels %v, want Running kept and label set", main.Status.Phase, main.Labels)
	}

	// Name in the body must match the URL.
	main.Name = "other"
	r := c.do("PUT", path+"/p", main)
	if r.code != http.StatusBadRequest || !strings.Contains(r.status().Message, "does not match the name on the URL") {
		t.Fatalf("name mismatch: %d %s", r.code, r.body)
	}
	// Events have no status subresource.
	r = c.do("PUT", "/api/v1/namespaces/default/events/x/status", map[string]any{})
	if r.code != http.StatusNotFound || !strings.Contains(r.status().Message, "could not find") {
		t.Fatalf("events/status: got %d %s, want 404", r.code, r.body)
	}
}

func TestStrictDecodingOverHTTP(t *testing.T) {
	s := startServer(t, testConfig(t))
	c := admin(t, s)
	before := appliedIndex(s)

	typo := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"typo"},"spec":{"containers":[{"name":"a","image":"x","imagePullPolcy":"Always"}]}}`
	r := c.do("POST", "/api/v1/namespaces/default/pods", typo)
	if r.code != http.StatusUnprocessableEntity {
		t.Fatalf("typo: got %d %s, want 422", r.code, r.body)
	}
	if !strings.Contains(string(r.body), "spec.containers[0].imagePullPolcy") {
		t.Errorf("typo reply does not name the path: %s", r.body)
	}
	if appliedIndex(s) != before {
		t.Errorf("refused create changed the store")
	}

	// A manifest written for Kubernetes, with fields outpost does not act
	// on, is accepted; the reply warns about each.
	hello := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"hello","labels":{"app":"hello"}},
	  "spec":{"hostIPC":false,"serviceAccountName":"default",
	    "containers":[{"name":"hello","image":"docker.io/library/busybox:1.36","command":["sh","-c","echo hi; sleep 3600"],
	      "securityContext":{"allowPrivilegeEscalation":false},"terminationMessagePath":"/dev/termination-log"}]}}`
	r = c.do("POST", "/api/v1/namespaces/default/pods", hello)
	if r.code != http.StatusCreated {
		t.Fatalf("hello pod: got %d %s, want 201", r.code, r.body)
	}
	warns := r.header.Values("Warning")
	if len(warns) < 4 {
		t.Fatalf("want a warning per Kubernetes-only field, got %q", warns)
	}
	all := strings.Join(warns, "\n")
	for _, f := range []string{"spec.hostIPC", "spec.serviceAccountName", "spec.containers[0].securityContext", "spec.containers[0].terminationMessagePath"} {
		if !strings.Contains(all, f) {
			t.Errorf("no warning names %s: %q", f, warns)
		}
	}
	for _, w := range warns {
		if !strings.HasPrefix(w, `299 - "`) || !strings.HasSuffix(w, `"`) {
			t.Errorf("warning %q is not in the 299 form", w)
		}
	}
}

func TestValidationListsEveryProblem(t *testing.T) {
	s := startServer(t, testConfig(t))
	c := admin(t, s)
	before := appliedIndex(s)
	bad := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"Bad_Name","labels":{"ok":"-bad-"}},
	  "spec":{"restartPolicy":"Sometimes","containers":[{"name":"","image":"x"}]}}`
	r := c.do("POST", "/api/v1/namespaces/default/pods", bad)
	if r.code != http.StatusUnprocessableEntity {
		t.Fatalf("got %d %s, want 422", r.code, r.body)
	}
	st := r.status()
	if st.Reason != api.ReasonInvalid || st.Details == nil {
		t.Fatalf("not an Invalid status with details: %s", r.body)
	}
	fields := map[string]bool{}
	for _, cause := range st.Details.Causes {
		fields[cause.Field] = true
	}
	for _, f := range []string{"metadata.name", "metadata.labels", "spec.restartPolicy", "spec.containers[0].name"} {
		found := false
		for k := range fields {
			if strings.HasPrefix(k, f) {
				found = true
			}
		}
		if !found {
			t.Errorf("no cause for %s; causes: %v", f, fields)
		}
	}
	if appliedIndex(s) != before {
		t.Errorf("a refused create changed the store")
	}
}

func TestBadInput(t *testing.T) {
	s := startServer(t, testConfig(t))
	c := admin(t, s)
	c.must(http.StatusCreated, "POST", "/api/v1/namespaces", map[string]any{"metadata": map[string]any{"name": "team"}})
	c.must(http.StatusCreated, "POST", "/api/v1/namespaces/default/pods", podJSON("victim", nil))
	c.must(http.StatusCreated, "POST", "/api/v1/nodes", map[string]any{"metadata": map[string]any{"name": "n2"}})
	dev := c.as(addToken(t, c, api.TokenSpec{Role: api.RoleDeveloper, Namespaces: []string{"team"}}))
	node := c.as(addToken(t, c, api.TokenSpec{Role: api.RoleNode, NodeName: "n1"}))
	huge := `{"metadata":{"name":"h","annotations":{"a":"` + strings.Repeat("x", DefaultMaxBodyBytes) + `"}}}`

	for _, tt := range []struct {
		name   string
		client *tc
		method string
		path   string
		body   any
		hdr    []string
		code   int
		want   string // in the message
	}{
		{"garbage JSON", c, "POST", "/api/v1/namespaces/default/pods", `{"metadata": {`, nil, 400, "invalid JSON"},
		{"not an object", c, "POST", "/api/v1/namespaces/default/pods", `[1,2]`, nil, 400, ""},
		{"empty body", c, "POST", "/api/v1/namespaces/default/pods", ``, nil, 400, "empty"},
		{"wrong kind for URL", c, "POST", "/api/v1/namespaces/default/pods", `{"kind":"Service","apiVersion":"v1","metadata":{"name":"s"}}`, nil, 400, "kind"},
		{"wrong namespace in body", c, "POST", "/api/v1/namespaces/default/pods", `{"metadata":{"name":"x","namespace":"team"},"spec":{"containers":[{"name":"a","image":"b"}]}}`, nil, 400, "namespace"},
		{"huge body", c, "POST", "/api/v1/namespaces/default/pods", huge, nil, 413, "limit"},
		{"yaml body", c, "POST", "/api/v1/namespaces/default/pods", "metadata:\n  name: y\n", []string{"Content-Type", "application/yaml"}, 415, "JSON"},
		{"invalid name", c, "POST", "/api/v1/namespaces", `{"metadata":{"name":"UPPER"}}`, nil, 422, "metadata.name"},
		{"invalid label", c, "POST", "/api/v1/namespaces", `{"metadata":{"name":"ok","labels":{"bad key!":"v"}}}`, nil, 422, "metadata.labels"},
		{"missing namespace", c, "POST", "/api/v1/namespaces/nope/pods", podJSON("x", nil), nil, 404, "nope"},
		{"unknown resource", c, "GET", "/api/v1/widgets", nil, nil, 404, "could not find"},
		{"patch unsupported", c, "PATCH", "/api/v1/namespaces/default/pods/victim", `{}`, nil, 405, "PATCH"},
		{"bad selector", c, "GET", "/api/v1/pods?labelSelector=a%20in%20(", nil, nil, 400, "labelSelector"},
		{"bad field selector", c, "GET", "/api/v1/pods?fieldSelector=spec.bogus%3Dx", nil, nil, 400, "spec.bogus"},
		{"missing token", c.as(""), "GET", "/api/v1/namespaces/default/pods", nil, nil, 401, "Unauthorized"},
		{"wrong token", c.as("abcdef.0123456789abcdef0123"), "GET", "/api/v1/namespaces/default/pods", nil, nil, 401, "Unauthorized"},
		{"malformed token", c.as("garbage"), "GET", "/api/v1/namespaces/default/pods", nil, nil, 401, "Unauthorized"},
		{"node writes another node", node, "PUT", "/api/v1/nodes/n2", `{"metadata":{"name":"n2"}}`, nil, 403, `cannot update resource "nodes"`},
		{"node creates another node", node, "POST", "/api/v1/nodes", `{"metadata":{"name":"n2"}}`, nil, 403, `nodes "n2" is forbidden`},
		{"node deletes a pod", node, "DELETE", "/api/v1/namespaces/default/pods/victim", nil, nil, 403, "cannot delete"},
		{"developer outside its namespace", dev, "POST", "/api/v1/namespaces/default/pods", podJSON("x", nil), nil, 403, `namespace "default"`},
		{"developer lists all namespaces", dev, "GET", "/api/v1/pods", nil, nil, 403, "forbidden"},
		{"developer binding", dev, "POST", "/api/v1/namespaces/team/pods/x/binding", `{"target":{"name":"n1"}}`, nil, 403, "pods/binding"},
		{"developer creates a token", dev, "POST", "/apis/outpost.io/v1/tokens", `{"metadata":{"name":"abcdef"},"spec":{"role":"cluster-admin","secretHash":"00"}}`, nil, 403, "tokens"},
		{"developer reads metrics", dev, "GET", "/metrics", nil, nil, 403, "/metrics"},
		{"token with a bad hash", c, "POST", "/apis/outpost.io/v1/tokens", `{"metadata":{"name":"abcdef"},"spec":{"role":"developer","secretHash":"not-a-hash"}}`, nil, 422, "spec.secretHash"},
		// Issue 9 item 10: a body that does not say what it is, and a
		// version that can match nothing (was 409, sending clients to retry).
		{"no kind or apiVersion", c, "POST", "/api/v1/namespaces/default/pods", []byte(`{"metadata":{"name":"nokind"},"spec":{"containers":[{"name":"a","image":"b"}]}}`), nil, 400, "kind: Required value, apiVersion: Required value"},
		{"no apiVersion", c, "POST", "/api/v1/namespaces/default/pods", []byte(`{"kind":"Pod","metadata":{"name":"nokind"},"spec":{"containers":[{"name":"a","image":"b"}]}}`), nil, 400, "apiVersion: Required value"},
		{"garbage resourceVersion", c, "PUT", "/api/v1/namespaces/default/pods/victim", `{"metadata":{"name":"victim","resourceVersion":"abc"},"spec":{"containers":[{"name":"a","image":"b"}]}}`, nil, 400, `metadata.resourceVersion: Invalid value: "abc"`},
		{"delete default namespace", c, "DELETE", "/api/v1/namespaces/default", nil, nil, 403, "default"},
		{"unknown delete option", c, "DELETE", "/api/v1/namespaces/default/pods/victim", `{"gracePeriod":3}`, nil, 400, "gracePeriod"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := appliedIndex(s)
			r := tt.client.do(tt.method, tt.path, tt.body, tt.hdr...)
			if r.code != tt.code {
				t.Fatalf("got %d %s, want %d", r.code, r.body, tt.code)
			}
			st := r.status()
			if st.Kind != "Status" || st.Code != int32(tt.code) {
				t.Errorf("reply is not a Status with code %d: %s", tt.code, r.body)
			}
			if !strings.Contains(st.Message, tt.want) {
				t.Errorf("message %q does not mention %q", st.Message, tt.want)
			}
			if after := appliedIndex(s); after != before {
				t.Errorf("refused request changed the store: applied index %d → %d", before, after)
			}
		})
	}
	// The victim is still there, as it was.
	c.must(http.StatusOK, "GET", "/api/v1/namespaces/default/pods/victim", nil)
}

func TestListWithSelectors(t *testing.T) {
	s := startServer(t, testConfig(t))
	c := admin(t, s)
	const path = "/api/v1/namespaces/default/pods"
	for _, p := range []struct{ name, app string }{{"a1", "a"}, {"a2", "a"}, {"b1", "b"}} {
		c.must(http.StatusCreated, "POST", path, podJSON(p.name, map[string]string{"app": p.app}))
	}
	c.must(http.StatusCreated, "POST", "/api/v1/namespaces/default/pods/b1/binding", map[string]any{"target": map[string]any{"name": "n1"}})

	names := func(r reply) string {
		l := decode[api.List[api.Pod]](t, r)
		if l.Kind != "PodList" || l.APIVersion != "v1" || l.ResourceVersion == "" {
			t.Errorf("list envelope: kind %q apiVersion %q rv %q", l.Kind, l.APIVersion, l.ResourceVersion)
		}
		var out []string
		for _, p := range l.Items {
			out = append(out, p.Name)
		}
		return strings.Join(out, ",")
	}
	for _, tt := range []struct{ query, want string }{
		{"", "a1,a2,b1"},
		{"?labelSelector=app%3Da", "a1,a2"},
		{"?labelSelector=app!%3Da", "b1"},
		{"?labelSelector=app%20in%20(b,c)", "b1"},
		{"?fieldSelector=metadata.name%3Da2", "a2"},
		{"?fieldSelector=spec.nodeName%3Dn1", "b1"},
		{"?fieldSelector=spec.nodeName%3D", "a1,a2"},
		{"?labelSelector=app%3Da&fieldSelector=metadata.name!%3Da1&consistent=true", "a2"},
	} {
		if got := names(c.must(http.StatusOK, "GET", path+tt.query, nil)); got != tt.want {
			t.Errorf("list %s: got %q, want %q", tt.query, got, tt.want)
		}
	}
	// Across namespaces.
	if got := names(c.must(http.StatusOK, "GET", "/api/v1/pods?labelSelector=app%3Db", nil)); got != "b1" {
		t.Errorf("all-namespace list: %q", got)
	}
}

// A list reply longer than listChunkBytes is written a piece at a time
// (no Content-Length: the server does not hold it whole) and is the same
// list; a short one goes out whole with its length.
func TestLongListIsStreamed(t *testing.T) {
	s := startServer(t, testConfig(t))
	c := admin(t, s)
	const path = "/api/v1/namespaces/default/pods"
	long := strings.Repeat("x", 4000)
	n := listChunkBytes/4000 + 20
	for i := range n {
		pod := podJSON(fmt.Sprintf("p%03d", i), nil)
		pod["metadata"].(map[string]any)["annotations"] = map[string]string{"note": long}
		c.must(http.StatusCreated, "POST", path, pod)
	}
	r := c.must(http.StatusOK, "GET", path, nil)
	if cl := r.header.Get("Content-Length"); cl != "" {
		t.Errorf("a %d-byte list was sent with Content-Length %s: held whole", len(r.body), cl)
	}
	l := decode[api.List[api.Pod]](t, r)
	if len(l.Items) != n || l.Kind != "PodList" || l.ResourceVersion == "" {
		t.Fatalf("streamed list: %d items, kind %q, rv %q; want %d", len(l.Items), l.Kind, l.ResourceVersion, n)
	}
	for i, p := range l.Items {
		if want := fmt.Sprintf("p%03d", i); p.Name != want || p.Annotations["note"] != long {
			t.Fatalf("item %d is %q, want %s with its annotation", i, p.Name, want)
		}
	}
	short := c.must(http.StatusOK, "GET", path+"?fieldSelector=metadata.name%3Dp001", nil)
	if cl := short.header.Get("Content-Length"); cl != strconv.Itoa(len(short.body)) {
		t.Errorf("a short list has Content-Length %q, want %d", cl, len(short.body))
	}
}

// watchLine is one event of a watch reply.
type watchLine struct {
	Type   string          `json:"type"`
	Object json.RawMessage `json:"object"`
}

// openWatch starts a watch and returns its events.
func openWatch(t *testing.T, c *tc, path string) (<-chan watchLine, *http.Response) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", c.s.URL()+path, nil)
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.hc.Transport.RoundTrip(req)
	if err != nil {
		t.Fatalf("watch %s: %v", path, err)
	}
	ch := make(chan watchLine, 100)
	if resp.StatusCode != http.StatusOK {
		close(ch)
		return ch, resp
	}
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var l watchLine
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				t.Errorf("watch line %q: %v", sc.Text(), err)
				return
			}
			ch <- l
		}
	}()
	return ch, resp
}

func next(t *testing.T, ch <-chan watchLine) (string, api.Pod) {
	t.Helper()
	select {
	case l, ok := <-ch:
		if !ok {
			t.Fatal("watch ended early")
		}
		var p api.Pod
		_ = json.Unmarshal(l.Object, &p)
		return l.Type, p
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event within 10s")
	}
	return "", api.Pod{}
}

func TestWatch(t *testing.T) {
	cfg := testConfig(t)
	cfg.WatchWindow = 8
	s := startServer(t, cfg)
	c := admin(t, s)
	const path = "/api/v1/namespaces/default/pods"
	first := decode[api.Pod](t, c.must(http.StatusCreated, "POST", path, podJSON("w0", map[string]string{"w": "1"})))

	// From a resourceVersion: only what came after it, in order.
	ch, resp := openWatch(t, c, path+"?watch=true&resourceVersion="+first.ResourceVersion)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("watch reply %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	c.must(http.StatusCreated, "POST", path, podJSON("w1", map[string]string{"w": "1"}))
	p := decode[api.Pod](t, c.must(http.StatusOK, "GET", path+"/w1", nil))
	p.Labels["more"] = "x"
	c.must(http.StatusOK, "PUT", path+"/w1", p)
	c.must(http.StatusOK, "DELETE", path+"/w1", nil)
	for _, want := range []string{"ADDED", "MODIFIED", "DELETED"} {
		typ, obj := next(t, ch)
		if typ != want || obj.Name != "w1" {
			t.Fatalf("got %s %s, want %s w1", typ, obj.Name, want)
		}
	}

	// Without a resourceVersion: the current objects first, through the
	// /watch/ path form and with a selector.
	ch2, _ := openWatch(t, c, "/api/v1/watch/namespaces/default/pods?labelSelector=w%3D1")
	if typ, obj := next(t, ch2); typ != "ADDED" || obj.Name != "w0" {
		t.Fatalf("initial event %s %s, want ADDED w0", typ, obj.Name)
	}

	// A version older than the window is gone: 410, and the client relists.
	for i := range 12 {
		c.must(http.StatusCreated, "POST", path, podJSON(fmt.Sprintf("f%d", i), nil))
	}
	_, resp = openWatch(t, c, path+"?watch=true&resourceVersion="+first.ResourceVersion)
	if resp.StatusCode != http.StatusGone {
		t.Fatalf("watch from a version out of the window: %d, want 410", resp.StatusCode)
	}
	_, resp = openWatch(t, c, path+"?watch=true&resourceVersion=abc")
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("watch from a bad version: %d, want 400", resp.StatusCode)
	}
}

func TestWatchEndsOnClose(t *testing.T) {
	s := startServer(t, testConfig(t))
	c := admin(t, s)
	ch, _ := openWatch(t, c, "/api/v1/namespaces/default/pods?watch=true")
	done := make(chan error, 1)
	go func() { done <- s.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(shutdownTimeout / 2):
		t.Fatal("Close waited for an open watch")
	}
	for range ch {
	}
}

func TestBinding(t *testing.T) {
	s := startServer(t, testConfig(t))
	c := admin(t, s)
	const path = "/api/v1/namespaces/default/pods"
	c.must(http.StatusCreated, "POST", path, podJSON("b", nil))

	before := appliedIndex(s)
	r := c.do("POST", path+"/b/binding", `{"target":{"kind":"Node"}}`)
	if r.code != http.StatusUnprocessableEntity || !strings.Contains(r.status().Message, "target.name") {
		t.Fatalf("binding without a target: %d %s", r.code, r.body)
	}
	r = c.do("POST", path+"/b/binding", `{"metadata":{"name":"other"},"target":{"name":"n1"}}`)
	if r.code != http.StatusBadRequest {
		t.Fatalf("binding for another pod: %d %s", r.code, r.body)
	}
	if appliedIndex(s) != before {
		t.Fatal("refused binding changed the store")
	}

	r = c.must(http.StatusCreated, "POST", path+"/b/binding", `{"apiVersion":"v1","kind":"Binding","metadata":{"name":"b"},"target":{"kind":"Node","name":"n1"}}`)
	if r.status().Status != "Success" {
		t.Errorf("binding reply: %s", r.body)
	}
	// One raft entry: the node and the condition arrive together, at one
	// new resourceVersion.
	if got := appliedIndex(s); got != before+1 {
		t.Fatalf("binding took %d raft entries, want 1", got-before)
	}
	bound := c.must(http.StatusOK, "GET", path+"/b", nil)
	p := decode[api.Pod](t, bound)
	if p.Spec.NodeName != "n1" {
		t.Fatalf("nodeName %q after binding", p.Spec.NodeName)
	}
	if want := fmt.Sprint(before + 1); p.ResourceVersion != want {
		t.Fatalf("resourceVersion %s after binding, want %s", p.ResourceVersion, want)
	}
	scheduled := 0
	for _, cond := range p.Status.Conditions {
		if cond.Type == api.PodScheduled && cond.Status == api.ConditionTrue && cond.LastTransitionTime != nil {
			scheduled++
		}
	}
	if scheduled != 1 {
		t.Errorf("want one PodScheduled=True condition: %+v", p.Status.Conditions)
	}

	before = appliedIndex(s)
	r = c.do("POST", path+"/b/binding", `{"target":{"name":"n2"}}`)
	if r.code != http.StatusConflict || !strings.Contains(r.status().Message, "pod b is already assigned to node \"n1\"") {
		t.Fatalf("second binding: %d %s", r.code, r.body)
	}
	if appliedIndex(s) != before {
		t.Fatal("refused binding changed the store")
	}
	if again := c.must(http.StatusOK, "GET", path+"/b", nil); string(again.body) != string(bound.body) {
		t.Fatalf("refused binding changed the pod:\n%s\n%s", bound.body, again.body)
	}
	r = c.do("POST", path+"/ghost/binding", `{"target":{"name":"n1"}}`)
	if r.code != http.StatusNotFound {
		t.Fatalf("binding a missing pod: %d %s", r.code, r.body)
	}
}

func TestNamespaceDeleteCascades(t *testing.T) {
	s := startServer(t, testConfig(t))
	c := admin(t, s)
	c.must(http.StatusCreated, "POST", "/api/v1/namespaces", map[string]any{"metadata": map[string]any{"name": "gone"}})
	c.must(http.StatusCreated, "POST", "/api/v1/namespaces/gone/pods", podJSON("p1", nil))
	c.must(http.StatusCreated, "POST", "/api/v1/namespaces/gone/services", map[string]any{"metadata": map[string]any{"name": "svc"},
		"spec": map[string]any{"ports": []any{map[string]any{"port": 80}}}})
	c.must(http.StatusCreated, "POST", "/api/v1/namespaces/default/pods", podJSON("keep", nil))

	c.must(http.StatusOK, "DELETE", "/api/v1/namespaces/gone", nil)
	for _, p := range []string{"/api/v1/namespaces/gone/pods/p1", "/api/v1/namespaces/gone/services/svc", "/api/v1/namespaces/gone"} {
		if r := c.do("GET", p, nil); r.code != http.StatusNotFound {
			t.Errorf("GET %s after namespace delete: %d", p, r.code)
		}
	}
	c.must(http.StatusOK, "GET", "/api/v1/namespaces/default/pods/keep", nil)
	r := c.do("POST", "/api/v1/namespaces/gone/pods", podJSON("late", nil))
	if r.code != http.StatusNotFound {
		t.Errorf("create in a deleted namespace: %d %s", r.code, r.body)
	}
}

func TestMetricsAndHealth(t *testing.T) {
	s := startServer(t, testConfig(t))
	c := admin(t, s)
	anon := c.as("")
	c.must(http.StatusCreated, "POST", "/api/v1/namespaces/default/pods", podJSON("m", nil))
	c.do("GET", "/api/v1/namespaces/default/pods/missing", nil)

	for _, p := range []string{"/healthz", "/readyz", "/version"} {
		anon.must(http.StatusOK, "GET", p, nil)
	}
	v := decode[versionInfo](t, anon.must(http.StatusOK, "GET", "/version", nil))
	if v.GitVersion == "" || v.GoVersion == "" {
		t.Errorf("/version: %+v", v)
	}
	for _, p := range []string{"/metrics", "/api", "/apis", "/api/v1"} {
		anon.must(http.StatusUnauthorized, "GET", p, nil)
	}
	body := string(c.must(http.StatusOK, "GET", "/metrics", nil).body)
	for _, want := range []string{
		`outpost_api_requests_total{code="201",resource="pods",verb="create"} 1`,
		`outpost_api_requests_total{code="404",resource="pods",verb="get"} 1`,
		`outpost_api_request_duration_seconds_bucket{resource="pods",verb="create"`,
		`outpost_store_objects`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	apis := string(c.must(http.StatusOK, "GET", "/apis", nil).body)
	if !strings.Contains(apis, `"apps/v1"`) || !strings.Contains(apis, `"outpost.io/v1"`) {
		t.Errorf("/apis: %s", apis)
	}
	core := string(c.must(http.StatusOK, "GET", "/api/v1", nil).body)
	if !strings.Contains(core, `"pods/binding"`) || !strings.Contains(core, `"nodes"`) {
		t.Errorf("/api/v1: %s", core)
	}
	c.must(http.StatusOK, "GET", "/apis/apps/v1", nil)
	c.must(http.StatusNotFound, "GET", "/apis/apps/v2/deployments", nil)
}

// A reply cut off midway on purpose (a list whose item could not be
// encoded, read.go) is passed on to net/http, which drops the connection,
// and counted in the request metrics as a server error; it was missing
// from them.
func TestCutOffReplyIsCounted(t *testing.T) {
	s := startServer(t, testConfig(t))
	c := admin(t, s)
	rec := &recorder{ResponseWriter: httptest.NewRecorder(), code: http.StatusOK, verb: "list", resource: "pods", wrote: true}
	r := httptest.NewRequest("GET", "/api/v1/pods", nil)
	func() {
		defer func() {
			if v := recover(); v != http.ErrAbortHandler {
				t.Errorf("panic %v passed on, want http.ErrAbortHandler", v)
			}
		}()
		defer s.finish(rec, r, time.Now())
		panic(http.ErrAbortHandler)
	}()
	body := string(c.must(http.StatusOK, "GET", "/metrics", nil).body)
	if want := `outpost_api_requests_total{code="500",resource="pods",verb="list"} 1`; !strings.Contains(body, want) {
		t.Errorf("/metrics lacks %s", want)
	}
}

func TestTokens(t *testing.T) {
	s := startServer(t, testConfig(t))
	c := admin(t, s)
	dev := c.as(addToken(t, c, api.TokenSpec{Role: api.RoleDeveloper, Namespaces: []string{"default"}}))
	dev.must(http.StatusCreated, "POST", "/api/v1/namespaces/default/pods", podJSON("mine", nil))
	dev.must(http.StatusOK, "GET", "/api/v1/namespaces/default/pods/mine", nil)
	// The admin token is in the store too, as a Token object.
	adminID, _, _ := auth.ParseToken(s.AdminConfig().Token)
	tok := decode[api.Token](t, c.must(http.StatusOK, "GET", "/apis/outpost.io/v1/tokens/"+adminID, nil))
	if tok.Spec.Role != api.RoleClusterAdmin || len(tok.Spec.SecretHash) != 64 {
		t.Errorf("admin token object: %+v", tok.Spec)
	}
	if strings.Contains(string(c.must(http.StatusOK, "GET", "/apis/outpost.io/v1/tokens", nil).body), strings.SplitN(s.AdminConfig().Token, ".", 2)[1]) {
		t.Error("a token list reveals a secret")
	}
	// Deleting the built-in admin token said "deleted" while the token
	// kept working, and made /readyz false: refused, saying why (issue 9
	// item 10).
	r := c.do("DELETE", "/apis/outpost.io/v1/tokens/"+adminID, nil)
	if r.code != http.StatusForbidden || !strings.Contains(r.status().Message, "built-in admin token, derived from the cluster secret") {
		t.Fatalf("delete the admin token: %d %s", r.code, r.body)
	}
	c.must(http.StatusOK, "GET", "/apis/outpost.io/v1/tokens/"+adminID, nil)
	c.must(http.StatusOK, "GET", "/readyz", nil)
}

func TestGenerateName(t *testing.T) {
	s := startServer(t, testConfig(t))
	c := admin(t, s)
	body := `{"metadata":{"generateName":"job-"},"spec":{"containers":[{"name":"a","image":"b"}]}}`
	a := decode[api.Pod](t, c.must(http.StatusCreated, "POST", "/api/v1/namespaces/default/pods", body))
	b := decode[api.Pod](t, c.must(http.StatusCreated, "POST", "/api/v1/namespaces/default/pods", body))
	if !strings.HasPrefix(a.Name, "job-") || len(a.Name) != len("job-")+5 || a.Name == b.Name {
		t.Errorf("generated names %q and %q", a.Name, b.Name)
	}
}

// refuseAdmission refuses pods labelled deny=yes and labels others.
type refuseAdmission struct{ ops []string }

func (a *refuseAdmission) Admit(_ context.Context, op string, _ *auth.Identity, obj, _ api.Object) error {
	a.ops = append(a.ops, op)
	p, ok := obj.(*api.Pod)
	if !ok {
		return nil
	}
	if p.Labels["deny"] == "yes" {
		return api.NewForbidden("pods labelled deny=yes are refused by admission")
	}
	if p.Labels["panic"] == "yes" {
		panic("admission bug")
	}
	if p.Labels == nil {
		p.Labels = map[string]string{}
	}
	p.Labels["admitted"] = "true"
	return nil
}

func TestAdmissionAndPanics(t *testing.T) {
	cfg := testConfig(t)
	adm := &refuseAdmission{}
	cfg.Admission = []Admission{adm}
	s := startServer(t, cfg)
	c := admin(t, s)
	const path = "/api/v1/namespaces/default/pods"
	p := decode[api.Pod](t, c.must(http.StatusCreated, "POST", path, podJSON("ok", nil)))
	if p.Labels["admitted"] != "true" {
		t.Errorf("mutating admission not applied: %v", p.Labels)
	}
	before := appliedIndex(s)
	r := c.do("POST", path, podJSON("no", map[string]string{"deny": "yes"}))
	if r.code != http.StatusForbidden || !strings.Contains(r.status().Message, "deny=yes") {
		t.Fatalf("refused by admission: %d %s", r.code, r.body)
	}
	r = c.do("POST", path, podJSON("boom", map[string]string{"panic": "yes"}))
	if r.code != http.StatusInternalServerError {
		t.Fatalf("panicking admission: %d %s", r.code, r.body)
	}
	if appliedIndex(s) != before {
		t.Fatal("refused writes changed the store")
	}
	// The server goes on.
	c.must(http.StatusOK, "GET", path+"/ok", nil)
	if strings.Join(adm.ops, ",") != "CREATE,CREATE,CREATE" {
		t.Errorf("admission ops %v", adm.ops)
	}
}

func TestRaftPeers(t *testing.T) {
	s := startServer(t, testConfig(t))
	c := admin(t, s)
	l := decode[raftPeerList](t, c.must(http.StatusOK, "GET", "/apis/outpost.io/v1/raft/peers", nil))
	if len(l.Items) != 1 || l.Items[0].ID != "s1" || !l.Items[0].Leader || l.Items[0].APIAddr != s.URL() {
		t.Fatalf("peers: %+v", l.Items)
	}
	before := appliedIndex(s)
	r := c.do("DELETE", "/apis/outpost.io/v1/raft/peers/s1", nil)
	if r.code != http.StatusConflict || !strings.Contains(r.status().Message, "quorum") {
		t.Fatalf("removing the only voter: %d %s", r.code, r.body)
	}
	// A change naming no member is a 404, never a success: `outpost adm
	// raft remove-peer nosuch` once printed "removed".
	for _, req := range [][2]string{
		{"POST", "/apis/outpost.io/v1/raft/peers/ghost/demote"},
		{"POST", "/apis/outpost.io/v1/raft/peers/ghost/promote"},
		{"DELETE", "/apis/outpost.io/v1/raft/peers/ghost"},
	} {
		r = c.do(req[0], req[1], nil)
		if r.code != http.StatusNotFound || r.status().Message != `raft peer "ghost" not found` {
			t.Errorf("%s %s of an unknown server: %d %s", req[0], req[1], r.code, r.body)
		}
	}
	if appliedIndex(s) != before {
		t.Fatal("refused membership changes changed the log")
	}
	dev := c.as(addToken(t, c, api.TokenSpec{Role: api.RoleDeveloper, Namespaces: []string{"default"}}))
	dev.must(http.StatusForbidden, "GET", "/apis/outpost.io/v1/raft/peers", nil)
}

func TestRestartKeepsState(t *testing.T) {
	cfg := testConfig(t)
	cfg.ClusterSecret = "" // generated and saved on the first start
	s := startServer(t, cfg)
	admin(t, s).must(http.StatusCreated, "POST", "/api/v1/namespaces/default/pods", podJSON("durable", nil))
	url := s.URL()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if r, err := http.Get(strings.Replace(url, "https", "http", 1) + "/healthz"); err == nil {
		r.Body.Close()
		t.Fatalf("%s still answers after Close", url)
	}
	s2 := startServer(t, cfg)
	admin(t, s2).must(http.StatusOK, "GET", "/api/v1/namespaces/default/pods/durable", nil)
	if s2.AdminConfig().Token != s.AdminConfig().Token {
		t.Error("the admin token changed across a restart: the saved secret was not used")
	}
}

func TestInsecureStillNeedsTokens(t *testing.T) {
	cfg := testConfig(t)
	cfg.Insecure = true
	s := startServer(t, cfg)
	if !strings.HasPrefix(s.URL(), "http://") || s.AdminConfig().CAData != nil {
		t.Fatalf("insecure server URL %s", s.URL())
	}
	c := admin(t, s)
	c.as("").must(http.StatusUnauthorized, "GET", "/api/v1/namespaces", nil)
	c.must(http.StatusOK, "GET", "/api/v1/namespaces", nil)
}

func TestStartErrors(t *testing.T) {
	cfg := testConfig(t)
	cfg.DataDir = ""
	if _, err := Start(context.Background(), cfg); !errors.Is(err, ErrConfig) {
		t.Errorf("no DataDir: %v", err)
	}
	cfg = testConfig(t)
	cfg.ClusterSecret = ""
	cfg.BootstrapExpect = 3
	cfg.Join = []string{"127.0.0.1:1"}
	_, err := Start(context.Background(), cfg)
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "--cluster-secret") {
		t.Errorf("multi-server cluster without a secret: %v", err)
	}
	cfg = testConfig(t)
	cfg.ClusterSecret = "short"
	if _, err := Start(context.Background(), cfg); !errors.Is(err, ErrConfig) {
		t.Errorf("short secret: %v", err)
	}
}

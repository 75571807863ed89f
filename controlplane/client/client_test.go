package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/pki"
)

func res(kind string) *api.Resource { return api.ResourceForKind(kind) }

func TestPathFor(t *testing.T) {
	tests := []struct {
		r             *api.Resource
		ns, name, sub string
		want          string
	}{
		{res("Pod"), "default", "", "", "/api/v1/namespaces/default/pods"},
		{res("Pod"), "", "", "", "/api/v1/pods"},
		{res("Pod"), "kube", "web-1", "", "/api/v1/namespaces/kube/pods/web-1"},
		{res("Pod"), "kube", "web-1", "binding", "/api/v1/namespaces/kube/pods/web-1/binding"},
		{res("Node"), "ignored", "n1", "status", "/api/v1/nodes/n1/status"},
		{res("Node"), "", "", "", "/api/v1/nodes"},
		{res("Deployment"), "a", "web", "", "/apis/apps/v1/namespaces/a/deployments/web"},
		{res("DaemonSet"), "", "", "", "/apis/apps/v1/daemonsets"},
		{res("Token"), "x", "abc123", "", "/apis/outpost.io/v1/tokens/abc123"},
		{res("Pod"), "default", "a b", "", "/api/v1/namespaces/default/pods/a%20b"},
	}
	for _, tt := range tests {
		if got := PathFor(tt.r, tt.ns, tt.name, tt.sub); got != tt.want {
			t.Errorf("PathFor(%s, %q, %q, %q) = %q, want %q", tt.r.Plural, tt.ns, tt.name, tt.sub, got, tt.want)
		}
	}
}

func TestParseWarnings(t *testing.T) {
	tests := []struct {
		name   string
		values []string
		want   []string
	}{
		{"none", nil, nil},
		{"one", []string{`299 - "spec.foo: accepted but not acted on"`}, []string{"spec.foo: accepted but not acted on"}},
		{"two headers", []string{`299 - "a"`, `299 - "b"`}, []string{"a", "b"}},
		{"comma joined", []string{`299 - "a, with comma", 299 - "b"`}, []string{"a, with comma", "b"}},
		{"escaped quote", []string{`299 - "say \"hi\""`}, []string{`say "hi"`}},
		{"with date", []string{`299 outpost "x" "Sat, 01 Jan 2000 00:00:00 GMT"`}, []string{"x"}},
		{"malformed kept", []string{`just text`}, []string{"just text"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for _, v := range tt.values {
				h.Add("Warning", v)
			}
			if got := ParseWarnings(h); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseWarnings = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestErrorFromReply(t *testing.T) {
	nf, _ := json.Marshal(api.NewNotFound(res("Pod"), "x").Status)
	tests := []struct {
		name    string
		code    int
		body    string
		is      func(error) bool
		message string
	}{
		{"status body", 404, string(nf), api.IsNotFound, `pods "x" not found`},
		{"plain text 404", 404, "404 page not found\n", api.IsNotFound, "404 page not found"},
		{"empty 409", 409, "", api.IsConflict, "Conflict"},
		{"status without reason", 410, `{"kind":"Status","code":410,"message":"too old"}`, api.IsGone, "too old"},
		{"html 503", 503, "<html>down</html>", func(err error) bool { return api.ReasonOf(err) == api.ReasonServiceUnavailable }, "<html>down</html>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ErrorFromReply(tt.code, []byte(tt.body))
			if !tt.is(err) {
				t.Errorf("reason %q does not match", err.Status.Reason)
			}
			if err.Error() != tt.message {
				t.Errorf("message %q, want %q", err.Error(), tt.message)
			}
			if err.Code() != tt.code {
				t.Errorf("code %d, want %d", err.Code(), tt.code)
			}
		})
	}
}

func TestNewChecksServer(t *testing.T) {
	tests := []struct {
		cfg  Config
		want error
	}{
		{Config{}, ErrNoServer},
		{Config{Server: "http://127.0.0.1:1"}, ErrPlainHTTP},
		{Config{Server: "ftp://x"}, ErrBadServer},
		{Config{Server: "https://"}, ErrBadServer},
		{Config{Server: "http://127.0.0.1:1", Insecure: true}, nil},
		{Config{Server: "https://127.0.0.1:1"}, nil},
	}
	for _, tt := range tests {
		_, err := New(tt.cfg)
		if !errors.Is(err, tt.want) {
			t.Errorf("New(%+v) = %v, want %v", tt.cfg, err, tt.want)
		}
	}
	for _, s := range []string{"127.0.0.1:26443", "edge-1.local:6443/"} {
		c, err := New(Config{Server: s})
		if err != nil || !strings.HasPrefix(c.Server(), "https://") {
			t.Errorf("New with server %q (no scheme) = %v, %v; want https:// assumed", s, c, err)
		}
	}
	if _, err := New(Config{Server: "https://x", CAData: []byte("not pem")}); err == nil {
		t.Error("New accepted certificate-authority-data that is not PEM")
	}
}

// recorded is what the test server saw of one request.
type recorded struct {
	method, path, query, auth string
	body                      []byte
}

// testServer serves canned replies per "METHOD path" and records requests.
func testServer(t *testing.T, routes map[string]http.HandlerFunc) (*Client, *[]recorded) {
	t.Helper()
	var reqs []recorded
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		reqs = append(reqs, recorded{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Authorization"), body})
		h, ok := routes[r.Method+" "+r.URL.Path]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, "no route")
			return
		}
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	c, err := New(Config{Server: srv.URL, Insecure: true, Token: "abc123.secret", Namespace: "team"})
	if err != nil {
		t.Fatal(err)
	}
	return c, &reqs
}

func reply(code int, body string, warnings ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		for _, ws := range warnings {
			w.Header().Add("Warning", `299 - "`+ws+`"`)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		fmt.Fprint(w, body)
	}
}

func TestTypedCRUD(t *testing.T) {
	conflict, _ := json.Marshal(api.NewConflict(res("Pod"), "web", "stale").Status)
	c, reqs := testServer(t, map[string]http.HandlerFunc{
		"GET /api/v1/namespaces/team/pods/web": reply(200, `{"metadata":{"name":"web","namespace":"team","resourceVersion":"7"},"spec":{"containers":[{"name":"c","image":"i"}],"futureField":1}}`),
		"GET /api/v1/pods": reply(200, `{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"42"},"items":[
			{"metadata":{"name":"a","namespace":"x"}},{"metadata":{"name":"b","namespace":"y"}}]}`),
		"POST /api/v1/namespaces/team/pods":             reply(201, `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"new","namespace":"team","resourceVersion":"8"}}`, "spec.x: accepted but not acted on"),
		"PUT /api/v1/namespaces/team/pods/web":          reply(409, string(conflict)),
		"PUT /api/v1/namespaces/team/pods/web/status":   reply(200, `{"metadata":{"name":"web","resourceVersion":"9"},"status":{"phase":"Running"}}`),
		"DELETE /api/v1/namespaces/team/pods/web":       reply(200, `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"web"}}`),
		"DELETE /api/v1/nodes/n1":                       reply(200, `{"kind":"Status","apiVersion":"v1","status":"Success"}`),
		"POST /api/v1/namespaces/team/pods/web/binding": reply(201, `{"kind":"Status","status":"Success"}`),
	})
	ctx := t.Context()

	obj, err := c.Get(ctx, res("Pod"), "", "web", GetOptions{Consistent: true})
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	pod := obj.(*api.Pod)
	if pod.Name != "web" || pod.ResourceVersion != "7" || pod.Kind != "Pod" || pod.APIVersion != "v1" {
		t.Errorf("Get decoded %+v (kind %q): want web at rv 7 with type metadata filled in", pod.ObjectMeta, pod.Kind)
	}
	if got := (*reqs)[0]; got.query != "consistent=true" || got.auth != "Bearer abc123.secret" {
		t.Errorf("Get sent query %q auth %q", got.query, got.auth)
	}

	objs, rv, err := c.List(ctx, res("Pod"), "", ListOptions{LabelSelector: "app=web", FieldSelector: "spec.nodeName=n1"})
	if err != nil || rv != "42" || len(objs) != 2 || objs[1].GetObjectMeta().Name != "b" {
		t.Fatalf("List = %d objects at rv %q, %v", len(objs), rv, err)
	}
	if q := (*reqs)[1].query; q != "fieldSelector=spec.nodeName%3Dn1&labelSelector=app%3Dweb" {
		t.Errorf("List query %q", q)
	}

	created, ws, err := c.Create(ctx, &api.Pod{ObjectMeta: api.ObjectMeta{Name: "new"}})
	if err != nil || created.GetObjectMeta().ResourceVersion != "8" {
		t.Fatalf("Create = %v, %v", created, err)
	}
	if !reflect.DeepEqual(ws, api.Warnings{"spec.x: accepted but not acted on"}) {
		t.Errorf("Create warnings %q", ws)
	}
	var sent api.Pod
	if err := json.Unmarshal((*reqs)[2].body, &sent); err != nil || sent.Kind != "Pod" || sent.APIVersion != "v1" {
		t.Errorf("Create body %s lacks type metadata", (*reqs)[2].body)
	}

	_, _, err = c.Update(ctx, &api.Pod{ObjectMeta: api.ObjectMeta{Name: "web", ResourceVersion: "6"}})
	if !api.IsConflict(err) {
		t.Errorf("Update with a stale version: %v, want a Conflict", err)
	}
	if _, _, err := c.UpdateStatus(ctx, &api.Pod{ObjectMeta: api.ObjectMeta{Name: "web"}}); err != nil {
		t.Errorf("UpdateStatus: %v", err)
	}

	del, err := c.Delete(ctx, res("Pod"), "", "web", &Preconditions{ResourceVersion: "9", UID: "u1"})
	if err != nil || del.GetObjectMeta().Name != "web" {
		t.Fatalf("Delete = %v, %v", del, err)
	}
	var opts map[string]any
	if err := json.Unmarshal((*reqs)[5].body, &opts); err != nil {
		t.Fatal(err)
	}
	wantOpts := map[string]any{"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": map[string]any{"resourceVersion": "9", "uid": "u1"}}
	if !reflect.DeepEqual(opts, wantOpts) {
		t.Errorf("Delete body %v, want %v", opts, wantOpts)
	}
	if obj, err := c.Delete(ctx, res("Node"), "", "n1", nil); err != nil || obj != nil {
		t.Errorf("Delete answered by a Status = %v, %v; want nil, nil", obj, err)
	}
	if len((*reqs)[6].body) != 0 {
		t.Errorf("unconditional Delete sent a body: %s", (*reqs)[6].body)
	}

	if err := c.Bind(ctx, "", "web", "n1"); err != nil {
		t.Fatalf("Bind: %v", err)
	}
	var b api.Binding
	if err := json.Unmarshal((*reqs)[7].body, &b); err != nil {
		t.Fatal(err)
	}
	if b.Kind != "Binding" || b.Name != "web" || b.Namespace != "team" || b.Target.Kind != "Node" || b.Target.Name != "n1" {
		t.Errorf("Bind body %+v", b)
	}

	if _, err := c.Get(ctx, res("Pod"), "", "a b/c", GetOptions{}); !api.IsNotFound(err) {
		t.Errorf("Get of an odd name: %v", err)
	}
	if got := (*reqs)[len(*reqs)-1].path; got != "/api/v1/namespaces/team/pods/a b/c" {
		t.Errorf("odd name reached the server as %q, want it escaped once", got)
	}
	if _, err := c.Get(ctx, res("Pod"), "other", "nope", GetOptions{}); !api.IsNotFound(err) {
		t.Errorf("Get of an unrouted path: %v, want NotFound from the plain-text 404", err)
	}
}

func TestWarningHandler(t *testing.T) {
	c, _ := testServer(t, map[string]http.HandlerFunc{
		"GET /api/v1/nodes": reply(200, `{"items":[]}`, "first", "second"),
	})
	var got []string
	c.SetWarningHandler(func(s string) { got = append(got, s) })
	if _, _, err := c.List(t.Context(), res("Node"), "", ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, []string{"first", "second"}) {
		t.Errorf("handler saw %q", got)
	}
}

func TestWatch(t *testing.T) {
	gone, _ := json.Marshal(api.NewGone("too old resource version: 1 (5)").Status)
	c, reqs := testServer(t, map[string]http.HandlerFunc{
		"GET /api/v1/namespaces/team/pods": func(w http.ResponseWriter, _ *http.Request) {
			fl := w.(http.Flusher)
			for _, l := range []string{
				`{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"3"}}}`,
				`{"type":"SOMETHING_NEW","object":{}}`,
				`{"type":"MODIFIED","object":{"metadata":{"name":"a","resourceVersion":"4"},"status":{"phase":"Running"}}}`,
				`{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"5"}}}`,
				`{"type":"DELETED","object":{"metadata":{"name":"a","resourceVersion":"6"}}}`,
				`{"type":"ERROR","object":` + string(gone) + `}`,
			} {
				fmt.Fprintln(w, l)
				fl.Flush()
			}
		},
	})
	ch, err := c.Watch(t.Context(), res("Pod"), "team", ListOptions{LabelSelector: "app=a"}, "2")
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	var last WatchEvent
	for ev := range ch {
		types = append(types, ev.Type)
		last = ev
		if ev.Type == EventModified && ev.Object.(*api.Pod).Status.Phase != "Running" {
			t.Errorf("MODIFIED object not decoded: %+v", ev.Object)
		}
	}
	if want := []string{EventAdded, EventModified, EventBookmark, EventDeleted, EventError}; !reflect.DeepEqual(types, want) {
		t.Errorf("event types %v, want %v (unknown types skipped, channel closed at the end)", types, want)
	}
	if !api.IsGone(last.Err) {
		t.Errorf("ERROR event carries %v, want a Gone StatusError", last.Err)
	}
	if q := (*reqs)[0].query; q != "labelSelector=app%3Da&resourceVersion=2&watch=true" {
		t.Errorf("watch query %q", q)
	}
}

func TestWatchEndsWithContext(t *testing.T) {
	c, _ := testServer(t, map[string]http.HandlerFunc{
		"GET /api/v1/nodes": func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintln(w, `{"type":"ADDED","object":{"metadata":{"name":"n1"}}}`)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		},
	})
	ctx, cancel := context.WithCancel(t.Context())
	ch, err := c.Watch(ctx, res("Node"), "", ListOptions{}, "")
	if err != nil {
		t.Fatal(err)
	}
	if ev := <-ch; ev.Type != EventAdded || ev.Object.GetObjectMeta().Name != "n1" {
		t.Fatalf("first event %+v", ev)
	}
	cancel()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("watch channel not closed after the context ended")
		}
	}
}

func TestWatchRefused(t *testing.T) {
	gone, _ := json.Marshal(api.NewGone("too old").Status)
	c, _ := testServer(t, map[string]http.HandlerFunc{"GET /api/v1/nodes": reply(410, string(gone))})
	if _, err := c.Watch(t.Context(), res("Node"), "", ListOptions{}, "1"); !api.IsGone(err) {
		t.Errorf("Watch = %v, want Gone", err)
	}
}

func TestRaftAndTokens(t *testing.T) {
	refusal, _ := json.Marshal(api.NewBadRequest("peer s3 has not caught up (index 10 of 99)").Status)
	c, reqs := testServer(t, map[string]http.HandlerFunc{
		"GET /apis/outpost.io/v1/raft/peers": reply(200, `{"kind":"RaftPeerList","items":[
			{"id":"s1","address":"10.0.0.1:7000","apiAddr":"10.0.0.1:6443","suffrage":"Voter","leader":true,"lastIndex":99,"reachable":true},
			{"id":"s3","address":"10.0.0.3:7000","suffrage":"Nonvoter","lastIndex":10,"reachable":false,"error":"timeout","newField":1}]}`),
		"POST /apis/outpost.io/v1/raft/peers/s3/promote": reply(400, string(refusal)),
		"POST /apis/outpost.io/v1/raft/peers/s1/demote":  reply(200, `{}`),
		"DELETE /apis/outpost.io/v1/raft/peers/s3":       reply(200, `{}`),
		"POST /apis/outpost.io/v1/tokens":                reply(201, `{"kind":"Token","apiVersion":"outpost.io/v1","metadata":{"name":"abc123"},"spec":{"role":"node","secretHash":"h"}}`),
		"GET /version":                                   reply(200, `{"version":"v1.2.3","goVersion":"go1.26"}`),
	})
	ctx := t.Context()
	peers, err := c.RaftPeers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []RaftPeer{
		{ID: "s1", Address: "10.0.0.1:7000", APIAddr: "10.0.0.1:6443", Suffrage: "Voter", Leader: true, LastIndex: 99, Reachable: true},
		{ID: "s3", Address: "10.0.0.3:7000", Suffrage: "Nonvoter", LastIndex: 10, Error: "timeout"},
	}
	if !reflect.DeepEqual(peers, want) {
		t.Errorf("RaftPeers = %+v", peers)
	}
	if err := c.RaftPromote(ctx, "s3"); err == nil || !strings.Contains(err.Error(), "has not caught up") {
		t.Errorf("RaftPromote refusal = %v", err)
	}
	if err := c.RaftDemote(ctx, "s1"); err != nil {
		t.Error(err)
	}
	if err := c.RaftRemove(ctx, "s3"); err != nil {
		t.Error(err)
	}
	tok, err := c.CreateToken(ctx, &api.Token{ObjectMeta: api.ObjectMeta{Name: "abc123"}, Spec: api.TokenSpec{Role: "node", SecretHash: "h"}})
	if err != nil || tok.Name != "abc123" {
		t.Fatalf("CreateToken = %+v, %v", tok, err)
	}
	if !strings.Contains(string((*reqs)[4].body), `"kind":"Token","apiVersion":"outpost.io/v1"`) &&
		!strings.Contains(string((*reqs)[4].body), `"apiVersion":"outpost.io/v1","kind":"Token"`) {
		t.Errorf("CreateToken body %s lacks type metadata", (*reqs)[4].body)
	}
	v, err := c.Version(ctx)
	if err != nil || v.Version != "v1.2.3" {
		t.Errorf("Version = %+v, %v", v, err)
	}
}

func TestTLSWithClusterCA(t *testing.T) {
	ca, err := pki.DeriveCA(pki.GenerateSecret())
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.IssueServerCert("s1", nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(reply(200, `{"version":"v9"}`))
	srv.TLS = pki.ServerTLSConfig(ca, cert)
	srv.StartTLS()
	t.Cleanup(srv.Close)

	c, err := New(Config{Server: srv.URL, CAData: ca.CertPEM()})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := c.Version(t.Context()); err != nil || v.Version != "v9" {
		t.Fatalf("Version over TLS with the cluster CA = %+v, %v", v, err)
	}

	other, err := pki.DeriveCA(pki.GenerateSecret())
	if err != nil {
		t.Fatal(err)
	}
	c2, err := New(Config{Server: srv.URL, CAData: other.CertPEM()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c2.Version(t.Context()); !errors.Is(err, ErrUnreachable) {
		t.Errorf("a server certified by another CA was accepted: %v", err)
	}
}

func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "config")
	want := Config{Server: "https://10.0.0.1:6443", CAData: []byte("-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n"), Token: "abc123.s", Namespace: "team"}
	if err := WriteConfig(path, Config{Server: want.Server, CAData: want.CAData, Token: want.Token, Namespace: want.Namespace, Insecure: true, Timeout: time.Second}); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("config mode %v, want 0600", st.Mode().Perm())
	}
	raw, _ := os.ReadFile(path)
	for _, key := range []string{"server:", "certificate-authority-data:", "token:", "namespace:"} {
		if !strings.Contains(string(raw), key) {
			t.Errorf("config file lacks %q:\n%s", key, raw)
		}
	}

	t.Setenv(EnvServer, "")
	t.Setenv(EnvToken, "")
	got, err := LoadConfig(path)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("LoadConfig = %+v, %v; want %+v (Insecure and Timeout are not stored)", got, err, want)
	}

	t.Setenv(EnvServer, "https://env:6443")
	t.Setenv(EnvToken, "envtok.x")
	got, err = LoadConfig(path)
	if err != nil || got.Server != "https://env:6443" || got.Token != "envtok.x" || got.Namespace != "team" {
		t.Errorf("environment did not override the file: %+v, %v", got, err)
	}

	t.Setenv(EnvConfig, path)
	if got, err := LoadConfig(""); err != nil || got.Namespace != "team" {
		t.Errorf("LoadConfig(\"\") with $%s = %+v, %v", EnvConfig, got, err)
	}

	t.Setenv(EnvConfig, filepath.Join(dir, "missing"))
	if got, err := LoadConfig(""); err != nil || got.Server != "https://env:6443" {
		t.Errorf("a missing default file should not be an error: %+v, %v", got, err)
	}
	if err := MissingConfigFile(); !errors.Is(err, ErrNoConfig) || !strings.Contains(err.Error(), filepath.Join(dir, "missing")+" (named by $OUTPOST_CONFIG) does not exist") {
		t.Errorf("MissingConfigFile with $%s naming a missing file = %v", EnvConfig, err)
	}
	t.Setenv(EnvConfig, path)
	if err := MissingConfigFile(); err != nil {
		t.Errorf("MissingConfigFile with $%s naming a file = %v, want nil", EnvConfig, err)
	}
	if _, err := LoadConfig(filepath.Join(dir, "missing")); !errors.Is(err, ErrNoConfig) {
		t.Errorf("a missing named file: %v, want ErrNoConfig", err)
	}

	bad := filepath.Join(dir, "bad")
	os.WriteFile(bad, []byte("server: [unclosed"), 0o600)
	if _, err := LoadConfig(bad); err == nil {
		t.Error("malformed YAML accepted")
	}
}

func TestDefaultConfigPath(t *testing.T) {
	t.Setenv(EnvConfig, "")
	t.Setenv("XDG_CONFIG_HOME", "/xdg")
	if got := DefaultConfigPath(); got != "/xdg/outpost/config" {
		t.Errorf("with XDG_CONFIG_HOME: %q", got)
	}
	t.Setenv("XDG_CONFIG_HOME", "")
	t.Setenv("HOME", "/home/u")
	if got := DefaultConfigPath(); got != "/home/u/.config/outpost/config" {
		t.Errorf("with HOME only: %q", got)
	}
	t.Setenv(EnvConfig, "/etc/outpost/admin.conf")
	if got := DefaultConfigPath(); got != "/etc/outpost/admin.conf" {
		t.Errorf("with $%s: %q", EnvConfig, got)
	}
}

// Latest keeps the newest version: an older one seen later (a watch
// behind the caller's own write) is not kept, and Copy is private.
func TestLatest(t *testing.T) {
	var l Latest[*api.Node]
	if _, ok, err := l.Copy(); ok || err != nil {
		t.Fatalf("empty: ok %v err %v", ok, err)
	}
	mk := func(rv, label string) *api.Node {
		return &api.Node{ObjectMeta: api.ObjectMeta{Name: "n", ResourceVersion: rv, Labels: map[string]string{"v": label}}}
	}
	l.See(mk("10", "ten"))
	l.See(mk("9", "nine"))
	l.See(mk("bad", "bad"))
	n, ok, err := l.Copy()
	if !ok || err != nil || n.Labels["v"] != "ten" {
		t.Fatalf("kept %v (ok %v, %v), want version 10", n, ok, err)
	}
	n.Labels["v"] = "changed"
	if again, _, _ := l.Copy(); again.Labels["v"] != "ten" {
		t.Error("a change to a copy reached what is kept")
	}
	l.See(mk("11", "eleven"))
	if n, _, _ := l.Copy(); n.Labels["v"] != "eleven" {
		t.Errorf("kept %v, want version 11", n.Labels)
	}
	l.Forget()
	if _, ok, _ := l.Copy(); ok {
		t.Error("kept after Forget")
	}
}

// TestWatchLineForms: the line reader cuts the server's own form without
// decoding it, and every other form of the same event (other spacing,
// other key order, a field after the object, a line longer than the read
// buffer, no final newline) still decodes to the same event.
func TestWatchLineForms(t *testing.T) {
	long := strings.Repeat("x", 100<<10)
	stream := strings.Join([]string{
		`{"type":"ADDED","object":{"metadata":{"name":"a"}}}`,
		``,
		`{ "type" : "MODIFIED" , "object" : {"metadata":{"name":"b"}} }`,
		`{"object":{"metadata":{"name":"c"}},"type":"MODIFIED"}`,
		`{"type":"DELETED","object":{"metadata":{"name":"d"}},"extra":{"x":1}}`,
		"{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"e\",\"annotations\":{\"big\":\"" + long + "\"}}}}\r",
		`{"type":"MODIFIED","object":{"metadata":{"name":"f"}}}`,
	}, "\n")
	c, _ := testServer(t, map[string]http.HandlerFunc{
		"GET /api/v1/namespaces/team/pods": func(w http.ResponseWriter, _ *http.Request) {
			io.WriteString(w, stream)
		},
	})
	ch, err := c.Watch(t.Context(), res("Pod"), "team", ListOptions{}, "1")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for ev := range ch {
		if ev.Err != nil {
			t.Fatalf("event %d: %v", len(got), ev.Err)
		}
		p := ev.Object.(*api.Pod)
		got = append(got, ev.Type+" "+p.Name)
		if p.Name == "e" && p.Annotations["big"] != long {
			t.Errorf("long line's annotation is %d bytes, want %d", len(p.Annotations["big"]), len(long))
		}
	}
	want := []string{"ADDED a", "MODIFIED b", "MODIFIED c", "DELETED d", "ADDED e", "MODIFIED f"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
}

// TestWatchBadLine: a line that is not JSON ends the watch with an error
// event, as before, also when it has the server's form.
func TestWatchBadLine(t *testing.T) {
	c, _ := testServer(t, map[string]http.HandlerFunc{
		"GET /api/v1/namespaces/team/pods": func(w http.ResponseWriter, _ *http.Request) {
			io.WriteString(w, `{"type":"ADDED","object":{"metadata":{"name":"a"}}}`+"\n"+`{"type":"ADDED","object":{"metadata":}`+"\n"+`{"type":"ADDED","object":{"metadata":{"name":"b"}}}`+"\n")
		},
	})
	ch, err := c.Watch(t.Context(), res("Pod"), "team", ListOptions{}, "1")
	if err != nil {
		t.Fatal(err)
	}
	var evs []WatchEvent
	for ev := range ch {
		evs = append(evs, ev)
	}
	if len(evs) != 2 || evs[0].Type != EventAdded || evs[1].Type != EventError || !errors.Is(evs[1].Err, ErrBadReply) {
		t.Fatalf("events %+v, want ADDED then an ERROR wrapping ErrBadReply", evs)
	}
}

// watchBenchPod is a pod of about the size the fan-out benchmark writes.
const watchBenchPod = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"fanout-1","namespace":"bench","uid":"5f0c2b7e-8a1d-4c1e-9a53-3f1f0f4f2a11","resourceVersion":"12345","creationTimestamp":"2026-11-27T03:00:00Z","labels":{"app":"bench","fanout":"1","tier":"backend"},"annotations":{"outpost.io/note":"a pod of about the size of a small real one"}},"spec":{"containers":[{"name":"app","image":"registry.example/app:1.2.3","command":["/bin/app","--listen=:8080"],"args":["--log-level=info","--cache=64Mi"],"env":[{"name":"MODE","value":"production"},{"name":"REGION","value":"edge-1"},{"name":"FEATURE_FLAGS","value":"a,b,c"}],"ports":[{"name":"http","containerPort":8080,"protocol":"TCP"}],"resources":{"requests":{"cpu":"100m","memory":"64Mi"},"limits":{"cpu":"500m","memory":"256Mi"}},"readinessProbe":{"httpGet":{"path":"/healthz","port":8080},"periodSeconds":5},"imagePullPolicy":"IfNotPresent"},{"name":"sidecar","image":"registry.example/sidecar:0.9","args":["--upstream=127.0.0.1:8080"],"resources":{"requests":{"cpu":"10m","memory":"16Mi"}}}],"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","tolerations":[{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}]},"status":{"phase":"Pending"}}`

// BenchmarkWatchRead is one watcher reading and decoding one event of
// the server's form: what every watcher pays per event it gets.
func BenchmarkWatchRead(b *testing.B) {
	line := []byte(`{"type":"MODIFIED","object":` + watchBenchPod + "}\n")
	const perStream = 1000
	stream := bytes.Repeat(line, perStream)
	c := &Client{}
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		ch := make(chan WatchEvent, perStream)
		c.readWatch(b.Context(), res("Pod"), io.NopCloser(bytes.NewReader(stream)), ch)
		n := 0
		for ev := range ch {
			if ev.Err != nil {
				b.Fatal(ev.Err)
			}
			n++
		}
		if n != perStream {
			b.Fatalf("%d events, want %d", n, perStream)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*perStream), "ns/event")
}

// BenchmarkCreateCodec is the client's own work for a create: encoding
// the object and decoding the server's reply (issue 16 item 1: the bench's
// clients share the 2 cores with the servers).
func BenchmarkCreateCodec(b *testing.B) {
	p := &api.Pod{
		ObjectMeta: api.ObjectMeta{Name: "web-1", Namespace: "bench",
			Labels:      map[string]string{"app": "bench", "tier": "web"},
			Annotations: map[string]string{"pad": strings.Repeat("x", 1024)}},
		Spec: api.PodSpec{Containers: []api.Container{{Name: "app", Image: "registry.local/app:1.0",
			Ports: []api.ContainerPort{{ContainerPort: 8080, Protocol: "TCP"}}}}},
	}
	b.ReportAllocs()
	for b.Loop() {
		r, body, err := encodeObject(p)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := DecodeObject(r, body); err != nil {
			b.Fatal(err)
		}
	}
}

// TestReadReply checks that a reply is read whole whether or not the
// server states its length, and that one ending short of the length it
// stated is an error rather than a body cut off.
func TestReadReply(t *testing.T) {
	body := strings.Repeat("x", 3000)
	tests := []struct {
		name    string
		length  int64
		wantErr bool
	}{
		{"stated", 3000, false},
		{"unstated", -1, false},
		{"stated short", 4000, true},
		{"beyond the bound", maxSizedReply + 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readReply(&http.Response{ContentLength: tt.length, Body: io.NopCloser(strings.NewReader(body))})
			if tt.wantErr {
				if err == nil {
					t.Fatalf("read %d bytes of a reply stating %d, want an error", len(got), tt.length)
				}
				return
			}
			if err != nil || string(got) != body {
				t.Fatalf("read %d bytes, %v; want the %d bytes sent", len(got), err, len(body))
			}
		})
	}
}

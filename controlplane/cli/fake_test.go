package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
)

// fakeAPI is an in-memory server of enough of the outpost API for the CLI:
// CRUD with resourceVersions and conflicts, label and field selectors of
// the form k=v, watches of current objects, raft peers and /version. Like
// the real server it defaults fields of created pods and adds admission
// tolerations, so that apply's idempotence is tested against a server
// that changes what it is given.
type fakeAPI struct {
	t   *testing.T
	srv *httptest.Server

	mu        sync.Mutex
	rv        int
	objs      map[string]map[string]any // "plural/ns/name"
	writes    int
	requests  []string // "METHOD path?query"
	warnings  []string // sent on every write
	conflicts int      // PUTs to refuse with a Conflict before accepting
	peers     []client.RaftPeer
	zones     *api.ZoneList // nil: GET .../zones is a 503
	watchHold chan struct{} // closed by the test to end a watch
	// beforeWatch, when set, runs as a watch starts, before the current
	// objects are sent: a test changes objects there to stand for a
	// change that happens while the CLI watches.
	beforeWatch func()
	// watchEvents, when set, are sent by the next watch after the
	// current objects (then cleared), e.g. a DELETED event.
	watchEvents []map[string]any
	// noFieldSelectors makes lists with a fieldSelector fail as a server
	// that cannot select by those fields would.
	noFieldSelectors bool
}

func newFakeAPI(t *testing.T) *fakeAPI {
	f := &fakeAPI{t: t, objs: map[string]map[string]any{}, watchHold: make(chan struct{})}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func key(r *api.Resource, ns, name string) string {
	if !r.Namespaced {
		ns = ""
	}
	return r.Plural + "/" + ns + "/" + name
}

// put stores an object directly, as if created earlier.
func (f *fakeAPI) put(r *api.Resource, obj string) {
	f.t.Helper()
	m, err := decodeJSONMap([]byte(obj))
	if err != nil {
		f.t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rv++
	md := m["metadata"].(map[string]any)
	md["resourceVersion"] = strconv.Itoa(f.rv)
	if _, ok := md["creationTimestamp"]; !ok {
		md["creationTimestamp"] = "2026-01-01T00:00:00Z"
	}
	ns, _ := md["namespace"].(string)
	f.objs[key(r, ns, md["name"].(string))] = m
}

// get returns a stored object (nil if absent).
func (f *fakeAPI) get(r *api.Resource, ns, name string) map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.objs[key(r, ns, name)]
}

func (f *fakeAPI) writeCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.writes
}

func (f *fakeAPI) sawRequest(prefix string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.requests {
		if strings.HasPrefix(r, prefix) {
			return true
		}
	}
	return false
}

func writeStatus(w http.ResponseWriter, se *api.StatusError) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(se.Code())
	json.NewEncoder(w).Encode(se.Status)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

// parsePath splits an API path into resource, namespace, name and
// subresource.
func parsePath(p string) (r *api.Resource, ns, name, sub string, ok bool) {
	var rest []string
	switch {
	case strings.HasPrefix(p, "/api/v1/"):
		rest = strings.Split(strings.TrimPrefix(p, "/api/v1/"), "/")
	case strings.HasPrefix(p, "/apis/"):
		parts := strings.Split(strings.TrimPrefix(p, "/apis/"), "/")
		if len(parts) < 3 {
			return nil, "", "", "", false
		}
		rest = parts[2:]
	default:
		return nil, "", "", "", false
	}
	if len(rest) >= 3 && rest[0] == "namespaces" {
		ns, rest = rest[1], rest[2:]
	}
	r = api.ResourceForPlural(rest[0])
	if r == nil {
		return nil, "", "", "", false
	}
	if len(rest) > 1 {
		name = rest[1]
	}
	if len(rest) > 2 {
		sub = rest[2]
	}
	return r, ns, name, sub, true
}

// field reads a dotted path ("spec.nodeName") of a decoded object.
func field(obj map[string]any, path string) string {
	var cur any = obj
	for p := range strings.SplitSeq(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return ""
		}
		cur = m[p]
	}
	s, _ := cur.(string)
	return s
}

// matches applies k=v selectors (comma-separated, ANDed).
func matches(obj map[string]any, labelSel, fieldSel string) bool {
	if labelSel != "" {
		md, _ := obj["metadata"].(map[string]any)
		labels, _ := md["labels"].(map[string]any)
		for req := range strings.SplitSeq(labelSel, ",") {
			k, v, _ := strings.Cut(req, "=")
			if labels[k] != v {
				return false
			}
		}
	}
	if fieldSel != "" {
		for req := range strings.SplitSeq(fieldSel, ",") {
			k, v, _ := strings.Cut(req, "=")
			if field(obj, k) != v {
				return false
			}
		}
	}
	return true
}

func (f *fakeAPI) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	f.mu.Lock()
	f.requests = append(f.requests, req.Method+" "+req.URL.Path+"?"+req.URL.RawQuery)
	f.mu.Unlock()
	switch {
	case req.URL.Path == "/version":
		writeJSON(w, 200, map[string]string{"version": "v-test"})
		return
	case req.URL.Path == "/apis/outpost.io/v1/raft/peers":
		f.mu.Lock()
		peers := f.peers
		f.mu.Unlock()
		writeJSON(w, 200, map[string]any{"kind": "RaftPeerList", "items": peers})
		return
	case req.URL.Path == "/apis/outpost.io/v1/zones":
		f.mu.Lock()
		zones := f.zones
		f.mu.Unlock()
		if zones == nil {
			writeStatus(w, &api.StatusError{Status: api.Status{Code: 503, Reason: api.ReasonServiceUnavailable, Message: "the zones are not counted yet"}})
			return
		}
		writeJSON(w, 200, zones)
		return
	case strings.HasPrefix(req.URL.Path, "/apis/outpost.io/v1/raft/peers/"):
		id := strings.Split(strings.TrimPrefix(req.URL.Path, "/apis/outpost.io/v1/raft/peers/"), "/")[0]
		if id == "s3" {
			writeStatus(w, api.NewBadRequest("refusing to promote s3: it has not caught up with the leader (index 10 of 99)"))
			return
		}
		writeJSON(w, 200, map[string]any{})
		return
	}
	r, ns, name, sub, ok := parsePath(req.URL.Path)
	if !ok {
		writeStatus(w, &api.StatusError{Status: api.Status{Code: 404, Reason: api.ReasonNotFound, Message: "the server could not find the requested resource"}})
		return
	}
	if len(f.warnings) > 0 && req.Method != http.MethodGet {
		for _, ws := range f.warnings {
			w.Header().Add("Warning", `299 - "`+ws+`"`)
		}
	}
	q := req.URL.Query()
	switch req.Method {
	case http.MethodGet:
		if name != "" {
			obj := f.get(r, ns, name)
			if obj == nil {
				writeStatus(w, api.NewNotFound(r, name))
				return
			}
			writeJSON(w, 200, obj)
			return
		}
		if q.Get("watch") == "true" && f.beforeWatch != nil {
			f.beforeWatch()
		}
		if f.noFieldSelectors && q.Get("fieldSelector") != "" {
			writeStatus(w, api.NewBadRequest("field label not supported: "+q.Get("fieldSelector")))
			return
		}
		f.mu.Lock()
		var keys []string
		for k, obj := range f.objs {
			if !strings.HasPrefix(k, r.Plural+"/") {
				continue
			}
			md := obj["metadata"].(map[string]any)
			if ns != "" && md["namespace"] != ns {
				continue
			}
			if matches(obj, q.Get("labelSelector"), q.Get("fieldSelector")) {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		items := make([]map[string]any, 0, len(keys))
		for _, k := range keys {
			items = append(items, f.objs[k])
		}
		rv := strconv.Itoa(f.rv)
		var extra []map[string]any
		if q.Get("watch") == "true" {
			extra, f.watchEvents = f.watchEvents, nil
		}
		f.mu.Unlock()
		if q.Get("watch") == "true" {
			fl := w.(http.Flusher)
			w.WriteHeader(200)
			for _, it := range items {
				json.NewEncoder(w).Encode(map[string]any{"type": "MODIFIED", "object": it})
			}
			for _, ev := range extra {
				json.NewEncoder(w).Encode(ev)
			}
			fl.Flush()
			select {
			case <-f.watchHold:
			case <-req.Context().Done():
			}
			return
		}
		writeJSON(w, 200, map[string]any{
			"kind": r.Kind + "List", "apiVersion": r.APIVersion(),
			"metadata": map[string]any{"resourceVersion": rv}, "items": items,
		})
	case http.MethodPost:
		obj, err := decodeJSONMap(body)
		if err != nil {
			writeStatus(w, api.NewBadRequest(err.Error()))
			return
		}
		md, _ := obj["metadata"].(map[string]any)
		if md == nil {
			md = map[string]any{}
			obj["metadata"] = md
		}
		n, _ := md["name"].(string)
		if n == "" {
			n = fmt.Sprint(md["generateName"], "abcde")
			md["name"] = n
		}
		if r.Namespaced {
			md["namespace"] = ns
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if _, exists := f.objs[key(r, ns, n)]; exists {
			writeStatus(w, api.NewAlreadyExists(r, n))
			return
		}
		f.rv++
		f.writes++
		md["resourceVersion"] = strconv.Itoa(f.rv)
		md["uid"] = "uid-" + n
		md["creationTimestamp"] = "2026-01-01T00:00:00Z"
		defaultObject(r, obj, true)
		f.objs[key(r, ns, n)] = obj
		writeJSON(w, 201, obj)
	case http.MethodPut:
		obj, err := decodeJSONMap(body)
		if err != nil {
			writeStatus(w, api.NewBadRequest(err.Error()))
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		k := key(r, ns, name)
		cur, exists := f.objs[k]
		if !exists {
			writeStatus(w, api.NewNotFound(r, name))
			return
		}
		md, _ := obj["metadata"].(map[string]any)
		curMD := cur["metadata"].(map[string]any)
		if f.conflicts > 0 {
			f.conflicts--
			f.rv++
			curMD["resourceVersion"] = strconv.Itoa(f.rv) // someone else wrote
			writeStatus(w, api.NewConflict(r, name, "the object has been modified; please apply your changes to the latest version and try again"))
			return
		}
		if md["resourceVersion"] != curMD["resourceVersion"] {
			writeStatus(w, api.NewConflict(r, name, "the object has been modified; please apply your changes to the latest version and try again"))
			return
		}
		if sub != "status" {
			if st, ok := cur["status"]; ok {
				obj["status"] = st
			} else {
				delete(obj, "status")
			}
		}
		f.rv++
		f.writes++
		md["resourceVersion"] = strconv.Itoa(f.rv)
		md["uid"] = curMD["uid"]
		md["creationTimestamp"] = curMD["creationTimestamp"]
		defaultObject(r, obj, false)
		f.objs[k] = obj
		writeJSON(w, 200, obj)
	case http.MethodDelete:
		f.mu.Lock()
		defer f.mu.Unlock()
		k := key(r, ns, name)
		cur, exists := f.objs[k]
		if !exists {
			writeStatus(w, api.NewNotFound(r, name))
			return
		}
		delete(f.objs, k)
		if r.Kind == "Namespace" {
			// What the namespace controller ends up doing: the objects
			// in the namespace go with it.
			for k := range f.objs {
				if strings.Split(k, "/")[1] == name {
					delete(f.objs, k)
				}
			}
		}
		f.writes++
		writeJSON(w, 200, cur)
	}
}

// defaultObject imitates the server's decoding, and its defaulting and
// admission on pods: a
// restart policy, image pull policies, a status, and (on create only) the
// default not-ready toleration.
func defaultObject(r *api.Resource, obj map[string]any, create bool) {
	// The Kubernetes-only fields are accepted with a warning and not
	// stored, as by the real server.
	api.DropUnstored(r, obj)
	if r.Kind != "Pod" {
		return
	}
	spec, _ := obj["spec"].(map[string]any)
	if spec == nil {
		return
	}
	if _, ok := spec["restartPolicy"]; !ok {
		spec["restartPolicy"] = "Always"
	}
	cs, _ := spec["containers"].([]any)
	for _, c := range cs {
		if cm, ok := c.(map[string]any); ok {
			if _, ok := cm["imagePullPolicy"]; !ok {
				cm["imagePullPolicy"] = "IfNotPresent"
			}
		}
	}
	if create {
		tol, _ := spec["tolerations"].([]any)
		spec["tolerations"] = append(tol, map[string]any{
			"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": json.Number("300"),
		})
		obj["status"] = map[string]any{"phase": "Pending"}
	}
}

// testNow is the fixed clock of CLI tests.
var testNow = time.Date(2026, 1, 1, 2, 0, 0, 0, time.UTC)

// result is what one CLI run printed.
type result struct {
	stdout, stderr string
	code           int
}

// run executes the CLI against f with args, isolated from the user's
// configuration and environment.
func (f *fakeAPI) run(args ...string) result {
	f.t.Helper()
	return runCLI(f.t, context.Background(), "", append([]string{"--server", f.srv.URL, "--insecure"}, args...)...)
}

func runCLI(t *testing.T, ctx context.Context, stdin string, args ...string) result {
	t.Helper()
	// No configuration anywhere: neither $OUTPOST_CONFIG nor a file at
	// the default place.
	t.Setenv(client.EnvConfig, "")
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv(client.EnvServer, "")
	t.Setenv(client.EnvToken, "")
	root := newRootCommand(&options{now: func() time.Time { return testNow }})
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(args)
	code := Execute(ctx, root)
	return result{out.String(), errb.String(), code}
}

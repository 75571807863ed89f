package cli

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// topAPI serves metrics.k8s.io as the API server does (the JSON of
// metrics-server) and hands everything else to a fakeAPI.
type topAPI struct {
	f     *fakeAPI
	srv   *httptest.Server
	noAPI bool // answer the metrics paths as a server without them

	mu       sync.Mutex
	requests []string
}

const (
	nodeMetricsEdge1 = `{"kind":"NodeMetrics","apiVersion":"metrics.k8s.io/v1beta1","metadata":{"name":"edge-1","creationTimestamp":"2026-01-01T00:10:00Z"},` +
		`"timestamp":"2026-01-01T00:09:55Z","window":"10s","usage":{"cpu":"500000000n","memory":"1048576Ki"}}`
	nodeMetricsEdge3 = `{"kind":"NodeMetrics","apiVersion":"metrics.k8s.io/v1beta1","metadata":{"name":"edge-3"},` +
		`"timestamp":"2026-01-01T00:09:55Z","window":"10s","usage":{"cpu":"1500000000n","memory":"524288Ki"}}`
	podMetricsWeb = `{"kind":"PodMetrics","apiVersion":"metrics.k8s.io/v1beta1","metadata":{"name":"web","namespace":"default","labels":{"app":"web"}},` +
		`"timestamp":"2026-01-01T00:09:55Z","window":"10s","containers":[` +
		`{"name":"app","usage":{"cpu":"250000000n","memory":"102400Ki"}},{"name":"sidecar","usage":{"cpu":"1000000n","memory":"10240Ki"}}]}`
	podMetricsAPI = `{"kind":"PodMetrics","apiVersion":"metrics.k8s.io/v1beta1","metadata":{"name":"api","namespace":"team-b"},` +
		`"timestamp":"2026-01-01T00:09:55Z","window":"10s","containers":[{"name":"srv","usage":{"cpu":"2000000000n","memory":"1048576Ki"}}]}`
)

func newTopAPI(t *testing.T) *topAPI {
	s := &topAPI{f: newFakeAPI(t)}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	for _, n := range []string{"edge-1", "edge-2", "edge-3"} {
		s.f.put(nodeR, `{"kind":"Node","apiVersion":"v1","metadata":{"name":"`+n+`","labels":{"zone":"a"}},`+
			`"status":{"allocatable":{"cpu":"2","memory":"4Gi"},"conditions":[{"type":"Ready","status":"True"}],"daemonEndpoints":{"kubeletEndpoint":{"Port":10250}}}}`)
	}
	s.f.put(podR, `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"fresh","namespace":"default","creationTimestamp":"2026-01-01T01:50:00Z"},"spec":{"nodeName":"edge-2","containers":[{"name":"c","image":"x"}]}}`)
	return s
}

func (s *topAPI) run(args ...string) result {
	s.f.t.Helper()
	return runCLI(s.f.t, s.f.t.Context(), "", append([]string{"--server", s.srv.URL, "--insecure"}, args...)...)
}

func (s *topAPI) serve(w http.ResponseWriter, r *http.Request) {
	p, ok := strings.CutPrefix(r.URL.Path, "/apis/metrics.k8s.io/v1beta1")
	if !ok {
		s.f.serve(w, r)
		return
	}
	s.mu.Lock()
	s.requests = append(s.requests, p+"?"+r.URL.RawQuery)
	s.mu.Unlock()
	if s.noAPI {
		writeStatus(w, &api.StatusError{Status: api.Status{Status: "Failure", Code: 404, Reason: api.ReasonNotFound, Message: "the server could not find the requested resource"}})
		return
	}
	list := func(kind string, items ...string) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"` + kind + `","apiVersion":"metrics.k8s.io/v1beta1","metadata":{},"items":[` + strings.Join(items, ",") + `]}`))
	}
	one := func(body string) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}
	sel := r.URL.Query().Get("labelSelector")
	switch p {
	case "/nodes":
		list("NodeMetricsList", nodeMetricsEdge1, nodeMetricsEdge3)
	case "/nodes/edge-1":
		one(nodeMetricsEdge1)
	case "/pods":
		list("PodMetricsList", podMetricsAPI, podMetricsWeb)
	case "/namespaces/default/pods":
		if sel == "app=other" {
			list("PodMetricsList")
			return
		}
		list("PodMetricsList", podMetricsWeb)
	case "/namespaces/default/pods/web":
		one(podMetricsWeb)
	default:
		if strings.HasPrefix(p, "/namespaces/") && strings.Count(p, "/") == 3 && strings.HasSuffix(p, "/pods") {
			list("PodMetricsList") // no pod has metrics
			return
		}
		se := api.NewNotFound(&api.Resource{Plural: "podmetrics", Group: api.MetricsGroup}, "x")
		writeStatus(w, se)
	}
}

func TestTopNodes(t *testing.T) {
	s := newTopAPI(t)
	// Use as kubectl prints it: millicores and Mi, and shares of
	// allocatable; a node without metrics is <unknown>, last.
	expect(t, "top nodes", s.run("top", "nodes"), 0,
		"NAME     CPU(cores)   CPU%        MEMORY(bytes)   MEMORY%\n"+
			"edge-1   500m         25%         1024Mi          25%\n"+
			"edge-3   1500m        75%         512Mi           12%\n"+
			"edge-2   <unknown>    <unknown>   <unknown>       <unknown>\n", "")
	expect(t, "top nodes --sort-by memory --no-headers", s.run("top", "node", "--sort-by", "memory", "--no-headers"), 0,
		"edge-1   500m        25%         1024Mi      25%\n"+
			"edge-3   1500m       75%         512Mi       12%\n"+
			"edge-2   <unknown>   <unknown>   <unknown>   <unknown>\n", "")
	expect(t, "top nodes --sort-by cpu", s.run("top", "nodes", "--sort-by=cpu", "--no-headers"), 0,
		"edge-3   1500m       75%         512Mi       12%\n"+
			"edge-1   500m        25%         1024Mi      25%\n"+
			"edge-2   <unknown>   <unknown>   <unknown>   <unknown>\n", "")
	expect(t, "top nodes edge-1", s.run("top", "nodes", "edge-1"), 0,
		"NAME     CPU(cores)   CPU%   MEMORY(bytes)   MEMORY%\n"+
			"edge-1   500m         25%    1024Mi          25%\n", "")
	// One node as the list shows it, <unknown>, saying why.
	expect(t, "top nodes edge-2", s.run("top", "nodes", "edge-2"), 0,
		"NAME     CPU(cores)   CPU%        MEMORY(bytes)   MEMORY%\n"+
			"edge-2   <unknown>    <unknown>   <unknown>       <unknown>\n", "no metrics for node edge-2: its agent did not answer\n")
	expect(t, "top nodes nope", s.run("top", "nodes", "nope"), 1, "", "Error from server (NotFound): nodes \"nope\" not found\n")
	expect(t, "bad sort", s.run("top", "nodes", "--sort-by", "name"), 1, "",
		"error: --sort-by must be cpu or memory, not \"name\"\nSee 'outpost top nodes --help' for usage.\n")
	s.noAPI = true
	expect(t, "no metrics API", s.run("top", "nodes"), 1, "", "error: metrics API not available\n")
}

func TestTopPods(t *testing.T) {
	s := newTopAPI(t)
	// A pod is the sum of its containers: 250m+1m, 100Mi+10Mi.
	expect(t, "top pods", s.run("top", "pods"), 0,
		"NAME   CPU(cores)   MEMORY(bytes)\n"+
			"web    251m         110Mi\n", "")
	expect(t, "top pods -A", s.run("top", "pods", "-A"), 0,
		"NAMESPACE   NAME   CPU(cores)   MEMORY(bytes)\n"+
			"default     web    251m         110Mi\n"+
			"team-b      api    2000m        1024Mi\n", "")
	expect(t, "top pods -A --sort-by cpu", s.run("top", "pods", "-A", "--sort-by", "cpu", "--no-headers"), 0,
		"team-b    api   2000m   1024Mi\n"+
			"default   web   251m    110Mi\n", "")
	expect(t, "top pod web --containers", s.run("top", "pod", "web", "--containers"), 0,
		"POD   NAME      CPU(cores)   MEMORY(bytes)\n"+
			"web   app       250m         100Mi\n"+
			"web   sidecar   1m           10Mi\n", "")
	expect(t, "top pods -l app=other", s.run("top", "pods", "-l", "app=other"), 0, "", "No resources found in default namespace.\n")
	s.mu.Lock()
	last := s.requests[len(s.requests)-1]
	s.mu.Unlock()
	if last != "/namespaces/default/pods?labelSelector=app%3Dother" {
		t.Errorf("selector sent as %q", last)
	}
	// A pod on a node whose agent gives nothing: why, with its age; one
	// that does not exist is the pod's 404.
	expect(t, "top pod fresh", s.run("top", "pod", "fresh"), 1, "",
		"error: metrics not available for pod default/fresh, age: 10m: the agent of its node edge-2 did not answer, or has no readings of its containers\n")
	expect(t, "top pod nope", s.run("top", "pod", "nope"), 1, "", "Error from server (NotFound): pods \"nope\" not found\n")
	expect(t, "name with -A", s.run("top", "pod", "web", "-A"), 1, "",
		"error: a pod name cannot be given with --all-namespaces\nSee 'outpost top pods --help' for usage.\n")
}

// Pods and nodes without metrics say why, true to what waiting would
// bring: a simulated node has no agent endpoint (it never will), a pod
// just started will have figures soon (kubectl's "yet"); pods with no
// metrics at all are an error, as kubectl's, not "No resources found"
// (issue 15, review item 4).
func TestTopWithoutMetrics(t *testing.T) {
	s := newTopAPI(t)
	s.f.put(nodeR, `{"kind":"Node","apiVersion":"v1","metadata":{"name":"sim-0001"},"spec":{"providerID":"sim://sim-0001"},`+
		`"status":{"allocatable":{"cpu":"4","memory":"8Gi"},"conditions":[{"type":"Ready","status":"True"}],"nodeInfo":{"containerRuntimeVersion":"outpost-sim://v0.1.0"}}}`)
	s.f.put(nodeR, `{"kind":"Node","apiVersion":"v1","metadata":{"name":"gone"},"status":{"conditions":[{"type":"Ready","status":"Unknown"}],"daemonEndpoints":{"kubeletEndpoint":{"Port":10250}}}}`)
	pod := func(ns, name, node, created, started string) {
		st := ""
		if started != "" {
			st = `,"status":{"phase":"Running","containerStatuses":[{"name":"c","state":{"running":{"startedAt":"` + started + `"}}}]}`
		}
		s.f.put(podR, `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"`+name+`","namespace":"`+ns+`","creationTimestamp":"`+created+`"},`+
			`"spec":{"nodeName":"`+node+`","containers":[{"name":"c","image":"x"}]}`+st+`}`)
	}
	for _, n := range []string{"a", "b", "c"} {
		pod("sims", "once-"+n, "sim-0001", "2026-01-01T01:57:47Z", "")
	}
	pod("sims", "lost", "gone", "2026-01-01T01:00:00Z", "")
	pod("sims", "new", "edge-1", "2026-01-01T01:00:00Z", "2026-01-01T01:59:50Z")
	pod("soon", "new", "edge-1", "2026-01-01T01:59:55Z", "2026-01-01T01:59:58Z")

	expect(t, "top pod once-a", s.run("top", "pod", "once-a", "-n", "sims"), 1, "",
		"error: metrics not available for pod sims/once-a, age: 2m13s: its node sim-0001 has no agent endpoint (simulated by outpost sim agents)\n")
	expect(t, "top pod lost", s.run("top", "pod", "lost", "-n", "sims"), 1, "",
		"error: metrics not available for pod sims/lost, age: 60m: its node gone is not Ready\n")
	// Started 10 s ago (created an hour ago): waiting helps.
	expect(t, "top pod new", s.run("top", "pod", "new", "-n", "sims"), 1, "",
		"error: metrics not available yet for pod sims/new, age: 60m\n")
	expect(t, "top pods -n sims", s.run("top", "pods", "-n", "sims"), 1, "",
		"error: metrics not available for the 5 pods in namespace sims: "+
			"1 started less than 30s ago: the first figures come after the agent's second reading; "+
			"3 on simulated nodes (outpost sim agents), which have no agent endpoint (sim-0001); "+
			"1 on nodes that are not Ready (gone)\n")
	expect(t, "top pods -n soon", s.run("top", "pods", "-n", "soon"), 1, "",
		"error: metrics not available yet for the pod in namespace soon: 1 started less than 30s ago: the first figures come after the agent's second reading\n")
	expect(t, "top pods -n empty", s.run("top", "pods", "-n", "empty"), 0, "", "No resources found in empty namespace.\n")
	// A simulated node: <unknown> alone as in the list, and why.
	expect(t, "top node sim-0001", s.run("top", "node", "sim-0001", "--no-headers"), 0,
		"sim-0001   <unknown>   <unknown>   <unknown>   <unknown>\n",
		"no metrics for node sim-0001: it has no agent endpoint (simulated by outpost sim agents)\n")
}

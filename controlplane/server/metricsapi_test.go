package server

import (
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/agent/endpoint"
	"github.com/outpost-edge/outpost/agent/endpoint/endpointtest"
	"github.com/outpost-edge/outpost/agent/endpoint/wire"
	"github.com/outpost-edge/outpost/controlplane/api"
)

// metricsEnv is a server with node edge-1, whose agent serves the
// summary the test sets, edge-2 (Ready, its agent unreachable) and edge-3
// (not Ready).
type metricsEnv struct {
	*streamEnv
	mu    sync.Mutex
	sum   wire.Summary
	calls atomic.Int32
}

func startMetricsEnv(t *testing.T) *metricsEnv {
	t.Helper()
	s := startServer(t, testConfig(t))
	c := admin(t, s)
	e := &metricsEnv{streamEnv: &streamEnv{t: t, s: s, c: c, rt: endpointtest.New()}}
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "# TYPE outpost_agent_pods gauge\noutpost_agent_pods 2\n")
	})
	agent := func(name string) string {
		return serveTestAgent(t, s.CA(), endpoint.Config{Runtime: e.rt, Metrics: metrics, Summary: func() wire.Summary {
			e.calls.Add(1)
			e.mu.Lock()
			defer e.mu.Unlock()
			return e.sum
		}}, func() (tls.Certificate, error) { return s.CA().IssueNodeCert(name, []string{"127.0.0.1"}, time.Hour) })
	}
	e.agent = agent("edge-1")
	e.readyNode("edge-1", e.agent, true)
	e.readyNode("edge-2", closedAddr(t), true)
	// edge-3's agent answers, but a node that is not Ready is not asked.
	e.readyNode("edge-3", agent("edge-3"), false)
	return e
}

// readyNode registers node name with its agent at addr, Ready or not.
func (e *metricsEnv) readyNode(name, addr string, ready bool) {
	e.t.Helper()
	e.node(name, addr)
	r := e.c.must(http.StatusOK, "GET", "/api/v1/nodes/"+name, nil)
	var n map[string]any
	if err := json.Unmarshal(r.body, &n); err != nil {
		e.t.Fatal(err)
	}
	status := "False"
	if ready {
		status = "True"
	}
	n["metadata"].(map[string]any)["labels"] = map[string]any{"zone": "a", "name": name}
	e.c.must(http.StatusOK, "PUT", "/api/v1/nodes/"+name, n)
	r = e.c.must(http.StatusOK, "GET", "/api/v1/nodes/"+name, nil)
	_ = json.Unmarshal(r.body, &n)
	n["status"].(map[string]any)["conditions"] = []any{map[string]any{"type": "Ready", "status": status}}
	n["status"].(map[string]any)["allocatable"] = map[string]any{"cpu": "2", "memory": "4Gi"}
	e.c.must(http.StatusOK, "PUT", "/api/v1/nodes/"+name+"/status", n)
}

// uid creates pod ns/name on edge-1 with labels and returns its UID.
func (e *metricsEnv) uid(ns, name string, labels map[string]string, containers ...string) string {
	e.t.Helper()
	var cs []any
	for _, c := range containers {
		cs = append(cs, map[string]any{"name": c, "image": "example.local/app:1"})
	}
	r := e.c.must(http.StatusCreated, "POST", "/api/v1/namespaces/"+ns+"/pods", map[string]any{
		"metadata": map[string]any{"name": name, "labels": labels}, "spec": map[string]any{"containers": cs, "nodeName": "edge-1"},
	})
	var p api.Pod
	if err := json.Unmarshal(r.body, &p); err != nil {
		e.t.Fatal(err)
	}
	return string(p.UID)
}

// closedAddr is a loopback address where nothing listens.
func closedAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func nanos(n uint64) *uint64 { return &n }

func cpuAt(at time.Time, nc *uint64) *wire.CPUStats {
	return &wire.CPUStats{Time: at, WindowNanos: int64(10 * time.Second), UsageNanoCores: nc, UsageCoreNanoSeconds: 1e12}
}

func TestMetricsAPI(t *testing.T) {
	e := startMetricsEnv(t)
	c := e.c
	c.must(http.StatusCreated, "POST", "/api/v1/namespaces", map[string]any{"metadata": map[string]any{"name": "team-b"}})
	web := e.uid("default", "web", map[string]string{"app": "web"}, "app", "sidecar")
	api1 := e.uid("team-b", "api", map[string]string{"app": "api"}, "srv")
	fresh := e.uid("team-b", "fresh", nil, "srv")
	at := time.Date(2026, 3, 1, 12, 0, 10, 0, time.UTC)
	mem := func(b uint64) *wire.MemoryStats { return &wire.MemoryStats{Time: at, WorkingSetBytes: b} }
	e.sum = wire.Summary{Kind: wire.KindSummary,
		Node: wire.NodeStats{NodeName: "edge-1", CPU: cpuAt(at, nanos(500_000_000)), Memory: mem(1 << 30)},
		Pods: []wire.PodStats{
			{PodRef: wire.PodReference{Name: "web", Namespace: "default", UID: web}, Containers: []wire.ContainerStats{
				{Name: "app", CPU: cpuAt(at, nanos(250_000_000)), Memory: mem(100 << 20)},
				{Name: "sidecar", CPU: cpuAt(at, nanos(1_000_000)), Memory: mem(10 << 20)},
			}},
			{PodRef: wire.PodReference{Name: "api", Namespace: "team-b", UID: api1}, Containers: []wire.ContainerStats{
				{Name: "srv", CPU: cpuAt(at, nanos(50_000_000)), Memory: mem(1000)},
			}},
			// One reading only: no rate, so no metrics yet.
			{PodRef: wire.PodReference{Name: "fresh", Namespace: "team-b", UID: fresh}, Containers: []wire.ContainerStats{
				{Name: "srv", CPU: cpuAt(at, nil), Memory: mem(1 << 20)},
			}},
			// A pod this server does not know (deleted meanwhile).
			{PodRef: wire.PodReference{Name: "gone", Namespace: "default", UID: "no-such-uid"}, Containers: []wire.ContainerStats{
				{Name: "x", CPU: cpuAt(at, nanos(1)), Memory: mem(1)},
			}},
		}}
	const base = "/apis/metrics.k8s.io/v1beta1"

	// Discovery names the group and its two kinds, as kubectl looks
	// for them.
	if r := c.must(http.StatusOK, "GET", "/apis", nil); !strings.Contains(string(r.body), `"name":"metrics.k8s.io","versions":[{"groupVersion":"metrics.k8s.io/v1beta1","version":"v1beta1"}]`) {
		t.Errorf("/apis lacks metrics.k8s.io: %s", r.body)
	}
	c.must(http.StatusOK, "GET", "/apis/metrics.k8s.io", nil)
	var rl apiResourceList
	if err := json.Unmarshal(c.must(http.StatusOK, "GET", base, nil).body, &rl); err != nil || rl.GroupVersion != "metrics.k8s.io/v1beta1" ||
		len(rl.Resources) != 2 || rl.Resources[0].Kind != "NodeMetrics" || rl.Resources[1].Kind != "PodMetrics" || !rl.Resources[1].Namespaced {
		t.Errorf("resource list %+v (%v)", rl, err)
	}

	// Nodes: only edge-1 (edge-2's agent does not answer, edge-3 is not
	// Ready), in metrics-server's exact shape.
	r := c.must(http.StatusOK, "GET", base+"/nodes", nil)
	var raw map[string]any
	if err := json.Unmarshal(r.body, &raw); err != nil {
		t.Fatal(err)
	}
	items := raw["items"].([]any)
	if raw["kind"] != "NodeMetricsList" || raw["apiVersion"] != "metrics.k8s.io/v1beta1" || len(items) != 1 {
		t.Fatalf("node metrics list: %s", r.body)
	}
	n := items[0].(map[string]any)
	md := n["metadata"].(map[string]any)
	if n["kind"] != "NodeMetrics" || md["name"] != "edge-1" || md["labels"].(map[string]any)["zone"] != "a" || md["creationTimestamp"] == nil ||
		n["timestamp"] != "2026-03-01T12:00:10Z" || n["window"] != "10s" ||
		n["usage"].(map[string]any)["cpu"] != "500000000n" || n["usage"].(map[string]any)["memory"] != "1048576Ki" {
		t.Errorf("edge-1's metrics: %s", r.body)
	}
	var nm api.NodeMetrics
	if err := json.Unmarshal(c.must(http.StatusOK, "GET", base+"/nodes/edge-1", nil).body, &nm); err != nil || nm.Name != "edge-1" || nm.Usage[api.ResourceCPU].MilliValue() != 500 {
		t.Errorf("GET nodes/edge-1: %+v, %v", nm, err)
	}
	wantError(t, c.do("GET", base+"/nodes/edge-2", nil), http.StatusNotFound, `nodemetrics.metrics.k8s.io "edge-2" not found`)
	wantError(t, c.do("GET", base+"/nodes/nope", nil), http.StatusNotFound, `nodes "nope" not found`)
	if r := c.must(http.StatusOK, "GET", base+"/nodes?labelSelector=zone%3Db", nil); !strings.Contains(string(r.body), `"items":[]`) {
		t.Errorf("nodes of zone b: %s", r.body)
	}

	// Pods: those with a rate for every container, by namespace, name
	// and label.
	podNames := func(body []byte) []string {
		var l api.PodMetricsList
		if err := json.Unmarshal(body, &l); err != nil || l.Kind != "PodMetricsList" {
			t.Fatalf("pod metrics list %s: %v", body, err)
		}
		var out []string
		for _, p := range l.Items {
			out = append(out, p.Namespace+"/"+p.Name)
		}
		return out
	}
	if got := podNames(c.must(http.StatusOK, "GET", base+"/pods", nil).body); !slices.Equal(got, []string{"default/web", "team-b/api"}) {
		t.Errorf("pods of all namespaces: %v, want default/web team-b/api", got)
	}
	if got := podNames(c.must(http.StatusOK, "GET", base+"/namespaces/default/pods?labelSelector=app%3Dweb", nil).body); !slices.Equal(got, []string{"default/web"}) {
		t.Errorf("pods app=web: %v", got)
	}
	if got := podNames(c.must(http.StatusOK, "GET", base+"/namespaces/default/pods?labelSelector=app%3Dother", nil).body); len(got) != 0 {
		t.Errorf("pods app=other: %v", got)
	}
	var pm api.PodMetrics
	if err := json.Unmarshal(c.must(http.StatusOK, "GET", base+"/namespaces/default/pods/web", nil).body, &pm); err != nil ||
		pm.Kind != "PodMetrics" || pm.Labels["app"] != "web" || len(pm.Containers) != 2 || pm.Containers[0].Name != "app" ||
		pm.Containers[0].Usage[api.ResourceCPU].String() != "250000000n" || pm.Containers[1].Usage[api.ResourceMemory].String() != "10240Ki" || pm.Window.Duration != 10*time.Second {
		t.Errorf("GET pods/web: %+v, %v", pm, err)
	}
	wantError(t, c.do("GET", base+"/namespaces/team-b/pods/fresh", nil), http.StatusNotFound, `podmetrics.metrics.k8s.io "team-b/fresh" not found`)
	wantError(t, c.do("POST", base+"/nodes", nil), http.StatusMethodNotAllowed, "POST is not supported on nodes.metrics.k8s.io; the metrics API is read-only")

	// A summary with a reading that has no rate yet is asked for again
	// each time (the next reading comes soon); a settled one is reused
	// for a few seconds.
	before := e.calls.Load()
	c.must(http.StatusOK, "GET", base+"/nodes", nil)
	c.must(http.StatusOK, "GET", base+"/nodes", nil)
	if got := e.calls.Load() - before; got != 2 {
		t.Errorf("agent asked %d times for an unsettled summary in two requests, want 2", got)
	}
	e.mu.Lock()
	e.sum.Pods = slices.DeleteFunc(e.sum.Pods, func(p wire.PodStats) bool { return p.PodRef.Name == "fresh" })
	e.mu.Unlock()
	before = e.calls.Load()
	for range 3 {
		c.must(http.StatusOK, "GET", base+"/nodes", nil)
	}
	if got := e.calls.Load() - before; got != 1 {
		t.Errorf("agent asked %d times for a settled summary in three requests, want 1", got)
	}

	// A developer of team-b sees its namespace's pods only, and the
	// nodes (which it may read), but not the agents' own metrics.
	dev := c.as(addToken(t, c, api.TokenSpec{Role: api.RoleDeveloper, Namespaces: []string{"team-b"}}))
	if got := podNames(dev.must(http.StatusOK, "GET", base+"/namespaces/team-b/pods", nil).body); !slices.Equal(got, []string{"team-b/api"}) {
		t.Errorf("developer's pods: %v", got)
	}
	for _, p := range []string{base + "/namespaces/default/pods", base + "/namespaces/default/pods/web", base + "/pods", "/api/v1/nodes/edge-1/proxy/metrics"} {
		if r := dev.do("GET", p, nil); r.code != http.StatusForbidden {
			t.Errorf("developer GET %s: %d %s, want 403", p, r.code, r.body)
		}
	}
	dev.must(http.StatusOK, "GET", base+"/nodes", nil)

	// The agent's own /metrics, through the API, for admins.
	if r := c.must(http.StatusOK, "GET", "/api/v1/nodes/edge-1/proxy/metrics", nil); string(r.body) != "# TYPE outpost_agent_pods gauge\noutpost_agent_pods 2\n" {
		t.Errorf("agent metrics through the API: %q", r.body)
	}
}

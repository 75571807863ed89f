package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/outpost-edge/outpost/agent/endpoint/wire"
	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/auth"
	"github.com/outpost-edge/outpost/controlplane/store"
)

// The resource metrics API, metrics.k8s.io/v1beta1 (issue 15 item 4), as
// metrics-server serves it, but without its own store: a request reads
// the nodes and pods from this server's store, asks the agents of the
// nodes concerned for their latest usage (GET /stats/summary on the agent
// endpoint that logs and exec use) and answers NodeMetrics or PodMetrics.
// Usage never passes through raft: the agents keep the last two readings,
// and this server keeps each node's summary for summaryTTL so that a
// console polling every few seconds does not ask every agent each time
// (once every reading in it has a rate).
//
//	GET /apis/metrics.k8s.io/v1beta1/nodes[/NAME]
//	GET /apis/metrics.k8s.io/v1beta1/pods                      (all namespaces)
//	GET /apis/metrics.k8s.io/v1beta1/namespaces/NS/pods[/NAME]
//	    ?labelSelector=&fieldSelector= (the fields of nodes and pods)
//
// Authorization is that of the objects: node metrics need the nodes' get
// or list, pod metrics the pods' in their namespace (a developer sees
// its namespaces' only, and no list across all namespaces). A node that
// is not Ready, or whose agent does not answer, has no metrics (kubectl
// prints <unknown>); a pod has metrics once each of its running
// containers has two readings.
//
//	GET /api/v1/nodes/NAME/proxy/metrics
//
// is the agent's own /metrics, for cluster admins (the path Prometheus'
// Kubernetes discovery scrapes kubelets through).

const (
	// summaryTTL is how long a node's summary is reused. The agents
	// read every 10 s, so a fresher copy would rarely differ.
	summaryTTL = 5 * time.Second
	// summaryTimeout bounds asking one agent.
	summaryTimeout = 5 * time.Second
	// summaryFanout bounds the agents asked at once.
	summaryFanout = 32
	// maxSummaryBytes bounds an agent's reply.
	maxSummaryBytes = 16 << 20
)

// Subresource of nodes through which the agent's /metrics is read.
const subProxy = auth.SubresourceProxy

type cachedSummary struct {
	at  time.Time
	sum wire.Summary
}

// summaries is the per-node cache of agents' summaries.
type summaries struct {
	mu sync.Mutex
	m  map[string]cachedSummary
}

func (c *summaries) get(node string, now time.Time) (wire.Summary, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[node]
	if !ok || now.Sub(e.at) >= summaryTTL {
		return wire.Summary{}, false
	}
	return e.sum, true
}

func (c *summaries) put(node string, now time.Time, sum wire.Summary) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]cachedSummary{}
	}
	// Drop what has expired, so nodes that went away do not stay.
	for k, e := range c.m {
		if now.Sub(e.at) >= summaryTTL {
			delete(c.m, k)
		}
	}
	c.m[node] = cachedSummary{at: now, sum: sum}
}

// metricsDiscovery are the fixed discovery replies of the group.
var (
	metricsGroupVersion = groupVersion{GroupVersion: api.MetricsAPIVersion, Version: api.MetricsVersion}
	metricsGroupJSON    = mustJSON(apiGroup{Kind: "APIGroup", APIVersion: "v1", Name: api.MetricsGroup,
		Versions: []groupVersion{metricsGroupVersion}, PreferredVersion: metricsGroupVersion})
	metricsResourcesJSON = mustJSON(apiResourceList{Kind: "APIResourceList", APIVersion: "v1", GroupVersion: api.MetricsAPIVersion,
		Resources: []apiResource{
			{Name: "nodes", SingularName: "", Namespaced: false, Kind: "NodeMetrics", Verbs: []string{verbGet, verbList}},
			{Name: "pods", SingularName: "", Namespaced: true, Kind: "PodMetrics", Verbs: []string{verbGet, verbList}},
		}})
)

// serveMetricsGroup serves everything under /apis/metrics.k8s.io; segs
// follow the group.
func (s *Server) serveMetricsGroup(w *recorder, r *http.Request, id *auth.Identity, segs []string) {
	switch {
	case len(segs) == 0:
		writeRaw(w, http.StatusOK, metricsGroupJSON)
		return
	case segs[0] != api.MetricsVersion:
		writeError(w, notFoundPath())
		return
	case len(segs) == 1:
		writeRaw(w, http.StatusOK, metricsResourcesJSON)
		return
	}
	segs = segs[1:]
	var ns, name string
	var nodes bool
	switch {
	case segs[0] == "nodes" && len(segs) <= 2:
		nodes = true
		if len(segs) == 2 {
			name = segs[1]
		}
	case segs[0] == "pods" && len(segs) == 1:
	case segs[0] == "namespaces" && len(segs) >= 3 && len(segs) <= 4 && segs[2] == "pods":
		ns = segs[1]
		if len(segs) == 4 {
			name = segs[3]
		}
	default:
		writeError(w, notFoundPath())
		return
	}
	res, kind := podsResource, "pods"
	if nodes {
		res, kind = nodesResource, "nodes"
	}
	verb := verbList
	if name != "" {
		verb = verbGet
	}
	w.label(verb, kind+"."+api.MetricsGroup)
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", http.MethodGet)
		writeError(w, api.NewMethodNotAllowed(r.Method+" is not supported on "+kind+"."+api.MetricsGroup+"; the metrics API is read-only"))
		return
	}
	if err := s.authorize(id, auth.Request{Verb: verb, Resource: kind, Namespace: ns, Name: name}); err != nil {
		writeError(w, err)
		return
	}
	opts, err := listOptions(res, r.URL.Query())
	if err != nil {
		writeError(w, err)
		return
	}
	objs, err := s.metricsObjects(res, ns, name, opts)
	if err != nil {
		writeError(w, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*summaryTimeout)
	defer cancel()
	if nodes {
		items := s.nodeMetrics(ctx, objs)
		if name != "" {
			if len(items) == 0 {
				writeError(w, metricsNotFound("nodemetrics", name))
				return
			}
			writeJSON(w, http.StatusOK, items[0])
			return
		}
		writeJSON(w, http.StatusOK, api.NodeMetricsList{TypeMeta: api.TypeMeta{Kind: "NodeMetricsList", APIVersion: api.MetricsAPIVersion}, Items: items})
		return
	}
	items := s.podMetrics(ctx, objs)
	if name != "" {
		if len(items) == 0 {
			writeError(w, metricsNotFound("podmetrics", ns+"/"+name))
			return
		}
		writeJSON(w, http.StatusOK, items[0])
		return
	}
	writeJSON(w, http.StatusOK, api.PodMetricsList{TypeMeta: api.TypeMeta{Kind: "PodMetricsList", APIVersion: api.MetricsAPIVersion}, Items: items})
}

// metricsNotFound is metrics-server's 404: `nodemetrics.metrics.k8s.io
// "edge-1" not found`.
func metricsNotFound(plural, name string) *api.StatusError {
	se := api.NewNotFound(&api.Resource{Plural: plural, Group: api.MetricsGroup}, name)
	se.Status.Message = fmt.Sprintf("%s.%s %q not found", plural, api.MetricsGroup, name)
	return se
}

// metricsObjects reads the nodes or pods a request is about from this
// server's store (usage is approximate; a quorum read would only slow
// it). A named object that does not exist is the object's 404.
func (s *Server) metricsObjects(res *api.Resource, ns, name string, opts store.ListOptions) ([]api.Object, error) {
	if name != "" {
		obj, err := s.core.GetObject(res, ns, name)
		if err != nil {
			return nil, err
		}
		if (opts.Label != nil && !opts.Label.Matches(obj.GetObjectMeta().Labels)) || (opts.Field != nil && !opts.Field.Matches(obj)) {
			return nil, nil
		}
		return []api.Object{obj}, nil
	}
	objs, _, err := s.core.ListObjects(res, ns, opts)
	return objs, err
}

// fetchSummaries asks the agents of nodes for their summaries, at most
// summaryFanout at once; a node whose agent does not answer is missing
// from the result.
func (s *Server) fetchSummaries(ctx context.Context, nodes []string) map[string]wire.Summary {
	out := make(map[string]wire.Summary, len(nodes))
	var mu sync.Mutex
	sem := make(chan struct{}, summaryFanout)
	var wg sync.WaitGroup
	for _, node := range nodes {
		now := time.Now()
		if sum, ok := s.summaries.get(node, now); ok {
			out[node] = sum
			continue
		}
		wg.Go(func() {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			defer func() { <-sem }()
			sum, err := s.agentSummary(ctx, node)
			if err != nil {
				s.log.Debug("no usage from a node's agent", "node", node, "err", err)
				return
			}
			if settled(sum) {
				s.summaries.put(node, time.Now(), sum)
			}
			mu.Lock()
			out[node] = sum
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// settled reports whether every reading of sum has a CPU rate. One that
// has not (a container that just started) is not kept: its next reading
// comes within seconds, and a user waiting for a new pod's figures
// should not also wait out the cache.
func settled(sum wire.Summary) bool {
	if sum.Node.CPU == nil || sum.Node.CPU.UsageNanoCores == nil {
		return false
	}
	for _, p := range sum.Pods {
		for _, c := range p.Containers {
			if c.CPU == nil || c.CPU.UsageNanoCores == nil {
				return false
			}
		}
	}
	return true
}

// agentSummary reads node's agent's GET /stats/summary.
func (s *Server) agentSummary(ctx context.Context, node string) (wire.Summary, error) {
	ctx, cancel := context.WithTimeout(ctx, summaryTimeout)
	defer cancel()
	resp, err := s.agentRequest(ctx, node, http.MethodGet, "/stats/summary", nil, nil, nil)
	if err != nil {
		return wire.Summary{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxSummaryBytes))
	if err != nil {
		return wire.Summary{}, fmt.Errorf("summary of node %s: %w", node, err)
	}
	if resp.StatusCode != http.StatusOK {
		return wire.Summary{}, fmt.Errorf("summary of node %s: %s: %s", node, resp.Status, strings.TrimSpace(string(b)))
	}
	var sum wire.Summary
	if err := json.Unmarshal(b, &sum); err != nil {
		return wire.Summary{}, fmt.Errorf("summary of node %s: %w", node, err)
	}
	return sum, nil
}

// nodeMetrics makes the NodeMetrics of the Ready nodes among objs whose
// agents answered with a CPU rate.
func (s *Server) nodeMetrics(ctx context.Context, objs []api.Object) []api.NodeMetrics {
	var names []string
	nodes := map[string]*api.Node{}
	for _, o := range objs {
		n, ok := o.(*api.Node)
		if !ok || !api.ReadyIn(n.Status.Conditions) {
			continue
		}
		names = append(names, n.Name)
		nodes[n.Name] = n
	}
	sums := s.fetchSummaries(ctx, names)
	now := api.NewTime(time.Now())
	items := []api.NodeMetrics{}
	for _, name := range names {
		sum, ok := sums[name]
		if !ok {
			continue
		}
		cpu, mem := sum.Node.CPU, sum.Node.Memory
		if cpu == nil || cpu.UsageNanoCores == nil || mem == nil {
			continue
		}
		items = append(items, api.NodeMetrics{
			TypeMeta:   api.TypeMeta{Kind: "NodeMetrics", APIVersion: api.MetricsAPIVersion},
			ObjectMeta: api.ObjectMeta{Name: name, Labels: nodes[name].Labels, CreationTimestamp: now},
			Timestamp:  api.Time{Time: cpu.Time.UTC().Truncate(time.Second)},
			Window:     api.Duration{Duration: time.Duration(cpu.WindowNanos)},
			Usage:      api.ResourceList{api.ResourceCPU: api.NanoCPU(*cpu.UsageNanoCores), api.ResourceMemory: api.BinaryBytes(mem.WorkingSetBytes)},
		})
	}
	return items
}

// podMetrics makes the PodMetrics of the pods among objs that run on a
// node whose agent answered, each once all its running containers have
// a CPU rate.
func (s *Server) podMetrics(ctx context.Context, objs []api.Object) []api.PodMetrics {
	var pods []*api.Pod
	var nodes []string
	for _, o := range objs {
		p, ok := o.(*api.Pod)
		if !ok || p.Spec.NodeName == "" || api.IsPodPhaseTerminal(p.Status.Phase) {
			continue
		}
		pods = append(pods, p)
		if !slices.Contains(nodes, p.Spec.NodeName) {
			nodes = append(nodes, p.Spec.NodeName)
		}
	}
	sums := s.fetchSummaries(ctx, nodes)
	byUID := map[string]wire.PodStats{}
	for _, sum := range sums {
		for _, ps := range sum.Pods {
			byUID[ps.PodRef.UID] = ps
		}
	}
	now := api.NewTime(time.Now())
	items := []api.PodMetrics{}
	for _, p := range pods {
		ps, ok := byUID[string(p.UID)]
		if !ok || ps.PodRef.Namespace != p.Namespace || ps.PodRef.Name != p.Name || len(ps.Containers) == 0 {
			continue
		}
		m := api.PodMetrics{
			TypeMeta:   api.TypeMeta{Kind: "PodMetrics", APIVersion: api.MetricsAPIVersion},
			ObjectMeta: api.ObjectMeta{Name: p.Name, Namespace: p.Namespace, Labels: p.Labels, CreationTimestamp: now},
		}
		complete := true
		for _, c := range ps.Containers {
			if c.CPU == nil || c.CPU.UsageNanoCores == nil || c.Memory == nil {
				complete = false
				break
			}
			// The containers were read together; the latest reading
			// and the longest window stand for the pod.
			if t := c.CPU.Time.UTC().Truncate(time.Second); t.After(m.Timestamp.Time) {
				m.Timestamp = api.Time{Time: t}
			}
			m.Window.Duration = max(m.Window.Duration, time.Duration(c.CPU.WindowNanos))
			m.Containers = append(m.Containers, api.ContainerMetrics{Name: c.Name, Usage: api.ResourceList{
				api.ResourceCPU: api.NanoCPU(*c.CPU.UsageNanoCores), api.ResourceMemory: api.BinaryBytes(c.Memory.WorkingSetBytes),
			}})
		}
		if complete {
			items = append(items, m)
		}
	}
	return items
}

// serveNodeAgentMetrics serves GET /api/v1/nodes/NAME/proxy/metrics: the
// agent's own Prometheus metrics, for cluster admins.
func (s *Server) serveNodeAgentMetrics(w *recorder, r *http.Request, id *auth.Identity, node string) {
	if r.Method != http.MethodGet {
		writeError(w, api.NewMethodNotAllowed(r.Method+" is not supported on nodes "+node+"/"+subProxy+"/metrics; use GET"))
		return
	}
	if err := s.authorize(id, auth.Request{Verb: auth.VerbGet, Resource: "nodes", Subresource: subProxy, Name: node}); err != nil {
		writeError(w, err)
		return
	}
	if _, err := s.core.GetObject(nodesResource, "", node); err != nil {
		writeError(w, err)
		return
	}
	s.toAgent(w, r, node, http.MethodGet, "/metrics", nil, nil)
}

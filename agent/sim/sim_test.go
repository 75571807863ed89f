package sim

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
	"github.com/outpost-edge/outpost/controlplane/server"
)

// testWriter sends log lines to t.Log until the test has ended.
type testWriter struct {
	t    testing.TB
	done atomic.Bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	if !w.done.Load() {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func testLogger(t testing.TB, level slog.Level) *slog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(func() { w.done.Store(true) })
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

// startServer runs a one-server cluster on loopback and returns its admin
// configuration and the path of its admin.conf.
func startServer(t *testing.T) (client.Config, string) {
	cfg, path, _ := startServerWith(t)
	return cfg, path
}

// startServerWith is startServer that also returns the server.
func startServerWith(t *testing.T) (client.Config, string, *server.Server) {
	t.Helper()
	dir := t.TempDir()
	confPath := filepath.Join(dir, "admin.conf")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := server.Start(ctx, server.Config{
		ID:                 "s1",
		DataDir:            dir,
		APIAddr:            "127.0.0.1:0",
		RaftAddr:           "127.0.0.1:0",
		BootstrapExpect:    1,
		ClusterSecret:      "sim-test-cluster-secret-0123456789abcdefghij",
		AdminConfigPath:    confPath,
		Logger:             testLogger(t, slog.LevelError),
		HeartbeatTimeout:   100 * time.Millisecond,
		ElectionTimeout:    100 * time.Millisecond,
		LeaderLeaseTimeout: 50 * time.Millisecond,
		CommitTimeout:      5 * time.Millisecond,
	})
	if err != nil {
		t.Fatalf("server.Start: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("server Close: %v", err)
		}
	})
	if err := s.WaitReady(ctx); err != nil {
		t.Fatalf("WaitReady: %v", err)
	}
	return s.AdminConfig(), confPath, s
}

// waitFor polls cond until it holds or the deadline passes; it polls
// the API, which has no push for "this field changed".
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		<-tick.C
	}
}

func getNode(t *testing.T, cl *client.Client, name string) *api.Node {
	t.Helper()
	obj, err := cl.Get(context.Background(), nodesResource, "", name, client.GetOptions{})
	if err != nil {
		t.Fatalf("get node %s: %v", name, err)
	}
	return obj.(*api.Node)
}

func condition(n *api.Node, typ string) api.NodeCondition {
	for _, c := range n.Status.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return api.NodeCondition{}
}

// heartbeatOf is when the leader last heard node name's heartbeat (the
// heartbeat call, held in its memory), or else its last status post.
func heartbeatOf(t *testing.T, s *server.Server, cl *client.Client, name string) time.Time {
	t.Helper()
	if at, ok := s.NodeHeartbeat(name); ok {
		return at
	}
	c := condition(getNode(t, cl, name), api.NodeReady)
	if c.LastHeartbeatTime == nil {
		t.Fatalf("node %s: Ready has no lastHeartbeatTime", name)
	}
	return c.LastHeartbeatTime.Time
}

func getPod(t *testing.T, cl *client.Client, name string) *api.Pod {
	t.Helper()
	obj, err := cl.Get(context.Background(), podsResource, "default", name, client.GetOptions{})
	if err != nil {
		t.Fatalf("get pod %s: %v", name, err)
	}
	return obj.(*api.Pod)
}

func createBoundPod(t *testing.T, cl *client.Client, name, node string) {
	t.Helper()
	ctx := context.Background()
	pod := &api.Pod{
		ObjectMeta: api.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       api.PodSpec{Containers: []api.Container{{Name: "app", Image: "nginx:1.27"}}},
	}
	if _, _, err := cl.Create(ctx, pod); err != nil {
		t.Fatalf("create pod %s: %v", name, err)
	}
	if err := cl.Bind(ctx, "default", name, node); err != nil {
		t.Fatalf("bind pod %s to %s: %v", name, node, err)
	}
}

const testNodes = `apiVersion: v1
kind: Node
metadata:
  name: worker
  labels:
    topology.kubernetes.io/zone: zone-a
    rack: r7
spec:
  taints:
  - {key: dedicated, value: sim, effect: NoSchedule}
status:
  capacity: {cpu: "8", memory: 16Gi, pods: "50"}
  allocatable: {cpu: 7500m}
`

// The simulation registers the file's nodes, each with its own node
// credential, heartbeats, runs pods, and goes quiet on demand.
func TestAgents(t *testing.T) {
	adminCfg, confPath, srv := startServerWith(t)
	admin, err := client.New(adminCfg)
	if err != nil {
		t.Fatal(err)
	}
	nodesFile := filepath.Join(t.TempDir(), "nodes.yaml")
	if err := os.WriteFile(nodesFile, []byte(testNodes), 0o600); err != nil {
		t.Fatal(err)
	}
	tmpls, _, err := ReadNodesFile(nodesFile)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Client:    adminCfg,
		Nodes:     tmpls,
		Count:     3,
		Heartbeat: 100 * time.Millisecond,
		Workers:   4,
		Logger:    testLogger(t, slog.LevelInfo),
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, err := Start(ctx, cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(a.Stop)
	names := []string{"worker-0001", "worker-0002", "worker-0003"}
	if got := a.Names(); !slices.Equal(got, names) {
		t.Fatalf("Names() = %v, want %v", got, names)
	}
	if got := a.Ready(); got != 3 {
		t.Fatalf("Ready() = %d, want 3", got)
	}

	// Registered as the file says, plus what a real agent sets.
	for _, name := range names {
		n := getNode(t, admin, name)
		wantLabels := map[string]string{
			"topology.kubernetes.io/zone": "zone-a", "rack": "r7",
			LabelHostname: name, LabelOS: "linux", LabelArch: runtime.GOARCH,
		}
		for k, v := range wantLabels {
			if n.Labels[k] != v {
				t.Errorf("node %s: label %s = %q, want %q", name, k, n.Labels[k], v)
			}
		}
		if len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != "dedicated" || n.Spec.Taints[0].Effect != api.TaintEffectNoSchedule {
			t.Errorf("node %s: taints = %+v", name, n.Spec.Taints)
		}
		for res, want := range map[string]string{"cpu": "8", "memory": "16Gi", "pods": "50"} {
			if got := n.Status.Capacity[res]; got.MilliValue() != api.MustParseQuantity(want).MilliValue() {
				t.Errorf("node %s: capacity %s = %v, want %s", name, res, got, want)
			}
		}
		// allocatable: cpu from the file, the rest from capacity.
		for res, want := range map[string]string{"cpu": "7500m", "memory": "16Gi", "pods": "50"} {
			if got := n.Status.Allocatable[res]; got.MilliValue() != api.MustParseQuantity(want).MilliValue() {
				t.Errorf("node %s: allocatable %s = %v, want %s", name, res, got, want)
			}
		}
		if c := condition(n, api.NodeReady); c.Status != api.ConditionTrue || c.Reason != "KubeletReady" {
			t.Errorf("node %s: Ready = %+v", name, c)
		}
		for _, typ := range []string{api.NodeMemoryPressure, api.NodeDiskPressure, api.NodePIDPressure} {
			if c := condition(n, typ); c.Status != api.ConditionFalse {
				t.Errorf("node %s: %s = %q, want False", name, typ, c.Status)
			}
		}
		if !IsSimulated(n) {
			t.Errorf("node %s: nodeInfo has no sim marker: %+v", name, n.Status.NodeInfo)
		}
	}

	// One node token per node, bound to it.
	objs, _, err := admin.List(ctx, tokensResource, "", client.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var tokenNodes []string
	for _, o := range objs {
		if tok := o.(*api.Token); tok.Spec.NodeName != "" {
			if tok.Spec.Role != api.RoleNode {
				t.Errorf("token %s of node %s has role %q", tok.Name, tok.Spec.NodeName, tok.Spec.Role)
			}
			tokenNodes = append(tokenNodes, tok.Spec.NodeName)
		}
	}
	slices.Sort(tokenNodes)
	if !slices.Equal(tokenNodes, names) {
		t.Fatalf("node tokens for %v, want %v", tokenNodes, names)
	}

	// A node's credential may not write another node.
	one := a.byName["worker-0001"].cl
	other := getNode(t, admin, "worker-0002")
	other.ResourceVersion = ""
	if _, _, err := one.UpdateStatus(ctx, other); api.ReasonOf(err) != api.ReasonForbidden {
		t.Fatalf("worker-0001 updating worker-0002's status: err = %v, want Forbidden", err)
	}
	if _, _, err := one.Update(ctx, other); api.ReasonOf(err) != api.ReasonForbidden {
		t.Fatalf("worker-0001 updating worker-0002: err = %v, want Forbidden", err)
	}

	// Heartbeats renew the node's liveness on the leader, and write
	// nothing while the node does not change.
	rv := getNode(t, admin, "worker-0001").ResourceVersion
	start := heartbeatOf(t, srv, admin, "worker-0001")
	waitFor(t, "a heartbeat of worker-0001", 5*time.Second, func() bool {
		return heartbeatOf(t, srv, admin, "worker-0001").After(start)
	})
	if got := getNode(t, admin, "worker-0001").ResourceVersion; got != rv {
		t.Errorf("worker-0001's heartbeats wrote its Node: resourceVersion %s -> %s", rv, got)
	}

	// A pod bound to a simulated node becomes Running and Ready.
	createBoundPod(t, admin, "web", "worker-0002")
	waitFor(t, "pod web Running", 5*time.Second, func() bool {
		return getPod(t, admin, "web").Status.Phase == api.PodRunning
	})
	pod := getPod(t, admin, "web")
	for _, typ := range []string{api.PodScheduled, api.PodInitialized, api.ContainersReady, api.PodReady} {
		i := slices.IndexFunc(pod.Status.Conditions, func(c api.PodCondition) bool { return c.Type == typ })
		if i < 0 || pod.Status.Conditions[i].Status != api.ConditionTrue {
			t.Errorf("pod web: condition %s not True: %+v", typ, pod.Status.Conditions)
		}
	}
	// Its address is of the pod CIDR the control plane gave the node
	// (SPEC NET-2).
	given := getNode(t, admin, "worker-0002").Spec.PodCIDR
	cidr, err := netip.ParsePrefix(given)
	if ip, ipErr := netip.ParseAddr(pod.Status.PodIP); err != nil || ipErr != nil || !cidr.Contains(ip) {
		t.Errorf("pod web: podIP %q not in worker-0002's pod CIDR %q", pod.Status.PodIP, given)
	}
	if pod.Status.StartTime == nil || len(pod.Status.ContainerStatuses) != 1 ||
		!pod.Status.ContainerStatuses[0].Ready || pod.Status.ContainerStatuses[0].State.Running == nil {
		t.Errorf("pod web: status = %+v", pod.Status)
	}

	// `sim silence` quiets worker-0003 alone, pods included.
	run := func(args ...string) string {
		t.Helper()
		var out strings.Builder
		cmd := Command()
		cmd.SetArgs(append(args, "--config", confPath))
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		if err := cmd.ExecuteContext(ctx); err != nil {
			t.Fatalf("sim %v: %v (%s)", args, err, out.String())
		}
		return out.String()
	}
	if out := run("silence", "worker-0003"); !strings.Contains(out, "node/worker-0003 silenced") {
		t.Errorf("sim silence printed %q", out)
	}
	// Ready drops once the process has seen the annotation; silencing
	// waits for writes in flight, so the heartbeat read next is its last.
	waitFor(t, "worker-0003 silenced", 5*time.Second, func() bool { return a.Ready() == 2 })
	quiet := heartbeatOf(t, srv, admin, "worker-0003")
	createBoundPod(t, admin, "quiet", "worker-0003")
	waitFor(t, "worker-0001 to heartbeat 2s past worker-0003's last", 5*time.Second, func() bool {
		return !heartbeatOf(t, srv, admin, "worker-0001").Before(quiet.Add(2 * time.Second))
	})
	if got := heartbeatOf(t, srv, admin, "worker-0003"); !got.Equal(quiet) {
		t.Fatalf("silenced worker-0003 heartbeat moved from %v to %v", quiet, got)
	}
	if ph := getPod(t, admin, "quiet").Status.Phase; ph == api.PodRunning {
		t.Fatalf("pod on silenced worker-0003 is %s", ph)
	}

	// `sim resume` brings heartbeats and pods back.
	if out := run("resume", "worker-0003"); !strings.Contains(out, "node/worker-0003 resumed") {
		t.Errorf("sim resume printed %q", out)
	}
	waitFor(t, "worker-0003 heartbeating again", 5*time.Second, func() bool {
		return heartbeatOf(t, srv, admin, "worker-0003").After(quiet)
	})
	waitFor(t, "pod quiet Running", 5*time.Second, func() bool {
		return getPod(t, admin, "quiet").Status.Phase == api.PodRunning
	})
	if n := getNode(t, admin, "worker-0003"); n.Annotations[SilencedAnnotation] != "" {
		t.Errorf("annotation left after resume: %v", n.Annotations)
	}

	// In-process switches.
	if err := a.Silence("worker-0001", "nope"); !errors.Is(err, ErrUnknownNode) {
		t.Errorf("Silence of an unknown node: err = %v, want ErrUnknownNode", err)
	}
	if got := a.Ready(); got != 2 {
		t.Errorf("Ready() after Silence = %d, want 2", got)
	}
	if err := a.Resume("worker-0001"); err != nil {
		t.Fatal(err)
	}
	if got := a.Ready(); got != 3 {
		t.Errorf("Ready() after Resume = %d, want 3", got)
	}

	// A restart takes the nodes over: it puts the file's labels back,
	// leaves a node silenced by its annotation quiet, and reuses tokens.
	a.Stop()
	n1 := getNode(t, admin, "worker-0001")
	delete(n1.Labels, "rack")
	n1.Labels["added-by-admin"] = "yes"
	if _, _, err := admin.Update(ctx, n1); err != nil {
		t.Fatal(err)
	}
	if err := SetSilenced(ctx, admin, true, []string{"worker-0002"}, nil); err != nil {
		t.Fatal(err)
	}
	b, err := Start(ctx, cfg)
	if err != nil {
		t.Fatalf("Start again: %v", err)
	}
	t.Cleanup(b.Stop)
	if got := b.Ready(); got != 2 {
		t.Errorf("Ready() after restart with worker-0002 silenced = %d, want 2", got)
	}
	if n := getNode(t, admin, "worker-0001"); n.Labels["rack"] != "r7" || n.Labels["added-by-admin"] != "yes" {
		t.Errorf("labels after restart = %v, want rack back and the admin's label kept", n.Labels)
	}
	objs2, _, err := admin.List(ctx, tokensResource, "", client.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(objs2) != len(objs) {
		t.Errorf("restart made tokens: %d before, %d after", len(objs), len(objs2))
	}
}

func TestCopyNameAndExpand(t *testing.T) {
	tmpl := func(name string) *api.Node { return &api.Node{ObjectMeta: api.ObjectMeta{Name: name}} }
	tests := []struct {
		name    string
		nodes   []string
		count   int
		want    []string
		wantErr error
	}{
		{"as is", []string{"a", "b"}, 0, []string{"a", "b"}, nil},
		{"three copies", []string{"worker"}, 3, []string{"worker-0001", "worker-0002", "worker-0003"}, nil},
		{"each template", []string{"a", "b"}, 2, []string{"a-0001", "a-0002", "b-0001", "b-0002"}, nil},
		{"duplicate", []string{"a", "a"}, 0, nil, ErrDuplicateNode},
		{"negative", []string{"a"}, -1, nil, ErrBadCount},
		{"bad name", []string{"Upper"}, 2, nil, ErrBadNode},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var tmpls []*api.Node
			for _, n := range tt.nodes {
				tmpls = append(tmpls, tmpl(n))
			}
			names, _, err := Expand(tmpls, tt.count)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if !slices.Equal(names, tt.want) {
				t.Fatalf("names = %v, want %v", names, tt.want)
			}
		})
	}
	if got := CopyName("w", 7, 12345); got != "w-00007" {
		t.Errorf("CopyName with 12345 copies = %q, want w-00007", got)
	}
}

func TestLoadNodes(t *testing.T) {
	tests := []struct {
		name    string
		data    string
		want    int
		wantErr error
	}{
		{"two", "kind: Node\napiVersion: v1\nmetadata: {name: a}\n---\nkind: Node\napiVersion: v1\nmetadata: {name: b}\n", 2, nil},
		{"a pod", "kind: Pod\napiVersion: v1\nmetadata: {name: a}\nspec: {containers: [{name: c, image: x}]}\n", 0, ErrNotNode},
		{"empty", "# nothing\n", 0, ErrNoNodes},
		{"no name", "kind: Node\napiVersion: v1\nmetadata: {}\n", 0, ErrBadNode},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes, _, err := LoadNodes([]byte(tt.data))
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if len(nodes) != tt.want {
				t.Fatalf("%d nodes, want %d", len(nodes), tt.want)
			}
		})
	}
}

// The example file of the repository loads, and every node it makes is
// valid; one of them is tainted.
func TestExampleFile(t *testing.T) {
	tmpls, warns, err := ReadNodesFile(filepath.Join("..", "..", "examples", "sim", "nodes.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(warns) > 0 {
		t.Errorf("warnings: %v", warns)
	}
	names, ts, err := Expand(tmpls, 2)
	if err != nil {
		t.Fatal(err)
	}
	tainted := 0
	for i, name := range names {
		n := buildNode(ts[i], name, netFor(i), false)
		if err := validateNode(n); err != nil {
			t.Errorf("node %s: %v", name, err)
		}
		if len(n.Spec.Taints) > 0 {
			tainted++
		}
		for _, k := range []string{"topology.kubernetes.io/zone", "topology.kubernetes.io/region", "rack"} {
			if n.Labels[k] == "" {
				t.Errorf("node %s has no label %s", name, k)
			}
		}
	}
	if tainted != 2 {
		t.Errorf("%d tainted nodes, want 2 (one template, two copies)", tainted)
	}
}

func TestBuildNodeDefaults(t *testing.T) {
	tmpl := &api.Node{
		ObjectMeta: api.ObjectMeta{Name: "t", Labels: map[string]string{LabelHostname: "wrong", LabelArch: "arm64"},
			Annotations: map[string]string{SilencedAnnotation: "true", "keep": "x"}},
		Status: api.NodeStatus{Conditions: []api.NodeCondition{{Type: api.NodeMemoryPressure, Status: api.ConditionTrue}}},
	}
	n := buildNode(tmpl, "t-0001", netFor(0), false)
	if n.Labels[LabelHostname] != "t-0001" || n.Labels[LabelArch] != "arm64" || n.Labels[LabelOS] != "linux" {
		t.Errorf("labels = %v: hostname is the node's name, the file's arch wins", n.Labels)
	}
	if _, ok := n.Annotations[SilencedAnnotation]; ok || n.Annotations["keep"] != "x" {
		t.Errorf("annotations = %v", n.Annotations)
	}
	for res, want := range map[string]string{"cpu": "4", "memory": "32Gi", "pods": "110"} {
		if got := n.Status.Capacity[res]; got.MilliValue() != api.MustParseQuantity(want).MilliValue() {
			t.Errorf("capacity %s = %v, want %s", res, got, want)
		}
		if got := n.Status.Allocatable[res]; got.MilliValue() != api.MustParseQuantity(want).MilliValue() {
			t.Errorf("allocatable %s = %v, want %s", res, got, want)
		}
	}
	if c := condition(n, api.NodeMemoryPressure); c.Status != api.ConditionTrue {
		t.Errorf("the file's MemoryPressure=True was replaced: %+v", c)
	}
	if c := condition(n, api.NodeReady); c.Status != api.ConditionTrue {
		t.Errorf("default Ready missing: %+v", n.Status.Conditions)
	}
	if tmpl.Labels[LabelHostname] != "wrong" || len(tmpl.Status.Conditions) != 1 {
		t.Error("buildNode changed its template")
	}
}

func TestPodIP(t *testing.T) {
	p := netip.MustParsePrefix("10.0.3.0/24")
	tests := []struct {
		n    uint32
		want string
	}{{0, "10.0.3.1"}, {253, "10.0.3.254"}, {254, "10.0.3.1"}}
	for _, tt := range tests {
		if got := podIP(p, tt.n); got != tt.want {
			t.Errorf("podIP(%v, %d) = %s, want %s", p, tt.n, got, tt.want)
		}
	}
	if a, b := netFor(0).pods, netFor(1).pods; a.Overlaps(b) {
		t.Errorf("nodes 0 and 1 share a pod range: %v %v", a, b)
	}
}

func TestNodeTokenIsDeterministic(t *testing.T) {
	id1, s1, err := nodeToken("abcdef.0123456789abcdef", "worker-0001")
	if err != nil {
		t.Fatal(err)
	}
	id2, s2, _ := nodeToken("abcdef.0123456789abcdef", "worker-0001")
	id3, s3, _ := nodeToken("abcdef.0123456789abcdef", "worker-0002")
	id4, _, _ := nodeToken("zzzzzz.0123456789abcdef", "worker-0001")
	if id1 != id2 || s1 != s2 {
		t.Error("same admin token and node gave different tokens")
	}
	if id1 == id3 || s1 == s3 || id1 == id4 {
		t.Error("different nodes or admin tokens gave the same token")
	}
	if len(id1) != 6 || len(s1) != 16 {
		t.Errorf("token %s.%s has the wrong shape", id1, s1)
	}
}

func TestRunningStatus(t *testing.T) {
	now := api.NewTime(time.Unix(1700000000, 0))
	earlier := api.NewTime(time.Unix(1600000000, 0))
	pod := &api.Pod{
		ObjectMeta: api.ObjectMeta{Name: "p", UID: "u1"},
		Spec:       api.PodSpec{Containers: []api.Container{{Name: "a", Image: "x"}, {Name: "b", Image: "y"}}},
		Status: api.PodStatus{Phase: api.PodPending, Conditions: []api.PodCondition{
			{Type: api.PodScheduled, Status: api.ConditionTrue, LastTransitionTime: earlier},
			{Type: "Custom", Status: api.ConditionFalse},
		}},
	}
	st := runningStatus(pod, "172.16.0.1", "10.0.0.5", now)
	if st.Phase != api.PodRunning || st.HostIP != "172.16.0.1" || st.PodIP != "10.0.0.5" || st.StartTime != now {
		t.Errorf("status = %+v", st)
	}
	got := map[string]api.PodCondition{}
	for _, c := range st.Conditions {
		got[c.Type] = c
	}
	if got[api.PodScheduled].LastTransitionTime != earlier {
		t.Error("PodScheduled's transition time was not kept")
	}
	if got[api.PodReady].Status != api.ConditionTrue || got["Custom"].Status != api.ConditionFalse {
		t.Errorf("conditions = %+v", st.Conditions)
	}
	if len(st.ContainerStatuses) != 2 || !st.ContainerStatuses[1].Ready || st.ContainerStatuses[1].Name != "b" {
		t.Errorf("container statuses = %+v", st.ContainerStatuses)
	}
	if pod.Status.Phase != api.PodPending {
		t.Error("runningStatus changed the pod it was given")
	}
}

func TestWorkQueueCoalesces(t *testing.T) {
	q := newWorkQueue[string]()
	q.Add("a")
	q.Add("a")
	q.Add("b")
	if q.Len() != 2 {
		t.Fatalf("Len = %d, want 2 (a queued once)", q.Len())
	}
	k, _ := q.Get()
	q.Add(k) // added while a worker has it: comes back after Done
	if q.Len() != 1 {
		t.Fatalf("Len = %d while %s is active, want 1", q.Len(), k)
	}
	q.Done(k)
	if q.Len() != 2 {
		t.Fatalf("Len = %d after Done, want 2", q.Len())
	}
	q.Shutdown()
	if _, ok := q.Get(); ok {
		t.Fatal("Get after Shutdown returned a key")
	}
}

func TestCommandNeedsServer(t *testing.T) {
	t.Setenv(client.EnvConfig, filepath.Join(t.TempDir(), "none"))
	t.Setenv(client.EnvServer, "")
	cmd := Command()
	cmd.SetArgs([]string{"silence", "x"})
	cmd.SetOut(&strings.Builder{})
	err := cmd.Execute()
	if !errors.Is(err, client.ErrNoConfig) {
		t.Fatalf("err = %v, want ErrNoConfig", err)
	}
}

// With UpdateDuration the simulated nodes play a config update through
// the real controller (UPD-8): Working and cordoned when given a config,
// Done, current and uncordoned after it; at most maxUnavailable at once.
func TestAgentsPlayConfigUpdates(t *testing.T) {
	adminCfg, _, _ := startServerWith(t)
	admin, err := client.New(adminCfg)
	if err != nil {
		t.Fatal(err)
	}
	tmpls, _, err := LoadNodes([]byte("apiVersion: v1\nkind: Node\nmetadata:\n  name: upd\n  labels:\n    node-role.kubernetes.io/worker: \"\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, err := Start(ctx, Config{Client: adminCfg, Nodes: tmpls, Count: 4, Heartbeat: 100 * time.Millisecond, DisablePods: true,
		UpdateDuration: 200 * time.Millisecond, Logger: testLogger(t, slog.LevelInfo)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Stop)
	objs, _, err := api.DecodeYAMLOrJSON([]byte(`apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfigPool
metadata:
  name: worker
spec:
  maxUnavailable: 2
  machineConfigSelector:
    matchLabels: {machineconfiguration.openshift.io/role: worker}
  nodeSelector:
    matchLabels: {node-role.kubernetes.io/worker: ""}
---
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: 50-x
  labels: {machineconfiguration.openshift.io/role: worker}
spec:
  config:
    ignition: {version: 3.2.0}
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if _, _, err := admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	maxBusy := 0
	waitFor(t, "every node updated", 30*time.Second, func() bool {
		// One list: a snapshot at one resourceVersion. Reading the nodes
		// one by one could see a node still cordoned and then the next
		// one cordoned after it had finished (CI saw 3).
		objs, _, err := admin.List(ctx, nodesResource, "", client.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		busy, done := 0, 0
		for _, o := range objs {
			n := o.(*api.Node)
			if n.Spec.Unschedulable {
				busy++
			}
			if want := n.Annotations[api.AnnotationDesiredConfig]; want != "" && n.Annotations[api.AnnotationCurrentConfig] == want &&
				n.Annotations[api.AnnotationMCState] == api.MCStateDone && !n.Spec.Unschedulable {
				done++
			}
		}
		maxBusy = max(maxBusy, busy)
		return done == 4
	})
	if maxBusy > 2 || maxBusy == 0 {
		t.Errorf("at most %d nodes seen cordoned at once, want 1 or 2 (maxUnavailable 2)", maxBusy)
	}
}

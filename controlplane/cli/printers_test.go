package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
)

func TestHumanAge(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{-5 * time.Second, "<invalid>"},
		{-time.Millisecond, "0s"},
		{0, "0s"},
		{5 * time.Second, "5s"},
		{119 * time.Second, "119s"},
		{2 * time.Minute, "2m"},
		{3*time.Minute + 7*time.Second, "3m7s"},
		{45 * time.Minute, "45m"},
		{179 * time.Minute, "179m"},
		{3 * time.Hour, "3h"},
		{5*time.Hour + 30*time.Minute, "5h30m"},
		{30 * time.Hour, "30h"},
		{4 * 24 * time.Hour, "4d"},
		{4*24*time.Hour + 5*time.Hour, "4d5h"},
		{100 * 24 * time.Hour, "100d"},
		{3*365*24*time.Hour + 10*24*time.Hour, "3y10d"},
		{10 * 365 * 24 * time.Hour, "10y"},
	}
	for _, tt := range tests {
		if got := humanAge(tt.d); got != tt.want {
			t.Errorf("humanAge(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}

var now = time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)

func ago(d time.Duration) *api.Time { return api.NewTime(now.Add(-d)) }

func i32(v int32) *int32 { return &v }

// render prints objs of kind as get would.
func render(t *testing.T, kind string, p printOptions, objs ...api.Object) string {
	t.Helper()
	r := api.ResourceForKind(kind)
	p.now = now
	var b bytes.Buffer
	if err := newTableFor(r, p).print(&b, rowsFor(r, objs, p)); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func checkGolden(t *testing.T, name, got, want string) {
	t.Helper()
	want = strings.TrimPrefix(want, "\n")
	if got != want {
		t.Errorf("%s:\ngot:\n%s\nwant:\n%s", name, got, want)
	}
}

func TestPodTable(t *testing.T) {
	running := &api.Pod{
		ObjectMeta: api.ObjectMeta{Name: "web-1", Namespace: "default", CreationTimestamp: ago(5 * time.Second), Labels: map[string]string{"app": "web", "tier": "fe"}},
		Spec:       api.PodSpec{NodeName: "edge-1", Containers: []api.Container{{Name: "a"}, {Name: "b"}}},
		Status: api.PodStatus{Phase: api.PodRunning, PodIP: "10.1.0.4", ContainerStatuses: []api.ContainerStatus{
			{Name: "a", Ready: true, RestartCount: 2, State: api.ContainerState{Running: &api.ContainerStateRunning{}},
				LastState: api.ContainerState{Terminated: &api.ContainerStateTerminated{ExitCode: 1, FinishedAt: ago(3 * time.Minute)}}},
			{Name: "b", Ready: true, RestartCount: 1, State: api.ContainerState{Running: &api.ContainerStateRunning{}}},
		}},
	}
	pending := &api.Pod{
		ObjectMeta: api.ObjectMeta{Name: "db-0", Namespace: "data", CreationTimestamp: ago(4 * 24 * time.Hour)},
		Spec:       api.PodSpec{Containers: []api.Container{{Name: "db"}}},
		Status:     api.PodStatus{Phase: api.PodPending, NominatedNodeName: "edge-2"},
	}
	checkGolden(t, "pods", render(t, "Pod", printOptions{}, running, pending), `
NAME    READY   STATUS    RESTARTS     AGE
web-1   2/2     Running   3 (3m ago)   5s
db-0    0/1     Pending   0            4d
`)
	checkGolden(t, "pods wide", render(t, "Pod", printOptions{wide: true}, running, pending), `
NAME    READY   STATUS    RESTARTS     AGE   IP         NODE     NOMINATED NODE
web-1   2/2     Running   3 (3m ago)   5s    10.1.0.4   edge-1   <none>
db-0    0/1     Pending   0            4d    <none>     <none>   edge-2
`)
	checkGolden(t, "pods -A --show-labels", render(t, "Pod", printOptions{withNamespace: true, showLabels: true}, running, pending), `
NAMESPACE   NAME    READY   STATUS    RESTARTS     AGE   LABELS
default     web-1   2/2     Running   3 (3m ago)   5s    app=web,tier=fe
data        db-0    0/1     Pending   0            4d    <none>
`)
	checkGolden(t, "pods with kind", render(t, "Pod", printOptions{withKind: true}, pending), `
NAME       READY   STATUS    RESTARTS   AGE
pod/db-0   0/1     Pending   0          4d
`)
}

func TestPodStatus(t *testing.T) {
	waiting := func(reason string) api.ContainerState {
		return api.ContainerState{Waiting: &api.ContainerStateWaiting{Reason: reason}}
	}
	terminated := func(code int32, reason string) api.ContainerState {
		return api.ContainerState{Terminated: &api.ContainerStateTerminated{ExitCode: code, Reason: reason}}
	}
	running := api.ContainerState{Running: &api.ContainerStateRunning{}}
	tests := []struct {
		name string
		pod  api.Pod
		want string
	}{
		{"no status", api.Pod{}, "Pending"},
		{"phase", api.Pod{Status: api.PodStatus{Phase: api.PodRunning}}, "Running"},
		{"pod reason", api.Pod{Status: api.PodStatus{Phase: api.PodFailed, Reason: "Evicted"}}, "Evicted"},
		{"crash loop", api.Pod{Status: api.PodStatus{Phase: api.PodRunning, ContainerStatuses: []api.ContainerStatus{{State: waiting("CrashLoopBackOff")}}}}, "CrashLoopBackOff"},
		{"completed", api.Pod{Status: api.PodStatus{Phase: api.PodSucceeded, ContainerStatuses: []api.ContainerStatus{{State: terminated(0, "Completed")}}}}, "Completed"},
		{"exit code", api.Pod{Status: api.PodStatus{Phase: api.PodFailed, ContainerStatuses: []api.ContainerStatus{{State: terminated(3, "")}}}}, "ExitCode:3"},
		{"init running", api.Pod{
			Spec:   api.PodSpec{InitContainers: []api.Container{{Name: "i1"}, {Name: "i2"}}},
			Status: api.PodStatus{Phase: api.PodPending, InitContainerStatuses: []api.ContainerStatus{{State: terminated(0, "")}, {State: running}}},
		}, "Init:1/2"},
		{"init failed", api.Pod{
			Spec:   api.PodSpec{InitContainers: []api.Container{{Name: "i1"}}},
			Status: api.PodStatus{Phase: api.PodPending, InitContainerStatuses: []api.ContainerStatus{{State: terminated(1, "Error")}}},
		}, "Init:Error"},
		{"terminating", api.Pod{ObjectMeta: api.ObjectMeta{DeletionTimestamp: ago(time.Second)}, Status: api.PodStatus{Phase: api.PodRunning}}, "Terminating"},
	}
	for _, tt := range tests {
		if got := podStatus(&tt.pod); got != tt.want {
			t.Errorf("%s: podStatus = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestNodeTable(t *testing.T) {
	ready := &api.Node{
		ObjectMeta: api.ObjectMeta{Name: "edge-1", CreationTimestamp: ago(3 * time.Hour), Labels: map[string]string{
			"node-role.kubernetes.io/control-plane": "", "node-role.kubernetes.io/worker": "",
		}},
		Status: api.NodeStatus{
			Conditions: []api.NodeCondition{{Type: api.NodeReady, Status: api.ConditionTrue}},
			Addresses:  []api.NodeAddress{{Type: "Hostname", Address: "edge-1"}, {Type: "InternalIP", Address: "192.168.1.10"}},
			NodeInfo:   api.NodeSystemInfo{KubeletVersion: "v0.3.0", OSImage: "Debian 12", KernelVersion: "6.1.0", ContainerRuntimeVersion: "containerd://2.0"},
		},
	}
	cordoned := &api.Node{
		ObjectMeta: api.ObjectMeta{Name: "edge-2", CreationTimestamp: ago(2 * time.Minute)},
		Spec:       api.NodeSpec{Unschedulable: true},
		Status:     api.NodeStatus{Conditions: []api.NodeCondition{{Type: api.NodeReady, Status: api.ConditionFalse}}},
	}
	lost := &api.Node{
		ObjectMeta: api.ObjectMeta{Name: "edge-3", CreationTimestamp: ago(50 * time.Hour)},
		Status:     api.NodeStatus{Conditions: []api.NodeCondition{{Type: api.NodeReady, Status: api.ConditionUnknown}}},
	}
	unreported := &api.Node{ObjectMeta: api.ObjectMeta{Name: "edge-4", CreationTimestamp: ago(time.Minute)}}
	checkGolden(t, "nodes", render(t, "Node", printOptions{}, ready, cordoned, lost, unreported), `
NAME     STATUS                        ROLES                  AGE    VERSION
edge-1   Ready                         control-plane,worker   3h     v0.3.0
edge-2   NotReady,SchedulingDisabled   <none>                 2m     <none>
edge-3   NotReady                      <none>                 2d2h   <none>
edge-4   Unknown                       <none>                 60s    <none>
`)
	checkGolden(t, "nodes wide", render(t, "Node", printOptions{wide: true}, ready), `
NAME     STATUS   ROLES                  AGE   VERSION   INTERNAL-IP    OS-IMAGE    KERNEL-VERSION   CONTAINER-RUNTIME
edge-1   Ready    control-plane,worker   3h    v0.3.0    192.168.1.10   Debian 12   6.1.0            containerd://2.0
`)
}

func TestWorkloadTables(t *testing.T) {
	tmpl := api.PodTemplateSpec{Spec: api.PodSpec{
		Containers:   []api.Container{{Name: "web", Image: "nginx:1.27"}, {Name: "log", Image: "fluent:2"}},
		NodeSelector: map[string]string{"zone": "a"},
	}}
	sel := &api.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	deploy := &api.Deployment{
		ObjectMeta: api.ObjectMeta{Name: "web", CreationTimestamp: ago(10 * time.Minute)},
		Spec:       api.DeploymentSpec{Replicas: i32(3), Selector: sel, Template: tmpl},
		Status:     api.DeploymentStatus{ReadyReplicas: 2, UpdatedReplicas: 3, AvailableReplicas: 2},
	}
	checkGolden(t, "deployments", render(t, "Deployment", printOptions{}, deploy), `
NAME   READY   UP-TO-DATE   AVAILABLE   AGE
web    2/3     3            2           10m
`)
	checkGolden(t, "deployments wide", render(t, "Deployment", printOptions{wide: true}, deploy), `
NAME   READY   UP-TO-DATE   AVAILABLE   AGE   CONTAINERS   IMAGES                SELECTOR
web    2/3     3            2           10m   web,log      nginx:1.27,fluent:2   app=web
`)
	rs := &api.ReplicaSet{
		ObjectMeta: api.ObjectMeta{Name: "web-7d9f", CreationTimestamp: ago(90 * time.Second)},
		Spec:       api.ReplicaSetSpec{Selector: sel},
		Status:     api.ReplicaSetStatus{Replicas: 1},
	}
	checkGolden(t, "replicasets", render(t, "ReplicaSet", printOptions{}, rs), `
NAME       DESIRED   CURRENT   READY   AGE
web-7d9f   1         1         0       90s
`)
	ds := &api.DaemonSet{
		ObjectMeta: api.ObjectMeta{Name: "agent-logs", CreationTimestamp: ago(8 * 24 * time.Hour)},
		Spec:       api.DaemonSetSpec{Selector: sel, Template: tmpl},
		Status:     api.DaemonSetStatus{DesiredNumberScheduled: 5, CurrentNumberScheduled: 5, NumberReady: 4, UpdatedNumberScheduled: 5, NumberAvailable: 4},
	}
	checkGolden(t, "daemonsets", render(t, "DaemonSet", printOptions{}, ds), `
NAME         DESIRED   CURRENT   READY   UP-TO-DATE   AVAILABLE   NODE SELECTOR   AGE
agent-logs   5         5         4       5            4           zone=a          8d
`)
	svc := &api.Service{
		ObjectMeta: api.ObjectMeta{Name: "web", CreationTimestamp: ago(time.Hour)},
		Spec: api.ServiceSpec{ClusterIP: "10.96.0.10", Selector: map[string]string{"app": "web"}, Ports: []api.ServicePort{
			{Port: 80}, {Port: 443, NodePort: 30443, Protocol: "TCP"}, {Port: 53, Protocol: "UDP"},
		}},
	}
	headless := &api.Service{ObjectMeta: api.ObjectMeta{Name: "db", CreationTimestamp: ago(time.Hour)}, Spec: api.ServiceSpec{Type: "NodePort"}}
	ext := &api.Service{ObjectMeta: api.ObjectMeta{Name: "mail", CreationTimestamp: ago(time.Hour)}, Spec: api.ServiceSpec{Type: "ExternalName", ExternalName: "mail.example.com"}}
	lb := &api.Service{ObjectMeta: api.ObjectMeta{Name: "edge", CreationTimestamp: ago(time.Hour)}, Spec: api.ServiceSpec{Type: "LoadBalancer", ClusterIP: "10.96.0.11", Ports: []api.ServicePort{{Port: 80, NodePort: 30080}}}}
	checkGolden(t, "services", render(t, "Service", printOptions{wide: true}, svc, headless, ext, lb), `
NAME   TYPE           CLUSTER-IP   EXTERNAL-IP        PORT(S)                       AGE   SELECTOR
web    ClusterIP      10.96.0.10   <none>             80/TCP,443:30443/TCP,53/UDP   60m   app=web
db     NodePort       <none>       <none>             <none>                        60m   <none>
mail   ExternalName   <none>       mail.example.com   <none>                        60m   <none>
edge   LoadBalancer   10.96.0.11   <pending>          80:30080/TCP                  60m   <none>
`)
	ns := &api.Namespace{ObjectMeta: api.ObjectMeta{Name: "team-a", CreationTimestamp: ago(400 * 24 * time.Hour)}, Status: api.NamespaceStatus{Phase: "Terminating"}}
	checkGolden(t, "namespaces", render(t, "Namespace", printOptions{}, ns), `
NAME     STATUS        AGE
team-a   Terminating   400d
`)
}

func TestEventAndTokenTables(t *testing.T) {
	ev := &api.Event{
		ObjectMeta:     api.ObjectMeta{Name: "web-1.1", Namespace: "default"},
		InvolvedObject: api.ObjectReference{Kind: "Pod", Name: "web-1"},
		Type:           "Warning", Reason: "FailedScheduling",
		Message:       "0/5 nodes are available: MatchNodeSelector (3), PodToleratesNodeTaints (2).",
		LastTimestamp: ago(30 * time.Second),
	}
	checkGolden(t, "events", render(t, "Event", printOptions{}, ev), `
LAST SEEN   TYPE      REASON             OBJECT      MESSAGE
30s         Warning   FailedScheduling   pod/web-1   0/5 nodes are available: MatchNodeSelector (3), PodToleratesNodeTaints (2).
`)
	// A repeated event says how often over how long, as kubectl's LAST
	// SEEN does; -o wide adds its source, first time, count and name.
	backOff := &api.Event{
		ObjectMeta:     api.ObjectMeta{Name: "web-1.2", Namespace: "default"},
		InvolvedObject: api.ObjectReference{Kind: "Pod", Name: "web-1"},
		Type:           "Warning", Reason: "BackOff", Message: "Back-off restarting failed container",
		Source:         api.EventSource{Component: "outpost-agent", Host: "n1"},
		FirstTimestamp: ago(10 * time.Minute), LastTimestamp: ago(2 * time.Minute), Count: 5,
	}
	checkGolden(t, "repeated event", render(t, "Event", printOptions{}, backOff), `
LAST SEEN          TYPE      REASON    OBJECT      MESSAGE
2m (x5 over 10m)   Warning   BackOff   pod/web-1   Back-off restarting failed container
`)
	checkGolden(t, "events wide", render(t, "Event", printOptions{wide: true}, ev, backOff), `
LAST SEEN          TYPE      REASON             OBJECT      MESSAGE                                                                       SOURCE              FIRST SEEN   COUNT   NAME
30s                Warning   FailedScheduling   pod/web-1   0/5 nodes are available: MatchNodeSelector (3), PodToleratesNodeTaints (2).   <none>              30s          1       web-1.1
2m (x5 over 10m)   Warning   BackOff            pod/web-1   Back-off restarting failed container                                          outpost-agent, n1   10m          5       web-1.2
`)
	tokens := []api.Object{
		&api.Token{ObjectMeta: api.ObjectMeta{Name: "abc123"}, Spec: api.TokenSpec{Role: "developer", Namespaces: []string{"a", "b"}, Expires: api.NewTime(time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC))}},
		&api.Token{ObjectMeta: api.ObjectMeta{Name: "node01"}, Spec: api.TokenSpec{Role: "node", NodeName: "edge-1"}},
	}
	checkGolden(t, "tokens", render(t, "Token", printOptions{}, tokens...), `
NAME     ROLE        NODE     NAMESPACES   EXPIRES
abc123   developer   <none>   a,b          2026-04-01T00:00:00Z
node01   node        edge-1   <none>       <never>
`)
}

func TestTableWidthsGrowUnderWatch(t *testing.T) {
	tb := newTable([]string{"NAME", "AGE"})
	var b bytes.Buffer
	tb.print(&b, [][]string{{"a", "1s"}})
	tb.print(&b, [][]string{{"longer-name", "2s"}})
	tb.print(&b, [][]string{{"b", "3s"}})
	want := "NAME   AGE\na      1s\nlonger-name   2s\nb             3s\n"
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestWithTypeMeta(t *testing.T) {
	r := api.ResourceForKind("Deployment")
	tests := []struct{ in, want string }{
		{`{"metadata":{"name":"x"}}`, `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"x"}}`},
		{`{}`, `{"apiVersion":"apps/v1","kind":"Deployment"}`},
		{`{"kind":"Deployment","apiVersion":"apps/v1","metadata":{}}`, `{"kind":"Deployment","apiVersion":"apps/v1","metadata":{}}`},
		{`{"kind":"Deployment","metadata":{}}`, `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{}}`},
	}
	for _, tt := range tests {
		if got := string(withTypeMeta(r, []byte(tt.in))); got != tt.want {
			t.Errorf("withTypeMeta(%s) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

// describe pod shows Kubernetes' QoS class when the status has none.
func TestQOSClass(t *testing.T) {
	q := api.MustParseQuantity
	c := func(req, lim api.ResourceList) api.Container {
		return api.Container{Name: "c", Resources: api.ResourceRequirements{Requests: req, Limits: lim}}
	}
	for _, tc := range []struct {
		name string
		cs   []api.Container
		want string
	}{
		{"nothing", []api.Container{c(nil, nil)}, "BestEffort"},
		{"requests only", []api.Container{c(api.ResourceList{"cpu": q("100m")}, nil)}, "Burstable"},
		{"limits equal", []api.Container{c(api.ResourceList{"cpu": q("1"), "memory": q("1Gi")}, api.ResourceList{"cpu": q("1"), "memory": q("1Gi")})}, "Guaranteed"},
		{"limits only", []api.Container{c(nil, api.ResourceList{"cpu": q("1"), "memory": q("1Gi")})}, "Guaranteed"},
		{"request below limit", []api.Container{c(api.ResourceList{"cpu": q("500m"), "memory": q("1Gi")}, api.ResourceList{"cpu": q("1"), "memory": q("1Gi")})}, "Burstable"},
		{"one container without limits", []api.Container{c(nil, api.ResourceList{"cpu": q("1"), "memory": q("1Gi")}), c(nil, nil)}, "Burstable"},
	} {
		if got := qosClass(&api.PodSpec{Containers: tc.cs}); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// EndpointSlices print as kubectl prints them: the ports, the first
// three addresses and how many more, <unset> for none.
func TestEndpointSliceTable(t *testing.T) {
	p80, p9090 := int32(80), int32(9090)
	ep := func(a string) api.Endpoint { return api.Endpoint{Addresses: []string{a}} }
	slices := []api.Object{
		&api.EndpointSlice{ObjectMeta: api.ObjectMeta{Name: "web-abcde", Namespace: "default", CreationTimestamp: ago(2 * time.Minute)}, AddressType: api.AddressTypeIPv4,
			Ports:     []api.EndpointPort{{Name: "http", Port: &p80}, {Name: "metrics", Port: &p9090}},
			Endpoints: []api.Endpoint{ep("10.42.0.5"), ep("10.42.0.6"), ep("10.42.1.2"), ep("10.42.1.3"), ep("10.42.2.9")}},
		&api.EndpointSlice{ObjectMeta: api.ObjectMeta{Name: "empty-fghij", Namespace: "default", CreationTimestamp: ago(time.Hour)}, AddressType: api.AddressTypeIPv4},
	}
	checkGolden(t, "endpointslices", render(t, "EndpointSlice", printOptions{}, slices...), `
NAME          ADDRESSTYPE   PORTS     ENDPOINTS                                   AGE
web-abcde     IPv4          80,9090   10.42.0.5,10.42.0.6,10.42.1.2 + 2 more...   2m
empty-fghij   IPv4          <unset>   <unset>                                     60m
`)
}

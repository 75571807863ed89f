package server

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/auth"
)

func deploymentJSON(name, nodeName string, replicas int) map[string]any {
	spec := map[string]any{"containers": []any{map[string]any{"name": "app", "image": "registry.local/app:1.0"}}}
	if nodeName != "" {
		spec["nodeName"] = nodeName
	}
	return map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"replicas": replicas,
			"selector": map[string]any{"matchLabels": map[string]any{"app": name}},
			"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": name}}, "spec": spec},
		},
	}
}

// ADM-1, first half: only users allowed pods/binding may place a pod by
// naming its node, which skips the scheduler (taints, selectors). The
// built-in step runs with no Config.Admission at all.
func TestPodNodeNameNeedsBindingPermission(t *testing.T) {
	s := startServer(t, testConfig(t))
	c := admin(t, s)
	c.must(http.StatusCreated, "POST", "/api/v1/namespaces", map[string]any{"metadata": map[string]any{"name": "team-a"}})
	devToken := addToken(t, c, api.TokenSpec{Role: api.RoleDeveloper, Namespaces: []string{"team-a"}})
	devID, _, _ := auth.ParseToken(devToken)
	dev := c.as(devToken)
	const pods = "/api/v1/namespaces/team-a/pods"
	const deploys = "/apis/apps/v1/namespaces/team-a/deployments"

	placed := podJSON("x", nil)
	placed["spec"].(map[string]any)["nodeName"] = "n1"
	for _, tt := range []struct {
		name string
		path string
		body any
		want string
	}{
		{"pod", pods, placed,
			`pods "x" is forbidden: spec.nodeName may only be set by users with the pods/binding permission (user "token:` + devID + `" in namespace "team-a")`},
		{"deployment template", deploys, deploymentJSON("d", "n1", 1),
			`deployments "d" is forbidden: spec.template.spec.nodeName may only be set by users with the pods/binding permission (user "token:` + devID + `" in namespace "team-a")`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := appliedIndex(s)
			r := dev.do("POST", tt.path, tt.body)
			if r.code != http.StatusForbidden || r.status().Message != tt.want {
				t.Fatalf("developer sets a node: %d %s\nwant 403 saying %s", r.code, r.body, tt.want)
			}
			if appliedIndex(s) != before {
				t.Fatal("the refused create changed the store")
			}
		})
	}
	// Without a node the developer's pod goes through; an admin may place.
	dev.must(http.StatusCreated, "POST", pods, podJSON("free", nil))
	p := decode[api.Pod](t, c.must(http.StatusCreated, "POST", pods, placed))
	if p.Spec.NodeName != "n1" {
		t.Fatalf("admin's placed pod: nodeName %q", p.Spec.NodeName)
	}
	// A workload an admin placed stays editable by the developer as long
	// as the node does not change.
	c.must(http.StatusCreated, "POST", deploys, deploymentJSON("pinned", "n1", 1))
	dev.must(http.StatusOK, "PUT", deploys+"/pinned", deploymentJSON("pinned", "n1", 2))
	r := dev.do("PUT", deploys+"/pinned", deploymentJSON("pinned", "n2", 2))
	if r.code != http.StatusForbidden || !strings.Contains(r.status().Message, "spec.template.spec.nodeName may only be set by users with the pods/binding permission") {
		t.Fatalf("developer moves a pinned deployment: %d %s", r.code, r.body)
	}
}

func nodeJSON(name string, labels map[string]string, taints []api.Taint, unschedulable bool) *api.Node {
	return &api.Node{
		ObjectMeta: api.ObjectMeta{Name: name, Labels: labels},
		Spec:       api.NodeSpec{Taints: taints, Unschedulable: unschedulable},
	}
}

// NodeRestriction: a node registers itself with whatever labels and taints
// it likes and keeps its status current, but once registered it may not
// change the scheduling controls on its Node, nor delete it.
func TestNodeRestriction(t *testing.T) {
	s := startServer(t, testConfig(t))
	c := admin(t, s)
	node := c.as(addToken(t, c, api.TokenSpec{Role: api.RoleNode, NodeName: "n1"}))
	const path = "/api/v1/nodes/n1"
	labels := map[string]string{"team": "a", "kubernetes.io/hostname": "n1"}
	taints := []api.Taint{{Key: "dedicated", Value: "edge", Effect: "NoSchedule"}}
	node.must(http.StatusCreated, "POST", "/api/v1/nodes", nodeJSON("n1", labels, taints, false))

	with := func(k, v string) map[string]string {
		m := map[string]string{}
		for k, v := range labels {
			m[k] = v
		}
		if v == "" {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	for _, tt := range []struct {
		name string
		body *api.Node
		want string // "" = allowed
	}{
		{"kubelet's own labels", nodeJSON("n1", with("kubernetes.io/os", "linux"), taints, false), ""},
		{"beta and topology labels", nodeJSON("n1", map[string]string{"team": "a", "kubernetes.io/hostname": "n1", "kubernetes.io/os": "linux",
			"beta.kubernetes.io/arch": "arm64", "topology.kubernetes.io/zone": "z1", "failure-domain.beta.kubernetes.io/region": "r"}, taints, false), ""},
		{"add a label", nodeJSON("n1", with("gpu", "yes"), taints, false), `node "n1" may not change label "gpu"`},
		{"remove a label", nodeJSON("n1", with("team", ""), taints, false), `node "n1" may not change label "team"`},
		{"change a label", nodeJSON("n1", with("team", "b"), taints, false), `node "n1" may not change label "team"`},
		{"drop its taints", nodeJSON("n1", labels, nil, false), `node "n1" may not change spec.taints`},
		{"change a taint", nodeJSON("n1", labels, []api.Taint{{Key: "dedicated", Value: "edge", Effect: "PreferNoSchedule"}}, false), `may not change spec.taints`},
		{"cordon itself", nodeJSON("n1", labels, taints, true), `node "n1" may not change spec.unschedulable`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := appliedIndex(s)
			r := node.do("PUT", path, tt.body)
			if tt.want == "" {
				if r.code != http.StatusOK {
					t.Fatalf("allowed update refused: %d %s", r.code, r.body)
				}
				labels = tt.body.Labels
				return
			}
			msg := r.status().Message
			if r.code != http.StatusForbidden || !strings.HasPrefix(msg, `nodes "n1" is forbidden: NodeRestriction: `) ||
				!strings.Contains(msg, tt.want) || !strings.Contains(msg, "taints, unschedulable and other labels are set by an administrator") {
				t.Fatalf("got %d %s\nwant 403 saying %q and the rule", r.code, r.body, tt.want)
			}
			if appliedIndex(s) != before {
				t.Fatal("the refused update changed the store")
			}
		})
	}
	// Its status is its own to report.
	st := nodeJSON("n1", nil, nil, false)
	st.Status.Conditions = []api.NodeCondition{{Type: "Ready", Status: "True"}}
	st.Status.Addresses = []api.NodeAddress{{Type: "InternalIP", Address: "10.0.0.7"}}
	node.must(http.StatusOK, "PUT", path+"/status", st)

	r := node.do("DELETE", path, nil)
	if r.code != http.StatusForbidden {
		t.Fatalf("node deletes its Node: %d %s", r.code, r.body)
	}
	// An administrator may do all of it.
	c.must(http.StatusOK, "PUT", path, nodeJSON("n1", map[string]string{"gpu": "yes"}, nil, true))
	c.must(http.StatusOK, "DELETE", path, nil)
}

// SPEC ADM-3 through the API: a pod created without tolerations of the
// condition taints gets both for 300 s; a toleration by the seed's older
// key is kept, covers its taint, and draws a warning naming today's key
// (issue 10 items 5, 10).
func TestDefaultTolerationSecondsThroughTheAPI(t *testing.T) {
	s := startServer(t, testConfig(t))
	c := admin(t, s)
	r := c.must(http.StatusCreated, "POST", "/api/v1/namespaces/default/pods", podJSON("plain", nil))
	p := decode[api.Pod](t, r)
	var got []string
	for _, tol := range p.Spec.Tolerations {
		if tol.TolerationSeconds == nil {
			t.Fatalf("toleration %+v has no seconds", tol)
		}
		got = append(got, fmt.Sprintf("%s:%s:%s:%d", tol.Key, tol.Operator, tol.Effect, *tol.TolerationSeconds))
	}
	if want := "node.kubernetes.io/not-ready:Exists:NoExecute:300,node.kubernetes.io/unreachable:Exists:NoExecute:300"; strings.Join(got, ",") != want {
		t.Errorf("tolerations %v, want %s", got, want)
	}

	old := podJSON("old-key", nil)
	old["spec"].(map[string]any)["tolerations"] = []any{map[string]any{
		"key": "node.alpha.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 6000}}
	r = c.must(http.StatusCreated, "POST", "/api/v1/namespaces/default/pods", old)
	if w := r.header.Get("Warning"); !strings.Contains(w, "spec.tolerations[0].key") || !strings.Contains(w, api.TaintNodeUnreachable) {
		t.Errorf("Warning header %q, want one naming spec.tolerations[0].key and %s", w, api.TaintNodeUnreachable)
	}
	p = decode[api.Pod](t, r)
	if n := len(p.Spec.Tolerations); n != 2 || p.Spec.Tolerations[1].Key != api.TaintNodeNotReady {
		t.Errorf("with the older unreachable key: %+v, want it kept and only not-ready added", p.Spec.Tolerations)
	}
}

// UPD-8: a MachineConfig that writes a file differently from another of
// the same priority is refused with the file's field path; one of a
// higher priority may. Nodes read rendered configs by name, nothing else of them.
func TestMachineConfigConflictAndAccess(t *testing.T) {
	s := startServer(t, testConfig(t))
	c := admin(t, s)
	const path = "/apis/machineconfiguration.openshift.io/v1/machineconfigs"
	mc := func(name, contents string) map[string]any {
		return map[string]any{"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig", "metadata": map[string]any{"name": name},
			"spec": map[string]any{"config": map[string]any{"ignition": map[string]any{"version": "3.2.0"},
				"storage": map[string]any{"files": []any{
					map[string]any{"path": "/etc/same", "contents": map[string]any{"source": "data:,same"}},
					map[string]any{"path": "/etc/x", "contents": map[string]any{"source": "data:," + contents}},
				}}}}}
	}
	c.must(http.StatusCreated, "POST", path, mc("50-a", "a"))
	r := c.must(http.StatusUnprocessableEntity, "POST", path, mc("50-b", "b"))
	if b := string(r.body); !strings.Contains(b, "spec.config.storage.files[1].path") || !strings.Contains(b, "50-a") || strings.Contains(b, "files[0]") {
		t.Errorf("conflicting config refused with %s; want files[1] (not files[0], written alike) naming 50-a", r.body)
	}
	c.must(http.StatusCreated, "POST", path, mc("60-b", "b"))

	node := c.as(addToken(t, c, api.TokenSpec{Role: api.RoleNode, NodeName: "n1"}))
	node.must(http.StatusForbidden, "GET", path+"/50-a", nil) // a source config: rendered ones only
	node.must(http.StatusForbidden, "GET", "/apis/machineconfiguration.openshift.io/v1/machineconfigpools", nil)
	node.must(http.StatusNotFound, "GET", path+"/rendered-worker-0", nil)
	node.must(http.StatusForbidden, "POST", path, mc("70-c", "c"))
}

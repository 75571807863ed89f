package core

import (
	"strings"
	"testing"

	"github.com/outpost-edge/outpost/controlplane/admission"
	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/auth"
)

func testNode(name string, labels map[string]string, taints []api.Taint, unschedulable bool) *api.Node {
	return &api.Node{
		ObjectMeta: api.ObjectMeta{Name: name, Labels: labels},
		Spec:       api.NodeSpec{Taints: taints, Unschedulable: unschedulable},
	}
}

// The step is asked directly for what the HTTP path cannot reach: a
// node's delete is refused by authorization before admission sees it.
func TestNodeRestrictionAdmitsDirectly(t *testing.T) {
	n1 := &auth.Identity{Name: "system:node:n1", Role: api.RoleNode, NodeName: "n1"}
	adminID := &auth.Identity{Name: "admin", Role: api.RoleClusterAdmin}
	old := testNode("n1", map[string]string{"a": "b"}, nil, false)
	var a nodeRestrictionAdmission
	if err := a.Admit(t.Context(), admission.OpDelete, n1, nil, old); err == nil || !strings.Contains(err.Error(), `node "n1" may not delete its Node object`) {
		t.Errorf("node deletes its Node: %v", err)
	}
	if err := a.Admit(t.Context(), admission.OpDelete, adminID, nil, old); err != nil {
		t.Errorf("admin deletes a Node: %v", err)
	}
	if err := a.Admit(t.Context(), admission.OpCreate, n1, testNode("n1", map[string]string{"any": "thing"}, []api.Taint{{Key: "k", Effect: "NoSchedule"}}, true), nil); err != nil {
		t.Errorf("node registers with labels and taints: %v", err)
	}
	if !a.Applies(admission.OpDelete, n1, nodesResource) || a.Applies(admission.OpUpdate, adminID, nodesResource) || a.Applies(admission.OpUpdate, n1, podsResource) {
		t.Error("Applies picks the wrong requests")
	}
}

// A node's agent cordons itself for a config update the pool assigned and
// lifts only that cordon; it never sets the config it should run (UPD-8).
func TestNodeRestrictionUpdateCordon(t *testing.T) {
	n1 := &auth.Identity{Name: "system:node:n1", Role: api.RoleNode, NodeName: "n1"}
	var a nodeRestrictionAdmission
	node := func(unschedulable bool, ann map[string]string) *api.Node {
		n := testNode("n1", nil, nil, unschedulable)
		n.Annotations = ann
		return n
	}
	assigned := map[string]string{api.AnnotationCurrentConfig: "rendered-worker-a", api.AnnotationDesiredConfig: "rendered-worker-b"}
	with := func(m map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			out[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	without := func(m map[string]string, k string) map[string]string {
		out := with(m)
		delete(out, k)
		return out
	}
	cordoned := with(assigned, api.AnnotationUpdateCordoned, "true")
	for _, tt := range []struct {
		name     string
		old, new *api.Node
		ok       bool
	}{
		{"cordon for an assigned update, marked", node(false, assigned), node(true, cordoned), true},
		{"cordon unmarked", node(false, assigned), node(true, assigned), false},
		{"cordon with nothing to update", node(false, with(assigned, api.AnnotationDesiredConfig, "rendered-worker-a")), node(true, with(cordoned, api.AnnotationDesiredConfig, "rendered-worker-a")), false},
		{"lift its own cordon, dropping the mark", node(true, cordoned), node(false, without(cordoned, api.AnnotationUpdateCordoned)), true},
		{"lift an administrator's cordon", node(true, assigned), node(false, assigned), false},
		{"lift its cordon but keep the mark", node(true, cordoned), node(false, cordoned), false},
		{"set its own desired config", node(false, assigned), node(false, with(assigned, api.AnnotationDesiredConfig, "rendered-worker-c")), false},
		{"report its current config and state", node(false, assigned), node(false, with(assigned, api.AnnotationCurrentConfig, "rendered-worker-b", api.AnnotationMCState, api.MCStateDone)), true},
		// The mark alone on an administrator's cordon, then the lift.
		{"mark an administrator's cordon", node(true, assigned), node(true, cordoned), false},
		{"drop the mark alone", node(true, cordoned), node(true, assigned), false},
	} {
		err := a.Admit(t.Context(), admission.OpUpdate, n1, tt.new, tt.old)
		if (err == nil) != tt.ok {
			t.Errorf("%s: %v, want allowed=%v", tt.name, err, tt.ok)
		}
	}
}

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

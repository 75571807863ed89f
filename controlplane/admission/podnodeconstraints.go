package admission

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/auth"
)

// podNodeConstraints is the nodeSelector half of SPEC ADM-1: a label in
// the blacklist (kubernetes.io/hostname by default) pins a pod to chosen
// nodes as surely as spec.nodeName does, so only users who may create
// pods/binding may select on it. Workload pod templates are held to the
// same rule, else a Deployment would place its pods where its author may
// not; the pods a controller then creates from the template are the
// server's and pass.
type podNodeConstraints struct {
	blacklist []string
	can       func(*auth.Identity, auth.Request) bool
}

func newPodNodeConstraints(c *PodNodeConstraintsConfig, can func(*auth.Identity, auth.Request) bool) *podNodeConstraints {
	return &podNodeConstraints{blacklist: slices.Clone(c.NodeSelectorLabelBlacklist), can: can}
}

func (a *podNodeConstraints) Applies(op string, _ *auth.Identity, r *api.Resource) bool {
	switch r {
	case podsResource:
		// nodeSelector cannot change on update (validation).
		return op == OpCreate
	case replicaSetsResource, deploymentsResource, daemonSetsResource:
		return op == OpCreate || op == OpUpdate
	}
	return false
}

func (a *podNodeConstraints) Admit(_ context.Context, op string, id *auth.Identity, obj, old api.Object) error {
	if op != OpCreate && op != OpUpdate {
		return nil
	}
	var sel, oldSel map[string]string
	field := "spec.template.spec.nodeSelector"
	switch o := obj.(type) {
	case *api.Pod:
		if op != OpCreate {
			return nil
		}
		sel, field = o.Spec.NodeSelector, "spec.nodeSelector"
	case *api.ReplicaSet:
		sel = o.Spec.Template.Spec.NodeSelector
		if o, ok := old.(*api.ReplicaSet); ok {
			oldSel = o.Spec.Template.Spec.NodeSelector
		}
	case *api.Deployment:
		sel = o.Spec.Template.Spec.NodeSelector
		if o, ok := old.(*api.Deployment); ok {
			oldSel = o.Spec.Template.Spec.NodeSelector
		}
	case *api.DaemonSet:
		sel = o.Spec.Template.Spec.NodeSelector
		if o, ok := old.(*api.DaemonSet); ok {
			oldSel = o.Spec.Template.Spec.NodeSelector
		}
	default:
		return nil
	}
	if len(sel) == 0 {
		return nil
	}
	// An update that keeps the labels an administrator set (a developer
	// scaling that Deployment) places nothing new: only blacklisted
	// labels added or changed count.
	var used []string
	for _, k := range a.blacklist {
		v, ok := sel[k]
		if !ok {
			continue
		}
		if ov, had := oldSel[k]; had && ov == v {
			continue
		}
		used = append(used, k)
	}
	if len(used) == 0 {
		return nil
	}
	m := obj.GetObjectMeta()
	req := auth.Request{Verb: auth.VerbCreate, Resource: "pods", Subresource: auth.SubresourceBinding, Namespace: m.Namespace, Name: m.Name}
	if a.can(id, req) {
		return nil
	}
	slices.Sort(used)
	where := ""
	if field != "spec.nodeSelector" {
		where = " in " + field
	}
	return api.NewForbidden(fmt.Sprintf("%s %q is forbidden: node selector label(s) [%s]%s may only be set by users with the pods/binding permission (user %q in namespace %q)",
		api.ResourceOf(obj).Plural, m.Name, strings.Join(used, " "), where, userName(id), m.Namespace))
}

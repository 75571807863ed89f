package core

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/outpost-edge/outpost/controlplane/admission"
	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/auth"
	"github.com/outpost-edge/outpost/controlplane/scheduler/policy"
)

// builtinAdmission is what every server runs before Config.Admission:
// rules of the spec that no configuration may leave out. These steps
// refuse, or fill in a Service's addresses; validation need not run
// after them.
func builtinAdmission(objects func(*api.Resource) ([]api.Object, uint64, error), nw Network) []admission.Interface {
	// Each step only refuses, or (serviceIPAdmission) adds well-formed
	// fields: admission.KeepsValid, so the chain does not validate again
	// after them.
	return []admission.Interface{podNodeNameAdmission{}, nodeRestrictionAdmission{}, schedulerPolicyAdmission{}, machineConfigAdmission{objects},
		serviceIPAdmission{net: nw, objects: objects}, podCIDRAdmission{net: nw, objects: objects}}
}

var machineConfigsResource = api.ResourceForKind("MachineConfig")

// machineConfigAdmission refuses a MachineConfig that writes a file
// differently from another config of the same priority (SPEC UPD-8):
// configs merge in name order, and between 50-a and 50-b that order would
// be an accident of naming. Rendered configs are the controller's and
// are not compared. Two such writes racing each other can both pass;
// the render then fails and the pool says so (RenderDegraded).
type machineConfigAdmission struct {
	objects func(*api.Resource) ([]api.Object, uint64, error)
}

func (machineConfigAdmission) KeepsValid() {}

func (machineConfigAdmission) Applies(op string, _ *auth.Identity, r *api.Resource) bool {
	return r == machineConfigsResource && (op == admission.OpCreate || op == admission.OpUpdate)
}

func (a machineConfigAdmission) Admit(_ context.Context, op string, _ *auth.Identity, obj, _ api.Object) error {
	mc, ok := obj.(*api.MachineConfig)
	if !ok || a.objects == nil || strings.HasPrefix(mc.Name, api.RenderedPrefix) {
		return nil
	}
	others, _, err := a.objects(machineConfigsResource)
	if err != nil {
		return fmt.Errorf("machine configs: %w", err)
	}
	var errs api.ErrorList
	for _, o := range others {
		other := o.(*api.MachineConfig)
		if strings.HasPrefix(other.Name, api.RenderedPrefix) {
			continue
		}
		for _, i := range api.ConfigConflicts(mc, other) {
			errs = append(errs, api.Invalid(api.Root("spec").Child("config", "storage", "files").Index(i).Child("path"), mc.Spec.Config.Storage.Files[i].Path,
				fmt.Sprintf("config %s, of the same priority %q, writes this file differently: which wins would depend on the names; give one a higher number",
					other.Name, api.ConfigPriority(mc.Name))))
		}
	}
	if len(errs) > 0 {
		return api.NewInvalid("MachineConfig", mc.Name, errs)
	}
	return nil
}

// podNodeNameAdmission is the first half of ADM-1: only users allowed to
// create pods/binding may place a pod on a node by naming it in
// spec.nodeName, which skips the scheduler and with it taints and node
// selectors. A workload's pod template is held to the same rule, else a
// Deployment would place its pods where its author may not.
type podNodeNameAdmission struct{}

func (podNodeNameAdmission) KeepsValid() {}

func (podNodeNameAdmission) Applies(op string, _ *auth.Identity, r *api.Resource) bool {
	switch r {
	case podsResource:
		// An update cannot change spec.nodeName (validation), a binding
		// is authorized as pods/binding already.
		return op == admission.OpCreate
	case replicaSetsResource, deploymentsResource, daemonSetsResource:
		return op == admission.OpCreate || op == admission.OpUpdate
	}
	return false
}

func (podNodeNameAdmission) Admit(_ context.Context, op string, id *auth.Identity, obj, old api.Object) error {
	if op != admission.OpCreate && op != admission.OpUpdate {
		return nil
	}
	var node, oldNode, field string
	switch o := obj.(type) {
	case *api.Pod:
		if op != admission.OpCreate {
			return nil
		}
		node, field = o.Spec.NodeName, "spec.nodeName"
	case *api.ReplicaSet:
		node, field = o.Spec.Template.Spec.NodeName, "spec.template.spec.nodeName"
		if o, ok := old.(*api.ReplicaSet); ok {
			oldNode = o.Spec.Template.Spec.NodeName
		}
	case *api.Deployment:
		node, field = o.Spec.Template.Spec.NodeName, "spec.template.spec.nodeName"
		if o, ok := old.(*api.Deployment); ok {
			oldNode = o.Spec.Template.Spec.NodeName
		}
	case *api.DaemonSet:
		node, field = o.Spec.Template.Spec.NodeName, "spec.template.spec.nodeName"
		if o, ok := old.(*api.DaemonSet); ok {
			oldNode = o.Spec.Template.Spec.NodeName
		}
	default:
		return nil
	}
	// An update that keeps the node an administrator set (a developer
	// scaling that Deployment) places nothing new.
	if node == "" || node == oldNode {
		return nil
	}
	m := obj.GetObjectMeta()
	req := auth.Request{Verb: auth.VerbCreate, Resource: "pods", Subresource: auth.SubresourceBinding, Namespace: m.Namespace, Name: m.Name}
	if auth.Can(id, req, nil) {
		return nil
	}
	return api.NewForbidden(fmt.Sprintf("%s %q is forbidden: %s may only be set by users with the pods/binding permission (user %q in namespace %q)",
		api.ResourceOf(obj).Plural, m.Name, field, userName(id), m.Namespace))
}

// nodeRestrictionAdmission limits what a node's own identity may do to its
// Node object. It registers itself with any labels and taints and keeps
// its status up to date, but the scheduling controls on the object are the
// administrator's: a node that could drop its taints, clear unschedulable
// or give itself a label pods select on would pull in pods meant for
// other nodes.
type nodeRestrictionAdmission struct{}

func (nodeRestrictionAdmission) KeepsValid() {}

func (nodeRestrictionAdmission) Applies(op string, id *auth.Identity, r *api.Resource) bool {
	return r == nodesResource && isNode(id) && (op == admission.OpUpdate || op == admission.OpDelete)
}

func (nodeRestrictionAdmission) Admit(_ context.Context, op string, id *auth.Identity, obj, old api.Object) error {
	if !isNode(id) {
		return nil
	}
	switch op {
	case admission.OpDelete:
		n, ok := old.(*api.Node)
		if !ok {
			return nil
		}
		return nodeForbidden(n.Name, fmt.Sprintf("node %q may not delete its Node object", id.NodeName),
			"a node's removal is an administrator's decision")
	case admission.OpUpdate:
		n, ok := obj.(*api.Node)
		o, okOld := old.(*api.Node)
		if !ok || !okOld {
			return nil
		}
		if !taintsEqual(n.Spec.Taints, o.Spec.Taints) {
			return nodeForbidden(n.Name, fmt.Sprintf("node %q may not change spec.taints", id.NodeName), nodeRestrictionRule)
		}
		if n.Spec.Unschedulable != o.Spec.Unschedulable && !updateCordon(n, o) {
			return nodeForbidden(n.Name, fmt.Sprintf("node %q may not change spec.unschedulable", id.NodeName), nodeRestrictionRule)
		}
		// The mark goes on and off only with the cordon it marks: a mark
		// added alone to an administrator's cordon would let the node
		// lift that cordon next.
		_, marked := n.Annotations[api.AnnotationUpdateCordoned]
		_, wasMarked := o.Annotations[api.AnnotationUpdateCordoned]
		if marked != wasMarked && n.Spec.Unschedulable == o.Spec.Unschedulable {
			return nodeForbidden(n.Name, fmt.Sprintf("node %q may not change annotation %s without its cordon", id.NodeName, api.AnnotationUpdateCordoned), nodeRestrictionRule)
		}
		if n.Annotations[api.AnnotationDesiredConfig] != o.Annotations[api.AnnotationDesiredConfig] {
			return nodeForbidden(n.Name, fmt.Sprintf("node %q may not change annotation %s", id.NodeName, api.AnnotationDesiredConfig),
				"the machine config pool sets the configuration a node should run")
		}
		if n.Annotations[api.AnnotationAgentBinary] != o.Annotations[api.AnnotationAgentBinary] {
			return nodeForbidden(n.Name, fmt.Sprintf("node %q may not change annotation %s", id.NodeName, api.AnnotationAgentBinary),
				"the cluster version controller sets the binary a node's agent should run")
		}
		if key, changed := changedLabel(n.Labels, o.Labels); changed {
			return nodeForbidden(n.Name, fmt.Sprintf("node %q may not change label %q", id.NodeName, key), nodeRestrictionRule)
		}
	}
	return nil
}

// updateCordon reports whether a node's change of spec.unschedulable is
// its agent's own cordon for a config update (SPEC UPD-8): cordoning
// while the pool wants a config it does not run yet, marked with
// AnnotationUpdateCordoned; or lifting a cordon so marked, with the mark.
// A cordon an administrator set is not the agent's to lift.
func updateCordon(n, old *api.Node) bool {
	_, marked := n.Annotations[api.AnnotationUpdateCordoned]
	_, wasMarked := old.Annotations[api.AnnotationUpdateCordoned]
	if n.Spec.Unschedulable {
		desired := old.Annotations[api.AnnotationDesiredConfig]
		return marked && !wasMarked && desired != "" && desired != old.Annotations[api.AnnotationCurrentConfig]
	}
	return wasMarked && !marked
}

// nodeRestrictionRule is what a refusal tells the node's operator.
const nodeRestrictionRule = "after registering, a node may change its status and only the kubelet's own labels " +
	"(kubernetes.io/hostname, kubernetes.io/os, kubernetes.io/arch, node.kubernetes.io/instance-type, " +
	"topology.kubernetes.io/region, topology.kubernetes.io/zone, beta.kubernetes.io/*, failure-domain.beta.kubernetes.io/*); " +
	"taints, unschedulable and other labels are set by an administrator"

func nodeForbidden(name, what, rule string) error {
	return api.NewForbidden(fmt.Sprintf("nodes %q is forbidden: NodeRestriction: %s: %s", name, what, rule))
}

// isNode reports whether id is a node's own identity.
func isNode(id *auth.Identity) bool {
	return id != nil && id.Role == api.RoleNode && id.NodeName != ""
}

func userName(id *auth.Identity) string {
	if id == nil {
		return "system:anonymous"
	}
	return id.Name
}

// changedLabel returns a label that was added, removed or changed and
// that a node may not touch.
func changedLabel(now, before map[string]string) (string, bool) {
	for k, v := range now {
		if old, ok := before[k]; (!ok || old != v) && !nodeMayLabel(k) {
			return k, true
		}
	}
	for k := range before {
		if _, ok := now[k]; !ok && !nodeMayLabel(k) {
			return k, true
		}
	}
	return "", false
}

// nodeMayLabel reports whether a node may set label key on itself: the
// labels a kubelet derives from its host and cloud.
func nodeMayLabel(key string) bool {
	switch key {
	case "kubernetes.io/hostname", "kubernetes.io/os", "kubernetes.io/arch",
		"node.kubernetes.io/instance-type",
		"topology.kubernetes.io/region", "topology.kubernetes.io/zone":
		return true
	}
	return strings.HasPrefix(key, "beta.kubernetes.io/") || strings.HasPrefix(key, "failure-domain.beta.kubernetes.io/")
}

// taintsEqual reports whether two taint lists are the same, in order.
func taintsEqual(a, b []api.Taint) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := &a[i], &b[i]
		if x.Key != y.Key || x.Value != y.Value || x.Effect != y.Effect || (x.TimeAdded == nil) != (y.TimeAdded == nil) {
			return false
		}
		if x.TimeAdded != nil && !x.TimeAdded.Equal(y.TimeAdded.Time) {
			return false
		}
	}
	return true
}

// schedulerPolicyAdmission refuses a SchedulerPolicy whose document does
// not parse as a policy, naming every problem under spec.policy: a policy
// the schedulers cannot read must never be the one in force.
type schedulerPolicyAdmission struct{}

func (schedulerPolicyAdmission) KeepsValid() {}

func (schedulerPolicyAdmission) Applies(op string, _ *auth.Identity, r *api.Resource) bool {
	return r == schedulerPoliciesResource && (op == admission.OpCreate || op == admission.OpUpdate)
}

func (schedulerPolicyAdmission) Admit(_ context.Context, _ string, _ *auth.Identity, obj, _ api.Object) error {
	sp, ok := obj.(*api.SchedulerPolicy)
	if !ok || sp.Spec.Policy == "" {
		return nil // validation requires it
	}
	_, _, err := policy.Parse([]byte(sp.Spec.Policy))
	if err == nil {
		return nil
	}
	base := api.Root("spec").Child("policy")
	var errs api.ErrorList
	if ie, ok := errors.AsType[*policy.InvalidError](err); ok {
		for _, fe := range ie.Errs {
			c := *fe
			c.Field = base.String()
			if fe.Field != "" {
				c.Field += "." + fe.Field
			}
			errs = append(errs, &c)
		}
	} else {
		errs = append(errs, api.Invalid(base, "(the document)", err.Error()))
	}
	return api.NewInvalid("SchedulerPolicy", sp.Name, errs)
}

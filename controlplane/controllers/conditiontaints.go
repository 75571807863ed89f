package controllers

import (
	"slices"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// conditionTaint is a taint the node lifecycle controller keeps in step
// with a node's conditions (SPEC TNT-5, TNT-6, TNT-7), as Kubernetes'
// TaintNodesByCondition and taint-based eviction do.
type conditionTaint struct {
	key    string
	effect string
	// on reports whether n should carry the taint.
	on func(n *api.Node) bool
}

func conditionIs(typ, status string) func(*api.Node) bool {
	return func(n *api.Node) bool {
		for _, c := range n.Status.Conditions {
			if c.Type == typ {
				return c.Status == status
			}
		}
		return false
	}
}

// conditionTaints are every taint the controller owns. A node whose Ready
// condition is False is not ready, Unknown unreachable: NoExecute evicts
// (after the pods' tolerationSeconds), NoSchedule keeps new pods off.
var conditionTaints = []conditionTaint{
	{api.TaintNodeNotReady, api.TaintEffectNoExecute, conditionIs(api.NodeReady, api.ConditionFalse)},
	{api.TaintNodeUnreachable, api.TaintEffectNoExecute, conditionIs(api.NodeReady, api.ConditionUnknown)},
	{api.TaintNodeNotReady, api.TaintEffectNoSchedule, conditionIs(api.NodeReady, api.ConditionFalse)},
	{api.TaintNodeUnreachable, api.TaintEffectNoSchedule, conditionIs(api.NodeReady, api.ConditionUnknown)},
	{api.TaintNodeMemoryPressure, api.TaintEffectNoSchedule, conditionIs(api.NodeMemoryPressure, api.ConditionTrue)},
	{api.TaintNodeDiskPressure, api.TaintEffectNoSchedule, conditionIs(api.NodeDiskPressure, api.ConditionTrue)},
	{api.TaintNodePIDPressure, api.TaintEffectNoSchedule, conditionIs(api.NodePIDPressure, api.ConditionTrue)},
	{api.TaintNodeNetworkUnavailable, api.TaintEffectNoSchedule, conditionIs(api.NodeNetworkUnavailable, api.ConditionTrue)},
	{api.TaintNodeUnschedulable, api.TaintEffectNoSchedule, func(n *api.Node) bool { return n.Spec.Unschedulable }},
}

// owner returns the condition taint t is, or nil when the controller
// does not own t.
func owner(t api.Taint) *conditionTaint {
	for i := range conditionTaints {
		if c := &conditionTaints[i]; c.key == t.Key && c.effect == t.Effect {
			return c
		}
	}
	return nil
}

func hasTaint(ts []api.Taint, key, effect string) bool {
	return slices.ContainsFunc(ts, func(t api.Taint) bool { return t.Key == key && t.Effect == effect })
}

// inStep reports whether n carries exactly the condition taints its
// conditions call for.
func inStep(n *api.Node) bool {
	for _, t := range n.Spec.Taints {
		if c := owner(t); c != nil && !c.on(n) {
			return false
		}
	}
	for _, c := range conditionTaints {
		if c.on(n) && !hasTaint(n.Spec.Taints, c.key, c.effect) {
			return false
		}
	}
	return true
}

// wantTaints returns n's taints with the condition taints brought in step
// with its conditions: a taint that should be there and is keeps its
// timeAdded, a new one gets now, one whose condition cleared goes; taints
// the controller does not own are left as they are. changed is false when
// nothing differs.
func wantTaints(n *api.Node, now api.Time) (taints []api.Taint, changed bool) {
	// Every node is looked at every few seconds and nearly all are in
	// step: find that out without building anything.
	if inStep(n) {
		return n.Spec.Taints, false
	}
	out := make([]api.Taint, 0, len(n.Spec.Taints)+2)
	for _, t := range n.Spec.Taints {
		if c := owner(t); c != nil && !c.on(n) {
			continue
		}
		out = append(out, t)
	}
	for _, c := range conditionTaints {
		if c.on(n) && !hasTaint(out, c.key, c.effect) {
			ts := now
			out = append(out, api.Taint{Key: c.key, Effect: c.effect, TimeAdded: &ts})
		}
	}
	return out, true
}

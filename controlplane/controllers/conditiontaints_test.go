package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/controller"
)

func taintsOf(ts []api.Taint) string {
	var out []string
	for _, t := range ts {
		s := t.Key + ":" + t.Effect
		if t.TimeAdded != nil {
			s += "@" + t.TimeAdded.UTC().Format("15:04:05")
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// SPEC TNT-5, TNT-6, TNT-7: the condition taints follow the conditions;
// a taint that stays keeps its timeAdded (tolerationSeconds count from
// it), and taints nobody derived from a condition are left alone.
func TestWantTaints(t *testing.T) {
	t0 := api.Time{Time: time.Date(2026, 11, 26, 1, 0, 0, 0, time.UTC)}
	now := api.Time{Time: t0.Add(time.Minute)}
	cond := func(typ, status string) api.NodeCondition { return api.NodeCondition{Type: typ, Status: status} }
	user := api.Taint{Key: "dedicated", Value: "db", Effect: api.TaintEffectNoSchedule}
	old := func(key, effect string) api.Taint { return api.Taint{Key: key, Effect: effect, TimeAdded: &t0} }
	tests := []struct {
		name          string
		conds         []api.NodeCondition
		unschedulable bool
		have          []api.Taint
		want          string
		changed       bool
	}{
		{"ready", []api.NodeCondition{cond(api.NodeReady, api.ConditionTrue)}, false, nil, "", false},
		{"not ready", []api.NodeCondition{cond(api.NodeReady, api.ConditionFalse)}, false, nil,
			"node.kubernetes.io/not-ready:NoExecute@01:01:00 node.kubernetes.io/not-ready:NoSchedule@01:01:00", true},
		{"unreachable, one taint there already", []api.NodeCondition{cond(api.NodeReady, api.ConditionUnknown)}, false,
			[]api.Taint{old(api.TaintNodeUnreachable, api.TaintEffectNoExecute)},
			"node.kubernetes.io/unreachable:NoExecute@01:00:00 node.kubernetes.io/unreachable:NoSchedule@01:01:00", true},
		{"unreachable, both there", []api.NodeCondition{cond(api.NodeReady, api.ConditionUnknown)}, false,
			[]api.Taint{old(api.TaintNodeUnreachable, api.TaintEffectNoExecute), old(api.TaintNodeUnreachable, api.TaintEffectNoSchedule)},
			"node.kubernetes.io/unreachable:NoExecute@01:00:00 node.kubernetes.io/unreachable:NoSchedule@01:00:00", false},
		{"recovered: condition taints go, the user's stays", []api.NodeCondition{cond(api.NodeReady, api.ConditionTrue)}, false,
			[]api.Taint{user, old(api.TaintNodeUnreachable, api.TaintEffectNoExecute), old(api.TaintNodeNotReady, api.TaintEffectNoSchedule)},
			"dedicated:NoSchedule", true},
		{"pressure", []api.NodeCondition{cond(api.NodeReady, api.ConditionTrue), cond(api.NodeMemoryPressure, api.ConditionTrue),
			cond(api.NodeDiskPressure, api.ConditionTrue), cond(api.NodePIDPressure, api.ConditionFalse), cond(api.NodeNetworkUnavailable, api.ConditionTrue)}, false, nil,
			"node.kubernetes.io/disk-pressure:NoSchedule@01:01:00 node.kubernetes.io/memory-pressure:NoSchedule@01:01:00 node.kubernetes.io/network-unavailable:NoSchedule@01:01:00", true},
		{"cordoned", []api.NodeCondition{cond(api.NodeReady, api.ConditionTrue)}, true, nil, "node.kubernetes.io/unschedulable:NoSchedule@01:01:00", true},
		{"uncordoned", []api.NodeCondition{cond(api.NodeReady, api.ConditionTrue)}, false, []api.Taint{old(api.TaintNodeUnschedulable, api.TaintEffectNoSchedule)}, "", true},
		{"no conditions (a node made by hand)", nil, false, []api.Taint{user}, "dedicated:NoSchedule", false},
		{"a PreferNoSchedule taint of the same key is not ours", []api.NodeCondition{cond(api.NodeReady, api.ConditionTrue)}, false,
			[]api.Taint{{Key: api.TaintNodeNotReady, Effect: api.TaintEffectPreferNoSchedule}}, "node.kubernetes.io/not-ready:PreferNoSchedule", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := &api.Node{Spec: api.NodeSpec{Taints: tt.have, Unschedulable: tt.unschedulable}, Status: api.NodeStatus{Conditions: tt.conds}}
			got, changed := wantTaints(n, now)
			if taintsOf(got) != tt.want || changed != tt.changed {
				t.Errorf("taints %q changed=%v, want %q changed=%v", taintsOf(got), changed, tt.want, tt.changed)
			}
		})
	}
}

// The sweep looks at every node every few seconds; a node whose taints
// are in step costs no allocation.
func TestWantTaintsInStepAllocatesNothing(t *testing.T) {
	ts := api.Time{Time: time.Now()}
	n := &api.Node{
		Spec: api.NodeSpec{Taints: []api.Taint{{Key: "dedicated", Value: "db", Effect: api.TaintEffectNoSchedule},
			{Key: api.TaintNodeMemoryPressure, Effect: api.TaintEffectNoSchedule, TimeAdded: &ts}}},
		Status: api.NodeStatus{Conditions: []api.NodeCondition{{Type: api.NodeReady, Status: api.ConditionTrue},
			{Type: api.NodeMemoryPressure, Status: api.ConditionTrue}}},
	}
	if allocs := testing.AllocsPerRun(100, func() {
		if _, changed := wantTaints(n, ts); changed {
			t.Fatal("a node in step changed")
		}
	}); allocs != 0 {
		t.Errorf("%v allocations for a node in step, want 0", allocs)
	}
}

// The controller writes the condition taints as a node's conditions
// change, and takes them away when the condition clears.
func TestNodeLifecycleConditionTaints(t *testing.T) {
	e := newEnv(t)
	n := newNode("n1", nil)
	n.Spec.Taints = []api.Taint{{Key: "dedicated", Value: "db", Effect: api.TaintEffectNoSchedule}}
	e.create(n)
	// A ready node beside it: with every node unhealthy the control
	// plane would take itself for cut off and evict nothing (TNT-8).
	e.agentNode("healthy")
	e.startLifecycle(NodeLifecycle{})
	waitTaints := func(want string) {
		t.Helper()
		e.waitFor("taints "+want, func() (bool, string) {
			var got []string
			for _, tt := range e.node("n1").Spec.Taints {
				got = append(got, tt.Key+":"+tt.Effect)
			}
			slices.Sort(got)
			return strings.Join(got, " ") == want, fmt.Sprint(got)
		})
	}
	setReady := func(status string) {
		e.update(nodesRes, "", "n1", true, func(o api.Object) {
			o.(*api.Node).Status.Conditions = []api.NodeCondition{{Type: api.NodeReady, Status: status}}
		})
	}
	setReady(api.ConditionFalse)
	waitTaints("dedicated:NoSchedule node.kubernetes.io/not-ready:NoExecute node.kubernetes.io/not-ready:NoSchedule")
	setReady(api.ConditionUnknown)
	waitTaints("dedicated:NoSchedule node.kubernetes.io/unreachable:NoExecute node.kubernetes.io/unreachable:NoSchedule")
	for _, tt := range e.node("n1").Spec.Taints {
		if strings.HasPrefix(tt.Key, "node.kubernetes.io/") && tt.TimeAdded == nil {
			t.Errorf("taint %s:%s has no timeAdded", tt.Key, tt.Effect)
		}
	}
	setReady(api.ConditionTrue)
	waitTaints("dedicated:NoSchedule")
}

// refusingNodeUpdates is a client whose updates of a Node's spec fail, as
// a refusing admission step would make them.
type refusingNodeUpdates struct{ controller.Client }

func (r refusingNodeUpdates) Update(ctx context.Context, obj api.Object) (api.Object, error) {
	if _, ok := obj.(*api.Node); ok {
		return nil, api.NewForbidden("nodes are not to be changed here")
	}
	return r.Client.Update(ctx, obj)
}

// A condition taint that cannot be written does not keep a silent node
// from being marked Unknown.
func TestNodeLifecycleMarksDespiteTaintFailure(t *testing.T) {
	e := newEnv(t)
	e.agentNode("n1")
	// Cordoned: the controller wants the unschedulable taint at once.
	e.update(nodesRes, "", "n1", false, func(o api.Object) { o.(*api.Node).Spec.Unschedulable = true })
	e.startLifecycle(NodeLifecycle{}, refusingNodeUpdates{e.f})
	e.settle("n1")
	e.clock.Advance(time.Minute)
	e.waitUnknown("n1", msgHeartbeatsStopped)
}

// Zone state changes are Events (TNT-8): a zone going down, every zone
// going down (master disruption) and coming back; the report follows.
func TestZoneStateEvents(t *testing.T) {
	e := newEnv(t)
	zone := func(z string) map[string]string { return map[string]string{"topology.kubernetes.io/zone": z} }
	e.create(newNode("z1", zone("z")))
	e.create(newNode("z2", zone("z")))
	e.create(newNode("y1", zone("y")))
	rep := NewZoneReport()
	e.startLifecycle(NodeLifecycle{Zones: rep})
	setReady := func(name, status string) {
		e.update(nodesRes, "", name, true, func(o api.Object) {
			o.(*api.Node).Status.Conditions = []api.NodeCondition{{Type: api.NodeReady, Status: status}}
		})
	}
	waitEvent := func(obj, reason, typ, msg string) {
		t.Helper()
		e.waitFor(reason+" event of "+obj, func() (bool, string) {
			evs := e.events(obj, reason)
			for _, ev := range evs {
				if ev.InvolvedObject.Kind == "Zone" && ev.Type == typ && strings.Contains(ev.Message, msg) {
					return true, ""
				}
			}
			return false, fmt.Sprint(len(evs), " events")
		})
	}
	setReady("z1", api.ConditionFalse)
	setReady("z2", api.ConditionFalse)
	waitEvent("z", reasonZoneStateChanged, api.EventTypeWarning, "zone z is now FullDisruption (was Normal): 0 of 2 nodes ready")
	if l, ok := rep.Zones(); !ok || l.MasterDisruption || len(l.Items) != 2 || l.Items[1].State != api.ZoneFullDisruption {
		t.Fatalf("report %+v, want zone z FullDisruption beside y", l)
	}
	setReady("y1", api.ConditionFalse)
	waitEvent("(none)", reasonMasterDisruption, api.EventTypeWarning, "every zone is in FullDisruption")
	setReady("y1", api.ConditionTrue)
	waitEvent("(none)", reasonMasterDisruptionEnded, api.EventTypeNormal, "eviction resumes")
	setReady("z1", api.ConditionTrue)
	waitEvent("z", reasonZoneStateChanged, api.EventTypeNormal, "zone z is now Normal (was FullDisruption)")
}

package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/prometheus/client_golang/prometheus"
)

var machinesRes = api.ResourceForKind("Machine")

func (e *env) machine(name string) (*api.Machine, bool) {
	obj, err := e.f.Get(machinesRes, "", name)
	if err != nil {
		return nil, false
	}
	return obj.(*api.Machine), true
}

func machineCondition(m *api.Machine, typ string) string {
	for _, c := range m.Status.Conditions {
		if c.Type == typ {
			return c.Status + " " + c.Reason + ": " + c.Message
		}
	}
	return "(none)"
}

// waitMachine waits until machine name satisfies cond.
func (e *env) waitMachine(name, what string, cond func(*api.Machine) bool) *api.Machine {
	e.t.Helper()
	var m *api.Machine
	e.waitFor("machine "+name+": "+what, func() (bool, string) {
		var ok bool
		if m, ok = e.machine(name); !ok {
			return false, "no machine"
		}
		return cond(m), fmt.Sprintf("phase %s, conditions %+v, finalizers %v", m.Status.Phase, m.Status.Conditions, m.Finalizers)
	})
	return m
}

func boundPod(name, node string, owner *api.OwnerReference) *api.Pod {
	p := &api.Pod{ObjectMeta: api.ObjectMeta{Name: name, Namespace: "default"},
		Spec: api.PodSpec{NodeName: node, Containers: []api.Container{{Name: "c", Image: "img"}}}}
	if owner != nil {
		p.OwnerReferences = []api.OwnerReference{*owner}
	}
	return p
}

// A node an agent registered gets its Machine (MCH-1): the finalizer,
// the provider ID, nodeRef and phase Running; a node made by hand (no
// agent reports it) gets none; a machine made by hand for a host that has
// not joined is Provisioned until its node appears.
func TestMachinePerAgentNode(t *testing.T) {
	e := newEnv(t)
	e.agentNode("edge-1")
	e.create(&api.Node{ObjectMeta: api.ObjectMeta{Name: "by-hand"}})
	e.create(&api.Machine{ObjectMeta: api.ObjectMeta{Name: "edge-2"}, Spec: api.MachineSpec{ProviderID: "outpost://edge-2"}})
	e.create(&api.Machine{ObjectMeta: api.ObjectMeta{Name: "rack-7-slot-3"}, Spec: api.MachineSpec{ProviderID: "outpost://edge-3"}})
	e.startLifecycle(NodeLifecycle{})
	m := e.waitMachine("edge-1", "Running with its node", func(m *api.Machine) bool {
		return m.Status.Phase == api.MachineRunning && m.Status.NodeRef != nil && m.Status.NodeRef.Name == "edge-1"
	})
	if m.Spec.ProviderID != "outpost://edge-1" || len(m.Finalizers) != 1 || m.Finalizers[0] != api.MachineFinalizer || m.Labels[LabelMachineRole] != "worker" {
		t.Errorf("machine %+v", m)
	}
	e.waitMachine("edge-2", "Provisioned with the finalizer", func(m *api.Machine) bool {
		return m.Status.Phase == api.MachineProvisioned && m.Status.NodeRef == nil && len(m.Finalizers) == 1
	})
	e.agentNode("edge-2")
	e.waitMachine("edge-2", "Running once its node joined", func(m *api.Machine) bool {
		return m.Status.Phase == api.MachineRunning && m.Status.NodeRef != nil && m.Status.NodeRef.Name == "edge-2"
	})
	// A machine made by hand under another name backs the node its
	// providerID names: no second machine for that node.
	e.agentNode("edge-3")
	e.waitMachine("rack-7-slot-3", "Running with node edge-3", func(m *api.Machine) bool {
		return m.Status.Phase == api.MachineRunning && m.Status.NodeRef != nil && m.Status.NodeRef.Name == "edge-3"
	})
	if _, ok := e.machine("edge-3"); ok {
		t.Error("a second machine was made for a node a hand-made machine backs")
	}
	e.waitSynced("machine", "by-hand", 0)
	if _, ok := e.machine("by-hand"); ok {
		t.Error("a node no agent reports got a machine")
	}
}

// The deletion phase in the seed's order (MCH-2..4): a preDrain hook
// holds the drain (Drainable=False); without it the node is cordoned and
// drained through the eviction API, a refusal is Drained=False and is
// retried; daemon set pods stay; a preTerminate hook holds the release
// (Terminable=False); a failing provider is Released=False and retried;
// then the Node object goes, and the machine with its finalizer.
func TestMachineDeletionPhase(t *testing.T) {
	e := newEnv(t)
	for _, name := range []string{"edge-1", "edge-2"} {
		e.agentNode(name)
		// Room for the daemon set's pod.
		e.update(nodesRes, "", name, true, func(o api.Object) {
			n := o.(*api.Node)
			n.Status.Capacity = newNode(name, nil).Status.Capacity
			n.Status.Allocatable = n.Status.Capacity
		})
	}
	yes := true
	rs := e.create(newReplicaSet("web", 1, map[string]string{"app": "web"})).(*api.ReplicaSet)
	web := boundPod("web-1", "edge-1", &api.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: rs.UID, Controller: &yes})
	web.Labels = map[string]string{"app": "web"}
	e.create(web)
	e.create(boundPod("lone", "edge-1", nil))
	e.create(boundPod("elsewhere", "edge-2", nil))
	e.create(newDaemonSet("agent", nil))
	e.create(&api.Token{ObjectMeta: api.ObjectMeta{Name: "edge1tok"}, Spec: api.TokenSpec{Role: api.RoleNode, NodeName: "edge-1", SecretHash: strings.Repeat("a", 64)}})
	e.create(&api.Token{ObjectMeta: api.ObjectMeta{Name: "edge2tok"}, Spec: api.TokenSpec{Role: api.RoleNode, NodeName: "edge-2", SecretHash: strings.Repeat("b", 64)}})
	// The budget refuses web-1's eviction until the test has seen the
	// refusal in the machine's conditions.
	var refusing atomic.Bool
	refusing.Store(true)
	e.f.EvictHook = func(ns, name string) error {
		if name == "web-1" && refusing.Load() {
			return api.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", nil)
		}
		return nil
	}
	var releaseFails atomic.Int32
	releaseFails.Store(1)
	e.startConfig(Config{Client: e.f, MachineProvider: ProviderFunc(func(_ context.Context, m *api.Machine) (string, error) {
		if releaseFails.Add(-1) >= 0 {
			return "", errors.New("ipmitool: connection refused")
		}
		return "powered off " + m.Name, nil
	})})
	e.waitMachine("edge-1", "Running", func(m *api.Machine) bool { return m.Status.Phase == api.MachineRunning })
	e.waitFor("the daemon set's pod on edge-1", func() (bool, string) {
		n := len(e.podsOnNode("edge-1"))
		return n == 3, fmt.Sprint(n, " pods on edge-1")
	})
	e.update(machinesRes, "", "edge-1", false, func(o api.Object) {
		o.(*api.Machine).Spec.LifecycleHooks = api.LifecycleHooks{
			PreDrain:     []api.LifecycleHook{{Name: "MigrateImportantApp", Owner: "my-app-migration-controller"}},
			PreTerminate: []api.LifecycleHook{{Name: "BackupFileSystem", Owner: "my-backup-controller"}},
		}
	})
	e.delete(machinesRes, "", "edge-1")

	e.waitMachine("edge-1", "Deleting, held by its preDrain hook", func(m *api.Machine) bool {
		return m.Status.Phase == api.MachineDeleting && strings.HasPrefix(machineCondition(m, api.MachineDrainable), "False HookPresent: waiting for preDrain hooks: MigrateImportantApp (owner my-app-migration-controller)")
	})
	if n := e.get(nodesRes, "", "edge-1").(*api.Node); n.Spec.Unschedulable {
		t.Fatal("the node was cordoned while a preDrain hook held the drain")
	}
	if len(e.podsOnNode("edge-1")) != 3 {
		t.Fatal("pods were evicted while a preDrain hook held the drain")
	}
	e.update(machinesRes, "", "edge-1", false, func(o api.Object) { o.(*api.Machine).Spec.LifecycleHooks.PreDrain = nil })
	// "1 of 2" on the drain's first pass (web-1 refused, lone evicted),
	// "1 of 1" on the passes after: under load the test may look only
	// after a later pass has replaced the first one's message.
	e.waitMachine("edge-1", "the drain refused by a budget", func(m *api.Machine) bool {
		c := machineCondition(m, api.MachineDrained)
		return strings.HasPrefix(c, "False DrainError: 1 of ") && strings.Contains(c, " pods not evicted yet: default/web-1: Cannot evict pod")
	})
	refusing.Store(false)
	m := e.waitMachine("edge-1", "drained, held by its preTerminate hook", func(m *api.Machine) bool {
		return strings.HasPrefix(machineCondition(m, api.MachineTerminable), "False HookPresent")
	})
	if machineCondition(m, api.MachineDrainable)[:4] != "True" || machineCondition(m, api.MachineDrained)[:4] != "True" {
		t.Errorf("conditions %+v, want Drainable and Drained True", m.Status.Conditions)
	}
	if n := e.get(nodesRes, "", "edge-1").(*api.Node); !n.Spec.Unschedulable {
		t.Error("the drained node is not cordoned")
	}
	if got := e.podsOnNode("edge-1"); len(got) != 1 || !isDaemonPod(got[0]) {
		t.Errorf("pods left on the drained node %v, want the daemon set's only", names(got))
	}
	if _, err := e.f.Get(podsRes, "default", "elsewhere"); err != nil {
		t.Errorf("a pod of another node: %v", err)
	}
	if _, err := e.f.Get(nodesRes, "", "edge-1"); err != nil {
		t.Fatal("the node went while a preTerminate hook held the release")
	}
	e.update(machinesRes, "", "edge-1", false, func(o api.Object) { o.(*api.Machine).Spec.LifecycleHooks.PreTerminate = nil })
	// The node is Ready: the release waits for its agent to say it
	// stopped outpost's roles (MCH-1's manual provider), as it does here.
	e.waitMachine("edge-1", "waiting for the agent to stop the roles", func(m *api.Machine) bool {
		return strings.HasPrefix(machineCondition(m, api.MachineProviderReleased), "False WaitingForAgent")
	})
	if releaseFails.Load() != 1 {
		t.Fatal("the provider was called before the agent stopped outpost's roles")
	}
	e.update(nodesRes, "", "edge-1", false, func(o api.Object) {
		o.(*api.Node).Annotations = map[string]string{api.AnnotationRolesStopped: "2026-11-26T08:00:00Z"}
	})
	e.waitFor("the machine gone", func() (bool, string) {
		m, ok := e.machine("edge-1")
		if !ok {
			return true, ""
		}
		return false, fmt.Sprintf("conditions %+v", m.Status.Conditions)
	})
	if _, err := e.f.Get(nodesRes, "", "edge-1"); !api.IsNotFound(err) {
		t.Errorf("the node of the deleted machine: %v, want it gone", err)
	}
	// Its credential went first, so that its agent cannot register it
	// again; the other node's stays.
	if _, err := e.f.Get(api.ResourceForKind("Token"), "", "edge1tok"); !api.IsNotFound(err) {
		t.Errorf("the deleted machine's node token: %v, want it gone", err)
	}
	if _, err := e.f.Get(api.ResourceForKind("Token"), "", "edge2tok"); err != nil {
		t.Errorf("another node's token: %v", err)
	}
	if evs := e.events("edge-1", "Released"); len(evs) != 1 || evs[0].Message != "the agent stopped outpost's roles on the host at 2026-11-26T08:00:00Z; powered off edge-1" {
		t.Errorf("Released events %v", evs)
	}
	if releaseFails.Load() >= 0 {
		t.Error("the failing provider was never called")
	}
	if _, ok := e.machine("edge-2"); !ok {
		t.Error("the other machine went too")
	}
}

func (e *env) podsOnNode(node string) []*api.Pod {
	var out []*api.Pod
	for _, o := range e.list(podsRes) {
		if p := o.(*api.Pod); p.Spec.NodeName == node {
			out = append(out, p)
		}
	}
	return out
}

// MachineHealthCheck (CPL-4): machines whose node has been Ready=Unknown
// for the timeout are deleted, unless more of them than maxUnhealthy are
// unhealthy at once; then none is, and the check says why; a machine
// without a node past nodeStartupTimeout is deleted.
func TestMachineHealthCheck(t *testing.T) {
	e := newEnv(t)
	for _, n := range []string{"w1", "w2", "w3"} {
		e.agentNode(n)
	}
	e.create(&api.Machine{ObjectMeta: api.ObjectMeta{Name: "spare", Labels: map[string]string{"pool": "spare"}}})
	reg := prometheus.NewRegistry()
	e.startConfig(Config{Client: e.f, Registerer: reg})
	metric := func(name string) float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "check" && l.GetValue() == "workers" {
						if m.GetGauge() != nil {
							return m.GetGauge().GetValue()
						}
						return m.GetCounter().GetValue()
					}
				}
			}
		}
		return -1
	}
	for _, n := range []string{"w1", "w2", "w3"} {
		e.waitMachine(n, "Running", func(m *api.Machine) bool { return m.Status.Phase == api.MachineRunning })
		// A hook holds each deletion where the test can see it.
		e.update(machinesRes, "", n, false, func(o api.Object) {
			o.(*api.Machine).Spec.LifecycleHooks.PreDrain = []api.LifecycleHook{{Name: "hold", Owner: "test"}}
		})
	}
	one := api.FromInt(1)
	e.create(&api.MachineHealthCheck{ObjectMeta: api.ObjectMeta{Name: "workers"}, Spec: api.MachineHealthCheckSpec{
		Selector:            api.LabelSelector{MatchLabels: map[string]string{LabelMachineRole: "worker"}},
		UnhealthyConditions: []api.UnhealthyCondition{{Type: "Ready", Status: "Unknown", Timeout: "30s"}},
		MaxUnhealthy:        &one, NodeStartupTimeout: "0"}})
	e.create(&api.MachineHealthCheck{ObjectMeta: api.ObjectMeta{Name: "spares"}, Spec: api.MachineHealthCheckSpec{
		Selector: api.LabelSelector{MatchLabels: map[string]string{"pool": "spare"}}, NodeStartupTimeout: "1m"}})
	setReady := func(name, status string) {
		e.update(nodesRes, "", name, true, func(o api.Object) {
			n := o.(*api.Node)
			for i := range n.Status.Conditions {
				if c := &n.Status.Conditions[i]; c.Type == api.NodeReady {
					c.Status, c.LastTransitionTime = status, api.NewTime(e.clock.Now())
				}
			}
		})
	}
	check := func(name string) *api.MachineHealthCheck {
		return e.get(api.ResourceForKind("MachineHealthCheck"), "", name).(*api.MachineHealthCheck)
	}
	deleting := func(name string) bool { m, ok := e.machine(name); return ok && m.DeletionTimestamp != nil }
	// poke makes the checks look again after the clock moved.
	poke := func() {
		for _, n := range []string{"workers", "spares"} {
			e.update(api.ResourceForKind("MachineHealthCheck"), "", n, false, func(o api.Object) {
				o.(*api.MachineHealthCheck).Annotations = map[string]string{"poke": e.clock.Now().String()}
			})
		}
	}

	setReady("w1", api.ConditionUnknown)
	setReady("w2", api.ConditionUnknown)
	e.clock.Advance(20 * time.Second)
	poke()
	// Unhealthy within the timeout: not healthy, not yet remediated (as
	// OpenShift counts them).
	e.waitFor("the checks counting 3 machines, 1 healthy, none yet to remediate", func() (bool, string) {
		h := check("workers")
		return h.Status.ExpectedMachines != nil && *h.Status.ExpectedMachines == 3 && *h.Status.CurrentHealthy == 1, fmt.Sprintf("%+v", h.Status)
	})
	if deleting("w1") || deleting("w2") {
		t.Fatal("a machine was deleted before its condition's timeout")
	}
	e.clock.Advance(15 * time.Second)
	poke()
	e.waitFor("no remediation with 2 unhealthy of maxUnhealthy 1", func() (bool, string) {
		h := check("workers")
		for _, c := range h.Status.Conditions {
			if c.Type == api.RemediationAllowed && c.Status == api.ConditionFalse && c.Reason == "TooManyUnhealthy" &&
				strings.HasPrefix(c.Message, "2 of 3 machines are unhealthy, more than maxUnhealthy 1: none is remediated") {
				return true, ""
			}
		}
		var nodes []string
		for _, n := range []string{"w1", "w2", "w3"} {
			for _, c := range e.node(n).Status.Conditions {
				if c.Type == api.NodeReady {
					nodes = append(nodes, fmt.Sprintf("%s %s since %v", n, c.Status, c.LastTransitionTime))
				}
			}
		}
		poke() // the check looks again; the clock moved without an event
		return false, fmt.Sprintf("healthy %d of %d, conditions %+v; now %v; nodes %v", *h.Status.CurrentHealthy, *h.Status.ExpectedMachines, h.Status.Conditions, e.clock.Now(), nodes)
	})
	e.waitFor("a RemediationRestricted event", func() (bool, string) { return len(e.events("workers", "RemediationRestricted")) > 0, "" })
	if r, u, x := metric("outpost_machinehealthcheck_remediation_restricted"), metric("outpost_machinehealthcheck_unhealthy_machines"),
		metric("outpost_machinehealthcheck_expected_machines"); r != 1 || u != 2 || x != 3 {
		t.Errorf("metrics: restricted %v, unhealthy %v, expected %v; want 1, 2, 3", r, u, x)
	}
	if deleting("w1") || deleting("w2") {
		t.Fatal("a machine was deleted with more unhealthy than maxUnhealthy")
	}
	// One comes back: the other is deleted.
	setReady("w2", api.ConditionTrue)
	e.waitFor("w1 deleted", func() (bool, string) { return deleting("w1"), "" })
	if deleting("w2") || deleting("w3") {
		t.Error("a healthy machine was deleted")
	}
	e.waitFor("the remediation counted", func() (bool, string) {
		return metric("outpost_machinehealthcheck_remediations_total") == 1 && metric("outpost_machinehealthcheck_remediation_restricted") == 0, ""
	})
	e.waitFor("w1's MachineDeleted event", func() (bool, string) {
		evs := e.events("w1", "MachineDeleted")
		return len(evs) == 1 && strings.Contains(evs[0].Message, "node condition Ready=Unknown for more than 30s"), fmt.Sprint(evs)
	})
	// The spare without a node: deleted after nodeStartupTimeout.
	if deleting("spare") {
		t.Fatal("the spare was deleted before its startup timeout")
	}
	e.clock.Advance(time.Minute)
	poke()
	e.waitFor("the spare deleted", func() (bool, string) { return deleting("spare"), "" })
	// w1's deletion is under way (held by its hook): w3 failing too is
	// one more than maxUnhealthy, so w3 is left alone (SPEC CPL-4: a
	// change under way leads to no action).
	setReady("w3", api.ConditionUnknown)
	e.clock.Advance(31 * time.Second)
	poke()
	e.waitFor("no remediation of w3 while w1 is being deleted", func() (bool, string) {
		h := check("workers")
		for _, c := range h.Status.Conditions {
			if c.Reason == "TooManyUnhealthy" && strings.Contains(c.Message, "w1: being deleted") {
				return true, ""
			}
		}
		poke()
		return false, fmt.Sprintf("%+v", h.Status.Conditions)
	})
	if deleting("w3") {
		t.Fatal("w3 was deleted while w1's deletion was under way")
	}
}

// MachineSets (issue 11 item 2): a set claims free machines that match,
// in name order, and says when too few are free; scaling down it deletes
// the annotated member first, then by deletePolicy; a deleted set's
// machines are free for another set.
func TestMachineSet(t *testing.T) {
	e := newEnv(t)
	for _, n := range []string{"n1", "n2", "n3", "n4"} {
		e.agentNode(n)
	}
	e.startLifecycle(NodeLifecycle{})
	for _, n := range []string{"n1", "n2", "n3"} {
		e.waitMachine(n, "Running", func(m *api.Machine) bool { return m.Status.Phase == api.MachineRunning })
		e.update(machinesRes, "", n, false, func(o api.Object) { o.(*api.Machine).Labels["pool"] = "edge" })
	}
	msRes := api.ResourceForKind("MachineSet")
	two := int32(2)
	e.create(&api.MachineSet{ObjectMeta: api.ObjectMeta{Name: "edge"}, Spec: api.MachineSetSpec{Replicas: &two, DeletePolicy: api.DeletePolicyOldest,
		Selector: api.LabelSelector{MatchLabels: map[string]string{"pool": "edge"}}}})
	owner := func(name string) string {
		m, ok := e.machine(name)
		if !ok {
			return "(gone)"
		}
		if ref := api.ControllerRef(&m.ObjectMeta); ref != nil {
			return ref.Name
		}
		return ""
	}
	set := func() *api.MachineSet { return e.get(msRes, "", "edge").(*api.MachineSet) }
	e.waitFor("n1 and n2 claimed", func() (bool, string) {
		return owner("n1") == "edge" && owner("n2") == "edge" && owner("n3") == "" && set().Status.Replicas == 2 && set().Status.ReadyReplicas == 2,
			fmt.Sprintf("owners %s %s %s, status %+v", owner("n1"), owner("n2"), owner("n3"), set().Status)
	})
	if owner("n4") != "" {
		t.Fatal("a machine outside the selector was claimed")
	}
	e.update(msRes, "", "edge", false, func(o api.Object) { four := int32(4); o.(*api.MachineSet).Spec.Replicas = &four })
	e.waitFor("n3 claimed, one short", func() (bool, string) {
		st := set().Status
		return owner("n3") == "edge" && st.Replicas == 3 && st.ErrorMessage == "3 of 4 machines: no other free machine matches the selector; waiting for hosts to join", fmt.Sprintf("%+v", st)
	})
	e.update(machinesRes, "", "n2", false, func(o api.Object) {
		o.(*api.Machine).Annotations = map[string]string{api.AnnotationDeleteMachine: "true"}
	})
	e.update(msRes, "", "edge", false, func(o api.Object) { one := int32(1); o.(*api.MachineSet).Spec.Replicas = &one })
	deleted := func(name string) bool { m, ok := e.machine(name); return !ok || m.DeletionTimestamp != nil }
	e.waitFor("n2 (annotated) and n1 (oldest, then by name) deleted", func() (bool, string) {
		return deleted("n2") && deleted("n1") && set().Status.Replicas == 1, fmt.Sprintf("%+v", set().Status)
	})
	if deleted("n3") {
		t.Fatal("the set deleted more than it had to")
	}
	e.delete(msRes, "", "edge")
	e.create(&api.MachineSet{ObjectMeta: api.ObjectMeta{Name: "other"}, Spec: api.MachineSetSpec{
		Selector: api.LabelSelector{MatchLabels: map[string]string{"pool": "edge"}}}})
	e.waitFor("the deleted set's machine claimed by another", func() (bool, string) { return owner("n3") == "other", owner("n3") })
}

package controllers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/controller"
)

var cpmsRes = api.ResourceForKind("ControlPlaneMachineSet")

// fakeRaft is a raft membership whose Remove may refuse.
type fakeRaft struct {
	mu        sync.Mutex
	members   []RaftMember
	refuse    error
	removed   []string
	transfers []string
}

func (f *fakeRaft) Members(context.Context) ([]RaftMember, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.members), nil
}

func (f *fakeRaft) Remove(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refuse != nil {
		return f.refuse
	}
	f.members = slices.DeleteFunc(f.members, func(m RaftMember) bool { return m.ID == id })
	f.removed = append(f.removed, id)
	return nil
}

// TransferLeadership makes id the leader.
func (f *fakeRaft) TransferLeadership(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.transfers = append(f.transfers, id)
	for i := range f.members {
		f.members[i].Leader = f.members[i].ID == id
	}
	return nil
}

func (f *fakeRaft) set(members ...RaftMember) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.members = members
}

// The quorum guard's table (CPL-1): machines of raft members get the
// hook, others not; a deleted voter's machine waits while too few voters
// would stay, and while raft refuses the removal; then the member goes
// and the hook with it. A deleted non-voter's machine is let go at once.
func TestQuorumGuard(t *testing.T) {
	e := newEnv(t)
	for _, n := range []string{"s1", "s2", "s3", "s4", "worker"} {
		e.create(&api.Machine{ObjectMeta: api.ObjectMeta{Name: n}})
	}
	voter := func(id string) RaftMember { return RaftMember{ID: id, Voter: true, Reachable: true} }
	fr := &fakeRaft{}
	fr.set(voter("s1"), voter("s2"), voter("s3"), RaftMember{ID: "s4", Reachable: true})
	e.startConfig(Config{Client: e.f, Raft: fr})
	hooked := func(name string) bool {
		m, ok := e.machine(name)
		return ok && slices.ContainsFunc(m.Spec.LifecycleHooks.PreDrain, isGuardHook)
	}
	held := func(name string) bool {
		m, ok := e.machine(name)
		return ok && slices.Contains(m.Finalizers, api.MachineFinalizer)
	}
	e.waitFor("the members' machines guarded (and held by the machine controller's finalizer)", func() (bool, string) {
		return hooked("s1") && hooked("s2") && hooked("s3") && hooked("s4") && held("s2") && held("s4"), ""
	})
	if hooked("worker") {
		t.Fatal("a machine of no raft member got the guard's hook")
	}

	// s4, a non-voter: removed from raft, hook gone at once.
	e.delete(machinesRes, "", "s4")
	e.waitFor("s4 let go", func() (bool, string) { return !hooked("s4"), "" })
	// s2, a voter, with 2 voters left: it waits.
	e.delete(machinesRes, "", "s2")
	e.waitFor("s2 waiting for a replacement", func() (bool, string) {
		evs := e.events("s2", "WaitingForReplacement")
		m, _ := e.machine("s2")
		return len(evs) > 0, fmt.Sprintf("%d events; machine %+v", len(evs), m)
	})
	if !hooked("s2") || slices.Contains(fr.removed, "s2") {
		t.Fatal("s2 was let go with too few voters to stay")
	}
	// A replacement joined, but raft refuses (say, s3 became unreachable
	// just then): still waiting, and saying why.
	fr.mu.Lock()
	fr.refuse = errors.New("refusing to remove \"s2\": it would leave 2 of 4 voters reachable, fewer than a quorum of 3")
	fr.mu.Unlock()
	fr.set(voter("s1"), voter("s2"), voter("s3"), voter("s5"))
	e.waitFor("the refusal said", func() (bool, string) { return len(e.events("s2", "RemoveRefused")) > 0, "" })
	if !hooked("s2") {
		t.Fatal("the hook went though raft refused the removal")
	}
	fr.mu.Lock()
	fr.refuse = nil
	fr.mu.Unlock()
	e.waitFor("s2 removed, then its hook", func() (bool, string) { return !hooked("s2"), "" })
	// A machine deleted before its server joined (its drain held by
	// another hook): once the server is a member the guard hooks it all
	// the same, and it goes only through the guard.
	e.create(&api.Machine{ObjectMeta: api.ObjectMeta{Name: "s6"}, Spec: api.MachineSpec{LifecycleHooks: api.LifecycleHooks{
		PreDrain: []api.LifecycleHook{{Name: "hold", Owner: "test"}}}}})
	e.waitFor("s6 held by the finalizer", func() (bool, string) { return held("s6"), "" })
	e.delete(machinesRes, "", "s6")
	fr.set(voter("s1"), voter("s3"), voter("s5"), voter("s6"))
	// Enough voters stay (s1, s3, s5): the guard takes s6 out of raft
	// while the other hook still holds the drain.
	e.waitFor("s6 out of raft", func() (bool, string) {
		fr.mu.Lock()
		defer fr.mu.Unlock()
		return slices.Contains(fr.removed, "s6"), fmt.Sprint(fr.removed)
	})
	e.update(machinesRes, "", "s6", false, func(o api.Object) {
		m := o.(*api.Machine)
		m.Spec.LifecycleHooks.PreDrain = slices.DeleteFunc(m.Spec.LifecycleHooks.PreDrain, func(h api.LifecycleHook) bool { return h.Name == "hold" })
	})
	e.waitFor("s6's machine gone", func() (bool, string) { _, ok := e.machine("s6"); return !ok, "" })
	// The leader's machine deleted, a replacement (s7) joined: the guard
	// hands the leadership to a voter that stays before the removal,
	// instead of the leader removing itself.
	leader := voter("s1")
	leader.Leader = true
	fr.set(leader, voter("s3"), voter("s5"), voter("s7"))
	e.delete(machinesRes, "", "s1")
	e.waitFor("s1 out of raft", func() (bool, string) {
		fr.mu.Lock()
		defer fr.mu.Unlock()
		return slices.Contains(fr.removed, "s1"), fmt.Sprint(fr.removed)
	})
	fr.mu.Lock()
	defer fr.mu.Unlock()
	if !slices.Equal(fr.removed, []string{"s4", "s2", "s6", "s1"}) {
		t.Errorf("removed %v, want s4, s2, s6, s1", fr.removed)
	}
	if !slices.Equal(fr.transfers, []string{"s3"}) {
		t.Errorf("leadership transfers %v, want one to s3 before the leader s1 was removed", fr.transfers)
	}
}

// The control plane machine set (CPL-2, CPL-3) with the guard: a deleted
// member is replaced on an eligible host of its domain (the machine is
// asked, by annotation, to serve); once that server joined, the guard
// lets the old member go. Changing the domains moves one member at a
// time: the addition first, then the crowded domain's member is deleted.
// One server: the set says it waits for three.
func TestControlPlaneMachineSet(t *testing.T) {
	e := newEnv(t)
	zones := map[string]string{"s1": "a", "s2": "b", "s3": "c", "e1": "b", "e2": "c", "e3": "a"}
	for _, n := range []string{"s1", "s2", "s3", "e1", "e2", "e3"} {
		e.agentNode(n)
		e.update(nodesRes, "", n, false, func(o api.Object) {
			o.(*api.Node).Labels = map[string]string{"topology.kubernetes.io/zone": zones[n]}
		})
	}
	voter := func(id string) RaftMember { return RaftMember{ID: id, Voter: true, Reachable: true} }
	fr := &fakeRaft{}
	fr.set(voter("s1"))
	e.startConfig(Config{Client: e.f, Raft: fr})
	for _, n := range []string{"e1", "e2", "e3"} {
		e.waitMachine(n, "Running", func(m *api.Machine) bool { return m.Status.Phase == api.MachineRunning })
		e.update(machinesRes, "", n, false, func(o api.Object) { o.(*api.Machine).Labels[LabelControlPlaneEligible] = "true" })
	}
	three := int32(3)
	e.create(&api.ControlPlaneMachineSet{ObjectMeta: api.ObjectMeta{Name: "cluster"}, Spec: api.ControlPlaneMachineSetSpec{
		Replicas: &three, State: api.ControlPlaneActive,
		FailureDomains: api.ControlPlaneFailureDomains{LabelKey: "topology.kubernetes.io/zone", Names: []string{"a", "b", "c"}}}})
	progress := func(reason string) func() (bool, string) {
		return func() (bool, string) {
			cp := e.get(cpmsRes, "", "cluster").(*api.ControlPlaneMachineSet)
			for _, c := range cp.Status.Conditions {
				if c.Reason == reason {
					return true, ""
				}
			}
			return false, fmt.Sprintf("%+v", cp.Status)
		}
	}
	requested := func(name string) bool {
		m, ok := e.machine(name)
		if !ok {
			return false
		}
		_, asked := m.Annotations[AnnotationServerRequested]
		return asked
	}
	e.waitFor("one server: SingleServer", progress("SingleServer"))
	// Three servers in a and c, the b one lost, and no eligible host in
	// b: the set says so, in its status and an Event.
	fr.set(voter("s1"), voter("s3"))
	e.update(machinesRes, "", "e1", false, func(o api.Object) { delete(o.(*api.Machine).Labels, LabelControlPlaneEligible) })
	e.waitFor("NoEligibleHost", progress("NoEligibleHost"))
	e.waitFor("a NoEligibleHost event", func() (bool, string) { return len(e.events("cluster", "NoEligibleHost")) > 0, "" })
	if requested("e2") || requested("e3") {
		t.Fatal("a host of another domain was asked to serve")
	}
	e.update(machinesRes, "", "e1", false, func(o api.Object) { o.(*api.Machine).Labels[LabelControlPlaneEligible] = "true" })
	e.waitFor("e1 asked while b has no member", func() (bool, string) { return requested("e1"), "" })
	e.update(machinesRes, "", "e1", false, func(o api.Object) { delete(o.(*api.Machine).Annotations, AnnotationServerRequested) })

	fr.set(voter("s1"), voter("s2"), voter("s3"))
	e.waitFor("three servers in a, b, c: Balanced", progress("Balanced"))
	e.waitFor("s2's machine guarded", func() (bool, string) {
		m, ok := e.machine("s2")
		return ok && slices.ContainsFunc(m.Spec.LifecycleHooks.PreDrain, isGuardHook), ""
	})
	e.delete(machinesRes, "", "s2")
	e.waitFor("a server asked for on e1, in b", func() (bool, string) { return requested("e1"), "" })
	if requested("e2") || requested("e3") {
		t.Fatal("a host of another domain was asked to serve")
	}
	fr.set(voter("s1"), voter("s2"), voter("s3"), voter("e1")) // e1's server joined
	e.waitFor("s2 out of raft", func() (bool, string) {
		fr.mu.Lock()
		defer fr.mu.Unlock()
		return slices.Contains(fr.removed, "s2"), fmt.Sprint(fr.removed)
	})
	e.waitFor("balanced again", progress("Balanced"))

	// The domains become a and c: a must hold 2. e3 (in a) is asked
	// first; once it serves, e1 (in b, no longer a domain) goes.
	e.update(cpmsRes, "", "cluster", false, func(o api.Object) {
		o.(*api.ControlPlaneMachineSet).Spec.FailureDomains.Names = []string{"a", "c"}
	})
	e.waitFor("e3 asked to serve", func() (bool, string) { return requested("e3"), "" })
	if m, _ := e.machine("e1"); m.DeletionTimestamp != nil {
		t.Fatal("the crowded domain's member was deleted before its replacement joined")
	}
	e.waitFor("e1's machine guarded", func() (bool, string) {
		m, ok := e.machine("e1")
		return ok && slices.ContainsFunc(m.Spec.LifecycleHooks.PreDrain, isGuardHook), ""
	})
	fr.set(voter("s1"), voter("s3"), voter("e1"), voter("e3"))
	e.waitFor("e1 moved out", func() (bool, string) {
		fr.mu.Lock()
		defer fr.mu.Unlock()
		return slices.Contains(fr.removed, "e1"), fmt.Sprint(fr.removed)
	})
	e.waitFor("balanced over a and c", progress("Balanced"))
}

// zonedControlPlane starts the controllers over eligible nodes in the
// zones given (host → zone), s1..s3 the raft voters, and a control plane
// set of 3 replicas whose domains are the zone label's values.
func zonedControlPlane(t *testing.T, zones map[string]string) *env {
	t.Helper()
	e := newEnv(t)
	for _, n := range slices.Sorted(maps.Keys(zones)) {
		e.agentNode(n)
		e.update(nodesRes, "", n, false, func(o api.Object) {
			o.(*api.Node).Labels = map[string]string{"topology.kubernetes.io/zone": zones[n], LabelControlPlaneEligible: "true"}
		})
	}
	voter := func(id string) RaftMember { return RaftMember{ID: id, Voter: true, Reachable: true} }
	fr := &fakeRaft{}
	fr.set(voter("s1"), voter("s2"), voter("s3"))
	e.startConfig(Config{Client: e.f, Raft: fr})
	three := int32(3)
	e.create(&api.ControlPlaneMachineSet{ObjectMeta: api.ObjectMeta{Name: "cluster"}, Spec: api.ControlPlaneMachineSetSpec{
		Replicas: &three, State: api.ControlPlaneActive, Strategy: api.ControlPlaneStrategy{Type: api.StrategyRollingUpdate},
		FailureDomains: api.ControlPlaneFailureDomains{LabelKey: "topology.kubernetes.io/zone"}}})
	// Only Running machines are asked to serve: a test that deletes a
	// member before its spare host's machine runs would see the next
	// host by name asked instead.
	for n := range zones {
		e.waitFor("machine "+n+" Running", func() (bool, string) {
			m, ok := e.machine(n)
			return ok && m.Status.Phase == api.MachineRunning, fmt.Sprintf("%+v", m)
		})
	}
	return e
}

// A set with a label key and no domain names takes the label's values on
// the members' and eligible hosts' nodes as its domains (CPL-2): three
// members in a, b and c are balanced, and a deleted member of b is
// replaced in b.
func TestControlPlaneDomainsFromLabels(t *testing.T) {
	e := zonedControlPlane(t, map[string]string{"s1": "a", "s2": "b", "s3": "c", "e1": "b", "e2": "c"})
	e.waitFor("Balanced over a, b, c", func() (bool, string) {
		cp := e.get(cpmsRes, "", "cluster").(*api.ControlPlaneMachineSet)
		return len(cp.Status.Conditions) == 1 && cp.Status.Conditions[0].Reason == "Balanced" && cp.Status.UpdatedReplicas == 3, fmt.Sprintf("%+v", cp.Status)
	})
	e.waitFor("s2's machine guarded", func() (bool, string) {
		m, ok := e.machine("s2")
		return ok && slices.ContainsFunc(m.Spec.LifecycleHooks.PreDrain, isGuardHook), ""
	})
	e.delete(machinesRes, "", "s2")
	e.waitFor("e1 (in b) asked to serve", func() (bool, string) {
		m, ok := e.machine("e1")
		if !ok {
			return false, "no machine e1"
		}
		_, asked := m.Annotations[AnnotationServerRequested]
		return asked, ""
	})
	if m, _ := e.machine("e2"); m.Annotations[AnnotationServerRequested] != "" {
		t.Error("e2, of domain c, was asked to serve in b's place")
	}
}

// A host asked to serve whose server does not join within
// serverRequestTimeout is marked and not asked again; another host of
// the domain is asked, and the set says why (CPL-2).
func TestControlPlaneServerRequestTimesOut(t *testing.T) {
	e := zonedControlPlane(t, map[string]string{"s1": "a", "s2": "b", "s3": "c", "e1": "b", "e2": "b"})
	e.waitFor("s2's machine guarded", func() (bool, string) {
		m, ok := e.machine("s2")
		return ok && slices.ContainsFunc(m.Spec.LifecycleHooks.PreDrain, isGuardHook), ""
	})
	asked := func(name string) bool {
		m, ok := e.machine(name)
		return ok && m.Annotations[AnnotationServerRequested] != ""
	}
	e.delete(machinesRes, "", "s2")
	e.waitFor("e1 asked to serve", func() (bool, string) { return asked("e1"), "" })
	if asked("e2") {
		t.Fatal("two hosts asked at once")
	}
	e.clock.Advance(serverRequestTimeout + time.Second)
	e.update(cpmsRes, "", "cluster", false, func(o api.Object) {
		o.(*api.ControlPlaneMachineSet).Annotations = map[string]string{"poke": "1"}
	})
	e.waitFor("e2 asked after e1 timed out", func() (bool, string) { return asked("e2"), "" })
	m, _ := e.machine("e1")
	if asked("e1") || m.Annotations[AnnotationServerRequestTimedOut] == "" {
		t.Errorf("e1's annotations %v, want the request gone and the timed-out mark", m.Annotations)
	}
	if len(e.events("cluster", "ServerRequestTimedOut")) == 0 {
		t.Error("no ServerRequestTimedOut event")
	}
}

// A host asked to serve that loses its eligibility before its server
// joins is not waited for: the request is withdrawn and said so, and
// with no other host in the domain the set says NoEligibleHost (CPL-2).
func TestControlPlaneServerRequestWithdrawn(t *testing.T) {
	e := zonedControlPlane(t, map[string]string{"s1": "a", "s2": "b", "s3": "c", "e1": "b"})
	e.waitFor("s2's machine guarded", func() (bool, string) {
		m, ok := e.machine("s2")
		return ok && slices.ContainsFunc(m.Spec.LifecycleHooks.PreDrain, isGuardHook), ""
	})
	asked := func() bool {
		m, ok := e.machine("e1")
		return ok && m.Annotations[AnnotationServerRequested] != ""
	}
	e.delete(machinesRes, "", "s2")
	e.waitFor("e1 asked to serve", func() (bool, string) { return asked(), "" })
	e.update(nodesRes, "", "e1", false, func(o api.Object) { delete(o.(*api.Node).Labels, LabelControlPlaneEligible) })
	e.waitFor("the request withdrawn and NoEligibleHost", func() (bool, string) {
		cp := e.get(cpmsRes, "", "cluster").(*api.ControlPlaneMachineSet)
		noHost := slices.ContainsFunc(cp.Status.Conditions, func(c api.MachineCondition) bool { return c.Reason == "NoEligibleHost" })
		return !asked() && noHost && len(e.events("cluster", "ServerRequestWithdrawn")) > 0, fmt.Sprintf("%+v", cp.Status)
	})
}

// A sweep looks at every machine, and with a machine per node that is
// thousands: a machine of no raft member must be let be without listing
// every machine again (issue 16 item 3: 5,000 lists of 5,000 machines
// every node-monitor period had been the leader's largest garbage).
func TestQuorumGuardWorkerSyncListsNothing(t *testing.T) {
	e := newEnv(t)
	const machines = 2000
	for i := range machines {
		e.create(&api.Machine{ObjectMeta: api.ObjectMeta{Name: fmt.Sprintf("worker-%d", i)}})
	}
	inf := controller.NewInformer(e.f, machinesRes, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go inf.Run(ctx, func(controller.Event) {})
	<-inf.Synced()
	fr := &fakeRaft{}
	fr.set(RaftMember{ID: "s1", Voter: true, Reachable: true})
	c := &quorumGuard{s: &shared{machineInf: inf}, raft: fr, size: func() int { return 1 }}

	const syncs = 200
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range syncs {
		if _, err := c.sync(ctx, fmt.Sprintf("worker-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	// Listing the machines allocates 16 bytes a machine: 32 KB a sync.
	if per := (after.TotalAlloc - before.TotalAlloc) / syncs; per > 4<<10 {
		t.Errorf("a worker machine's sync allocated %d bytes: it lists the %d machines", per, machines)
	}
}

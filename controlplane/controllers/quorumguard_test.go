package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// fakeRaft is a raft membership whose Remove may refuse.
type fakeRaft struct {
	mu      sync.Mutex
	members []RaftMember
	refuse  error
	removed []string
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
	fr.mu.Lock()
	defer fr.mu.Unlock()
	if !slices.Equal(fr.removed, []string{"s4", "s2"}) {
		t.Errorf("removed %v, want s4 then s2", fr.removed)
	}
}

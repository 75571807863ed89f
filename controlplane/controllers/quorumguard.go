package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/controller"
)

// The quorum guard (SPEC CPL-1, issue 11 item 3), a built-in hook owner:
// every control-plane machine (one whose name is a raft member's ID, as a
// host's server and agent both default to the host name) carries the
// preDrain hook QuorumGuard. When such a machine is deleted, the guard
// waits until removing its member would leave at least the control
// plane's size of reachable voters (a replacement server joined; joining
// servers are promoted once caught up), then removes the member from raft
// (raftstore's quorum check has the last word; removals go one at a
// time) and only then its hook, so the deletion goes on. A replacement first, the removal after: the
// control plane briefly has one member more, never one fewer. A deleted
// machine whose member is a non-voter, or no member any more, loses its
// hook at once.

// Raft is what the guard needs of the raft membership; the server backs
// it with raftstore.
type Raft interface {
	Members(ctx context.Context) ([]RaftMember, error)
	// Remove removes a member; it refuses, saying why, a change that
	// would break quorum.
	Remove(ctx context.Context, id string) error
	// TransferLeadership hands the leadership to voter id.
	TransferLeadership(ctx context.Context, id string) error
}

// RaftMember is one member of the raft configuration.
type RaftMember struct {
	ID        string
	Voter     bool
	Leader    bool
	Reachable bool
	// Version is the release the server runs and Info what its status
	// says of its binary (InfoSelfUpdate...), for the cluster version
	// controller; LastIndex its raft log's last index.
	Version   string
	Info      map[string]string
	LastIndex uint64
}

// The guard's hook, with OpenShift's shape.
const (
	QuorumGuardHook  = "QuorumGuard"
	QuorumGuardOwner = "outpost.io/quorum-guard"
	// DefaultControlPlaneSize is how many voters the guard keeps.
	DefaultControlPlaneSize = 3
	componentQuorumGuard    = "quorum-guard"
	// guardRetry is how often a guard that waits looks again (raft's
	// membership has no event the informers see): a replacement's
	// promotion is seen within it.
	guardRetry = time.Second
)

type quorumGuard struct {
	*loop
	s    *shared
	raft Raft
	// members caches the raft membership for membersTTL: every machine
	// is looked at each sweep, and listing the members probes every
	// server.
	mu        sync.Mutex
	members   []RaftMember
	membersAt time.Time
	// removeMu makes removals one at a time, each decided on the
	// membership the one before left.
	removeMu sync.Mutex
	// size is how many voters to keep: a fixed setting, else the control
	// plane machine set's replicas.
	size func() int
}

func newQuorumGuard(s *shared, raft Raft, fixed int, setSize func() int) *quorumGuard {
	size := setSize
	if fixed > 0 {
		size = func() int { return fixed }
	}
	c := &quorumGuard{s: s, raft: raft, size: size}
	c.loop = newLoop(s, "quorumguard", c.sync)
	return c
}

func (c *quorumGuard) onMachine(ev controller.Event) {
	if ev.Type != api.Deleted {
		c.q.Add(ev.Object.GetObjectMeta().Name)
	}
}

// sweep looks at every machine: raft members come and go without an
// event of the API.
func (c *quorumGuard) sweep() { c.addAll(c.s.machineInf) }

func (c *quorumGuard) sync(ctx context.Context, name string) (time.Duration, error) {
	obj, ok := c.s.machineInf.Get("", name)
	if !ok {
		return 0, nil
	}
	m := obj.(*api.Machine)
	hooked := slices.ContainsFunc(m.Spec.LifecycleHooks.PreDrain, isGuardHook)
	// The machines being deleted are looked at before the members: a
	// member listing older than the machines could count a server whose
	// machine is gone (and which was removed meanwhile) as staying. Only
	// a hooked machine being deleted needs them: listing every machine
	// for each of a sweep's machines cost O(machines²) (issue 16 item 3:
	// with a machine per node, 5,000 lists of 5,000 a sweep).
	var deleting map[string]bool
	if hooked && m.DeletionTimestamp != nil {
		deleting = deletingMachines(c.s)
	}
	members, err := c.currentMembers(ctx)
	if err != nil {
		return 0, fmt.Errorf("quorum guard: raft members: %w", err)
	}
	i := slices.IndexFunc(members, func(r RaftMember) bool { return r.ID == m.Name })
	switch {
	case i >= 0 && !hooked && (m.DeletionTimestamp == nil || !machineConditionIs(m, api.MachineDrainable, api.ConditionTrue)):
		// A member's machine, deleted or not, as long as its drain has
		// not begun (the machine controller waits for this hook).
		return 0, c.setHook(ctx, m, true)
	case m.DeletionTimestamp == nil || !hooked:
		return 0, nil
	case i < 0 || !members[i].Voter:
		if i >= 0 {
			c.forgetMembers()
			if err := c.raft.Remove(ctx, m.Name); err != nil {
				return 0, fmt.Errorf("quorum guard: remove non-voter %s: %w", m.Name, err)
			}
		}
		return 0, c.setHook(ctx, m, false)
	}
	// A voter whose machine is being deleted: how many reachable voters
	// would be left? The listing says whether to look closer; a removal
	// is decided one at a time (two deleted machines' syncs must not both
	// count the same voters), on a listing taken since the last removal
	// ended: each removal forgets the cached one when it is done.
	keep := c.size()
	left := votersLeft(members, m.Name)
	if len(left) >= keep {
		c.removeMu.Lock()
		defer c.removeMu.Unlock()
		if members, err = c.currentMembers(ctx); err != nil {
			return 0, fmt.Errorf("quorum guard: raft members: %w", err)
		}
		if i = slices.IndexFunc(members, func(r RaftMember) bool { return r.ID == m.Name }); i < 0 {
			return 0, c.setHook(ctx, m, false)
		}
		left = votersLeft(members, m.Name)
	}
	if len(left) < keep {
		msg := fmt.Sprintf("waiting for a replacement server: %d reachable voters would be left (%s), the control plane keeps %d; the control plane machine set asks an eligible host to serve",
			len(left), strings.Join(left, ", "), keep)
		c.s.rec.event(ctx, m, componentQuorumGuard, api.EventTypeWarning, "WaitingForReplacement", msg)
		return guardRetry, nil
	}
	c.forgetMembers() // the removal changes the membership
	if members[i].Leader {
		// This server leads: it hands the leadership to a voter that
		// stays, whose guard then removes it. A leader that removed
		// itself would leave the cluster without one until an election
		// (writes wait the election timeout), and could not record it.
		to := firstNotDeleting(left, deleting)
		c.s.rec.event(ctx, m, componentQuorumGuard, api.EventTypeNormal, "TransferringLeadership",
			fmt.Sprintf("%s leads: handing the leadership to %s, which removes %s from raft", m.Name, to, m.Name))
		err := c.raft.TransferLeadership(ctx, to)
		// A listing taken while the hand-over ran may show the old
		// leader, and would have it handed over again.
		c.forgetMembers()
		if err != nil {
			c.s.rec.event(ctx, m, componentQuorumGuard, api.EventTypeWarning, "TransferRefused", err.Error())
		}
		return guardRetry, nil
	}
	err = c.raft.Remove(ctx, m.Name)
	// A listing taken while the removal ran may not show it.
	c.forgetMembers()
	if err != nil {
		c.s.rec.event(ctx, m, componentQuorumGuard, api.EventTypeWarning, "RemoveRefused", err.Error())
		return guardRetry, nil
	}
	c.log.Info("removed a deleted machine's server from raft", "machine", m.Name, "voters", strings.Join(left, ","))
	c.s.rec.event(ctx, m, componentQuorumGuard, api.EventTypeNormal, "MemberRemoved",
		fmt.Sprintf("removed %s from raft; voters %s stay", m.Name, strings.Join(left, ", ")))
	return 0, c.setHook(ctx, m, false)
}

// membersTTL is how long the guard trusts a listing of the raft
// members; raftstore checks quorum again at every removal.
const membersTTL = time.Second

// currentMembers is the raft membership, at most membersTTL old. The
// listing runs under mu, so a forgetMembers that overlaps one clears it
// once it is stored.
func (c *quorumGuard) currentMembers(ctx context.Context) ([]RaftMember, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.members != nil && time.Since(c.membersAt) < membersTTL {
		return c.members, nil
	}
	members, err := c.raft.Members(ctx)
	if err != nil {
		return nil, err
	}
	c.members, c.membersAt = members, time.Now()
	return members, nil
}

func (c *quorumGuard) forgetMembers() {
	c.mu.Lock()
	c.members = nil
	c.mu.Unlock()
}

// votersLeft are the reachable voters other than id: those a removal of
// id would leave.
func votersLeft(members []RaftMember, id string) []string {
	var out []string
	for _, r := range members {
		if r.Voter && r.Reachable && r.ID != id {
			out = append(out, r.ID)
		}
	}
	return out
}

// firstNotDeleting is the first of ids whose machine is not being
// deleted, else the first.
func firstNotDeleting(ids []string, deleting map[string]bool) string {
	for _, id := range ids {
		if !deleting[id] {
			return id
		}
	}
	return ids[0]
}

// deletingMachines names the machines being deleted.
func deletingMachines(s *shared) map[string]bool {
	out := map[string]bool{}
	for _, o := range s.machineInf.List() {
		if m := o.(*api.Machine); m.DeletionTimestamp != nil {
			out[m.Name] = true
		}
	}
	return out
}

func isGuardHook(h api.LifecycleHook) bool {
	return h.Name == QuorumGuardHook && h.Owner == QuorumGuardOwner
}

// setHook adds (on) or removes the guard's preDrain hook.
func (c *quorumGuard) setHook(ctx context.Context, m *api.Machine, on bool) error {
	cp, err := controller.Copy(m)
	if err != nil {
		return err
	}
	upd := cp.(*api.Machine)
	hooks := slices.DeleteFunc(upd.Spec.LifecycleHooks.PreDrain, isGuardHook)
	if on {
		hooks = append(hooks, api.LifecycleHook{Name: QuorumGuardHook, Owner: QuorumGuardOwner})
	}
	upd.Spec.LifecycleHooks.PreDrain = hooks
	_, err = c.s.client.Update(ctx, upd)
	return ignoreGone(err)
}

package core

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/controller"
	"github.com/outpost-edge/outpost/controlplane/store"
	"github.com/outpost-edge/outpost/internal/plant"
	"github.com/outpost-edge/outpost/raftstore"
)

// RunLeadership switches the leader duties on and off as this server wins
// and loses raft leadership, until ctx ends. Subscribe holds only the
// latest state, so a true while the duties run means leadership was lost
// and regained in between: they restart, since what they established may
// have been undone by another leader meanwhile. Every duty is idempotent.
func (c *Core) RunLeadership(ctx context.Context) {
	ch, unsubscribe := c.node.Subscribe()
	defer unsubscribe()
	var duties *running
	defer func() { duties.stop() }()
	for {
		select {
		case <-ctx.Done():
			return
		case leading, ok := <-ch:
			if !ok {
				return
			}
			// The gate shuts first: a lost and regained leadership must
			// not serve writes through the last term's open gate while
			// the old duties stop.
			gate := c.resetGate()
			duties.stop()
			duties = nil
			if leading {
				duties = start(ctx, func(ctx context.Context) { c.leaderDuties(ctx, gate) })
			}
		}
	}
}

// running is a goroutine that can be stopped and waited for.
type running struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func start(ctx context.Context, f func(context.Context)) *running {
	ctx, cancel := context.WithCancel(ctx)
	r := &running{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		f(ctx)
	}()
	return r
}

// stop cancels the goroutine and waits for it; nil is a no-op.
func (r *running) stop() {
	if r == nil {
		return
	}
	r.cancel()
	<-r.done
}

// leaderDuties runs while this server leads: it bootstraps the cluster's
// fixed objects, runs Config.Duties (the schedulers and controllers), and
// expires old events periodically.
func (c *Core) leaderDuties(ctx context.Context, gate chan struct{}) {
	c.log.Info("leading: waiting until this server has applied every committed entry")
	began := time.Now()
	applied, ok := c.leaderBarrier(ctx)
	if !ok {
		return
	}
	close(gate)
	c.log.Info("leading: starting leader duties", "applied_index", applied, "barrier_wait", time.Since(began).Round(time.Millisecond))
	defer c.log.Info("leader duties stopped")
	if !c.retry(ctx, "cluster bootstrap failed", slog.LevelWarn, 50*time.Millisecond, 5*time.Second, func() error {
		return c.bootstrap(ctx)
	}) {
		return
	}
	// The schedulers and controllers start once the cluster's fixed
	// objects exist (pods need their namespace).
	if c.cfg.Duties != nil {
		loops := start(ctx, func(ctx context.Context) { c.cfg.Duties(ctx, Client{c}) })
		defer loops.stop()
	}
	t := time.NewTicker(eventSweepInterval(c.cfg.EventTTL))
	defer t.Stop()
	for {
		c.expireEvents(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// currentGate is the write gate of this leadership, and a channel closed
// when a new leadership's gate replaces it.
func (c *Core) currentGate() (open, replaced <-chan struct{}) {
	c.gateMu.Lock()
	defer c.gateMu.Unlock()
	return c.gate, c.gateReplaced
}

// resetGate shuts the write gate for a new leadership (or none) and
// returns it, for the duties to open after their barrier. Writes waiting
// on the gate it replaces look again.
func (c *Core) resetGate() chan struct{} {
	c.gateMu.Lock()
	defer c.gateMu.Unlock()
	close(c.gateReplaced)
	c.gate = make(chan struct{})
	c.gateReplaced = make(chan struct{})
	return c.gate
}

// gateWait bounds how long a write waits for a new leader's barrier.
const gateWait = 5 * time.Second

// awaitBarrier holds a write on a leader until its barrier passed. A
// write checks its preconditions (resourceVersion, existence, UID)
// against this server's store before raft; a leader elected a moment
// ago, a leadership transfer's target above all, may not have applied
// the entries the last leader committed, and would answer "conflict" or
// "not found" about a state that is gone. On a follower it returns at
// once: the write then fails in raft, as it would have. A leader that
// loses the leadership while the write waits (its barrier cannot commit
// then; under load elections can follow each other) answers at once
// with a *raftstore.NotLeaderError, which the API hands to the next
// leader: nothing of the write was applied here.
func (c *Core) awaitBarrier(ctx context.Context) error {
	if c.gateOpen() || !c.leadership.IsLeader() || plant.On(plant.SkipReadBarrier) {
		return nil
	}
	t := time.NewTimer(gateWait)
	defer t.Stop()
	for {
		// The leadership may end, or end and begin again with a new
		// gate, while the write waits: read both again on every change.
		// raft's leadership, and its notice, come before RunLeadership
		// replaces the last leadership's gate (which is never opened),
		// so the replacement is a change too: a write that came in
		// between waited out gateWait on the old gate while the new one
		// stood open (TestForwardedWriteEndsWhenLeadershipMoves, under
		// load). The gate is read before the leadership's notice so
		// that whoever sees this write wait for a change (the tests'
		// stand-in does, in LeaderChanged) knows both were read: a
		// gate replaced after that is seen through replaced.
		open, replaced := c.currentGate()
		changed := c.leadership.LeaderChanged()
		if !c.leadership.IsLeader() {
			return &raftstore.NotLeaderError{Leader: c.leadership.Leader()}
		}
		select {
		case <-open:
			return nil
		case <-replaced:
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return api.NewServiceUnavailable("the leader is starting (it has not applied every committed entry yet); retry")
		}
	}
}

// leadership is the part of *raftstore.Node that awaitBarrier watches.
type leadership interface {
	IsLeader() bool
	LeaderChanged() <-chan struct{}
	Leader() raftstore.LeaderInfo
}

// gateOpen reports whether this leadership's barrier has passed.
func (c *Core) gateOpen() bool {
	open, _ := c.currentGate()
	select {
	case <-open:
		return true
	default:
		return false
	}
}

// leaderBarrier waits until this leader's store has applied an entry of
// its own term, and with it everything an earlier leader committed (see
// raftstore's Node.Barrier), retrying until it succeeds or ctx ends (the
// leadership was lost, or the server stops). Every leader duty starts
// after it: a controller that read the store before it could count pods a
// ReplicaSet has as missing and create them again.
func (c *Core) leaderBarrier(ctx context.Context) (uint64, bool) {
	var idx uint64
	ok := c.retry(ctx, "leader barrier failed", slog.LevelWarn, 20*time.Millisecond, time.Second, func() error {
		bctx, cancel := context.WithTimeout(ctx, barrierTimeout)
		defer cancel()
		var err error
		idx, err = c.node.Barrier(bctx)
		return err
	})
	return idx, ok
}

// retry calls try until it succeeds or ctx ends, logging each failure at
// level and waiting first, then twice as long each time up to most; it
// reports whether try succeeded.
func (c *Core) retry(ctx context.Context, what string, level slog.Level, first, most time.Duration, try func() error) bool {
	backoff := first
	for {
		err := try()
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		c.log.Log(ctx, level, what+"; retrying", "err", err, "retry_in", backoff)
		if !controller.Sleep(ctx, backoff) {
			return false
		}
		backoff = min(2*backoff, most)
	}
}

// barrierTimeout bounds one attempt at the leader barrier; applying a long
// log tail after a restart can take a while.
const barrierTimeout = 30 * time.Second

// eventSweepInterval is how often expired events are looked for: a tenth
// of their life, between a second and five minutes, so that events
// outlive their TTL by at most about 10%.
func eventSweepInterval(ttl time.Duration) time.Duration {
	return min(max(ttl/10, time.Second), 5*time.Minute)
}

// bootstrap makes sure the fixed namespaces, the policies of the
// schedulers this server is configured with, and the admin token exist.
// Creating is the check: the store answers AlreadyExists in log order,
// so this is right even before this leader's store has caught up.
func (c *Core) bootstrap(ctx context.Context) error {
	now := time.Now()
	for _, name := range []string{NamespaceDefault, NamespaceSystem} {
		if _, err := c.st.GetObject(namespacesResource, "", name); err == nil {
			continue
		}
		ns := &api.Namespace{ObjectMeta: api.ObjectMeta{Name: name, UID: NewUID(), CreationTimestamp: api.NewTime(now)}}
		if err := c.Ensure(ctx, ns); err != nil {
			return err
		}
	}
	// The cluster's one ClusterVersion (UPD-1), as OpenShift always has
	// it; its status is the cluster version controller's.
	if _, err := c.st.GetObject(clusterVersionsResource, "", api.ClusterVersionName); err != nil {
		cv := &api.ClusterVersion{ObjectMeta: api.ObjectMeta{Name: api.ClusterVersionName, UID: NewUID(), CreationTimestamp: api.NewTime(now)},
			Spec: api.ClusterVersionSpec{ClusterID: NewUID()}}
		if err := c.Ensure(ctx, cv); err != nil {
			return err
		}
	}
	// Before the admin token, whose existence makes a server ready: a
	// ready cluster has its schedulers' policies.
	if c.cfg.Seed != nil {
		if err := c.cfg.Seed(ctx); err != nil {
			return err
		}
	}
	if _, err := c.st.GetObject(tokensResource, "", c.cfg.AdminTokenID); err == nil {
		return nil
	}
	tok := &api.Token{
		ObjectMeta: api.ObjectMeta{Name: c.cfg.AdminTokenID, UID: NewUID(), CreationTimestamp: api.NewTime(now)},
		Spec: api.TokenSpec{
			Role:        api.RoleClusterAdmin,
			SecretHash:  c.cfg.AdminSecretHash,
			Description: "cluster admin, derived from the cluster secret",
		},
	}
	return c.Ensure(ctx, tok)
}

// Ensure creates obj, defaulted but not admitted, unless it exists: for
// the objects the control plane itself must have.
func (c *Core) Ensure(ctx context.Context, obj api.Object) error {
	api.SetDefaults(obj)
	cmd, err := store.CreateCmd(obj)
	if err != nil {
		return err
	}
	_, err = c.Apply(ctx, cmd)
	if err != nil && !api.IsAlreadyExists(err) {
		return fmt.Errorf("create %s %s: %w", api.ResourceOf(obj).Kind, obj.GetObjectMeta().Name, err)
	}
	return nil
}

// expireEvents deletes events older than the TTL, when there are any.
func (c *Core) expireEvents(ctx context.Context) {
	before := time.Now().Add(-c.cfg.EventTTL)
	oldest := c.st.OldestEventTime()
	if oldest.IsZero() || !oldest.Before(before) {
		return
	}
	if _, err := c.Apply(ctx, store.ExpireEventsCmd(before)); err != nil && ctx.Err() == nil {
		c.log.Warn("expiring old events failed", "err", err)
	}
}

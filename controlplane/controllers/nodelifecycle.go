package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/controller"
)

// Membership is what the node lifecycle controller needs of the gossip
// pool (package gossip; the server adapts it).
type Membership interface {
	// MemberState reports the state the pool last heard of the member
	// named name, when the pool learned it (this host's clock), and
	// whether the pool knows the member at all.
	MemberState(name string) (state MemberState, since time.Time, known bool)
	// Subscribe returns the names of members as their state changes,
	// until cancel is called.
	Subscribe() (names <-chan string, cancel func())
}

// Liveness is the leader's memory of node heartbeats that cost no raft
// write (the server's heartbeat endpoint).
type Liveness interface {
	// LastHeartbeat is when the leader last heard from node name (this
	// host's clock), and whether it has since it started leading.
	LastHeartbeat(name string) (time.Time, bool)
}

// MemberState is a gossip member's state.
type MemberState string

// Member states the controller tells apart.
const (
	MemberAlive MemberState = "alive"
	// MemberDead: the pool declared the member failed.
	MemberDead MemberState = "dead"
	// MemberLeft: the member said goodbye; its agent stopped.
	MemberLeft MemberState = "left"
)

// NodeLifecycle configures the node lifecycle controller.
type NodeLifecycle struct {
	// Membership is the gossip pool's view of the nodes; nil judges
	// nodes by their heartbeats alone.
	Membership Membership
	// Liveness is the heartbeats held in the leader's memory; nil judges
	// nodes by their status writes (and gossip) alone.
	Liveness Liveness
	// MonitorGracePeriod is how long a node may go without a new
	// heartbeat (a new lastHeartbeatTime of its Ready condition) before
	// its conditions become Unknown; default DefaultNodeMonitorGracePeriod.
	MonitorGracePeriod time.Duration
	// Eviction rate-limits the NoExecute taints of not-ready and
	// unreachable nodes, zone by zone (TNT-8).
	Eviction Eviction
	// Zones, when set, receives the zones' states as they are counted.
	Zones *ZoneReport
}

// DefaultNodeMonitorGracePeriod is the heartbeat backstop: four of the
// agent's 10 s heartbeats, as Kubernetes' 40 s, so that three status
// posts lost on a flaky edge link do not mark a node. Gossip is the fast
// path (a few seconds, see package gossip); this only catches what
// gossip cannot see: nodes that never joined it (simulated nodes) and an
// agent whose gossip works while its API client does not.
const DefaultNodeMonitorGracePeriod = 40 * time.Second

// nodeMonitorPeriod is how often every node is looked at again even when
// nothing happened, a safety net under the per-node deadline timers.
const nodeMonitorPeriod = 5 * time.Second

// Reasons and messages of the conditions the controller writes; the
// reason is Kubernetes'.
const (
	reasonNodeStatusUnknown = "NodeStatusUnknown"
	msgHeartbeatsStopped    = "outpost agent stopped posting node status"
	msgGossipFailed         = "node is unreachable: gossip reports it failed"
	msgGossipLeft           = "node is unreachable: gossip reports its agent left"
)

// nodeLifecycle marks nodes whose agent went silent: every condition
// Unknown, as Kubernetes' node lifecycle controller does, from gossip
// (dead or left) at once, or from missed heartbeats after the grace
// period. It never sets a condition back: only the agent does, by
// posting its status. See DESIGN.md.
type nodeLifecycle struct {
	*loop
	s     *shared
	m     Membership
	live  Liveness
	grace time.Duration

	mu   sync.Mutex
	seen map[string]heartbeat
	// afterSweep, when set, runs after each periodic sweep (the taint
	// eviction's own sweep).
	afterSweep func()
	zones      *zones
}

// heartbeat is the last Ready heartbeat seen of a node, and when this
// controller saw it (its own clock: the agent's clock may be off, the
// grace period is measured here, as Kubernetes measures it).
type heartbeat struct {
	posted time.Time
	at     time.Time
	// changed is false until the controller has seen the heartbeat move:
	// then at is only when it started watching, no evidence of life.
	changed bool
}

func newNodeLifecycle(s *shared, cfg NodeLifecycle) *nodeLifecycle {
	c := &nodeLifecycle{s: s, m: cfg.Membership, live: cfg.Liveness, grace: cfg.MonitorGracePeriod, seen: map[string]heartbeat{}, zones: newZones(cfg.Eviction, cfg.Zones)}
	if c.grace <= 0 {
		c.grace = DefaultNodeMonitorGracePeriod
	}
	c.loop = newLoop(s, "nodelifecycle", c.sync)
	return c
}

// onNode notes heartbeats as the informer delivers them, so that a
// heartbeat's time of arrival is known even if the queue is busy.
func (c *nodeLifecycle) onNode(ev controller.Event) {
	name := ev.Object.GetObjectMeta().Name
	if ev.Type == api.Deleted {
		c.mu.Lock()
		delete(c.seen, name)
		c.mu.Unlock()
		c.zones.forget(name)
		c.q.Add(name)
		return
	}
	if n, ok := ev.Object.(*api.Node); ok {
		c.observe(n)
		c.zones.track(n)
	}
	c.q.Add(name)
}

// observe records n's Ready heartbeat, and when it changed.
func (c *nodeLifecycle) observe(n *api.Node) heartbeat {
	var posted time.Time
	if r := nodeReadyCondition(n); r != nil && r.LastHeartbeatTime != nil {
		posted = r.LastHeartbeatTime.Time
	}
	now := c.s.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.seen[n.Name]
	switch {
	case !ok:
		h = heartbeat{posted: posted, at: now}
	case !posted.Equal(h.posted):
		h = heartbeat{posted: posted, at: now, changed: true}
	}
	c.seen[n.Name] = h
	return h
}

// run feeds the queue from gossip and from a periodic sweep until ctx
// ends.
func (c *nodeLifecycle) run(ctx context.Context, period time.Duration) {
	var names <-chan string
	if c.m != nil {
		var cancel func()
		names, cancel = c.m.Subscribe()
		defer cancel()
	}
	// The informers have listed (Run starts this after they synced): the
	// zones can be counted now rather than at the first sweep.
	c.observeZones(ctx)
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case name, ok := <-names:
			if !ok {
				names = nil
				continue
			}
			c.q.Add(name)
		case <-tick.C:
			c.observeZones(ctx)
			c.addAll(c.s.nodeInf)
			if c.afterSweep != nil {
				c.afterSweep()
			}
		}
	}
}

// sync decides whether node name is unreachable and, if it is, marks its
// conditions Unknown.
func (c *nodeLifecycle) sync(ctx context.Context, name string) (time.Duration, error) {
	obj, ok := c.s.nodeInf.Get("", name)
	if !ok {
		return 0, nil
	}
	n, ok := obj.(*api.Node)
	if !ok {
		return 0, nil
	}
	now := c.s.now()
	var held time.Duration
	taints, changed := wantTaints(n, *api.NewTime(now))
	if !changed && c.zones.inMasterDisruption() && slices.ContainsFunc(n.Spec.Taints, isEvictionTaint) {
		changed = true // in step with its conditions, but none may evict now
	}
	if changed {
		var wasHeld bool
		if addsEvictionTaint(n, taints) {
			// About to taint a node for eviction: on the zones as they
			// are now, not as at the last sweep.
			c.observeZones(ctx)
		}
		taints, held, wasHeld = c.zones.gate(n, taints, now)
		if wasHeld && held == 0 {
			held = nodeMonitorPeriod
		}
		if !slices.EqualFunc(taints, n.Spec.Taints, sameTaint) {
			// The update comes back through the informer, which queues
			// the node again for the rest of this look. A write that
			// fails must not keep a silent node from being marked: carry
			// on with the node as it is, and retry the taints with the
			// queue's backoff.
			taintErr := c.setTaints(ctx, n, taints)
			if taintErr == nil {
				return held, nil
			}
			c.log.Warn("node condition taints not written; checking its heartbeats anyway", "node", name, "err", taintErr)
			after, err := c.markIfSilent(ctx, name, n)
			return after, errors.Join(taintErr, err)
		}
	}
	after, err := c.markIfSilent(ctx, name, n)
	if held > 0 && (after == 0 || held < after) {
		after = held
	}
	return after, err
}

// observeZones recomputes the zones' states, says what changed, and
// looks at every node again when master disruption begins or ends.
func (c *nodeLifecycle) observeZones(ctx context.Context) {
	for _, ch := range c.zones.observe(c.s.now()) {
		if ch.masterChange {
			c.log.Warn(ch.String())
			typ, reason := api.EventTypeWarning, reasonMasterDisruption
			if !ch.master {
				typ, reason = api.EventTypeNormal, reasonMasterDisruptionEnded
			}
			c.s.rec.zoneEvent(ctx, "", componentNodeController, typ, reason, ch.String())
			c.addAll(c.s.nodeInf)
			continue
		}
		c.log.Info(ch.String(), "zone", ch.zone, "state", string(ch.to))
		typ := api.EventTypeNormal
		if ch.to != ZoneNormal {
			typ = api.EventTypeWarning
		}
		c.s.rec.zoneEvent(ctx, ch.zone, componentNodeController, typ, reasonZoneStateChanged, ch.String())
	}
}

// markIfSilent marks n's conditions Unknown when its agent went silent;
// after is when to look again.
func (c *nodeLifecycle) markIfSilent(ctx context.Context, name string, n *api.Node) (time.Duration, error) {
	if r := nodeReadyCondition(n); r == nil || r.LastHeartbeatTime == nil {
		// No agent reports this node: agents, real and simulated, stamp
		// every status with a heartbeat. A node made by hand (or by a
		// test or benchmark) has no status to distrust.
		return 0, nil
	}
	h := c.withLiveness(name, c.observe(n))
	now := c.s.now()
	msg := ""
	if c.m != nil {
		// Gossip counts only if it is newer than the last heartbeat seen:
		// an agent that posts its status while the pool still calls it
		// dead is alive (its gossip is what is broken), and must not be
		// marked again at every sweep.
		if st, since, known := c.m.MemberState(name); known && (!h.changed || h.at.Before(since)) {
			switch st {
			case MemberDead:
				msg = msgGossipFailed
			case MemberLeft:
				msg = msgGossipLeft
			}
		}
	}
	var after time.Duration
	if msg == "" {
		deadline := h.at.Add(c.grace)
		if now.Before(deadline) {
			after = deadline.Sub(now)
		} else {
			msg = msgHeartbeatsStopped
		}
	}
	if msg == "" || allConditionsUnknown(n) {
		return after, nil
	}
	cp, err := controller.Copy(n)
	if err != nil {
		return 0, err
	}
	upd := cp.(*api.Node)
	ts := api.NewTime(now)
	for i := range upd.Status.Conditions {
		cd := &upd.Status.Conditions[i]
		if cd.Status == api.ConditionUnknown {
			continue
		}
		// lastHeartbeatTime stays: it is the agent's last word.
		cd.Status = api.ConditionUnknown
		cd.Reason = reasonNodeStatusUnknown
		cd.Message = msg
		cd.LastTransitionTime = ts
	}
	if _, err := c.s.client.UpdateStatus(ctx, upd); err != nil {
		// A conflict is usually the agent's own new status: the retry
		// looks again with it.
		return 0, fmt.Errorf("marking node %s unreachable: %w", name, err)
	}
	c.log.Info("node marked unreachable", "node", name, "reason", msg,
		"heartbeat_seen_ago", now.Sub(h.at).Round(time.Millisecond))
	// Kubernetes' event, for `outpost describe node`.
	c.s.rec.event(ctx, n, "node-controller", api.EventTypeNormal, "NodeNotReady",
		fmt.Sprintf("Node %s status is now: NodeNotReady (%s)", name, msg))
	return 0, nil
}

// withLiveness is h with the leader's last heartbeat of node name, if
// newer: a heartbeat the leader heard is evidence of life as a status
// write is. The grace still starts no earlier than this controller's
// first look (observe), so a new leader, which has heard nothing yet,
// gives every node a full grace period.
func (c *nodeLifecycle) withLiveness(name string, h heartbeat) heartbeat {
	if c.live != nil {
		if t, ok := c.live.LastHeartbeat(name); ok && t.After(h.at) {
			h.at, h.changed = t, true
		}
	}
	return h
}

// lastEvidence is when this controller last had evidence that node
// name's agent was alive (this host's clock): a new heartbeat or status,
// or its own first look at the node, whichever is later; now for a node
// it has not looked at yet.
func (c *nodeLifecycle) lastEvidence(name string) time.Time {
	c.mu.Lock()
	h, ok := c.seen[name]
	c.mu.Unlock()
	if !ok {
		return c.s.now()
	}
	return c.withLiveness(name, h).at
}

// setTaints writes taints as n's, saying in the log which condition
// taints came and went.
func (c *nodeLifecycle) setTaints(ctx context.Context, n *api.Node, taints []api.Taint) error {
	cp, err := controller.Copy(n)
	if err != nil {
		return err
	}
	upd := cp.(*api.Node)
	upd.Spec.Taints = taints
	if _, err := c.s.client.Update(ctx, upd); err != nil {
		// A conflict is a change of the node meanwhile: the retry looks
		// again at it.
		return fmt.Errorf("node %s: updating its condition taints: %w", n.Name, err)
	}
	c.log.Info("node condition taints changed", "node", n.Name, "before", taintList(n.Spec.Taints), "after", taintList(taints))
	return nil
}

// taintList renders taints as key:Effect, for the log.
func taintList(ts []api.Taint) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Key + ":" + t.Effect
	}
	return out
}

// nodeReadyCondition returns n's Ready condition, or nil.
func nodeReadyCondition(n *api.Node) *api.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == api.NodeReady {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// allConditionsUnknown reports whether every condition of n is Unknown.
func allConditionsUnknown(n *api.Node) bool {
	for _, cd := range n.Status.Conditions {
		if cd.Status != api.ConditionUnknown {
			return false
		}
	}
	return true
}

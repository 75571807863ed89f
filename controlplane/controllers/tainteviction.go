package controllers

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/controller"
	"github.com/outpost-edge/outpost/controlplane/scheduler/taints"
)

// DefaultFenceMargin is how much longer than its agent's own deadline the
// control plane waits before it takes a pod of an unreachable node for
// stopped: the agent's stop is late by its polling and a clock's rate may
// differ a little from the leader's.
const DefaultFenceMargin = 5 * time.Second

// Reasons of the taint eviction's conditions and events; Kubernetes' where
// it has one.
const (
	reasonTaintEviction       = "TaintManagerEviction"
	reasonDeletionByTaint     = "DeletionByTaintManager"
	reasonFencedPodDeleted    = "FencedPodDeleted"
	componentTaintEviction    = "taint-eviction-controller"
	componentNodeFenceRelease = "node-controller"
)

// taintEviction evicts the pods of nodes with NoExecute taints they do
// not tolerate, at the time SPEC TNT-4 says (taints.EvictAt): a
// DisruptionTarget condition saying why, a TaintManagerEviction event,
// then a graceful delete, whose end the node's agent brings.
//
// It also ends the deletes that an agent cannot end because the control
// plane cannot reach it (TNT-9): an agent cut off stops by its own rule
// every pod whose toleration of unreachable runs out, counting from the
// last heartbeat the control plane acknowledged, with the node monitor
// grace period first; so once the leader has seen no sign of the node
// for grace + toleration + the pod's grace period + a margin, measured
// on its own monotonic clock, the pod has stopped, and its object is
// removed for its controller to replace it. A pod that tolerates
// unreachable without a limit keeps running, so its delete waits for
// the node.
type taintEviction struct {
	*loop
	s      *shared
	lc     *nodeLifecycle
	margin time.Duration

	mu sync.Mutex
	// byNode holds the pods bound to each node, named by the pods' own
	// strings, in no order. A slice, searched: a node holds tens of pods,
	// and at 5,000 nodes of 30 pods a map (and a "namespace/name" string)
	// per pod took 15 MB of the leader's heap, a slice 5 (issue 16 item 3).
	byNode map[string][]objKey
	// firstSeen is when a NoExecute taint without timeAdded (written
	// by hand) was first seen, by node and key:effect.
	firstSeen map[string]map[string]time.Time
}

func newTaintEviction(s *shared, lc *nodeLifecycle, margin time.Duration) *taintEviction {
	if margin <= 0 {
		margin = DefaultFenceMargin
	}
	c := &taintEviction{s: s, lc: lc, margin: margin, byNode: map[string][]objKey{}, firstSeen: map[string]map[string]time.Time{}}
	c.loop = newLoop(s, "tainteviction", c.sync)
	return c
}

// onPod indexes pods by node and queues a bound pod whose node, deletion
// or tolerations changed.
func (c *taintEviction) onPod(ev controller.Event) {
	p, ok := ev.Object.(*api.Pod)
	if !ok {
		return
	}
	key := keyOf(&p.ObjectMeta)
	var old *api.Pod
	if ev.Old != nil {
		old, _ = ev.Old.(*api.Pod)
	}
	c.mu.Lock()
	if old != nil && old.Spec.NodeName != "" && (ev.Type == api.Deleted || old.Spec.NodeName != p.Spec.NodeName) {
		c.unlinkPod(old.Spec.NodeName, key)
	}
	if ev.Type != api.Deleted && p.Spec.NodeName != "" && !slices.Contains(c.byNode[p.Spec.NodeName], key) {
		c.byNode[p.Spec.NodeName] = append(c.byNode[p.Spec.NodeName], key)
	}
	c.mu.Unlock()
	if ev.Type == api.Deleted || p.Spec.NodeName == "" {
		return
	}
	if old == nil || old.Spec.NodeName != p.Spec.NodeName || (old.DeletionTimestamp == nil) != (p.DeletionTimestamp == nil) ||
		!slices.Equal(old.Spec.Tolerations, p.Spec.Tolerations) {
		c.q.Add(controller.Key(key.namespace, key.name))
	}
}

// unlinkPod forgets that pod key is bound to node; c.mu is held.
func (c *taintEviction) unlinkPod(node string, key objKey) {
	pods := c.byNode[node]
	i := slices.Index(pods, key)
	if i < 0 {
		return
	}
	last := len(pods) - 1
	pods[i], pods[last] = pods[last], objKey{}
	if last == 0 {
		delete(c.byNode, node)
		return
	}
	c.byNode[node] = pods[:last]
}

// onNode queues the pods of a node whose NoExecute taints or Ready
// status changed.
func (c *taintEviction) onNode(ev controller.Event) {
	n, ok := ev.Object.(*api.Node)
	if !ok {
		return
	}
	if ev.Type == api.Deleted {
		c.mu.Lock()
		delete(c.firstSeen, n.Name)
		c.mu.Unlock()
		return
	}
	if old, ok := ev.Old.(*api.Node); ok && slices.EqualFunc(noExecute(old.Spec.Taints), noExecute(n.Spec.Taints), sameTaint) &&
		readyOf(old) == readyOf(n) {
		return
	}
	c.queueNode(n.Name)
}

// sweep queues the pods of every node with a NoExecute taint or that is
// not Ready: a safety net under the queue's timers.
func (c *taintEviction) sweep() {
	for _, obj := range c.s.nodeInf.List() {
		n := obj.(*api.Node)
		if len(noExecute(n.Spec.Taints)) > 0 || readyOf(n) == api.ConditionUnknown {
			c.queueNode(n.Name)
		}
	}
}

func (c *taintEviction) queueNode(name string) {
	c.mu.Lock()
	keys := make([]string, 0, len(c.byNode[name]))
	for _, k := range c.byNode[name] {
		keys = append(keys, controller.Key(k.namespace, k.name))
	}
	c.mu.Unlock()
	for _, k := range keys {
		c.q.Add(k)
	}
}

func noExecute(ts []api.Taint) []api.Taint {
	var out []api.Taint
	for _, t := range ts {
		if t.Effect == api.TaintEffectNoExecute {
			out = append(out, t)
		}
	}
	return out
}

func sameTaint(a, b api.Taint) bool {
	return a.Key == b.Key && a.Value == b.Value && a.Effect == b.Effect && (a.TimeAdded == nil) == (b.TimeAdded == nil) &&
		(a.TimeAdded == nil || a.TimeAdded.Equal(b.TimeAdded.Time))
}

func readyOf(n *api.Node) string {
	if r := nodeReadyCondition(n); r != nil {
		return r.Status
	}
	return ""
}

// added is when taint t of node was added: its timeAdded, else when this
// controller first saw it.
func (c *taintEviction) added(node string, t *api.Taint) time.Time {
	if t.TimeAdded != nil {
		return t.TimeAdded.Time
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.firstSeen[node]
	if m == nil {
		m = map[string]time.Time{}
		c.firstSeen[node] = m
	}
	k := t.Key + ":" + t.Effect
	at, ok := m[k]
	if !ok {
		at = c.s.now()
		m[k] = at
	}
	return at
}

// sync looks at one pod: evicts it when its time has come, or ends its
// delete when its unreachable node must have stopped it.
func (c *taintEviction) sync(ctx context.Context, key string) (time.Duration, error) {
	ns, name, err := splitKey(key)
	if err != nil {
		return 0, nil
	}
	obj, ok := c.s.podInf.Get(ns, name)
	if !ok {
		return 0, nil
	}
	p := obj.(*api.Pod)
	if p.Spec.NodeName == "" || podFinished(p) {
		return 0, nil
	}
	nobj, ok := c.s.nodeInf.Get("", p.Spec.NodeName)
	if !ok {
		return 0, nil // the garbage collector ends pods of gone nodes
	}
	n := nobj.(*api.Node)
	now := c.s.now()
	if p.DeletionTimestamp != nil {
		return c.release(ctx, p, n, now)
	}
	at, evict := taints.EvictAt(n.Spec.Taints, p.Spec.Tolerations, func(t *api.Taint) time.Time { return c.added(n.Name, t) })
	if !evict {
		return 0, nil
	}
	if now.Before(at) {
		return at.Sub(now), nil
	}
	return 0, c.evict(ctx, p, n)
}

// evict marks p with a DisruptionTarget condition and an event, then
// deletes it gracefully. Taint eviction is not held back by disruption
// budgets, as in Kubernetes.
func (c *taintEviction) evict(ctx context.Context, p *api.Pod, n *api.Node) error {
	why := untoleratedWhy(n, p)
	cp, err := controller.Copy(p)
	if err != nil {
		return err
	}
	upd := cp.(*api.Pod)
	now := api.NewTime(c.s.now())
	cond := api.PodCondition{Type: api.PodDisruptionTarget, Status: api.ConditionTrue, LastTransitionTime: now,
		Reason: reasonDeletionByTaint, Message: "Taint manager: deleting due to NoExecute taint " + why}
	i := slices.IndexFunc(upd.Status.Conditions, func(pc api.PodCondition) bool { return pc.Type == api.PodDisruptionTarget })
	if i < 0 {
		upd.Status.Conditions = append(upd.Status.Conditions, cond)
	} else {
		upd.Status.Conditions[i] = cond
	}
	if _, err := c.s.client.UpdateStatus(ctx, upd); err != nil {
		if api.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("pod %s/%s: writing its DisruptionTarget condition: %w", p.Namespace, p.Name, err)
	}
	c.s.rec.event(ctx, p, componentTaintEviction, api.EventTypeNormal, reasonTaintEviction,
		fmt.Sprintf("Marking for deletion Pod %s/%s: node %s has taint %s", p.Namespace, p.Name, n.Name, why))
	err = c.s.client.Delete(ctx, podsResource, p.Namespace, p.Name, preconditionUID(p.UID))
	switch {
	case err == nil:
		c.log.Info("evicted a pod for a NoExecute taint", "pod", p.Namespace+"/"+p.Name, "node", n.Name, "taint", why)
	case api.IsNotFound(err), api.IsConflict(err):
	default:
		return fmt.Errorf("evict pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	return nil
}

// untoleratedWhy names the NoExecute taint that evicts p and how long p
// tolerated it.
func untoleratedWhy(n *api.Node, p *api.Pod) string {
	for i := range n.Spec.Taints {
		t := &n.Spec.Taints[i]
		if t.Effect != api.TaintEffectNoExecute {
			continue
		}
		d, forever, now := taints.NoExecuteDeadline(n.Spec.Taints[i:i+1], p.Spec.Tolerations)
		switch {
		case now:
			return taintString(t) + " (not tolerated)"
		case !forever:
			return fmt.Sprintf("%s (tolerated for %s)", taintString(t), d)
		}
	}
	return "(none left)"
}

func taintString(t *api.Taint) string {
	if t.Value != "" {
		return t.Key + "=" + t.Value + ":" + t.Effect
	}
	return t.Key + ":" + t.Effect
}

// release removes the object of p, being deleted on node n, once n's
// agent, cut off, must have stopped it by its own rule (see the type's
// comment): when the node is Ready=Unknown and the leader has had no sign
// of it for the node monitor grace period + p's toleration of
// unreachable + p's grace period + the margin.
func (c *taintEviction) release(ctx context.Context, p *api.Pod, n *api.Node, now time.Time) (time.Duration, error) {
	if readyOf(n) != api.ConditionUnknown {
		return 0, nil // its agent is there to end the delete
	}
	tol, forever := taints.UnreachableToleration(p.Spec.Tolerations)
	if forever {
		return 0, nil // it runs for as long as the node is cut off
	}
	grace := time.Duration(api.DefaultTerminationGracePeriodSeconds) * time.Second
	if g := p.DeletionGracePeriodSeconds; g != nil {
		grace = time.Duration(*g) * time.Second
	}
	last := c.lc.lastEvidence(n.Name)
	at := last.Add(c.lc.grace + tol + grace + c.margin)
	if now.Before(at) {
		return at.Sub(now), nil
	}
	zero := int64(0)
	// The resourceVersion as a precondition: an agent back in time writes
	// the pod's status before it runs it again, and then this fails.
	err := c.s.client.Delete(ctx, podsResource, p.Namespace, p.Name,
		api.DeleteOptions{Preconditions: api.Preconditions{UID: p.UID, ResourceVersion: p.ResourceVersion}, GracePeriodSeconds: &zero})
	switch {
	case err == nil:
	case api.IsNotFound(err):
		return 0, nil
	default:
		return 0, fmt.Errorf("end the delete of pod %s/%s of unreachable node %s: %w", p.Namespace, p.Name, n.Name, err)
	}
	silent := now.Sub(last).Round(time.Second)
	c.log.Info("deleted a pod of an unreachable node: its agent has stopped it by now", "pod", p.Namespace+"/"+p.Name, "node", n.Name,
		"silent_for", silent, "toleration", tol, "grace", grace, "margin", c.margin)
	c.s.rec.event(ctx, p, componentNodeFenceRelease, api.EventTypeNormal, reasonFencedPodDeleted,
		fmt.Sprintf("Node %s has been unreachable for %s: its agent stopped this pod by its own rule (toleration of unreachable %s, grace period %s, margin %s); removing it so that it can be replaced",
			n.Name, silent, tol, grace, c.margin))
	return 0, nil
}

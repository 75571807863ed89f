package controllers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/controller"
	"github.com/outpost-edge/outpost/controlplane/scheduler"
	"github.com/outpost-edge/outpost/controlplane/scheduler/policy"
	"github.com/outpost-edge/outpost/controlplane/scheduler/taints"
)

const (
	componentDaemonSet = "daemonset-controller"
	// labelControllerRevisionHash marks a daemon pod with the hash of the
	// template it was made from; a rolling update replaces the others.
	labelControllerRevisionHash = "controller-revision-hash"
	reasonFailedDaemonPod       = "FailedDaemonPod"
)

// Failed daemon pods are deleted and replaced at most this often per
// node, doubling from the first to the second: a pod the node keeps
// failing is not recreated in a hot loop.
const (
	failedPodBackoffFirst = time.Second
	failedPodBackoffMax   = 5 * time.Minute
)

// daemonTolerations are the tolerations every daemon pod gets (SPEC
// ADM-4): never evicted for a node being not ready or unreachable, and
// placed despite pressure and cordoning.
var daemonTolerations = []api.Toleration{
	{Key: "node.kubernetes.io/not-ready", Operator: api.TolerationOpExists, Effect: api.TaintEffectNoExecute},
	{Key: "node.kubernetes.io/unreachable", Operator: api.TolerationOpExists, Effect: api.TaintEffectNoExecute},
	{Key: "node.kubernetes.io/disk-pressure", Operator: api.TolerationOpExists, Effect: api.TaintEffectNoSchedule},
	{Key: "node.kubernetes.io/memory-pressure", Operator: api.TolerationOpExists, Effect: api.TaintEffectNoSchedule},
	{Key: "node.kubernetes.io/pid-pressure", Operator: api.TolerationOpExists, Effect: api.TaintEffectNoSchedule},
	{Key: scheduler.TaintUnschedulable, Operator: api.TolerationOpExists, Effect: api.TaintEffectNoSchedule},
}

// hostNetworkToleration lets host-network daemon pods (network plugins)
// onto nodes whose pod network is not up yet, as Kubernetes does.
var hostNetworkToleration = api.Toleration{Key: "node.kubernetes.io/network-unavailable", Operator: api.TolerationOpExists, Effect: api.TaintEffectNoSchedule}

// schedView is the scheduler's view of nodes and placed pods, kept from
// the informers, against which daemon pods are checked with the
// scheduler's own predicates. A Cluster belongs to one goroutine at a
// time: mu serialises the informers' updates and the checks. It is built
// when the first daemon set is reconciled, so that a cluster without
// daemon sets does not keep a second copy of the scheduler's cache.
type schedView struct {
	mu      sync.Mutex
	on      bool
	cluster *scheduler.Cluster
	sched   *scheduler.Scheduler
	log     *slog.Logger
}

// enable builds the view from the informers' caches. The handlers then
// keep it current: an event handled before enable is already in the
// caches, and one handled after is applied again harmlessly.
func (v *schedView) enable(nodes, pods *controller.Informer) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.on {
		return
	}
	v.on = true
	for _, obj := range nodes.List() {
		v.cluster.SetNode(obj.(*api.Node))
	}
	for _, obj := range pods.List() {
		if err := v.cluster.SetPod(obj.(*api.Pod)); err != nil {
			v.log.Debug("pod counted without its affinity terms", "err", err)
		}
	}
}

func (v *schedView) onNode(ev controller.Event) {
	n := ev.Object.(*api.Node)
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.on {
		return
	}
	if ev.Type == api.Deleted {
		v.cluster.RemoveNode(n.Name)
		return
	}
	v.cluster.SetNode(n)
}

func (v *schedView) onPod(ev controller.Event) {
	p := ev.Object.(*api.Pod)
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.on {
		return
	}
	if ev.Type == api.Deleted {
		v.cluster.RemovePod(p.Namespace, p.Name)
		return
	}
	if err := v.cluster.SetPod(p); err != nil {
		v.log.Debug("pod counted without its affinity terms", "err", err)
	}
}

// nodeDecision is what a daemon set does on one node: want counts it in
// desiredNumberScheduled, run places a pod there, keep leaves a running
// pod alone (else it is deleted).
type nodeDecision struct{ want, run, keep bool }

// daemonSetController runs a pod on every eligible node.
type daemonSetController struct {
	s     *shared
	loop  *loop
	track *tracker
	view  *schedView
	// types maps the policy's predicate names to their types.
	types map[string]string

	mu      sync.Mutex
	backoff map[string]failedBackoff // daemon set key + "\x00" + node
}

type failedBackoff struct {
	next  time.Time
	delay time.Duration
}

func newDaemonSetController(s *shared, sched *scheduler.Scheduler, pol *policy.Policy) *daemonSetController {
	c := &daemonSetController{
		s:       s,
		track:   newTracker(),
		view:    &schedView{cluster: scheduler.NewCluster(), sched: sched, log: s.log},
		types:   map[string]string{},
		backoff: map[string]failedBackoff{},
	}
	for _, chk := range policy.Checks(pol) {
		c.types[chk.Name] = chk.Type
	}
	c.loop = newLoop(s, "daemonset", c.sync)
	return c
}

func (c *daemonSetController) onDaemonSet(ev controller.Event) {
	c.loop.q.Add(controller.KeyOf(ev.Object))
}

// onNode wakes every daemon set when a node comes, goes or changes in a
// way that can change where daemon pods belong (not on heartbeats).
func (c *daemonSetController) onNode(ev controller.Event) {
	if old, ok := ev.Old.(*api.Node); ok && ev.Type == api.Modified && !nodeChangeMatters(old, ev.Object.(*api.Node)) {
		return
	}
	for _, obj := range c.s.dsInf.List() {
		c.loop.q.Add(controller.KeyOf(obj))
	}
}

// nodeChangeMatters reports whether a node update can change where daemon
// pods belong: labels, taints, cordoning, allocatable or a condition's
// status (heartbeats change none of them).
func nodeChangeMatters(old, n *api.Node) bool {
	if !maps.Equal(old.Labels, n.Labels) || old.Spec.Unschedulable != n.Spec.Unschedulable ||
		!api.SemanticEqual(old.Spec.Taints, n.Spec.Taints) ||
		!api.SemanticEqual(old.Status.Allocatable, n.Status.Allocatable) ||
		len(old.Status.Conditions) != len(n.Status.Conditions) {
		return true
	}
	for i, cd := range n.Status.Conditions {
		if o := old.Status.Conditions[i]; o.Type != cd.Type || o.Status != cd.Status {
			return true
		}
	}
	return false
}

// onPod wakes the daemon set that controls the pod, or, for an orphan,
// those whose selector matches it.
func (c *daemonSetController) onPod(ev controller.Event) {
	pod := ev.Object.(*api.Pod)
	ref := api.ControllerRef(&pod.ObjectMeta)
	if ev.Old != nil {
		if old := api.ControllerRef(ev.Old.GetObjectMeta()); old != nil && old.Kind == "DaemonSet" && (ref == nil || ref.UID != old.UID) {
			c.loop.q.Add(controller.Key(pod.Namespace, old.Name))
		}
	}
	if ref != nil {
		if ref.Kind == "DaemonSet" {
			c.loop.q.Add(controller.Key(pod.Namespace, ref.Name))
		}
		return
	}
	if ev.Type == api.Deleted || !podActive(pod) || pod.Spec.NodeName == "" {
		return
	}
	if ev.Old != nil && maps.Equal(ev.Old.GetObjectMeta().Labels, pod.Labels) && api.ControllerRef(ev.Old.GetObjectMeta()) == nil {
		return
	}
	for _, obj := range c.s.dsInf.List() {
		ds := obj.(*api.DaemonSet)
		if ds.Namespace != pod.Namespace {
			continue
		}
		if sel, err := c.s.sels.of(ds, ds.Spec.Selector); err == nil && sel.Matches(pod.Labels) {
			c.loop.q.Add(controller.KeyOf(ds))
		}
	}
}

// sync reconciles one daemon set: claim its pods, decide node by node,
// create and delete, then one rolling-update step when nothing else was
// written, and the status.
func (c *daemonSetController) sync(ctx context.Context, key string) (time.Duration, error) {
	ns, name, err := splitKey(key)
	if err != nil {
		return 0, nil
	}
	obj, ok := c.s.dsInf.Get(ns, name)
	if !ok {
		c.track.forget(key)
		c.forgetBackoff(key)
		return 0, nil
	}
	if !c.track.caughtUp(key) {
		return cacheLagRetry, nil
	}
	ds := obj.(*api.DaemonSet)
	sel, err := c.s.sels.of(ds, ds.Spec.Selector)
	if err != nil {
		c.loop.log.Warn("daemon set has an invalid selector", "key", key, "err", err)
		return 0, nil
	}
	c.view.enable(c.s.nodeInf, c.s.podInf)
	cl := &claimer{s: c.s, owner: ds, sel: sel, inf: c.s.podInf, t: c.track, key: key,
		adoptable: func(obj api.Object) bool { p := obj.(*api.Pod); return podActive(p) && p.Spec.NodeName != "" }}
	candidates := append(c.s.pods.ownedBy(ds.UID), c.s.pods.orphansIn(ns)...)
	owned, err := cl.claim(ctx, candidates)
	if err != nil {
		return 0, err
	}
	deleting := c.track.pendingDeletes(key, c.s.pods)
	// Pods by node; a pod being deleted no longer counts, but while it
	// terminates no other takes its place, so that two copies never run
	// on one node.
	nodePods := map[string][]*api.Pod{}
	terminatingOn := map[string]bool{}
	for _, obj := range owned {
		p := obj.(*api.Pod)
		if p.DeletionTimestamp != nil && !podFinished(p) {
			terminatingOn[p.Spec.NodeName] = true
		}
		if deleting[p.UID] || p.DeletionTimestamp != nil {
			continue
		}
		nodePods[p.Spec.NodeName] = append(nodePods[p.Spec.NodeName], p)
	}
	for _, pods := range nodePods {
		slices.SortFunc(pods, func(a, b *api.Pod) int { return byCreation(&a.ObjectMeta, &b.ObjectMeta) })
	}
	hash := templateHash(&ds.Spec.Template, 0)
	raw, err := templateJSON(&ds.Spec.Template)
	if err != nil {
		return 0, err
	}
	proto, err := daemonPod(raw, ds, hash, "")
	if err != nil {
		return 0, err
	}
	nodes := make([]*api.Node, 0, len(nodePods))
	for _, obj := range c.s.nodeInf.List() {
		nodes = append(nodes, obj.(*api.Node))
	}
	slices.SortFunc(nodes, func(a, b *api.Node) int { return strings.Compare(a.Name, b.Name) })
	decisions := c.decide(key, proto, nodes, nodePods)
	now := c.s.now()

	var after time.Duration
	soon := func(d time.Duration) {
		if d > 0 && (after == 0 || d < after) {
			after = d
		}
	}
	surge := allowsSurge(ds)
	var createOn []string
	var del []api.Object
	known := make(map[string]bool, len(nodes))
	for i, node := range nodes {
		known[node.Name] = true
		d, pods := decisions[i], nodePods[node.Name]
		switch {
		case d.run && len(pods) == 0:
			if !terminatingOn[node.Name] {
				createOn = append(createOn, node.Name)
			}
		case d.keep:
			var running []*api.Pod
			for _, p := range pods {
				if !podFinished(p) {
					running = append(running, p)
					continue
				}
				if wait := c.failedPodBackoff(key, node.Name, now); wait > 0 {
					soon(wait)
					continue
				}
				c.s.rec.event(ctx, ds, componentDaemonSet, api.EventTypeWarning, reasonFailedDaemonPod,
					fmt.Sprintf("Found failed daemon pod %s/%s on node %s, will try to kill it", p.Namespace, p.Name, node.Name))
				del = append(del, p)
			}
			for _, p := range excessPods(running, hash, surge, ds.Spec.MinReadySeconds, now) {
				del = append(del, p)
			}
		default:
			for _, p := range pods {
				del = append(del, p)
			}
		}
	}
	// Pods on nodes that are gone, or on none.
	for nodeName, pods := range nodePods {
		if !known[nodeName] {
			for _, p := range pods {
				del = append(del, p)
			}
		}
	}
	changed, err := c.syncNodes(ctx, key, ds, raw, hash, createOn, del)
	if !changed && err == nil && ds.Spec.UpdateStrategy.Type == api.RollingUpdateDaemonSetStrategyType {
		err = c.rollingUpdate(ctx, key, ds, raw, hash, nodes, decisions, nodePods, now)
	}
	status, wait := daemonSetStatus(ds, nodes, decisions, nodePods, hash, now)
	soon(wait)
	if status != ds.Status {
		if serr := c.writeStatus(ctx, key, ds, status); serr != nil {
			return 0, errors.Join(err, serr)
		}
	}
	return after, err
}

// daemonPod builds a daemon pod for node from the encoded template:
// bound already, with the template hash and ADM-4's tolerations.
func daemonPod(raw []byte, ds *api.DaemonSet, hash, node string) (*api.Pod, error) {
	p, err := podFromTemplate(raw, ds)
	if err != nil {
		return nil, err
	}
	p.Labels = withLabel(p.Labels, labelControllerRevisionHash, hash)
	p.Spec.NodeName = node
	add := daemonTolerations
	if p.Spec.HostNetwork {
		add = append(slices.Clone(add), hostNetworkToleration)
	}
	// A toleration of the template with the same key and effect is
	// replaced: ADM-4 says no tolerationSeconds.
	p.Spec.Tolerations = slices.DeleteFunc(p.Spec.Tolerations, func(t api.Toleration) bool {
		return slices.ContainsFunc(add, func(a api.Toleration) bool { return a.Key == t.Key && a.Effect == t.Effect })
	})
	p.Spec.Tolerations = append(p.Spec.Tolerations, add...)
	return p, nil
}

// decide says, node by node, whether the daemon set belongs there. A node
// where it already runs a pod keeps it unless the template's node
// selector or affinity no longer match or an untolerated NoExecute taint
// came (an untolerated NoSchedule taint only stops new pods, as in
// Kubernetes). Other nodes are checked with the scheduler's predicates
// (see classify).
func (c *daemonSetController) decide(key string, proto *api.Pod, nodes []*api.Node, nodePods map[string][]*api.Pod) []nodeDecision {
	out := make([]nodeDecision, len(nodes))
	c.view.mu.Lock()
	defer c.view.mu.Unlock()
	for i, node := range nodes {
		if slices.ContainsFunc(nodePods[node.Name], func(p *api.Pod) bool { return !podFinished(p) }) {
			out[i] = decideRunning(proto, node)
			continue
		}
		proto.Spec.NodeName = node.Name
		failed, err := c.view.sched.Fits(c.view.cluster, proto, node.Name)
		if err != nil {
			// The node is not in the view yet (its event is on its way),
			// or the template cannot be read: leave the node as it is.
			if !errors.Is(err, scheduler.ErrNodeNotFound) {
				c.loop.log.Warn("cannot check daemon pod against node", "daemonset", key, "node", node.Name, "err", err)
			}
			out[i] = nodeDecision{keep: true}
			continue
		}
		out[i] = c.classify(proto, node, failed)
	}
	proto.Spec.NodeName = ""
	return out
}

// classify turns the predicates a node failed into a decision, as
// Kubernetes' daemon set controller reads them: a node selector, host
// name, label presence or host port mismatch, or an untolerated NoExecute
// taint, means the node is not for this daemon set; an untolerated
// NoSchedule taint keeps new pods off but running ones on; a lack of
// room (resources, volumes, pod affinity) means wait, and the node is
// still counted as desired. Node conditions are ignored: daemon pods
// tolerate them (ADM-4); so is serviceAffinity, which would pin a daemon
// set to one region.
func (c *daemonSetController) classify(proto *api.Pod, node *api.Node, failed []string) nodeDecision {
	d := nodeDecision{want: true, run: true, keep: true}
	for _, name := range failed {
		typ := c.types[name]
		if typ == "" {
			typ = name
		}
		switch typ {
		case policy.HostName, policy.MatchNodeSelector, policy.TypeLabelsPresence, policy.CheckNodeLabelPresence, policy.PodFitsHostPorts:
			return nodeDecision{}
		case policy.PodToleratesNodeTaints, policy.PodToleratesNodeNoExecuteTaints:
			if _, bad := taints.FindMatchingUntoleratedTaint(node.Spec.Taints, proto.Spec.Tolerations, taints.IsNoExecute); bad {
				return nodeDecision{}
			}
			d.want, d.run = false, false
		case policy.CheckNodeUnschedulable, policy.CheckNodeCondition, policy.CheckNodeMemoryPressure,
			policy.CheckNodeDiskPressure, policy.CheckNodePIDPressure, policy.TypeServiceAffinity, policy.CheckServiceAffinity:
		default:
			d.run = false
		}
	}
	return d
}

// decideRunning decides for a node that already runs a pod of the set.
func decideRunning(proto *api.Pod, node *api.Node) nodeDecision {
	labels := node.Labels
	if _, ok := labels[scheduler.LabelHostname]; !ok {
		labels = withLabel(labels, scheduler.LabelHostname, node.Name)
	}
	if !hasLabels(labels, proto.Spec.NodeSelector) {
		return nodeDecision{}
	}
	if a := proto.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		ok, err := api.NodeSelectorMatches(a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution, labels, node.Name)
		if err != nil || !ok {
			return nodeDecision{}
		}
	}
	if _, bad := taints.FindMatchingUntoleratedTaint(node.Spec.Taints, proto.Spec.Tolerations, taints.IsNoExecute); bad {
		return nodeDecision{}
	}
	if _, bad := taints.FindMatchingUntoleratedTaint(node.Spec.Taints, proto.Spec.Tolerations, func(t *api.Taint) bool {
		return t.Effect == api.TaintEffectNoSchedule
	}); bad {
		return nodeDecision{keep: true}
	}
	return nodeDecision{want: true, run: true, keep: true}
}

// excessPods picks, among the running pods of one node (oldest first),
// those to delete. Without surge one pod stays, the oldest. With surge a
// node may hold one pod of the current template and one older pod while
// the new one is not yet available; the old one goes once the new one is
// available or if it is not ready itself.
func excessPods(running []*api.Pod, hash string, surge bool, minReady int32, now time.Time) []*api.Pod {
	if len(running) <= 1 {
		return nil
	}
	if !surge {
		return running[1:]
	}
	var newest, oldest *api.Pod
	var out []*api.Pod
	for _, p := range running {
		switch {
		case p.Labels[labelControllerRevisionHash] == hash && newest == nil:
			newest = p
		case p.Labels[labelControllerRevisionHash] != hash && oldest == nil:
			oldest = p
		default:
			out = append(out, p)
		}
	}
	if newest != nil && oldest != nil {
		if ok, _ := podAvailable(newest, minReady, now); ok || !podReady(oldest) {
			out = append(out, oldest)
		}
	}
	return out
}

// syncNodes deletes del and creates a pod on each node of createOn (in
// slow-start batches); it reports whether it wrote anything.
func (c *daemonSetController) syncNodes(ctx context.Context, key string, ds *api.DaemonSet, raw []byte, hash string, createOn []string, del []api.Object) (bool, error) {
	var errs []error
	if len(del) > 0 {
		names, err := c.s.deleteAll(ctx, c.track, key, del)
		if len(names) > 0 {
			c.s.rec.event(ctx, ds, componentDaemonSet, api.EventTypeNormal, reasonSuccessfulDelete,
				fmt.Sprintf("Deleted %s: %s", countNoun(len(names), "pod"), nameList(names)))
		}
		if err != nil {
			c.s.rec.event(ctx, ds, componentDaemonSet, api.EventTypeWarning, reasonFailedDelete, err.Error())
		}
		errs = append(errs, err)
	}
	if n := min(len(createOn), burstReplicas); n > 0 {
		var next atomic.Int64
		var mu sync.Mutex
		var names []string
		_, err := slowStart(ctx, n, func(ctx context.Context) error {
			node := createOn[next.Add(1)-1]
			pod, err := daemonPod(raw, ds, hash, node)
			if err != nil {
				return err
			}
			out, err := c.s.client.Create(ctx, pod)
			if err != nil {
				return fmt.Errorf("on node %s: %w", node, err)
			}
			c.track.wrote(key, c.s.podInf, out)
			mu.Lock()
			names = append(names, out.GetObjectMeta().Name)
			mu.Unlock()
			return nil
		})
		if len(names) > 0 {
			slices.Sort(names)
			c.s.rec.event(ctx, ds, componentDaemonSet, api.EventTypeNormal, reasonSuccessfulCreate,
				fmt.Sprintf("Created %s: %s", countNoun(len(names), "pod"), nameList(names)))
		}
		if err != nil {
			c.s.rec.event(ctx, ds, componentDaemonSet, api.EventTypeWarning, reasonFailedCreate, "Error creating: "+err.Error())
			errs = append(errs, fmt.Errorf("create daemon pods of %s: %w", key, err))
		}
	}
	return len(del) > 0 || len(createOn) > 0, errors.Join(errs...)
}

// allowsSurge reports whether a rolling update may start a new pod beside
// the old one on a node (maxSurge above zero).
func allowsSurge(ds *api.DaemonSet) bool {
	ru := ds.Spec.UpdateStrategy.RollingUpdate
	return ds.Spec.UpdateStrategy.Type == api.RollingUpdateDaemonSetStrategyType && ru != nil &&
		ru.MaxSurge != nil && !ru.MaxSurge.IsZero() && ru.MaxSurge.StrVal != "0%"
}

// rollingUpdate replaces pods of older templates, node by node. Without
// surge it deletes old pods (their nodes get new ones on the next pass)
// while at most maxUnavailable nodes lack an available pod; with surge it
// first starts a new pod beside the old one on at most maxSurge nodes,
// and deletes the old one once the new one is available.
func (c *daemonSetController) rollingUpdate(ctx context.Context, key string, ds *api.DaemonSet, raw []byte, hash string,
	nodes []*api.Node, decisions []nodeDecision, nodePods map[string][]*api.Pod, now time.Time) error {
	var desired int32
	var names []string
	for i, node := range nodes {
		if decisions[i].want {
			desired++
			names = append(names, node.Name)
		} else if len(nodePods[node.Name]) > 0 {
			names = append(names, node.Name)
		}
	}
	ru := ds.Spec.UpdateStrategy.RollingUpdate
	if ru == nil {
		ru = &api.RollingUpdateDaemonSet{}
	}
	maxUnavailable, maxSurge := api.ScaledValue(ru.MaxUnavailable, desired, true), api.ScaledValue(ru.MaxSurge, desired, true)
	if ru.MaxUnavailable == nil {
		maxUnavailable = 1
	}
	if maxUnavailable == 0 && maxSurge == 0 {
		maxUnavailable = 1
	}
	minReady := ds.Spec.MinReadySeconds
	available := func(p *api.Pod) bool { ok, _ := podAvailable(p, minReady, now); return ok }
	var del []api.Object
	var createOn []string
	if maxSurge == 0 {
		var numUnavailable int32
		var replace, candidates []*api.Pod
		for _, name := range names {
			newPod, oldPod, ok := updatedPods(nodePods[name], hash)
			switch {
			case !ok, newPod == nil && oldPod == nil, newPod != nil && oldPod != nil:
				numUnavailable++
			case newPod != nil:
				if !available(newPod) {
					numUnavailable++
				}
			case !available(oldPod):
				replace = append(replace, oldPod)
			case numUnavailable < maxUnavailable:
				candidates = append(candidates, oldPod)
			}
		}
		n := min(max(maxUnavailable-numUnavailable, 0), int32(len(candidates)))
		for _, p := range append(replace, candidates[:n]...) {
			del = append(del, p)
		}
	} else {
		var numSurge int32
		var allowed, candidates []string
		for _, name := range names {
			newPod, oldPod, ok := updatedPods(nodePods[name], hash)
			switch {
			case !ok:
				numSurge++
			case oldPod == nil:
			case newPod == nil:
				switch {
				case !available(oldPod):
					allowed = append(allowed, name)
				case numSurge < maxSurge:
					candidates = append(candidates, name)
				}
			case !available(newPod):
				numSurge++
			default:
				del = append(del, oldPod)
			}
		}
		n := min(max(maxSurge-numSurge, 0), int32(len(candidates)))
		createOn = append(allowed, candidates[:n]...)
	}
	_, err := c.syncNodes(ctx, key, ds, raw, hash, createOn, del)
	return err
}

// updatedPods returns a node's pod of the current template and its pod of
// an older one; ok is false when it has several of either (the next pass
// deletes the extra ones first).
func updatedPods(pods []*api.Pod, hash string) (newPod, oldPod *api.Pod, ok bool) {
	for _, p := range pods {
		if podFinished(p) {
			continue
		}
		if p.Labels[labelControllerRevisionHash] == hash {
			if newPod != nil {
				return nil, nil, false
			}
			newPod = p
		} else {
			if oldPod != nil {
				return nil, nil, false
			}
			oldPod = p
		}
	}
	return newPod, oldPod, true
}

// daemonSetStatus counts nodes and pods as Kubernetes does, reading the
// oldest running pod of each node; wait is when a ready pod becomes
// available.
func daemonSetStatus(ds *api.DaemonSet, nodes []*api.Node, decisions []nodeDecision, nodePods map[string][]*api.Pod, hash string, now time.Time) (api.DaemonSetStatus, time.Duration) {
	st := api.DaemonSetStatus{ObservedGeneration: ds.Generation}
	var wait time.Duration
	for i, node := range nodes {
		var pod *api.Pod
		for _, p := range nodePods[node.Name] {
			if !podFinished(p) {
				pod = p
				break
			}
		}
		if !decisions[i].want {
			if pod != nil {
				st.NumberMisscheduled++
			}
			continue
		}
		st.DesiredNumberScheduled++
		if pod == nil {
			continue
		}
		st.CurrentNumberScheduled++
		if pod.Labels[labelControllerRevisionHash] == hash {
			st.UpdatedNumberScheduled++
		}
		if podReady(pod) {
			st.NumberReady++
			ok, w := podAvailable(pod, ds.Spec.MinReadySeconds, now)
			if ok {
				st.NumberAvailable++
			} else if w > 0 && (wait == 0 || w < wait) {
				wait = w
			}
		}
	}
	st.NumberUnavailable = st.DesiredNumberScheduled - st.NumberAvailable
	return st, wait
}

func (c *daemonSetController) writeStatus(ctx context.Context, key string, ds *api.DaemonSet, st api.DaemonSetStatus) error {
	obj, err := controller.Copy(ds)
	if err != nil {
		return err
	}
	cp := obj.(*api.DaemonSet)
	cp.Status = st
	out, err := c.s.client.UpdateStatus(ctx, cp)
	if err != nil {
		if api.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("status of %s: %w", key, err)
	}
	c.track.wrote(key, c.s.dsInf, out)
	return nil
}

// failedPodBackoff returns how long to wait before deleting another
// failed pod of this daemon set on node; 0 means delete now (and the
// wait after this one doubles).
func (c *daemonSetController) failedPodBackoff(key, node string, now time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := key + "\x00" + node
	b, ok := c.backoff[k]
	if ok && now.Before(b.next) {
		return b.next.Sub(now)
	}
	delay := failedPodBackoffFirst
	if ok && now.Sub(b.next) < 2*failedPodBackoffMax {
		delay = min(2*b.delay, failedPodBackoffMax)
	}
	c.backoff[k] = failedBackoff{next: now.Add(delay), delay: delay}
	return 0
}

func (c *daemonSetController) forgetBackoff(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.backoff {
		if strings.HasPrefix(k, key+"\x00") {
			delete(c.backoff, k)
		}
	}
}

package controllers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/controller"
)

const componentReplicaSet = "replicaset-controller"

// Event reasons, as Kubernetes words them.
const (
	reasonSuccessfulCreate = "SuccessfulCreate"
	reasonFailedCreate     = "FailedCreate"
	reasonSuccessfulDelete = "SuccessfulDelete"
	reasonFailedDelete     = "FailedDelete"
)

// replicaSetController keeps spec.replicas active pods for every
// ReplicaSet.
type replicaSetController struct {
	s     *shared
	loop  *loop
	track *tracker
}

func newReplicaSetController(s *shared) *replicaSetController {
	c := &replicaSetController{s: s, track: newTracker()}
	c.loop = newLoop(s, "replicaset", c.sync)
	return c
}

func (c *replicaSetController) onReplicaSet(ev controller.Event) {
	c.loop.q.Add(controller.KeyOf(ev.Object))
}

// onPod wakes the replica set that controls the pod, or, for an orphan,
// those whose selector matches it (they may adopt it).
func (c *replicaSetController) onPod(ev controller.Event) {
	pod := ev.Object.(*api.Pod)
	ref := api.ControllerRef(&pod.ObjectMeta)
	if ev.Old != nil {
		if old := api.ControllerRef(ev.Old.GetObjectMeta()); old != nil && old.Kind == "ReplicaSet" && (ref == nil || ref.UID != old.UID) {
			c.loop.q.Add(controller.Key(pod.Namespace, old.Name))
		}
	}
	if ref != nil {
		if ref.Kind == "ReplicaSet" {
			c.loop.q.Add(controller.Key(pod.Namespace, ref.Name))
		}
		return
	}
	if ev.Type == api.Deleted || !podActive(pod) {
		return
	}
	if ev.Old != nil && maps.Equal(ev.Old.GetObjectMeta().Labels, pod.Labels) && api.ControllerRef(ev.Old.GetObjectMeta()) == nil {
		return // an orphan whose labels did not change: nothing new to adopt
	}
	for _, obj := range c.s.rss.inNamespace(pod.Namespace) {
		rs := obj.(*api.ReplicaSet)
		if sel, err := c.s.sels.of(rs, rs.Spec.Selector); err == nil && sel.Matches(pod.Labels) {
			c.loop.q.Add(controller.KeyOf(rs))
		}
	}
}

// sync reconciles one replica set: claim its pods, create or delete to
// reach spec.replicas, write the status.
func (c *replicaSetController) sync(ctx context.Context, key string) (time.Duration, error) {
	ns, name, err := splitKey(key)
	if err != nil {
		return 0, nil
	}
	obj, ok := c.s.rsInf.Get(ns, name)
	if !ok {
		c.track.forget(key)
		return 0, nil
	}
	if !c.track.caughtUp(key) {
		return cacheLagRetry, nil
	}
	rs := obj.(*api.ReplicaSet)
	sel, err := c.s.sels.of(rs, rs.Spec.Selector)
	if err != nil {
		c.loop.log.Warn("replica set has an invalid selector", "key", key, "err", err)
		return 0, nil
	}
	pods, err := c.s.claimPods(ctx, rs, sel, c.track, key)
	if err != nil {
		return 0, err
	}
	deleting := c.track.pendingDeletes(key, c.s.pods)
	var active, finished []*api.Pod
	// terminating counts the pods deleted by others (a user, an eviction)
	// that their node has yet to stop: not available, but not replaced
	// either until they are gone, so that a pod and its replacement never
	// run at once (issue 10).
	terminating := 0
	for _, p := range pods {
		switch {
		case deleting[p.UID]:
		case podFinished(p):
			finished = append(finished, p)
		case p.DeletionTimestamp == nil:
			active = append(active, p)
		default:
			terminating++
		}
	}
	var manageErr error
	if rs.DeletionTimestamp == nil {
		manageErr = c.manage(ctx, key, rs, active, finished, terminating)
	}
	status, after := replicaSetStatus(rs, active, c.s.now())
	if status != rs.Status {
		if err := c.writeStatus(ctx, key, rs, status); err != nil {
			return 0, errors.Join(manageErr, err)
		}
	}
	return after, manageErr
}

// manage creates or deletes pods so that active holds spec.replicas, and
// deletes the finished pods it replaces. The terminating pods are
// replaced only once gone.
func (c *replicaSetController) manage(ctx context.Context, key string, rs *api.ReplicaSet, active, finished []*api.Pod, terminating int) error {
	var errs []error
	if len(finished) > 0 {
		objs := make([]api.Object, len(finished))
		for i, p := range finished {
			objs[i] = p
		}
		names, err := c.s.deleteAll(ctx, c.track, key, objs)
		if len(names) > 0 {
			c.s.rec.event(ctx, rs, componentReplicaSet, api.EventTypeNormal, reasonSuccessfulDelete,
				fmt.Sprintf("Deleted finished %s: %s", countNoun(len(names), "pod"), nameList(names)))
		}
		errs = append(errs, err)
	}
	want := int(replicasOf(rs.Spec.Replicas))
	switch diff := len(active) - want; {
	case diff < 0:
		if n := -diff - terminating; n > 0 {
			errs = append(errs, c.create(ctx, key, rs, min(n, burstReplicas)))
		}
	case diff > 0:
		victims := podsToDelete(active, min(diff, burstReplicas))
		objs := make([]api.Object, len(victims))
		for i, p := range victims {
			objs[i] = p
		}
		names, err := c.s.deleteAll(ctx, c.track, key, objs)
		if len(names) > 0 {
			c.s.rec.event(ctx, rs, componentReplicaSet, api.EventTypeNormal, reasonSuccessfulDelete,
				fmt.Sprintf("Deleted %s: %s", countNoun(len(names), "pod"), nameList(names)))
		}
		if err != nil {
			c.s.rec.event(ctx, rs, componentReplicaSet, api.EventTypeWarning, reasonFailedDelete, err.Error())
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// create makes n pods from the template in slow-start batches.
func (c *replicaSetController) create(ctx context.Context, key string, rs *api.ReplicaSet, n int) error {
	raw, err := templateJSON(&rs.Spec.Template)
	if err != nil {
		return err
	}
	var mu sync.Mutex
	var names []string
	_, err = slowStart(ctx, n, func(ctx context.Context) error {
		pod, err := podFromTemplate(raw, rs)
		if err != nil {
			return err
		}
		out, err := c.s.client.Create(ctx, pod)
		if err != nil {
			return err
		}
		c.track.wrote(key, c.s.podInf, out)
		mu.Lock()
		names = append(names, out.GetObjectMeta().Name)
		mu.Unlock()
		return nil
	})
	if len(names) > 0 {
		slices.Sort(names)
		c.s.rec.event(ctx, rs, componentReplicaSet, api.EventTypeNormal, reasonSuccessfulCreate,
			fmt.Sprintf("Created %s: %s", countNoun(len(names), "pod"), nameList(names)))
	}
	if err != nil {
		c.s.rec.event(ctx, rs, componentReplicaSet, api.EventTypeWarning, reasonFailedCreate, "Error creating: "+err.Error())
		return fmt.Errorf("create pods of %s: %w", key, err)
	}
	return nil
}

func (c *replicaSetController) writeStatus(ctx context.Context, key string, rs *api.ReplicaSet, st api.ReplicaSetStatus) error {
	obj, err := controller.Copy(rs)
	if err != nil {
		return err
	}
	cp := obj.(*api.ReplicaSet)
	cp.Status = st
	out, err := c.s.client.UpdateStatus(ctx, cp)
	if err != nil {
		if api.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("status of %s: %w", key, err)
	}
	c.track.wrote(key, c.s.rsInf, out)
	return nil
}

// replicaSetStatus counts the active pods; after is when a ready pod will
// become available (minReadySeconds), 0 if none waits.
func replicaSetStatus(rs *api.ReplicaSet, active []*api.Pod, now time.Time) (api.ReplicaSetStatus, time.Duration) {
	st := api.ReplicaSetStatus{Replicas: int32(len(active)), ObservedGeneration: rs.Generation}
	var after time.Duration
	tmpl := rs.Spec.Template.Labels
	for _, p := range active {
		if hasLabels(p.Labels, tmpl) {
			st.FullyLabeledReplicas++
		}
		if !podReady(p) {
			continue
		}
		st.ReadyReplicas++
		ok, wait := podAvailable(p, rs.Spec.MinReadySeconds, now)
		switch {
		case ok:
			st.AvailableReplicas++
		case wait > 0 && (after == 0 || wait < after):
			after = wait
		}
	}
	return st, after
}

// hasLabels reports whether labels holds every pair of want.
func hasLabels(labels, want map[string]string) bool {
	for k, v := range want {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// podsToDelete picks the n pods a scale-down removes first, in
// Kubernetes' order: not yet on a node, then pending before unknown
// before running, not ready before ready, on a node with more of the
// same pods, ready for less time, restarted more, newer.
func podsToDelete(pods []*api.Pod, n int) []*api.Pod {
	perNode := map[string]int{}
	for _, p := range pods {
		if p.Spec.NodeName != "" {
			perNode[p.Spec.NodeName]++
		}
	}
	phaseRank := func(p *api.Pod) int {
		switch p.Status.Phase {
		case api.PodPending:
			return 0
		case api.PodUnknown:
			return 1
		case api.PodRunning:
			return 2
		}
		return 3
	}
	restarts := func(p *api.Pod) int32 {
		var n int32
		for _, cs := range p.Status.ContainerStatuses {
			n += cs.RestartCount
		}
		return n
	}
	sorted := slices.Clone(pods)
	slices.SortFunc(sorted, func(a, b *api.Pod) int {
		if (a.Spec.NodeName == "") != (b.Spec.NodeName == "") {
			if a.Spec.NodeName == "" {
				return -1
			}
			return 1
		}
		if c := cmp.Compare(phaseRank(a), phaseRank(b)); c != 0 {
			return c
		}
		ra, rb := podReady(a), podReady(b)
		if ra != rb {
			if !ra {
				return -1
			}
			return 1
		}
		if c := cmp.Compare(perNode[b.Spec.NodeName], perNode[a.Spec.NodeName]); c != 0 {
			return c
		}
		if ra {
			ta, tb := readyCondition(a).LastTransitionTime, readyCondition(b).LastTransitionTime
			if ta != nil && tb != nil && !ta.Equal(tb.Time) {
				return tb.Compare(ta.Time) // ready later goes first
			}
		}
		if c := cmp.Compare(restarts(b), restarts(a)); c != 0 {
			return c
		}
		return -byCreation(&a.ObjectMeta, &b.ObjectMeta) // newer first
	})
	return sorted[:n]
}

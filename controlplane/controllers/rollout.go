package controllers

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/controller"
)

// rollout is one reconcile of one deployment: the deployment and its
// replica sets as last read or written.
type rollout struct {
	c     *deploymentController
	ctx   context.Context
	key   string
	d     *api.Deployment
	now   time.Time
	all   []*api.ReplicaSet
	newRS *api.ReplicaSet // nil until found or created
	old   []*api.ReplicaSet
	// conds are the deployment's conditions with this reconcile's
	// changes, written with the status at the end.
	conds []api.DeploymentCondition
}

// replicasOf reads a replicas field; nil counts as 0.
func replicasOf(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

func (r *rollout) replicas() int32 { return replicasOf(r.d.Spec.Replicas) }

// split finds the new replica set, the oldest whose template equals the
// deployment's (pod-template-hash aside); the others are old.
func (r *rollout) split() {
	slices.SortFunc(r.all, func(a, b *api.ReplicaSet) int { return byCreation(&a.ObjectMeta, &b.ObjectMeta) })
	r.newRS, r.old = nil, r.old[:0]
	for _, rs := range r.all {
		if r.newRS == nil && equalIgnoreHash(&rs.Spec.Template, &r.d.Spec.Template) {
			r.newRS = rs
			continue
		}
		r.old = append(r.old, rs)
	}
}

// replace puts the written version of a replica set in place of the one
// read.
func (r *rollout) replace(was, now *api.ReplicaSet) {
	for i, rs := range r.all {
		if rs == was {
			r.all[i] = now
		}
	}
	for i, rs := range r.old {
		if rs == was {
			r.old[i] = now
		}
	}
	if r.newRS == was {
		r.newRS = now
	}
}

// syncRevision finds (or, with create, creates) the new replica set and
// brings the revision annotations up to date: the new replica set gets
// the highest revision of the old ones plus one, and the deployment
// carries the revision of its new replica set. Going back to an old
// template therefore reuses that replica set under a new revision.
func (r *rollout) syncRevision(create bool) error {
	r.split()
	var maxOld int64
	for _, rs := range r.old {
		maxOld = max(maxOld, revisionOf(&rs.ObjectMeta))
	}
	revision := strconv.FormatInt(maxOld+1, 10)
	if r.newRS == nil {
		if !create {
			return nil
		}
		return r.createNewRS(revision)
	}
	// Annotations are worked out on a shallow copy with its own map: the
	// deep copy a write needs is made only when there is one to make.
	probe := *r.newRS
	probe.Annotations = maps.Clone(r.newRS.Annotations)
	changed := r.setNewRSAnnotations(&probe, revision, true)
	if changed || probe.Spec.MinReadySeconds != r.d.Spec.MinReadySeconds {
		obj, err := controller.Copy(r.newRS)
		if err != nil {
			return err
		}
		cp := obj.(*api.ReplicaSet)
		cp.Annotations = probe.Annotations
		cp.Spec.MinReadySeconds = r.d.Spec.MinReadySeconds
		out, err := r.c.s.client.Update(r.ctx, cp)
		if err != nil {
			return fmt.Errorf("update replica set %s: %w", cp.Name, err)
		}
		r.c.track.wrote(r.key, r.c.s.rsInf, out)
		r.replace(r.newRS, out.(*api.ReplicaSet))
	}
	if err := r.setDeploymentRevision(r.newRS.Annotations[annRevision]); err != nil {
		return err
	}
	if hasProgressDeadline(r.d) && findCondition(r.conds, condProgressing) == nil {
		r.conds = setCondition(r.conds, r.newCondition(condProgressing, api.ConditionTrue, reasonFoundNewReplicaSet, fmt.Sprintf("Found new replica set %q", r.newRS.Name)))
	}
	return nil
}

// createNewRS creates the replica set of the current template, named
// <deployment>-<hash of the template>.
func (r *rollout) createNewRS(revision string) error {
	d := r.d
	raw, err := templateJSON(&d.Spec.Template)
	if err != nil {
		return err
	}
	for collisions := range maxHashCollisions {
		hash := templateHash(&d.Spec.Template, collisions)
		name := d.Name + "-" + hash
		if _, taken := r.c.s.rss.get(d.Namespace, name); taken {
			continue // not ours, or split would have found it
		}
		t, err := decodeTemplate(raw)
		if err != nil {
			return err
		}
		t.Labels = withLabel(t.Labels, labelPodTemplateHash, hash)
		zero := int32(0)
		rs := &api.ReplicaSet{
			ObjectMeta: api.ObjectMeta{
				Name:            name,
				Namespace:       d.Namespace,
				Labels:          maps.Clone(t.Labels),
				OwnerReferences: []api.OwnerReference{newControllerRef(d)},
			},
			Spec: api.ReplicaSetSpec{
				Replicas:        &zero,
				MinReadySeconds: d.Spec.MinReadySeconds,
				Selector:        selectorWithLabel(d.Spec.Selector, labelPodTemplateHash, hash),
				Template:        t,
			},
		}
		n := newRSReplicas(d, append(slices.Clone(r.all), rs), rs)
		rs.Spec.Replicas = &n
		r.setNewRSAnnotations(rs, revision, false)
		out, err := r.c.s.client.Create(r.ctx, rs)
		created := err == nil
		if api.IsAlreadyExists(err) {
			got, gerr := r.c.s.client.Get(api.ResourceOf(rs), d.Namespace, name)
			switch {
			case gerr == nil && isControlledBy(got, d.UID) && equalIgnoreHash(&got.(*api.ReplicaSet).Spec.Template, &d.Spec.Template):
				out, err = got, nil
			case gerr == nil || api.IsNotFound(gerr):
				continue
			default:
				return fmt.Errorf("read replica set %s: %w", name, gerr)
			}
		}
		if err != nil {
			return fmt.Errorf("create replica set %s: %w", name, err)
		}
		newRS := out.(*api.ReplicaSet)
		r.c.track.wrote(r.key, r.c.s.rsInf, newRS)
		r.all = append(r.all, newRS)
		r.newRS = newRS
		if created && n > 0 {
			r.event(fmt.Sprintf("Scaled up replica set %s to %d", name, n))
		}
		if hasProgressDeadline(d) {
			r.conds = setCondition(r.conds, r.newCondition(condProgressing, api.ConditionTrue, reasonNewReplicaSetCreated, fmt.Sprintf("Created new replica set %q", name)))
		}
		return r.setDeploymentRevision(newRS.Annotations[annRevision])
	}
	return fmt.Errorf("%w: %s", ErrTemplateHashCollision, controller.KeyOf(d))
}

// setNewRSAnnotations copies the deployment's annotations to the new
// replica set and raises its revision; a replica set about to be created
// also gets the replica annotations. It reports whether rs changed.
func (r *rollout) setNewRSAnnotations(rs *api.ReplicaSet, revision string, exists bool) bool {
	if rs.Annotations == nil {
		rs.Annotations = map[string]string{}
	}
	changed := false
	for k, v := range r.d.Annotations {
		if annotationsNotCopied[k] {
			continue
		}
		if cur, ok := rs.Annotations[k]; !ok || cur != v {
			rs.Annotations[k] = v
			changed = true
		}
	}
	oldRev := rs.Annotations[annRevision]
	oldN, err := strconv.ParseInt(oldRev, 10, 64)
	if err != nil && oldRev != "" {
		r.c.loop.log.Warn("replica set has an unreadable revision", "replicaset", rs.Name, "revision", oldRev)
		return changed
	}
	newN, _ := strconv.ParseInt(revision, 10, 64)
	if oldN < newN {
		rs.Annotations[annRevision] = revision
		changed = true
	}
	if !exists && setReplicasAnnotations(rs, r.replicas(), r.replicas()+maxSurge(r.d)) {
		changed = true
	}
	return changed
}

// setDeploymentRevision writes the revision annotation on the deployment.
func (r *rollout) setDeploymentRevision(revision string) error {
	if revision == "" || r.d.Annotations[annRevision] == revision {
		return nil
	}
	obj, err := controller.Copy(r.d)
	if err != nil {
		return err
	}
	cp := obj.(*api.Deployment)
	if cp.Annotations == nil {
		cp.Annotations = map[string]string{}
	}
	cp.Annotations[annRevision] = revision
	out, err := r.c.s.client.Update(r.ctx, cp)
	if err != nil {
		return fmt.Errorf("set revision of %s: %w", r.key, err)
	}
	r.c.track.wrote(r.key, r.c.s.deployInf, out)
	r.d = out.(*api.Deployment)
	return nil
}

// scale sets a replica set's size and replica annotations; it reports
// whether the size changed.
func (r *rollout) scale(rs *api.ReplicaSet, n int32) (bool, error) {
	from := replicasOf(rs.Spec.Replicas)
	sizeChanges := from != n
	if !sizeChanges && !replicasAnnotationsNeedUpdate(rs, r.replicas(), r.replicas()+maxSurge(r.d)) {
		return false, nil
	}
	obj, err := controller.Copy(rs)
	if err != nil {
		return false, err
	}
	cp := obj.(*api.ReplicaSet)
	cp.Spec.Replicas = &n
	setReplicasAnnotations(cp, r.replicas(), r.replicas()+maxSurge(r.d))
	out, err := r.c.s.client.Update(r.ctx, cp)
	if err != nil {
		return false, fmt.Errorf("scale replica set %s: %w", rs.Name, err)
	}
	r.c.track.wrote(r.key, r.c.s.rsInf, out)
	r.replace(rs, out.(*api.ReplicaSet))
	if sizeChanges {
		dir := "up"
		if n < from {
			dir = "down"
		}
		r.event(fmt.Sprintf("Scaled %s replica set %s to %d from %d", dir, rs.Name, n, from))
	}
	return sizeChanges, nil
}

func (r *rollout) event(msg string) {
	r.c.s.rec.event(r.ctx, r.d, componentDeployment, api.EventTypeNormal, reasonScalingReplicaSet, msg)
}

// rolling is one step of a RollingUpdate: scale the new replica set up as
// far as maxSurge allows, else the old ones down as far as maxUnavailable
// allows, else, once complete, prune history.
func (r *rollout) rolling() (time.Duration, error) {
	if err := r.syncRevision(true); err != nil {
		return 0, err
	}
	up, err := r.reconcileNewRS()
	if err != nil {
		return 0, err
	}
	if up {
		return r.syncRolloutStatus()
	}
	down, err := r.reconcileOldRSs()
	if err != nil {
		return 0, err
	}
	if down {
		return r.syncRolloutStatus()
	}
	if deploymentComplete(r.d, &r.d.Status) {
		if err := r.cleanup(); err != nil {
			return 0, err
		}
	}
	return r.syncRolloutStatus()
}

// reconcileNewRS grows the new replica set as far as maxSurge allows (or
// shrinks it to spec.replicas); it reports whether it scaled.
func (r *rollout) reconcileNewRS() (bool, error) {
	cur, want := replicasOf(r.newRS.Spec.Replicas), r.replicas()
	switch {
	case cur == want:
		return false, nil
	case cur > want:
		return r.scale(r.newRS, want)
	}
	return r.scale(r.newRS, newRSReplicas(r.d, r.all, r.newRS))
}

// availableOf is what a replica set can be counted on to keep available:
// its status, but never more than its spec, because pods above the spec
// are about to be deleted even if the status does not say so yet.
func availableOf(rs *api.ReplicaSet) int32 {
	return min(rs.Status.AvailableReplicas, replicasOf(rs.Spec.Replicas))
}

// reconcileOldRSs shrinks the old replica sets as far as maxUnavailable
// allows; it reports whether it scaled.
func (r *rollout) reconcileOldRSs() (bool, error) {
	if sumReplicas(r.old) == 0 {
		return false, nil
	}
	minAvailable := r.replicas() - maxUnavailable(r.d)
	newUnavailable := replicasOf(r.newRS.Spec.Replicas) - availableOf(r.newRS)
	maxScaledDown := sumReplicas(r.all) - minAvailable - newUnavailable
	if maxScaledDown <= 0 {
		return false, nil
	}
	old := slices.Clone(r.old)
	slices.SortFunc(old, func(a, b *api.ReplicaSet) int { return byCreation(&a.ObjectMeta, &b.ObjectMeta) })
	// First the old replica sets' unavailable pods: removing them costs
	// no availability.
	var cleaned int32
	for _, rs := range old {
		if cleaned >= maxScaledDown {
			break
		}
		n, avail := replicasOf(rs.Spec.Replicas), availableOf(rs)
		if n == 0 || avail >= n {
			continue
		}
		down := min(maxScaledDown-cleaned, n-avail)
		if _, err := r.scale(rs, n-down); err != nil {
			return false, err
		}
		cleaned += down
	}
	// Then available pods, down to minAvailable.
	var available int32
	for _, rs := range r.all {
		available += availableOf(rs)
	}
	var scaled int32
	if available > minAvailable {
		total := available - minAvailable
		for _, rs := range old {
			if scaled >= total {
				break
			}
			cur := r.current(rs)
			n := replicasOf(cur.Spec.Replicas)
			if n == 0 {
				continue
			}
			down := min(n, total-scaled)
			if _, err := r.scale(cur, n-down); err != nil {
				return false, err
			}
			scaled += down
		}
	}
	return cleaned+scaled > 0, nil
}

// current returns the latest version of rs this reconcile holds.
func (r *rollout) current(rs *api.ReplicaSet) *api.ReplicaSet {
	for _, x := range r.all {
		if x.UID == rs.UID {
			return x
		}
	}
	return rs
}

// recreate is one step of a Recreate rollout: scale every old replica set
// to zero, wait until none of their pods runs, then create or scale up
// the new one.
func (r *rollout) recreate() (time.Duration, error) {
	if err := r.syncRevision(false); err != nil {
		return 0, err
	}
	down := false
	for _, rs := range slices.Clone(r.old) {
		if replicasOf(rs.Spec.Replicas) == 0 {
			continue
		}
		scaled, err := r.scale(rs, 0)
		if err != nil {
			return 0, err
		}
		down = down || scaled
	}
	if down || r.oldPodsRunning() {
		return r.syncRolloutStatus()
	}
	if r.newRS == nil {
		if err := r.syncRevision(true); err != nil {
			return 0, err
		}
	}
	if _, err := r.scale(r.newRS, r.replicas()); err != nil {
		return 0, err
	}
	if deploymentComplete(r.d, &r.d.Status) {
		if err := r.cleanup(); err != nil {
			return 0, err
		}
	}
	return r.syncRolloutStatus()
}

// oldPodsRunning reports whether an old replica set still has a pod that
// has not finished.
func (r *rollout) oldPodsRunning() bool {
	for _, rs := range r.old {
		if rs.Status.Replicas > 0 {
			return true
		}
		for _, obj := range r.c.s.pods.ownedBy(rs.UID) {
			if p := obj.(*api.Pod); isControlledBy(p, rs.UID) && !podFinished(p) {
				return true
			}
		}
	}
	return false
}

// isScalingEvent reports whether spec.replicas changed since the active
// replica sets were last sized (their desired-replicas annotation).
func (r *rollout) isScalingEvent() (bool, error) {
	if err := r.syncRevision(false); err != nil {
		return false, err
	}
	for _, rs := range r.all {
		if replicasOf(rs.Spec.Replicas) == 0 {
			continue
		}
		if v, ok := rs.Annotations[annDesiredReplicas]; ok {
			if n, err := strconv.ParseInt(v, 10, 32); err == nil && int32(n) != r.replicas() {
				return true, nil
			}
		}
	}
	return false, nil
}

// syncScale sizes the replica sets to spec.replicas without rolling
// (a scaling event, or a paused deployment).
func (r *rollout) syncScale() (time.Duration, error) {
	if err := r.syncRevision(false); err != nil {
		return 0, err
	}
	if err := r.scaleAll(); err != nil {
		return 0, err
	}
	if r.d.Spec.Paused {
		if err := r.cleanup(); err != nil {
			return 0, err
		}
	}
	return 0, r.writeStatus(r.calculateStatus())
}

// scaleAll sizes the replica sets for a new spec.replicas: the only
// active one takes it all; a saturated new one lets the old go; during a
// rolling update the change is shared in proportion to their sizes, as
// Kubernetes does, so that scaling mid-rollout keeps the rollout's shape.
func (r *rollout) scaleAll() error {
	want := r.replicas()
	if rs := r.activeOrLatest(); rs != nil {
		if replicasOf(rs.Spec.Replicas) == want {
			return nil
		}
		_, err := r.scale(rs, want)
		return err
	}
	if r.isSaturated() {
		for _, rs := range slices.Clone(r.old) {
			if replicasOf(rs.Spec.Replicas) > 0 {
				if _, err := r.scale(rs, 0); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if r.d.Spec.Strategy.Type != api.RollingUpdateDeploymentStrategyType {
		return nil
	}
	var active []*api.ReplicaSet
	for _, rs := range r.all {
		if replicasOf(rs.Spec.Replicas) > 0 {
			active = append(active, rs)
		}
	}
	var allowed int32
	if want > 0 {
		allowed = want + maxSurge(r.d)
	}
	toAdd := allowed - sumReplicas(active)
	// Larger first; the newer first when growing, the older when
	// shrinking, so that leftovers go to the right one.
	slices.SortFunc(active, func(a, b *api.ReplicaSet) int {
		if c := replicasOf(b.Spec.Replicas) - replicasOf(a.Spec.Replicas); c != 0 {
			return int(c)
		}
		if toAdd > 0 {
			return byCreation(&b.ObjectMeta, &a.ObjectMeta)
		}
		return byCreation(&a.ObjectMeta, &b.ObjectMeta)
	})
	sizes := make([]int32, len(active))
	var added int32
	for i, rs := range active {
		sizes[i] = replicasOf(rs.Spec.Replicas)
		if toAdd != 0 {
			p := r.proportion(rs, toAdd, added)
			sizes[i] += p
			added += p
		}
	}
	if toAdd != 0 && len(active) > 0 {
		sizes[0] = max(sizes[0]+toAdd-added, 0)
	}
	for i, rs := range active {
		if _, err := r.scale(rs, sizes[i]); err != nil {
			return err
		}
	}
	return nil
}

// activeOrLatest returns the one replica set with replicas, or, with
// none, the new one or else the newest; nil when several have replicas.
func (r *rollout) activeOrLatest() *api.ReplicaSet {
	var active []*api.ReplicaSet
	for _, rs := range r.all {
		if replicasOf(rs.Spec.Replicas) > 0 {
			active = append(active, rs)
		}
	}
	switch len(active) {
	case 1:
		return active[0]
	case 0:
		if r.newRS != nil {
			return r.newRS
		}
		if len(r.old) > 0 {
			return slices.MaxFunc(r.old, func(a, b *api.ReplicaSet) int { return byCreation(&a.ObjectMeta, &b.ObjectMeta) })
		}
	}
	return nil
}

// isSaturated reports whether the new replica set has all the replicas
// and all of them available.
func (r *rollout) isSaturated() bool {
	if r.newRS == nil {
		return false
	}
	want := r.replicas()
	desired, err := strconv.ParseInt(r.newRS.Annotations[annDesiredReplicas], 10, 32)
	return err == nil && int32(desired) == want && replicasOf(r.newRS.Spec.Replicas) == want && r.newRS.Status.AvailableReplicas == want
}

// proportion is a replica set's share of toAdd, by its size against the
// size the deployment had when it was last scaled (max-replicas).
func (r *rollout) proportion(rs *api.ReplicaSet, toAdd, added int32) int32 {
	n := replicasOf(rs.Spec.Replicas)
	if n == 0 || toAdd == added {
		return 0
	}
	var frac int32
	if r.replicas() == 0 {
		frac = -n
	} else {
		total := r.replicas() + maxSurge(r.d)
		annotated := r.d.Status.Replicas
		if v, err := strconv.ParseInt(rs.Annotations[annMaxReplicas], 10, 32); err == nil {
			annotated = int32(v)
		}
		if annotated == 0 {
			return 0
		}
		frac = int32(math.Round(float64(n)*float64(total)/float64(annotated))) - n
	}
	allowed := toAdd - added
	if toAdd > 0 {
		return min(frac, allowed)
	}
	return max(frac, allowed)
}

// cleanup deletes the oldest old replica sets beyond
// revisionHistoryLimit that have no pods left.
func (r *rollout) cleanup() error {
	limit := r.d.Spec.RevisionHistoryLimit
	if limit == nil {
		return nil
	}
	var cands []*api.ReplicaSet
	for _, rs := range r.old {
		if rs.DeletionTimestamp == nil {
			cands = append(cands, rs)
		}
	}
	diff := len(cands) - int(*limit)
	if diff <= 0 {
		return nil
	}
	slices.SortFunc(cands, func(a, b *api.ReplicaSet) int {
		if c := revisionOf(&a.ObjectMeta) - revisionOf(&b.ObjectMeta); c != 0 {
			if c < 0 {
				return -1
			}
			return 1
		}
		return byCreation(&a.ObjectMeta, &b.ObjectMeta)
	})
	var del []api.Object
	for _, rs := range cands[:diff] {
		if rs.Status.Replicas != 0 || replicasOf(rs.Spec.Replicas) != 0 || rs.Generation > rs.Status.ObservedGeneration {
			continue
		}
		del = append(del, rs)
	}
	if len(del) == 0 {
		return nil
	}
	names, err := r.c.s.deleteAll(r.ctx, r.c.track, r.key, del)
	if len(names) > 0 {
		r.c.loop.log.Info("deleted old replica sets beyond revisionHistoryLimit", "deployment", r.key, "replicasets", names)
	}
	return err
}

// calculateStatus sums the replica sets' statuses and sets Available.
func (r *rollout) calculateStatus() api.DeploymentStatus {
	var available, total int32
	st := api.DeploymentStatus{ObservedGeneration: r.d.Generation, Conditions: slices.Clone(r.conds)}
	for _, rs := range r.all {
		st.Replicas += rs.Status.Replicas
		st.ReadyReplicas += rs.Status.ReadyReplicas
		available += rs.Status.AvailableReplicas
		total += replicasOf(rs.Spec.Replicas)
	}
	if r.newRS != nil {
		st.UpdatedReplicas = r.newRS.Status.Replicas
	}
	st.AvailableReplicas = available
	st.UnavailableReplicas = max(total-available, 0)
	if available >= r.replicas()-maxUnavailable(r.d) {
		st.Conditions = setCondition(st.Conditions, r.newCondition(condAvailable, api.ConditionTrue, reasonMinimumReplicasAvailable, "Deployment has minimum availability."))
	} else {
		st.Conditions = setCondition(st.Conditions, r.newCondition(condAvailable, api.ConditionFalse, reasonMinimumReplicasUnavailable, "Deployment does not have minimum availability."))
	}
	return st
}

// syncRolloutStatus writes the status with the Progressing condition of
// a rollout in progress; it returns when to look again for the progress
// deadline.
func (r *rollout) syncRolloutStatus() (time.Duration, error) {
	st := r.calculateStatus()
	if !hasProgressDeadline(r.d) {
		st.Conditions = removeCondition(st.Conditions, condProgressing)
	}
	cur := findCondition(st.Conditions, condProgressing)
	complete := st.Replicas == st.UpdatedReplicas && cur != nil && cur.Reason == reasonNewReplicaSetAvailable
	if hasProgressDeadline(r.d) && !complete {
		what := fmt.Sprintf("Deployment %q", r.d.Name)
		if r.newRS != nil {
			what = fmt.Sprintf("ReplicaSet %q", r.newRS.Name)
		}
		switch {
		case deploymentComplete(r.d, &st):
			st.Conditions = setCondition(st.Conditions, r.newCondition(condProgressing, api.ConditionTrue, reasonNewReplicaSetAvailable, what+" has successfully progressed."))
		case deploymentProgressing(r.d, &st):
			c := r.newCondition(condProgressing, api.ConditionTrue, reasonReplicaSetUpdated, what+" is progressing.")
			if cur != nil && cur.Status == api.ConditionTrue {
				c.LastTransitionTime = cur.LastTransitionTime
			}
			st.Conditions = append(removeCondition(st.Conditions, condProgressing), c)
		case deploymentTimedOut(r.d, &st, r.now):
			st.Conditions = setCondition(st.Conditions, r.newCondition(condProgressing, api.ConditionFalse, reasonProgressDeadlineExceeded, what+" has timed out progressing."))
		}
	}
	return r.untilDeadline(&st), r.writeStatus(st)
}

// untilDeadline is when a rollout in progress would pass its deadline.
func (r *rollout) untilDeadline(st *api.DeploymentStatus) time.Duration {
	cur := findCondition(st.Conditions, condProgressing)
	if !hasProgressDeadline(r.d) || cur == nil || cur.LastUpdateTime == nil ||
		deploymentComplete(r.d, st) || cur.Reason == reasonProgressDeadlineExceeded {
		return 0
	}
	after := cur.LastUpdateTime.Add(time.Duration(*r.d.Spec.ProgressDeadlineSeconds) * time.Second).Sub(r.now)
	return max(after, 0) + time.Second
}

func (r *rollout) writeStatus(st api.DeploymentStatus) error {
	if api.SemanticEqual(&r.d.Status, &st) {
		return nil
	}
	obj, err := controller.Copy(r.d)
	if err != nil {
		return err
	}
	cp := obj.(*api.Deployment)
	cp.Status = st
	out, err := r.c.s.client.UpdateStatus(r.ctx, cp)
	if err != nil {
		if api.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("status of %s: %w", r.key, err)
	}
	r.c.track.wrote(r.key, r.c.s.deployInf, out)
	r.d = out.(*api.Deployment)
	return nil
}

// checkPausedConditions marks pausing and resuming in Progressing, unless
// the rollout already timed out.
func (r *rollout) checkPausedConditions() {
	if !hasProgressDeadline(r.d) {
		return
	}
	cur := findCondition(r.conds, condProgressing)
	if cur != nil && cur.Reason == reasonProgressDeadlineExceeded {
		return
	}
	paused := cur != nil && cur.Reason == reasonDeploymentPaused
	switch {
	case r.d.Spec.Paused && !paused:
		r.conds = setCondition(r.conds, r.newCondition(condProgressing, api.ConditionUnknown, reasonDeploymentPaused, "Deployment is paused"))
	case !r.d.Spec.Paused && paused:
		r.conds = setCondition(r.conds, r.newCondition(condProgressing, api.ConditionUnknown, reasonDeploymentResumed, "Deployment is resumed"))
	}
}

func (r *rollout) newCondition(typ, status, reason, msg string) api.DeploymentCondition {
	t := api.NewTime(r.now)
	return api.DeploymentCondition{Type: typ, Status: status, Reason: reason, Message: msg, LastUpdateTime: t, LastTransitionTime: t}
}

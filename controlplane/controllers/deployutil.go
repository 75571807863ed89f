package controllers

import (
	"maps"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// Helpers of the deployment controller.

// sumReplicas adds up spec.replicas.
func sumReplicas(rss []*api.ReplicaSet) int32 {
	var n int32
	for _, rs := range rss {
		n += replicasOf(rs.Spec.Replicas)
	}
	return n
}

// isRolling reports whether the deployment uses RollingUpdate.
func isRolling(d *api.Deployment) bool {
	return d.Spec.Strategy.Type == api.RollingUpdateDeploymentStrategyType
}

// fenceposts resolves maxSurge (rounded up) and maxUnavailable (rounded
// down) against spec.replicas; both zero would never move, so
// maxUnavailable becomes 1.
func fenceposts(d *api.Deployment) (surge, unavailable int32) {
	ms, mu := api.FromString(api.DefaultMaxSurge), api.FromString(api.DefaultMaxUnavailable)
	if ru := d.Spec.Strategy.RollingUpdate; ru != nil {
		if ru.MaxSurge != nil {
			ms = *ru.MaxSurge
		}
		if ru.MaxUnavailable != nil {
			mu = *ru.MaxUnavailable
		}
	}
	n := replicasOf(d.Spec.Replicas)
	surge, unavailable = api.ScaledValue(&ms, n, true), api.ScaledValue(&mu, n, false)
	if surge == 0 && unavailable == 0 {
		unavailable = 1
	}
	return surge, unavailable
}

// maxSurge is the resolved maxSurge; 0 for Recreate.
func maxSurge(d *api.Deployment) int32 {
	if !isRolling(d) {
		return 0
	}
	s, _ := fenceposts(d)
	return s
}

// maxUnavailable is the resolved maxUnavailable, at most spec.replicas;
// 0 for Recreate.
func maxUnavailable(d *api.Deployment) int32 {
	n := replicasOf(d.Spec.Replicas)
	if !isRolling(d) || n == 0 {
		return 0
	}
	_, u := fenceposts(d)
	return min(u, n)
}

// newRSReplicas is the size the new replica set may grow to now.
func newRSReplicas(d *api.Deployment, all []*api.ReplicaSet, newRS *api.ReplicaSet) int32 {
	want := replicasOf(d.Spec.Replicas)
	if !isRolling(d) {
		return want
	}
	cur := replicasOf(newRS.Spec.Replicas)
	maxTotal := want + maxSurge(d)
	total := sumReplicas(all)
	if total >= maxTotal {
		return cur
	}
	return cur + max(min(maxTotal-total, want-cur), 0)
}

// setReplicasAnnotations sets the desired-replicas and max-replicas
// annotations; it reports whether they changed.
func setReplicasAnnotations(rs *api.ReplicaSet, desired, maxReplicas int32) bool {
	if !replicasAnnotationsNeedUpdate(rs, desired, maxReplicas) {
		return false
	}
	if rs.Annotations == nil {
		rs.Annotations = map[string]string{}
	}
	rs.Annotations[annDesiredReplicas] = strconv.Itoa(int(desired))
	rs.Annotations[annMaxReplicas] = strconv.Itoa(int(maxReplicas))
	return true
}

// replicasAnnotationsNeedUpdate reports whether the desired-replicas or
// max-replicas annotation of rs differs from these values.
func replicasAnnotationsNeedUpdate(rs *api.ReplicaSet, desired, maxReplicas int32) bool {
	return rs.Annotations[annDesiredReplicas] != strconv.Itoa(int(desired)) ||
		rs.Annotations[annMaxReplicas] != strconv.Itoa(int(maxReplicas))
}

// equalIgnoreHash reports whether two templates are equal once the
// pod-template-hash label is left out of both.
func equalIgnoreHash(a, b *api.PodTemplateSpec) bool {
	ac, bc := *a, *b
	ac.Labels = withoutLabel(a.Labels, labelPodTemplateHash)
	bc.Labels = withoutLabel(b.Labels, labelPodTemplateHash)
	return api.SemanticEqual(&ac, &bc)
}

// withoutLabel returns labels without key, copied only if needed.
func withoutLabel(labels map[string]string, key string) map[string]string {
	if _, ok := labels[key]; !ok {
		return labels
	}
	out := maps.Clone(labels)
	delete(out, key)
	return out
}

// withLabel returns a copy of labels with key=value.
func withLabel(labels map[string]string, key, value string) map[string]string {
	out := make(map[string]string, len(labels)+1)
	maps.Copy(out, labels)
	out[key] = value
	return out
}

// selectorWithLabel copies a selector and requires key=value too.
func selectorWithLabel(sel *api.LabelSelector, key, value string) *api.LabelSelector {
	out := &api.LabelSelector{MatchLabels: withLabel(sel.MatchLabels, key, value)}
	for _, e := range sel.MatchExpressions {
		e.Values = slices.Clone(e.Values)
		out.MatchExpressions = append(out.MatchExpressions, e)
	}
	return out
}

// hasProgressDeadline reports whether progressDeadlineSeconds is set (and
// not the "never" value).
func hasProgressDeadline(d *api.Deployment) bool {
	return d.Spec.ProgressDeadlineSeconds != nil && *d.Spec.ProgressDeadlineSeconds != math.MaxInt32
}

// deploymentComplete reports whether every replica is updated and
// available and the status is of the latest generation.
func deploymentComplete(d *api.Deployment, st *api.DeploymentStatus) bool {
	want := replicasOf(d.Spec.Replicas)
	return st.UpdatedReplicas == want && st.Replicas == want && st.AvailableReplicas == want && st.ObservedGeneration >= d.Generation
}

// deploymentProgressing reports whether st moved forward from the
// deployment's last status.
func deploymentProgressing(d *api.Deployment, st *api.DeploymentStatus) bool {
	old := d.Status
	return st.UpdatedReplicas > old.UpdatedReplicas ||
		st.Replicas-st.UpdatedReplicas < old.Replicas-old.UpdatedReplicas ||
		st.ReadyReplicas > old.ReadyReplicas ||
		st.AvailableReplicas > old.AvailableReplicas
}

// deploymentTimedOut reports whether Progressing was last updated more
// than progressDeadlineSeconds ago.
func deploymentTimedOut(d *api.Deployment, st *api.DeploymentStatus, now time.Time) bool {
	c := findCondition(st.Conditions, condProgressing)
	switch {
	case !hasProgressDeadline(d) || c == nil:
		return false
	case c.Reason == reasonProgressDeadlineExceeded:
		return true
	case c.Reason == reasonNewReplicaSetAvailable || c.LastUpdateTime == nil:
		return false
	}
	return c.LastUpdateTime.Add(time.Duration(*d.Spec.ProgressDeadlineSeconds) * time.Second).Before(now)
}

// findCondition returns the condition of a type, or nil.
func findCondition(conds []api.DeploymentCondition, typ string) *api.DeploymentCondition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}

// setCondition puts c in conds, unless one of its type has its status and
// reason already; a condition keeping its status keeps its transition
// time.
func setCondition(conds []api.DeploymentCondition, c api.DeploymentCondition) []api.DeploymentCondition {
	if cur := findCondition(conds, c.Type); cur != nil {
		if cur.Status == c.Status && cur.Reason == c.Reason {
			return conds
		}
		if cur.Status == c.Status {
			c.LastTransitionTime = cur.LastTransitionTime
		}
	}
	return append(removeCondition(conds, c.Type), c)
}

// removeCondition returns a copy of conds without the type.
func removeCondition(conds []api.DeploymentCondition, typ string) []api.DeploymentCondition {
	out := make([]api.DeploymentCondition, 0, len(conds))
	for _, c := range conds {
		if c.Type != typ {
			out = append(out, c)
		}
	}
	return out
}

package taints

import (
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// ToleratesTaint reports whether tol tolerates taint (SPEC TNT-2): an
// empty effect matches every effect; operator Equal (or empty, its
// default) needs the same key and value; Exists needs the same key, and an
// empty key with Exists matches every taint. A toleration that names a
// condition taint by its older name (node.alpha.kubernetes.io/notReady)
// tolerates it under today's (api.CurrentTaintKey).
func ToleratesTaint(tol *api.Toleration, taint *api.Taint) bool {
	if tol.Effect != "" && tol.Effect != taint.Effect {
		return false
	}
	sameKey := tol.Key == taint.Key || api.CurrentTaintKey(tol.Key) == taint.Key
	switch tol.Operator {
	case api.TolerationOpExists:
		return tol.Key == "" || sameKey
	case api.TolerationOpEqual, "":
		return sameKey && tol.Value == taint.Value
	}
	// Validation refuses other operators; a stored object that has one
	// tolerates nothing rather than everything.
	return false
}

// TolerationsTolerateTaint reports whether any of tols tolerates taint.
func TolerationsTolerateTaint(tols []api.Toleration, taint *api.Taint) bool {
	for i := range tols {
		if ToleratesTaint(&tols[i], taint) {
			return true
		}
	}
	return false
}

// FindMatchingUntoleratedTaint returns the first taint for which filter
// reports true (nil filter: every taint) and that no toleration matches.
func FindMatchingUntoleratedTaint(taints []api.Taint, tols []api.Toleration, filter func(*api.Taint) bool) (api.Taint, bool) {
	for i := range taints {
		t := &taints[i]
		if filter != nil && !filter(t) {
			continue
		}
		if !TolerationsTolerateTaint(tols, t) {
			return *t, true
		}
	}
	return api.Taint{}, false
}

// IsNoScheduleOrNoExecute reports whether a taint keeps new pods off a
// node: the filter of the PodToleratesNodeTaints predicate.
func IsNoScheduleOrNoExecute(t *api.Taint) bool {
	return t.Effect == api.TaintEffectNoSchedule || t.Effect == api.TaintEffectNoExecute
}

// IsNoExecute reports whether a taint's effect is NoExecute.
func IsNoExecute(t *api.Taint) bool { return t.Effect == api.TaintEffectNoExecute }

// CountUntoleratedPreferNoSchedule counts the PreferNoSchedule taints that
// no toleration matches: what TaintTolerationPriority minimises.
func CountUntoleratedPreferNoSchedule(taints []api.Taint, tols []api.Toleration) int {
	n := 0
	for i := range taints {
		t := &taints[i]
		if t.Effect == api.TaintEffectPreferNoSchedule && !TolerationsTolerateTaint(tols, t) {
			n++
		}
	}
	return n
}

// Placement is what the taints of a node mean for placing a new pod there.
type Placement int

// Placements, from best to worst.
const (
	// Allowed: every taint that matters is tolerated.
	Allowed Placement = iota
	// Avoided: only PreferNoSchedule taints are left untolerated; the
	// scheduler places the pod elsewhere if it can.
	Avoided
	// Refused: a NoSchedule or NoExecute taint is left untolerated.
	Refused
)

// String names the placement.
func (p Placement) String() string {
	switch p {
	case Allowed:
		return "Allowed"
	case Avoided:
		return "Avoided"
	case Refused:
		return "Refused"
	}
	return "Placement(?)"
}

// Verdict applies SPEC TNT-3 to a node's taints and a pod's tolerations.
type Verdict struct {
	// Placement is for a pod that is not on the node yet.
	Placement Placement
	// Evict reports whether a pod already running on the node must go at
	// once: an untolerated NoExecute taint (TNT-4 adds the delayed case,
	// see NoExecuteDeadline).
	Evict bool
	// Untolerated lists the taints that no toleration matches, in the
	// node's order.
	Untolerated []api.Taint
}

// Evaluate applies SPEC TNT-3: drop the taints some toleration matches;
// of the rest, any NoSchedule or NoExecute refuses a new pod, else any
// PreferNoSchedule avoids it; any NoExecute evicts a running pod.
func Evaluate(taints []api.Taint, tols []api.Toleration) Verdict {
	var v Verdict
	for i := range taints {
		t := &taints[i]
		if TolerationsTolerateTaint(tols, t) {
			continue
		}
		v.Untolerated = append(v.Untolerated, *t)
		switch t.Effect {
		case api.TaintEffectNoSchedule:
			v.Placement = Refused
		case api.TaintEffectNoExecute:
			v.Placement = Refused
			v.Evict = true
		case api.TaintEffectPreferNoSchedule:
			if v.Placement == Allowed {
				v.Placement = Avoided
			}
		}
	}
	return v
}

// NoExecuteDeadline says how long a running pod may stay on a node with
// these taints (SPEC TNT-4). evictNow is true when some NoExecute taint is
// not tolerated at all. Otherwise forever is true when every matching
// toleration of every NoExecute taint has no tolerationSeconds (or there
// is no NoExecute taint); else d is the least tolerationSeconds among the
// tolerations that match a NoExecute taint, counted by the caller from
// when that taint was added. A negative tolerationSeconds counts as zero,
// as in Kubernetes.
func NoExecuteDeadline(taints []api.Taint, tols []api.Toleration) (d time.Duration, forever, evictNow bool) {
	forever = true
	for i := range taints {
		t := &taints[i]
		if t.Effect != api.TaintEffectNoExecute {
			continue
		}
		matched := false
		for j := range tols {
			tol := &tols[j]
			if !ToleratesTaint(tol, t) {
				continue
			}
			matched = true
			if tol.TolerationSeconds == nil {
				continue
			}
			s := max(*tol.TolerationSeconds, 0)
			td := time.Duration(s) * time.Second
			if forever || td < d {
				d, forever = td, false
			}
		}
		if !matched {
			return 0, false, true
		}
	}
	if forever {
		d = 0
	}
	return d, forever, false
}

// EvictAt says when a pod running on a node with these taints is to be
// evicted (SPEC TNT-4), each NoExecute taint counting from when it was
// added (added reports that time): not tolerated, at once, that is at its
// time added; tolerated with tolerationSeconds, that long after (the
// least of its matching tolerations); tolerated without, never. The
// earliest of the taints' times wins; evict is false when none applies.
func EvictAt(taints []api.Taint, tols []api.Toleration, added func(*api.Taint) time.Time) (at time.Time, evict bool) {
	for i := range taints {
		t := &taints[i]
		if t.Effect != api.TaintEffectNoExecute {
			continue
		}
		d, forever, _ := NoExecuteDeadline(taints[i:i+1], tols)
		if forever {
			continue
		}
		if when := added(t).Add(d); !evict || when.Before(at) {
			at, evict = when, true
		}
	}
	return at, evict
}

// UnreachableToleration is how long a pod stays on a node that its
// control plane cannot reach (the node.kubernetes.io/unreachable NoExecute
// taint, TNT-9): d from when the taint is added, or forever. Not
// tolerated at all is d = 0.
func UnreachableToleration(tols []api.Toleration) (d time.Duration, forever bool) {
	d, forever, _ = NoExecuteDeadline([]api.Taint{{Key: api.TaintNodeUnreachable, Effect: api.TaintEffectNoExecute}}, tols)
	return d, forever
}

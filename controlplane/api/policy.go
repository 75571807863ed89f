package api

// PodDisruptionBudget (policy/v1) bounds how many pods of a set may be
// down at once through voluntary disruptions: the eviction API refuses an
// eviction that would break it.
type PodDisruptionBudget struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata"`
	Spec       PodDisruptionBudgetSpec   `json:"spec,omitzero"`
	Status     PodDisruptionBudgetStatus `json:"status,omitzero"`
}

// PodDisruptionBudgetSpec is one of minAvailable and maxUnavailable (a
// count or a percentage of the expected pods) and the selector of the
// pods.
type PodDisruptionBudgetSpec struct {
	MinAvailable   *IntOrString   `json:"minAvailable,omitempty"`
	Selector       *LabelSelector `json:"selector,omitempty"`
	MaxUnavailable *IntOrString   `json:"maxUnavailable,omitempty"`
}

// PodDisruptionBudgetStatus is what the budget allows now.
type PodDisruptionBudgetStatus struct {
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	DisruptionsAllowed int32 `json:"disruptionsAllowed"`
	CurrentHealthy     int32 `json:"currentHealthy"`
	DesiredHealthy     int32 `json:"desiredHealthy"`
	ExpectedPods       int32 `json:"expectedPods"`
}

// Eviction (policy/v1) asks, through pods/NAME/eviction, for a pod to be
// deleted gracefully if its disruption budgets allow it.
type Eviction struct {
	TypeMeta      `json:",inline"`
	ObjectMeta    `json:"metadata"`
	DeleteOptions *DeleteOptionsBody `json:"deleteOptions,omitempty"`
}

// DeleteOptionsBody is the DeleteOptions body a DELETE (or an
// Eviction's deleteOptions) carries, as Kubernetes clients send it. The
// preconditions and the grace period act; the other fields are accepted
// so that such clients work.
type DeleteOptionsBody struct {
	Kind               string `json:"kind,omitempty"`
	APIVersion         string `json:"apiVersion,omitempty"`
	GracePeriodSeconds *int64 `json:"gracePeriodSeconds,omitempty"`
	Preconditions      *struct {
		UID             *string `json:"uid,omitempty"`
		ResourceVersion *string `json:"resourceVersion,omitempty"`
	} `json:"preconditions,omitempty"`
	OrphanDependents  *bool    `json:"orphanDependents,omitempty"`
	PropagationPolicy *string  `json:"propagationPolicy,omitempty"`
	DryRun            []string `json:"dryRun,omitempty"`
}

func validatePodDisruptionBudget(b *PodDisruptionBudget) ErrorList {
	sp := Root("spec")
	var errs ErrorList
	switch {
	case b.Spec.MinAvailable != nil && b.Spec.MaxUnavailable != nil:
		errs = append(errs, Invalid(sp, b.Spec, "minAvailable and maxUnavailable cannot be both set"))
	case b.Spec.MinAvailable == nil && b.Spec.MaxUnavailable == nil:
		errs = append(errs, Required(sp.Child("minAvailable"), "one of minAvailable and maxUnavailable"))
	}
	for _, f := range []struct {
		v    *IntOrString
		name string
	}{{b.Spec.MinAvailable, "minAvailable"}, {b.Spec.MaxUnavailable, "maxUnavailable"}} {
		n, fe := validateIntOrPercent(f.v, sp.Child(f.name))
		errs = append(errs, fe...)
		if len(fe) == 0 && f.v != nil && f.v.IsString && n > 100 {
			errs = append(errs, Invalid(sp.Child(f.name), f.v.StrVal, "must not be greater than 100%"))
		}
	}
	if b.Spec.Selector != nil {
		errs = append(errs, ValidateLabelSelector(b.Spec.Selector, sp.Child("selector"))...)
	}
	return errs
}

// Scale resolves the controller ref of a pod in ns to the object that
// sets the pod's scale and says how many pods it wants: its UID (pods of
// one scale count it once) and the number; false when it cannot tell
// (then the pod counts for itself). ResolveScale is the rule.
type Scale func(ns string, ref *OwnerReference) (uid string, pods int32, ok bool)

// ResolveScale is Kubernetes' disruption controller's rule over get
// (which fetches an object by kind, namespace and name): a ReplicaSet
// controlled by a Deployment counts the Deployment's replicas (during a
// rollout the pods of its old and new replica sets are one scale); any
// other ReplicaSet its own replicas; a DaemonSet the nodes it should run
// on.
func ResolveScale(get func(kind, ns, name string) (Object, bool), ns string, ref *OwnerReference) (string, int32, bool) {
	look := func(ref *OwnerReference) (Object, bool) {
		if ref.Kind != "ReplicaSet" && ref.Kind != "DaemonSet" && ref.Kind != "Deployment" {
			return nil, false
		}
		o, ok := get(ref.Kind, ns, ref.Name)
		if !ok || o.GetObjectMeta().UID != ref.UID {
			return nil, false
		}
		return o, true
	}
	o, ok := look(ref)
	if !ok {
		return "", 0, false
	}
	switch o := o.(type) {
	case *ReplicaSet:
		if up := ControllerRef(&o.ObjectMeta); up != nil && up.Kind == "Deployment" {
			if d, ok := look(up); ok {
				return up.UID, replicasOrOne(d.(*Deployment).Spec.Replicas), true
			}
		}
		return ref.UID, replicasOrOne(o.Spec.Replicas), true
	case *DaemonSet:
		return ref.UID, o.Status.DesiredNumberScheduled, true
	}
	return "", 0, false
}

func replicasOrOne(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}

// BudgetStatus is the disruption budget arithmetic, as Kubernetes does
// it, over the pods b selects. currentHealthy counts those Ready and not
// being deleted. expectedPods is the number of pods selected (not
// finished) when minAvailable is a count; otherwise, as in Kubernetes,
// the scale of their controllers (each counted once; scale may be nil),
// so that a pod gone and not yet replaced is still expected.
// desiredHealthy is minAvailable (a percentage of expectedPods rounded
// up) or expectedPods less maxUnavailable (a percentage rounded up);
// disruptionsAllowed the healthy pods beyond that.
func BudgetStatus(b *PodDisruptionBudget, pods []*Pod, scale Scale) PodDisruptionBudgetStatus {
	var st PodDisruptionBudgetStatus
	byScale := b.Spec.MaxUnavailable != nil || b.Spec.MinAvailable != nil && b.Spec.MinAvailable.IsString
	seen := map[string]bool{}
	for _, p := range pods {
		if IsPodPhaseTerminal(p.Status.Phase) {
			continue
		}
		if PodHealthy(p) {
			st.CurrentHealthy++
		}
		if !byScale || scale == nil {
			st.ExpectedPods++
			continue
		}
		ref := ControllerRef(&p.ObjectMeta)
		if ref == nil {
			st.ExpectedPods++
			continue
		}
		uid, n, ok := scale(p.Namespace, ref)
		if !ok {
			st.ExpectedPods++
			continue
		}
		if !seen[uid] {
			seen[uid] = true
			st.ExpectedPods += n
		}
	}
	switch {
	case b.Spec.MinAvailable != nil:
		st.DesiredHealthy = ScaledValue(b.Spec.MinAvailable, st.ExpectedPods, true)
	case b.Spec.MaxUnavailable != nil:
		st.DesiredHealthy = max(0, st.ExpectedPods-ScaledValue(b.Spec.MaxUnavailable, st.ExpectedPods, true))
	}
	st.DisruptionsAllowed = max(0, st.CurrentHealthy-st.DesiredHealthy)
	st.ObservedGeneration = b.Generation
	return st
}

// PodHealthy reports whether a pod counts as healthy for its budgets:
// Ready and not being deleted.
func PodHealthy(p *Pod) bool {
	return p.DeletionTimestamp == nil && PodIsReady(p)
}

// PodConditionOf is p's condition of type t, or nil.
func PodConditionOf(p *Pod, t string) *PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// PodIsReady reports whether p's Ready condition is True.
func PodIsReady(p *Pod) bool {
	c := PodConditionOf(p, PodReady)
	return c != nil && c.Status == ConditionTrue
}

// ScaledValue resolves a count or a percentage (maxSurge,
// maxUnavailable, minAvailable) against total, a percentage rounded up or
// down; nil is 0. Validation guarantees the form.
func ScaledValue(v *IntOrString, total int32, roundUp bool) int32 {
	if v == nil {
		return 0
	}
	if !v.IsString {
		return v.IntVal
	}
	n, errs := validateIntOrPercent(v, Root(""))
	if len(errs) > 0 {
		return 0
	}
	n *= int64(total)
	if roundUp {
		return int32((n + 99) / 100)
	}
	return int32(n / 100)
}

package core

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/auth"
	"github.com/outpost-edge/outpost/controlplane/store"
)

var pdbResource = api.ResourceForKind("PodDisruptionBudget")

// ReasonDisruptionBudget is the cause of an eviction a budget refused.
const ReasonDisruptionBudget = "DisruptionBudget"

// Evict is POST pods/NAME/eviction (policy/v1): a graceful delete of the
// pod if the disruption budget that selects it allows one more
// disruption, else 429 TooManyRequests naming the budget. Evictions are
// taken one at a time, each on the store as the one before left it, so
// that two cannot both spend the budget's last disruption. A pod not
// running (pending, finished) or already terminating is evicted without
// asking its budget, and one that is not ready only while the budget is
// met, as Kubernetes does by default.
func (c *Core) Evict(ctx context.Context, id *auth.Identity, ns, name string, opts api.DeleteOptions) (*store.Result, error) {
	if err := c.awaitBarrier(ctx); err != nil {
		return nil, err
	}
	c.evictMu.Lock()
	defer c.evictMu.Unlock()
	obj, err := c.st.GetObject(podsResource, ns, name)
	if err != nil {
		return nil, err
	}
	pod := obj.(*api.Pod)
	if opts.UID != "" && opts.UID != pod.UID {
		return nil, api.NewConflict(podsResource, name, fmt.Sprintf("Precondition failed: UID in precondition: %s, UID in object meta: %s", opts.UID, pod.UID))
	}
	if opts.ResourceVersion != "" && opts.ResourceVersion != pod.ResourceVersion {
		return nil, api.NewConflict(podsResource, name, fmt.Sprintf("Precondition failed: ResourceVersion in precondition: %s, ResourceVersion in object meta: %s", opts.ResourceVersion, pod.ResourceVersion))
	}
	// The condition written below moves the version on: the delete is
	// held to the UID.
	opts.ResourceVersion = ""
	ignoreBudget := pod.DeletionTimestamp != nil || pod.Spec.NodeName == "" ||
		pod.Status.Phase == api.PodPending || api.IsPodPhaseTerminal(pod.Status.Phase)
	if !ignoreBudget {
		budgets, err := c.budgetsOf(pod)
		if err != nil {
			return nil, err
		}
		switch len(budgets) {
		case 0:
		case 1:
			b := budgets[0]
			pods, err := c.podsOf(b)
			if err != nil {
				return nil, err
			}
			st := api.BudgetStatus(b, pods, c.scale)
			healthy := api.PodHealthy(pod)
			if healthy && st.DisruptionsAllowed < 1 || !healthy && st.CurrentHealthy < st.DesiredHealthy {
				return nil, api.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.",
					&api.StatusDetails{Name: name, Kind: "pods", Causes: []api.StatusCause{{Type: ReasonDisruptionBudget,
						Message: fmt.Sprintf("The disruption budget %s needs %d healthy pods and has %d currently", b.Name, st.DesiredHealthy, st.CurrentHealthy)}}})
			}
		default:
			var names []string
			for _, b := range budgets {
				names = append(names, b.Name)
			}
			return nil, api.NewInternalError(fmt.Errorf("this pod has more than one PodDisruptionBudget, which the eviction subresource does not support (%v)", names))
		}
	}
	if pod.DeletionTimestamp == nil {
		if err := c.markEvicted(ctx, pod); err != nil {
			return nil, err
		}
	}
	opts.UID = pod.UID
	return c.Delete(ctx, id, podsResource, ns, name, opts)
}

// markEvicted adds the DisruptionTarget condition an eviction gives, as
// Kubernetes does, before the delete.
func (c *Core) markEvicted(ctx context.Context, pod *api.Pod) error {
	_, raw, err := c.st.Get(podsResource, pod.Namespace, pod.Name)
	if err != nil {
		return err
	}
	cp, err := copyOf(podsResource, raw)
	if err != nil {
		return err
	}
	upd := cp.(*api.Pod)
	cond := api.PodCondition{Type: api.PodDisruptionTarget, Status: api.ConditionTrue, Reason: "EvictionByEvictionAPI",
		Message: "Eviction API: evicting", LastTransitionTime: api.NewTime(time.Now())}
	if i := slices.IndexFunc(upd.Status.Conditions, func(pc api.PodCondition) bool { return pc.Type == api.PodDisruptionTarget }); i >= 0 {
		upd.Status.Conditions[i] = cond
	} else {
		upd.Status.Conditions = append(upd.Status.Conditions, cond)
	}
	cmd, err := store.UpdateCmd(upd, store.SubresourceStatus)
	if err != nil {
		return api.NewInternalError(err)
	}
	_, err = c.Apply(ctx, cmd)
	return err
}

// budgetsOf lists the disruption budgets of pod's namespace whose
// selector matches it.
func (c *Core) budgetsOf(pod *api.Pod) ([]*api.PodDisruptionBudget, error) {
	objs, _, err := c.st.ListObjects(pdbResource, pod.Namespace, store.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []*api.PodDisruptionBudget
	for _, obj := range objs {
		b := obj.(*api.PodDisruptionBudget)
		sel, err := api.SelectorFromLabelSelector(b.Spec.Selector)
		if err != nil || b.Spec.Selector == nil {
			continue // selects nothing, as in Kubernetes
		}
		if sel.Matches(pod.Labels) {
			out = append(out, b)
		}
	}
	return out, nil
}

// podsOf lists the pods b selects.
func (c *Core) podsOf(b *api.PodDisruptionBudget) ([]*api.Pod, error) {
	sel, err := api.SelectorFromLabelSelector(b.Spec.Selector)
	if err != nil {
		return nil, api.NewInternalError(err)
	}
	objs, _, err := c.st.ListObjects(podsResource, b.Namespace, store.ListOptions{Label: sel})
	if err != nil {
		return nil, err
	}
	out := make([]*api.Pod, len(objs))
	for i, obj := range objs {
		out[i] = obj.(*api.Pod)
	}
	return out, nil
}

// scale is api.Scale on the store: a replica set's replicas, a daemon
// set's desired pods.
func (c *Core) scale(ns string, ref *api.OwnerReference) (string, int32, bool) {
	return api.ResolveScale(func(kind, ns, name string) (api.Object, bool) {
		obj, err := c.st.GetObject(api.ResourceForKind(kind), ns, name)
		return obj, err == nil
	}, ns, ref)
}

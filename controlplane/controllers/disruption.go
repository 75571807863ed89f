package controllers

import (
	"context"
	"fmt"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/controller"
)

// disruption keeps the status of every PodDisruptionBudget current
// (api.BudgetStatus), for `outpost get pdb` and `describe`. The eviction
// API does not read it: it computes the budget from the store at the
// moment of each eviction, so a status that lags cannot let two
// evictions through.
type disruption struct {
	*loop
	s *shared
}

func newDisruption(s *shared) *disruption {
	c := &disruption{s: s}
	c.loop = newLoop(s, "disruption", c.sync)
	return c
}

// onBudget queues a budget that changed.
func (c *disruption) onBudget(ev controller.Event) {
	if ev.Type != api.Deleted {
		c.q.Add(controller.KeyOf(ev.Object))
	}
}

// onPod queues the budgets of the pod's namespace that select it (before
// or after the change).
func (c *disruption) onPod(ev controller.Event) {
	p, ok := ev.Object.(*api.Pod)
	if !ok {
		return
	}
	for _, obj := range c.s.pdbInf.List() {
		b := obj.(*api.PodDisruptionBudget)
		if b.Namespace != p.Namespace {
			continue
		}
		sel, err := c.s.sels.of(b, b.Spec.Selector)
		if err != nil {
			continue
		}
		if sel.Matches(p.Labels) || ev.Old != nil && sel.Matches(ev.Old.GetObjectMeta().Labels) {
			c.q.Add(controller.KeyOf(b))
		}
	}
}

func (c *disruption) sync(ctx context.Context, key string) (time.Duration, error) {
	ns, name, err := splitKey(key)
	if err != nil {
		return 0, nil
	}
	obj, ok := c.s.pdbInf.Get(ns, name)
	if !ok {
		return 0, nil
	}
	b := obj.(*api.PodDisruptionBudget)
	var pods []*api.Pod
	if sel, err := c.s.sels.of(b, b.Spec.Selector); err == nil && b.Spec.Selector != nil {
		for _, o := range c.s.pods.inNamespace(ns) {
			if p := o.(*api.Pod); sel.Matches(p.Labels) {
				pods = append(pods, p)
			}
		}
	}
	st := api.BudgetStatus(b, pods, c.scale)
	if st == b.Status {
		return 0, nil
	}
	cp, err := controller.Copy(b)
	if err != nil {
		return 0, err
	}
	upd := cp.(*api.PodDisruptionBudget)
	upd.Status = st
	if _, err := c.s.client.UpdateStatus(ctx, upd); err != nil && !api.IsNotFound(err) {
		return 0, fmt.Errorf("status of budget %s: %w", key, err)
	}
	return 0, nil
}

// scale is api.Scale on the caches.
func (c *disruption) scale(ns string, ref *api.OwnerReference) (string, int32, bool) {
	return api.ResolveScale(func(kind, ns, name string) (api.Object, bool) {
		inf := map[string]*controller.Informer{"ReplicaSet": c.s.rsInf, "Deployment": c.s.deployInf, "DaemonSet": c.s.dsInf}[kind]
		if inf == nil {
			return nil, false
		}
		return inf.Get(ns, name)
	}, ns, ref)
}

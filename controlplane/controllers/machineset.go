package controllers

import (
	"cmp"
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/controller"
)

// The machine set controller (issue 11 item 2): a set owns up to
// replicas machines. Hosts cannot be made here, so it claims free
// machines (matching its selector, owned by no set, not being deleted) in
// name order, and says when too few are free; scaling down, it deletes
// members (their deletion phase drains and releases them): those with
// the delete-machine annotation first, then by deletePolicy. A member
// that no longer matches the selector is let go. Deleting a set leaves
// its machines (their hosts are not released): unlike OpenShift, where a
// set's machines go with it, here they become free for another set.

type machineSet struct {
	*loop
	s *shared
}

func newMachineSet(s *shared) *machineSet {
	c := &machineSet{s: s}
	c.loop = newLoop(s, "machineset", c.sync)
	return c
}

func (c *machineSet) onSet(ev controller.Event) {
	if ev.Type != api.Deleted {
		c.q.Add(ev.Object.GetObjectMeta().Name)
	}
}

// onMachine queues every set: a machine may have become free, or a
// member changed.
func (c *machineSet) onMachine(controller.Event) { c.addAll(c.s.msInf) }

func (c *machineSet) sync(ctx context.Context, name string) (time.Duration, error) {
	obj, ok := c.s.msInf.Get("", name)
	if !ok {
		return 0, nil
	}
	ms := obj.(*api.MachineSet)
	if ms.DeletionTimestamp != nil {
		return 0, nil
	}
	sel, err := api.SelectorFromLabelSelector(&ms.Spec.Selector)
	if err != nil {
		return 0, nil
	}
	want := int32(1)
	if ms.Spec.Replicas != nil {
		want = *ms.Spec.Replicas
	}
	var members, free []*api.Machine
	for _, o := range c.s.machineInf.List() {
		m := o.(*api.Machine)
		ref := api.ControllerRef(&m.ObjectMeta)
		if ref != nil && ref.Kind == "MachineSet" && ref.UID != ms.UID {
			if o, ok := c.s.msInf.Get("", ref.Name); !ok || o.GetObjectMeta().UID != ref.UID {
				ref = nil // its set was deleted: the machine is free again
			}
		}
		switch {
		case ref != nil && ref.UID == ms.UID:
			if !sel.Matches(m.Labels) {
				if err := c.setOwner(ctx, m, nil); err != nil {
					return 0, err
				}
				continue
			}
			if m.DeletionTimestamp == nil {
				members = append(members, m)
			}
		case ref == nil && m.DeletionTimestamp == nil && sel.Matches(m.Labels) &&
			(m.Status.Phase == api.MachineRunning || m.Status.Phase == api.MachineProvisioned):
			free = append(free, m)
		}
	}
	msg := ""
	switch n := int32(len(members)); {
	case n < want:
		slices.SortFunc(free, func(a, b *api.Machine) int { return cmp.Compare(a.Name, b.Name) })
		need := int(want - n)
		for _, m := range free[:min(need, len(free))] {
			if err := c.setOwner(ctx, m, ms); err != nil {
				return 0, err
			}
			members = append(members, m)
			c.s.rec.event(ctx, ms, "machineset-controller", api.EventTypeNormal, "Claimed", "claimed free machine "+m.Name)
		}
		if len(free) < need {
			msg = fmt.Sprintf("%d of %d machines: no other free machine matches the selector; waiting for hosts to join", len(members), want)
		}
	case n > want:
		victims := c.deleteOrder(ms, members)[:n-want]
		for _, m := range victims {
			if err := ignoreGone(c.s.client.Delete(ctx, machinesResource, "", m.Name, preconditionUID(m.UID))); err != nil {
				return 0, fmt.Errorf("machine set %s: delete machine %s: %w", ms.Name, m.Name, err)
			}
			c.s.rec.event(ctx, ms, "machineset-controller", api.EventTypeNormal, "ScaledDown", "deleting machine "+m.Name)
		}
		members = slices.DeleteFunc(members, func(m *api.Machine) bool { return slices.Contains(victims, m) })
	}
	st := api.MachineSetStatus{Replicas: int32(len(members)), ObservedGeneration: ms.Generation, ErrorMessage: msg}
	for _, m := range members {
		if c.machineReady(m) {
			st.ReadyReplicas++
			st.AvailableReplicas++
		}
	}
	if st == ms.Status {
		return 0, nil
	}
	cp, err := controller.Copy(ms)
	if err != nil {
		return 0, err
	}
	upd := cp.(*api.MachineSet)
	upd.Status = st
	_, err = c.s.client.UpdateStatus(ctx, upd)
	return 0, ignoreGone(err)
}

// machineReady: Running with a Ready node.
func (c *machineSet) machineReady(m *api.Machine) bool {
	if m.Status.Phase != api.MachineRunning || m.Status.NodeRef == nil {
		return false
	}
	obj, ok := c.s.nodeInf.Get("", m.Status.NodeRef.Name)
	if !ok {
		return false
	}
	r := nodeReadyCondition(obj.(*api.Node))
	return r != nil && r.Status == api.ConditionTrue
}

// deleteOrder sorts members, the first to delete first: those with the
// delete-machine annotation, then by the set's policy (Random is a
// stable shuffle by name, so that a retried sync picks the same).
func (c *machineSet) deleteOrder(ms *api.MachineSet, members []*api.Machine) []*api.Machine {
	out := slices.Clone(members)
	marked := func(m *api.Machine) int {
		if _, ok := m.Annotations[api.AnnotationDeleteMachine]; ok {
			return 0
		}
		return 1
	}
	slices.SortStableFunc(out, func(a, b *api.Machine) int {
		if d := cmp.Compare(marked(a), marked(b)); d != 0 {
			return d
		}
		switch ms.Spec.DeletePolicy {
		case api.DeletePolicyOldest:
			return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Name, b.Name))
		case api.DeletePolicyNewest:
			return cmp.Or(b.CreationTimestamp.Compare(a.CreationTimestamp.Time), cmp.Compare(a.Name, b.Name))
		}
		return cmp.Or(cmp.Compare(shuffleKey(ms, a), shuffleKey(ms, b)), cmp.Compare(a.Name, b.Name))
	})
	return out
}

func shuffleKey(ms *api.MachineSet, m *api.Machine) uint64 {
	h := fnv.New64a()
	h.Write([]byte(ms.UID + "/" + m.Name))
	return h.Sum64()
}

// setOwner makes ms the controller of m, or (nil) lets m go.
func (c *machineSet) setOwner(ctx context.Context, m *api.Machine, ms *api.MachineSet) error {
	cp, err := controller.Copy(m)
	if err != nil {
		return err
	}
	upd := cp.(*api.Machine)
	upd.OwnerReferences = slices.DeleteFunc(upd.OwnerReferences, func(r api.OwnerReference) bool { return r.Controller != nil && *r.Controller })
	if ms != nil {
		yes := true
		upd.OwnerReferences = append(upd.OwnerReferences, api.OwnerReference{APIVersion: "machine.openshift.io/v1beta1", Kind: "MachineSet",
			Name: ms.Name, UID: ms.UID, Controller: &yes, BlockOwnerDeletion: &yes})
	}
	_, err = c.s.client.Update(ctx, upd)
	return ignoreGone(err)
}

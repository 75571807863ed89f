package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/controller"
	"github.com/outpost-edge/outpost/internal/promreg"
	"github.com/prometheus/client_golang/prometheus"
)

// The machine health check controller (SPEC CPL-4): a selected machine
// whose node has matched an unhealthy condition for its timeout, whose
// node is gone, or that has had no node for the startup timeout is
// deleted (its deletion phase does the rest), unless more than
// maxUnhealthy of the selected machines are unhealthy at once: then it
// deletes none and says why, since that many failures at once is more
// likely the network or a change under way than the machines.

const componentHealthCheck = "machinehealthcheck-controller"

type healthCheck struct {
	*loop
	s *shared
	// Metrics by check (nil without a registry).
	unhealthyM, expected, restricted *prometheus.GaugeVec
	remediations                     *prometheus.CounterVec
}

func newHealthCheck(s *shared, reg prometheus.Registerer) *healthCheck {
	c := &healthCheck{s: s}
	c.loop = newLoop(s, "machinehealthcheck", c.sync)
	if reg != nil {
		gauge := func(name, help string) *prometheus.GaugeVec {
			return promreg.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
				Namespace: "outpost", Subsystem: "machinehealthcheck", Name: name, Help: help}, []string{"check"}), s.log)
		}
		c.unhealthyM = gauge("unhealthy_machines", "Machines a health check finds unhealthy.")
		c.expected = gauge("expected_machines", "Machines a health check selects.")
		c.restricted = gauge("remediation_restricted", "1 while more machines of a health check are unhealthy than its maxUnhealthy, so it remediates none.")
		c.remediations = promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "outpost", Subsystem: "machinehealthcheck", Name: "remediations_total",
			Help: "Unhealthy machines a health check deleted."}, []string{"check"}), s.log)
	}
	return c
}

func (c *healthCheck) onCheck(ev controller.Event) {
	if ev.Type != api.Deleted {
		c.q.Add(ev.Object.GetObjectMeta().Name)
	}
}

// onChange queues every check: machines and nodes are few, checks fewer.
func (c *healthCheck) onChange(controller.Event) { c.addAll(c.s.mhcInf) }

type unhealthyMachine struct {
	m   *api.Machine
	why string
}

func (c *healthCheck) sync(ctx context.Context, name string) (time.Duration, error) {
	obj, ok := c.s.mhcInf.Get("", name)
	if !ok {
		return 0, nil
	}
	h := obj.(*api.MachineHealthCheck)
	sel, err := api.SelectorFromLabelSelector(&h.Spec.Selector)
	if err != nil {
		return 0, nil // validation refuses such selectors
	}
	now := c.s.now()
	var total int32
	// sick are to be remediated; notHealthy the others that are not
	// healthy (as OpenShift counts them): being deleted, or matching an
	// unhealthy condition whose timeout has not run out. They count
	// toward maxUnhealthy too, so a check acts on one failure at a time
	// and not while a remediation is under way or failures spread.
	var sick, notHealthy []unhealthyMachine
	var next time.Duration
	for _, o := range c.s.machineInf.List() {
		m := o.(*api.Machine)
		if !sel.Matches(m.Labels) {
			continue
		}
		total++
		if m.DeletionTimestamp != nil {
			notHealthy = append(notHealthy, unhealthyMachine{m, "being deleted"})
			continue
		}
		why, wait := c.unhealthy(h, m, now)
		switch {
		case why != "":
			sick = append(sick, unhealthyMachine{m, why})
		case wait > 0:
			notHealthy = append(notHealthy, unhealthyMachine{m, fmt.Sprintf("unhealthy for %s more", wait.Round(time.Second))})
			if next == 0 || wait < next {
				next = wait
			}
		}
	}
	unhealthyN := int32(len(sick) + len(notHealthy))
	maxUnhealthy := h.Spec.MaxUnhealthy
	if maxUnhealthy == nil {
		all := api.FromString("100%")
		maxUnhealthy = &all
	}
	allowed := api.ScaledValue(maxUnhealthy, total, false)
	st := h.Status
	healthy := total - unhealthyN
	st.ExpectedMachines, st.CurrentHealthy = &total, &healthy
	st.RemediationsAllowed = max(0, allowed-unhealthyN)
	if c.unhealthyM != nil {
		c.unhealthyM.WithLabelValues(h.Name).Set(float64(unhealthyN))
		c.expected.WithLabelValues(h.Name).Set(float64(total))
		c.restricted.WithLabelValues(h.Name).Set(0)
	}
	cond := api.MachineCondition{Type: api.RemediationAllowed, Status: api.ConditionTrue}
	if unhealthyN > allowed && len(sick) > 0 {
		if c.restricted != nil {
			c.restricted.WithLabelValues(h.Name).Set(1)
		}
		st.RemediationsAllowed = 0
		cond = api.MachineCondition{Type: api.RemediationAllowed, Status: api.ConditionFalse, Severity: "Warning", Reason: "TooManyUnhealthy",
			Message: fmt.Sprintf("%d of %d machines are unhealthy, more than maxUnhealthy %s: none is remediated (%s)", unhealthyN, total, maxUnhealthy.String(), sickNames(append(sick, notHealthy...)))}
		c.s.rec.event(ctx, h, componentHealthCheck, api.EventTypeWarning, "RemediationRestricted", cond.Message)
		sick = nil
	}
	for _, u := range sick {
		// The store, not the cache: a machine deleted by an earlier look
		// may not show so in the cache yet, and is deleted once.
		if cur, err := c.s.client.Get(machinesResource, "", u.m.Name); err != nil || cur.GetObjectMeta().DeletionTimestamp != nil || cur.GetObjectMeta().UID != u.m.UID {
			continue
		}
		err := c.s.client.Delete(ctx, machinesResource, "", u.m.Name, preconditionUID(u.m.UID))
		if err := ignoreGone(err); err != nil {
			return 0, fmt.Errorf("health check %s: delete machine %s: %w", h.Name, u.m.Name, err)
		}
		c.log.Info("deleting an unhealthy machine", "check", h.Name, "machine", u.m.Name, "why", u.why)
		if c.remediations != nil {
			c.remediations.WithLabelValues(h.Name).Inc()
		}
		c.s.rec.event(ctx, u.m, componentHealthCheck, api.EventTypeNormal, "MachineDeleted", "Machine "+u.m.Name+" is unhealthy ("+u.why+"): deleting it, as health check "+h.Name+" says")
	}
	i := slices.IndexFunc(st.Conditions, func(mc api.MachineCondition) bool { return mc.Type == api.RemediationAllowed })
	if i >= 0 && st.Conditions[i].Status == cond.Status {
		cond.LastTransitionTime = st.Conditions[i].LastTransitionTime
	} else {
		cond.LastTransitionTime = api.NewTime(now)
	}
	conds := slices.Clone(st.Conditions)
	if i >= 0 {
		conds[i] = cond
	} else {
		conds = append(conds, cond)
	}
	st.Conditions = conds
	if !sameCheckStatus(h.Status, st) {
		cp, err := controller.Copy(h)
		if err != nil {
			return 0, err
		}
		upd := cp.(*api.MachineHealthCheck)
		upd.Status = st
		if _, err := c.s.client.UpdateStatus(ctx, upd); ignoreGone(err) != nil {
			return 0, fmt.Errorf("health check %s: status: %w", h.Name, err)
		}
	}
	return next, nil
}

// unhealthy says why m is unhealthy by h at now ("" if it is not), and
// if not, how soon it may become so.
func (c *healthCheck) unhealthy(h *api.MachineHealthCheck, m *api.Machine, now time.Time) (string, time.Duration) {
	if m.Status.NodeRef == nil {
		t := h.Spec.StartupTimeout()
		if t == 0 {
			return "", 0
		}
		if left := m.CreationTimestamp.Add(t).Sub(now); left > 0 {
			return "", left
		}
		return fmt.Sprintf("no node after %s", t), 0
	}
	obj, ok := c.s.nodeInf.Get("", m.Status.NodeRef.Name)
	if !ok {
		return "its node " + m.Status.NodeRef.Name + " is gone", 0
	}
	n := obj.(*api.Node)
	var soonest time.Duration
	for _, uc := range h.Spec.UnhealthyConditions {
		timeout, err := time.ParseDuration(uc.Timeout)
		if err != nil {
			continue
		}
		for _, nc := range n.Status.Conditions {
			if nc.Type != uc.Type || nc.Status != uc.Status {
				continue
			}
			since := m.CreationTimestamp.Time
			if nc.LastTransitionTime != nil {
				since = nc.LastTransitionTime.Time
			}
			left := since.Add(timeout).Sub(now)
			if left <= 0 {
				return fmt.Sprintf("node condition %s=%s for more than %s", uc.Type, uc.Status, timeout), 0
			}
			if soonest == 0 || left < soonest {
				soonest = left
			}
		}
	}
	return "", soonest
}

func sickNames(sick []unhealthyMachine) string {
	var names []string
	for _, u := range sick {
		names = append(names, u.m.Name+": "+u.why)
	}
	return strings.Join(names, "; ")
}

func sameCheckStatus(a, b api.MachineHealthCheckStatus) bool {
	eq := func(x, y *int32) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	return eq(a.ExpectedMachines, b.ExpectedMachines) && eq(a.CurrentHealthy, b.CurrentHealthy) &&
		a.RemediationsAllowed == b.RemediationsAllowed &&
		slices.EqualFunc(a.Conditions, b.Conditions, func(x, y api.MachineCondition) bool {
			return x.Type == y.Type && x.Status == y.Status && x.Reason == y.Reason && x.Message == y.Message
		})
}

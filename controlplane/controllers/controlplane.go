package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/controller"
)

// The control plane machine set controller (SPEC CPL-2, CPL-3, issue 11
// item 4), on the leader with the quorum guard: it keeps the raft voters
// at spec.replicas spread over the failure domains. When a member is
// missing (its machine deleted, the guard waiting for a replacement) or,
// with the RollingUpdate strategy, a domain holds more than its share, it
// asks for a server on an eligible host (a machine labelled
// outpost.io/control-plane-eligible=true whose node is in the domain that
// keeps the balance) by annotating that machine; once the new server has
// joined, a move deletes the crowded domain's member's machine, which the
// quorum guard then removes from raft. One change at a time.
// The host's agent learns of the request in the reply to its heartbeat
// (server/liveness.go) and starts the server role (agent/serverrole.go).

const (
	LabelControlPlaneEligible = api.LabelControlPlaneEligible
	AnnotationServerRequested = api.AnnotationServerRequested
	// AnnotationServerRequestTimedOut marks a machine asked to serve
	// whose host did not join in time: it is not asked again.
	AnnotationServerRequestTimedOut = "outpost.io/server-request-timed-out"
	componentControlPlane           = "controlplanemachineset-controller"
	cpmsRetry                       = 5 * time.Second
)

type controlPlaneSet struct {
	*loop
	s    *shared
	raft Raft
}

func newControlPlaneSet(s *shared, raft Raft) *controlPlaneSet {
	c := &controlPlaneSet{s: s, raft: raft}
	c.loop = newLoop(s, "controlplanemachineset", c.sync)
	return c
}

func (c *controlPlaneSet) poke(controller.Event) { c.q.Add(api.ControlPlaneMachineSetName) }

// size is how many voters the quorum guard keeps: the active set's
// replicas, else DefaultControlPlaneSize.
func (c *controlPlaneSet) size() int {
	if obj, ok := c.s.cpmsInf.Get("", api.ControlPlaneMachineSetName); ok {
		cp := obj.(*api.ControlPlaneMachineSet)
		if cp.Spec.State == api.ControlPlaneActive && cp.Spec.Replicas != nil {
			return int(*cp.Spec.Replicas)
		}
	}
	return DefaultControlPlaneSize
}

func (c *controlPlaneSet) sync(ctx context.Context, name string) (time.Duration, error) {
	obj, ok := c.s.cpmsInf.Get("", name)
	if !ok {
		return 0, nil
	}
	cp := obj.(*api.ControlPlaneMachineSet)
	// The machines being deleted are looked at before the members (whose
	// listing probes every server, a dead one for seconds): a member
	// removed meanwhile, its machine gone, must not count as placed.
	deleting := deletingMachines(c.s)
	members, err := c.raft.Members(ctx)
	if err != nil {
		return 0, fmt.Errorf("control plane machine set: raft members: %w", err)
	}
	replicas := 3
	if cp.Spec.Replicas != nil {
		replicas = int(*cp.Spec.Replicas)
	}
	st := api.ControlPlaneMachineSetStatus{ObservedGeneration: cp.Generation}
	placed := map[string]string{} // voter → domain, those not being deleted
	voters := 0
	for _, r := range members {
		if !r.Voter {
			continue
		}
		voters++
		st.Replicas++
		if r.Reachable {
			st.ReadyReplicas++
		}
		if !deleting[r.ID] {
			placed[r.ID] = c.domainOf(r.ID, cp.Spec.FailureDomains.LabelKey)
		}
	}
	st.UnavailableReplicas = max(0, int32(replicas)-st.ReadyReplicas)
	domains := c.domains(cp, members)
	target := domainTargets(replicas, domains)
	for _, d := range placed {
		if target[d] > 0 {
			st.UpdatedReplicas++
		}
	}
	var cond api.MachineCondition
	var after time.Duration
	switch {
	case cp.Spec.State != api.ControlPlaneActive:
		cond = api.MachineCondition{Type: "Progressing", Status: api.ConditionFalse, Reason: "Inactive", Message: "spec.state is Inactive: the set watches and changes nothing"}
	case voters <= 1:
		cond = api.MachineCondition{Type: "Progressing", Status: api.ConditionFalse, Reason: "SingleServer",
			Message: "a one-server control plane (outpost dev, or a cluster not yet grown) has no quorum to keep: the set acts once three servers serve"}
	default:
		p := nextPlacement(placed, replicas, domains)
		if cp.Spec.Strategy.Type == api.StrategyOnDelete && len(placed) >= replicas {
			p = placement{} // no moves, only replacements
		}
		if p.Grow && voters > replicas {
			// One member change at a time: the quorum guard removes a
			// member being deleted before another server is asked for.
			cond, after = api.MachineCondition{Type: "Progressing", Status: api.ConditionTrue, Reason: "WaitingForRemoval",
				Message: fmt.Sprintf("%d voters, one more than %d: waiting for the quorum guard to remove a member being deleted before asking for another server", voters, replicas)}, cpmsRetry
			break
		}
		cond, err = c.act(ctx, cp, p, members)
		if err != nil {
			return 0, err
		}
		if cond.Status == api.ConditionTrue {
			after = cpmsRetry
		}
	}
	now := api.NewTime(c.s.now())
	cond.LastTransitionTime = now
	if i := slices.IndexFunc(cp.Status.Conditions, func(mc api.MachineCondition) bool { return mc.Type == cond.Type }); i >= 0 && cp.Status.Conditions[i].Status == cond.Status {
		cond.LastTransitionTime = cp.Status.Conditions[i].LastTransitionTime
	}
	st.Conditions = []api.MachineCondition{cond}
	if sameControlPlaneStatus(cp.Status, st) {
		return after, nil
	}
	cpy, err := controller.Copy(cp)
	if err != nil {
		return 0, err
	}
	upd := cpy.(*api.ControlPlaneMachineSet)
	upd.Status = st
	_, err = c.s.client.UpdateStatus(ctx, upd)
	return after, ignoreGone(err)
}

// act carries out one placement step and says what it did.
func (c *controlPlaneSet) act(ctx context.Context, cp *api.ControlPlaneMachineSet, p placement, members []RaftMember) (api.MachineCondition, error) {
	switch {
	case p.Remove != "":
		if _, err := c.s.client.Get(machinesResource, "", p.Remove); api.IsNotFound(err) {
			// A server whose host runs no agent has no machine to delete.
			msg := fmt.Sprintf("member %s is in a domain that holds more than its share, but has no machine (its host runs no agent): it cannot be moved", p.Remove)
			return api.MachineCondition{Type: "Progressing", Status: api.ConditionFalse, Severity: "Warning", Reason: "MemberWithoutMachine", Message: msg}, nil
		}
		if err := ignoreGone(c.s.client.Delete(ctx, machinesResource, "", p.Remove, api.DeleteOptions{})); err != nil {
			return api.MachineCondition{}, fmt.Errorf("control plane machine set: delete machine %s: %w", p.Remove, err)
		}
		c.s.rec.event(ctx, cp, componentControlPlane, api.EventTypeNormal, "Rebalancing", "deleting machine "+p.Remove+": its domain holds more than its share")
		return api.MachineCondition{Type: "Progressing", Status: api.ConditionTrue, Reason: "Rebalancing", Message: "moving member " + p.Remove}, nil
	case p.Grow:
		// One server asked for at a time: a request still pending (its
		// host not a voter yet) is waited for, wherever it is, until it
		// is too old.
		if m, since := c.pendingRequest(members); m != nil && !c.eligible(m) {
			// Its eligibility was taken away while it was asked: not
			// waited for, and another host is asked now.
			if err := c.withdrawRequest(ctx, cp, m); err != nil {
				return api.MachineCondition{}, err
			}
		} else if m != nil {
			if c.s.now().Sub(since) < serverRequestTimeout {
				// The time asked, not the time since: the status is
				// written only when it changes.
				return api.MachineCondition{Type: "Progressing", Status: api.ConditionTrue, Reason: "WaitingForServer",
					Message: fmt.Sprintf("waiting for a server on %s to join (asked at %s)", m.Name, since.UTC().Format(time.RFC3339))}, nil
			}
			cpy, err := controller.Copy(m)
			if err != nil {
				return api.MachineCondition{}, err
			}
			upd := cpy.(*api.Machine)
			delete(upd.Annotations, AnnotationServerRequested)
			// Marked, so that the same host is not asked again at once;
			// an administrator removes the mark once the host is fixed.
			upd.Annotations[AnnotationServerRequestTimedOut] = c.s.now().UTC().Format(time.RFC3339)
			if _, err := c.s.client.Update(ctx, upd); err != nil {
				return api.MachineCondition{}, ignoreGone(err)
			}
			msg := fmt.Sprintf("no server joined from %s within %s of the request: asking another host (is its agent running with --control-plane-eligible?); remove the annotation %s from machine %s to let it be asked again",
				m.Name, serverRequestTimeout, AnnotationServerRequestTimedOut, m.Name)
			c.s.rec.event(ctx, cp, componentControlPlane, api.EventTypeWarning, "ServerRequestTimedOut", msg)
			c.s.rec.event(ctx, m, componentControlPlane, api.EventTypeWarning, "ServerRequestTimedOut", msg)
		}
		host, requested := c.eligibleHost(p.Add, cp.Spec.FailureDomains.LabelKey, members)
		domain := p.Add
		if domain == "" {
			domain = "(any)"
		}
		if host == nil {
			msg := fmt.Sprintf("a server is wanted in domain %s, but no machine labelled %s=true there is free", domain, LabelControlPlaneEligible)
			c.s.rec.event(ctx, cp, componentControlPlane, api.EventTypeWarning, "NoEligibleHost", msg)
			return api.MachineCondition{Type: "Progressing", Status: api.ConditionFalse, Severity: "Warning", Reason: "NoEligibleHost", Message: msg}, nil
		}
		if !requested {
			cpy, err := controller.Copy(host)
			if err != nil {
				return api.MachineCondition{}, err
			}
			upd := cpy.(*api.Machine)
			if upd.Annotations == nil {
				upd.Annotations = map[string]string{}
			}
			upd.Annotations[AnnotationServerRequested] = domain + " " + c.s.now().UTC().Format(time.RFC3339)
			if _, err := c.s.client.Update(ctx, upd); err != nil {
				return api.MachineCondition{}, ignoreGone(err)
			}
			c.s.rec.event(ctx, cp, componentControlPlane, api.EventTypeNormal, "ServerRequested",
				fmt.Sprintf("a server is wanted in domain %s: requested on host %s (its agent starts the server role when it runs with --control-plane-eligible)", domain, host.Name))
		}
		return api.MachineCondition{Type: "Progressing", Status: api.ConditionTrue, Reason: "WaitingForServer",
			Message: fmt.Sprintf("waiting for a server on %s to join (domain %s)", host.Name, domain)}, nil
	}
	return api.MachineCondition{Type: "Progressing", Status: api.ConditionFalse, Reason: "Balanced", Message: "every member in place"}, nil
}

// withdrawRequest takes the request to serve back from m, whose host is
// no longer eligible, and says so.
func (c *controlPlaneSet) withdrawRequest(ctx context.Context, cp *api.ControlPlaneMachineSet, m *api.Machine) error {
	cpy, err := controller.Copy(m)
	if err != nil {
		return err
	}
	upd := cpy.(*api.Machine)
	delete(upd.Annotations, AnnotationServerRequested)
	if _, err := c.s.client.Update(ctx, upd); err != nil {
		return ignoreGone(err)
	}
	msg := fmt.Sprintf("host %s was asked to serve and is no longer labelled %s=true: the request is withdrawn", m.Name, LabelControlPlaneEligible)
	c.s.rec.event(ctx, cp, componentControlPlane, api.EventTypeNormal, "ServerRequestWithdrawn", msg)
	return nil
}

// serverRequestTimeout is how long a host asked to serve has to join
// before another is asked.
const serverRequestTimeout = 3 * time.Minute

// pendingRequest is a machine asked to serve whose host is no voter yet
// (nil if none), with when it was asked.
func (c *controlPlaneSet) pendingRequest(members []RaftMember) (*api.Machine, time.Time) {
	for _, o := range c.s.machineInf.List() {
		m := o.(*api.Machine)
		req, ok := m.Annotations[AnnotationServerRequested]
		if !ok || m.DeletionTimestamp != nil || slices.ContainsFunc(members, func(r RaftMember) bool { return r.ID == m.Name && r.Voter }) {
			continue
		}
		_, at, _ := strings.Cut(req, " ")
		since, err := time.Parse(time.RFC3339, at)
		if err != nil {
			since = m.CreationTimestamp.Time
		}
		return m, since
	}
	return nil, time.Time{}
}

// eligibleHost picks the machine to serve in domain: one already asked
// (requested true), else the first by name that is eligible, Running,
// no raft member, not being deleted, and in the domain.
func (c *controlPlaneSet) eligibleHost(domain, labelKey string, members []RaftMember) (*api.Machine, bool) {
	var picks []*api.Machine
	for _, o := range c.s.machineInf.List() {
		m := o.(*api.Machine)
		// A member is taken unless it is the requested host's server
		// still catching up as a non-voter.
		i := slices.IndexFunc(members, func(r RaftMember) bool { return r.ID == m.Name })
		if !c.eligible(m) || m.DeletionTimestamp != nil || m.Status.Phase != api.MachineRunning || i >= 0 && members[i].Voter {
			continue
		}
		if i >= 0 && m.Annotations[AnnotationServerRequested] == "" {
			continue
		}
		if _, failed := m.Annotations[AnnotationServerRequestTimedOut]; failed {
			continue
		}
		if labelKey != "" && c.domainOf(m.Name, labelKey) != domain {
			continue
		}
		if _, ok := m.Annotations[AnnotationServerRequested]; ok {
			return m, true
		}
		picks = append(picks, m)
	}
	if len(picks) == 0 {
		return nil, false
	}
	slices.SortFunc(picks, func(a, b *api.Machine) int { return strings.Compare(a.Name, b.Name) })
	return picks[0], false
}

// domains are the set's failure domains: the names it lists, else, with a
// label key, the label's values on the members' and the eligible hosts'
// nodes (a site that labels its hosts by zone need not list the zones).
func (c *controlPlaneSet) domains(cp *api.ControlPlaneMachineSet, members []RaftMember) []string {
	fd := cp.Spec.FailureDomains
	if len(fd.Names) > 0 || fd.LabelKey == "" {
		return fd.Names
	}
	var out []string
	add := func(name string) {
		if d := c.domainOf(name, fd.LabelKey); d != "" && !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	for _, r := range members {
		add(r.ID)
	}
	for _, o := range c.s.machineInf.List() {
		if m := o.(*api.Machine); m.DeletionTimestamp == nil && c.eligible(m) {
			add(m.Name)
		}
	}
	slices.Sort(out)
	return out
}

// eligible is whether machine m's host may serve: the machine or its
// node (the agent's --control-plane-eligible) says so.
func (c *controlPlaneSet) eligible(m *api.Machine) bool {
	if m.Labels[LabelControlPlaneEligible] == "true" {
		return true
	}
	obj, ok := c.s.nodeInf.Get("", nodeNameOf(m))
	return ok && obj.(*api.Node).Labels[LabelControlPlaneEligible] == "true"
}

// domainOf is the failure domain of the host named name: its node's
// labelKey label ("" without a key, a node or the label).
func (c *controlPlaneSet) domainOf(name, labelKey string) string {
	if labelKey == "" {
		return ""
	}
	node := name
	if obj, ok := c.s.machineInf.Get("", name); ok {
		node = nodeNameOf(obj.(*api.Machine))
	}
	if obj, ok := c.s.nodeInf.Get("", node); ok {
		return obj.(*api.Node).Labels[labelKey]
	}
	return ""
}

func sameControlPlaneStatus(a, b api.ControlPlaneMachineSetStatus) bool {
	return a.Replicas == b.Replicas && a.ReadyReplicas == b.ReadyReplicas && a.UpdatedReplicas == b.UpdatedReplicas &&
		a.UnavailableReplicas == b.UnavailableReplicas && a.ObservedGeneration == b.ObservedGeneration &&
		slices.EqualFunc(a.Conditions, b.Conditions, func(x, y api.MachineCondition) bool {
			return x.Type == y.Type && x.Status == y.Status && x.Reason == y.Reason && x.Message == y.Message
		})
}

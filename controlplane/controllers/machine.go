package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/auth"
	"github.com/outpost-edge/outpost/controlplane/controller"
	"github.com/outpost-edge/outpost/controlplane/scheduler"
)

// The machine controller (SPEC MCH-1..4): a Machine for every node an
// agent registers, and the deletion phase in the seed's order. A deleted
// machine is held by its finalizer while: preDrain hooks hold it
// (Drainable=False) → its node is cordoned and drained through the
// eviction API, which honours disruption budgets (Drained=False with the
// refusal, retried; then Drained=True) → preTerminate hooks hold it
// (Terminable=False) → its provider releases the host → the Node object
// is deleted → the finalizer goes, and with it the machine. Each step is
// a status write, so a new leader picks the phase up where it stood.

var (
	machinesResource = api.ResourceForKind("Machine")
	tokensResource   = api.ResourceForKind("Token")
)

// machineCredentialsRevoked is outpost's condition of a deleted machine
// whose node's credentials are gone.
const machineCredentialsRevoked = "CredentialsRevoked"

// credentialRevokeWait is how long after revoking a node's credentials
// its Node is deleted: longer than a server trusts a checked token
// without looking at the store again.
const credentialRevokeWait = 2 * auth.RevalidateAfter

const (
	componentMachine = "machine-controller"
	// drainRetry is how soon a drain that a budget refused is tried
	// again; the pods' own changes bring it back sooner.
	drainRetry = 5 * time.Second
	// providerPrefix is the providerID of a host that joined as an agent.
	providerPrefix = "outpost://"
	// LabelMachineRole is OpenShift's label of a machine's role.
	LabelMachineRole = "machine.openshift.io/cluster-api-machine-role"
	// LabelMachineZone is OpenShift's label of a machine's zone, copied
	// from its node's zone label when the machine is made.
	LabelMachineZone = "machine.openshift.io/zone"
)

// MachineProvider releases a machine's host at the end of its deletion
// (MCH-1): powers it off, re-images it, or says a person may. Release
// returns how, for the Released condition and event; an error is shown
// as Released=False and retried with back-off.
type MachineProvider interface {
	Release(ctx context.Context, m *api.Machine) (string, error)
}

// ProviderFunc is a MachineProvider of one function.
type ProviderFunc func(ctx context.Context, m *api.Machine) (string, error)

// Release calls f.
func (f ProviderFunc) Release(ctx context.Context, m *api.Machine) (string, error) { return f(ctx, m) }

// ManualProvider is the default provider: nothing to call; a person may
// power the host off now.
var ManualProvider = ProviderFunc(func(_ context.Context, m *api.Machine) (string, error) {
	return "manual provider: outpost no longer uses host " + nodeNameOf(m) + "; a person may power it off or re-image it", nil
})

type machineController struct {
	*loop
	s        *shared
	provider MachineProvider
	// raft, when set, is asked whether a deleted machine's host is a raft
	// member that the quorum guard has not hooked yet.
	raft Raft
}

func newMachineController(s *shared, p MachineProvider, raft Raft) *machineController {
	if p == nil {
		p = ManualProvider
	}
	c := &machineController{s: s, provider: p, raft: raft}
	c.loop = newLoop(s, "machine", c.sync)
	return c
}

// onMachine queues a machine that changed.
func (c *machineController) onMachine(ev controller.Event) {
	c.q.Add(controller.KeyOf(ev.Object))
}

// onNode queues the machine of a node (a new node may need one), and a
// machine draining that node when the node changes.
func (c *machineController) onNode(ev controller.Event) {
	if ev.Type == api.Deleted {
		return
	}
	name := ev.Object.GetObjectMeta().Name
	if m := c.machineOfNode(name); m != nil {
		c.q.Add(m.Name) // to link it
		return
	}
	c.q.Add(name) // a node without a machine: to make one
}

// onPod queues the machine of a deleting machine's node when a pod of
// that node changes, so a drain goes on as soon as a pod is gone.
func (c *machineController) onPod(ev controller.Event) {
	p, ok := ev.Object.(*api.Pod)
	if !ok || p.Spec.NodeName == "" {
		return
	}
	if m := c.machineOfNode(p.Spec.NodeName); m != nil && m.DeletionTimestamp != nil {
		c.q.Add(m.Name)
	}
}

// machineOfNode is the machine that backs node: by name, nodeRef or
// providerID (a machine made by hand for a host, named otherwise).
func (c *machineController) machineOfNode(node string) *api.Machine {
	if obj, ok := c.s.machineInf.Get("", node); ok {
		return obj.(*api.Machine)
	}
	for _, obj := range c.s.machineInf.List() {
		if m := obj.(*api.Machine); nodeNameOf(m) == node {
			return m
		}
	}
	return nil
}

// sync looks at key, a machine's name (or a node's, which names the
// machine made for it).
func (c *machineController) sync(ctx context.Context, key string) (time.Duration, error) {
	obj, ok := c.s.machineInf.Get("", key)
	if !ok {
		return 0, c.ensureMachine(ctx, key)
	}
	m := obj.(*api.Machine)
	if m.DeletionTimestamp != nil {
		return c.deleting(ctx, m)
	}
	return 0, c.link(ctx, m)
}

// ensureMachine makes the machine of node name, if the node exists, is
// an agent's (it has a Ready condition) and no machine names it.
func (c *machineController) ensureMachine(ctx context.Context, name string) error {
	if _, ok := c.s.nodeInf.Get("", name); !ok {
		return nil
	}
	// The store, not the cache, decides: the cache may still hold a node
	// whose machine's deletion just deleted it, and must not get a new
	// machine.
	obj, err := c.s.client.Get(nodesResource, "", name)
	if api.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("machine of node %s: %w", name, err)
	}
	n := obj.(*api.Node)
	if nodeReadyCondition(n) == nil || c.machineOfNode(name) != nil {
		return nil
	}
	role := "worker"
	if _, cp := n.Labels["node-role.kubernetes.io/control-plane"]; cp {
		role = "master"
	}
	labels := map[string]string{LabelMachineRole: role}
	if z := scheduler.ZoneOf(n.Labels); z != "" {
		labels[LabelMachineZone] = z
	}
	m := &api.Machine{
		ObjectMeta: api.ObjectMeta{Name: name, Labels: labels,
			Finalizers: []string{api.MachineFinalizer}},
		Spec: api.MachineSpec{ProviderID: providerPrefix + name},
	}
	if _, err := c.s.client.Create(ctx, m); err != nil && !api.IsAlreadyExists(err) {
		return fmt.Errorf("machine of node %s: %w", name, err)
	}
	return nil // its create event brings it back to be linked
}

// link keeps a machine that is not being deleted in step with its node:
// nodeRef and phase Running once the node exists, Provisioned (a host
// made by hand that has not joined) until then. It also makes sure the
// finalizer is there, for machines made by hand.
func (c *machineController) link(ctx context.Context, m *api.Machine) error {
	if !slices.Contains(m.Finalizers, api.MachineFinalizer) {
		cp, err := controller.Copy(m)
		if err != nil {
			return err
		}
		upd := cp.(*api.Machine)
		upd.Finalizers = append(upd.Finalizers, api.MachineFinalizer)
		_, err = c.s.client.Update(ctx, upd)
		return ignoreGone(err)
	}
	node := nodeNameOf(m)
	phase, ref := api.MachineProvisioned, m.Status.NodeRef
	if obj, ok := c.s.nodeInf.Get("", node); ok {
		n := obj.(*api.Node)
		phase, ref = api.MachineRunning, &api.ObjectReference{Kind: "Node", Name: n.Name, UID: n.UID}
	}
	if m.Status.Phase == phase && sameRef(m.Status.NodeRef, ref) {
		return nil
	}
	return c.writeStatus(ctx, m, func(st *api.MachineStatus) { st.Phase, st.NodeRef = phase, ref })
}

// nodeNameOf is the node a machine backs: its nodeRef, else the node its
// providerID names, else its own name.
func nodeNameOf(m *api.Machine) string {
	if m.Status.NodeRef != nil && m.Status.NodeRef.Name != "" {
		return m.Status.NodeRef.Name
	}
	if n, ok := strings.CutPrefix(m.Spec.ProviderID, providerPrefix); ok && n != "" {
		return n
	}
	return m.Name
}

func sameRef(a, b *api.ObjectReference) bool {
	return (a == nil) == (b == nil) && (a == nil || a.Name == b.Name && a.UID == b.UID)
}

// deleting moves a deleted machine one step along MCH-4; after is when to
// look again (a refused drain).
func (c *machineController) deleting(ctx context.Context, m *api.Machine) (time.Duration, error) {
	if !slices.Contains(m.Finalizers, api.MachineFinalizer) {
		return 0, nil // not ours to hold
	}
	if m.Status.Phase != api.MachineDeleting {
		return 0, c.writeStatus(ctx, m, func(st *api.MachineStatus) { st.Phase = api.MachineDeleting })
	}
	// A raft member's machine waits for the quorum guard's hook: a
	// machine deleted right after its server joined may not carry it yet.
	if c.raft != nil && !slices.ContainsFunc(m.Spec.LifecycleHooks.PreDrain, isGuardHook) && !machineConditionIs(m, api.MachineDrainable, api.ConditionTrue) {
		members, err := c.raft.Members(ctx)
		if err != nil {
			return 0, fmt.Errorf("machine %s: raft members: %w", m.Name, err)
		}
		if slices.ContainsFunc(members, func(r RaftMember) bool { return r.ID == m.Name }) {
			return guardRetry, c.condition(ctx, m, api.MachineDrainable, api.ConditionFalse, "WaitingForQuorumGuard",
				"a raft member's machine: waiting for the quorum guard's hook")
		}
	}
	// preDrain hooks hold the drain.
	if hooks := m.Spec.LifecycleHooks.PreDrain; len(hooks) > 0 {
		return 0, c.condition(ctx, m, api.MachineDrainable, api.ConditionFalse, "HookPresent", "waiting for preDrain hooks: "+hookNames(hooks))
	}
	if !machineConditionIs(m, api.MachineDrainable, api.ConditionTrue) {
		return 0, c.condition(ctx, m, api.MachineDrainable, api.ConditionTrue, "HooksResolved", "no preDrain hook holds the drain")
	}
	if !machineConditionIs(m, api.MachineDrained, api.ConditionTrue) {
		done, why, err := c.drain(ctx, m)
		if err != nil {
			return 0, err
		}
		if !done {
			if cerr := c.condition(ctx, m, api.MachineDrained, api.ConditionFalse, "DrainError", why); cerr != nil {
				return 0, cerr
			}
			return drainRetry, nil
		}
		return 0, c.condition(ctx, m, api.MachineDrained, api.ConditionTrue, "Drained", "the node's pods were evicted")
	}
	if hooks := m.Spec.LifecycleHooks.PreTerminate; len(hooks) > 0 {
		return 0, c.condition(ctx, m, api.MachineTerminable, api.ConditionFalse, "HookPresent", "waiting for preTerminate hooks: "+hookNames(hooks))
	}
	if !machineConditionIs(m, api.MachineTerminable, api.ConditionTrue) {
		return 0, c.condition(ctx, m, api.MachineTerminable, api.ConditionTrue, "HooksResolved", "no preTerminate hook holds the release")
	}
	if !machineConditionIs(m, api.MachineProviderReleased, api.ConditionTrue) {
		note, wait := c.rolesStopped(m)
		if wait > 0 {
			return wait, c.condition(ctx, m, api.MachineProviderReleased, api.ConditionFalse, "WaitingForAgent",
				fmt.Sprintf("waiting up to %s for the host's agent to stop outpost's roles", rolesStopWait))
		}
		how, err := c.provider.Release(ctx, m)
		if err != nil {
			if cerr := c.condition(ctx, m, api.MachineProviderReleased, api.ConditionFalse, "ProviderError", err.Error()); cerr != nil {
				return 0, cerr
			}
			return 0, fmt.Errorf("machine %s: provider: %w", m.Name, err) // retried with the queue's backoff
		}
		how = note + "; " + how
		c.s.rec.event(ctx, m, componentMachine, api.EventTypeNormal, "Released", how)
		return 0, c.condition(ctx, m, api.MachineProviderReleased, api.ConditionTrue, "Released", how)
	}
	node := nodeNameOf(m)
	// The host's credentials go before its Node: an agent still running
	// there would otherwise register the node again (and the node a new
	// machine); without them it is no longer part of the cluster. Every
	// server trusts a token it checked for up to auth.RevalidateAfter
	// more, so the Node waits longer than that after the revocation.
	i := slices.IndexFunc(m.Status.Conditions, func(c api.MachineCondition) bool { return c.Type == machineCredentialsRevoked })
	if i < 0 || m.Status.Conditions[i].Status != api.ConditionTrue {
		if err := c.revokeNodeTokens(ctx, m, node); err != nil {
			return 0, err
		}
		return 0, c.condition(ctx, m, machineCredentialsRevoked, api.ConditionTrue, "Revoked", "node "+node+"'s credentials were deleted")
	}
	if at := m.Status.Conditions[i].LastTransitionTime; at != nil {
		if wait := at.Add(credentialRevokeWait).Sub(c.s.now()); wait > 0 {
			return wait, nil
		}
	}
	if _, ok := c.s.nodeInf.Get("", node); ok {
		err := c.s.client.Delete(ctx, nodesResource, "", node, api.DeleteOptions{})
		if err := ignoreGone(err); err != nil {
			return 0, fmt.Errorf("machine %s: delete node %s: %w", m.Name, node, err)
		}
		c.s.rec.event(ctx, m, componentMachine, api.EventTypeNormal, "NodeDeleted", "deleted node "+node)
	}
	cp, err := controller.Copy(m)
	if err != nil {
		return 0, err
	}
	upd := cp.(*api.Machine)
	upd.Finalizers = slices.DeleteFunc(upd.Finalizers, func(f string) bool { return f == api.MachineFinalizer })
	_, err = c.s.client.Update(ctx, upd)
	return 0, ignoreGone(err)
}

// rolesStopWait is how long the release waits for a reachable agent to
// say it stopped outpost's roles on the host.
const rolesStopWait = 30 * time.Second

// rolesStopped says whether the release may go on: Terminable=True tells
// the host's agent (in its heartbeat's reply) to stop outpost's roles,
// and it says so on its Node; an unreachable host, or one whose agent
// does not answer within rolesStopWait, is released all the same (its
// credentials are revoked next). note says which, for the Released
// condition; wait > 0 is how long to wait before looking again.
func (c *machineController) rolesStopped(m *api.Machine) (note string, wait time.Duration) {
	node := nodeNameOf(m)
	obj, ok := c.s.nodeInf.Get("", node)
	if !ok {
		return "no node", 0
	}
	n := obj.(*api.Node)
	if at, ok := n.Annotations[api.AnnotationRolesStopped]; ok {
		return "the agent stopped outpost's roles on the host at " + at, 0
	}
	if r := nodeReadyCondition(n); r == nil || r.Status != api.ConditionTrue {
		return "the host is unreachable: outpost's roles there could not be stopped through its agent", 0
	}
	var since time.Time
	if i := slices.IndexFunc(m.Status.Conditions, func(mc api.MachineCondition) bool { return mc.Type == api.MachineTerminable }); i >= 0 && m.Status.Conditions[i].LastTransitionTime != nil {
		since = m.Status.Conditions[i].LastTransitionTime.Time
	}
	if left := since.Add(rolesStopWait).Sub(c.s.now()); left > 0 {
		return "", min(left, guardRetry)
	}
	return fmt.Sprintf("the agent did not confirm within %s that it stopped outpost's roles on the host", rolesStopWait), 0
}

// revokeNodeTokens deletes the node credentials of node.
func (c *machineController) revokeNodeTokens(ctx context.Context, m *api.Machine, node string) error {
	objs, _, err := c.s.client.List(tokensResource)
	if err != nil {
		return fmt.Errorf("machine %s: list tokens: %w", m.Name, err)
	}
	for _, o := range objs {
		tok := o.(*api.Token)
		if tok.Spec.Role != api.RoleNode || tok.Spec.NodeName != node {
			continue
		}
		if err := ignoreGone(c.s.client.Delete(ctx, tokensResource, "", tok.Name, preconditionUID(tok.UID))); err != nil {
			return fmt.Errorf("machine %s: revoke the credential of node %s: %w", m.Name, node, err)
		}
		c.s.rec.event(ctx, m, componentMachine, api.EventTypeNormal, "CredentialRevoked", "revoked node "+node+"'s credential "+tok.Name)
	}
	return nil
}

// drain cordons the machine's node and evicts its pods (daemon set pods
// stay, as `drain --ignore-daemonsets`; pods without a controller go, as
// the machine controller's drain forces them). It reports whether the
// node has none left to wait for, and if not, why.
func (c *machineController) drain(ctx context.Context, m *api.Machine) (bool, string, error) {
	node := nodeNameOf(m)
	obj, ok := c.s.nodeInf.Get("", node)
	if !ok {
		return true, "", nil
	}
	if n := obj.(*api.Node); !n.Spec.Unschedulable {
		cp, err := controller.Copy(n)
		if err != nil {
			return false, "", err
		}
		upd := cp.(*api.Node)
		upd.Spec.Unschedulable = true
		if _, err := c.s.client.Update(ctx, upd); err != nil {
			return false, "", fmt.Errorf("machine %s: cordon node %s: %w", m.Name, node, err)
		}
	}
	var waiting, refused []string
	for _, obj := range c.s.podInf.List() {
		p := obj.(*api.Pod)
		if p.Spec.NodeName != node || podFinished(p) || isDaemonPod(p) {
			continue
		}
		waiting = append(waiting, p.Namespace+"/"+p.Name)
		if p.DeletionTimestamp != nil {
			continue // on its way out
		}
		err := c.s.client.Evict(ctx, p.Namespace, p.Name, preconditionUID(p.UID))
		switch {
		case err == nil, api.IsNotFound(err):
		case api.ReasonOf(err) == api.ReasonTooManyRequests:
			refused = append(refused, fmt.Sprintf("%s/%s: %s", p.Namespace, p.Name, err.Error()))
		default:
			return false, "", fmt.Errorf("machine %s: evict %s/%s: %w", m.Name, p.Namespace, p.Name, err)
		}
	}
	switch {
	case len(refused) > 0:
		return false, fmt.Sprintf("%d of %d pods not evicted yet: %s", len(refused), len(waiting), strings.Join(refused, "; ")), nil
	case len(waiting) > 0:
		return false, fmt.Sprintf("waiting for %d pods to stop: %s", len(waiting), strings.Join(firstN(waiting, 5), ", ")), nil
	}
	return true, "", nil
}

func firstN(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], fmt.Sprintf("and %d more", len(s)-n))
	}
	return s
}

func isDaemonPod(p *api.Pod) bool {
	ref := api.ControllerRef(&p.ObjectMeta)
	return ref != nil && ref.Kind == "DaemonSet"
}

func hookNames(hooks []api.LifecycleHook) string {
	var names []string
	for _, h := range hooks {
		names = append(names, h.Name+" (owner "+h.Owner+")")
	}
	return strings.Join(names, ", ")
}

func machineConditionIs(m *api.Machine, typ, status string) bool {
	i := slices.IndexFunc(m.Status.Conditions, func(c api.MachineCondition) bool { return c.Type == typ })
	return i >= 0 && m.Status.Conditions[i].Status == status
}

// condition sets one condition of m (a write only when something
// changed; the transition time only when the status did).
func (c *machineController) condition(ctx context.Context, m *api.Machine, typ, status, reason, msg string) error {
	i := slices.IndexFunc(m.Status.Conditions, func(c api.MachineCondition) bool { return c.Type == typ })
	if i >= 0 {
		cur := m.Status.Conditions[i]
		if cur.Status == status && cur.Reason == reason && cur.Message == msg {
			return nil
		}
	}
	return c.writeStatus(ctx, m, func(st *api.MachineStatus) {
		now := api.NewTime(c.s.now())
		cond := api.MachineCondition{Type: typ, Status: status, Reason: reason, Message: msg, LastTransitionTime: now}
		if status == api.ConditionFalse {
			cond.Severity = "Warning"
		}
		if i < 0 {
			st.Conditions = append(st.Conditions, cond)
			return
		}
		if st.Conditions[i].Status == status {
			cond.LastTransitionTime = st.Conditions[i].LastTransitionTime
		}
		st.Conditions[i] = cond
	})
}

func (c *machineController) writeStatus(ctx context.Context, m *api.Machine, change func(*api.MachineStatus)) error {
	cp, err := controller.Copy(m)
	if err != nil {
		return err
	}
	upd := cp.(*api.Machine)
	change(&upd.Status)
	upd.Status.LastUpdated = api.NewTime(c.s.now())
	_, err = c.s.client.UpdateStatus(ctx, upd)
	return ignoreGone(err)
}

// ignoreGone drops NotFound: the object went meanwhile, its event says
// what next.
func ignoreGone(err error) error {
	if api.IsNotFound(err) {
		return nil
	}
	return err
}

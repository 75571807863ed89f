package controllers

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/controller"
	"github.com/outpost-edge/outpost/controlplane/release"
)

// Applying an accepted release (SPEC UPD-5, UPD-6), the Cluster Version
// Operator's other half. The steps, each decided again on every sync
// from what the ClusterVersion's status recorded and what the servers
// report, so that a new leader (the servers restart one by one) carries
// on where the last one stopped:
//
//  1. Preconditions, unless desiredUpdate.force: every ClusterOperator
//     Available and not Degraded, no machine config pool updating, every
//     voter reachable and caught up, every server able to update its
//     binary. Then status.desired and a Partial history entry.
//  2. The control plane's binary: one server at a time is named in
//     status.controlPlane (the leader last, after handing leadership
//     over) and must come back on the new version, a reachable voter
//     that marked its binary good, before the next is named. No server
//     is named while a voter is unreachable, so a restart never takes
//     the cluster below quorum. A server that rolled back, or did not
//     finish in serverUpdateTimeout, stops the update: Failing=True.
//  3. The agents' binary, a wave at a time (agentWave of the nodes): a
//     Ready node whose agent can replace its binary is given the release's
//     binary for its platform in its AnnotationAgentBinary, and counts as
//     done once it reports the version. Nodes not Ready, agents that
//     cannot replace their binary and ones that rolled back do not hold
//     the update: they are listed in the node-agents ClusterOperator
//     (Degraded for a roll back); a node that comes back later still
//     finds its annotation.
//  4. The manifests, by runlevel: lower first, the components of one
//     runlevel side by side, one component's manifests in lexical order;
//     each component's ClusterOperator derives from the rollouts of what
//     it applied, and the next runlevel waits until every component of
//     this one is Available at the new version.
//  5. History Completed. Machine config pools roll on afterwards (UPD-7).

// Keys of a server's raft status Info about its binary (its state is
// one of api's SelfUpdate values).
const (
	InfoSelfUpdate    = "selfUpdate"
	InfoFailedVersion = "selfUpdateFailedVersion"
	InfoFailure       = "selfUpdateFailure"
	InfoError         = "selfUpdateError"
)

// serverUpdateTimeout bounds one server's binary update: fetching the
// release, restarting, and the trial until it is marked good.
const serverUpdateTimeout = 10 * time.Minute

// applyPoll is how often an update in progress is looked at again.
const applyPoll = 2 * time.Second

// AppliedAnnotation marks an object a release applied: the release's
// version and the digest of the manifest it came from, so an object
// already as the release has it is not written again.
const AppliedAnnotation = "release.outpost.io/applied"

var clusterOperators = api.ResourceForKind("ClusterOperator")

// applyState is where an update stands after one pass.
type applyState struct {
	done            bool
	waiting         string // Progressing's message while not done
	failReason, msg string // Failing, when set
}

func waiting(format string, args ...any) applyState {
	return applyState{waiting: fmt.Sprintf(format, args...)}
}

func failing(reason, format string, args ...any) applyState {
	return applyState{failReason: reason, msg: fmt.Sprintf(format, args...)}
}

// preconditions returns why an update may not start now, or "".
func (c *clusterVersionController) preconditions(ctx context.Context) string {
	var why []string
	ops, _, err := c.s.client.List(clusterOperators)
	if err != nil {
		return "listing cluster operators: " + err.Error()
	}
	for _, o := range ops {
		co := o.(*api.ClusterOperator)
		if cond := operatorCond(co, api.OperatorAvailable); cond.Status != api.ConditionTrue {
			why = append(why, fmt.Sprintf("cluster operator %s is not Available", co.Name))
		}
		// Agents that rolled back are the nodes' own business (the
		// next release may be their fix): they do not hold updates.
		if cond := operatorCond(co, api.OperatorDegraded); cond.Status == api.ConditionTrue && co.Name != api.AgentsOperator {
			why = append(why, fmt.Sprintf("cluster operator %s is Degraded: %s", co.Name, cond.Message))
		}
	}
	for _, o := range c.s.mcpInf.List() {
		p := o.(*api.MachineConfigPool)
		if poolCond(p, api.PoolUpdating) {
			why = append(why, fmt.Sprintf("machine config pool %s is updating", p.Name))
		}
	}
	if c.raft != nil {
		ms, err := c.raft.Members(ctx)
		if err != nil {
			return "reading the raft members: " + err.Error()
		}
		var leaderIndex uint64
		for _, m := range ms {
			if m.Leader {
				leaderIndex = m.LastIndex
			}
		}
		for _, m := range ms {
			switch {
			case m.Voter && !m.Reachable:
				why = append(why, fmt.Sprintf("server %s is unreachable", m.ID))
			case m.Voter && leaderIndex > m.LastIndex+catchUpSlack:
				why = append(why, fmt.Sprintf("server %s is %d entries behind the leader", m.ID, leaderIndex-m.LastIndex))
			}
			if s := m.Info[InfoSelfUpdate]; m.Reachable && s != api.SelfUpdateReady {
				why = append(why, fmt.Sprintf("server %s is not ready to update its binary (%s)", m.ID, orUnknown(s)))
			}
		}
	}
	return strings.Join(why, "; ")
}

// catchUpSlack is how far behind the leader's log a voter may be and
// still count as caught up for an update's precondition.
const catchUpSlack = 64

func orUnknown(s string) string {
	if s == "" {
		return "it does not say: an older server"
	}
	return s
}

func operatorCond(co *api.ClusterOperator, typ string) api.MachineCondition {
	for _, c := range co.Status.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return api.MachineCondition{}
}

func poolCond(p *api.MachineConfigPool, typ string) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == typ {
			return c.Status == api.ConditionTrue
		}
	}
	return false
}

// apply moves the update in st forward by what can be done now.
func (c *clusterVersionController) apply(ctx context.Context, st *api.ClusterVersionStatus, acc acceptance, now time.Time) applyState {
	if r := c.applyControlPlane(ctx, st.ControlPlane, acc.version, now); !r.done {
		return r
	}
	if r := c.applyAgents(ctx, acc.payload, acc.version, now); !r.done {
		return r
	}
	return c.applyManifests(ctx, acc.payload, acc.version, now)
}

// applyControlPlane names the next server to update its binary, or says
// what it waits for; done once every server runs version.
func (c *clusterVersionController) applyControlPlane(ctx context.Context, cp *api.ControlPlaneUpdate, version string, now time.Time) applyState {
	if c.raft == nil {
		return applyState{done: true}
	}
	ms, err := c.raft.Members(ctx)
	if err != nil {
		return waiting("Working towards %s: reading the raft members: %v", version, err)
	}
	slices.SortFunc(ms, func(a, b RaftMember) int { return strings.Compare(a.ID, b.ID) })
	var left []RaftMember
	for _, m := range ms {
		if m.Version != version {
			left = append(left, m)
		}
	}
	c.reportControlPlane(ctx, ms, version, len(left) > 0, now)
	progress := fmt.Sprintf("%d of %d servers updated", len(ms)-len(left), len(ms))
	if cp.Server != "" {
		i := slices.IndexFunc(ms, func(m RaftMember) bool { return m.ID == cp.Server })
		late := cp.Since != nil && now.Sub(cp.Since.Time) > serverUpdateTimeout
		switch {
		case i < 0: // removed meanwhile: the next one
		case ms[i].Version != version:
			m := ms[i]
			if m.Info[InfoFailedVersion] == version {
				return failing("ControlPlaneUpdateFailed", "server %s could not move to %s and rolled back to %s: %s", m.ID, version, m.Version, m.Info[InfoFailure])
			}
			if late {
				return failing("ControlPlaneUpdateTimeout", "server %s did not move to %s within %v (%s)", m.ID, version, serverUpdateTimeout, progress)
			}
			msg := fmt.Sprintf("Working towards %s: server %s is updating its binary (%s)", version, m.ID, progress)
			if e := m.Info[InfoError]; e != "" {
				msg += ": " + e
			}
			return applyState{waiting: msg}
		case !ms[i].Reachable || !ms[i].Voter || ms[i].Info[InfoSelfUpdate] != api.SelfUpdateReady:
			if late {
				return failing("ControlPlaneUpdateTimeout", "server %s runs %s but did not become a healthy voter within %v", cp.Server, version, serverUpdateTimeout)
			}
			return waiting("Working towards %s: server %s runs it; waiting for it to be a caught-up voter with its binary marked good (%s)", version, cp.Server, progress)
		}
		cp.Server, cp.Since = "", nil
	}
	if len(left) == 0 {
		return applyState{done: true}
	}
	for _, m := range ms {
		if m.Voter && !m.Reachable {
			return waiting("Working towards %s: server %s is unreachable; no server restarts until every voter is back (%s)", version, m.ID, progress)
		}
		// One starting, on trial or still staging a binary (an update
		// replaced meanwhile) is not yet a voter to count on.
		if st := m.Info[InfoSelfUpdate]; m.Reachable && (st == api.SelfUpdateStarting || st == api.SelfUpdateTrial || st == api.SelfUpdateUpdating) {
			return waiting("Working towards %s: server %s is %s; no other server restarts until it is a ready voter (%s)", version, m.ID, st, progress)
		}
	}
	next := slices.IndexFunc(left, func(m RaftMember) bool { return !m.Leader })
	if next < 0 && len(ms) > 1 {
		// The leader is the last: it hands leadership to an updated
		// voter first, whose controller then names it.
		to := slices.IndexFunc(ms, func(m RaftMember) bool { return m.Voter && m.Version == version && !m.Leader })
		if to < 0 {
			return waiting("Working towards %s: no updated voter to hand leadership to", version)
		}
		if err := c.raft.TransferLeadership(ctx, ms[to].ID); err != nil {
			return waiting("Working towards %s: handing leadership to %s: %v", version, ms[to].ID, err)
		}
		return waiting("Working towards %s: leadership handed to %s before the last server updates (%s)", version, ms[to].ID, progress)
	}
	if next < 0 {
		next = 0 // one server: it updates itself, the cluster pauses meanwhile
	}
	if st := left[next].Info[InfoSelfUpdate]; st == "" || strings.HasPrefix(st, api.SelfUpdateUnsupported) {
		return failing("ControlPlaneUpdateUnsupported", "server %s cannot replace its binary (%s): run it from the packaged outpost-server.service, which passes --binary-dir", left[next].ID, st)
	}
	cp.Server, cp.Since = left[next].ID, api.NewTime(now)
	c.s.log.Info("control plane update: naming the next server", "server", cp.Server, "version", version)
	return waiting("Working towards %s: server %s is updating its binary (%s)", version, cp.Server, progress)
}

// reportControlPlane keeps the control plane's ClusterOperator.
func (c *clusterVersionController) reportControlPlane(ctx context.Context, ms []RaftMember, version string, updating bool, now time.Time) {
	versions := map[string]bool{}
	unreachable := []string{}
	for _, m := range ms {
		versions[m.Version] = true
		if m.Voter && !m.Reachable {
			unreachable = append(unreachable, m.ID)
		}
	}
	opVersion := version
	if updating {
		opVersion = ""
		for v := range versions {
			if v != version && (opVersion == "" || release.CompareVersions(v, opVersion) < 0) {
				opVersion = v
			}
		}
	}
	avail := operatorStatus{available: len(unreachable) == 0, progressing: updating, version: opVersion}
	if !avail.available {
		avail.message = "unreachable servers: " + strings.Join(unreachable, ", ")
	} else if updating {
		avail.message = "servers are moving to " + version
	} else {
		avail.message = fmt.Sprintf("%d servers run %s", len(ms), version)
	}
	c.setOperator(ctx, api.ControlPlaneOperator, avail, nil, now)
}

type operatorStatus struct {
	available, progressing, degraded bool
	version, message                 string
}

// setOperator writes a ClusterOperator's status when it changed.
func (c *clusterVersionController) setOperator(ctx context.Context, name string, s operatorStatus, related []api.RelatedObject, now time.Time) {
	obj, err := c.s.client.Get(clusterOperators, "", name)
	if api.IsNotFound(err) {
		obj, err = c.s.client.Create(ctx, &api.ClusterOperator{ObjectMeta: api.ObjectMeta{Name: name}})
	}
	if err != nil {
		c.s.log.Warn("cluster operator", "name", name, "err", err)
		return
	}
	co := obj.(*api.ClusterOperator)
	st := api.ClusterOperatorStatus{RelatedObjects: related}
	if related == nil {
		st.RelatedObjects = co.Status.RelatedObjects
	}
	b := func(v bool) string {
		if v {
			return api.ConditionTrue
		}
		return api.ConditionFalse
	}
	for _, cond := range []api.MachineCondition{
		{Type: api.OperatorAvailable, Status: b(s.available), Message: s.message},
		{Type: api.OperatorProgressing, Status: b(s.progressing), Message: s.message},
		{Type: api.OperatorDegraded, Status: b(s.degraded), Message: degradedMessage(s)},
	} {
		st.Conditions = append(st.Conditions, keepTransition(cond, co.Status.Conditions, now))
	}
	st.Versions = co.Status.Versions
	if s.version != "" {
		st.Versions = []api.OperandVersion{{Name: "operator", Version: s.version}}
	}
	if reflect.DeepEqual(st, co.Status) {
		return
	}
	cp, err := controller.Copy(co)
	if err != nil {
		return
	}
	upd := cp.(*api.ClusterOperator)
	upd.Status = st
	if _, err := c.s.client.UpdateStatus(ctx, upd); err != nil && !api.IsNotFound(err) && !api.IsConflict(err) {
		c.s.log.Warn("cluster operator status", "name", name, "err", err)
	}
}

func degradedMessage(s operatorStatus) string {
	if s.degraded {
		return s.message
	}
	return ""
}

// applyManifests applies the release's manifests runlevel by runlevel;
// done once every component of every runlevel is at version.
func (c *clusterVersionController) applyManifests(ctx context.Context, p *release.Payload, version string, now time.Time) applyState {
	if p == nil {
		return waiting("Working towards %s: loading the payload", version)
	}
	levels, err := release.Order(p.Manifests)
	if err != nil {
		return failing("ManifestsInvalid", "%v", err)
	}
	for _, rl := range levels {
		var pending, degraded []string
		for _, comp := range rl.Components {
			s, related := c.applyComponent(ctx, comp, version)
			c.setOperator(ctx, comp.Name, s, related, now)
			switch {
			case s.degraded:
				degraded = append(degraded, comp.Name+": "+s.message)
			case !s.available || s.progressing:
				pending = append(pending, comp.Name+" ("+s.message+")")
			}
		}
		if len(degraded) > 0 {
			return failing("ClusterOperatorDegraded", "Working towards %s: runlevel %02d: %s", version, rl.Level, strings.Join(degraded, "; "))
		}
		if len(pending) > 0 {
			return waiting("Working towards %s: runlevel %02d: waiting on %s", version, rl.Level, strings.Join(pending, ", "))
		}
	}
	return applyState{done: true}
}

// applyComponent applies one component's manifests in order and derives
// its status from what they became.
func (c *clusterVersionController) applyComponent(ctx context.Context, comp release.Component, version string) (operatorStatus, []api.RelatedObject) {
	var related []api.RelatedObject
	var waitingOn []string
	for _, f := range comp.Manifests {
		objs, _, err := api.DecodeYAMLOrJSON(f.Data)
		if err != nil {
			return operatorStatus{degraded: true, message: fmt.Sprintf("%s: %v", f.Name, err)}, related
		}
		sum := sha256.Sum256(f.Data)
		for i, o := range objs {
			mark := fmt.Sprintf("%s %s-%d", version, hex.EncodeToString(sum[:6]), i)
			got, err := c.applyObject(ctx, o, mark)
			r := api.ResourceOf(o)
			if r != nil {
				related = append(related, api.RelatedObject{Group: r.Group, Resource: r.Plural, Namespace: o.GetObjectMeta().Namespace, Name: o.GetObjectMeta().Name})
			}
			if err != nil {
				return operatorStatus{degraded: true, message: fmt.Sprintf("%s: %s %s: %v", f.Name, o.GetTypeMeta().Kind, o.GetObjectMeta().Name, err)}, related
			}
			if why := rolloutPending(got); why != "" {
				waitingOn = append(waitingOn, why)
			}
		}
	}
	if len(waitingOn) > 0 {
		return operatorStatus{available: true, progressing: true, message: strings.Join(waitingOn, "; ")}, related
	}
	return operatorStatus{available: true, version: version, message: "at " + version}, related
}

// applyObject creates o, or replaces the stored object unless it already
// carries mark.
func (c *clusterVersionController) applyObject(ctx context.Context, o api.Object, mark string) (api.Object, error) {
	r := api.ResourceOf(o)
	if r == nil {
		return nil, fmt.Errorf("kind %s is not served", o.GetTypeMeta().Kind)
	}
	om := o.GetObjectMeta()
	if om.Annotations == nil {
		om.Annotations = map[string]string{}
	}
	om.Annotations[AppliedAnnotation] = mark
	cur, err := c.s.client.Get(r, om.Namespace, om.Name)
	if api.IsNotFound(err) {
		return c.s.client.Create(ctx, o)
	}
	if err != nil {
		return nil, err
	}
	cm := cur.GetObjectMeta()
	if cm.Annotations[AppliedAnnotation] == mark {
		return cur, nil
	}
	om.ResourceVersion, om.UID, om.CreationTimestamp = cm.ResourceVersion, cm.UID, cm.CreationTimestamp
	return c.s.client.Update(ctx, o)
}

// rolloutPending says what a Deployment or DaemonSet still rolls out, or
// "" when it is done (and for every other kind: applied is done).
func rolloutPending(o api.Object) string {
	switch w := o.(type) {
	case *api.Deployment:
		want := int32(1)
		if w.Spec.Replicas != nil {
			want = *w.Spec.Replicas
		}
		st := w.Status
		if st.ObservedGeneration < w.Generation || st.UpdatedReplicas < want || st.AvailableReplicas < want || st.Replicas > want {
			return fmt.Sprintf("deployment %s/%s: %d of %d updated, %d available", w.Namespace, w.Name, st.UpdatedReplicas, want, st.AvailableReplicas)
		}
	case *api.DaemonSet:
		st := w.Status
		if st.ObservedGeneration < w.Generation || st.UpdatedNumberScheduled < st.DesiredNumberScheduled || st.NumberAvailable < st.DesiredNumberScheduled {
			return fmt.Sprintf("daemonset %s/%s: %d of %d updated, %d available", w.Namespace, w.Name, st.UpdatedNumberScheduled, st.DesiredNumberScheduled, st.NumberAvailable)
		}
	}
	return ""
}

// agentWave is the share of the nodes whose agents replace their binary
// at once; their pods run on meanwhile, so the wave is wider than a
// pool's maxUnavailable.
const agentWave = 10 // percent, at least one node

// applyAgents names the next wave of agents to replace their binary, or
// says what it waits for; done once no named agent is still on its way.
func (c *clusterVersionController) applyAgents(ctx context.Context, p *release.Payload, version string, now time.Time) applyState {
	if p == nil {
		return waiting("Working towards %s: loading the payload", version)
	}
	digests := map[string]string{}
	for _, b := range p.Binaries {
		digests[b.Platform] = b.Digest
	}
	var nodes []*api.Node
	for _, o := range c.s.nodeInf.List() {
		nodes = append(nodes, o.(*api.Node))
	}
	slices.SortFunc(nodes, func(a, b *api.Node) int { return strings.Compare(a.Name, b.Name) })
	var (
		done, inflight                int
		next                          []*api.Node
		failed, unsupported, notReady []string
	)
	for _, n := range nodes {
		state := n.Annotations[api.AnnotationAgentBinaryState]
		platform := cmp.Or(n.Status.NodeInfo.OperatingSystem, "linux") + "/" + cmp.Or(n.Status.NodeInfo.Architecture, "amd64")
		switch {
		case n.Status.NodeInfo.KubeletVersion == version && state == api.SelfUpdateReady:
			// Reporting the version on trial is not enough: done once
			// the binary is marked good.
			done++
		case n.Status.NodeInfo.KubeletVersion == version && (state == "" || strings.HasPrefix(state, api.SelfUpdateUnsupported)):
			done++ // there already, by other means
		case strings.HasPrefix(n.Annotations[api.AnnotationAgentBinaryFailure], version+": "):
			failed = append(failed, n.Name+": "+strings.TrimPrefix(n.Annotations[api.AnnotationAgentBinaryFailure], version+": "))
		case state == "" || strings.HasPrefix(state, api.SelfUpdateUnsupported):
			unsupported = append(unsupported, n.Name)
		case !api.ReadyIn(n.Status.Conditions):
			notReady = append(notReady, n.Name)
		case strings.HasPrefix(n.Annotations[api.AnnotationAgentBinary], version+" "):
			inflight++
		case digests[platform] == "":
			failed = append(failed, fmt.Sprintf("%s: the release has no binary for %s", n.Name, platform))
		default:
			next = append(next, n)
		}
	}
	wave := max(1, len(nodes)*agentWave/100)
	for _, n := range next[:min(len(next), max(0, wave-inflight))] {
		digest := digests[cmp.Or(n.Status.NodeInfo.OperatingSystem, "linux")+"/"+cmp.Or(n.Status.NodeInfo.Architecture, "amd64")]
		if err := c.nameAgentBinary(ctx, n.Name, version+" "+digest); err != nil {
			return waiting("Working towards %s: naming node %s's binary: %v", version, n.Name, err)
		}
		inflight++
	}
	pending := inflight + max(0, len(next)-wave)
	msg := fmt.Sprintf("%d of %d agents at %s", done, len(nodes), version)
	var notes []string
	if len(failed) > 0 {
		notes = append(notes, "failed: "+strings.Join(failed, "; "))
	}
	if len(unsupported) > 0 {
		notes = append(notes, "cannot replace their binary: "+strings.Join(unsupported, ", "))
	}
	if len(notReady) > 0 {
		notes = append(notes, "not Ready, left to update when back: "+strings.Join(notReady, ", "))
	}
	if len(notes) > 0 {
		msg += " (" + strings.Join(notes, "; ") + ")"
	}
	s := operatorStatus{available: true, progressing: pending > 0, degraded: len(failed) > 0, message: msg}
	if pending == 0 && len(failed)+len(unsupported)+len(notReady) == 0 {
		s.version = version
	}
	c.setOperator(ctx, api.AgentsOperator, s, nil, now)
	if pending > 0 {
		return waiting("Working towards %s: agents replacing their binary: %s", version, msg)
	}
	return applyState{done: true}
}

// nameAgentBinary sets a node's AnnotationAgentBinary.
func (c *clusterVersionController) nameAgentBinary(ctx context.Context, name, value string) error {
	obj, err := c.s.client.Get(nodesResource, "", name)
	if err != nil {
		return err
	}
	cp, err := controller.Copy(obj)
	if err != nil {
		return err
	}
	n := cp.(*api.Node)
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	n.Annotations[api.AnnotationAgentBinary] = value
	_, err = c.s.client.Update(ctx, n)
	return err
}

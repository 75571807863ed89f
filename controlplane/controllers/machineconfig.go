package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/controller"
)

// The machine config controller (SPEC UPD-8, UPD-9), the Machine Config
// Operator's render and node controllers in one: for each pool it merges
// the configs its machineConfigSelector picks, in name order, into
// rendered-POOL-HASH (owned by the pool; older ones stay for rollback),
// and rolls it out: while fewer than maxUnavailable of the pool's nodes
// are unavailable, the next node in name order is given it as its
// desiredConfig annotation. The node's agent does the rest (cordon,
// drain, write, reboot, verify, uncordon) and reports through the
// currentConfig and state annotations. A config that degraded a node is
// given to no other node until a new one is rendered.

const componentMachineConfig = "machineconfig-controller"

var (
	machineConfigsResource = api.ResourceForKind("MachineConfig")
	machineConfigPools     = api.ResourceForKind("MachineConfigPool")
)

// defaultIgnitionVersion is a rendered config's version when none of its
// sources names one above it.
const defaultIgnitionVersion = "3.2.0"

// assignWorkers bounds the desiredConfig writes in flight.
const assignWorkers = 32

type machineConfigController struct {
	*loop
	s *shared
	// track holds back a pool's next look until the caches show what its
	// last look wrote: a node given a config and not yet seen so would be
	// counted available, and one more given it.
	track *tracker
	// poolLock is shared with FleetLock (Config.PoolLock).
	poolLock sync.Locker
}

func newMachineConfigController(s *shared, poolLock sync.Locker) *machineConfigController {
	if poolLock == nil {
		poolLock = &sync.Mutex{}
	}
	c := &machineConfigController{s: s, track: newTracker(), poolLock: poolLock}
	c.loop = newLoop(s, "machineconfig", c.sync)
	return c
}

// onChange queues every pool: configs, pools and nodes are few, and any
// of their changes may move any pool.
func (c *machineConfigController) onChange(controller.Event) { c.addAll(c.s.mcpInf) }

// renderError is a pool's configs that cannot be merged.
type renderError struct{ msg string }

func (e *renderError) Error() string { return e.msg }

// renderConfigs merges configs in name order into one spec: a file or a
// unit field of a later config replaces an earlier one's, drop-ins merge
// by name, kernel arguments add up (once each), the last OS image and
// health check win. Two configs of one priority (the name up to its first
// "-", as in 50-a and 50-b) writing one file differently are an error:
// which wins would be the accident of a name.
func renderConfigs(configs []*api.MachineConfig) (api.MachineConfigSpec, error) {
	configs = slices.Clone(configs)
	slices.SortFunc(configs, func(a, b *api.MachineConfig) int { return strings.Compare(a.Name, b.Name) })
	out := api.MachineConfigSpec{Config: api.IgnitionConfig{Ignition: api.IgnitionMeta{Version: defaultIgnitionVersion}}}
	type fileFrom struct {
		f    api.IgnitionFile
		from string
	}
	files := map[string]fileFrom{}
	units := map[string]api.IgnitionUnit{}
	seenArg := map[string]bool{}
	for _, mc := range configs {
		if v := mc.Spec.Config.Ignition.Version; versionAbove(v, out.Config.Ignition.Version) {
			out.Config.Ignition.Version = v
		}
		for _, f := range mc.Spec.Config.Storage.Files {
			if prev, ok := files[f.Path]; ok && api.ConfigPriority(prev.from) == api.ConfigPriority(mc.Name) && !api.SameFile(prev.f, f) {
				return out, &renderError{fmt.Sprintf("configs %s and %s, of the same priority %q, write %s differently: rename one to order them",
					prev.from, mc.Name, api.ConfigPriority(mc.Name), f.Path)}
			}
			files[f.Path] = fileFrom{f, mc.Name}
		}
		for _, u := range mc.Spec.Config.Systemd.Units {
			units[u.Name] = mergeUnit(units[u.Name], u)
		}
		for _, a := range mc.Spec.KernelArguments {
			if !seenArg[a] {
				seenArg[a] = true
				out.KernelArguments = append(out.KernelArguments, a)
			}
		}
		if mc.Spec.OSImageURL != "" {
			out.OSImageURL = mc.Spec.OSImageURL
		}
		if mc.Spec.HealthCheck != nil {
			out.HealthCheck = mc.Spec.HealthCheck
		}
	}
	for _, p := range sortedKeys(files) {
		out.Config.Storage.Files = append(out.Config.Storage.Files, files[p].f)
	}
	for _, n := range sortedKeys(units) {
		out.Config.Systemd.Units = append(out.Config.Systemd.Units, units[n])
	}
	return out, nil
}

func versionAbove(a, b string) bool {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := range min(len(pa), len(pb)) {
		if len(pa[i]) != len(pb[i]) {
			return len(pa[i]) > len(pb[i])
		}
		if pa[i] != pb[i] {
			return pa[i] > pb[i]
		}
	}
	return len(pa) > len(pb)
}

// mergeUnit lays u over base: what u sets replaces base's, its drop-ins
// replace base's of the same name.
func mergeUnit(base, u api.IgnitionUnit) api.IgnitionUnit {
	base.Name = u.Name
	if u.Contents != "" {
		base.Contents = u.Contents
	}
	if u.Enabled != nil {
		base.Enabled = u.Enabled
	}
	if u.Mask != nil {
		base.Mask = u.Mask
	}
	for _, d := range u.Dropins {
		if i := slices.IndexFunc(base.Dropins, func(x api.IgnitionDropin) bool { return x.Name == d.Name }); i >= 0 {
			base.Dropins = slices.Clone(base.Dropins)
			base.Dropins[i] = d
		} else {
			base.Dropins = append(slices.Clone(base.Dropins), d)
		}
	}
	slices.SortFunc(base.Dropins, func(a, b api.IgnitionDropin) int { return strings.Compare(a.Name, b.Name) })
	return base
}

// renderedName is rendered-POOL-HASH, the hash of the merged spec: the
// same content renders to the same name whatever order its keys came in.
func renderedName(pool string, spec api.MachineConfigSpec) string {
	b, _ := json.Marshal(spec)
	sum := sha256.Sum256(b)
	return api.RenderedPrefix + pool + "-" + hex.EncodeToString(sum[:16])
}

// poolNode is what the rollout looks at of one node.
type poolNode struct {
	name                 string
	ready, unschedulable bool
	// updateCordoned: the cordon is its update's, not an administrator's.
	updateCordoned   bool
	current, desired string
	state, reason    string
}

func poolNodeOf(n *api.Node) poolNode {
	_, marked := n.Annotations[api.AnnotationUpdateCordoned]
	return poolNode{
		name:           n.Name,
		ready:          api.ReadyIn(n.Status.Conditions),
		unschedulable:  n.Spec.Unschedulable,
		updateCordoned: marked,
		current:        n.Annotations[api.AnnotationCurrentConfig],
		desired:        n.Annotations[api.AnnotationDesiredConfig],
		state:          n.Annotations[api.AnnotationMCState],
		reason:         n.Annotations[api.AnnotationMCReason],
	}
}

// unavailable: not Ready, cordoned, or in an update (the MCO's rule).
func (n poolNode) unavailable() bool {
	return !n.ready || n.unschedulable || n.desired != n.current || n.state == api.MCStateWorking ||
		n.state == api.MCStateRebooting || n.state == api.MCStateDegraded
}

func (n poolNode) updatedTo(target string) bool {
	return n.current == target && n.desired == target && n.state == api.MCStateDone
}

// poolPlan is one look at a pool: the nodes to give the target config
// now, and the counts and conditions of its status.
type poolPlan struct {
	assign []string
	status api.MachineConfigPoolStatus
	// failed names the nodes the target config degraded; while there is
	// one, the config goes to no other node.
	failed []string
}

// planPool decides a pool's next step toward target (UPD-8): nodes that
// do not want target yet get it, in name order, while fewer than
// maxUnavailable are unavailable (FleetLock holders included). A node
// that is unavailable already because an update degraded it, or one
// still busy with an older config, gets it at no more cost (a newer
// config is how a failed one is mended); a node that is not Ready or
// that an administrator cordoned is left until it is back. Nothing
// starts while paused, or once target has degraded a node.
func planPool(target string, nodes []poolNode, maxUnavailable int32, paused bool, lockHolders int32) poolPlan {
	nodes = slices.Clone(nodes)
	slices.SortFunc(nodes, func(a, b poolNode) int { return strings.Compare(a.name, b.name) })
	var p poolPlan
	st := &p.status
	// FleetLock clients rebooting share the pool's limit (UPD-8 item 6).
	unavailable := lockHolders
	for _, n := range nodes {
		st.MachineCount++
		if n.updatedTo(target) {
			st.UpdatedMachineCount++
			if n.ready && !n.unschedulable {
				st.ReadyMachineCount++
			}
		}
		if n.unavailable() {
			unavailable++
		}
		if n.state == api.MCStateDegraded {
			st.DegradedMachineCount++
			if n.desired == target {
				p.failed = append(p.failed, n.name)
			}
		}
	}
	st.UnavailableMachineCount = unavailable - lockHolders
	if paused || len(p.failed) > 0 || target == "" {
		return p
	}
	for _, n := range nodes {
		switch {
		case n.desired == target:
		case n.state == api.MCStateDegraded || n.ready && n.desired != n.current && (!n.unschedulable || n.updateCordoned):
			p.assign = append(p.assign, n.name) // unavailable already
		case !n.ready || n.unschedulable && !n.updateCordoned:
			// Not Ready, or an administrator's cordon: left alone.
		case unavailable >= maxUnavailable:
		default:
			unavailable++
			p.assign = append(p.assign, n.name)
		}
	}
	st.UnavailableMachineCount = unavailable - lockHolders
	return p
}

func (c *machineConfigController) sync(ctx context.Context, name string) (time.Duration, error) {
	obj, ok := c.s.mcpInf.Get("", name)
	if !ok {
		return 0, c.deleteOrphanRendered(ctx, name)
	}
	if !c.track.caughtUp(name) {
		return cacheLagRetry, nil
	}
	pool := obj.(*api.MachineConfigPool)
	now := c.s.now()

	// 1. Render.
	var sources []*api.MachineConfig
	if pool.Spec.MachineConfigSelector != nil {
		sel, err := api.SelectorFromLabelSelector(pool.Spec.MachineConfigSelector)
		if err != nil {
			return 0, nil // validation refuses such selectors
		}
		for _, o := range c.s.mcInf.List() {
			mc := o.(*api.MachineConfig)
			if strings.HasPrefix(mc.Name, api.RenderedPrefix) || mc.DeletionTimestamp != nil || !sel.Matches(mc.Labels) {
				continue
			}
			sources = append(sources, mc)
		}
	}
	target := pool.Spec.Configuration.Name
	var renderErr error
	if len(sources) > 0 {
		spec, err := renderConfigs(sources)
		if err != nil {
			renderErr = err
		} else {
			rendered := renderedName(pool.Name, spec)
			if err := c.ensureRendered(ctx, pool, rendered, spec); err != nil {
				return 0, err
			}
			if target != rendered {
				if err := c.setPoolTarget(ctx, pool, rendered, sources); err != nil {
					return 0, err
				}
				c.s.rec.event(ctx, pool, componentMachineConfig, api.EventTypeNormal, "Rendered",
					fmt.Sprintf("pool %s now targets %s, rendered from %s", pool.Name, rendered, configNames(sources)))
				return 0, nil // the pool's update brings it back here
			}
		}
	}

	// 2. Roll out, under the lock FleetLock takes too, with the lock
	// holders as the store has them now.
	c.poolLock.Lock()
	defer c.poolLock.Unlock()
	if cur, err := c.s.client.Get(machineConfigPools, "", pool.Name); err == nil {
		pool = cur.(*api.MachineConfigPool)
	}
	sel, err := nodeSelectorOf(pool)
	if err != nil {
		return 0, nil
	}
	var nodes []poolNode
	var ambiguous, noUpdates []string
	nodeObjs := map[string]*api.Node{}
	var pools []*api.MachineConfigPool
	for _, o := range c.s.mcpInf.List() {
		pools = append(pools, o.(*api.MachineConfigPool))
	}
	for _, o := range c.s.nodeInf.List() {
		n := o.(*api.Node)
		if !sel.Matches(n.Labels) {
			continue
		}
		switch api.PoolOf(n, pools) {
		case pool.Name:
			if n.Annotations[api.AnnotationConfigUpdates] == "off" {
				noUpdates = append(noUpdates, n.Name)
				continue
			}
			nodes = append(nodes, poolNodeOf(n))
			nodeObjs[n.Name] = n
		case "":
			ambiguous = append(ambiguous, n.Name)
		}
	}
	plan := planPool(target, nodes, pool.Spec.MaxUnavailableOf(int32(len(nodes))), pool.Spec.Paused, int32(len(api.FleetLockHolders(pool))))
	// The writes go out together: raft commits them in a few batches,
	// and the first wave of a large pool starts at once rather than one
	// node after the other.
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		sem      = make(chan struct{}, assignWorkers)
	)
	for _, name := range plan.assign {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			out, err := c.assign(ctx, nodeObjs[name], target)
			mu.Lock()
			defer mu.Unlock()
			if err != nil && firstErr == nil {
				firstErr = err
			}
			if out != nil {
				c.track.wrote(pool.Name, c.s.nodeInf, out)
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return 0, firstErr
	}
	if len(plan.assign) > 0 {
		c.log.Info("nodes given the pool's config", "pool", pool.Name, "config", target, "nodes", strings.Join(plan.assign, ","))
		c.s.rec.event(ctx, pool, componentMachineConfig, api.EventTypeNormal, "SetDesiredConfig",
			fmt.Sprintf("nodes %s given %s", strings.Join(plan.assign, ", "), target))
	}

	// 3. Status.
	st := plan.status
	st.ObservedGeneration = pool.Generation
	st.Configuration = pool.Status.Configuration
	if target != "" && st.UpdatedMachineCount == st.MachineCount {
		st.Configuration = pool.Spec.Configuration
	}
	st.Conditions = poolConditions(pool, target, plan, nodes, ambiguous, noUpdates, renderErr, now)
	if !samePoolStatus(pool.Status, st) {
		cp, err := controller.Copy(pool)
		if err != nil {
			return 0, err
		}
		upd := cp.(*api.MachineConfigPool)
		upd.Status = st
		out, err := c.s.client.UpdateStatus(ctx, upd)
		if ignoreGone(err) != nil {
			return 0, fmt.Errorf("pool %s: status: %w", pool.Name, err)
		}
		if out != nil {
			c.track.wrote(pool.Name, c.s.mcpInf, out)
		}
	}
	return 0, nil
}

func nodeSelectorOf(pool *api.MachineConfigPool) (api.Selector, error) {
	if pool.Spec.NodeSelector == nil {
		return api.Nothing(), nil
	}
	return api.SelectorFromLabelSelector(pool.Spec.NodeSelector)
}

func configNames(mcs []*api.MachineConfig) string {
	var names []string
	for _, mc := range mcs {
		names = append(names, mc.Name)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// ensureRendered creates the rendered config unless it exists.
func (c *machineConfigController) ensureRendered(ctx context.Context, pool *api.MachineConfigPool, name string, spec api.MachineConfigSpec) error {
	if _, ok := c.s.mcInf.Get("", name); ok {
		return nil
	}
	mc := &api.MachineConfig{
		ObjectMeta: api.ObjectMeta{
			Name:            name,
			OwnerReferences: []api.OwnerReference{newControllerRef(pool)},
			Annotations:     map[string]string{"machineconfiguration.openshift.io/generated-by-controller-version": "outpost"},
		},
		Spec: spec,
	}
	if _, err := c.s.client.Create(ctx, mc); err != nil && !api.IsAlreadyExists(err) {
		return fmt.Errorf("pool %s: create %s: %w", pool.Name, name, err)
	}
	return nil
}

func (c *machineConfigController) setPoolTarget(ctx context.Context, pool *api.MachineConfigPool, rendered string, sources []*api.MachineConfig) error {
	cp, err := controller.Copy(pool)
	if err != nil {
		return err
	}
	upd := cp.(*api.MachineConfigPool)
	upd.Spec.Configuration = api.MachineConfigPoolConfiguration{Name: rendered}
	for _, mc := range sources {
		upd.Spec.Configuration.Source = append(upd.Spec.Configuration.Source, api.ObjectReference{
			Kind: "MachineConfig", APIVersion: machineConfigsResource.APIVersion(), Name: mc.Name})
	}
	slices.SortFunc(upd.Spec.Configuration.Source, func(a, b api.ObjectReference) int { return strings.Compare(a.Name, b.Name) })
	if _, err := c.s.client.Update(ctx, upd); ignoreGone(err) != nil {
		return fmt.Errorf("pool %s: set configuration %s: %w", pool.Name, rendered, err)
	}
	return nil
}

// assign sets a node's desiredConfig, on the node as the store has it,
// and returns the node written (nil when nothing was).
func (c *machineConfigController) assign(ctx context.Context, n *api.Node, target string) (api.Object, error) {
	cur, err := c.s.client.Get(nodesResource, "", n.Name)
	if err != nil {
		return nil, ignoreGone(err)
	}
	cp, err := controller.Copy(cur)
	if err != nil {
		return nil, err
	}
	node := cp.(*api.Node)
	if node.Annotations[api.AnnotationDesiredConfig] == target {
		return nil, nil
	}
	if node.Annotations == nil {
		node.Annotations = map[string]string{}
	}
	node.Annotations[api.AnnotationDesiredConfig] = target
	out, err := c.s.client.Update(ctx, node)
	if ignoreGone(err) != nil {
		return nil, fmt.Errorf("node %s: desired config %s: %w", n.Name, target, err)
	}
	return out, nil
}

// deleteOrphanRendered deletes the rendered configs of a pool that is
// gone.
func (c *machineConfigController) deleteOrphanRendered(ctx context.Context, pool string) error {
	for _, o := range c.s.mcInf.List() {
		mc := o.(*api.MachineConfig)
		owned := slices.ContainsFunc(mc.OwnerReferences, func(r api.OwnerReference) bool { return r.Kind == "MachineConfigPool" && r.Name == pool })
		if !owned || mc.DeletionTimestamp != nil {
			continue
		}
		if err := c.s.client.Delete(ctx, machineConfigsResource, "", mc.Name, preconditionUID(mc.UID)); ignoreGone(err) != nil {
			return fmt.Errorf("delete %s of deleted pool %s: %w", mc.Name, pool, err)
		}
	}
	return nil
}

// poolConditions are the MCO's: Updated, Updating, Degraded with its two
// causes NodeDegraded and RenderDegraded.
func poolConditions(pool *api.MachineConfigPool, target string, plan poolPlan, nodes []poolNode, ambiguous, noUpdates []string, renderErr error, now time.Time) []api.MachineConfigPoolCondition {
	st := plan.status
	cond := func(typ string, on bool, reason, msg string) api.MachineConfigPoolCondition {
		s := api.ConditionFalse
		if on {
			s = api.ConditionTrue
		}
		c := api.MachineConfigPoolCondition{Type: typ, Status: s, Reason: reason, Message: msg, LastTransitionTime: api.NewTime(now)}
		if i := slices.IndexFunc(pool.Status.Conditions, func(x api.MachineConfigPoolCondition) bool { return x.Type == typ }); i >= 0 && pool.Status.Conditions[i].Status == s {
			c.LastTransitionTime = pool.Status.Conditions[i].LastTransitionTime
		}
		return c
	}
	allUpdated := target != "" && st.UpdatedMachineCount == st.MachineCount
	updatedMsg := fmt.Sprintf("all nodes run %s", target)
	if target == "" {
		updatedMsg = "no config selected yet (spec.machineConfigSelector matches none)"
	} else if !allUpdated {
		updatedMsg = fmt.Sprintf("%d of %d nodes run %s", st.UpdatedMachineCount, st.MachineCount, target)
	}
	if len(ambiguous) > 0 {
		updatedMsg += fmt.Sprintf("; nodes selected by more than one pool are left alone: %s", strings.Join(ambiguous, ", "))
	}
	if len(noUpdates) > 0 {
		updatedMsg += fmt.Sprintf("; left out, their agents take no config updates (no systemd, or --os-updates off): %s", strings.Join(noUpdates, ", "))
	}
	var updatingReason, updatingMsg string
	updating := !allUpdated && target != ""
	switch {
	case !updating:
	case pool.Spec.Paused:
		updating, updatingReason, updatingMsg = false, "Paused", "the pool is paused: no more nodes start updating"
	case len(plan.failed) > 0:
		updating, updatingReason, updatingMsg = false, "ConfigFailed",
			fmt.Sprintf("%s degraded %s: it goes to no other node until a new config is rendered", target, strings.Join(plan.failed, ", "))
	default:
		updatingMsg = fmt.Sprintf("updating to %s: %d of %d nodes done, %d unavailable (maxUnavailable %d)",
			target, st.UpdatedMachineCount, st.MachineCount, st.UnavailableMachineCount, pool.Spec.MaxUnavailableOf(st.MachineCount))
	}
	var degradedNodes []string
	for _, n := range nodes {
		if n.state == api.MCStateDegraded {
			degradedNodes = append(degradedNodes, fmt.Sprintf("%s (%s: %s)", n.name, n.desired, n.reason))
		}
	}
	nodeDeg := cond(api.PoolNodeDegraded, len(degradedNodes) > 0, "", "")
	if len(degradedNodes) > 0 {
		nodeDeg.Reason, nodeDeg.Message = "NodesDegraded", fmt.Sprintf("%d nodes degraded: %s", len(degradedNodes), strings.Join(degradedNodes, "; "))
	}
	renderDeg := cond(api.PoolRenderDegraded, renderErr != nil, "", "")
	if renderErr != nil {
		renderDeg.Reason, renderDeg.Message = "RenderFailed", renderErr.Error()
	}
	degraded := cond(api.PoolDegraded, nodeDeg.Status == api.ConditionTrue || renderDeg.Status == api.ConditionTrue, "", "")
	if degraded.Status == api.ConditionTrue {
		degraded.Reason = strings.TrimSpace(nodeDeg.Reason + " " + renderDeg.Reason)
		degraded.Message = strings.Trim(nodeDeg.Message+"; "+renderDeg.Message, "; ")
	}
	return []api.MachineConfigPoolCondition{
		cond(api.PoolUpdated, allUpdated, "", updatedMsg),
		cond(api.PoolUpdating, updating, updatingReason, updatingMsg),
		degraded, nodeDeg, renderDeg,
	}
}

func samePoolStatus(a, b api.MachineConfigPoolStatus) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

package controllers

import (
	"context"
	"slices"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/controller"
)

const componentDeployment = "deployment-controller"

// Labels and annotations of Kubernetes' deployment controller; `outpost
// rollout` reads the same ones.
const (
	labelPodTemplateHash = "pod-template-hash"
	annRevision          = "deployment.kubernetes.io/revision"
	annRevisionHistory   = "deployment.kubernetes.io/revision-history"
	annDesiredReplicas   = "deployment.kubernetes.io/desired-replicas"
	annMaxReplicas       = "deployment.kubernetes.io/max-replicas"
)

// annotationsNotCopied are the deployment annotations a replica set does
// not inherit.
var annotationsNotCopied = map[string]bool{
	"kubectl.kubernetes.io/last-applied-configuration": true,
	"outpost.io/last-applied-configuration":            true,
	annRevision:                                        true,
	annRevisionHistory:                                 true,
	annDesiredReplicas:                                 true,
	annMaxReplicas:                                     true,
	"deprecated.deployment.rollback.to":                true,
}

// Deployment condition types, reasons and the scaling event reason.
const (
	condAvailable   = "Available"
	condProgressing = "Progressing"

	reasonMinimumReplicasAvailable   = "MinimumReplicasAvailable"
	reasonMinimumReplicasUnavailable = "MinimumReplicasUnavailable"
	reasonNewReplicaSetCreated       = "NewReplicaSetCreated"
	reasonFoundNewReplicaSet         = "FoundNewReplicaSet"
	reasonNewReplicaSetAvailable     = "NewReplicaSetAvailable"
	reasonReplicaSetUpdated          = "ReplicaSetUpdated"
	reasonProgressDeadlineExceeded   = "ProgressDeadlineExceeded"
	reasonDeploymentPaused           = "DeploymentPaused"
	reasonDeploymentResumed          = "DeploymentResumed"

	reasonScalingReplicaSet = "ScalingReplicaSet"
)

// maxHashCollisions bounds the names tried for a new replica set when
// `<deployment>-<hash>` is taken by another object.
const maxHashCollisions = 10

// deploymentController rolls deployments out through replica sets.
type deploymentController struct {
	s     *shared
	loop  *loop
	track *tracker
}

func newDeploymentController(s *shared) *deploymentController {
	c := &deploymentController{s: s, track: newTracker()}
	c.loop = newLoop(s, "deployment", c.sync)
	return c
}

func (c *deploymentController) onDeployment(ev controller.Event) {
	c.loop.q.Add(controller.KeyOf(ev.Object))
}

// onReplicaSet wakes the deployment that controls the replica set, or,
// for an orphan, those whose selector matches its labels.
func (c *deploymentController) onReplicaSet(ev controller.Event) {
	m := ev.Object.GetObjectMeta()
	ref := api.ControllerRef(m)
	if ev.Old != nil {
		if old := api.ControllerRef(ev.Old.GetObjectMeta()); old != nil && old.Kind == "Deployment" && (ref == nil || ref.UID != old.UID) {
			c.loop.q.Add(controller.Key(m.Namespace, old.Name))
		}
	}
	if ref != nil {
		if ref.Kind == "Deployment" {
			c.loop.q.Add(controller.Key(m.Namespace, ref.Name))
		}
		return
	}
	if ev.Type == api.Deleted {
		return
	}
	for _, obj := range c.s.deployInf.List() {
		d := obj.(*api.Deployment)
		if d.Namespace != m.Namespace {
			continue
		}
		if sel, err := c.s.sels.of(d, d.Spec.Selector); err == nil && sel.Matches(m.Labels) {
			c.loop.q.Add(controller.KeyOf(d))
		}
	}
}

// onPod wakes a Recreate deployment when one of its old pods is gone: it
// waits for all of them before it creates the new ones.
func (c *deploymentController) onPod(ev controller.Event) {
	if ev.Type != api.Deleted {
		return
	}
	pod := ev.Object.(*api.Pod)
	ref := api.ControllerRef(&pod.ObjectMeta)
	if ref == nil || ref.Kind != "ReplicaSet" {
		return
	}
	rs, ok := c.s.rss.get(pod.Namespace, ref.Name)
	if !ok {
		return
	}
	dref := api.ControllerRef(rs.GetObjectMeta())
	if dref == nil || dref.Kind != "Deployment" {
		return
	}
	if d, ok := c.s.deployInf.Get(pod.Namespace, dref.Name); ok && d.(*api.Deployment).Spec.Strategy.Type == api.RecreateDeploymentStrategyType {
		c.loop.q.Add(controller.KeyOf(d))
	}
}

// sync reconciles one deployment: claim its replica sets, then, as
// Kubernetes orders it, status only while deleting, scale only while
// paused or on a change of replicas, else one step of its strategy.
func (c *deploymentController) sync(ctx context.Context, key string) (time.Duration, error) {
	ns, name, err := splitKey(key)
	if err != nil {
		return 0, nil
	}
	obj, ok := c.s.deployInf.Get(ns, name)
	if !ok {
		c.track.forget(key)
		return 0, nil
	}
	if !c.track.caughtUp(key) {
		return cacheLagRetry, nil
	}
	d := obj.(*api.Deployment)
	sel, err := c.s.sels.of(d, d.Spec.Selector)
	if err != nil {
		c.loop.log.Warn("deployment has an invalid selector", "key", key, "err", err)
		return 0, nil
	}
	candidates := append(c.s.rss.ownedBy(d.UID), c.s.rss.orphansIn(ns)...)
	cl := &claimer{s: c.s, owner: d, sel: sel, inf: c.s.rsInf, t: c.track, key: key}
	owned, err := cl.claim(ctx, candidates)
	if err != nil {
		return 0, err
	}
	deleting := c.track.pendingDeletes(key, c.s.rss)
	r := &rollout{c: c, ctx: ctx, key: key, d: d, now: c.s.now(), conds: slices.Clone(d.Status.Conditions)}
	for _, obj := range owned {
		if !deleting[obj.GetObjectMeta().UID] {
			r.all = append(r.all, obj.(*api.ReplicaSet))
		}
	}
	if d.DeletionTimestamp != nil {
		return 0, r.writeStatus(r.calculateStatus())
	}
	r.checkPausedConditions()
	if d.Spec.Paused {
		return r.syncScale()
	}
	scaling, err := r.isScalingEvent()
	if err != nil {
		return 0, err
	}
	if scaling {
		return r.syncScale()
	}
	if d.Spec.Strategy.Type == api.RecreateDeploymentStrategyType {
		return r.recreate()
	}
	return r.rolling()
}

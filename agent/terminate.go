package agent

import (
	"context"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
)

// finishDelete finishes the graceful delete of p, a pod bound here that
// the control plane marked terminating: it stops the containers within
// p's deletionGracePeriodSeconds, then deletes the object with a grace
// period of 0 (which a node may do for its own pods only). Until the
// object is gone, controllers count the pod as present, so its
// replacement does not start while it runs.
func (a *Agent) finishDelete(ctx context.Context, p *api.Pod) {
	uid := string(p.UID)
	a.pods.mu.Lock()
	_, busy := a.pods.finishing[uid]
	a.pods.finishing[uid] = p
	a.pods.mu.Unlock()
	if busy {
		return
	}
	grace := time.Duration(-1)
	if g := p.DeletionGracePeriodSeconds; g != nil {
		grace = time.Duration(*g) * time.Second
	}
	key := p.Namespace + "/" + p.Name
	a.log.Info("pod being deleted: stopping it", "pod", key, "grace", grace)
	h := a.dropPod(uid, grace)
	a.wg.Go(func() {
		if h != nil {
			select {
			case <-h.done:
			case <-ctx.Done():
				return
			}
		} else {
			// No worker (the agent restarted since): stop what runs.
			a.stopContainers(ctx, p, grace)
		}
		a.releasePodNetwork(ctx, p)
		a.removePodFiles(uid)
		a.deleteStopped(ctx, p)
	})
}

// deleteStopped deletes the object of p, whose containers have stopped,
// retrying while the control plane cannot be reached.
func (a *Agent) deleteStopped(ctx context.Context, p *api.Pod) {
	uid := string(p.UID)
	key := p.Namespace + "/" + p.Name
	defer func() {
		a.pods.mu.Lock()
		delete(a.pods.finishing, uid)
		a.pods.mu.Unlock()
		a.forgetFenced(uid)
	}()
	zero := int64(0)
	opts := client.DeleteOptions{Preconditions: &client.Preconditions{UID: uid}, GracePeriodSeconds: &zero}
	wait := time.Second
	for {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := a.cl.DeleteWith(rctx, podsResource, p.Namespace, p.Name, opts)
		cancel()
		switch {
		case err == nil:
			a.contact()
			a.log.Info("pod stopped and deleted", "pod", key)
			return
		case api.IsNotFound(err), api.IsConflict(err):
			// Removed already (forced), or another pod holds the name.
			a.contact()
			return
		case api.ReasonOf(err) == api.ReasonForbidden, api.ReasonOf(err) == api.ReasonInvalid, api.ReasonOf(err) == api.ReasonBadRequest:
			a.contact()
			a.log.Warn("deleting a stopped pod was refused", "pod", key, "err", err)
			return
		}
		if ctx.Err() != nil {
			return
		}
		if api.ReasonOf(err) == "" {
			a.offline(err)
		}
		a.log.Debug("deleting a stopped pod failed; retrying", "pod", key, "err", err, "in", wait)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(wait*2, 30*time.Second)
	}
}

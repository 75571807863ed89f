package sim

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
)

// maybeUpdate starts a simulated config update of n when the stored node
// wants a config it does not run and none is under way.
func (a *Agents) maybeUpdate(n *simNode, node *api.Node) {
	if a.cfg.UpdateDuration <= 0 {
		return
	}
	want := node.Annotations[api.AnnotationDesiredConfig]
	if want == "" || want == node.Annotations[api.AnnotationCurrentConfig] {
		return
	}
	if cur := n.updating.Load(); cur != nil && *cur == want {
		return
	}
	n.updating.Store(&want)
	a.wg.Go(func() { a.simulateUpdate(n, want) })
}

// simulateUpdate is an agent's update as the control plane sees it: two
// writes of the node's annotations (and its cordon), UpdateDuration
// apart.
func (a *Agents) simulateUpdate(n *simNode, want string) {
	ctx := a.ctx
	err := a.updateNode(ctx, n, func(node *api.Node) {
		node.Annotations[api.AnnotationMCState] = api.MCStateWorking
		if !node.Spec.Unschedulable {
			node.Spec.Unschedulable = true
			node.Annotations[api.AnnotationUpdateCordoned] = "true"
		}
	})
	if err != nil {
		a.warn("simulated update: start", "node", n.name, "error", err)
		n.updating.Store(nil)
		return
	}
	t := time.NewTimer(a.cfg.UpdateDuration)
	select {
	case <-ctx.Done():
		t.Stop()
		return
	case <-t.C:
	}
	err = a.updateNode(ctx, n, func(node *api.Node) {
		node.Annotations[api.AnnotationCurrentConfig] = want
		node.Annotations[api.AnnotationMCState] = api.MCStateDone
		delete(node.Annotations, api.AnnotationMCReason)
		if _, ok := node.Annotations[api.AnnotationUpdateCordoned]; ok {
			node.Spec.Unschedulable = false
			delete(node.Annotations, api.AnnotationUpdateCordoned)
		}
	})
	if err != nil {
		a.warn("simulated update: done", "node", n.name, "error", err)
		n.updating.Store(nil)
	}
}

// updateNode reads n's Node, changes it and writes it with n's own
// credential, again on a conflict.
// The first try writes over the Node last seen, without a read, as the
// agent does.
func (a *Agents) updateNode(ctx context.Context, n *simNode, change func(*api.Node)) error {
	for i := range 5 {
		err := a.updateNodeOnce(ctx, n, change, i == 0)
		if !api.IsConflict(err) {
			return err
		}
	}
	return a.updateNodeOnce(ctx, n, change, false)
}

func (a *Agents) updateNodeOnce(ctx context.Context, n *simNode, change func(*api.Node), fromSeen bool) error {
	return retry(ctx, func() error {
		wctx, cancel := context.WithTimeout(ctx, writeTimeout)
		defer cancel()
		node, ok, err := n.latest.Copy()
		if !fromSeen || !ok || err != nil {
			obj, err := n.cl.Get(wctx, nodesResource, "", n.name, client.GetOptions{})
			if err != nil {
				return err
			}
			if node, ok = obj.(*api.Node); !ok {
				return ErrBadReply
			}
		}
		if node.Annotations == nil {
			node.Annotations = map[string]string{}
		}
		change(node)
		obj, _, err := n.cl.Update(wctx, node)
		if stored, ok := obj.(*api.Node); ok && err == nil {
			n.latest.See(stored)
		}
		return err
	})
}

// maybeReplaceBinary starts a simulated binary update of n when its Node
// names a binary of another version and none is under way.
func (a *Agents) maybeReplaceBinary(n *simNode, node *api.Node) {
	if a.cfg.BinaryUpdateDuration <= 0 {
		return
	}
	f := strings.Fields(node.Annotations[api.AnnotationAgentBinary])
	if len(f) < 2 || f[0] == node.Status.NodeInfo.KubeletVersion {
		return
	}
	if v := n.version.Load(); v != nil && *v == f[0] {
		return
	}
	if !n.replacing.CompareAndSwap(false, true) {
		return
	}
	a.wg.Go(func() {
		defer n.replacing.Store(false)
		a.simulateBinaryUpdate(n, f[0], f[1])
	})
}

// simulateBinaryUpdate downloads the binary from the API as an agent
// does (the load the control plane sees), checks its digest, waits
// BinaryUpdateDuration (the restart) and reports the version.
func (a *Agents) simulateBinaryUpdate(n *simNode, version, digest string) {
	ctx, cancel := context.WithTimeout(a.ctx, 10*time.Minute)
	defer cancel()
	rc, err := n.cl.Binary(ctx, digest)
	if err != nil {
		a.warn("simulated binary update: download", "node", n.name, "error", err)
		return
	}
	h := sha256.New()
	_, err = io.Copy(h, rc)
	rc.Close()
	if err == nil && "sha256:"+hex.EncodeToString(h.Sum(nil)) != digest {
		err = fmt.Errorf("digest mismatch: want %s", digest)
	}
	if err != nil {
		a.warn("simulated binary update: download", "node", n.name, "error", err)
		return
	}
	t := time.NewTimer(a.cfg.BinaryUpdateDuration)
	select {
	case <-ctx.Done():
		t.Stop()
		return
	case <-t.C:
	}
	n.version.Store(&version)
	n.versionChanged.Store(true)
	idx := n.idx
	a.hbq.Add(idx)
}

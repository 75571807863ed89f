package agent

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"reflect"
	goruntime "runtime"
	"slices"
	"time"

	"github.com/outpost-edge/outpost/agent/host"
	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
	"github.com/outpost-edge/outpost/controlplane/version"
	"github.com/outpost-edge/outpost/runtime"
)

// Well-known labels the agent sets on its Node.
const (
	LabelHostname = "kubernetes.io/hostname"
	LabelOS       = "kubernetes.io/os"
	LabelArch     = "kubernetes.io/arch"
)

// nodeLoop registers the Node, then looks at the host every StatusCheck.
// It writes the node's status (a raft entry) only when it changed —
// conditions, capacity, addresses, node info, images — or StatusRefresh
// passed, and otherwise proves the node alive every Heartbeat with the
// heartbeat call, which the leader keeps in memory (issue 9 item 8).
func (a *Agent) nodeLoop(ctx context.Context) {
	var (
		prev     []api.NodeCondition
		lastSent time.Time
		lastBeat time.Time
		lastHB   time.Time
		sentKey  api.NodeStatus
		node     *api.Node
		// resend: the stored Ready status is not the one posted (the
		// node lifecycle controller marked the node Unknown).
		resend bool
	)
	t := time.NewTicker(a.cfg.StatusCheck)
	defer t.Stop()
	for {
		a.alive.Store(time.Now().UnixNano())
		if node == nil {
			node = a.register(ctx)
		}
		if node != nil {
			rtVersion, rtErr := a.rt.Version(ctx)
			obs, err := host.Observe(ctx, host.ObserveConfig{DataDir: a.cfg.DataDir, ImageDir: a.cfg.DataDir})
			if err != nil {
				a.log.Warn("observe host", "err", err)
				a.metrics.syncError(loopHost)
			}
			now := a.now()
			conds := host.Conditions(prev, obs, a.thresholds, rtErr, now)
			a.relievePressure(ctx, conds)
			changed := host.Changed(prev, conds) || resend
			beat := now.Sub(lastBeat) >= a.cfg.Heartbeat
			if changed || beat {
				st, err := a.nodeStatus(ctx, conds, rtVersion)
				switch {
				case err != nil:
					a.log.Warn("read the host", "err", err)
					a.metrics.syncError(loopHost)
				case changed || a.legacyHeartbeat.Load() || now.Sub(lastSent) >= a.cfg.StatusRefresh || !reflect.DeepEqual(statusKey(st), sentKey):
					sent, gone := a.sendNodeStatus(ctx, node, st)
					switch {
					case gone:
						node = nil
					case sent != nil:
						node, prev, lastSent, lastBeat, sentKey, resend = sent, conds, now, now, statusKey(st), false
					}
				}
			}
			// The heartbeat goes every period even when the status went
			// too: it is what the agent fences itself by (fence.go), and
			// its reply gives the grace period.
			if node != nil && !a.legacyHeartbeat.Load() && (now.Sub(lastHB) >= a.cfg.Heartbeat || !a.fence.graceKnown()) {
				switch ready, err := a.heartbeat(ctx); {
				case err == nil:
					lastHB, lastBeat = now, now
					resend = ready != conditionStatus(prev, api.NodeReady)
				case api.IsNotFound(err):
					node = nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// heartbeat renews the node's liveness on the leader and returns the
// Ready status the control plane holds. A server that does not serve
// heartbeats (an older version during a rolling update) makes the agent
// post its whole status every heartbeat instead, as those servers expect.
func (a *Agent) heartbeat(ctx context.Context) (string, error) {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	sentAt := a.fence.now()
	hb, err := a.cl.NodeHeartbeat(rctx, a.cfg.NodeName)
	if err != nil {
		var se *api.StatusError
		switch {
		case errors.As(err, &se) && se.Status.Code == http.StatusNotFound && (se.Status.Details == nil || se.Status.Details.Name == ""):
			a.log.Info("the server serves no node heartbeats: posting the node's status every heartbeat instead")
			a.legacyHeartbeat.Store(true)
			return "", nil
		case api.IsNotFound(err):
			// The Node was deleted: register it again.
		default:
			a.offline(err)
		}
		a.metrics.syncError(loopNode)
		return "", err
	}
	a.contact()
	a.metrics.statusReported(a.now())
	a.acked(ctx, sentAt, time.Duration(hb.NodeMonitorGracePeriodMillis)*time.Millisecond)
	a.learnServers(hb.Servers)
	if hb.Release && !a.released.Load() {
		a.wg.Go(func() { a.release(ctx) })
	}
	a.serveIfAsked(ctx, hb.ServerRole)
	return hb.Ready, nil
}

// statusKey is st without the times that change at every post, to tell a
// status that changed from one that did not.
func statusKey(st api.NodeStatus) api.NodeStatus {
	st.Conditions = slices.Clone(st.Conditions)
	for i := range st.Conditions {
		st.Conditions[i].LastHeartbeatTime = nil
		st.Conditions[i].LastTransitionTime = nil
	}
	return st
}

// conditionStatus is the status of the condition of type typ in conds.
func conditionStatus(conds []api.NodeCondition, typ string) string {
	for _, c := range conds {
		if c.Type == typ {
			return c.Status
		}
	}
	return ""
}

// nodeStatus is the status the agent reports: the host's facts, the
// runtime's version ("" when it does not answer) and images, and conds.
func (a *Agent) nodeStatus(ctx context.Context, conds []api.NodeCondition, rtVersion string) (api.NodeStatus, error) {
	facts, err := host.Facts(ctx, host.FactsConfig{
		DataDir:   a.cfg.DataDir,
		ImageDir:  a.cfg.DataDir,
		Reserved:  a.cfg.Reserved,
		MaxPods:   a.cfg.MaxPods,
		Evictions: a.thresholds,
	})
	if err != nil {
		return api.NodeStatus{}, err
	}
	st := api.NodeStatus{
		Capacity:    facts.Capacity,
		Allocatable: facts.Allocatable,
		Conditions:  conds,
		NodeInfo:    facts.NodeInfo,
		Addresses:   facts.Addresses,
	}
	if a.address != "" {
		st.Addresses = withInternalIP(st.Addresses, a.address)
	}
	st.NodeInfo.KubeletVersion = version.Version
	st.NodeInfo.ContainerRuntimeVersion = rtVersion
	st.DaemonEndpoints.KubeletEndpoint.Port = int32(a.endpointPort)
	if imgs, err := a.rt.ListImages(ctx); err == nil {
		st.Images = nodeImages(imgs)
	}
	return st, nil
}

func withInternalIP(addrs []api.NodeAddress, ip string) []api.NodeAddress {
	out := []api.NodeAddress{{Type: "InternalIP", Address: ip}}
	for _, a := range addrs {
		if a.Type != "InternalIP" {
			out = append(out, a)
		}
	}
	return out
}

func nodeImages(imgs []runtime.Image) []api.ContainerImage {
	out := make([]api.ContainerImage, 0, len(imgs))
	for _, im := range imgs {
		if len(im.Names) == 0 {
			continue
		}
		out = append(out, api.ContainerImage{Names: slices.Clone(im.Names), SizeBytes: im.Size})
	}
	slices.SortFunc(out, func(x, y api.ContainerImage) int {
		switch {
		case x.Names[0] < y.Names[0]:
			return -1
		case x.Names[0] > y.Names[0]:
			return 1
		}
		return 0
	})
	return out
}

// labels are the Node's labels the agent owns: the well-known ones and
// the configured ones.
func (a *Agent) labels() map[string]string {
	l := map[string]string{
		LabelHostname: a.cfg.NodeName,
		LabelOS:       goruntime.GOOS,
		LabelArch:     goruntime.GOARCH,
	}
	if a.cfg.ControlPlaneEligible {
		l[api.LabelControlPlaneEligible] = "true"
	}
	maps.Copy(l, a.cfg.Labels)
	return l
}

// register creates the Node, or puts the agent's labels back on an
// existing one; nil while the control plane cannot be reached.
func (a *Agent) register(ctx context.Context) *api.Node {
	rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	obj, err := a.cl.Get(rctx, nodesResource, "", a.cfg.NodeName, client.GetOptions{})
	switch {
	case err == nil:
		node, ok := obj.(*api.Node)
		if !ok {
			return nil
		}
		a.contact()
		want := a.labels()
		cur := node.Labels
		changed := false
		for k, v := range want {
			if cur[k] != v {
				changed = true
			}
		}
		own := a.ownAnnotations()
		for k, v := range own {
			if node.Annotations[k] != v {
				changed = true
			}
		}
		if !changed {
			return node
		}
		upd := *node
		upd.Labels = maps.Clone(cur)
		if upd.Labels == nil {
			upd.Labels = map[string]string{}
		}
		maps.Copy(upd.Labels, want)
		upd.Annotations = maps.Clone(node.Annotations)
		if upd.Annotations == nil {
			upd.Annotations = map[string]string{}
		}
		for k, v := range own {
			if v == "" {
				delete(upd.Annotations, k)
			} else {
				upd.Annotations[k] = v
			}
		}
		res, _, err := a.cl.Update(rctx, &upd)
		if err != nil {
			a.log.Warn("update node labels", "err", err)
			return node
		}
		n, _ := res.(*api.Node)
		return n
	case api.IsNotFound(err):
		v, _ := a.rt.Version(rctx)
		st, serr := a.nodeStatus(rctx, nil, v)
		if serr != nil {
			a.log.Error("read the host", "err", serr)
			return nil
		}
		node := &api.Node{
			ObjectMeta: api.ObjectMeta{Name: a.cfg.NodeName, Labels: a.labels()},
			Spec:       api.NodeSpec{Taints: a.cfg.Taints},
			Status:     st,
		}
		for k, v := range a.ownAnnotations() {
			if v != "" {
				if node.Annotations == nil {
					node.Annotations = map[string]string{}
				}
				node.Annotations[k] = v
			}
		}
		sentAt := a.fence.now()
		res, _, err := a.cl.Create(rctx, node)
		if err != nil {
			if !api.IsAlreadyExists(err) {
				a.log.Warn("register node", "err", err)
			}
			return nil
		}
		a.contact()
		// The registration is the leader's first sign of this node (it
		// counts a node from when it first sees it): an acknowledgement,
		// as a status write is. Without it, an agent cut off before its
		// first heartbeat reply knew of no acknowledgement, and once
		// restarted stopped every pod at once.
		a.acked(ctx, sentAt-time.Second, 0)
		a.log.Info("node registered", "labels", node.Labels)
		n, _ := res.(*api.Node)
		return n
	default:
		a.offline(err)
		a.metrics.syncError(loopNode)
		return nil
	}
}

// ownAnnotations are the annotations the agent keeps on its Node from
// registration on, by key ("": absent): whether it takes config updates,
// and its binary's state and last roll back. Written with the
// registration, so that a heartbeating node's object is not written.
func (a *Agent) ownAnnotations() map[string]string {
	b := a.bin.Load()
	if b == nil {
		b = &binaryState{}
	}
	return map[string]string{
		api.AnnotationConfigUpdates:      a.configUpdatesAnnotation(),
		api.AnnotationAgentBinaryState:   b.state,
		api.AnnotationAgentBinaryFailure: b.failure,
	}
}

// configUpdatesAnnotation is "off" when this agent takes no config
// updates (its pool leaves the node out, and says so), else "".
func (a *Agent) configUpdatesAnnotation() string {
	if a.cfg.OSSystemd == nil {
		return "off"
	}
	return ""
}

// sendNodeStatus writes the node's status st; it returns the stored
// node, or nil when it could not (the next tick tries again), and whether
// the Node is gone (deleted by an administrator: register again).
func (a *Agent) sendNodeStatus(ctx context.Context, node *api.Node, st api.NodeStatus) (*api.Node, bool) {
	for attempt := 0; attempt < 3; attempt++ {
		upd := *node
		upd.Status = st
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		sentAt := a.fence.now()
		res, _, err := a.cl.UpdateStatus(rctx, &upd)
		cancel()
		switch {
		case err == nil:
			a.contact()
			a.metrics.statusReported(a.now())
			// The leader counts a status write as a sign of life when
			// its lastHeartbeatTime, in whole seconds, moved: a second
			// before this one was sent is never later than the sign it
			// counted.
			a.acked(ctx, sentAt-time.Second, 0)
			n, _ := res.(*api.Node)
			return n, false
		case api.IsConflict(err):
			obj, gerr := a.cl.Get(ctx, nodesResource, "", a.cfg.NodeName, client.GetOptions{})
			if gerr != nil {
				return nil, api.IsNotFound(gerr)
			}
			if fresh, ok := obj.(*api.Node); ok {
				node = fresh
			}
		case api.IsNotFound(err):
			return nil, true
		default:
			a.offline(err)
			a.metrics.syncError(loopNode)
			return nil, false
		}
	}
	return nil, false
}

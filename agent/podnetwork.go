package agent

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/outpost-edge/outpost/agent/podnet"
	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
)

// PodNetwork gives pods networks of their own (SPEC NET-1); package
// podnet's Manager is the real one.
type PodNetwork interface {
	// Setup gives a pod its network, or answers with the one it has.
	Setup(ctx context.Context, p podnet.Pod) (podnet.Network, error)
	// Teardown removes a pod's network; one without is no error.
	Teardown(ctx context.Context, p podnet.Pod) error
	// Has reports whether pod uid has a network here; Pods lists the
	// UIDs of the pods that have one.
	Has(uid string) bool
	Pods() []string
	// Configured reports whether a network configuration is in place
	// (the site's, or one written before).
	Configured() bool
	// WriteDefault writes the default network over the node's pod
	// CIDR unless the site has its own; clusterCIDR (may be invalid:
	// unknown) is the range its pods' traffic is not masqueraded in;
	// mtu, when not 0, is the MTU of pods' links (an overlay's).
	WriteDefault(podCIDR, clusterCIDR netip.Prefix, mtu int) error
}

// ownNetwork reports whether pod gets a network of its own here.
func (a *Agent) ownNetwork(pod *api.Pod) bool {
	return a.cfg.PodNetwork != nil && !pod.Spec.HostNetwork
}

// podNet is what the network plugins are told of pod.
func podNet(pod *api.Pod) podnet.Pod {
	p := podnet.Pod{Namespace: pod.Namespace, Name: pod.Name, UID: string(pod.UID)}
	for _, c := range pod.Spec.Containers {
		for _, port := range c.Ports {
			if port.HostPort == 0 {
				continue
			}
			proto := port.Protocol
			if proto == "" {
				proto = api.ProtocolTCP
			}
			p.Ports = append(p.Ports, podnet.PortMapping{HostPort: port.HostPort, ContainerPort: port.ContainerPort, Protocol: strings.ToLower(proto), HostIP: port.HostIP})
		}
	}
	return p
}

// setupPodNetwork gives pod its network, first writing the default
// network over the node's pod CIDR if this agent has not yet.
func (a *Agent) setupPodNetwork(ctx context.Context, pod *api.Pod) (podnet.Network, error) {
	if err := a.ensureNetworkConfig(ctx); err != nil {
		return podnet.Network{}, err
	}
	return a.cfg.PodNetwork.Setup(ctx, podNet(pod))
}

// ensureNetworkConfig writes the default network once per run, from the
// node's spec.podCIDR as the control plane gave it.
func (a *Agent) ensureNetworkConfig(ctx context.Context) error {
	a.netMu.Lock()
	defer a.netMu.Unlock()
	if a.netWritten {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	obj, err := a.cl.Get(rctx, nodesResource, "", a.cfg.NodeName, client.GetOptions{})
	if err != nil {
		if a.cfg.PodNetwork.Configured() {
			// Cut off from the control plane: the network written
			// before (or the site's) serves; it is checked again on
			// the next pod.
			return nil
		}
		return fmt.Errorf("read node %s for its pod CIDR: %w", a.cfg.NodeName, err)
	}
	node, ok := obj.(*api.Node)
	if !ok {
		return fmt.Errorf("read node %s: got %T", a.cfg.NodeName, obj)
	}
	if node.Spec.PodCIDR == "" {
		// Registered while the cluster CIDR was full: a write of the
		// node as it is asks for a range again (the control plane
		// gives one on any spec write while there is a free one).
		if obj, _, err := a.cl.Update(rctx, node); err == nil {
			if n, ok := obj.(*api.Node); ok {
				node = n
			}
		}
	}
	if node.Spec.PodCIDR == "" {
		return fmt.Errorf("node %s has no pod CIDR (spec.podCIDR) yet: the cluster CIDR may be full", a.cfg.NodeName)
	}
	cidr, err := netip.ParsePrefix(node.Spec.PodCIDR)
	if err != nil {
		return fmt.Errorf("node %s: spec.podCIDR: %w", a.cfg.NodeName, err)
	}
	a.learnClusterDNS(node)
	cluster, _ := netip.ParsePrefix(node.Annotations[api.AnnotationClusterCIDR])
	mtu := 0
	if a.cfg.PodRoutes == PodRoutesVXLAN {
		// A pod's packet to another node must fit the VXLAN device
		// once wrapped; a bigger one would rest on ICMP "fragmentation
		// needed" reaching its sender.
		if mtu, err = podnet.VXLANMTU(rctx, routeOf(node).Addr); err != nil {
			return fmt.Errorf("node %s: the pods' MTU: %w", a.cfg.NodeName, err)
		}
	}
	if err := a.cfg.PodNetwork.WriteDefault(cidr, cluster, mtu); err != nil {
		return err
	}
	a.netWritten = true
	return nil
}

// releasePodNetwork tears down pod's network, once its containers are
// gone.
func (a *Agent) releasePodNetwork(ctx context.Context, pod *api.Pod) {
	if !a.ownNetwork(pod) {
		return
	}
	if err := a.cfg.PodNetwork.Teardown(ctx, podNet(pod)); err != nil {
		a.log.Warn("tear down a pod's network", "pod", pod.Namespace+"/"+pod.Name, "err", err)
	}
}

// releaseNetwork tears down the worker's pod's network (its status keeps
// the address it had, as the kubelet's does for a finished pod).
func (w *worker) releaseNetwork(ctx context.Context) {
	if w.net == nil || w.netReleased {
		return
	}
	w.a.releasePodNetwork(ctx, w.pod)
	w.netReleased = true
}

// adoptNetwork finds the network an earlier run of the agent set up for
// the worker's pod, so that its status keeps the pod's address.
func (w *worker) adoptNetwork(ctx context.Context) {
	if !w.a.ownNetwork(w.pod) || w.net != nil || !w.a.cfg.PodNetwork.Has(w.uid) {
		return
	}
	if n, err := w.a.cfg.PodNetwork.Setup(ctx, podNet(w.pod)); err == nil {
		w.net = &n
	} else {
		w.a.log.Warn("adopt a pod's network", "pod", w.key(), "err", err)
	}
}

// podHostname is the pod's host name inside its network: its name, cut
// to a DNS label's 63 bytes, as the kubelet names it.
func podHostname(pod *api.Pod) string {
	h := pod.Name
	if len(h) > 63 {
		h = h[:63]
	}
	return h
}

package agent

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/outpost-edge/outpost/agent/clusterdns"
	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
)

// Where pods' DNS questions go (Config.ClusterDNS; empty is none, so
// that an agent run by a test never takes a port or a link for DNS
// unless asked).
const (
	ClusterDNSAuto = "auto"
	ClusterDNSNone = "none"
)

// dnsRetry is how long the resolver waits before it tries again to
// learn its address or to listen on it.
const dnsRetry = 10 * time.Second

// clusterDNSFile keeps the address the control plane gave the resolver,
// so that an agent restarted while cut off still points pods at it.
const clusterDNSFile = "cluster-dns"

// runsResolver reports whether this agent answers the cluster's names
// itself: pods have networks of their own here and no other resolver
// was named.
func (a *Agent) runsResolver() bool {
	return a.cfg.PodNetwork != nil && a.cfg.ClusterDNS == ClusterDNSAuto
}

// clusterDNS is the address ClusterFirst pods are given; invalid while
// none is known (they then get the node's resolv.conf).
func (a *Agent) clusterDNS() netip.Addr {
	switch a.cfg.ClusterDNS {
	case ClusterDNSNone, "":
		return netip.Addr{}
	case ClusterDNSAuto:
		if p := a.dnsAddr.Load(); p != nil {
			return *p
		}
		if !a.runsResolver() {
			return netip.Addr{}
		}
		addr, _ := a.savedClusterDNS()
		return addr
	}
	addr, _ := netip.ParseAddr(a.cfg.ClusterDNS)
	return addr
}

// savedClusterDNS is the resolver's address and the pods' range kept in
// the cluster DNS file (invalid where it has none).
func (a *Agent) savedClusterDNS() (netip.Addr, netip.Prefix) {
	data, err := os.ReadFile(filepath.Join(a.cfg.DataDir, clusterDNSFile))
	if err != nil {
		return netip.Addr{}, netip.Prefix{}
	}
	f := strings.Fields(string(data))
	var addr netip.Addr
	var pods netip.Prefix
	if len(f) > 0 {
		addr, _ = netip.ParseAddr(f[0])
	}
	if len(f) > 1 {
		pods, _ = netip.ParsePrefix(f[1])
	}
	return addr, pods
}

// learnClusterDNS records the resolver's address as node says it, and
// the cluster's pod range as the resolver's clients.
func (a *Agent) learnClusterDNS(node *api.Node) {
	if !a.runsResolver() {
		return
	}
	addr, err := netip.ParseAddr(node.Annotations[api.AnnotationClusterDNS])
	if err != nil {
		return
	}
	pods, err := netip.ParsePrefix(node.Annotations[api.AnnotationClusterCIDR])
	if err != nil {
		pods, _ = netip.ParsePrefix(node.Spec.PodCIDR)
	}
	a.setDNSClients(pods)
	a.dnsAddr.Store(&addr)
	if savedAddr, savedPods := a.savedClusterDNS(); savedAddr != addr || savedPods != pods {
		line := addr.String()
		if pods.IsValid() {
			line += " " + pods.String()
		}
		if err := writeFileAtomic(filepath.Join(a.cfg.DataDir, clusterDNSFile), []byte(line+"\n"), 0o600); err != nil {
			a.log.Warn("keep the cluster DNS address", "err", err)
		}
	}
}

// setDNSClients has the resolver answer pods (in the cluster's pod
// range) and the node only: no open resolver for the node's LAN.
func (a *Agent) setDNSClients(pods netip.Prefix) {
	if a.dns != nil && pods.IsValid() {
		a.dns.SetClients([]netip.Prefix{pods})
	}
}

// serveDNS answers the cluster's names for this node's pods (SPEC NET-4)
// until ctx ends: it learns the address from the node's object, puts it
// on the node, and listens there, trying again while any of that fails.
func (a *Agent) serveDNS(ctx context.Context) {
	rep := &syncReport{a: a, what: "cluster DNS resolver", reason: "ClusterDNSFailed"}
	// The first tries come fast: at start the node may not be
	// registered yet, and its pods wait for their names.
	wait := time.Second
	for ctx.Err() == nil {
		err := a.serveDNSOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		// A node not yet registered is not a failure to report: the
		// agent registers it at start, and the next try finds it.
		if !api.IsNotFound(err) {
			rep.result(err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		wait = min(2*wait, dnsRetry)
	}
}

func (a *Agent) serveDNSOnce(ctx context.Context) error {
	if p := a.dnsAddr.Load(); p == nil {
		if addr, pods := a.savedClusterDNS(); addr.IsValid() {
			// Answer at once with what the control plane gave before:
			// asking it first would leave pods without names for as
			// long as it takes to answer, or to time out when cut
			// off. The address is fixed when the cluster is made.
			a.setDNSClients(pods)
			a.dnsAddr.Store(&addr)
		}
	}
	if p := a.dnsAddr.Load(); p == nil {
		rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		obj, err := a.cl.Get(rctx, nodesResource, "", a.cfg.NodeName, client.GetOptions{})
		cancel()
		if err != nil {
			return fmt.Errorf("read node %s for the cluster DNS address: %w", a.cfg.NodeName, err)
		}
		if node, ok := obj.(*api.Node); ok {
			a.learnClusterDNS(node)
		}
	}
	p := a.dnsAddr.Load()
	if p == nil {
		return fmt.Errorf("node %s has no %s annotation: a control plane too old to give one", a.cfg.NodeName, api.AnnotationClusterDNS)
	}
	if err := clusterdns.EnsureAddress(ctx, *p); err != nil {
		return err
	}
	a.log.Info("cluster DNS resolver listening", "address", p.String(), "domain", a.cfg.ClusterDomain)
	return a.dns.Serve(ctx, net.JoinHostPort(p.String(), "53"))
}

// dnsUpstreams are the node's resolvers, which the cluster resolver
// forwards other names to (never itself).
func dnsUpstreams(resolvConf string, self netip.Addr) []string {
	rc, _ := clusterdns.ParseResolvConf(resolvConf)
	var out []string
	for _, ns := range rc.Nameservers {
		if ip, err := netip.ParseAddr(ns); err == nil && ip != self {
			out = append(out, ns)
		}
	}
	return out
}

// podFiles writes pod's resolv.conf (by its dnsPolicy) and, when it has
// a network of its own, its hosts file (its name at its address), and is
// their paths.
func (a *Agent) podFiles(pod *api.Pod, ip netip.Addr) (resolvConf, hosts string, err error) {
	dir := a.podDir(string(pod.UID))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", fmt.Errorf("pod files: %w", err)
	}
	host, err := clusterdns.ParseResolvConf(a.cfg.ResolvConf)
	if err != nil {
		return "", "", err
	}
	d := clusterdns.PodDNS{Host: host, ClusterDNS: a.clusterDNS(), Domain: a.cfg.ClusterDomain}
	resolvConf = filepath.Join(dir, "resolv.conf")
	if err := writeFileAtomic(resolvConf, d.For(pod).Bytes(), 0o644); err != nil {
		return "", "", err
	}
	if !ip.IsValid() {
		return resolvConf, "", nil
	}
	hosts = filepath.Join(dir, "hosts")
	var b strings.Builder
	b.WriteString("# Kubernetes-managed hosts file (outpost).\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
	fmt.Fprintf(&b, "%s\t%s\n", ip, podHostname(pod))
	if err := writeFileAtomic(hosts, []byte(b.String()), 0o644); err != nil {
		return "", "", err
	}
	return resolvConf, hosts, nil
}

// podDir holds the files the agent makes for pod uid.
func (a *Agent) podDir(uid string) string {
	return filepath.Join(a.cfg.DataDir, "pods", uid)
}

// removePodFiles removes what podFiles wrote for uid.
func (a *Agent) removePodFiles(uid string) {
	if uid == "" {
		return
	}
	if err := os.RemoveAll(a.podDir(uid)); err != nil {
		a.log.Warn("remove a pod's files", "uid", uid, "err", err)
	}
}

// podFileUIDs are the pods that have files here.
func (a *Agent) podFileUIDs() []string {
	ents, _ := os.ReadDir(filepath.Join(a.cfg.DataDir, "pods"))
	out := make([]string, 0, len(ents))
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

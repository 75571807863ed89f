package main

import (
	"github.com/spf13/pflag"

	"github.com/outpost-edge/outpost/agent"
)

// clusterDNSFlags say where pods' DNS questions go (SPEC NET-4).
type clusterDNSFlags struct {
	clusterDNS, domain, resolvConf string
}

// register adds the flags to f; withAddress false leaves --cluster-dns
// out (outpost dev, where the server's --cluster-dns reserves the
// address its agent then answers on).
func (d *clusterDNSFlags) register(f *pflag.FlagSet, withAddress bool) {
	d.clusterDNS = agent.ClusterDNSAuto
	if withAddress {
		f.StringVar(&d.clusterDNS, "cluster-dns", agent.ClusterDNSAuto, "where pods with dnsPolicy ClusterFirst send their questions: auto (the address the control plane reserves, 10.43.0.10 by default, answered by this agent's own resolver; with --pod-network cni), none (the node's resolv.conf), or the IP of a resolver the site runs (a CoreDNS add-on)")
	}
	f.StringVar(&d.domain, "cluster-domain", "cluster.local", "the cluster's DNS domain: Services are NAME.NAMESPACE.svc.DOMAIN")
	f.StringVar(&d.resolvConf, "resolv-conf", "", "the node's resolv.conf: the resolvers names outside the cluster are forwarded to, and what pods with dnsPolicy Default get (default /etc/resolv.conf, or /run/systemd/resolve/resolv.conf when the first names only systemd-resolved's stub)")
}

func (d *clusterDNSFlags) apply(cfg *agent.Config) {
	cfg.ClusterDNS, cfg.ClusterDomain, cfg.ResolvConf = d.clusterDNS, d.domain, d.resolvConf
}

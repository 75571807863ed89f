package main

import (
	"fmt"
	"log/slog"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/outpost-edge/outpost/agent"
	"github.com/outpost-edge/outpost/agent/podnet"
	"github.com/spf13/pflag"
)

// podNetworkFlags choose how pods are networked (SPEC NET-1).
type podNetworkFlags struct {
	mode, confDir, binDirs, stateDir, bridge, routes, proxy string
}

func (p *podNetworkFlags) register(f *pflag.FlagSet) {
	f.StringVar(&p.mode, "pod-network", "auto", "cni: each pod that is not hostNetwork gets a network namespace of its own, wired by the CNI plugins of --cni-conf-dir, with the service proxy and the cluster's DNS; host: every pod shares the host's network; auto: cni when the CNI plugins (Debian's containernetworking-plugins), iptables and nft are installed, host (said in the log) when not")
	f.StringVar(&p.confDir, "cni-conf-dir", podnet.DefaultConfDir, "the CNI network configuration: the first file by name is the pods' network; without one the agent writes "+podnet.DefaultConfName+", a bridge over the node's pod CIDR")
	f.StringVar(&p.binDirs, "cni-bin-dir", strings.Join(podnet.DefaultBinDirs, ","), "where the CNI plugins are, comma-separated (Debian's containernetworking-plugins install to /usr/lib/cni)")
	f.StringVar(&p.stateDir, "cni-netns-dir", podnet.DefaultStateDir, "where pods' network namespaces are bound (a tmpfs: they end with the boot)")
	f.StringVar(&p.bridge, "cni-bridge", "outpost0", "the bridge device of the default network")
	f.StringVar(&p.proxy, "service-proxy", "", "nftables: keep this node's rules that send Services' cluster IPs and node ports to their endpoints (the default with --pod-network cni); none: do not")
	f.StringVar(&p.routes, "pod-routes", agent.PodRoutesHostGW, "how this host reaches other nodes' pods with --pod-network cni: host-gw (a route to each node's pod CIDR via its InternalIP; the nodes on one link), vxlan (through the kernel's VXLAN device "+podnet.VXLANDevice+", UDP port 8472 between the nodes' InternalIPs; for nodes across routers; pods' MTU 50 below the link's) or none (the site's routers, or its own CNI network, do it)")
}

func (p *podNetworkFlags) apply(cfg *agent.Config, log *slog.Logger) error {
	// The flags stay as given: outpost dev applies them twice (a check
	// before anything starts, then for its agent).
	mode := p.mode
	if mode == "auto" {
		mode = "cni"
		if missing := p.cniMissing(); missing != "" {
			log.Warn("pods share the host's network (--pod-network auto; --pod-network host says it is meant)", "missing", missing)
			mode = "host"
		}
	}
	switch p.proxy {
	case "nftables":
		cfg.ServiceProxy = true
		if _, err := exec.LookPath("nft"); err != nil {
			return fmt.Errorf("--service-proxy nftables: %w (install Debian's nftables)", err)
		}
	case "none":
	case "":
		if mode == "cni" {
			if _, err := exec.LookPath("nft"); err != nil {
				return fmt.Errorf("--pod-network cni runs the service proxy, which needs nft: %w (install Debian's nftables, or give --service-proxy none)", err)
			}
			cfg.ServiceProxy = true
		}
	default:
		return fmt.Errorf("--service-proxy %q: want nftables or none", p.proxy)
	}
	switch mode {
	case "host":
		return nil
	case "cni":
	default:
		return fmt.Errorf("--pod-network %q: want auto, cni or host", p.mode)
	}
	m, err := podnet.New(podnet.Config{
		ConfDir: p.confDir, BinDirs: strings.Split(p.binDirs, ","), StateDir: p.stateDir,
		CacheDir: filepath.Join(cfg.DataDir, "cni"), Bridge: p.bridge, Logger: log.With("component", "podnet"),
	})
	if err != nil {
		return fmt.Errorf("--pod-network cni: %w", err)
	}
	switch p.routes {
	case agent.PodRoutesVXLAN:
		// Forwarding entries are set with iproute2's bridge, which a
		// minimal install may lack while it has ip.
		if _, err := exec.LookPath("bridge"); err != nil {
			return fmt.Errorf("--pod-routes vxlan: %w (install Debian's iproute2)", err)
		}
	case agent.PodRoutesHostGW, agent.PodRoutesNone:
	default:
		return fmt.Errorf("--pod-routes %q: want host-gw, vxlan or none", p.routes)
	}
	cfg.PodNetwork, cfg.PodRoutes = m, p.routes
	return nil
}

// cniMissing says what a node lacks for pods' own networks (the bridge
// and host-local plugins, iptables, nft), or "" when it has it all.
func (p *podNetworkFlags) cniMissing() string {
	return strings.Join(podnet.HostMissing(strings.Split(p.binDirs, ",")), "; ")
}

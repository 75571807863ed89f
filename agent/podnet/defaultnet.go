package podnet

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// DefaultConfName is the file the agent writes its default network to.
// A site's own configuration is any other file of the directory; CNI
// takes the first by name, so one named below this replaces it.
const DefaultConfName = "10-outpost.conflist"

// DefaultNetwork is the network the agent writes when the site has none:
// a Linux bridge on the node with the node's pod CIDR, host-local
// addresses and hostPort through portmap. What the bridge's ipMasq and
// the firewall plugin would do for each pod (a masquerade rule, FORWARD
// accepts, some 20 ms of iptables a pod each) HostRules does once for
// the node's whole pod CIDR.
type DefaultNetwork struct {
	// Bridge is the host's bridge device (outpost0).
	Bridge string
	// PodCIDR is the node's spec.podCIDR.
	PodCIDR netip.Prefix
	// IPAMDir keeps host-local's leases (under the cache directory,
	// so that addresses outlive an agent restart).
	IPAMDir string
	// MTU, when not 0, is the bridge's and pods' links' MTU: an
	// overlay's, smaller than the host's link by what it wraps packets
	// in (VXLANMTU).
	MTU int
}

// Render is the conflist of n.
func (n DefaultNetwork) Render() ([]byte, error) {
	if !n.PodCIDR.IsValid() {
		return nil, fmt.Errorf("podnet: the node has no pod CIDR yet")
	}
	bridge := n.Bridge
	if bridge == "" {
		bridge = "outpost0"
	}
	if len(bridge) > 15 {
		return nil, fmt.Errorf("podnet: bridge name %q is longer than a Linux device name may be (15)", bridge)
	}
	def := "0.0.0.0/0"
	if n.PodCIDR.Addr().Is6() {
		def = "::/0"
	}
	bridgePlugin := map[string]any{
		"type": "bridge", "bridge": bridge, "isGateway": true, "hairpinMode": true,
		"ipam": map[string]any{
			"type":    "host-local",
			"ranges":  [][]map[string]string{{{"subnet": n.PodCIDR.Masked().String()}}},
			"routes":  []map[string]string{{"dst": def}},
			"dataDir": n.IPAMDir,
		},
	}
	if n.MTU > 0 {
		bridgePlugin["mtu"] = n.MTU
	}
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "outpost",
		// outpostGenerated tells the agent the file is its own to
		// rewrite; plugins ignore keys they do not know.
		"outpostGenerated": true,
		"plugins": []any{
			bridgePlugin,
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	b, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// WriteDefault writes n to DefaultConfName in dir unless a file of the
// site's is there. A file of the agent's own with other content (the
// node was given another pod CIDR after it was deleted and joined again)
// is replaced. It reports whether it wrote.
func WriteDefault(dir string, n DefaultNetwork) (bool, error) {
	want, err := n.Render()
	if err != nil {
		return false, err
	}
	path := filepath.Join(dir, DefaultConfName)
	have, err := os.ReadFile(path)
	switch {
	case err == nil && bytes.Equal(have, want):
		return false, nil
	case err == nil:
		var mark struct {
			Generated bool `json:"outpostGenerated"`
		}
		if json.Unmarshal(have, &mark) != nil || !mark.Generated {
			return false, nil // the site's, under our name
		}
	case !os.IsNotExist(err):
		return false, fmt.Errorf("podnet: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, fmt.Errorf("podnet: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, want, 0o644); err != nil {
		return false, fmt.Errorf("podnet: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return false, fmt.Errorf("podnet: %w", err)
	}
	return true, nil
}

// hostRules are the node's rules for its pods on the default network:
// their traffic forwarded whatever the FORWARD chain's policy, and
// masqueraded when it leaves the cluster's pod range (the node's own pod
// CIDR when that is not known): pods on other nodes see a pod's own
// address.
func hostRules(podCIDR, clusterCIDR netip.Prefix) [][]string {
	p := podCIDR.Masked().String()
	inside := p
	if clusterCIDR.IsValid() && clusterCIDR.Addr().Is4() == podCIDR.Addr().Is4() {
		inside = clusterCIDR.Masked().String()
	}
	comment := []string{"-m", "comment", "--comment", "outpost pods " + p}
	return [][]string{
		append([]string{"filter", "FORWARD", "-s", p}, append(comment, "-j", "ACCEPT")...),
		append([]string{"filter", "FORWARD", "-d", p}, append(comment, "-j", "ACCEPT")...),
		append([]string{"nat", "POSTROUTING", "-s", p, "!", "-d", inside}, append(comment, "-j", "MASQUERADE")...),
	}
}

// ensureHostRules adds what of hostRules the host lacks (FORWARD's at
// its head, ahead of a site's drops).
func ensureHostRules(ctx context.Context, podCIDR, clusterCIDR netip.Prefix) error {
	bin := "iptables"
	if podCIDR.Addr().Is6() {
		bin = "ip6tables"
	}
	for _, r := range hostRules(podCIDR, clusterCIDR) {
		table, chain, rule := r[0], r[1], r[2:]
		if exec.CommandContext(ctx, bin, append([]string{"-w", "-t", table, "-C", chain}, rule...)...).Run() == nil {
			continue
		}
		op := "-A"
		if chain == "FORWARD" {
			op = "-I"
		}
		if out, err := exec.CommandContext(ctx, bin, append([]string{"-w", "-t", table, op, chain}, rule...)...).CombinedOutput(); err != nil {
			return fmt.Errorf("podnet: %s %s %s: %w: %s", bin, table, chain, err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

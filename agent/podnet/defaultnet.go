package podnet

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
)

// DefaultConfName is the file the agent writes its default network to.
// A site's own configuration is any other file of the directory; CNI
// takes the first by name, so one named below this replaces it.
const DefaultConfName = "10-outpost.conflist"

// DefaultNetwork is the network the agent writes when the site has none:
// a Linux bridge on the node with the node's pod CIDR, host-local
// addresses, hostPort through portmap, and the firewall plugin letting
// the pods' traffic through a host whose FORWARD policy drops.
type DefaultNetwork struct {
	// Bridge is the host's bridge device (outpost0).
	Bridge string
	// PodCIDR is the node's spec.podCIDR.
	PodCIDR netip.Prefix
	// IPAMDir keeps host-local's leases (under the cache directory,
	// so that addresses outlive an agent restart).
	IPAMDir string
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
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "outpost",
		// outpostGenerated tells the agent the file is its own to
		// rewrite; plugins ignore keys they do not know.
		"outpostGenerated": true,
		"plugins": []any{
			map[string]any{
				"type": "bridge", "bridge": bridge, "isGateway": true, "ipMasq": true, "hairpinMode": true,
				"ipam": map[string]any{
					"type":    "host-local",
					"ranges":  [][]map[string]string{{{"subnet": n.PodCIDR.Masked().String()}}},
					"routes":  []map[string]string{{"dst": def}},
					"dataDir": n.IPAMDir,
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
			map[string]any{"type": "firewall"},
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

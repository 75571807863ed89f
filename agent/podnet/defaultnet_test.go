package podnet

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The default network is written when the site has none, rewritten when
// the node's pod CIDR is another, and a site's own file under its name is
// left alone.
func TestWriteDefault(t *testing.T) {
	dir := t.TempDir()
	n := DefaultNetwork{PodCIDR: netip.MustParsePrefix("10.42.3.0/24"), IPAMDir: "/var/lib/outpost/cni/ipam"}
	wrote, err := WriteDefault(dir, n)
	if err != nil || !wrote {
		t.Fatalf("first write: %v %v", wrote, err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, DefaultConfName))
	for _, want := range []string{`"bridge": "outpost0"`, `"subnet": "10.42.3.0/24"`, `"type": "portmap"`, `"portMappings": true`, `"type": "firewall"`, `"dst": "0.0.0.0/0"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("conflist lacks %s:\n%s", want, b)
		}
	}
	if wrote, err := WriteDefault(dir, n); err != nil || wrote {
		t.Errorf("the same again: %v %v, want nothing written", wrote, err)
	}
	n.PodCIDR = netip.MustParsePrefix("10.42.9.0/24")
	if wrote, err := WriteDefault(dir, n); err != nil || !wrote {
		t.Errorf("another pod CIDR: %v %v, want rewritten", wrote, err)
	}
	site := `{"cniVersion":"1.0.0","name":"site","plugins":[{"type":"macvlan"}]}`
	if err := os.WriteFile(filepath.Join(dir, DefaultConfName), []byte(site), 0o644); err != nil {
		t.Fatal(err)
	}
	if wrote, err := WriteDefault(dir, n); err != nil || wrote {
		t.Errorf("over a site's file: %v %v, want left alone", wrote, err)
	}
	if _, err := WriteDefault(dir, DefaultNetwork{}); err == nil || !strings.Contains(err.Error(), "no pod CIDR") {
		t.Errorf("without a pod CIDR: %v", err)
	}
	if _, err := (DefaultNetwork{Bridge: "a-very-long-bridge-name", PodCIDR: n.PodCIDR}).Render(); err == nil {
		t.Error("a bridge name over 15 bytes was accepted")
	}
}

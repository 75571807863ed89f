package podnet

import (
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/outpost-edge/outpost/internal/linuxns"
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
	for _, want := range []string{`"bridge": "outpost0"`, `"subnet": "10.42.3.0/24"`, `"type": "portmap"`, `"portMappings": true`, `"dst": "0.0.0.0/0"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("conflist lacks %s:\n%s", want, b)
		}
	}
	// What ipMasq and the firewall plugin would do per pod, the node's
	// rules do once (TestHostRules).
	for _, not := range []string{"ipMasq", "firewall"} {
		if strings.Contains(string(b), not) {
			t.Errorf("conflist has %s:\n%s", not, b)
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
	// Pods behind an overlay (vxlan) get its MTU; others the plugin's
	// default, their link's.
	if strings.Contains(string(b), `"mtu"`) {
		t.Errorf("conflist without an MTU has one:\n%s", b)
	}
	if b, err := (DefaultNetwork{PodCIDR: n.PodCIDR, MTU: 1450}).Render(); err != nil || !strings.Contains(string(b), `"mtu": 1450`) {
		t.Errorf("conflist with MTU 1450: %v\n%s", err, b)
	}
	if _, err := (DefaultNetwork{Bridge: "a-very-long-bridge-name", PodCIDR: n.PodCIDR}).Render(); err == nil {
		t.Error("a bridge name over 15 bytes was accepted")
	}
}

// The node's rules for its pods (forwarded whatever FORWARD's policy,
// masqueraded leaving the pod CIDR) are added once, in a namespace of the
// test's own, and not again.
func TestHostRules(t *testing.T) {
	requireReal(t)
	ns := filepath.Join(t.TempDir(), "ns")
	if err := linuxns.New(ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = linuxns.Remove(ns) })
	cidr := netip.MustParsePrefix("10.42.7.0/24")
	for range 2 {
		if err := linuxns.Run(ns, func() error { return ensureHostRules(t.Context(), cidr, netip.MustParsePrefix("10.42.0.0/16")) }); err != nil {
			t.Fatal(err)
		}
	}
	var rules string
	if err := linuxns.Run(ns, func() error {
		f, err := exec.Command("iptables", "-w", "-S", "FORWARD").Output()
		if err != nil {
			return err
		}
		n, err := exec.Command("iptables", "-w", "-t", "nat", "-S", "POSTROUTING").Output()
		rules = string(f) + string(n)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"-A FORWARD -s 10.42.7.0/24", "-A FORWARD -d 10.42.7.0/24", "-A POSTROUTING -s 10.42.7.0/24 ! -d 10.42.0.0/16"} {
		if n := strings.Count(rules, want); n != 1 {
			t.Errorf("rule %q %d times in:\n%s", want, n, rules)
		}
	}
}

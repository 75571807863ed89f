package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/testing/nspawn"
)

// TestServerRoleUnderSystemd (SPEC CPL-2, MCH-1; issue 11's server role
// on a real host): three servers on network-namespace hosts in zones a,
// b and c, and a fourth host booting systemd under nspawn in zone a whose
// agent runs as the packaged unit with --control-plane-eligible. `delete
// machine h1` makes the control plane machine set ask that host to serve:
// its agent writes outpost-server.service and enables it through the
// host's real systemd, the server joins as a non-voter, is promoted, and
// h1 leaves raft. The unit is enabled and active inside the host.
func TestServerRoleUnderSystemd(t *testing.T) {
	nspawn.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	root := t.TempDir()
	_ = nspawn.MustRootfs(t)
	hosts := []*cpHost{{name: "h1", zone: "a"}, {name: "h2", zone: "b"}, {name: "h3", zone: "c"}}
	c := startControlPlane(t, ctx, root, hosts, 3, nil)
	c.admin = filepath.Join(root, "h2-server", "admin.conf") // h2 stays
	join := c.joinString(ctx)
	secret, err := os.ReadFile(filepath.Join(root, "cluster-secret"))
	if err != nil {
		t.Fatal(err)
	}

	host := bootAgentHost(t, "n4", 64, "https://"+hosts[1].h.Addr+":6443", join, sharedContainerd(t, ctx),
		[]string{"--os-updates", "off", "--labels", "topology.kubernetes.io/zone=a", "--control-plane-eligible", "--cluster-secret-file", "/etc/outpost/cluster-secret"},
		map[string]nspawn.File{"/etc/outpost/cluster-secret": {Content: string(secret), Mode: 0o600}})
	h := host.h
	c.waitReady("n4", "True", 2*time.Minute)

	r := replaced(t, ctx, c, "n4", "h1", func() { c.mustCLI(ctx, "delete", "machine", "h1", "--wait=false") })
	t.Logf("MEASURED h1 deleted → n4's server (a systemd unit) a voter %v, h1 out of raft %v", r.promoted.Round(100*time.Millisecond), r.removed.Round(100*time.Millisecond))
	for _, args := range [][]string{{"systemctl", "is-enabled", "outpost-server.service"}, {"systemctl", "is-active", "outpost-server.service"}} {
		out, err := h.Run(ctx, args...)
		if got := strings.TrimSpace(string(out)); err != nil || (got != "enabled" && got != "active") {
			t.Errorf("inside n4, %s: %q %v", strings.Join(args, " "), got, err)
		}
	}
	ps := mustPeers(t, ctx, c.cl)
	if !strings.Contains(describePeers(ps), "n4(Voter reachable=true") {
		t.Errorf("raft peers %s: want n4 a reachable voter", describePeers(ps))
	}
}

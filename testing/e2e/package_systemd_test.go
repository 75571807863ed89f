package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
	"github.com/outpost-edge/outpost/testing/netns"
	"github.com/outpost-edge/outpost/testing/nspawn"
)

// TestPackageInstallUnderSystemd (issue 15 items 1 and 2): the .deb that
// `make package` builds (packaging/package.sh, with this test's binary)
// is installed with dpkg -i on a Debian host booted under systemd-nspawn
// and starts nothing; `outpost install server` there starts the
// packaged unit and waits for the API, a second run changes nothing;
// `outpost install agent` with a join string in a file (never on a
// command line) registers the host's node Ready and a pod runs on it;
// `outpost uninstall` leaves no unit enabled, running or written, and
// once the package is removed, none at all.
//
// The agent's containers run in a containerd of this machine bound into
// the host (as the other nspawn tests do: runc inside nspawn needs more
// than a stock host). It and the agent's data dir have the same paths on
// both sides: the containerd shims write the pods' logs in the data dir,
// and the agent mounts containerd's snapshots to read an image's users.
func TestPackageInstallUnderSystemd(t *testing.T) {
	nspawn.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	root := t.TempDir()
	_ = nspawn.MustRootfs(t)
	pkgDir := filepath.Join(root, "pkg")
	t0 := time.Now()
	// As make package: make build's binary, which embeds the small log
	// writer the containerd shims run (outside this host: see above).
	bin := filepath.Join(root, "outpost")
	for _, cmd := range []*exec.Cmd{
		exec.CommandContext(ctx, "make", "-C", repoRoot(t), "build", "BIN="+bin, "VERSION=0.0.1-e2e"),
		exec.CommandContext(ctx, filepath.Join(repoRoot(t), "packaging", "package.sh"), bin, pkgDir, "0.0.1-e2e"),
	} {
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
		}
	}
	debs, _ := filepath.Glob(filepath.Join(pkgDir, "*.deb"))
	rpms, _ := filepath.Glob(filepath.Join(pkgDir, "*.rpm"))
	if len(debs) != 1 || len(rpms) != 1 {
		t.Fatalf("package.sh made %v and %v, want one .deb and one .rpm", debs, rpms)
	}
	t.Logf("MEASURED make build and packages built in %v", time.Since(t0).Round(100*time.Millisecond))
	ctd := sharedContainerd(t, ctx)
	agentDir, err := os.MkdirTemp("/var/tmp", "outpost-pkg-agent-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killUnder(t, agentDir); _ = os.RemoveAll(agentDir) })
	n := netns.New(t, 97)
	h := nspawn.Boot(t, nspawn.Options{
		NetNS: n.Name, Hostname: "pk1",
		Binds: []nspawn.Bind{{Source: pkgDir, Target: "/srv/pkg", ReadOnly: true}, {Source: ctd, Target: ctd}, {Source: agentDir, Target: agentDir}},
	})
	if err := h.WaitRunning(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := h.Run(context.Background(), "journalctl", "-u", "outpost-server", "-u", "outpost-agent", "--no-pager", "-n", "80")
			t.Logf("journal:\n%s", out)
		}
	})
	run := func(args ...string) string {
		t.Helper()
		out, err := h.Run(ctx, args...)
		if err != nil {
			t.Fatalf("inside pk1, %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	unitStates := func() string {
		out, _ := h.Run(ctx, "systemctl", "is-active", "outpost-server", "outpost-agent")
		en, _ := h.Run(ctx, "systemctl", "is-enabled", "outpost-server", "outpost-agent")
		return strings.Join(strings.Fields(string(out)+" "+string(en)), " ")
	}

	run("dpkg", "-i", "/srv/pkg/"+filepath.Base(debs[0]))
	if got := unitStates(); got != "inactive inactive disabled disabled" {
		t.Errorf("after dpkg -i the units are %q, want inactive and disabled: the package starts nothing", got)
	}

	t1 := time.Now()
	out := run("outpost", "install", "server", "--timeout", "2m")
	t.Logf("MEASURED outpost install server to a ready API: %v\n%s", time.Since(t1).Round(100*time.Millisecond), out)
	if strings.Contains(out, "wrote /etc/systemd/system/") {
		t.Errorf("install wrote its own unit although the package's is the same:\n%s", out)
	}
	if out := run("outpost", "install", "server"); !strings.Contains(out, "nothing changed") || strings.Contains(out, "wrote") {
		t.Errorf("a second install server:\n%s\nwant nothing written and it said so", out)
	}
	c := &testCluster{t: t, dir: root, admin: h.Path("/var/lib/outpost/server/admin.conf")}
	cfg, err := client.LoadConfig(c.admin)
	if err == nil {
		c.cl, err = client.New(cfg)
	}
	if err != nil {
		t.Fatal(err)
	}
	join := c.joinString(ctx)
	if err := os.WriteFile(h.Path("/root/join"), []byte(join+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t2 := time.Now()
	out = run("outpost", "install", "agent", "--server", "https://"+n.Addr+":6443", "--token-file", "/root/join",
		"--containerd-socket", filepath.Join(ctd, "containerd.sock"), "--data-dir", agentDir, "--timeout", "2m")
	t.Logf("MEASURED outpost install agent to node Ready: %v\n%s", time.Since(t2).Round(100*time.Millisecond), out)
	secret := join[strings.LastIndex(join, ".")+1:]
	if ps := run("ps", "-eo", "args"); strings.Contains(ps, secret) {
		t.Errorf("the join string's secret is on a command line:\n%s", ps)
	}
	if got := unitStates(); got != "active active enabled enabled" {
		t.Errorf("after install the units are %q, want both active and enabled", got)
	}

	_, archive := buildDemo(t)
	c.importImage(ctx, archive, "pk1")
	c.apply(ctx, "hello", `apiVersion: v1
kind: Pod
metadata: {name: hello}
spec:
  containers:
    - {name: c, image: `+demoImage+`, imagePullPolicy: IfNotPresent, args: ["tick", "-every", "1s"]}
`)
	waitFor(t, time.Minute, "pod hello Running on pk1", func() (bool, string) {
		p, err := c.pod(ctx, "hello")
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == api.PodRunning && p.Spec.NodeName == "pk1", describePod(p)
	})

	out = run("outpost", "uninstall")
	t.Logf("outpost uninstall:\n%s", out)
	if got := unitStates(); got != "inactive inactive disabled disabled" {
		t.Errorf("after uninstall the units are %q, want inactive and disabled", got)
	}
	for _, p := range []string{"/etc/systemd/system/outpost-server.service", "/etc/systemd/system/outpost-agent.service", "/etc/outpost"} {
		if _, err := os.Stat(h.Path(p)); err == nil {
			t.Errorf("%s is left after uninstall", p)
		}
	}
	run("dpkg", "-r", "outpost")
	// (outpost-test-* units are the harness's; systemctl exits 1 when
	// none matches.)
	if out, _ := h.Run(ctx, "systemctl", "list-unit-files", "--no-legend", "outpost-server*", "outpost-agent*"); strings.TrimSpace(string(out)) != "" {
		t.Errorf("units left after uninstall and dpkg -r:\n%s", out)
	}
}

package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
	"github.com/outpost-edge/outpost/runtime/containerd"
	"github.com/outpost-edge/outpost/testing/netns"
	"github.com/outpost-edge/outpost/testing/nspawn"
)

// systemdHost is a test host that boots a real systemd (nspawn) and runs
// `outpost agent` as the packaged unit.
type systemdHost struct {
	name string
	n    *netns.Host
	h    *nspawn.Host
}

// TestConfigUpdateRealSystemd (SPEC UPD-8, UPD-9; issue 12's real-systemd
// check): three hosts boot systemd under systemd-nspawn, each in its own
// network namespace, each running the agent as outpost-agent.service
// (packaging/systemd, with a drop-in for the test's flags), joined to a
// server on a fourth. A pool of the three, maxUnavailable 2, takes a
// config that adds a file, a unit and an OS version (the A/B directory
// backend): never more than two nodes cordoned at once, each host reboots
// once for real (systemctl reboot through D-Bus ends its nspawn, the
// harness boots it again), the file is there and the unit active after
// the boot, the pool ends Updated. Then a config whose health check fails
// after the boot: the two hosts that take it roll back (another reboot
// each) and report Degraded with the reason; the third is never touched.
func TestConfigUpdateRealSystemd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	c, hosts := startSystemdHosts(t, ctx, 3, nil)

	// Watch the nodes throughout: never more than maxUnavailable cordoned.
	var mu sync.Mutex
	maxCordoned := 0
	wctx, stopWatch := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for wctx.Err() == nil {
			objs, _, err := c.cl.List(wctx, api.ResourceForKind("Node"), "", client.ListOptions{})
			if err == nil {
				n := 0
				for _, o := range objs {
					if o.(*api.Node).Spec.Unschedulable {
						n++
					}
				}
				mu.Lock()
				maxCordoned = max(maxCordoned, n)
				mu.Unlock()
			}
			select {
			case <-wctx.Done():
			case <-tick.C:
			}
		}
	})
	defer func() {
		stopWatch()
		wg.Wait()
	}()

	c.apply(ctx, "pool", updatePoolManifest(t))
	t0 := time.Now()
	pool := func() *api.MachineConfigPool {
		obj, err := c.cl.Get(ctx, api.ResourceForKind("MachineConfigPool"), "", "worker", client.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return obj.(*api.MachineConfigPool)
	}
	waitFor(t, 5*time.Minute, "the pool Updated", func() (bool, string) {
		p := pool()
		st := p.Status
		return st.UpdatedMachineCount == 3 && st.ReadyMachineCount == 3 && poolStatus(p, api.PoolUpdated) == api.ConditionTrue,
			fmt.Sprintf("updated %d ready %d unavailable %d degraded %d; %s", st.UpdatedMachineCount, st.ReadyMachineCount, st.UnavailableMachineCount, st.DegradedMachineCount, describeStates(ctx, c))
	})
	t.Logf("MEASURED the pool of 3 (maxUnavailable 2) updated in %v, with a real reboot of each host; steps (mean of the hosts): %s",
		time.Since(t0).Round(100*time.Millisecond), stepSummary(updateSteps(t, ctx, hosts)))
	mu.Lock()
	if maxCordoned > 2 {
		t.Errorf("%d nodes cordoned at once, maxUnavailable 2", maxCordoned)
	}
	if maxCordoned == 0 {
		t.Error("no node was ever seen cordoned: the update did not cordon")
	}
	mu.Unlock()
	for _, h := range hosts {
		if b := h.h.Boots(); b != 2 {
			t.Errorf("%s booted %d times, want 2 (one reboot)", h.name, b)
		}
		if b, err := os.ReadFile(h.h.Path("/etc/outpost-e2e.conf")); err != nil || string(b) != "updated\n" {
			t.Errorf("%s: /etc/outpost-e2e.conf %q %v", h.name, b, err)
		}
		if out, err := h.h.Run(ctx, "systemctl", "is-active", "e2e-hello.service"); err != nil || strings.TrimSpace(string(out)) != "active" {
			t.Errorf("%s: e2e-hello.service is %q (%v), want active after the boot", h.name, out, err)
		}
	}

	// The cluster's node disruption policy restarts e2e-hello.service
	// for /etc/outpost-e2e-live.conf: a config changing only that file
	// is taken up by every host without a reboot, a drain or a cordon,
	// and the restarted unit reads it.
	mu.Lock()
	maxCordoned = 0
	mu.Unlock()
	first := pool().Status.Configuration.Name
	c.apply(ctx, "policy", `apiVersion: operator.openshift.io/v1
kind: MachineConfiguration
metadata:
  name: cluster
  namespace: openshift-machine-config-operator
spec:
  nodeDisruptionPolicy:
    files:
    - path: /etc/outpost-e2e-live.conf
      actions:
      - type: Restart
        restart:
          serviceName: e2e-hello.service
`)
	c.apply(ctx, "live", `apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: 55-live
  labels:
    machineconfiguration.openshift.io/role: worker
spec:
  config:
    ignition:
      version: 3.2.0
    storage:
      files:
      - path: /etc/outpost-e2e-live.conf
        contents:
          source: data:,live%0A
`)
	t1 := time.Now()
	waitFor(t, 2*time.Minute, "the pool Updated on the live config", func() (bool, string) {
		p := pool()
		st := p.Status
		return st.Configuration.Name != first && st.UpdatedMachineCount == 3 && poolStatus(p, api.PoolUpdated) == api.ConditionTrue,
			fmt.Sprintf("%s updated %d; %s", st.Configuration.Name, st.UpdatedMachineCount, describeStates(ctx, c))
	})
	t.Logf("MEASURED the pool of 3 (maxUnavailable 2) took a config without a reboot in %v", time.Since(t1).Round(100*time.Millisecond))
	mu.Lock()
	if maxCordoned != 0 {
		t.Errorf("%d nodes cordoned for a change the policy takes up without a drain", maxCordoned)
	}
	mu.Unlock()
	for _, h := range hosts {
		if b := h.h.Boots(); b != 2 {
			t.Errorf("%s booted %d times after the live config, want still 2", h.name, b)
		}
		if out, err := h.h.Run(ctx, "cat", "/run/e2e-hello"); err != nil || string(out) != "live\n" {
			t.Errorf("%s: /run/e2e-hello %q (%v), want e2e-hello.service restarted onto the new file", h.name, out, err)
		}
	}

	// A config whose check fails after the boot (its file has no policy:
	// it reboots).
	c.apply(ctx, "bad", `apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: 60-bad
  labels:
    machineconfiguration.openshift.io/role: worker
spec:
  healthCheck:
    command: ["/bin/sh", "-c", "echo site check failed >&2; exit 3"]
  config:
    ignition:
      version: 3.2.0
    storage:
      files:
      - path: /etc/outpost-e2e.conf
        contents:
          source: data:,bad%0A
`)
	var bad string
	waitFor(t, 5*time.Minute, "two nodes rolled back and Degraded", func() (bool, string) {
		p := pool()
		bad = p.Spec.Configuration.Name
		degraded := 0
		for _, h := range hosts[:2] {
			n, err := c.node(ctx, h.name)
			if err == nil && n.Annotations[api.AnnotationMCState] == api.MCStateDegraded && !n.Spec.Unschedulable {
				degraded++
			}
		}
		return degraded == 2 && poolStatus(p, api.PoolDegraded) == api.ConditionTrue, describeStates(ctx, c)
	})
	for _, h := range hosts[:2] {
		n, _ := c.node(ctx, h.name)
		if r := n.Annotations[api.AnnotationMCReason]; !strings.Contains(r, "site check failed") || !strings.Contains(r, "rolled back") {
			t.Errorf("%s reason %q, want the check's output and the rollback", h.name, r)
		}
		if b, _ := os.ReadFile(h.h.Path("/etc/outpost-e2e.conf")); string(b) != "updated\n" {
			t.Errorf("%s: /etc/outpost-e2e.conf %q after the rollback, want the previous config's", h.name, b)
		}
		if b := h.h.Boots(); b != 4 {
			t.Errorf("%s booted %d times, want 4 (update, rollback)", h.name, b)
		}
	}
	third, _ := c.node(ctx, hosts[2].name)
	if third.Annotations[api.AnnotationDesiredConfig] == bad || hosts[2].h.Boots() != 2 {
		t.Errorf("the third host was touched: desired %s, %d boots", third.Annotations[api.AnnotationDesiredConfig], hosts[2].h.Boots())
	}
	out, _, _ := c.cli(ctx, "get", "mcp")
	t.Logf("get mcp:\n%s", out)
	if !strings.Contains(out, "MACHINECOUNT") || !slices.ContainsFunc(strings.Split(out, "\n"), func(l string) bool { return strings.HasPrefix(l, "worker ") && strings.Contains(l, "True") }) {
		t.Errorf("get mcp printed:\n%s", out)
	}
}

// startSystemdHosts makes the server's host and count hosts (n1, n2,
// ...) that boot systemd under nspawn, each running the agent as the
// packaged unit (with files added to each host), and waits until their
// nodes are Ready.
func startSystemdHosts(tb testing.TB, ctx context.Context, count int, files map[string]nspawn.File) (*testCluster, []*systemdHost) {
	tb.Helper()
	requireReal(tb)
	nspawn.Require(tb)
	enableForwarding(tb)
	root := tb.TempDir()
	_ = nspawn.MustRootfs(tb) // built once, before the clock of the steps below

	// The server, on its own host.
	secret := make([]byte, 24)
	_, _ = rand.Read(secret)
	secretFile := filepath.Join(root, "cluster-secret")
	if err := os.WriteFile(secretFile, []byte(hex.EncodeToString(secret)), 0o600); err != nil {
		tb.Fatal(err)
	}
	sh := netns.New(tb, 71)
	serverProcess(tb, sh, "s1", root, secretFile, []string{sh.Addr + ":6444"})
	c := &testCluster{t: tb, dir: root, admin: filepath.Join(root, "s1-server", "admin.conf")}
	waitFor(tb, 60*time.Second, "the server serving", func() (bool, string) {
		cfg, err := client.LoadConfig(c.admin)
		if err != nil {
			return false, err.Error()
		}
		cl, err := client.New(cfg)
		if err != nil {
			return false, err.Error()
		}
		_, _, err = cl.List(ctx, api.ResourceForKind("Namespace"), "", client.ListOptions{})
		c.cl = cl
		return err == nil, fmt.Sprint(err)
	})
	join := c.joinString(ctx)

	ctdDir := sharedContainerd(tb, ctx)
	var hosts []*systemdHost
	for i := range count {
		name := fmt.Sprintf("n%d", i+1)
		hosts = append(hosts, bootAgentHost(tb, name, 72+i, "https://"+sh.Addr+":6443", join, ctdDir,
			[]string{"--os-updates", "on", "--os-backend", "directory", "--labels", "node-role.kubernetes.io/worker="}, files))
	}
	for _, h := range hosts {
		c.waitReady(h.name, "True", 2*time.Minute)
	}

	return c, hosts
}

// sharedContainerd starts one containerd on this machine for the agents
// of nspawn hosts (bound in at /var/lib/outpost-test): containerd inside
// nspawn needs more than the harness gives (see testing/nspawn), and
// these tests run no pod.
func sharedContainerd(tb testing.TB, ctx context.Context) string {
	tb.Helper()
	dir, err := os.MkdirTemp("", "octd")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	sup, err := containerd.StartSupervised(ctx, containerd.SupervisorConfig{Root: dir})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = sup.Stop()
		// A stopped containerd leaves its shims running, each naming the
		// socket under dir: one idle shim per test run piled up on the
		// machine until it was rebooted.
		killUnder(tb, dir)
	})
	return dir
}

// bootAgentHost boots host name in network namespace netnsN under
// nspawn, running the agent as packaging/systemd's unit with a drop-in
// for the test's flags (flags after the common ones) and files beside
// the unit's; it joins server with join.
func bootAgentHost(tb testing.TB, name string, netnsN int, server, join, ctdDir string, flags []string, files map[string]nspawn.File) *systemdHost {
	tb.Helper()
	return bootAgentHostRunning(tb, outpostBin, "/usr/local/bin/outpost", name, netnsN, server, join, ctdDir, flags, files)
}

// bootAgentHostRunning is bootAgentHost with bin as the host's
// /usr/local/bin/outpost and the unit's ExecStart running exe (the
// packaged unit's self-update path, say).
func bootAgentHostRunning(tb testing.TB, bin, exe, name string, netnsN int, server, join, ctdDir string, flags []string, files map[string]nspawn.File) *systemdHost {
	tb.Helper()
	unit, err := os.ReadFile(filepath.Join(repoRoot(tb), "packaging", "systemd", "outpost-agent.service"))
	if err != nil {
		tb.Fatal(err)
	}
	n := netns.New(tb, netnsN)
	dropin := fmt.Sprintf(`[Service]
ExecStart=
ExecStart=%[4]s agent --server ${OUTPOST_SERVER} --data-dir /var/lib/outpost/agent --node-name %[1]s --address %[2]s --listen %[2]s:10250 --containerd-socket /var/lib/outpost-test/containerd.sock --heartbeat 1s %[3]s
`, name, n.Addr, strings.Join(flags, " "), exe)
	all := map[string]nspawn.File{
		"/etc/systemd/system/outpost-agent.service":                {Content: string(unit)},
		"/etc/systemd/system/outpost-agent.service.d/10-test.conf": {Content: dropin},
		"/etc/outpost/agent.env":                                   {Content: "OUTPOST_SERVER=" + server + "\nOUTPOST_JOIN=" + join + "\n", Mode: 0o600},
	}
	for p, f := range files {
		all[p] = f
	}
	h := nspawn.Boot(tb, nspawn.Options{
		NetNS: n.Name, Hostname: name,
		Binds: []nspawn.Bind{{Source: bin, Target: "/usr/local/bin/outpost", ReadOnly: true}, {Source: ctdDir, Target: "/var/lib/outpost-test"}},
		Files: all, Enable: []string{"outpost-agent.service"},
	})
	return &systemdHost{name: name, n: n, h: h}
}

// stepNames are the agent's update steps as it logs them ("update step"
// step=X next=Y took=D), each with what it stands for.
var stepNames = []struct{ step, what string }{
	{"Started", "mark Working, cordon"},
	{"Cordoned", "drain"},
	{"Drained", "write files and units, stage the OS"},
	{"Written", "ask the reboot"},
	{"Rebooting", "reboot, boot, agent up"},
	{"Booted", "verify, health gate, uncordon"},
}

var stepLine = regexp.MustCompile(`msg="update step".* step=(\S+) next=(\S+) took=(\S+)`)

// updateSteps reads each host's agent journal for the time of each
// update step (the first update's).
func updateSteps(tb testing.TB, ctx context.Context, hosts []*systemdHost) map[string][]time.Duration {
	tb.Helper()
	out := map[string][]time.Duration{}
	for _, h := range hosts {
		b, err := h.h.Run(ctx, "journalctl", "-u", "outpost-agent", "-o", "cat", "--no-pager")
		if err != nil {
			tb.Errorf("%s: journal: %v", h.name, err)
			continue
		}
		seen := map[string]bool{}
		for _, l := range strings.Split(string(b), "\n") {
			m := stepLine.FindStringSubmatch(l)
			if m == nil || seen[m[1]] {
				continue
			}
			seen[m[1]] = true
			if d, err := time.ParseDuration(m[3]); err == nil {
				out[m[1]] = append(out[m[1]], d)
			}
		}
	}
	return out
}

func meanOf(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum / time.Duration(len(ds))
}

func stepSummary(steps map[string][]time.Duration) string {
	var parts []string
	for _, s := range stepNames {
		parts = append(parts, fmt.Sprintf("%s %v", s.what, meanOf(steps[s.step]).Round(time.Millisecond)))
	}
	return strings.Join(parts, "; ")
}

// updatePoolManifest is the README's example pool (maxUnavailable 2) and
// a config adding a file, a unit and an OS version.
func updatePoolManifest(tb testing.TB) string {
	tb.Helper()
	pool, err := os.ReadFile(filepath.Join(repoRoot(tb), "examples", "machineconfig", "00-pool-worker.yaml"))
	if err != nil {
		tb.Fatal(err)
	}
	return string(pool) + "---\n" + updateConfigManifest
}

const updateConfigManifest = `apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: 50-e2e
  labels:
    machineconfiguration.openshift.io/role: worker
spec:
  osImageURL: v2
  config:
    ignition:
      version: 3.2.0
    storage:
      files:
      - path: /etc/outpost-e2e.conf
        contents:
          source: data:,updated%0A
    systemd:
      units:
      - name: e2e-hello.service
        enabled: true
        contents: |
          [Service]
          Type=oneshot
          RemainAfterExit=yes
          ExecStart=/bin/sh -c 'cat /etc/outpost-e2e-live.conf > /run/e2e-hello || echo hello > /run/e2e-hello'
          [Install]
          WantedBy=multi-user.target
`

func poolStatus(p *api.MachineConfigPool, typ string) string {
	for _, c := range p.Status.Conditions {
		if c.Type == typ {
			return c.Status
		}
	}
	return ""
}

// describeStates is each node's update state, for a test's last words.
func describeStates(ctx context.Context, c *testCluster) string {
	objs, _, err := c.cl.List(ctx, api.ResourceForKind("Node"), "", client.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, o := range objs {
		n := o.(*api.Node)
		a := n.Annotations
		fmt.Fprintf(&b, "%s: %s cordoned=%v current=%s desired=%s reason=%q; ", n.Name, a[api.AnnotationMCState], n.Spec.Unschedulable,
			a[api.AnnotationCurrentConfig], a[api.AnnotationDesiredConfig], a[api.AnnotationMCReason])
	}
	return b.String()
}

// repoRoot is the module's root, for files of the repository.
func repoRoot(t testing.TB) string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no caller")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}

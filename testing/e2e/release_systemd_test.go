package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
	"github.com/outpost-edge/outpost/testing/linearize"
	"github.com/outpost-edge/outpost/testing/netns"
	"github.com/outpost-edge/outpost/testing/nspawn"
)

// TestReleaseUpdateRealSystemd (SPEC UPD-1..6, issue 13's end to end
// check): three servers, each the packaged outpost-server.service under
// a real systemd on its own nspawn host, form a cluster on binary 1.0.0;
// every host serves the same update graph with `outpost adm release
// serve`. Releases are built and signed by `outpost adm release new`:
//
//   - 1.1.0, the same code stamped with another version plus an add-on
//     (a namespace and a Deployment): `adm upgrade --to 1.1.0` restarts
//     the servers one at a time on the new binary (raft voters sampled
//     throughout: never below quorum), then the two agents (each the
//     packaged outpost-agent.service on its own host) download their
//     binary from the API and restart on it, the add-on is applied,
//     history Completed, every server and agent on 1.1.0, the
//     ClusterOperators at 1.1.0;
//   - 1.2.0, whose binary exits at start: the first server named rolls
//     back by itself to 1.1.0 (its unit's trial check), the update stops
//     with Failing=True and the reason, the cluster serves on 1.1.0;
//   - 1.3.0 changed after it was signed: refused, nothing changes.
//
// A client writes throughout; its history must be linearizable.
func TestReleaseUpdateRealSystemd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	e := startReleaseEnv(t, ctx, 2)
	e.follow(t, ctx)
	c, hosts, names, agents, apis, graph, keyFile := e.c, e.hosts, e.names, e.agents, e.apis, e.graph, e.keyFile
	v2 := e.v2
	cv := func() *api.ClusterVersion { return e.cv(ctx) }
	load := startWriteLoad(t, ctx, c, apis)
	rs := watchRestarts(ctx, c.cl, "1.1.0")
	t0 := time.Now()
	c.mustCLI(ctx, "adm", "upgrade", "--to", "1.1.0")
	waitFor(t, 5*time.Minute, "the update to 1.1.0 completed", func() (bool, string) {
		v := cv()
		ok := len(v.Status.History) > 0 && v.Status.History[0].Version == "1.1.0" && v.Status.History[0].State == api.UpdateCompleted
		return ok, fmt.Sprintf("%+v; %s", cvConds(v), serverVersions(load.voters.peers()))
	})
	took := time.Since(t0)
	if ps := mustPeers(t, ctx, c.cl); serverVersions(ps) != "h1=1.1.0 h2=1.1.0 h3=1.1.0" {
		t.Errorf("servers after the update: %s", serverVersions(ps))
	}
	for i, h := range hosts {
		out, _ := h.Run(ctx, "/var/lib/outpost/bin/good/outpost", "version")
		if !strings.Contains(string(out), "1.1.0") {
			t.Errorf("%s: the good binary says %q, want 1.1.0", names[i], out)
		}
	}
	for _, a := range agents {
		n, err := c.node(ctx, a.name)
		if err != nil {
			t.Fatal(err)
		}
		if n.Status.NodeInfo.KubeletVersion != "1.1.0" || n.Annotations[api.AnnotationAgentBinaryState] != api.SelfUpdateReady {
			t.Errorf("node %s after the update: agent %s, binary %q", a.name, n.Status.NodeInfo.KubeletVersion, n.Annotations[api.AnnotationAgentBinaryState])
		}
		out, _ := a.h.Run(ctx, "/var/lib/outpost/agent-bin/good/outpost", "version")
		if !strings.Contains(string(out), "1.1.0") {
			t.Errorf("%s: the agent's good binary says %q, want 1.1.0", a.name, out)
		}
	}
	// The pool rolls the release's MachineConfig out afterwards.
	waitFor(t, 3*time.Minute, "the worker pool updated", func() (bool, string) {
		obj, err := c.cl.Get(ctx, api.ResourceForKind("MachineConfigPool"), "", "worker", client.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		p := obj.(*api.MachineConfigPool)
		return p.Status.UpdatedMachineCount == 2 && poolStatus(p, api.PoolUpdated) == api.ConditionTrue, fmt.Sprintf("%+v", p.Status)
	})
	for _, a := range agents {
		if b, err := os.ReadFile(a.h.Path("/etc/outpost-release")); err != nil || string(b) != "1.1.0\n" {
			t.Errorf("%s: /etc/outpost-release %q %v, want the release's MachineConfig's 1.1.0", a.name, b, err)
		}
	}
	out := c.mustCLI(ctx, "get", "clusteroperators")
	for _, co := range []string{"control-plane", "node-agents", "edge", "edge-dns", "machine-config"} {
		if !regexpLine(out, co+`\s+1\.1\.0\s+True\s+False\s+False`) {
			t.Errorf("cluster operator %s not at 1.1.0 Available:\n%s", co, out)
		}
	}
	if _, err := c.cl.Get(ctx, api.ResourceForKind("Deployment"), "edge", "edge-dns", client.GetOptions{}); err != nil {
		t.Errorf("the add-on's deployment: %v", err)
	}
	r := load.stop()
	t.Logf("MEASURED three-server self-update 1.0.0 → 1.1.0 (and two agents): %v in total; each server's restart to healthy %v; raft voters sampled %d times, between %d and %d reachable; %d writes acknowledged, longest gap %v; history %s",
		took.Round(100*time.Millisecond), roundAll(rs.stop()), r.samples, r.minVoters, r.maxVoters, r.acked, r.maxGap.Round(10*time.Millisecond), r.history)
	if r.minVoters < 2 {
		t.Errorf("reachable raft voters fell to %d during the update, want never below quorum (2 of 3)", r.minVoters)
	}

	// 1.2.0 exits at start: the first server named rolls back by itself.
	load = startWriteLoad(t, ctx, c, apis)
	c.mustCLI(ctx, "adm", "upgrade", "--to", "1.2.0")
	waitFor(t, 4*time.Minute, "the update to 1.2.0 failing", func() (bool, string) {
		f := cvCond(cv(), api.CVFailing)
		return f.Status == api.ConditionTrue && f.Reason == "ControlPlaneUpdateFailed", fmt.Sprintf("%+v", cvConds(cv()))
	})
	f := cvCond(cv(), api.CVFailing)
	t.Logf("Failing: %s", f.Message)
	if !strings.Contains(f.Message, "rolled back to 1.1.0") || !strings.Contains(f.Message, "status=3") {
		t.Errorf("Failing's message %q should say the server rolled back and how 1.2.0 exited", f.Message)
	}
	waitFor(t, time.Minute, "every server back, a reachable voter on 1.1.0", func() (bool, string) {
		ps, err := c.cl.RaftPeers(ctx)
		if err != nil {
			return false, err.Error()
		}
		reach := 0
		for _, p := range ps {
			if p.Reachable && p.Suffrage == "Voter" && p.Info["selfUpdate"] == "ready" {
				reach++
			}
		}
		return reach == 3 && serverVersions(ps) == "h1=1.1.0 h2=1.1.0 h3=1.1.0", describePeers(ps) + serverVersions(ps)
	})
	if v := cv(); v.Status.History[0].Version != "1.2.0" || v.Status.History[0].State != api.UpdatePartial || v.Status.History[1].State != api.UpdateCompleted {
		t.Errorf("history %+v", v.Status.History)
	}
	if _, _, err := c.cl.Create(ctx, &api.Namespace{ObjectMeta: api.ObjectMeta{Name: "after-roll-back"}}); err != nil {
		t.Errorf("the cluster does not serve writes after the roll back: %v", err)
	}
	r = load.stop()
	if r.minVoters < 2 {
		t.Errorf("reachable raft voters fell to %d during the failed update", r.minVoters)
	}

	// A payload changed after it was signed is refused; nothing moves.
	// (Under the graph's directory: the hosts see it at /srv/graph.)
	digest := buildTampered(t, ctx, filepath.Join(graph, "outpost-1.3.0"), v2, filepath.Join(graph, "m2"), keyFile)
	before := cv().Status.History
	c.mustCLI(ctx, "adm", "upgrade", "--to-image", "file:///srv/graph/outpost-1.3.0@"+digest, "--allow-explicit-upgrade")
	waitFor(t, time.Minute, "the tampered release refused", func() (bool, string) {
		ra := cvCond(cv(), api.CVReleaseAccepted)
		return ra.Status == api.ConditionFalse && ra.Reason == "VerifyPayload", fmt.Sprintf("%+v", ra)
	})
	if got := cv().Status.History; !slices.EqualFunc(got, before, func(a, b api.UpdateHistory) bool { return a.Version == b.Version && a.State == b.State }) {
		t.Errorf("history changed by a refused release: %+v", got)
	}
	if ps := mustPeers(t, ctx, c.cl); serverVersions(ps) != "h1=1.1.0 h2=1.1.0 h3=1.1.0" {
		t.Errorf("servers after the refused release: %s", serverVersions(ps))
	}
}

// releaseEnv is three servers, each the packaged outpost-server.service
// under a real systemd on its own nspawn host (network namespaces
// 91-93), on binary 1.0.0, every host serving the same update graph
// (`outpost adm release serve`) of signed releases 1.0.0, 1.1.0 (the
// same code stamped with another version, plus an add-on: a namespace
// and a Deployment) and 1.2.0 (a binary that exits at start); and up to
// two agents, each the packaged outpost-agent.service on its own host.
type releaseEnv struct {
	c                           *testCluster
	hosts                       []*nspawn.Host
	names                       []string
	agents                      []*systemdHost
	apis                        []string
	graph, keyFile, trusted, v2 string
}

func startReleaseEnv(t testing.TB, ctx context.Context, withAgents int) *releaseEnv {
	t.Helper()
	requireReal(t)
	nspawn.Require(t)
	enableForwarding(t)
	root := t.TempDir()
	_ = nspawn.MustRootfs(t)

	// The binaries and the releases, as a site's build would make them.
	v1 := buildVersion(t, root, "1.0.0")
	v2 := buildVersion(t, root, "1.1.0")
	v3 := filepath.Join(root, "outpost-1.2.0")
	if err := os.WriteFile(v3, []byte("#!/bin/sh\necho 'outpost 1.2.0: cannot start' >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.MarshalECPrivateKey(key)
	keyFile := filepath.Join(root, "release.key")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	pub, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	trusted := string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}))
	graph := filepath.Join(root, "graph")
	for _, d := range []string{"releases", "channels", "m1", "m2", "m3"} {
		if err := os.MkdirAll(filepath.Join(graph, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	addon := func(version string) string {
		return `apiVersion: apps/v1
kind: Deployment
metadata: {name: edge-dns, namespace: edge}
spec:
  replicas: 0
  selector: {matchLabels: {app: edge-dns}}
  template:
    metadata: {labels: {app: edge-dns}}
    spec: {containers: [{name: dns, image: "edge-dns:` + version + `"}]}
`
	}
	writeManifests := func(dir, version string) {
		files := map[string]string{
			"0000_10_edge_00-namespace.yaml":  "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: edge\n",
			"0000_50_edge-dns_00-deploy.yaml": addon(version),
		}
		for n, c := range files {
			if err := os.WriteFile(filepath.Join(dir, n), []byte(c), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	writeManifests(filepath.Join(graph, "m1"), "1.0.0")
	writeManifests(filepath.Join(graph, "m2"), "1.1.0")
	// 1.1.0 also brings the worker pool, a node disruption policy that
	// takes the release file up without a reboot, and a MachineConfig
	// writing it: the pool rolls it out after the update (UPD-7).
	for n, c := range map[string]string{"0000_60_machine-config_00-pool.yaml": releasePool, "0000_60_machine-config_01-policy.yaml": releasePolicy,
		"0000_60_machine-config_10-release-file.yaml": releaseFileConfig} {
		if err := os.WriteFile(filepath.Join(graph, "m2", n), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeManifests(filepath.Join(graph, "m3"), "1.2.0")
	newRelease := func(version, bin, manifests, previous string) string {
		f := filepath.Join(graph, "releases", "outpost-"+version+".tar")
		args := []string{"adm", "release", "new", "--from-dir", manifests, "--version", version, "--binary", "linux/amd64=" + bin,
			"--to-file", f, "--sign-key", keyFile}
		if previous != "" {
			args = append(args, "--previous", previous)
		}
		if out, err := exec.CommandContext(ctx, outpostBin, args...).CombinedOutput(); err != nil {
			t.Fatalf("adm release new %s: %v\n%s", version, err, out)
		}
		return f
	}
	newRelease("1.0.0", v1, filepath.Join(graph, "m1"), "")
	newRelease("1.1.0", v2, filepath.Join(graph, "m2"), "1.0.0")
	newRelease("1.2.0", v3, filepath.Join(graph, "m3"), "1.1.0")
	if err := os.WriteFile(filepath.Join(graph, "channels", "stable-1.yaml"), []byte("name: stable-1\nversions: [1.0.0, 1.1.0, 1.2.0]\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	// Three hosts, each the packaged server unit (with the test's
	// addresses in a drop-in) and the graph service.
	unit, err := os.ReadFile(filepath.Join(repoRoot(t), "packaging", "systemd", "outpost-server.service"))
	if err != nil {
		t.Fatal(err)
	}
	secret := make([]byte, 24)
	_, _ = rand.Read(secret)
	names := []string{"h1", "h2", "h3"}
	var nets []*netns.Host
	var join []string
	for i := range names {
		n := netns.New(t, 91+i)
		nets = append(nets, n)
		join = append(join, n.Addr+":6444")
	}
	hosts := make([]*nspawn.Host, len(names))
	var apis []string
	for i, name := range names {
		n := nets[i]
		apis = append(apis, "https://"+n.Addr+":6443")
		dropin := fmt.Sprintf(`[Service]
ExecStart=
ExecStart=/var/lib/outpost/bin/current/outpost server --binary-dir /var/lib/outpost/bin --id %[1]s --data-dir /var/lib/outpost/server --api-addr %[2]s:6443 --raft-addr %[2]s:6444 --gossip-port 6446 --bootstrap-expect 3 --join %[3]s --cluster-secret-file /etc/outpost/cluster-secret --log-level info
RestartSec=1
`, name, n.Addr, strings.Join(join, ","))
		hosts[i] = nspawn.Boot(t, nspawn.Options{
			NetNS: n.Name, Hostname: name,
			Binds: []nspawn.Bind{{Source: v1, Target: "/usr/local/bin/outpost", ReadOnly: true}, {Source: graph, Target: "/srv/graph", ReadOnly: true}},
			Files: map[string]nspawn.File{
				"/etc/systemd/system/outpost-server.service":                {Content: string(unit)},
				"/etc/systemd/system/outpost-server.service.d/10-test.conf": {Content: dropin},
				"/etc/outpost/cluster-secret":                               {Content: hex.EncodeToString(secret), Mode: 0o600},
				"/etc/systemd/system/outpost-graph.service": {Content: `[Service]
ExecStart=/usr/local/bin/outpost adm release serve --dir /srv/graph --listen 127.0.0.1:8080 --url http://127.0.0.1:8080
Restart=always
[Install]
WantedBy=multi-user.target
`},
			},
			Enable: []string{"outpost-server.service", "outpost-graph.service"},
		})
	}
	t.Cleanup(func() {
		if t.Failed() {
			for i, h := range hosts {
				if out, err := h.Run(context.Background(), "journalctl", "-u", "outpost-server", "--no-pager", "-n", "60"); err == nil {
					t.Logf("%s journal:\n%s", names[i], out)
				}
			}
		}
	})
	c := &testCluster{t: t, dir: root, admin: hosts[1].Path("/var/lib/outpost/server/admin.conf")}
	waitFor(t, 2*time.Minute, "three servers serving", func() (bool, string) {
		cfg, err := client.LoadConfig(c.admin)
		if err != nil {
			return false, err.Error()
		}
		cfg.Servers = apis
		cl, err := client.New(cfg)
		if err != nil {
			return false, err.Error()
		}
		ps, err := cl.RaftPeers(ctx)
		if err != nil {
			return false, err.Error()
		}
		c.cl = cl
		return voterCount(ps) == 3 && serverVersions(ps) == "h1=1.0.0 h2=1.0.0 h3=1.0.0", describePeers(ps)
	})
	// The CLI fails over between the three servers: any one restarts.
	cfg, err := client.LoadConfig(c.admin)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Servers = apis
	c.admin = filepath.Join(root, "admin.conf")
	if err := client.WriteConfig(c.admin, cfg); err != nil {
		t.Fatal(err)
	}
	// Agents, each the packaged outpost-agent.service on its own host,
	// running from its self-update directory.
	var agents []*systemdHost
	if withAgents == 0 {
		return &releaseEnv{c: c, hosts: hosts, names: names, apis: apis, graph: graph, keyFile: keyFile, trusted: trusted, v2: v2}
	}
	agentJoin := c.joinString(ctx)
	ctdDir := sharedContainerd(t, ctx)
	for i, name := range []string{"n1", "n2"}[:withAgents] {
		agents = append(agents, bootAgentHostRunning(t, v1, "/var/lib/outpost/agent-bin/current/outpost", name, 94+i, apis[i], agentJoin, ctdDir,
			[]string{"--os-updates", "on", "--os-backend", "directory", "--labels", "node-role.kubernetes.io/worker=", "--binary-dir", "/var/lib/outpost/agent-bin"}, nil))
	}
	for _, a := range agents {
		c.waitReady(a.name, "True", 2*time.Minute)
	}
	return &releaseEnv{c: c, hosts: hosts, names: names, agents: agents, apis: apis, graph: graph, keyFile: keyFile, trusted: trusted, v2: v2}
}

// follow points the cluster at the hosts' graph service with the test's
// key trusted, and waits for 1.1.0 to be listed.
func (e *releaseEnv) follow(t testing.TB, ctx context.Context) {
	t.Helper()
	c := e.c
	waitFor(t, time.Minute, "the trusted key and upstream set", func() (bool, string) {
		v := e.cv(ctx)
		v.Spec.TrustedKeys, v.Spec.Upstream, v.Spec.Channel = e.trusted, "http://127.0.0.1:8080/api/upgrades_info/v1/graph", "stable-1"
		_, _, err := c.cl.Update(ctx, v)
		return err == nil, fmt.Sprint(err)
	})
	waitFor(t, time.Minute, "1.1.0 listed", func() (bool, string) {
		out, _, _ := c.cli(ctx, "adm", "upgrade")
		return strings.Contains(out, "1.1.0"), out
	})

}

// cv is the ClusterVersion, or an empty one while it cannot be read.
func (e *releaseEnv) cv(ctx context.Context) *api.ClusterVersion {
	o, err := e.c.cl.Get(ctx, api.ResourceForKind("ClusterVersion"), "", api.ClusterVersionName, client.GetOptions{})
	if err != nil {
		return &api.ClusterVersion{}
	}
	return o.(*api.ClusterVersion)
}

// buildVersion builds the outpost binary stamped with version.
func buildVersion(t testing.TB, dir, version string) string {
	t.Helper()
	out := filepath.Join(dir, "outpost-"+version)
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -X github.com/outpost-edge/outpost/controlplane/version.Version="+version, "-o", out, "./cmd/outpost")
	cmd.Dir = repoRoot(t)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", version, err, b)
	}
	return out
}

// buildTampered writes a signed 1.3.0 payload directory to dst, then
// changes its binary's blob (and fixes nothing else up): the digests no
// longer match. It returns the payload's digest.
func buildTampered(t testing.TB, ctx context.Context, dst, bin, manifests, keyFile string) string {
	t.Helper()
	if out, err := exec.CommandContext(ctx, outpostBin, "adm", "release", "new", "--from-dir", manifests, "--version", "1.3.0", "--previous", "1.1.0",
		"--binary", "linux/amd64="+bin, "--to-dir", dst, "--sign-key", keyFile).CombinedOutput(); err != nil {
		t.Fatalf("adm release new 1.3.0: %v\n%s", err, out)
	}
	out, err := exec.CommandContext(ctx, outpostBin, "adm", "release", "info", dst).CombinedOutput()
	if err != nil {
		t.Fatalf("adm release info: %v\n%s", err, out)
	}
	digest := ""
	for l := range strings.Lines(string(out)) {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "Digest:" {
			digest = f[1]
		}
	}
	blobs, _ := filepath.Glob(filepath.Join(dst, "blobs", "sha256", "*"))
	var biggest string
	var size int64
	for _, b := range blobs {
		if st, err := os.Stat(b); err == nil && st.Size() > size {
			biggest, size = b, st.Size()
		}
	}
	f, err := os.OpenFile(biggest, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("tampered"), size/2); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if digest == "" {
		t.Fatalf("no digest in adm release info's output:\n%s", out)
	}
	return digest
}

// regexpLine reports whether a line of out matches re.
func regexpLine(out, re string) bool {
	return regexp.MustCompile(`(?m)^` + re).MatchString(out)
}

// serverVersions is "ID=VERSION ..." of the peers, by ID.
func serverVersions(ps []client.RaftPeer) string {
	var out []string
	for _, p := range ps {
		out = append(out, p.ID+"="+p.Version)
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

func cvCond(cv *api.ClusterVersion, typ string) api.MachineCondition {
	for _, c := range cv.Status.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return api.MachineCondition{}
}

func cvConds(cv *api.ClusterVersion) string {
	var b strings.Builder
	for _, c := range cv.Status.Conditions {
		fmt.Fprintf(&b, "%s=%s %s: %s; ", c.Type, c.Status, c.Reason, c.Message)
	}
	return b.String()
}

// writeLoad is a client writing throughout a step: namespaces (every
// acknowledged one must be there after) and a linearizability workload,
// with the raft voters sampled.
type writeLoad struct {
	t      testing.TB
	ctx    context.Context
	c      *testCluster
	stopFn context.CancelFunc
	wg     sync.WaitGroup
	voters voterWatch
	hist   *linearize.History

	mu      sync.Mutex
	acked   []string
	lastAck time.Time
	maxGap  time.Duration
}

type writeReport struct {
	minVoters, maxVoters, samples, acked int
	maxGap                               time.Duration
	history                              string
}

func startWriteLoad(t testing.TB, ctx context.Context, c *testCluster, apis []string) *writeLoad {
	t.Helper()
	wctx, stop := context.WithCancel(ctx)
	l := &writeLoad{t: t, ctx: ctx, c: c, stopFn: stop, hist: linearize.NewHistory(), lastAck: time.Now()}
	cfg, err := client.LoadConfig(c.admin)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Servers = apis
	probe, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l.wg.Go(func() { l.voters.run(wctx, probe) })
	tag := fmt.Sprintf("%d", time.Now().UnixNano()%1e6)
	l.wg.Go(func() {
		for i := 0; wctx.Err() == nil; i++ {
			name := fmt.Sprintf("w-%s-%d", tag, i)
			rctx, cancel := context.WithTimeout(wctx, 5*time.Second)
			_, _, err := c.cl.Create(rctx, &api.Namespace{ObjectMeta: api.ObjectMeta{Name: name}})
			cancel()
			if err == nil {
				now := time.Now()
				l.mu.Lock()
				l.acked = append(l.acked, name)
				l.maxGap = max(l.maxGap, now.Sub(l.lastAck))
				l.lastAck = now
				l.mu.Unlock()
			}
		}
	})
	var keys []string
	for i := range 6 {
		keys = append(keys, fmt.Sprintf("lin-%s-k%d", tag, i))
	}
	lw := &linearize.Workload{History: l.hist, Keys: keys, Namespace: "default", OpTimeout: 10 * time.Second}
	l.wg.Go(func() { lw.RunAll(wctx, 4, []*client.Client{c.cl}) })
	return l
}

// stop ends the load and checks it: every acknowledged write is there,
// the history is linearizable.
func (l *writeLoad) stop() writeReport {
	t := l.t
	t.Helper()
	l.stopFn()
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.voters.mu.Lock()
	r := writeReport{minVoters: l.voters.minReachable, maxVoters: l.voters.max, samples: l.voters.samples, acked: len(l.acked), maxGap: l.maxGap}
	l.voters.mu.Unlock()
	sum, counts := linearize.Summary(l.hist)
	r.history = sum
	if err := linearize.Thin(counts); err != nil {
		t.Errorf("linearizability history too thin to mean anything (%v): %s", err, sum)
	} else if res, info := l.hist.Check(2 * time.Minute); res != porcupine.Ok {
		t.Errorf("the history is not linearizable (%v): %s; %s", res, sum, l.hist.Save(info, "outpost-release-update"))
	}
	items, _, err := l.c.cl.List(l.ctx, api.ResourceForKind("Namespace"), "", client.ListOptions{Consistent: true})
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, it := range items {
		have[it.GetObjectMeta().Name] = true
	}
	var lost []string
	for _, n := range l.acked {
		if !have[n] {
			lost = append(lost, n)
		}
	}
	if r.acked == 0 || len(lost) > 0 {
		t.Errorf("%d writes acknowledged, %d lost: %v", r.acked, len(lost), lost)
	}
	return r
}

const releasePool = `apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfigPool
metadata:
  name: worker
spec:
  maxUnavailable: 1
  machineConfigSelector:
    matchLabels:
      machineconfiguration.openshift.io/role: worker
  nodeSelector:
    matchLabels:
      node-role.kubernetes.io/worker: ""
`

const releasePolicy = `apiVersion: operator.openshift.io/v1
kind: MachineConfiguration
metadata:
  name: cluster
spec:
  nodeDisruptionPolicy:
    files:
    - path: /etc/outpost-release
      actions:
      - type: None
`

const releaseFileConfig = `apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: 50-release-file
  labels:
    machineconfiguration.openshift.io/role: worker
spec:
  config:
    ignition:
      version: 3.2.0
    storage:
      files:
      - path: /etc/outpost-release
        contents:
          source: data:,1.1.0%0A
`

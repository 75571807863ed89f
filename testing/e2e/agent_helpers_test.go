package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/internal/realtest"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
	"github.com/outpost-edge/outpost/runtime"
	ctrd "github.com/outpost-edge/outpost/runtime/containerd"
	"github.com/outpost-edge/outpost/runtime/ociarchive"
	"github.com/outpost-edge/outpost/testing/netns"
	"github.com/outpost-edge/outpost/testing/proc"
)

// demoImage is the name the demo image is built under (as `make
// demo-image` names it).
const demoImage = "outpost.local/demo:1"

// requireReal fails (OUTPOST_TEST_REAL=1, as `make test` sets) or skips
// the test when this machine cannot run agents with their own containerd
// in network namespaces: root, ip, containerd, runc.
func requireReal(t testing.TB) {
	t.Helper()
	var missing []string
	if err := netns.Available(); err != nil {
		missing = append(missing, err.Error())
	}
	for _, b := range []string{"containerd", "containerd-shim-runc-v2", "runc", "nsenter", "unshare"} {
		if _, err := exec.LookPath(b); err != nil {
			missing = append(missing, b+" is not installed (apt-get install containerd runc)")
		}
	}
	if len(missing) > 0 {
		realtest.Require(t, "agents in network namespaces need: "+strings.Join(missing, "; "))
	}
}

var (
	demoOnce sync.Once
	demoDir  string
	demoErr  error
)

// buildDemo builds packaging/demo as a static binary and packs it into an
// OCI archive, as packaging/demoimage does for `make demo-image`; it
// returns the binary and the archive. Built once per test binary.
func buildDemo(t testing.TB) (bin, archive string) {
	t.Helper()
	demoOnce.Do(func() {
		demoDir, demoErr = os.MkdirTemp("", "outpost-e2e-demo-")
		if demoErr != nil {
			return
		}
		bin := filepath.Join(demoDir, "demo")
		cmd := exec.Command("go", "build", "-o", bin, "github.com/outpost-edge/outpost/packaging/demo")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			demoErr = fmt.Errorf("go build packaging/demo: %w: %s", err, out)
			return
		}
		data, err := os.ReadFile(bin)
		if err != nil {
			demoErr = err
			return
		}
		f, err := os.Create(filepath.Join(demoDir, "demo-image.tar"))
		if err != nil {
			demoErr = err
			return
		}
		demoErr = ociarchive.Build(f, ociarchive.Image{
			Name:       demoImage,
			Files:      []ociarchive.File{{Path: "/demo", Mode: 0o755, Data: data}},
			Entrypoint: []string{"/demo"},
		})
		if err := f.Close(); demoErr == nil {
			demoErr = err
		}
	})
	if demoErr != nil {
		t.Fatalf("demo image: %v", demoErr)
	}
	return filepath.Join(demoDir, "demo"), filepath.Join(demoDir, "demo-image.tar")
}

// waitFor polls cond until it reports true or timeout passes; then the
// test fails with what and cond's last description of the state.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within %v; last state: %s", what, timeout, state)
		}
		time.Sleep(150 * time.Millisecond) // polling a condition, with a deadline
	}
}

// testCluster is one `outpost server` process in the test's own network
// namespace and agents in test hosts.
type testCluster struct {
	t       testing.TB
	dir     string
	apiPort int
	server  *exec.Cmd
	srvLog  *os.File
	admin   string // admin.conf
	cl      *client.Client
}

// freePort is a TCP port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	a, err := proc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	_, p, _ := strings.Cut(a, ":")
	n, _ := strconv.Atoi(p)
	return n
}

// startServer starts one server (bootstrap-expect 1) listening on all
// addresses, so agents reach it through their hosts' gateways. It
// advertises gw (a test host's gateway address, which every test host can
// reach as long as that host's link is up) for its API and gossip. The
// test hosts must exist before: the server's certificate names the
// addresses the machine has when it starts.
func startServer(t testing.TB, dir, gw string, extra ...string) *testCluster {
	t.Helper()
	c := &testCluster{t: t, dir: dir, apiPort: freePort(t)}
	gossipPort := freePort(t)
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	logf, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		t.Fatal(err)
	}
	c.srvLog = logf
	c.server = exec.Command(outpostBin, "server",
		"--id", "s1", "--data-dir", filepath.Join(dir, "server"),
		"--api-addr", fmt.Sprintf("0.0.0.0:%d", c.apiPort),
		"--advertise-api", fmt.Sprintf("https://%s:%d", gw, c.apiPort),
		"--raft-addr", fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		"--gossip-addr", fmt.Sprintf("0.0.0.0:%d", gossipPort),
		"--advertise-gossip", gw,
		"--bootstrap-expect", "1",
		"--cluster-secret", hex.EncodeToString(b),
		"--log-level", "info",
	)
	c.server.Args = append(c.server.Args, extra...)
	c.server.Stdout, c.server.Stderr = logf, logf
	c.server.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := c.server.Start(); err != nil {
		t.Fatalf("start server: %v", err)
	}
	t.Cleanup(func() {
		stopProcess(c.server, 10*time.Second)
		logf.Close()
		if t.Failed() {
			dumpTail(t, "server log", filepath.Join(dir, "server.log"), 60)
		}
	})
	c.admin = filepath.Join(dir, "server", "admin.conf")
	waitFor(t, time.Minute, "server ready", func() (bool, string) {
		if c.server.ProcessState != nil {
			t.Fatalf("server exited: %v", c.server.ProcessState)
		}
		cfg, err := client.LoadConfig(c.admin)
		if err != nil {
			return false, err.Error()
		}
		cl, err := client.New(cfg)
		if err != nil {
			return false, err.Error()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if _, _, err := cl.Do(ctx, "GET", "/readyz", nil, nil); err != nil {
			return false, err.Error()
		}
		c.cl = cl
		return true, ""
	})
	return c
}

// alive reports whether the server process still runs.
func (c *testCluster) alive() bool {
	return c.server.Process.Signal(syscall.Signal(0)) == nil
}

// cli runs the outpost CLI as the admin; it returns stdout, stderr and the
// exit code.
func (c *testCluster) cli(ctx context.Context, args ...string) (string, string, int) {
	c.t.Helper()
	cmd := exec.CommandContext(ctx, outpostBin, append([]string{"--config", c.admin}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			c.t.Fatalf("outpost %v: %v", args, err)
		}
		code = ee.ExitCode()
	}
	return out.String(), errb.String(), code
}

// mustCLI is cli that fails the test unless the command succeeds.
func (c *testCluster) mustCLI(ctx context.Context, args ...string) string {
	c.t.Helper()
	out, errs, code := c.cli(ctx, args...)
	if code != 0 {
		c.t.Fatalf("outpost %s: exit %d: %s%s", strings.Join(args, " "), code, out, errs)
	}
	return out
}

// apply writes manifest to a file and applies it with the CLI.
func (c *testCluster) apply(ctx context.Context, name, manifest string) {
	c.t.Helper()
	p := filepath.Join(c.dir, name+".yaml")
	if err := os.WriteFile(p, []byte(manifest), 0o600); err != nil {
		c.t.Fatal(err)
	}
	c.mustCLI(ctx, "apply", "-f", p)
}

// joinString makes a join token with the CLI.
func (c *testCluster) joinString(ctx context.Context) string {
	c.t.Helper()
	s := strings.TrimSpace(c.mustCLI(ctx, "adm", "token", "create", "--role", "node", "--description", "e2e join"))
	if !strings.HasPrefix(s, "OP1::sha256:") {
		c.t.Fatalf("adm token create --role node printed %q, want a join string OP1::sha256:<pin>::<token>", s)
	}
	return s
}

func (c *testCluster) node(ctx context.Context, name string) (*api.Node, error) {
	o, err := c.cl.Get(ctx, api.ResourceForKind("Node"), "", name, client.GetOptions{})
	if err != nil {
		return nil, err
	}
	return o.(*api.Node), nil
}

// readyStatus is the status of a node's Ready condition ("" without one).
func readyStatus(n *api.Node) string {
	for _, c := range n.Status.Conditions {
		if c.Type == "Ready" {
			return c.Status
		}
	}
	return ""
}

// waitReady waits until node's Ready condition has status want.
func (c *testCluster) waitReady(name, want string, timeout time.Duration) {
	c.t.Helper()
	waitFor(c.t, timeout, fmt.Sprintf("node %s Ready=%s", name, want), func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		n, err := c.node(ctx, name)
		if err != nil {
			return false, err.Error()
		}
		return readyStatus(n) == want, fmt.Sprintf("conditions %+v", n.Status.Conditions)
	})
}

// pods lists the pods of the default namespace matching a label
// selector.
func (c *testCluster) pods(ctx context.Context, selector string) ([]*api.Pod, error) {
	items, _, err := c.cl.List(ctx, api.ResourceForKind("Pod"), "default", client.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	out := make([]*api.Pod, 0, len(items))
	for _, it := range items {
		out = append(out, it.(*api.Pod))
	}
	return out, nil
}

func (c *testCluster) pod(ctx context.Context, name string) (*api.Pod, error) {
	o, err := c.cl.Get(ctx, api.ResourceForKind("Pod"), "default", name, client.GetOptions{})
	if err != nil {
		return nil, err
	}
	return o.(*api.Pod), nil
}

// waitSucceededSaying waits until pod name (a client that runs once,
// restartPolicy OnFailure) has succeeded with a log holding what
// want says of it (its own address may be part of it).
func (c *testCluster) waitSucceededSaying(ctx context.Context, name, what string, want func(p *api.Pod) string) {
	c.t.Helper()
	waitFor(c.t, 2*time.Minute, what, func() (bool, string) {
		p, err := c.pod(ctx, name)
		if err != nil {
			return false, err.Error()
		}
		out, _, _ := c.cli(ctx, "logs", name)
		return p.Status.Phase == "Succeeded" && strings.Contains(out, want(p)), p.Status.Phase + " " + p.Status.PodIP + ": " + out
	})
}

// agentNode is one `outpost agent` process in a test host, with its own
// data dir and so its own supervised containerd.
type agentNode struct {
	t    testing.TB
	name string
	host *netns.Host
	dir  string
	args []string
	cmd  *exec.Cmd
	log  *os.File
	// rt is the test's own client of the node's containerd, made at
	// first use; it reconnects when the agent's containerd restarts.
	rt *ctrd.Runtime
	// sharedMounts, when set, is a directory this test made a shared
	// mount: the agent's mount namespace then keeps the root's mounts'
	// propagation (all private here but it), so mounts the agent makes
	// under it (pods' network namespaces) outlive the agent's namespace
	// as they would on a host with one mount namespace.
	sharedMounts string
}

// newAgent prepares an agent for host h; start runs it. Cleanup stops it
// and removes every container it left, with the processes that ran them.
func newAgent(t testing.TB, name string, h *netns.Host, dir, serverURL, join string, extra ...string) *agentNode {
	t.Helper()
	a := &agentNode{t: t, name: name, host: h, dir: dir}
	a.args = []string{"agent",
		"--server", serverURL, "--token", join,
		"--data-dir", dir, "--node-name", name,
		"--address", h.Addr, "--listen", h.Addr + ":10250",
		"--heartbeat", "2s",
		"--log-level", "info",
	}
	if !slices.Contains(extra, "--pod-network") {
		// Pods in the host's network unless the test asks for their
		// own: an agent that finds the CNI plugins would otherwise
		// write the machine's /etc/cni/net.d and /run/outpost/netns.
		a.args = append(a.args, "--pod-network", "host")
	}
	a.args = append(a.args, extra...)
	t.Cleanup(a.cleanup)
	return a
}

// enterHost is the shell script that runs its arguments as a process of
// a test host: in the host's network namespace (nsenter entered it) and
// a mount namespace of its own whose /sys/class/net shows the host's
// interfaces, as the agent's network condition reads them. `ip netns
// exec` cannot be used: it mounts a new /sys, which hides the cgroup
// mounts runc needs. Every step execs, so the agent keeps the PID.
const enterHost = `set -e
mkdir -p "$SYSFS"
mount -t sysfs sysfs "$SYSFS"
mount --bind "$SYSFS/class/net" /sys/class/net
mount --bind "$SYSFS/devices/virtual/net" /sys/devices/virtual/net
exec "$@"`

// start runs the agent inside its host's namespace.
func (a *agentNode) start() {
	a.t.Helper()
	if err := os.MkdirAll(a.dir, 0o700); err != nil {
		a.t.Fatal(err)
	}
	logf, err := os.OpenFile(filepath.Join(a.dir, "..", a.name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		a.t.Fatal(err)
	}
	args := append([]string{"--net=/run/netns/" + a.host.Name, "--",
		"unshare", "--mount", "--propagation", a.propagation(), "--",
		"sh", "-c", enterHost, "sh", outpostBin}, a.args...)
	cmd := exec.Command("nsenter", args...)
	cmd.Env = append(os.Environ(), "SYSFS="+filepath.Join(a.dir, "..", a.name+"-sysfs"))
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		a.t.Fatalf("start agent %s: %v", a.name, err)
	}
	a.cmd, a.log = cmd, logf
}

func (a *agentNode) propagation() string {
	if a.sharedMounts != "" {
		return "unchanged"
	}
	return "slave"
}

// shareMounts makes dir a shared mount point for the agent's mounts
// under it (sharedMounts), removed with every mount under it when the
// test ends.
func (a *agentNode) shareMounts(dir string) {
	a.t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		a.t.Fatal(err)
	}
	for _, args := range [][]string{{"--bind", dir, dir}, {"--make-shared", dir}} {
		if out, err := exec.Command("mount", args...).CombinedOutput(); err != nil {
			a.t.Fatalf("mount %v: %v: %s", args, err, out)
		}
	}
	a.t.Cleanup(func() { _ = exec.Command("umount", "-R", "-l", dir).Run() })
	a.sharedMounts = dir
}

// kill9 ends the agent with SIGKILL: no shutdown code runs.
func (a *agentNode) kill9() {
	if a.cmd != nil {
		_ = a.cmd.Process.Kill()
		_ = a.cmd.Wait()
		a.cmd = nil
	}
	if a.log != nil {
		a.log.Close()
		a.log = nil
	}
}

// alive reports whether the agent process still runs.
func (a *agentNode) alive() bool {
	return a.cmd != nil && a.cmd.Process.Signal(syscall.Signal(0)) == nil
}

// socket is the agent's private containerd's socket. Unix sockets are
// not network-namespaced, so the test reaches it from outside the host.
func (a *agentNode) socket() string { return filepath.Join(a.dir, "containerd", "containerd.sock") }

// containers lists outpost's containers on the node, through a client
// of the agent's containerd (the package the agent uses).
func (a *agentNode) containers(ctx context.Context) ([]runtime.ContainerStatus, error) {
	a.t.Helper()
	if a.rt == nil {
		rt, err := ctrd.New(ctx, ctrd.Config{Socket: a.socket(), LogDir: a.t.TempDir(), LogWriter: outpostBin})
		if err != nil {
			a.t.Fatalf("containerd client of %s: %v", a.name, err)
		}
		a.rt = rt
	}
	return a.rt.ListContainers(ctx)
}

// cleanup stops the agent, then removes every container of its data dir
// through a containerd started on the same root, and kills whatever
// process still names the data dir (shims, log writers, containerd).
func (a *agentNode) cleanup() {
	t := a.t
	if a.rt != nil {
		a.rt.Close()
	}
	if a.cmd != nil {
		stopProcess(a.cmd, 15*time.Second)
		a.cmd = nil
	}
	if a.log != nil {
		a.log.Close()
	}
	if t.Failed() {
		dumpTail(t, "agent "+a.name+" log", filepath.Join(a.dir, "..", a.name+".log"), 60)
	}
	// A containerd left by the agent (it dies with the agent, but be
	// sure) would hold the socket the supervisor below wants.
	killUnder(t, filepath.Join(a.dir, "containerd", "config.toml"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := os.Stat(filepath.Join(a.dir, "containerd")); err == nil {
		sup, err := ctrd.StartSupervised(ctx, ctrd.SupervisorConfig{Root: filepath.Join(a.dir, "containerd")})
		if err != nil {
			t.Errorf("cleanup %s: start containerd: %v", a.name, err)
		} else {
			rt, err := ctrd.New(ctx, ctrd.Config{Socket: sup.Socket(), LogDir: filepath.Join(a.dir, "cleanup-logs"), LogWriter: outpostBin})
			if err == nil {
				all, err := rt.ListContainers(ctx)
				if err != nil {
					t.Errorf("cleanup %s: list containers: %v", a.name, err)
				}
				for _, c := range all {
					if c.State == runtime.StateRunning || c.State == runtime.StateCreated {
						if err := rt.StopContainer(ctx, c.ID, 0); err != nil {
							t.Errorf("cleanup %s: stop %s: %v", a.name, c.ID, err)
						}
					}
					if err := rt.RemoveContainer(ctx, c.ID); err != nil {
						t.Errorf("cleanup %s: remove %s: %v", a.name, c.ID, err)
					}
				}
				rt.Close()
			}
			if err := sup.Stop(); err != nil {
				t.Logf("cleanup %s: containerd stop: %v", a.name, err)
			}
		}
	}
	killUnder(t, a.dir)
}

// killUnder SIGKILLs every process whose command line names path, and
// waits until they are gone.
func killUnder(t testing.TB, path string) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		pids := pidsNaming(path)
		if len(pids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("processes naming %s outlived SIGKILL: %v", path, pids)
			return
		}
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		time.Sleep(50 * time.Millisecond) // polling /proc for the processes to go, with a deadline
	}
}

// pidsNaming lists the processes whose command line contains s.
func pidsNaming(s string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(b) == 0 {
			continue
		}
		if bytes.Contains(b, []byte(s)) {
			out = append(out, pid)
		}
	}
	return out
}

// stopProcess ends cmd with SIGTERM, then SIGKILL after grace.
func stopProcess(cmd *exec.Cmd, grace time.Duration) {
	if cmd == nil || cmd.Process == nil || cmd.ProcessState != nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		_ = cmd.Process.Kill()
		<-done
	}
}

// dumpTail logs the last n lines of a log file.
func dumpTail(t testing.TB, what, path string, n int) {
	b, err := os.ReadFile(path)
	if err != nil {
		return
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	t.Logf("--- last lines of %s (%s):\n%s", what, path, strings.Join(lines, "\n"))
}

// importImage loads the archive onto a node with `outpost image import`.
func (c *testCluster) importImage(ctx context.Context, archive, node string) {
	c.t.Helper()
	out, errs, code := c.cli(ctx, "image", "import", archive, "--node", node)
	if code != 0 {
		c.t.Fatalf("outpost image import %s --node %s: exit %d: %s%s", archive, node, code, out, errs)
	}
}

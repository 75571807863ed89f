package containerd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/internal/realtest"

	containerd "github.com/containerd/containerd"
	"github.com/containerd/containerd/api/services/tasks/v1"
	"github.com/containerd/containerd/containers"
	"github.com/containerd/containerd/namespaces"
	"github.com/containerd/containerd/oci"
	"github.com/containerd/containerd/pkg/dialer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/outpost-edge/outpost/runtime"
	"github.com/outpost-edge/outpost/runtime/cgroups"
	"github.com/outpost-edge/outpost/runtime/runtimetest"
	"github.com/outpost-edge/outpost/testing/proc"
)

func TestMain(m *testing.M) {
	// containerd's shim runs this test binary as the containers' log
	// writer where a test leaves Config.LogWriter at its default (the
	// running executable), as the outpost binary is run.
	RunLogWriterIfAsked()
	code := m.Run()
	if writerDir != "" {
		os.RemoveAll(writerDir)
	}
	os.Exit(code)
}

var (
	writerOnce sync.Once
	writerDir  string
	writerBin  string
	writerErr  error
)

// testLogWriter builds internal/testlogwriter once: a log writer without
// the race detector starts in milliseconds, where this test binary under
// -race takes most of a second per container.
func testLogWriter(t *testing.T) string {
	t.Helper()
	writerOnce.Do(func() {
		writerDir, writerErr = os.MkdirTemp("", "logwriter")
		if writerErr != nil {
			return
		}
		writerBin = filepath.Join(writerDir, "testlogwriter")
		goBin := filepath.Join(goruntime.GOROOT(), "bin", "go")
		if _, err := os.Stat(goBin); err != nil {
			goBin = "go"
		}
		cmd := exec.Command(goBin, "build", "-o", writerBin, "github.com/outpost-edge/outpost/runtime/containerd/internal/testlogwriter")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			writerErr = fmt.Errorf("build testlogwriter: %w\n%s", err, out)
		}
	})
	if writerErr != nil {
		t.Fatal(writerErr)
	}
	return writerBin
}

// requireReal gates the tests that need root, containerd and runc: with
// OUTPOST_TEST_REAL=1 a missing piece fails the test, otherwise it skips
// with the reason.
func requireReal(t *testing.T) {
	t.Helper()
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root")
	}
	for _, b := range []string{"containerd", "runc", "containerd-shim-runc-v2"} {
		if _, err := exec.LookPath(b); err != nil {
			missing = append(missing, b)
		}
	}
	if len(missing) > 0 {
		realtest.Require(t, fmt.Sprintf("real containerd tests need %v (apt-get install containerd runc; run as root)", missing))
	}
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tlogWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type tlogWriter struct{ t *testing.T }

func (w tlogWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p))
	return len(p), nil
}

// privateRoot is a short temp dir (unix socket paths are limited), removed
// at the end of the test.
func privateRoot(t *testing.T) string {
	dir, err := os.MkdirTemp("", "ctrd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Logf("remove %s: %v", dir, err)
		}
	})
	return dir
}

func startSupervised(t *testing.T, root string) *Supervisor {
	t.Helper()
	sup, err := StartSupervised(context.Background(), SupervisorConfig{Root: root, Logger: testLogger(t)})
	if err != nil {
		if b, rerr := os.ReadFile(root + "/containerd.log"); rerr == nil {
			t.Logf("containerd.log:\n%s", b)
		}
		t.Fatal(err)
	}
	return sup
}

func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestContract(t *testing.T) {
	requireReal(t)
	contract(t, "")
}

// The whole contract holds with crun as the OCI runtime (the agent's
// --oci-runtime crun): limits, OOM, exec, start errors and all.
func TestContractCrun(t *testing.T) {
	requireReal(t)
	requireCrun(t)
	contract(t, "crun")
}

func requireCrun(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("crun"); err != nil {
		realtest.Require(t, "crun tests need crun (apt-get install crun)")
	}
}

// contract runs the runtime contract on a private containerd whose shim
// runs the OCI runtime oci.
func contract(t *testing.T, ociRuntime string) {
	root := privateRoot(t)
	sup := startSupervised(t, root)
	t.Cleanup(func() {
		if err := sup.Stop(); err != nil {
			t.Errorf("stop containerd: %v", err)
		}
	})
	cfg := Config{Socket: sup.Socket(), LogDir: root + "/logs", Logger: testLogger(t), LogWriter: testLogWriter(t), OCIRuntime: ociRuntime}
	runtimetest.Run(t, func(t *testing.T) (runtime.Runtime, runtimetest.Env) {
		rt, err := New(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		current := rt
		t.Cleanup(func() { current.Close() })
		raw, err := containerd.New(sup.Socket())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { raw.Close() })
		nctx := namespaces.WithNamespace(context.Background(), DefaultNamespace)
		env := runtimetest.Env{
			Name:           "containerd",
			PullsOverHTTP:  true,
			ClosedRegistry: closedPort(t),
			CreateForeign: func(t *testing.T, id string) {
				img, err := raw.GetImage(nctx, runtimetest.TestImageRef)
				if err != nil {
					t.Fatal(err)
				}
				c, err := raw.NewContainer(nctx, id, containerd.WithImage(img), containerd.WithNewSnapshot(id, img),
					containerd.WithNewSpec(oci.WithImageConfig(img)), containerd.WithContainerLabels(map[string]string{"owner": "someone-else"}))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() {
					if err := c.Delete(nctx, containerd.WithSnapshotCleanup); err != nil {
						t.Errorf("delete foreign container: %v", err)
					}
				})
			},
			ForeignExists: func(t *testing.T, id string) bool {
				_, err := raw.LoadContainer(nctx, id)
				return err == nil
			},
			Reopen: func(t *testing.T) runtime.Runtime {
				if err := current.Close(); err != nil {
					t.Fatal(err)
				}
				next, err := New(context.Background(), cfg)
				if err != nil {
					t.Fatal(err)
				}
				current = next
				return next
			},
			Unreachable: func(t *testing.T) runtime.Runtime {
				down, err := New(context.Background(), Config{Socket: root + "/nothing.sock", LogDir: t.TempDir(), DialTimeout: 200 * time.Millisecond})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { down.Close() })
				return down
			},
		}
		return rt, env
	})
}

// TestSupervisor: the socket answers, a killed containerd is restarted,
// and stopping containerd (the agent going away) leaves containers
// running, with their status readable from a new containerd on the same
// root.
func TestSupervisor(t *testing.T) {
	requireReal(t)
	root := privateRoot(t)
	sup := startSupervised(t, root)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg := Config{Socket: sup.Socket(), LogDir: root + "/logs", Logger: testLogger(t)}
	rt, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := rt.Version(ctx); err != nil || len(v) < len("containerd 1") {
		t.Fatalf("Version = %q, %v", v, err)
	}
	if _, err := StartSupervised(ctx, SupervisorConfig{Root: root}); !errors.Is(err, ErrSocketInUse) {
		t.Errorf("a second supervisor on the same root: %v, want ErrSocketInUse", err)
	}

	archive := runtimetest.TestImage(t)
	if _, err := rt.ImportImages(ctx, bytesReader(archive)); err != nil {
		t.Fatal(err)
	}
	spec := runtime.ContainerSpec{ID: "survivor", Image: runtimetest.TestImageRef, Args: []string{"ticks", "600", "50"},
		Labels: map[string]string{runtime.LabelPodUID: "u1"}}
	if err := rt.CreateContainer(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if err := rt.StartContainer(ctx, spec.ID); err != nil {
		t.Fatal(err)
	}
	st, err := rt.ContainerStatus(ctx, spec.ID)
	if err != nil || st.State != runtime.StateRunning {
		t.Fatalf("status %+v, %v", st, err)
	}

	// containerd killed: restarted on the same socket, and it still
	// knows the container.
	oldPid := sup.Pid()
	if err := syscall.Kill(oldPid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 20*time.Second, "containerd restarted", func() bool {
		p := sup.Pid()
		if p == 0 || p == oldPid {
			return false
		}
		_, err := rt.Version(ctx)
		return err == nil
	})
	if st2, err := rt.ContainerStatus(ctx, spec.ID); err != nil || st2.State != runtime.StateRunning || st2.Pid != st.Pid {
		t.Fatalf("after containerd was killed and restarted: %+v, %v; was pid %d", st2, err, st.Pid)
	}

	// containerd stopped (the agent going away): the container runs on
	// and its log keeps growing, written by the shim's log writer.
	rt.Close()
	if err := sup.Stop(); err != nil {
		t.Fatal(err)
	}
	if proc.Alive(oldPid) || proc.Alive(sup.Pid()) {
		t.Error("containerd still runs after Stop")
	}
	if !proc.Alive(int(st.Pid)) {
		t.Fatal("the container died with containerd")
	}
	logFile := cfg.LogDir + "/" + spec.ID + ".log"
	size := func() int64 {
		fi, err := os.Stat(logFile)
		if err != nil {
			return 0
		}
		return fi.Size()
	}
	before := size()
	waitUntil(t, 10*time.Second, "log growing while containerd is down", func() bool { return size() > before })

	sup2 := startSupervised(t, root)
	defer sup2.Stop()
	rt2, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer rt2.Close()
	st2, err := rt2.ContainerStatus(ctx, spec.ID)
	if err != nil || st2.State != runtime.StateRunning || st2.Pid != st.Pid {
		t.Fatalf("after a containerd restart: %+v, %v; was pid %d", st2, err, st.Pid)
	}
	if err := rt2.StopContainer(ctx, spec.ID, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := rt2.RemoveContainer(ctx, spec.ID); err != nil {
		t.Fatal(err)
	}
}

func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, timeout)
		}
		time.Sleep(50 * time.Millisecond) // poll interval of a wait with a deadline
	}
}

func TestConfigErrors(t *testing.T) {
	notExecutable := filepath.Join(t.TempDir(), "crun")
	if err := os.WriteFile(notExecutable, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string]Config{
		"no socket":       {LogDir: t.TempDir()},
		"no log dir":      {Socket: "/x.sock"},
		"bad namespace":   {Socket: "/x.sock", LogDir: t.TempDir(), Namespace: "no spaces"},
		"bad snapshotter": {Socket: "/x.sock", LogDir: t.TempDir(), Snapshotter: "zfs"},
		// /bin/true exits 0 but is no log writer: containers' output
		// would have nowhere to go.
		"not a log writer": {Socket: "/x.sock", LogDir: t.TempDir(), LogWriter: "/bin/true"},
		// An OCI runtime is runc, crun or an executable's absolute path.
		"relative OCI runtime":      {Socket: "/x.sock", LogDir: t.TempDir(), OCIRuntime: "bin/crun"},
		"missing OCI runtime":       {Socket: "/x.sock", LogDir: t.TempDir(), OCIRuntime: "/nonexistent/crun"},
		"OCI runtime not a program": {Socket: "/x.sock", LogDir: t.TempDir(), OCIRuntime: notExecutable},
		"OCI runtime a directory":   {Socket: "/x.sock", LogDir: t.TempDir(), OCIRuntime: "/usr/bin"},
	} {
		if _, err := New(context.Background(), cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
	if _, err := StartSupervised(context.Background(), SupervisorConfig{}); !errors.Is(err, ErrConfig) {
		t.Errorf("supervisor without root: %v, want ErrConfig", err)
	}
}

// The native snapshotter (the fallback where overlayfs is unavailable)
// runs containers too.
func TestNativeSnapshotter(t *testing.T) {
	rt, socket := realRuntime(t, Config{Snapshotter: "native"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	defer rt.RemoveContainer(context.Background(), "native")
	if info := echoed(ctx, t, rt, socket, "native", "on", "native"); info.Snapshotter != "native" {
		t.Errorf("container snapshotter %q", info.Snapshotter)
	}
}

// --oci-runtime PATH: the shim runs that binary for the container's
// whole life (create, start, state, kill, delete), here a wrapper that
// records each call and hands it to crun; "runc" and "" leave the shim
// at its default, with no options on the container.
func TestOCIRuntimePath(t *testing.T) {
	requireReal(t)
	requireCrun(t)
	crun, err := exec.LookPath("crun")
	if err != nil {
		t.Fatal(err)
	}
	root := privateRoot(t)
	calls := filepath.Join(root, "calls")
	wrapper := filepath.Join(root, "oci-wrapper")
	script := "#!/bin/sh\necho \"$*\" >> " + calls + "\nexec " + crun + " \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	sup := startSupervised(t, root)
	defer sup.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	raw, err := containerd.New(sup.Socket())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	nctx := namespaces.WithNamespace(ctx, DefaultNamespace)
	for _, oci := range []string{wrapper, "runc", ""} {
		rt, err := New(ctx, Config{Socket: sup.Socket(), LogDir: root + "/logs", Logger: testLogger(t), LogWriter: testLogWriter(t), OCIRuntime: oci})
		if err != nil {
			t.Fatal(err)
		}
		importTestImage(ctx, t, rt)
		_ = os.Remove(calls)
		spec := runtime.ContainerSpec{ID: "oci", Image: runtimetest.TestImageRef, Args: []string{"echo", "through", "the", "wrapper"},
			Labels: map[string]string{runtime.LabelPodUID: "u1"}}
		if out := runToEnd(ctx, t, rt, spec); out != "through the wrapper\n" {
			t.Errorf("%q: log %q", oci, out)
		}
		info, err := raw.ContainerService().Get(nctx, spec.ID)
		if err != nil {
			t.Fatal(err)
		}
		if err := rt.RemoveContainer(ctx, spec.ID); err != nil {
			t.Fatal(err)
		}
		rt.Close()
		b, _ := os.ReadFile(calls)
		if oci != wrapper {
			// A nil *anypb.Any inside the interface: its getter is nil-safe.
			if len(b) > 0 || (info.Runtime.Options != nil && len(info.Runtime.Options.GetValue()) > 0) {
				t.Errorf("%q: the wrapper ran (%q) or the container has runtime options (%v); want the shim's runc", oci, b, info.Runtime.Options)
			}
			continue
		}
		verbs := strings.Fields(string(b))
		for _, want := range []string{"create", "start", "delete"} {
			if !slices.Contains(verbs, want) {
				t.Errorf("the OCI runtime was not asked to %s; calls:\n%s", want, b)
			}
		}
	}
}

// OCIRuntimeAuto (the agent's default) is crun where crun is installed
// and the cgroup layout suits it; runc where either is missing, and why.
func TestPickOCIRuntime(t *testing.T) {
	found := func(string) (string, error) { return "/usr/bin/crun", nil }
	missing := func(string) (string, error) { return "", exec.ErrNotFound }
	// layout is a v1 tree, hybrid when it has a cgroup2 mount at unified/
	// whose cgroup.controllers holds ctrls.
	layout := func(hybrid bool, ctrls string) cgroups.FS {
		root := t.TempDir()
		if hybrid {
			if err := os.MkdirAll(filepath.Join(root, "unified"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, "unified", "cgroup.controllers"), []byte(ctrls), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return cgroups.FS{Root: root}
	}
	for _, tc := range []struct {
		name     string
		lookPath func(string) (string, error)
		fs       cgroups.FS
		want     string
		why      string
	}{
		{"v1 with crun", found, layout(false, ""), "crun", "installed"},
		{"hybrid, every controller in v1", found, layout(true, ""), "crun", "installed"},
		{"no crun", missing, layout(false, ""), "runc", "not installed"},
		{"hybrid with hugetlb in cgroup2", found, layout(true, "hugetlb\n"), "runc", "controllers hugetlb"},
		{"unreadable layout", found, cgroups.FS{Root: "/dev/null"}, "runc", "unknown"},
	} {
		name, why := pickOCIRuntime(tc.lookPath, tc.fs)
		if name != tc.want || !strings.Contains(why, tc.why) {
			t.Errorf("%s: %s (%s), want %s (%s)", tc.name, name, why, tc.want, tc.why)
		}
	}
}

// On this host (Makefile host-deps installs crun and moves every
// controller into a v1 hierarchy) "auto" runs new containers with crun,
// and the runtime version says so.
func TestOCIRuntimeAutoRunsCrun(t *testing.T) {
	requireReal(t)
	requireCrun(t)
	if ctrls, err := (cgroups.FS{}).HybridControllers(); err != nil || len(ctrls) > 0 {
		t.Fatalf("cgroup2 holds controllers %q (%v): run make host-deps", ctrls, err)
	}
	crun, err := exec.LookPath("crun")
	if err != nil {
		t.Fatal(err)
	}
	rt, socket := realRuntime(t, Config{OCIRuntime: OCIRuntimeAuto})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if v, err := rt.Version(ctx); err != nil || !strings.HasSuffix(v, " (crun)") {
		t.Errorf("Version = %q, %v; want it to end in (crun)", v, err)
	}
	defer rt.RemoveContainer(context.Background(), "auto")
	info := echoed(ctx, t, rt, socket, "auto", "auto")
	if info.Runtime.Options == nil || !strings.Contains(string(info.Runtime.Options.GetValue()), crun) {
		t.Errorf("container runtime options %v: want the shim told to run %s", info.Runtime.Options, crun)
	}
}

// Reading containers' states costs a fixed number of round trips to
// containerd, however many containers there are: the agent lists them
// per pod it stops, so a per-container cost made stopping n pods n².
// A start reads the container once.
func TestStatusRoundTrips(t *testing.T) {
	var calls atomic.Int64
	rt, _ := realRuntime(t, Config{
		clientOpts: []containerd.ClientOpt{containerd.WithCallOpts([]grpc.CallOption{grpc.OnFinish(func(error) { calls.Add(1) })})}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	importTestImage(ctx, t, rt)
	specs := map[string][]string{"s1": {"sleep"}, "s2": {"sleep"}, "s3": {"sleep"}, "s4": {"sleep"}, "exited": {"exit", "3"}, "created": {"sleep"}}
	for id, args := range specs {
		spec := runtime.ContainerSpec{ID: id, Image: runtimetest.TestImageRef, Args: args, Labels: map[string]string{runtime.LabelPodUID: "u-" + id}}
		defer rt.RemoveContainer(context.Background(), id)
		if err := rt.CreateContainer(ctx, spec); err != nil {
			t.Fatal(err)
		}
		if id == "created" {
			continue
		}
		if err := rt.StartContainer(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, 20*time.Second, "the exited container to be reported so", func() bool {
		st, err := rt.ContainerStatus(ctx, "exited")
		return err == nil && st.State == runtime.StateExited
	})

	calls.Store(0)
	all, err := rt.ListContainers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("ListContainers of %d containers: %d round trips, want 2 (containers, tasks)", len(all), n)
	}
	want := map[string]runtime.State{"s1": runtime.StateRunning, "s2": runtime.StateRunning, "s3": runtime.StateRunning,
		"s4": runtime.StateRunning, "exited": runtime.StateExited, "created": runtime.StateCreated}
	for _, st := range all {
		if st.State != want[st.ID] || (st.State == runtime.StateRunning) != (st.Pid > 0) {
			t.Errorf("%s: state %s pid %d, want %s", st.ID, st.State, st.Pid, want[st.ID])
		}
		if st.ID == "exited" && st.ExitCode != 3 {
			t.Errorf("exited: code %d, want 3", st.ExitCode)
		}
		delete(want, st.ID)
	}
	if len(want) > 0 {
		t.Errorf("not listed: %v", want)
	}

	calls.Store(0)
	if st, err := rt.ContainerStatus(ctx, "s1"); err != nil || st.State != runtime.StateRunning || st.Pid == 0 {
		t.Errorf("s1: %+v, %v", st, err)
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("ContainerStatus: %d round trips, want 2 (container, task)", n)
	}

	calls.Store(0)
	if err := rt.StartContainer(ctx, "created"); err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 4 {
		t.Errorf("StartContainer: %d round trips, want 4 (container, task, start, start time)", n)
	}
}

// A started container whose task is gone with no exit recorded (its shim
// was killed; a host restart does the same to every container) reads
// Exited with containerd CRI's unknown exit, 255 "Unknown", once and for
// all, so the agent starts the pod's next attempt; it read Created, which
// StartContainer refuses, and the agent asked again without pause. One
// that never started still reads Created (StartContainer makes its task
// again).
func TestLostTaskAfterStartIsExited(t *testing.T) {
	rt, _ := realRuntime(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	importTestImage(ctx, t, rt)
	for _, id := range []string{"started", "unstarted"} {
		spec := runtime.ContainerSpec{ID: id, Image: runtimetest.TestImageRef, Args: []string{"sleep"}, Labels: map[string]string{runtime.LabelPodUID: "u1"}}
		defer rt.RemoveContainer(context.Background(), id)
		if err := rt.CreateContainer(ctx, spec); err != nil {
			t.Fatal(err)
		}
	}
	if err := rt.StartContainer(ctx, "started"); err != nil {
		t.Fatal(err)
	}
	// Each container's shim is its process's parent (created or not).
	pids := map[string]int{}
	raw, err := containerd.New(rt.cfg.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	for _, id := range []string{"started", "unstarted"} {
		task, err := raw.TaskService().Get(namespaces.WithNamespace(ctx, DefaultNamespace), &tasks.GetRequest{ContainerID: id})
		if err != nil {
			t.Fatal(err)
		}
		pids[id] = int(task.Process.Pid)
		p, err := proc.ReadProcess(pids[id])
		if err != nil {
			t.Fatal(err)
		}
		shim := p.PPID
		if err := syscall.Kill(shim, syscall.SIGKILL); err != nil {
			t.Fatalf("kill %s's shim %d: %v", id, shim, err)
		}
	}
	// containerd cleans up after a dead shim on its own time (runc
	// delete --force, then the bundle goes); a host restart leaves
	// nothing to clean.
	bundles := filepath.Join(filepath.Dir(rt.cfg.LogDir), "state", "io.containerd.runtime.v2.task", DefaultNamespace)
	waitUntil(t, 20*time.Second, "containerd to clean up after the killed shims", func() bool {
		_, err1 := os.Stat(filepath.Join(bundles, "started"))
		_, err2 := os.Stat(filepath.Join(bundles, "unstarted"))
		return errors.Is(err1, os.ErrNotExist) && errors.Is(err2, os.ErrNotExist)
	})
	for id, pid := range pids {
		if proc.Alive(pid) {
			t.Errorf("%s's process %d outlived its shim", id, pid)
		}
	}
	var lost runtime.ContainerStatus
	waitUntil(t, 10*time.Second, "the started container whose shim was killed to read Exited", func() bool {
		lost, err = rt.ContainerStatus(ctx, "started")
		return err == nil && lost.State == runtime.StateExited
	})
	if lost.ExitCode != 255 || lost.Reason != "Unknown" || lost.FinishedAt.IsZero() || lost.Pid != 0 {
		t.Errorf("lost: %+v, want exit 255 reason Unknown with a finish time", lost)
	}
	// Recorded, not guessed at each look: the agent reports the same.
	cs, err := rt.PodContainers(ctx, "u1")
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range cs {
		switch {
		case st.ID == "started" && (st.State != runtime.StateExited || !st.FinishedAt.Equal(lost.FinishedAt)):
			t.Errorf("started, listed: %s finished %v, want Exited finished %v", st.State, st.FinishedAt, lost.FinishedAt)
		case st.ID == "unstarted" && st.State != runtime.StateCreated:
			t.Errorf("unstarted, listed: %s, want Created", st.State)
		}
	}
	if err := rt.StartContainer(ctx, "started"); !errors.Is(err, runtime.ErrStart) {
		t.Errorf("start the lost container: %v, want ErrStart", err)
	}
}

// A create reads the image's small blobs (manifest, config) from
// containerd once: later creates from the same image take them from
// memory, and the blobs stay what their digests say.
func TestCreateReadsImageBlobsOnce(t *testing.T) {
	var mu sync.Mutex
	reads := 0
	count := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if strings.HasPrefix(method, "/containerd.services.content.v1.Content/") {
			mu.Lock()
			reads++
			mu.Unlock()
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	rt, _ := realRuntime(t, Config{clientOpts: []containerd.ClientOpt{containerd.WithDialOpts([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithContextDialer(dialer.ContextDialer),
		grpc.WithChainUnaryInterceptor(count)})}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	importTestImage(ctx, t, rt)
	for i, id := range []string{"first", "second", "third"} {
		defer rt.RemoveContainer(context.Background(), id)
		mu.Lock()
		reads = 0
		mu.Unlock()
		spec := runtime.ContainerSpec{ID: id, Image: runtimetest.TestImageRef, Args: []string{"echo", id}, Labels: map[string]string{runtime.LabelPodUID: "u-" + id}}
		if out := runToEnd(ctx, t, rt, spec); out != id+"\n" {
			t.Errorf("%s: log %q", id, out)
		}
		mu.Lock()
		n := reads
		mu.Unlock()
		if i > 0 && n != 0 {
			t.Errorf("create %d from the same image: %d content round trips, want 0", i+1, n)
		}
	}
}

// realRuntime starts a private containerd for the test and a Runtime on
// it with cfg, whose Socket, LogDir, Logger and LogWriter it fills in.
// Both stop when the test ends, after its deferred calls (which may
// remove containers). It returns containerd's socket too.
func realRuntime(t *testing.T, cfg Config) (*Runtime, string) {
	t.Helper()
	requireReal(t)
	root := privateRoot(t)
	sup := startSupervised(t, root)
	t.Cleanup(func() { sup.Stop() })
	cfg.Socket, cfg.LogDir, cfg.Logger, cfg.LogWriter = sup.Socket(), root+"/logs", testLogger(t), testLogWriter(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rt, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt, sup.Socket()
}

// importTestImage imports runtimetest's image into rt.
func importTestImage(ctx context.Context, t *testing.T, rt *Runtime) {
	t.Helper()
	if _, err := rt.ImportImages(ctx, bytesReader(runtimetest.TestImage(t))); err != nil {
		t.Fatal(err)
	}
}

// echoed imports the test image, runs echo with args in container id to
// its end, checks its log, and returns containerd's own record of the
// container. The caller removes the container (before containerd stops).
func echoed(ctx context.Context, t *testing.T, rt *Runtime, socket, id string, args ...string) containers.Container {
	t.Helper()
	importTestImage(ctx, t, rt)
	spec := runtime.ContainerSpec{ID: id, Image: runtimetest.TestImageRef, Args: append([]string{"echo"}, args...),
		Labels: map[string]string{runtime.LabelPodUID: "u1"}}
	if out, want := runToEnd(ctx, t, rt, spec), strings.Join(args, " ")+"\n"; out != want {
		t.Errorf("log %q, want %q", out, want)
	}
	raw, err := containerd.New(socket)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	info, err := raw.ContainerService().Get(namespaces.WithNamespace(ctx, DefaultNamespace), id)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// runToEnd creates and starts spec and returns its output once it ends.
// The caller removes the container (before containerd stops).
func runToEnd(ctx context.Context, t *testing.T, rt *Runtime, spec runtime.ContainerSpec) string {
	t.Helper()
	if err := rt.CreateContainer(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if err := rt.StartContainer(ctx, spec.ID); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := rt.Logs(ctx, spec.ID, runtime.LogOptions{Follow: true}, &out); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// TestSupervisorOutlivesEndedThreads: a goroutine that ends locked to its
// OS thread ends that thread (the agent's network namespace code does so
// once per pod network), and the kernel's parent-death signal of
// containerd follows the thread that forked it. Started from a goroutine
// that then ends locked, containerd must live on: forked from the
// caller's thread, it was SIGKILLed, in the middle of make run's test.
func TestSupervisorOutlivesEndedThreads(t *testing.T) {
	requireReal(t)
	root := privateRoot(t)
	var sup *Supervisor
	var tid int
	var err error
	for sup == nil && err == nil {
		done := make(chan struct{})
		go func() {
			defer close(done)
			goruntime.LockOSThread() // never unlocked: the thread ends with the goroutine
			if syscall.Gettid() == syscall.Getpid() {
				// The main thread never ends; Go parks it instead.
				goruntime.UnlockOSThread()
				return
			}
			tid = syscall.Gettid()
			sup, err = StartSupervised(context.Background(), SupervisorConfig{Root: root, Logger: testLogger(t)})
		}()
		<-done
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sup.Stop() })
	pid := sup.Pid()
	// The thread is gone once its task is: the signal, if any, was sent.
	task := fmt.Sprintf("/proc/self/task/%d", tid)
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := os.Stat(task); errors.Is(err, os.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("thread %d did not end", tid)
		}
		time.Sleep(10 * time.Millisecond) // polling for the thread's end, bounded by the deadline
	}
	// A killed containerd is a zombie, then reaped, within milliseconds;
	// a second of life says it was not signalled.
	until := time.Now().Add(time.Second)
	for time.Now().Before(until) {
		if !proc.Alive(pid) || sup.Pid() != pid {
			t.Fatalf("containerd %d died when the thread that started the supervisor ended", pid)
		}
		time.Sleep(20 * time.Millisecond) // watching that it stays alive, bounded
	}
}

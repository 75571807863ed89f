package runtimetest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/runtime"
)

// Env is what the suite needs from the implementation under test beyond
// the Runtime itself.
type Env struct {
	// Name appears in messages ("fake", "containerd").
	Name string
	// CreateForeign creates a container named id in the runtime's
	// namespace without outpost's labels, the way another tool would.
	CreateForeign func(t *testing.T, id string)
	// ForeignExists reports whether that container still exists.
	ForeignExists func(t *testing.T, id string) bool
	// Reopen closes the Runtime the suite was given and returns a new
	// client of the same backend (the agent restarting).
	Reopen func(t *testing.T) runtime.Runtime
	// Unreachable returns a Runtime whose backend does not answer.
	Unreachable func(t *testing.T) runtime.Runtime
	// ClosedRegistry is a registry host:port on 127.0.0.1 where nothing
	// listens, for pulls that must fail.
	ClosedRegistry string
	// PullsOverHTTP says the runtime really pulls from a registry; the
	// suite then pulls from a registry it serves on 127.0.0.1 with basic
	// auth. A runtime without network pulls (the fake) leaves it false
	// and tests its simulated registry on its own.
	PullsOverHTTP bool
	// Timeout bounds each wait of the suite (default 20 s).
	Timeout time.Duration
}

// Run runs the contract suite against the Runtime newRuntime returns. The
// runtime must start with no containers of outpost's; the suite imports
// its test image itself.
func Run(t *testing.T, newRuntime func(t *testing.T) (runtime.Runtime, Env)) {
	rt, env := newRuntime(t)
	if env.Timeout == 0 {
		env.Timeout = 20 * time.Second
	}
	s := &suite{rt: rt, env: env}
	t.Run("Version", s.version)
	t.Run("ImportAndPullPolicies", s.importImage)
	t.Run("CreateStartStop", s.createStartStop)
	t.Run("ExitCodes", s.exitCodes)
	t.Run("RestartIsANewAttempt", s.restart)
	t.Run("StopGrace", s.stopGrace)
	t.Run("Limits", s.limits)
	t.Run("LimitTheHostCannotHonour", s.badLimits)
	t.Run("OOMKilled", s.oom)
	t.Run("Usage", s.usage)
	t.Run("HostPort", s.hostPort)
	t.Run("EnvArgsWorkingDir", s.envArgs)
	t.Run("HostPathMount", s.mount)
	t.Run("Logs", s.logs)
	t.Run("LogsFollow", s.logsFollow)
	t.Run("Exec", s.exec)
	t.Run("ImageNotFound", s.imageNotFound)
	if env.PullsOverHTTP {
		t.Run("PullWithCredentials", s.pullWithCredentials)
	}
	t.Run("CommandNotFound", s.commandNotFound)
	t.Run("ForeignContainersLeftAlone", s.foreign)
	t.Run("ConcurrentStatus", s.concurrentStatus)
	t.Run("Remove", s.remove)
	t.Run("Unavailable", s.unavailable)
	// Last: it replaces the suite's client.
	t.Run("SurvivesClientRestart", s.reopen)
}

type suite struct {
	mu       sync.Mutex
	rt       runtime.Runtime
	env      Env
	imported bool
	digest   string
}

func (s *suite) ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), s.env.Timeout)
	t.Cleanup(cancel)
	return ctx
}

// ensureImage imports the test image once.
func (s *suite) ensureImage(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.imported {
		return
	}
	imgs, err := s.rt.ImportImages(s.ctx(t), bytes.NewReader(TestImage(t)))
	if err != nil {
		t.Fatalf("ImportImages: %v", err)
	}
	for _, img := range imgs {
		if slices.Contains(img.Names, TestImageRef) {
			s.digest = img.Digest
		}
	}
	if s.digest == "" {
		t.Fatalf("ImportImages returned %+v, without %s", imgs, TestImageRef)
	}
	s.imported = true
}

var idSeq struct {
	sync.Mutex
	n int
}

// newID returns a container ID unique in the run.
func newID(t *testing.T) string {
	idSeq.Lock()
	defer idSeq.Unlock()
	idSeq.n++
	name := strings.ToLower(strings.NewReplacer("/", "-", " ", "-", "_", "-").Replace(t.Name()))
	if len(name) > 40 {
		name = name[len(name)-40:]
	}
	return fmt.Sprintf("rtt-%d-%s", idSeq.n, strings.Trim(name, "-"))
}

// spec is a container of the test image running testbin with args.
func (s *suite) spec(t *testing.T, args ...string) runtime.ContainerSpec {
	id := newID(t)
	return runtime.ContainerSpec{
		ID:    id,
		Image: TestImageRef,
		Args:  args,
		Labels: map[string]string{
			runtime.LabelPodUID:       "uid-" + id,
			runtime.LabelPodNamespace: "default",
			runtime.LabelPodName:      "pod-" + id,
			runtime.LabelContainer:    "main",
			runtime.LabelAttempt:      "0",
		},
	}
}

// create creates spec and removes the container when the test ends.
func (s *suite) create(t *testing.T, spec runtime.ContainerSpec) error {
	t.Helper()
	s.ensureImage(t)
	err := s.rt.CreateContainer(s.ctx(t), spec)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.env.Timeout)
		defer cancel()
		s.mu.Lock()
		rt := s.rt
		s.mu.Unlock()
		if err := rt.StopContainer(ctx, spec.ID, 0); err != nil && !errors.Is(err, runtime.ErrNotFound) {
			t.Errorf("cleanup: stop %s: %v", spec.ID, err)
		}
		if err := rt.RemoveContainer(ctx, spec.ID); err != nil {
			t.Errorf("cleanup: remove %s: %v", spec.ID, err)
		}
	})
	return err
}

// start creates and starts spec, failing the test on any error.
func (s *suite) start(t *testing.T, spec runtime.ContainerSpec) {
	t.Helper()
	if err := s.create(t, spec); err != nil {
		t.Fatalf("CreateContainer %s: %v", spec.ID, err)
	}
	if err := s.rt.StartContainer(s.ctx(t), spec.ID); err != nil {
		t.Fatalf("StartContainer %s: %v", spec.ID, err)
	}
}

// waitFor polls the container's status until cond holds or the suite's
// timeout passes.
func (s *suite) waitFor(t *testing.T, id, what string, cond func(runtime.ContainerStatus) bool) runtime.ContainerStatus {
	t.Helper()
	deadline := time.Now().Add(s.env.Timeout)
	var last runtime.ContainerStatus
	var lastErr error
	for time.Now().Before(deadline) {
		last, lastErr = s.rt.ContainerStatus(s.ctx(t), id)
		if lastErr == nil && cond(last) {
			return last
		}
		time.Sleep(20 * time.Millisecond) // poll interval of a wait with a deadline
	}
	t.Fatalf("container %s: not %s within %v; last status %+v, err %v", id, what, s.env.Timeout, last, lastErr)
	return last
}

func (s *suite) waitExited(t *testing.T, id string) runtime.ContainerStatus {
	t.Helper()
	return s.waitFor(t, id, "exited", func(st runtime.ContainerStatus) bool { return st.State == runtime.StateExited })
}

func (s *suite) waitRunning(t *testing.T, id string) runtime.ContainerStatus {
	t.Helper()
	return s.waitFor(t, id, "running", func(st runtime.ContainerStatus) bool { return st.State == runtime.StateRunning })
}

// waitLog waits until the container's log contains text.
func (s *suite) waitLog(t *testing.T, id, text string) {
	t.Helper()
	deadline := time.Now().Add(s.env.Timeout)
	var got string
	for time.Now().Before(deadline) {
		got = s.logsOf(t, id, runtime.LogOptions{})
		if strings.Contains(got, text) {
			return
		}
		time.Sleep(20 * time.Millisecond) // poll interval of a wait with a deadline
	}
	t.Fatalf("container %s: log never showed %q; log:\n%s", id, text, got)
}

func (s *suite) logsOf(t *testing.T, id string, opts runtime.LogOptions) string {
	t.Helper()
	var buf bytes.Buffer
	if err := s.rt.Logs(s.ctx(t), id, opts, &buf); err != nil {
		t.Fatalf("Logs %s: %v", id, err)
	}
	return buf.String()
}

func (s *suite) version(t *testing.T) {
	v, err := s.rt.Version(s.ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(v) == "" || !strings.Contains(v, " ") {
		t.Errorf("Version = %q, want \"NAME VERSION\"", v)
	}
}

func (s *suite) importImage(t *testing.T) {
	s.ensureImage(t)
	ctx := s.ctx(t)
	imgs, err := s.rt.ListImages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, img := range imgs {
		if slices.Contains(img.Names, TestImageRef) {
			found = true
			if img.Digest != s.digest {
				t.Errorf("ListImages digest %s, import said %s", img.Digest, s.digest)
			}
		}
	}
	if !found {
		t.Errorf("ListImages = %+v, without %s", imgs, TestImageRef)
	}
	for _, p := range []runtime.PullPolicy{runtime.PullNever, runtime.PullIfNotPresent, ""} {
		img, err := s.rt.EnsureImage(ctx, TestImageRef, p, nil)
		if err != nil {
			t.Errorf("EnsureImage(%q) of a present image: %v", p, err)
			continue
		}
		if img.Digest != s.digest {
			t.Errorf("EnsureImage(%q) digest %s, want %s", p, img.Digest, s.digest)
		}
	}
	// Importing the same archive again is harmless and gives the same.
	again, err := s.rt.ImportImages(ctx, bytes.NewReader(TestImage(t)))
	if err != nil || len(again) != 1 || again[0].Digest != s.digest {
		t.Errorf("second import = %+v, %v", again, err)
	}
}

func (s *suite) createStartStop(t *testing.T) {
	spec := s.spec(t, "sleep")
	spec.Labels["extra"] = "kept"
	if err := s.create(t, spec); err != nil {
		t.Fatal(err)
	}
	ctx := s.ctx(t)
	st, err := s.rt.ContainerStatus(ctx, spec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != runtime.StateCreated || st.Pid != 0 {
		t.Errorf("after create: state %s pid %d, want Created", st.State, st.Pid)
	}
	if st.ImageDigest != s.digest || st.Labels["extra"] != "kept" || st.Labels[runtime.LabelPodUID] != spec.Labels[runtime.LabelPodUID] {
		t.Errorf("after create: digest %s labels %v", st.ImageDigest, st.Labels)
	}
	if st.CreatedAt.IsZero() {
		t.Error("CreatedAt is zero")
	}
	before := time.Now()
	if err := s.rt.StartContainer(ctx, spec.ID); err != nil {
		t.Fatal(err)
	}
	st = s.waitRunning(t, spec.ID)
	if st.Pid == 0 || st.StartedAt.IsZero() {
		t.Errorf("running: pid %d startedAt %v", st.Pid, st.StartedAt)
	}
	if st.StartedAt.Before(before.Add(-time.Second)) {
		t.Errorf("StartedAt %v is before the start call %v", st.StartedAt, before)
	}
	list, err := s.rt.ListContainers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(list, func(c runtime.ContainerStatus) bool { return c.ID == spec.ID && c.State == runtime.StateRunning }) {
		t.Errorf("ListContainers = %+v, without running %s", list, spec.ID)
	}
	s.waitLog(t, spec.ID, "sleeping")
	// sleep exits on SIGTERM: a long grace must not be waited out.
	t0 := time.Now()
	if err := s.rt.StopContainer(ctx, spec.ID, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(t0); d > 10*time.Second {
		t.Errorf("stop of a process that exits on SIGTERM took %v", d)
	}
	st, err = s.rt.ContainerStatus(ctx, spec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != runtime.StateExited || st.ExitCode != 0 || st.Reason != "Completed" {
		t.Errorf("after stop: %+v, want Exited 0 Completed", st)
	}
	if !strings.Contains(s.logsOf(t, spec.ID, runtime.LogOptions{}), "got SIGTERM") {
		t.Error("the process did not log that it got SIGTERM")
	}
}

func (s *suite) exitCodes(t *testing.T) {
	for _, tc := range []struct {
		code   int32
		reason string
	}{{0, "Completed"}, {3, "Error"}, {127, "Error"}} {
		spec := s.spec(t, "exit", strconv.Itoa(int(tc.code)))
		s.start(t, spec)
		st := s.waitExited(t, spec.ID)
		if st.ExitCode != tc.code || st.Reason != tc.reason {
			t.Errorf("exit %d: status code %d reason %q, want %d %q", tc.code, st.ExitCode, st.Reason, tc.code, tc.reason)
		}
		if st.FinishedAt.IsZero() || st.FinishedAt.Before(st.StartedAt) || st.Pid != 0 {
			t.Errorf("exit %d: startedAt %v finishedAt %v pid %d", tc.code, st.StartedAt, st.FinishedAt, st.Pid)
		}
		if err := s.rt.StartContainer(s.ctx(t), spec.ID); !errors.Is(err, runtime.ErrStart) {
			t.Errorf("starting an exited container again: %v, want ErrStart", err)
		}
	}
}

func (s *suite) restart(t *testing.T) {
	first := s.spec(t, "exit", "1")
	s.start(t, first)
	if st := s.waitExited(t, first.ID); st.ExitCode != 1 {
		t.Fatalf("attempt 0 exited %d", st.ExitCode)
	}
	second := s.spec(t, "echo", "attempt", "1")
	second.Labels = first.Labels
	second.Labels[runtime.LabelAttempt] = "1"
	s.start(t, second)
	if st := s.waitExited(t, second.ID); st.ExitCode != 0 {
		t.Fatalf("attempt 1 exited %d", st.ExitCode)
	}
	list, err := s.rt.ListContainers(s.ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	attempts := map[string]runtime.ContainerStatus{}
	for _, c := range list {
		if c.Labels[runtime.LabelPodUID] == first.Labels[runtime.LabelPodUID] {
			attempts[c.Labels[runtime.LabelAttempt]] = c
		}
	}
	if attempts["0"].ExitCode != 1 || attempts["1"].ID != second.ID || attempts["1"].ExitCode != 0 {
		t.Errorf("attempts of the pod: %+v", attempts)
	}
	// PodContainers: the pod's containers, none of another pod's.
	other := s.spec(t, "echo", "other pod")
	s.start(t, other)
	s.waitExited(t, other.ID)
	for uid, want := range map[string][]string{first.Labels[runtime.LabelPodUID]: {first.ID, second.ID}, other.Labels[runtime.LabelPodUID]: {other.ID}} {
		got, err := s.rt.PodContainers(s.ctx(t), uid)
		var ids []string
		for _, c := range got {
			ids = append(ids, c.ID)
		}
		slices.Sort(ids)
		slices.Sort(want)
		if err != nil || !slices.Equal(ids, want) {
			t.Errorf("PodContainers(%s) = %v, %v; want %v", uid, ids, err, want)
		}
	}
	if _, err := s.rt.PodContainers(s.ctx(t), ""); err == nil {
		t.Error("PodContainers of no UID: no error")
	}
	if got := s.logsOf(t, second.ID, runtime.LogOptions{}); got != "attempt 1\n" {
		t.Errorf("attempt 1 log = %q", got)
	}
	if got := s.logsOf(t, first.ID, runtime.LogOptions{}); got != "exiting 1\n" {
		t.Errorf("attempt 0 log = %q", got)
	}
}

func (s *suite) stopGrace(t *testing.T) {
	spec := s.spec(t, "ignore-term")
	s.start(t, spec)
	s.waitLog(t, spec.ID, "ignoring SIGTERM")
	const grace = 1500 * time.Millisecond
	t0 := time.Now()
	if err := s.rt.StopContainer(s.ctx(t), spec.ID, grace); err != nil {
		t.Fatal(err)
	}
	d := time.Since(t0)
	if d < grace {
		t.Errorf("a process that ignores SIGTERM was stopped after %v, before the grace of %v", d, grace)
	}
	if d > grace+8*time.Second {
		t.Errorf("stop took %v, far beyond the grace of %v", d, grace)
	}
	st, err := s.rt.ContainerStatus(s.ctx(t), spec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != runtime.StateExited || st.ExitCode != 137 || st.Reason != "Error" {
		t.Errorf("after SIGKILL: %+v, want Exited 137 Error", st)
	}
	if err := s.rt.StopContainer(s.ctx(t), spec.ID, grace); err != nil {
		t.Errorf("stopping a stopped container: %v", err)
	}
}

// parseKV reads "k=v k=v" output.
func parseKV(line string) map[string]string {
	m := map[string]string{}
	for _, f := range strings.Fields(line) {
		if k, v, ok := strings.Cut(f, "="); ok {
			m[k] = v
		}
	}
	return m
}

func (s *suite) limits(t *testing.T) {
	spec := s.spec(t, "limits")
	spec.Resources = runtime.Resources{CPUMillis: 250, CPURequestMillis: 500, MemoryBytes: 64 << 20, PIDs: 64}
	s.start(t, spec)
	s.waitExited(t, spec.ID)
	out := strings.TrimSpace(s.logsOf(t, spec.ID, runtime.LogOptions{}))
	kv := parseKV(out)
	want := map[string]string{"memory": strconv.Itoa(64 << 20), "cpu_quota": "25000", "cpu_period": "100000", "pids": "64"}
	switch kv["cgroup"] {
	case "v2":
		// runc maps shares to weight: 1 + (shares-2)*9999/262142.
		want["cpu_weight"] = strconv.Itoa(1 + (512-2)*9999/262142)
	default:
		want["cpu_shares"] = "512"
	}
	for k, v := range want {
		if kv[k] != v {
			t.Errorf("%s = %q, want %q (output %q)", k, kv[k], v, out)
		}
	}
	// No limits: nothing set.
	free := s.spec(t, "limits")
	s.start(t, free)
	s.waitExited(t, free.ID)
	kv = parseKV(s.logsOf(t, free.ID, runtime.LogOptions{}))
	if kv["memory"] != "max" || kv["cpu_quota"] != "max" {
		t.Errorf("unlimited container reads memory=%s cpu_quota=%s, want max", kv["memory"], kv["cpu_quota"])
	}
}

func (s *suite) badLimits(t *testing.T) {
	neg := s.spec(t, "sleep")
	neg.Resources.MemoryBytes = -1
	if err := s.create(t, neg); !errors.Is(err, runtime.ErrCreate) || !strings.Contains(err.Error(), "memoryBytes") {
		t.Errorf("negative memory: %v, want ErrCreate naming memoryBytes", err)
	}
	// A memory limit below what the container's init already uses.
	small := s.spec(t, "echo", "fits")
	small.Resources.MemoryBytes = 4096
	err := s.create(t, small)
	if err == nil {
		err = s.rt.StartContainer(s.ctx(t), small.ID)
	}
	if !errors.Is(err, runtime.ErrCreate) || !strings.Contains(err.Error(), "memory limit") {
		t.Errorf("memory limit 4096: %v, want ErrCreate saying why", err)
	}
	// A CFS quota under 1 ms is refused by the kernel.
	tiny := s.spec(t, "sleep")
	tiny.Resources.CPUMillis = 1
	err = s.create(t, tiny)
	if err == nil {
		err = s.rt.StartContainer(s.ctx(t), tiny.ID)
	}
	if !errors.Is(err, runtime.ErrCreate) && !errors.Is(err, runtime.ErrStart) {
		t.Errorf("cpu limit 1m: %v, want ErrCreate or ErrStart", err)
	}
	if err != nil && !strings.Contains(err.Error(), "cpu") {
		t.Errorf("cpu limit 1m: error %q does not say it is about the cpu", err)
	}
}

func (s *suite) oom(t *testing.T) {
	spec := s.spec(t, "oom")
	spec.Resources.MemoryBytes = 32 << 20
	s.start(t, spec)
	st := s.waitExited(t, spec.ID)
	if st.Reason != "OOMKilled" || st.ExitCode != 137 {
		t.Errorf("over its memory limit: %+v, want OOMKilled 137", st)
	}
}

// usage: a container holding 64 MiB reports a working set of at least
// that (and not much more: the test binary's own heap and stack) and the
// CPU time it took to touch it, read at a time; a stopped one the zero
// Usage; an unknown ID is ErrNotFound. The agent ranks pods by the
// working set under memory pressure (issue 10 item 8) and serves both
// to `outpost top` (issue 15 item 4).
func (s *suite) usage(t *testing.T) {
	spec := s.spec(t, "hold", "64")
	s.start(t, spec)
	s.waitLog(t, spec.ID, "holding")
	ctx := s.ctx(t)
	before := time.Now()
	got, err := s.rt.ContainerUsage(ctx, spec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if m := got.MemoryWorkingSetBytes; m < 64<<20 || m > 96<<20 {
		t.Errorf("working set of a container holding 64 MiB: %d MiB, want 64 to 96", m>>20)
	}
	if got.CPUNanos == 0 {
		t.Errorf("CPU time of a container that touched 64 MiB: 0, want more")
	}
	if got.Time.Before(before) || got.Time.After(time.Now()) {
		t.Errorf("reading's time %v is not when it was read (after %v)", got.Time, before)
	}
	again, err := s.rt.ContainerUsage(ctx, spec.ID)
	if err != nil || again.CPUNanos < got.CPUNanos {
		t.Errorf("second reading %+v, %v: CPU time went back from %d", again, err, got.CPUNanos)
	}
	if err := s.rt.StopContainer(ctx, spec.ID, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if got, err := s.rt.ContainerUsage(ctx, spec.ID); err != nil || got != (runtime.Usage{}) {
		t.Errorf("usage of a stopped container: %+v, %v; want the zero Usage", got, err)
	}
	if _, err := s.rt.ContainerUsage(ctx, "no-such-container"); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("unknown container: %v, want ErrNotFound", err)
	}
}

func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func (s *suite) hostPort(t *testing.T) {
	port := freePort(t)
	spec := s.spec(t, "listen", strconv.Itoa(port))
	s.start(t, spec)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	deadline := time.Now().Add(s.env.Timeout)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.SetDeadline(time.Now().Add(5 * time.Second))
			line, rerr := bufio.NewReader(c).ReadString('\n')
			c.Close()
			if line != "hello from testbin\n" {
				t.Fatalf("read %q, %v from the container's port", line, rerr)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing answered on %s: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond) // poll interval of a wait with a deadline
	}
	if err := s.rt.StopContainer(s.ctx(t), spec.ID, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Error("the port still answers after the container stopped")
	}
}

func (s *suite) envArgs(t *testing.T) {
	spec := s.spec(t)
	spec.Command = []string{TestBinPath, "env"}
	spec.Args = []string{"a", "b c"}
	spec.Env = []string{"FOO=bar", "EMPTY="}
	spec.WorkingDir = "/testdir"
	s.start(t, spec)
	s.waitExited(t, spec.ID)
	out := s.logsOf(t, spec.ID, runtime.LogOptions{})
	for _, want := range []string{"ARGS=a,b c\n", "CWD=/testdir\n", "ENV FOO=bar\n", "ENV EMPTY=\n", "ENV " + ImageEnv + "\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// Args alone keep the image's entrypoint and replace its cmd.
	argsOnly := s.spec(t, "env", "x")
	s.start(t, argsOnly)
	s.waitExited(t, argsOnly.ID)
	if out := s.logsOf(t, argsOnly.ID, runtime.LogOptions{}); !strings.Contains(out, "ARGS=x\n") {
		t.Errorf("args only: output %q lacks ARGS=x", out)
	}
	// Neither: the image's entrypoint and cmd (sleep).
	def := s.spec(t)
	s.start(t, def)
	s.waitLog(t, def.ID, "sleeping")
}

func (s *suite) mount(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "in.txt"), []byte("from host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := s.spec(t, "mount-check", "/mnt")
	spec.Mounts = []runtime.Mount{{HostPath: dir, ContainerPath: "/mnt"}}
	s.start(t, spec)
	if st := s.waitExited(t, spec.ID); st.ExitCode != 0 {
		t.Fatalf("mount-check exited %d: %s", st.ExitCode, s.logsOf(t, spec.ID, runtime.LogOptions{}))
	}
	if out := s.logsOf(t, spec.ID, runtime.LogOptions{}); !strings.Contains(out, "read from host") {
		t.Errorf("container did not read the host file: %q", out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "out.txt"))
	if err != nil || string(b) != "written by container\n" {
		t.Errorf("host sees %q, %v", b, err)
	}
	ro := s.spec(t, "mount-check", "/mnt")
	ro.Mounts = []runtime.Mount{{HostPath: t.TempDir(), ContainerPath: "/mnt", ReadOnly: true}}
	if err := os.WriteFile(filepath.Join(ro.Mounts[0].HostPath, "in.txt"), []byte("ro\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s.start(t, ro)
	if st := s.waitExited(t, ro.ID); st.ExitCode == 0 {
		t.Error("a read-only mount was writable")
	}
	if _, err := os.Stat(filepath.Join(ro.Mounts[0].HostPath, "out.txt")); err == nil {
		t.Error("the container wrote through a read-only mount")
	}
	bad := s.spec(t, "sleep")
	bad.Mounts = []runtime.Mount{{HostPath: "relative", ContainerPath: "/mnt"}}
	if err := s.create(t, bad); !errors.Is(err, runtime.ErrCreate) || !strings.Contains(err.Error(), "hostPath") {
		t.Errorf("relative host path: %v, want ErrCreate naming hostPath", err)
	}
}

func (s *suite) logs(t *testing.T) {
	spec := s.spec(t, "lines", "6")
	s.start(t, spec)
	s.waitExited(t, spec.ID)
	all := s.logsOf(t, spec.ID, runtime.LogOptions{})
	// Both streams land in one log, each in its own order. How lines of
	// the two interleave is the order the log writer read the two pipes
	// in, which a loaded machine may swap for lines written milliseconds
	// apart; what the log promises is that its order is its timestamps'
	// order, checked below.
	allLines := strings.Split(strings.TrimSuffix(all, "\n"), "\n")
	var odd, even []string
	for _, l := range allLines {
		var n int
		if _, err := fmt.Sscanf(l, "line %d", &n); err != nil {
			t.Errorf("log line %q is none the container wrote", l)
		} else if n%2 == 1 {
			odd = append(odd, l)
		} else {
			even = append(even, l)
		}
	}
	if got, want := strings.Join(odd, ","), "line 1,line 3,line 5"; got != want {
		t.Errorf("stdout's lines in the log: %s, want %s (all: %q)", got, want, all)
	}
	if got, want := strings.Join(even, ","), "line 2,line 4,line 6"; got != want {
		t.Errorf("stderr's lines in the log: %s, want %s (all: %q)", got, want, all)
	}
	if len(allLines) >= 2 {
		if got, want := s.logsOf(t, spec.ID, runtime.LogOptions{TailLines: 2}), strings.Join(allLines[len(allLines)-2:], "\n")+"\n"; got != want {
			t.Errorf("tail 2 = %q, want %q", got, want)
		}
	}
	if got := s.logsOf(t, spec.ID, runtime.LogOptions{TailLines: 100}); got != all {
		t.Errorf("tail 100 = %q, want all", got)
	}
	ts := s.logsOf(t, spec.ID, runtime.LogOptions{Timestamps: true, TailLines: 3})
	lines := strings.Split(strings.TrimSuffix(ts, "\n"), "\n")
	if len(lines) != 3 || len(allLines) != 6 {
		t.Fatalf("timestamps tail 3 = %q (all: %q)", ts, all)
	}
	var prev time.Time
	for i, l := range lines {
		stamp, text, _ := strings.Cut(l, " ")
		at, err := time.Parse(time.RFC3339Nano, stamp)
		if err != nil {
			t.Errorf("line %q: no RFC 3339 time: %v", l, err)
			continue
		}
		if text != allLines[i+3] {
			t.Errorf("line %q: text %q", l, text)
		}
		if at.Before(prev) {
			t.Errorf("timestamps go back: %v then %v", prev, at)
		}
		prev = at
	}
	if err := s.rt.Logs(s.ctx(t), "no-such-container", runtime.LogOptions{}, io.Discard); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("logs of a missing container: %v, want ErrNotFound", err)
	}
}

func (s *suite) logsFollow(t *testing.T) {
	spec := s.spec(t, "ticks", "8", "100")
	s.start(t, spec)
	var buf bytes.Buffer
	ctx := s.ctx(t)
	if err := s.rt.Logs(ctx, spec.ID, runtime.LogOptions{Follow: true}, &buf); err != nil {
		t.Fatal(err)
	}
	if ctx.Err() != nil {
		t.Fatal("follow did not end when the container exited")
	}
	var want strings.Builder
	for i := 1; i <= 8; i++ {
		fmt.Fprintf(&want, "tick %d\n", i)
	}
	if buf.String() != want.String() {
		t.Errorf("followed %q, want %q", buf.String(), want.String())
	}
	// Follow of a running container ends with its context.
	sleeper := s.spec(t, "sleep")
	s.start(t, sleeper)
	s.waitLog(t, sleeper.ID, "sleeping")
	fctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	buf.Reset()
	if err := s.rt.Logs(fctx, sleeper.ID, runtime.LogOptions{Follow: true}, &buf); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatal(err)
	}
	if buf.String() != "sleeping\n" {
		t.Errorf("followed a sleeper: %q", buf.String())
	}
}

func (s *suite) exec(t *testing.T) {
	spec := s.spec(t, "sleep")
	s.start(t, spec)
	s.waitLog(t, spec.ID, "sleeping")
	ctx := s.ctx(t)
	var out, errOut bytes.Buffer
	code, err := s.rt.Exec(ctx, spec.ID, runtime.ExecOptions{Command: []string{TestBinPath, "echo", "hello", "exec"}, Stdout: &out, Stderr: &errOut})
	if err != nil || code != 0 || out.String() != "hello exec\n" {
		t.Errorf("exec echo: code %d err %v stdout %q", code, err, out.String())
	}
	out.Reset()
	code, err = s.rt.Exec(ctx, spec.ID, runtime.ExecOptions{Command: []string{TestBinPath, "stderr", "oops"}, Stdout: &out, Stderr: &errOut})
	if err != nil || code != 0 || errOut.String() != "oops\n" || out.Len() != 0 {
		t.Errorf("exec stderr: code %d err %v stdout %q stderr %q", code, err, out.String(), errOut.String())
	}
	code, err = s.rt.Exec(ctx, spec.ID, runtime.ExecOptions{Command: []string{TestBinPath, "exit", "7"}})
	if err != nil || code != 7 {
		t.Errorf("exec exit 7: code %d err %v", code, err)
	}
	out.Reset()
	code, err = s.rt.Exec(ctx, spec.ID, runtime.ExecOptions{Command: []string{TestBinPath, "cat"}, Stdin: strings.NewReader("piped in\n"), Stdout: &out})
	if err != nil || code != 0 || out.String() != "piped in\nEOF\n" {
		t.Errorf("exec with stdin: code %d err %v stdout %q (stdin must end with EOF)", code, err, out.String())
	}
	if _, err := s.rt.Exec(ctx, spec.ID, runtime.ExecOptions{Command: []string{"/no/such/binary"}}); err == nil {
		t.Error("exec of a missing binary succeeded")
	}
	// The exec'd output does not go to the container's log.
	if got := s.logsOf(t, spec.ID, runtime.LogOptions{}); got != "sleeping\n" {
		t.Errorf("container log after exec = %q", got)
	}
	done := s.spec(t, "exit", "0")
	s.start(t, done)
	s.waitExited(t, done.ID)
	if _, err := s.rt.Exec(ctx, done.ID, runtime.ExecOptions{Command: []string{TestBinPath, "echo"}}); err == nil {
		t.Error("exec in an exited container succeeded")
	}
}

func (s *suite) imageNotFound(t *testing.T) {
	ctx := s.ctx(t)
	_, err := s.rt.EnsureImage(ctx, "outpost.local/no-such-image:1", runtime.PullNever, nil)
	if !errors.Is(err, runtime.ErrImageNeverPull) {
		t.Errorf("PullNever of an absent image: %v, want ErrImageNeverPull", err)
	}
	ref := s.env.ClosedRegistry + "/no-such-image:1"
	for _, p := range []runtime.PullPolicy{runtime.PullIfNotPresent, runtime.PullAlways} {
		_, err = s.rt.EnsureImage(ctx, ref, p, nil)
		if !errors.Is(err, runtime.ErrImagePull) {
			t.Errorf("%s of %s with no registry: %v, want ErrImagePull", p, ref, err)
		}
	}
	if _, err := s.rt.EnsureImage(ctx, "UPPER/case", runtime.PullIfNotPresent, nil); !errors.Is(err, runtime.ErrImagePull) {
		t.Errorf("malformed reference: %v, want ErrImagePull", err)
	}
	spec := s.spec(t, "sleep")
	spec.Image = "outpost.local/no-such-image:1"
	if err := s.create(t, spec); !errors.Is(err, runtime.ErrCreate) {
		t.Errorf("create from an absent image: %v, want ErrCreate", err)
	}
}

func (s *suite) commandNotFound(t *testing.T) {
	spec := s.spec(t)
	spec.Command = []string{"/no/such/command"}
	if err := s.create(t, spec); err != nil {
		t.Fatalf("create: %v (a missing command is a start error)", err)
	}
	err := s.rt.StartContainer(s.ctx(t), spec.ID)
	if !errors.Is(err, runtime.ErrStart) || !strings.Contains(err.Error(), "/no/such/command") {
		t.Errorf("start: %v, want ErrStart naming the command", err)
	}
	st, err := s.rt.ContainerStatus(s.ctx(t), spec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != runtime.StateExited || (st.Reason != "StartError" && st.Reason != "ContainerCannotRun") ||
		!strings.Contains(st.Message, "/no/such/command") || st.ExitCode == 0 {
		t.Errorf("status after a failed start: %+v", st)
	}
}

func (s *suite) foreign(t *testing.T) {
	if s.env.CreateForeign == nil || s.env.ForeignExists == nil {
		t.Fatal("Env.CreateForeign and Env.ForeignExists are required")
	}
	id := newID(t)
	s.env.CreateForeign(t, id)
	ctx := s.ctx(t)
	list, err := s.rt.ListContainers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range list {
		if c.ID == id {
			t.Errorf("ListContainers shows the foreign container %s", id)
		}
	}
	if _, err := s.rt.ContainerStatus(ctx, id); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("status of a foreign container: %v, want ErrNotFound", err)
	}
	if err := s.rt.StopContainer(ctx, id, 0); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("stop of a foreign container: %v, want ErrNotFound", err)
	}
	if err := s.rt.RemoveContainer(ctx, id); err == nil {
		t.Error("remove of a foreign container succeeded")
	}
	if _, err := s.rt.Exec(ctx, id, runtime.ExecOptions{Command: []string{"x"}}); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("exec in a foreign container: %v, want ErrNotFound", err)
	}
	if !s.env.ForeignExists(t, id) {
		t.Error("the foreign container is gone")
	}
}

func (s *suite) remove(t *testing.T) {
	spec := s.spec(t, "echo", "bye")
	s.start(t, spec)
	s.waitExited(t, spec.ID)
	ctx := s.ctx(t)
	if err := s.rt.RemoveContainer(ctx, spec.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.rt.ContainerStatus(ctx, spec.ID); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("status after remove: %v, want ErrNotFound", err)
	}
	if err := s.rt.Logs(ctx, spec.ID, runtime.LogOptions{}, io.Discard); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("logs after remove: %v, want ErrNotFound", err)
	}
	if err := s.rt.RemoveContainer(ctx, spec.ID); err != nil {
		t.Errorf("second remove: %v", err)
	}
	// The same ID can be used again once removed.
	s.start(t, spec)
	if st := s.waitExited(t, spec.ID); st.ExitCode != 0 {
		t.Errorf("re-created container exited %d", st.ExitCode)
	}
	if got := s.logsOf(t, spec.ID, runtime.LogOptions{}); got != "bye\n" {
		t.Errorf("log of the re-created container = %q (old log not removed?)", got)
	}
	// A running container is killed by remove.
	run := s.spec(t, "sleep")
	s.start(t, run)
	s.waitRunning(t, run.ID)
	if err := s.rt.RemoveContainer(ctx, run.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.rt.ContainerStatus(ctx, run.ID); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("status after removing a running container: %v", err)
	}
}

func (s *suite) unavailable(t *testing.T) {
	if s.env.Unreachable == nil {
		t.Fatal("Env.Unreachable is required")
	}
	down := s.env.Unreachable(t)
	ctx := s.ctx(t)
	if _, err := down.Version(ctx); !errors.Is(err, runtime.ErrUnavailable) {
		t.Errorf("Version: %v, want ErrUnavailable", err)
	}
	if _, err := down.ListContainers(ctx); !errors.Is(err, runtime.ErrUnavailable) {
		t.Errorf("ListContainers: %v, want ErrUnavailable", err)
	}
	if _, err := down.EnsureImage(ctx, TestImageRef, runtime.PullAlways, nil); !errors.Is(err, runtime.ErrUnavailable) {
		t.Errorf("EnsureImage: %v, want ErrUnavailable (not blamed on the image)", err)
	}
}

func (s *suite) reopen(t *testing.T) {
	if s.env.Reopen == nil {
		t.Fatal("Env.Reopen is required")
	}
	sleeper := s.spec(t, "sleep")
	s.start(t, sleeper)
	before := s.waitRunning(t, sleeper.ID)
	ticker := s.spec(t, "ticks", "10", "100")
	s.start(t, ticker)
	// The client goes away while the container still writes output.
	rt := s.env.Reopen(t)
	s.mu.Lock()
	s.rt = rt
	s.mu.Unlock()
	after := s.waitRunning(t, sleeper.ID)
	if after.Pid != before.Pid || !after.StartedAt.Equal(before.StartedAt) {
		t.Errorf("after a new client: pid %d startedAt %v, was %d %v", after.Pid, after.StartedAt, before.Pid, before.StartedAt)
	}
	st := s.waitExited(t, ticker.ID)
	if st.ExitCode != 0 || st.Reason != "Completed" {
		t.Errorf("ticker after a new client: %+v", st)
	}
	if got := s.logsOf(t, ticker.ID, runtime.LogOptions{TailLines: 1}); got != "tick 10\n" {
		t.Errorf("log written while the client was away ends %q, want tick 10", got)
	}
}

func (s *suite) pullWithCredentials(t *testing.T) {
	reg := NewRegistry(t, TestImage(t), "outpost", "s3cret")
	ctx := s.ctx(t)
	for name, auth := range map[string][]runtime.RegistryAuth{
		"no credentials": nil,
		"wrong password": {{Host: reg.Host, Username: "outpost", Password: "wrong"}},
		"another host's": {{Host: "127.0.0.2:1", Username: "outpost", Password: "s3cret"}},
	} {
		if _, err := s.rt.EnsureImage(ctx, reg.Ref, runtime.PullIfNotPresent, auth); !errors.Is(err, runtime.ErrImagePull) {
			t.Errorf("%s: %v, want ErrImagePull", name, err)
		}
	}
	good := []runtime.RegistryAuth{{Host: reg.Host, Username: "outpost", Password: "s3cret"}}
	img, err := s.rt.EnsureImage(ctx, reg.Ref, runtime.PullIfNotPresent, good)
	if err != nil {
		t.Fatalf("pull with credentials: %v", err)
	}
	if img.Digest != reg.Digest || !slices.Contains(img.Names, reg.Ref) {
		t.Errorf("pulled %+v, want %s named %s", img, reg.Digest, reg.Ref)
	}
	pulls := reg.pulls.Load()
	if _, err := s.rt.EnsureImage(ctx, reg.Ref, runtime.PullIfNotPresent, nil); err != nil {
		t.Errorf("IfNotPresent of the pulled image: %v", err)
	}
	if reg.pulls.Load() != pulls {
		t.Error("IfNotPresent went to the registry for an image the node has")
	}
	if _, err := s.rt.EnsureImage(ctx, reg.Ref, runtime.PullAlways, good); err != nil || reg.pulls.Load() == pulls {
		t.Errorf("Always: err %v, registry asked %d times before and %d after", err, pulls, reg.pulls.Load())
	}
	// The pulled image runs.
	spec := s.spec(t, "echo", "pulled")
	spec.Image = reg.Ref
	s.start(t, spec)
	s.waitExited(t, spec.ID)
	if got := s.logsOf(t, spec.ID, runtime.LogOptions{}); got != "pulled\n" {
		t.Errorf("container of the pulled image logged %q", got)
	}
}

// Status calls racing with the exit and with a stop each see a
// consistent state: never an error, never back from Running or Exited.
func (s *suite) concurrentStatus(t *testing.T) {
	spec := s.spec(t, "ticks", "4", "50")
	s.start(t, spec)
	ctx := s.ctx(t)
	rank := map[runtime.State]int{runtime.StateCreated: 0, runtime.StateRunning: 1, runtime.StateExited: 2}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := runtime.StateRunning
			deadline := time.Now().Add(s.env.Timeout)
			for time.Now().Before(deadline) {
				st, err := s.rt.ContainerStatus(ctx, spec.ID)
				if err != nil {
					errs <- fmt.Errorf("status while exiting: %w", err)
					return
				}
				if rank[st.State] < rank[last] {
					errs <- fmt.Errorf("state went from %s back to %s", last, st.State)
					return
				}
				last = st.State
				if st.State == runtime.StateExited {
					if st.ExitCode != 0 || st.Reason != "Completed" {
						errs <- fmt.Errorf("exited as %+v", st)
					}
					return
				}
			}
			errs <- errors.New("never saw the exit")
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// Stops racing each other all succeed.
	sleeper := s.spec(t, "sleep")
	s.start(t, sleeper)
	s.waitLog(t, sleeper.ID, "sleeping")
	stopErrs := make(chan error, 3)
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stopErrs <- s.rt.StopContainer(ctx, sleeper.ID, 5*time.Second)
		}()
	}
	wg.Wait()
	close(stopErrs)
	for err := range stopErrs {
		if err != nil {
			t.Errorf("concurrent stop: %v", err)
		}
	}
	if st, err := s.rt.ContainerStatus(ctx, sleeper.ID); err != nil || st.State != runtime.StateExited || st.ExitCode != 0 {
		t.Errorf("after concurrent stops: %+v, %v", st, err)
	}
}

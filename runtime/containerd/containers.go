package containerd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	containerd "github.com/containerd/containerd"
	"github.com/containerd/containerd/api/services/tasks/v1"
	tasktypes "github.com/containerd/containerd/api/types/task"
	"github.com/containerd/containerd/cio"
	"github.com/containerd/containerd/errdefs"
	"github.com/containerd/containerd/identifiers"
	"github.com/containerd/containerd/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/outpost-edge/outpost/runtime"
	"github.com/outpost-edge/outpost/runtime/cgroups"
)

// cfsPeriod is the CFS period every limited container gets (100 ms, as
// Kubernetes uses), so CPUMillis maps to quota = millis * 100 µs.
const cfsPeriod = 100_000

// maxLabelMessage bounds a message kept in a label (containerd refuses
// labels over 4 KiB).
const maxLabelMessage = 1024

// validate checks a spec before anything reaches containerd; every error
// names the field.
func validate(spec runtime.ContainerSpec) error {
	if err := identifiers.Validate(spec.ID); err != nil {
		return fmt.Errorf("id: %w", err)
	}
	if spec.Image == "" {
		return errors.New("image: required")
	}
	if spec.NetNS != "" && !filepath.IsAbs(spec.NetNS) {
		return fmt.Errorf("netNS: %q is not an absolute path", spec.NetNS)
	}
	if spec.Labels[runtime.LabelPodUID] == "" {
		return fmt.Errorf("labels: %s is required", runtime.LabelPodUID)
	}
	for k := range spec.Labels {
		if strings.HasPrefix(k, internalPrefix) {
			return fmt.Errorf("labels: %s: the prefix %s is reserved", k, internalPrefix)
		}
	}
	res := spec.Resources
	for _, f := range []struct {
		name string
		v    int64
	}{{"cpuMillis", res.CPUMillis}, {"cpuRequestMillis", res.CPURequestMillis}, {"memoryBytes", res.MemoryBytes}, {"pids", res.PIDs}} {
		if f.v < 0 {
			return fmt.Errorf("resources.%s: %d is negative", f.name, f.v)
		}
	}
	if spec.WorkingDir != "" && !filepath.IsAbs(spec.WorkingDir) {
		return fmt.Errorf("workingDir: %q is not absolute", spec.WorkingDir)
	}
	for i, m := range spec.Mounts {
		if !filepath.IsAbs(m.HostPath) {
			return fmt.Errorf("mounts[%d].hostPath: %q is not absolute", i, m.HostPath)
		}
		if !filepath.IsAbs(m.ContainerPath) {
			return fmt.Errorf("mounts[%d].containerPath: %q is not absolute", i, m.ContainerPath)
		}
	}
	for i, e := range spec.Env {
		if k, _, ok := strings.Cut(e, "="); !ok || k == "" {
			return fmt.Errorf("env[%d]: %q is not KEY=value", i, e)
		}
	}
	return nil
}

// processArgs applies Kubernetes' rules: Command replaces the entrypoint
// (and drops the image's cmd), Args replace the cmd.
func processArgs(entrypoint, cmd, command, args []string) []string {
	if len(command) > 0 {
		return append(append([]string{}, command...), args...)
	}
	if len(args) > 0 {
		return append(append([]string{}, entrypoint...), args...)
	}
	return append(append([]string{}, entrypoint...), cmd...)
}

// CreateContainer creates the container and its runc task (runc create),
// so that whatever runc refuses (a limit the host cannot honour, a bad
// mount) is a create error wrapping runtime.ErrCreate. When runc fails
// only because the process cannot be executed, the container is kept and
// marked: StartContainer then fails with runtime.ErrStart and the status
// says why, as a pod's status should.
func (r *Runtime) CreateContainer(ctx context.Context, spec runtime.ContainerSpec) error {
	if err := validate(spec); err != nil {
		return fmt.Errorf("%w: %w", runtime.ErrCreate, err)
	}
	c, err := r.conn(ctx)
	if err != nil {
		return err
	}
	sn, err := r.snapshotterName(ctx, c)
	if err != nil {
		return err
	}
	nctx := r.ns(ctx)
	name, err := runtime.NormalizeImageRef(spec.Image)
	if err != nil {
		return fmt.Errorf("%w: image: %w", runtime.ErrCreate, err)
	}
	img, err := c.GetImage(nctx, name)
	if err != nil {
		return fmt.Errorf("%w: %w", runtime.ErrCreate, wrap(err, "image %s", name))
	}
	if err := unpack(nctx, img, sn); err != nil {
		return fmt.Errorf("%w: %w", runtime.ErrCreate, err)
	}
	icfg, err := img.Spec(nctx)
	if err != nil {
		return fmt.Errorf("%w: %w", runtime.ErrCreate, wrap(err, "image %s config", name))
	}
	hostname, err := os.Hostname()
	if err != nil {
		return fmt.Errorf("%w: hostname: %w", runtime.ErrCreate, err)
	}
	network := oci.WithHostNamespace(specs.NetworkNamespace)
	if spec.NetNS != "" {
		network = oci.WithLinuxNamespace(specs.LinuxNamespace{Type: specs.NetworkNamespace, Path: spec.NetNS})
	}
	if spec.Hostname != "" {
		hostname = spec.Hostname
	}
	opts := []oci.SpecOpts{
		oci.WithImageConfig(img),
		oci.WithProcessArgs(processArgs(icfg.Config.Entrypoint, icfg.Config.Cmd, spec.Command, spec.Args)...),
		network,
		etcFile("/etc/hosts", spec.HostsFile),
		etcFile("/etc/resolv.conf", spec.ResolvConf),
		oci.WithHostname(hostname),
		// The container's own cgroup, read-only: runtimes such as Go's
		// (GOMAXPROCS) and Java size themselves from its limits.
		oci.WithMounts([]specs.Mount{{Destination: "/sys/fs/cgroup", Type: "cgroup", Source: "cgroup",
			Options: []string{"nosuid", "noexec", "nodev", "relatime", "ro"}}}),
	}
	if len(spec.Env) > 0 {
		opts = append(opts, oci.WithEnv(spec.Env))
	}
	if spec.WorkingDir != "" {
		opts = append(opts, oci.WithProcessCwd(spec.WorkingDir))
	}
	if len(spec.Mounts) > 0 {
		ms := make([]specs.Mount, 0, len(spec.Mounts))
		for _, m := range spec.Mounts {
			mode := "rw"
			if m.ReadOnly {
				mode = "ro"
			}
			ms = append(ms, specs.Mount{Type: "bind", Source: m.HostPath, Destination: m.ContainerPath, Options: []string{"rbind", "rprivate", mode}})
		}
		opts = append(opts, oci.WithMounts(ms))
	}
	res := spec.Resources
	if res.MemoryBytes > 0 {
		opts = append(opts, oci.WithMemoryLimit(uint64(res.MemoryBytes)))
	}
	if res.CPUMillis > 0 {
		opts = append(opts, oci.WithCPUCFS(res.CPUMillis*cfsPeriod/1000, cfsPeriod))
	}
	if res.CPURequestMillis > 0 {
		opts = append(opts, oci.WithCPUShares(cpuShares(res.CPURequestMillis)))
	}
	if res.PIDs > 0 {
		opts = append(opts, oci.WithPidsLimit(res.PIDs))
	}
	labels := make(map[string]string, len(spec.Labels)+1)
	for k, v := range spec.Labels {
		labels[k] = v
	}
	labels[labelImageDigest] = img.Target().Digest.String()

	ctr, err := c.NewContainer(nctx, spec.ID,
		containerd.WithImage(img),
		containerd.WithSnapshotter(sn),
		containerd.WithNewSnapshot(spec.ID, img),
		containerd.WithRuntime(runcRuntime, r.runtimeOptions()),
		containerd.WithNewSpec(opts...),
		containerd.WithContainerLabels(labels),
	)
	if err != nil {
		if errdefs.IsAlreadyExists(err) {
			return fmt.Errorf("%w: id %s: already exists", runtime.ErrCreate, spec.ID)
		}
		return fmt.Errorf("%w: %w", runtime.ErrCreate, wrap(err, "container %s", spec.ID))
	}
	if _, err := r.newTask(nctx, ctr); err != nil {
		if isExecError(err) {
			r.markStartError(nctx, ctr, err)
			return nil
		}
		if derr := ctr.Delete(nctx, containerd.WithSnapshotCleanup); derr != nil {
			r.log.Warn("delete container after failed create", "id", spec.ID, "err", derr)
		}
		_ = os.Remove(r.logPath(spec.ID))
		if w := wrap(err, "container %s", spec.ID); errors.Is(w, runtime.ErrUnavailable) {
			return fmt.Errorf("%w: %w", runtime.ErrCreate, w)
		}
		return fmt.Errorf("%w: container %s: %s", runtime.ErrCreate, spec.ID, runcReason(err))
	}
	r.log.Info("container created", "id", spec.ID, "image", name, "pod", spec.Labels[runtime.LabelPodName])
	return nil
}

// cpuShares is Kubernetes' milli-CPU to shares rule: 1024 per core, at
// least 2.
func cpuShares(milli int64) uint64 {
	s := milli * 1024 / 1000
	if s < 2 {
		s = 2
	}
	return uint64(s)
}

// newTask creates the runc task with its output going to the log writer
// that the shim runs, so logs do not pass through this process.
func (r *Runtime) newTask(ctx context.Context, ctr containerd.Container) (containerd.Task, error) {
	io := cio.BinaryIO(r.cfg.LogWriter, map[string]string{LogWriterArg: r.logPath(ctr.ID())})
	return ctr.NewTask(ctx, io)
}

// isExecError reports whether the OCI runtime failed because the process
// itself could not be executed (missing file, not executable, wrong
// format), in runc's words or crun's ("executable file `X` not found in
// $PATH", "exec container process `X`: Exec format error").
func isExecError(err error) bool {
	s := strings.ToLower(err.Error())
	for _, m := range []string{`exec: "`, "executable file not found", "exec format error", "executable file `", "exec container process"} {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}

// runcReason trims containerd's wrapping from runc's message so a pod's
// status reads like the cause.
func runcReason(err error) string {
	s := err.Error()
	for _, noise := range []string{"unable to start container process: ", "error during container init: "} {
		if i := strings.Index(s, noise); i >= 0 {
			s = s[i+len(noise):]
		}
	}
	s = strings.TrimSuffix(s, ": unknown")
	if len(s) > maxLabelMessage {
		s = s[:maxLabelMessage]
	}
	return s
}

// markStartError records on the container that its process could not
// start, so the status reports it after any restart of the agent.
func (r *Runtime) markStartError(ctx context.Context, ctr containerd.Container, cause error) {
	now := time.Now().UTC().Format(time.RFC3339Nano)
	if _, err := ctr.SetLabels(ctx, map[string]string{
		labelStartError: "true",
		labelReason:     "StartError",
		labelMessage:    runcReason(cause),
		labelExitCode:   "128",
		labelFinishedAt: now,
	}); err != nil {
		r.log.Warn("record start error", "id", ctr.ID(), "err", err)
	}
}

// load returns outpost's container id; one without LabelPodUID is
// reported as not found.
func (r *Runtime) load(ctx context.Context, id string) (*containerd.Client, containerd.Container, error) {
	c, err := r.conn(ctx)
	if err != nil {
		return nil, nil, err
	}
	ctr, err := c.LoadContainer(r.ns(ctx), id)
	if err != nil {
		return nil, nil, wrap(err, "container %s", id)
	}
	// The record LoadContainer just read: asking for the labels again
	// would be one more round trip to containerd's store per call.
	info, err := ctr.Info(r.ns(ctx), containerd.WithoutRefreshedMetadata)
	if err != nil {
		return nil, nil, wrap(err, "container %s", id)
	}
	if info.Labels[runtime.LabelPodUID] == "" {
		return nil, nil, fmt.Errorf("container %s: %w: %w", id, runtime.ErrNotFound, ErrNotOurs)
	}
	return c, ctr, nil
}

// StartContainer starts the created task. A process that cannot start
// leaves the container Exited with Reason StartError.
func (r *Runtime) StartContainer(ctx context.Context, id string) error {
	_, ctr, err := r.load(ctx, id)
	if err != nil {
		return err
	}
	nctx := r.ns(ctx)
	info, err := ctr.Info(nctx, containerd.WithoutRefreshedMetadata) // as load read it
	if err != nil {
		return wrap(err, "container %s", id)
	}
	labels := info.Labels
	if labels[labelStartError] != "" {
		return fmt.Errorf("container %s: %w: %s", id, runtime.ErrStart, labels[labelMessage])
	}
	if labels[labelStartedAt] != "" {
		return fmt.Errorf("container %s: %w: already started", id, runtime.ErrStart)
	}
	task, err := ctr.Task(nctx, nil)
	if errdefs.IsNotFound(err) {
		// The task is gone (a host reboot between create and start):
		// create it again.
		task, err = r.newTask(nctx, ctr)
		if err != nil && isExecError(err) {
			r.markStartError(nctx, ctr, err)
			return fmt.Errorf("container %s: %w: %s", id, runtime.ErrStart, runcReason(err))
		}
	}
	if err != nil {
		return fmt.Errorf("%w: %w", runtime.ErrStart, wrap(err, "container %s", id))
	}
	startedAt := time.Now()
	if err := task.Start(nctx); err != nil {
		r.markStartError(nctx, ctr, err)
		if _, derr := task.Delete(nctx, containerd.WithProcessKill); derr != nil && !errdefs.IsNotFound(derr) {
			r.log.Warn("delete task after failed start", "id", id, "err", derr)
		}
		return fmt.Errorf("container %s: %w: %s", id, runtime.ErrStart, runcReason(err))
	}
	if _, err := ctr.SetLabels(nctx, map[string]string{labelStartedAt: startedAt.UTC().Format(time.RFC3339Nano)}); err != nil {
		r.log.Warn("record start time", "id", id, "err", err)
	}
	r.log.Info("container started", "id", id, "pid", task.Pid())
	return nil
}

// cgroupFS is where containers' cgroups are read; a var for tests.
var cgroupFS cgroups.FS

// ContainerUsage reads the container's cgroup (the spec's cgroupsPath,
// runc's cgroupfs layout), as finish reads its OOM counter: a stopped
// container has no cgroup left, so the zero Usage.
func (r *Runtime) ContainerUsage(ctx context.Context, id string) (runtime.Usage, error) {
	_, ctr, err := r.load(ctx, id)
	if err != nil {
		return runtime.Usage{}, err
	}
	spec, err := ctr.Spec(r.ns(ctx))
	if err != nil {
		return runtime.Usage{}, wrap(err, "container %s spec", id)
	}
	if spec.Linux == nil {
		return runtime.Usage{}, nil
	}
	now := time.Now()
	rd, err := cgroupFS.Read(spec.Linux.CgroupsPath)
	if errors.Is(err, os.ErrNotExist) {
		return runtime.Usage{}, nil
	}
	if err != nil {
		return runtime.Usage{}, fmt.Errorf("container %s: %w", id, err)
	}
	return runtime.Usage{Time: now, CPUNanos: rd.CPUNanos, MemoryWorkingSetBytes: rd.WorkingSetBytes}, nil
}

// StopContainer sends SIGTERM, waits up to grace, sends SIGKILL to every
// process of the container, and returns once the task has exited.
func (r *Runtime) StopContainer(ctx context.Context, id string, grace time.Duration) error {
	_, ctr, err := r.load(ctx, id)
	if err != nil {
		return err
	}
	nctx := r.ns(ctx)
	task, err := ctr.Task(nctx, nil)
	if errdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return wrap(err, "container %s", id)
	}
	st, err := task.Status(nctx)
	if err != nil {
		return wrap(err, "container %s status", id)
	}
	if st.Status == containerd.Stopped {
		_, err := r.finish(nctx, ctr, task)
		return err
	}
	if st.Status == containerd.Created {
		// Never started: there is no process to signal.
		if _, err := task.Delete(nctx, containerd.WithProcessKill); err != nil && !errdefs.IsNotFound(err) {
			return wrap(err, "container %s", id)
		}
		return nil
	}
	exited, err := task.Wait(nctx)
	if err != nil {
		return wrap(err, "container %s wait", id)
	}
	if grace > 0 {
		if err := task.Kill(nctx, syscall.SIGTERM); err != nil && !errdefs.IsNotFound(err) {
			return wrap(err, "container %s SIGTERM", id)
		}
		t := time.NewTimer(grace)
		select {
		case <-exited:
			t.Stop()
			_, err := r.finish(nctx, ctr, task)
			return err
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("container %s: stop: %w", id, ctx.Err())
		}
	}
	if err := task.Kill(nctx, syscall.SIGKILL, containerd.WithKillAll); err != nil && !errdefs.IsNotFound(err) {
		return wrap(err, "container %s SIGKILL", id)
	}
	select {
	case <-exited:
	case <-ctx.Done():
		return fmt.Errorf("container %s: stop: %w", id, ctx.Err())
	}
	_, err = r.finish(nctx, ctr, task)
	return err
}

// finish records an exited task's result in the container's labels and
// deletes the task. Deleting it frees the shim and, with it, makes the
// shim wait for the log writer to drain: once a container reads Exited,
// its log is complete. OOM is read from the container's cgroup before the
// delete removes it.
func (r *Runtime) finish(ctx context.Context, ctr containerd.Container, task containerd.Task) (map[string]string, error) {
	st, err := task.Status(ctx)
	if errdefs.IsNotFound(err) {
		// Another caller finished it first; it recorded the exit
		// before deleting the task.
		labels, lerr := ctr.Labels(ctx)
		if lerr != nil {
			return nil, wrap(lerr, "container %s", ctr.ID())
		}
		return labels, nil
	}
	if err != nil {
		return nil, wrap(err, "container %s status", ctr.ID())
	}
	code := int32(st.ExitStatus)
	reason := "Completed"
	if code != 0 {
		reason = "Error"
	}
	if spec, err := ctr.Spec(ctx); err == nil && spec.Linux != nil && cgroupFS.OOMKilled(spec.Linux.CgroupsPath) {
		reason = "OOMKilled"
	}
	finished := st.ExitTime
	if finished.IsZero() {
		finished = time.Now()
	}
	labels, err := ctr.SetLabels(ctx, map[string]string{
		labelExitCode:   strconv.Itoa(int(code)),
		labelReason:     reason,
		labelFinishedAt: finished.UTC().Format(time.RFC3339Nano),
	})
	if err != nil {
		return nil, wrap(err, "container %s: record exit", ctr.ID())
	}
	if _, err := task.Delete(ctx); err != nil && !errdefs.IsNotFound(err) {
		r.log.Warn("delete exited task", "id", ctr.ID(), "err", err)
	}
	return labels, nil
}

// afterTaskGone reads ctr's labels once its task is gone, which means one
// of three things: another caller recorded the exit and deleted the
// task; the container was created and its task lost (StartContainer
// makes it again); or it started and its task was lost, which
// recordLost records.
func (r *Runtime) afterTaskGone(ctx context.Context, ctr containerd.Container) (map[string]string, error) {
	labels, err := ctr.Labels(ctx)
	if err != nil {
		return nil, wrap(err, "container %s", ctr.ID())
	}
	if labels[labelExitCode] == "" && labels[labelStartedAt] != "" {
		return r.recordLost(ctx, ctr, labels)
	}
	return labels, nil
}

// Exit code and reason of a started container whose task is gone with no
// exit recorded, as containerd's CRI reports such a container.
const (
	lostExitCode = 255
	lostReason   = "Unknown"
)

// recordLost records the end of container ctr, which started (labels
// say so) and whose task is gone with no exit recorded: its shim was
// killed, or the host restarted, and took the process and its exit status
// with it. Left without an exit, it read Created, which it can never be
// again: StartContainer refuses a started container, and the agent, which
// starts a Created one, asked again at once, forever, instead of starting
// the pod's next attempt (issue 16 review).
func (r *Runtime) recordLost(ctx context.Context, ctr containerd.Container, labels map[string]string) (map[string]string, error) {
	// StartContainer makes a task lost before the start again and sets
	// started-at after starting it: one made since the task was looked
	// for is there now. It is reported as it was seen until the next look.
	_, err := ctr.Task(ctx, nil)
	switch {
	case err == nil:
		return labels, nil
	case !errdefs.IsNotFound(err):
		return nil, wrap(err, "container %s task", ctr.ID())
	}
	// Another caller's finish records the exit before it deletes the
	// task, and no task can be made for a started container: with the
	// task gone, labels read now either have the exit or never will.
	now, err := ctr.Labels(ctx)
	if err != nil {
		return nil, wrap(err, "container %s", ctr.ID())
	}
	if now[labelExitCode] != "" {
		return now, nil
	}
	r.log.Warn("container's task is gone without an exit (its shim was killed or the host restarted): recorded as exited", "id", ctr.ID())
	labels, err = ctr.SetLabels(ctx, map[string]string{
		labelExitCode:   strconv.Itoa(lostExitCode),
		labelReason:     lostReason,
		labelMessage:    "the container's process was lost with its task (its shim was killed or the host restarted); its exit status is unknown",
		labelFinishedAt: time.Now().UTC().Format(time.RFC3339Nano),
	})
	if err != nil {
		return nil, wrap(err, "container %s: record a lost task", ctr.ID())
	}
	return labels, nil
}

// RemoveContainer kills what is left of the container's process, deletes
// the task, the container, its snapshot and its log file. Removing a
// container that is already gone is not an error.
func (r *Runtime) RemoveContainer(ctx context.Context, id string) error {
	_, ctr, err := r.load(ctx, id)
	if errors.Is(err, ErrNotOurs) {
		return err
	}
	if errors.Is(err, runtime.ErrNotFound) {
		_ = os.Remove(r.logPath(id))
		return nil
	}
	if err != nil {
		return err
	}
	nctx := r.ns(ctx)
	if task, err := ctr.Task(nctx, nil); err == nil {
		if _, err := task.Delete(nctx, containerd.WithProcessKill); err != nil && !errdefs.IsNotFound(err) {
			return wrap(err, "container %s: delete task", id)
		}
	} else if !errdefs.IsNotFound(err) {
		return wrap(err, "container %s", id)
	}
	if err := ctr.Delete(nctx, containerd.WithSnapshotCleanup); err != nil && !errdefs.IsNotFound(err) {
		return wrap(err, "container %s: delete", id)
	}
	if err := os.Remove(r.logPath(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("container %s: remove log: %w", id, err)
	}
	r.log.Info("container removed", "id", id)
	return nil
}

// ContainerStatus reports one of outpost's containers.
func (r *Runtime) ContainerStatus(ctx context.Context, id string) (runtime.ContainerStatus, error) {
	c, ctr, err := r.load(ctx, id)
	if err != nil {
		return runtime.ContainerStatus{}, err
	}
	nctx := r.ns(ctx)
	proc, err := r.taskProcess(nctx, c, id)
	if err != nil {
		return runtime.ContainerStatus{}, err
	}
	return r.status(nctx, ctr, proc)
}

// ListContainers reports every container that carries LabelPodUID.
func (r *Runtime) ListContainers(ctx context.Context) ([]runtime.ContainerStatus, error) {
	return r.list(ctx, fmt.Sprintf("labels.%q", runtime.LabelPodUID), true)
}

// PodContainers reports the containers of the pod whose UID is podUID,
// reading only theirs.
func (r *Runtime) PodContainers(ctx context.Context, podUID string) ([]runtime.ContainerStatus, error) {
	if podUID == "" {
		return nil, errors.New("pod containers: no pod UID")
	}
	return r.list(ctx, fmt.Sprintf("labels.%q==%q", runtime.LabelPodUID, podUID), false)
}

// list reports the containers that filter selects. Their tasks are read
// with one List of the node's tasks when allTasks (a list of every
// container: asking per container made a node of n pods cost 3n round
// trips), else with one Get each (one pod's few: a List would ask every
// shim on the node for its state). The tasks are read after the
// containers, so every listed container's task, if it has one yet, is
// seen.
func (r *Runtime) list(ctx context.Context, filter string, allTasks bool) ([]runtime.ContainerStatus, error) {
	c, err := r.conn(ctx)
	if err != nil {
		return nil, err
	}
	nctx := r.ns(ctx)
	ctrs, err := c.Containers(nctx, filter)
	if err != nil {
		return nil, wrap(err, "list containers")
	}
	procs := make(map[string]*tasktypes.Process, len(ctrs))
	if allTasks {
		resp, err := c.TaskService().List(nctx, &tasks.ListTasksRequest{})
		if err != nil {
			return nil, wrap(errdefs.FromGRPC(err), "list tasks")
		}
		for _, p := range resp.Tasks {
			procs[p.ID] = p
		}
	} else {
		for _, ctr := range ctrs {
			p, err := r.taskProcess(nctx, c, ctr.ID())
			if err != nil {
				return nil, err
			}
			procs[ctr.ID()] = p
		}
	}
	out := make([]runtime.ContainerStatus, 0, len(ctrs))
	for _, ctr := range ctrs {
		st, err := r.status(nctx, ctr, procs[ctr.ID()])
		if errors.Is(err, runtime.ErrNotFound) {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

// taskProcess is what containerd's task service says of container id's
// task; nil when it has none.
func (r *Runtime) taskProcess(ctx context.Context, c *containerd.Client, id string) (*tasktypes.Process, error) {
	resp, err := c.TaskService().Get(ctx, &tasks.GetRequest{ContainerID: id})
	switch err = errdefs.FromGRPC(err); {
	case errdefs.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, wrap(err, "container %s task", id)
	}
	return resp.Process, nil
}

// status reports ctr from the record it was loaded or listed with and
// proc, what containerd's task service said of its task then (nil: it
// had none).
func (r *Runtime) status(ctx context.Context, ctr containerd.Container, proc *tasktypes.Process) (runtime.ContainerStatus, error) {
	info, err := ctr.Info(ctx, containerd.WithoutRefreshedMetadata)
	if err != nil {
		return runtime.ContainerStatus{}, wrap(err, "container %s", ctr.ID())
	}
	labels := info.Labels
	st := runtime.ContainerStatus{ID: info.ID, Image: info.Image, CreatedAt: info.CreatedAt, State: runtime.StateCreated}
	if labels[labelExitCode] == "" {
		switch {
		case proc == nil:
			if labels, err = r.afterTaskGone(ctx, ctr); err != nil {
				return runtime.ContainerStatus{}, err
			}
		case proc.Status == tasktypes.Status_RUNNING, proc.Status == tasktypes.Status_PAUSED, proc.Status == tasktypes.Status_PAUSING:
			st.State = runtime.StateRunning
			st.Pid = proc.Pid
		case proc.Status == tasktypes.Status_CREATED:
		case proc.Status == tasktypes.Status_STOPPED:
			task, err := ctr.Task(ctx, nil)
			switch {
			case errdefs.IsNotFound(err):
				if labels, err = r.afterTaskGone(ctx, ctr); err != nil {
					return runtime.ContainerStatus{}, err
				}
			case err != nil:
				return runtime.ContainerStatus{}, wrap(err, "container %s task", ctr.ID())
			default:
				if labels, err = r.finish(ctx, ctr, task); err != nil {
					return runtime.ContainerStatus{}, err
				}
			}
		default:
			st.State = runtime.StateUnknown
			st.Message = fmt.Sprintf("task status %q", strings.ToLower(proc.Status.String()))
		}
	}
	st.Labels = map[string]string{}
	for k, v := range labels {
		if !strings.HasPrefix(k, internalPrefix) {
			st.Labels[k] = v
		}
	}
	st.ImageDigest = labels[labelImageDigest]
	st.StartedAt = parseTime(labels[labelStartedAt])
	if code := labels[labelExitCode]; code != "" {
		n, _ := strconv.Atoi(code)
		st.State = runtime.StateExited
		st.Pid = 0
		st.ExitCode = int32(n)
		st.Reason = labels[labelReason]
		st.Message = labels[labelMessage]
		st.FinishedAt = parseTime(labels[labelFinishedAt])
	}
	return st, nil
}

func parseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t
}

// etcFile mounts file of the node at dest in the container (writable,
// as the kubelet's: the pod's own), or the node's own dest, read-only,
// when file is empty.
func etcFile(dest, file string) oci.SpecOpts {
	mode := "rw"
	if file == "" {
		file, mode = dest, "ro"
	}
	return oci.WithMounts([]specs.Mount{{Destination: dest, Type: "bind", Source: file, Options: []string{"rbind", "rprivate", mode}}})
}

package fake

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/outpost-edge/outpost/runtime"
	"github.com/outpost-edge/outpost/runtime/ociarchive"
)

// Errors of this package.
var (
	// ErrClosed is a Runtime used after Close or Reopen (wrapped with
	// runtime.ErrUnavailable).
	ErrClosed = errors.New("fake runtime closed")
	// ErrForeign is a container that is not outpost's (wrapped with
	// runtime.ErrNotFound).
	ErrForeign = errors.New("container is not managed by outpost")
)

// image is an image the fake holds.
type image struct {
	names      []string
	digest     string
	size       int64
	files      map[string]ociarchive.File
	entrypoint []string
	cmd        []string
	env        []string
	workingDir string
}

// registryImage is an image the simulated registry serves.
type registryImage struct {
	img  *image
	auth *runtime.RegistryAuth
}

// world is the state every handle of one fake runtime shares (the
// "containerd" behind the clients).
type world struct {
	mu         sync.Mutex
	images     map[string]*image // by normalized name
	registry   map[string]registryImage
	containers map[string]*container
	foreign    map[string]bool
	failPull   error
	down       bool
	// exitSubs are the channels of WatchExits.
	exitSubs map[chan string]struct{}
}

// Runtime is one client of a fake runtime; Reopen gives another client of
// the same world.
type Runtime struct {
	w      *world
	mu     sync.Mutex
	closed bool
}

var _ runtime.Runtime = (*Runtime)(nil)

// New returns an empty fake runtime.
func New() *Runtime {
	return &Runtime{w: &world{
		images:     map[string]*image{},
		registry:   map[string]registryImage{},
		containers: map[string]*container{},
		foreign:    map[string]bool{},
	}}
}

// Close ends this client; containers keep running.
func (r *Runtime) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	return nil
}

// Reopen closes r and returns a new client of the same runtime, as an
// agent restart would.
func (r *Runtime) Reopen() *Runtime {
	_ = r.Close()
	return &Runtime{w: r.w}
}

// SetDown makes every call fail with runtime.ErrUnavailable (true) or
// work again (false). Running containers go on, as with containerd down.
func (r *Runtime) SetDown(down bool) {
	r.w.mu.Lock()
	defer r.w.mu.Unlock()
	r.w.down = down
}

// FailNextPull makes the next pull fail with err (wrapped with
// runtime.ErrImagePull).
func (r *Runtime) FailNextPull(err error) {
	r.w.mu.Lock()
	defer r.w.mu.Unlock()
	r.w.failPull = err
}

// AddRegistryImage lets EnsureImage pull ref (from an image built like
// ociarchive builds one). With auth set, a pull must present the same
// credentials for auth.Host.
func (r *Runtime) AddRegistryImage(ref string, img ociarchive.Image, auth *runtime.RegistryAuth) error {
	name, err := runtime.NormalizeImageRef(ref)
	if err != nil {
		return err
	}
	im := imageFrom(ociarchive.Loaded{Image: img, Digest: fakeDigest(name)})
	im.names = []string{name}
	r.w.mu.Lock()
	defer r.w.mu.Unlock()
	r.w.registry[name] = registryImage{img: im, auth: auth}
	return nil
}

// AddForeign creates a container without outpost's labels, as another
// tool sharing the runtime would.
func (r *Runtime) AddForeign(id string) {
	r.w.mu.Lock()
	defer r.w.mu.Unlock()
	r.w.foreign[id] = true
}

// ForeignExists reports whether the foreign container id still exists.
func (r *Runtime) ForeignExists(id string) bool {
	r.w.mu.Lock()
	defer r.w.mu.Unlock()
	return r.w.foreign[id]
}

// Crash makes container id's process exit now with code (Reason Error,
// or Completed for 0). It reports whether the container was running.
func (r *Runtime) Crash(id string, code int32) bool {
	return r.force(id, code, "")
}

// OOMKill makes container id's process die now as the OOM killer would
// (137, Reason OOMKilled).
func (r *Runtime) OOMKill(id string) bool {
	return r.force(id, 137, "OOMKilled")
}

// SetUsage makes container id's cumulative CPU time and working set, as
// ContainerUsage reports them while the container runs. It reports
// whether the container exists.
func (r *Runtime) SetUsage(id string, cpu time.Duration, memory uint64) bool {
	r.w.mu.Lock()
	c := r.w.containers[id]
	r.w.mu.Unlock()
	if c == nil {
		return false
	}
	c.mu.Lock()
	c.cpu, c.memory = cpu, memory
	c.mu.Unlock()
	return true
}

func (r *Runtime) force(id string, code int32, reason string) bool {
	r.w.mu.Lock()
	c := r.w.containers[id]
	r.w.mu.Unlock()
	if c == nil {
		return false
	}
	return c.force(code, reason)
}

// check returns the error every call gets while closed or down.
func (r *Runtime) check() error {
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed {
		return fmt.Errorf("%w: %w", runtime.ErrUnavailable, ErrClosed)
	}
	r.w.mu.Lock()
	defer r.w.mu.Unlock()
	if r.w.down {
		return fmt.Errorf("%w: fake runtime is down", runtime.ErrUnavailable)
	}
	return nil
}

// Version reports "fake 1.0".
func (r *Runtime) Version(ctx context.Context) (string, error) {
	if err := r.check(); err != nil {
		return "", err
	}
	return "fake 1.0", nil
}

func fakeDigest(name string) string {
	return fmt.Sprintf("sha256:%064x", len(name)*7919+int(name[0]))
}

func imageFrom(l ociarchive.Loaded) *image {
	im := &image{
		digest:     l.Digest,
		size:       l.Size,
		files:      map[string]ociarchive.File{},
		entrypoint: l.Entrypoint,
		cmd:        l.Cmd,
		env:        l.Env,
		workingDir: l.WorkingDir,
	}
	for _, f := range l.Files {
		im.files[f.Path] = f
	}
	return im
}

func (im *image) public() runtime.Image {
	return runtime.Image{Names: slices.Clone(im.names), Digest: im.digest, Size: im.size}
}

// EnsureImage follows the pull policy against the images held and the
// simulated registry.
func (r *Runtime) EnsureImage(ctx context.Context, ref string, policy runtime.PullPolicy, auth []runtime.RegistryAuth) (runtime.Image, error) {
	if err := r.check(); err != nil {
		return runtime.Image{}, err
	}
	name, err := runtime.NormalizeImageRef(ref)
	if err != nil {
		return runtime.Image{}, fmt.Errorf("%w: %w", runtime.ErrImagePull, err)
	}
	switch policy {
	case "", runtime.PullIfNotPresent, runtime.PullAlways, runtime.PullNever:
	default:
		return runtime.Image{}, fmt.Errorf("%w: pull policy %q: want Always, IfNotPresent or Never", runtime.ErrImagePull, policy)
	}
	r.w.mu.Lock()
	defer r.w.mu.Unlock()
	if im, ok := r.w.images[name]; ok && policy != runtime.PullAlways {
		return im.public(), nil
	}
	if policy == runtime.PullNever {
		return runtime.Image{}, fmt.Errorf("image %s: %w", name, runtime.ErrImageNeverPull)
	}
	if err := r.w.failPull; err != nil {
		r.w.failPull = nil
		return runtime.Image{}, fmt.Errorf("pull %s: %w: %w", name, runtime.ErrImagePull, err)
	}
	ri, ok := r.w.registry[name]
	if !ok {
		return runtime.Image{}, fmt.Errorf("pull %s: %w: %s: not found (no registry serves it)", name, runtime.ErrImagePull, name)
	}
	if ri.auth != nil {
		okAuth := false
		for _, a := range auth {
			if a.Host == ri.auth.Host && ((a.Username == ri.auth.Username && a.Password == ri.auth.Password && a.Username != "") ||
				(a.IdentityToken != "" && a.IdentityToken == ri.auth.IdentityToken)) {
				okAuth = true
			}
		}
		if !okAuth {
			return runtime.Image{}, fmt.Errorf("pull %s: %w: 401 Unauthorized", name, runtime.ErrImagePull)
		}
	}
	r.w.images[name] = ri.img
	return ri.img.public(), nil
}

// ImportImages reads an OCI image layout archive (docker save archives
// are not simulated).
func (r *Runtime) ImportImages(ctx context.Context, archive io.Reader) ([]runtime.Image, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	loaded, err := ociarchive.Read(archive)
	if err != nil {
		return nil, fmt.Errorf("import images: %w", err)
	}
	r.w.mu.Lock()
	defer r.w.mu.Unlock()
	var out []runtime.Image
	for _, l := range loaded {
		name, err := runtime.NormalizeImageRef(l.Name)
		if err != nil {
			return nil, fmt.Errorf("import images: %w", err)
		}
		im := imageFrom(l)
		im.names = []string{name}
		r.w.images[name] = im
		out = append(out, im.public())
	}
	if len(out) == 0 {
		return nil, errors.New("import images: the archive names no image")
	}
	return out, nil
}

// ListImages lists the images held, one per digest.
func (r *Runtime) ListImages(ctx context.Context) ([]runtime.Image, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	r.w.mu.Lock()
	defer r.w.mu.Unlock()
	byDigest := map[string]*runtime.Image{}
	for _, name := range slices.Sorted(maps.Keys(r.w.images)) {
		im := r.w.images[name]
		if e, ok := byDigest[im.digest]; ok {
			e.Names = append(e.Names, name)
			continue
		}
		p := im.public()
		p.Names = []string{name}
		byDigest[im.digest] = &p
	}
	out := make([]runtime.Image, 0, len(byDigest))
	for _, d := range slices.Sorted(maps.Keys(byDigest)) {
		out = append(out, *byDigest[d])
	}
	return out, nil
}

var idPattern = regexp.MustCompile(`^[A-Za-z0-9]+(?:[._-](?:[A-Za-z0-9]+))*$`)

// validate mirrors runtime/containerd's checks, field by field.
func validate(spec runtime.ContainerSpec) error {
	if !idPattern.MatchString(spec.ID) || len(spec.ID) > 76 {
		return fmt.Errorf("id: %q is not a valid identifier", spec.ID)
	}
	if spec.Image == "" {
		return errors.New("image: required")
	}
	if spec.Labels[runtime.LabelPodUID] == "" {
		return fmt.Errorf("labels: %s is required", runtime.LabelPodUID)
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
	if spec.WorkingDir != "" && !strings.HasPrefix(spec.WorkingDir, "/") {
		return fmt.Errorf("workingDir: %q is not absolute", spec.WorkingDir)
	}
	for i, m := range spec.Mounts {
		if !strings.HasPrefix(m.HostPath, "/") {
			return fmt.Errorf("mounts[%d].hostPath: %q is not absolute", i, m.HostPath)
		}
		if !strings.HasPrefix(m.ContainerPath, "/") {
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

// CreateContainer records a container of a held image.
func (r *Runtime) CreateContainer(ctx context.Context, spec runtime.ContainerSpec) error {
	if err := r.check(); err != nil {
		return err
	}
	if err := validate(spec); err != nil {
		return fmt.Errorf("%w: %w", runtime.ErrCreate, err)
	}
	// The kernel refuses a CFS quota under 1 ms (runc reports it at
	// create); the fake refuses the same limits.
	if q := spec.Resources.CPUMillis * 100; q > 0 && q < 1000 {
		return fmt.Errorf("%w: container %s: failed to write %d to cpu.cfs_quota_us: invalid argument", runtime.ErrCreate, spec.ID, q)
	}
	// runc cannot set a limit below what its init process already uses
	// (about 2 MiB).
	if m := spec.Resources.MemoryBytes; m > 0 && m < 4<<20 {
		return fmt.Errorf("%w: container %s: error setting cgroup config for procHooks process: unable to set memory limit to %d (current usage: 2097152)", runtime.ErrCreate, spec.ID, m)
	}
	name, err := runtime.NormalizeImageRef(spec.Image)
	if err != nil {
		return fmt.Errorf("%w: image: %w", runtime.ErrCreate, err)
	}
	r.w.mu.Lock()
	defer r.w.mu.Unlock()
	im, ok := r.w.images[name]
	if !ok {
		return fmt.Errorf("%w: image %s: %w", runtime.ErrCreate, name, runtime.ErrNotFound)
	}
	if _, ok := r.w.containers[spec.ID]; ok || r.w.foreign[spec.ID] {
		return fmt.Errorf("%w: id %s: already exists", runtime.ErrCreate, spec.ID)
	}
	s := spec
	s.Labels = maps.Clone(spec.Labels)
	s.Env = slices.Clone(spec.Env)
	s.Mounts = slices.Clone(spec.Mounts)
	c := &container{
		onExit:  r.w.exited,
		spec:    s,
		img:     im,
		imgName: name,
		status: runtime.ContainerStatus{
			ID:          spec.ID,
			Labels:      maps.Clone(spec.Labels),
			Image:       name,
			ImageDigest: im.digest,
			State:       runtime.StateCreated,
			CreatedAt:   time.Now(),
		},
		changed: make(chan struct{}),
	}
	r.w.containers[spec.ID] = c
	return nil
}

// get returns outpost's container id.
func (r *Runtime) get(id string) (*container, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	r.w.mu.Lock()
	defer r.w.mu.Unlock()
	if r.w.foreign[id] {
		return nil, fmt.Errorf("container %s: %w: %w", id, runtime.ErrNotFound, ErrForeign)
	}
	c, ok := r.w.containers[id]
	if !ok {
		return nil, fmt.Errorf("container %s: %w", id, runtime.ErrNotFound)
	}
	return c, nil
}

// StartContainer starts the simulated process.
func (r *Runtime) StartContainer(ctx context.Context, id string) error {
	c, err := r.get(id)
	if err != nil {
		return err
	}
	return c.start()
}

// StopContainer signals SIGTERM, waits up to grace, then SIGKILL.
func (r *Runtime) StopContainer(ctx context.Context, id string, grace time.Duration) error {
	c, err := r.get(id)
	if err != nil {
		return err
	}
	return c.stop(ctx, grace)
}

// RemoveContainer kills the process if needed and forgets the container
// and its log. A missing container is not an error.
func (r *Runtime) RemoveContainer(ctx context.Context, id string) error {
	c, err := r.get(id)
	if errors.Is(err, ErrForeign) {
		return err
	}
	if errors.Is(err, runtime.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := c.stop(ctx, 0); err != nil {
		return err
	}
	r.w.mu.Lock()
	defer r.w.mu.Unlock()
	if r.w.containers[id] == c {
		delete(r.w.containers, id)
	}
	return nil
}

// ContainerStatus reports one container.
func (r *Runtime) ContainerStatus(ctx context.Context, id string) (runtime.ContainerStatus, error) {
	c, err := r.get(id)
	if err != nil {
		return runtime.ContainerStatus{}, err
	}
	return c.snapshot(), nil
}

// ContainerUsage reports the CPU time and working set a running
// container holds, read now.
func (r *Runtime) ContainerUsage(ctx context.Context, id string) (runtime.Usage, error) {
	c, err := r.get(id)
	if err != nil {
		return runtime.Usage{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.status.State != runtime.StateRunning {
		return runtime.Usage{}, nil
	}
	return runtime.Usage{Time: time.Now(), CPUNanos: uint64(c.cpu), MemoryWorkingSetBytes: c.memory}, nil
}

// ListContainers reports outpost's containers, sorted by ID.
func (r *Runtime) ListContainers(ctx context.Context) ([]runtime.ContainerStatus, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	r.w.mu.Lock()
	cs := make([]*container, 0, len(r.w.containers))
	for _, id := range slices.Sorted(maps.Keys(r.w.containers)) {
		cs = append(cs, r.w.containers[id])
	}
	r.w.mu.Unlock()
	out := make([]runtime.ContainerStatus, 0, len(cs))
	for _, c := range cs {
		out = append(out, c.snapshot())
	}
	return out, nil
}

// PodContainers reports the pod's containers, sorted by ID.
func (r *Runtime) PodContainers(ctx context.Context, podUID string) ([]runtime.ContainerStatus, error) {
	if podUID == "" {
		return nil, errors.New("pod containers: no pod UID")
	}
	all, err := r.ListContainers(ctx)
	return slices.DeleteFunc(all, func(st runtime.ContainerStatus) bool { return st.Labels[runtime.LabelPodUID] != podUID }), err
}

// Logs writes the container's output per opts.
func (r *Runtime) Logs(ctx context.Context, id string, opts runtime.LogOptions, w io.Writer) error {
	c, err := r.get(id)
	if err != nil {
		return err
	}
	if opts.TailLines < 0 {
		return fmt.Errorf("tailLines: %d is negative", opts.TailLines)
	}
	return c.logs(ctx, opts, w)
}

// Exec runs a simulated command in the running container.
func (r *Runtime) Exec(ctx context.Context, id string, opts runtime.ExecOptions) (int, error) {
	if len(opts.Command) == 0 {
		return -1, errors.New("exec: command is empty")
	}
	c, err := r.get(id)
	if err != nil {
		return -1, err
	}
	return c.exec(ctx, opts)
}

var _ runtime.ExitWatcher = (*Runtime)(nil)

// WatchExits sends the ID of each container whose simulated process
// ends, as containerd's /tasks/exit events do, until ctx ends.
func (r *Runtime) WatchExits(ctx context.Context) (<-chan string, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	ch := make(chan string, 64)
	r.w.mu.Lock()
	if r.w.exitSubs == nil {
		r.w.exitSubs = map[chan string]struct{}{}
	}
	r.w.exitSubs[ch] = struct{}{}
	r.w.mu.Unlock()
	go func() {
		<-ctx.Done()
		r.w.mu.Lock()
		delete(r.w.exitSubs, ch)
		close(ch)
		r.w.mu.Unlock()
	}()
	return ch, nil
}

// exited tells the watchers that container id's process ended; a watcher
// too slow to take it misses it, as a dropped event stream would.
func (w *world) exited(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for ch := range w.exitSubs {
		select {
		case ch <- id:
		default:
		}
	}
}

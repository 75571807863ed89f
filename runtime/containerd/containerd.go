package containerd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	containerd "github.com/containerd/containerd"
	contentapi "github.com/containerd/containerd/api/services/content/v1"
	runcoptions "github.com/containerd/containerd/api/types/runc/options"
	contentproxy "github.com/containerd/containerd/content/proxy"
	"github.com/containerd/containerd/errdefs"
	"github.com/containerd/containerd/identifiers"
	"github.com/containerd/containerd/namespaces"

	"github.com/outpost-edge/outpost/runtime"
	"github.com/outpost-edge/outpost/runtime/cgroups"
	"github.com/outpost-edge/outpost/runtime/containerd/logwriter"
)

// Errors of this package, beyond the runtime package's.
var (
	// ErrConfig is a Config or SupervisorConfig that cannot work; the
	// message names the field.
	ErrConfig = errors.New("invalid runtime config")
	// ErrNotOurs is a container that exists in the namespace but does not
	// carry runtime.LabelPodUID: outpost never touches it. It is always
	// wrapped together with runtime.ErrNotFound.
	ErrNotOurs = errors.New("container is not managed by outpost")
	// ErrSocketInUse is a supervisor Root whose socket already answers:
	// another containerd runs there.
	ErrSocketInUse = errors.New("containerd socket already in use")
)

// DefaultNamespace is the containerd namespace outpost's containers live
// in, apart from anything else the host runs on the same containerd.
const DefaultNamespace = "outpost"

// runcRuntime is the shim every container runs under.
const runcRuntime = "io.containerd.runc.v2"

// Labels outpost keeps on a container for its own bookkeeping: what the
// status needs once the task is gone. They are not shown in
// ContainerStatus.Labels.
const (
	internalPrefix   = "io.outpost.runtime."
	labelImageDigest = internalPrefix + "image-digest"
	labelStartedAt   = internalPrefix + "started-at"
	labelFinishedAt  = internalPrefix + "finished-at"
	labelExitCode    = internalPrefix + "exit-code"
	labelReason      = internalPrefix + "reason"
	labelMessage     = internalPrefix + "message"
	// labelStartError marks a container whose process could not start;
	// its message is in labelMessage.
	labelStartError = internalPrefix + "start-error"
)

// Config configures New.
type Config struct {
	// Socket is containerd's gRPC socket (required).
	Socket string
	// Namespace is the containerd namespace; DefaultNamespace if empty.
	Namespace string
	// LogDir holds one log file per container (required; created).
	LogDir string
	// Logger gets the runtime's own log; slog.Default() if nil.
	Logger *slog.Logger
	// LogWriter is the executable containerd's shim runs to write a
	// container's log file; it must call RunLogWriterIfAsked (logwriter.RunIfAsked) first thing
	// in main. Empty means this process's own executable.
	LogWriter string
	// Snapshotter forces "overlayfs" or "native"; empty detects overlayfs
	// and falls back to native.
	Snapshotter string
	// DialTimeout bounds each connection attempt (default 3 s).
	DialTimeout time.Duration
	// OCIRuntime is the OCI runtime binary containerd's runc shim runs
	// for every new container: "" or "runc" (the shim's default, runc
	// from containerd's PATH), "crun" (looked up in PATH), OCIRuntimeAuto,
	// or the absolute path of a binary with runc's command line (crun,
	// youki, runc elsewhere).
	OCIRuntime string

	// clientOpts are added to the containerd client's options (tests
	// count its round trips).
	clientOpts []containerd.ClientOpt
}

// OCIRuntimeAuto picks crun when it is installed and the host's cgroup
// layout lets it run containers, else runc: crun starts a container with
// about a third less CPU than runc, which is most of a pod's start on a
// small node (BENCHMARKS.md), and OpenShift and Podman default to it too.
const OCIRuntimeAuto = "auto"

// Runtime is runtime.Runtime on containerd. It connects lazily: New does
// not need containerd to be up, and every call made while it is down
// returns an error wrapping runtime.ErrUnavailable.
type Runtime struct {
	cfg Config
	log *slog.Logger

	// ociBinary is OCIRuntime resolved to a path; "" is the shim's runc.
	ociBinary string

	mu          sync.Mutex
	client      *containerd.Client
	snapshotter string
	closed      bool
}

var _ runtime.Runtime = (*Runtime)(nil)

// New checks cfg and returns a Runtime; it tries to connect once so that
// a reachable containerd is ready at once, but a containerd that is down
// is not an error here (see Runtime).
func New(ctx context.Context, cfg Config) (*Runtime, error) {
	if cfg.Socket == "" {
		return nil, fmt.Errorf("%w: socket is required", ErrConfig)
	}
	if cfg.LogDir == "" {
		return nil, fmt.Errorf("%w: logDir is required", ErrConfig)
	}
	if !filepath.IsAbs(cfg.LogDir) {
		abs, err := filepath.Abs(cfg.LogDir)
		if err != nil {
			return nil, fmt.Errorf("%w: logDir %q: %w", ErrConfig, cfg.LogDir, err)
		}
		cfg.LogDir = abs
	}
	if cfg.Namespace == "" {
		cfg.Namespace = DefaultNamespace
	}
	if err := identifiers.Validate(cfg.Namespace); err != nil {
		return nil, fmt.Errorf("%w: namespace %q: %w", ErrConfig, cfg.Namespace, err)
	}
	switch cfg.Snapshotter {
	case "", "overlayfs", "native":
	default:
		return nil, fmt.Errorf("%w: snapshotter %q: want overlayfs or native", ErrConfig, cfg.Snapshotter)
	}
	ociName, why := cfg.OCIRuntime, ""
	if ociName == OCIRuntimeAuto {
		ociName, why = pickOCIRuntime(exec.LookPath, cgroups.FS{})
	}
	oci, err := resolveOCIRuntime(ociName)
	if err != nil {
		return nil, err
	}
	if cfg.LogWriter == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("%w: logWriter: own executable: %w", ErrConfig, err)
		}
		cfg.LogWriter = exe
	}
	if err := logwriter.Probe(ctx, cfg.LogWriter); err != nil {
		return nil, fmt.Errorf("%w: logWriter: %w", ErrConfig, err)
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 3 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if err := os.MkdirAll(cfg.LogDir, 0o750); err != nil {
		return nil, fmt.Errorf("%w: logDir: %w", ErrConfig, err)
	}
	r := &Runtime{cfg: cfg, ociBinary: oci, log: cfg.Logger.With("component", "containerd", "socket", cfg.Socket)}
	if why != "" {
		r.log.Info("OCI runtime chosen", "runtime", ociName, "why", why)
	}
	if _, err := r.conn(ctx); err != nil {
		r.log.Warn("containerd not reachable yet", "err", err)
	}
	return r, nil
}

// pickOCIRuntime is what OCIRuntimeAuto means on this host, and why.
// crun 1.8 refuses to run containers on a hybrid cgroup layout whose
// cgroup2 tree holds a controller (systemd's hybrid mode on hosts that
// mount only some v1 controllers); runc runs there.
func pickOCIRuntime(lookPath func(string) (string, error), fs cgroups.FS) (name, why string) {
	if _, err := lookPath("crun"); err != nil {
		return "runc", "crun is not installed"
	}
	ctrls, err := fs.HybridControllers()
	if err != nil {
		return "runc", fmt.Sprintf("the cgroup layout is unknown (%v)", err)
	}
	if len(ctrls) > 0 {
		return "runc", fmt.Sprintf("crun cannot run on this hybrid cgroup layout: controllers %s are in the cgroup2 tree, not in v1 hierarchies", strings.Join(ctrls, ","))
	}
	return "crun", "crun is installed and runs on this cgroup layout"
}

// resolveOCIRuntime turns Config.OCIRuntime into the binary the shim is
// told to run: "" for runc (the shim's own default, so containers created
// before the option existed and after look the same), else an absolute
// path to an executable file.
func resolveOCIRuntime(name string) (string, error) {
	switch name {
	case "", "runc":
		return "", nil
	case "crun":
		p, err := exec.LookPath("crun")
		if err != nil {
			return "", fmt.Errorf("%w: OCI runtime crun: not installed (apt-get install crun): %w", ErrConfig, err)
		}
		return filepath.Abs(p)
	}
	if !filepath.IsAbs(name) {
		return "", fmt.Errorf("%w: OCI runtime %q: want auto, runc, crun or an absolute path", ErrConfig, name)
	}
	fi, err := os.Stat(name)
	if err != nil {
		return "", fmt.Errorf("%w: OCI runtime: %w", ErrConfig, err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("%w: OCI runtime %s: not an executable file", ErrConfig, name)
	}
	return name, nil
}

// runtimeOptions are the runc shim's options for a new container: the
// OCI runtime binary when it is not runc.
func (r *Runtime) runtimeOptions() any {
	if r.ociBinary == "" {
		return nil
	}
	return &runcoptions.Options{BinaryName: r.ociBinary}
}

// Close drops the connection. Containers keep running: nothing of theirs
// depends on it.
func (r *Runtime) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	if r.client == nil {
		return nil
	}
	err := r.client.Close()
	r.client = nil
	if err != nil {
		return fmt.Errorf("close containerd client: %w", err)
	}
	return nil
}

// conn returns the client, connecting first if needed, with ctx carrying
// outpost's namespace.
func (r *Runtime) conn(ctx context.Context) (*containerd.Client, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, fmt.Errorf("%w: runtime closed", runtime.ErrUnavailable)
	}
	if r.client != nil {
		return r.client, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// The content store is a cache of small blobs (blobCache) in front
	// of the content service on the client's connection, which exists
	// once New returns; New itself reads no content.
	blobs := &blobCache{}
	opts := append([]containerd.ClientOpt{containerd.WithTimeout(r.cfg.DialTimeout), containerd.WithDefaultNamespace(r.cfg.Namespace),
		containerd.WithServices(containerd.WithContentStore(blobs))}, r.cfg.clientOpts...)
	c, err := containerd.New(r.cfg.Socket, opts...)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", runtime.ErrUnavailable, err)
	}
	blobs.Store = contentproxy.NewContentStore(contentapi.NewContentClient(c.Conn()))
	r.client = c
	return c, nil
}

// ns returns ctx in outpost's namespace.
func (r *Runtime) ns(ctx context.Context) context.Context {
	return namespaces.WithNamespace(ctx, r.cfg.Namespace)
}

// wrap maps containerd's error kinds onto the runtime package's.
func wrap(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	msg := fmt.Sprintf(format, args...)
	switch {
	case errors.Is(err, runtime.ErrUnavailable):
		return fmt.Errorf("%s: %w", msg, err)
	case errdefs.IsUnavailable(err) || isConnErr(err):
		return fmt.Errorf("%s: %w: %w", msg, runtime.ErrUnavailable, err)
	case errdefs.IsNotFound(err):
		return fmt.Errorf("%s: %w: %w", msg, runtime.ErrNotFound, err)
	}
	return fmt.Errorf("%s: %w", msg, err)
}

// isConnErr reports whether err is the gRPC transport failing (containerd
// gone) rather than containerd answering.
func isConnErr(err error) bool {
	s := err.Error()
	return strings.Contains(s, "connection refused") || strings.Contains(s, "transport is closing") ||
		strings.Contains(s, "connection error") || strings.Contains(s, "error reading from server: EOF")
}

// Version reports "containerd VERSION (OCI RUNTIME)", e.g. "containerd
// 1.6.20 (crun)": the node's runtime version, as `get nodes -o wide` shows.
func (r *Runtime) Version(ctx context.Context) (string, error) {
	c, err := r.conn(ctx)
	if err != nil {
		return "", err
	}
	v, err := c.Version(r.ns(ctx))
	if err != nil {
		return "", wrap(err, "containerd version")
	}
	oci := "runc"
	if r.ociBinary != "" {
		oci = filepath.Base(r.ociBinary)
	}
	return "containerd " + v.Version + " (" + oci + ")", nil
}

// snapshotterName picks the snapshotter once per connection: overlayfs
// when containerd loaded it without error (it needs a kernel and a backing
// filesystem that support overlay), native otherwise.
func (r *Runtime) snapshotterName(ctx context.Context, c *containerd.Client) (string, error) {
	r.mu.Lock()
	sn := r.snapshotter
	r.mu.Unlock()
	if sn != "" {
		return sn, nil
	}
	if r.cfg.Snapshotter != "" {
		sn = r.cfg.Snapshotter
	} else {
		resp, err := c.IntrospectionService().Plugins(r.ns(ctx), []string{`type==io.containerd.snapshotter.v1,id==overlayfs`})
		if err != nil {
			return "", wrap(err, "list snapshotters")
		}
		sn = "native"
		for _, p := range resp.Plugins {
			if p.InitErr == nil {
				sn = "overlayfs"
			}
		}
		r.log.Info("snapshotter chosen", "snapshotter", sn)
	}
	r.mu.Lock()
	r.snapshotter = sn
	r.mu.Unlock()
	return sn, nil
}

// logPath is the one log file of container id.
func (r *Runtime) logPath(id string) string {
	return filepath.Join(r.cfg.LogDir, id+".log")
}

// LogWriterArg is the argument with which the shim runs the log writer.
const LogWriterArg = logwriter.Arg

// RunLogWriterIfAsked turns this process into a container's log writer
// when it was started as one, and exits; otherwise it returns at once.
// The outpost binary's main (and any test binary that runs real
// containers with the default Config.LogWriter) calls it first thing.
func RunLogWriterIfAsked() { logwriter.RunIfAsked() }

package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/distribution/reference"
)

// Errors of this package. Implementations wrap them with %w so that the
// agent can tell a pod's status exactly why (errors.Is).
var (
	// ErrNotFound is a container or image the runtime does not hold.
	ErrNotFound = errors.New("not found")
	// ErrImagePull is an image that could not be pulled: no such image,
	// no such registry, refused credentials.
	ErrImagePull = errors.New("image pull failed")
	// ErrImageNeverPull is an image absent from the node under PullNever.
	ErrImageNeverPull = errors.New("image is not on the node and the pull policy is Never")
	// ErrCreate is a container the runtime could not create, e.g. a limit
	// the host cannot honour.
	ErrCreate = errors.New("create container")
	// ErrStart is a container whose process could not start, e.g. a
	// command that does not exist.
	ErrStart = errors.New("start container")
	// ErrUnavailable is a runtime that does not answer (containerd down).
	ErrUnavailable = errors.New("container runtime unavailable")
)

// Labels that outpost puts on every container it creates. A container
// without LabelPodUID is not outpost's and is left alone.
const (
	LabelPodUID       = "io.outpost.pod.uid"
	LabelPodNamespace = "io.outpost.pod.namespace"
	LabelPodName      = "io.outpost.pod.name"
	LabelContainer    = "io.outpost.container.name"
	LabelAttempt      = "io.outpost.container.attempt"
)

// PullPolicy says when EnsureImage pulls: the values of a pod's
// imagePullPolicy.
type PullPolicy string

// Pull policies.
const (
	PullAlways       PullPolicy = "Always"
	PullIfNotPresent PullPolicy = "IfNotPresent"
	PullNever        PullPolicy = "Never"
)

// RegistryAuth is a registry's credentials (Username/Password, or a
// bearer IdentityToken), from the agent's registry config.
type RegistryAuth struct {
	Host          string `json:"host"`
	Username      string `json:"username,omitempty"`
	Password      string `json:"password,omitempty"`
	IdentityToken string `json:"identityToken,omitempty"`
	// Insecure allows plain HTTP to this registry (a site's own mirror).
	Insecure bool `json:"insecure,omitempty"`
}

// Image is an image the runtime holds.
type Image struct {
	// Names are the references it is known by (docker.io/library/x:1).
	Names []string
	// Digest is the manifest's content digest (sha256:...).
	Digest string
	// Size is the unpacked size in bytes, 0 when unknown.
	Size int64
}

// Mount is a host path mounted into a container.
type Mount struct {
	HostPath      string
	ContainerPath string
	ReadOnly      bool
}

// Resources are a container's cgroup settings, from its limits (and
// requests for the CPU weight). Zero means unlimited.
type Resources struct {
	// CPUMillis is the CPU limit in thousandths of a core (CFS quota).
	CPUMillis int64
	// CPURequestMillis sets the CPU weight (shares), as Kubernetes does.
	CPURequestMillis int64
	// MemoryBytes is the memory limit.
	MemoryBytes int64
	// PIDs limits the number of processes, 0 for none.
	PIDs int64
}

// ContainerSpec is one container to create. Every container shares the
// host's network (pods are hostNetwork for now).
type ContainerSpec struct {
	// ID is unique on the node; the agent makes it from the pod's UID,
	// the container's name and the attempt number.
	ID    string
	Image string
	// Command replaces the image's entrypoint when set; Args replace its
	// cmd when set (Kubernetes' rules).
	Command    []string
	Args       []string
	Env        []string // KEY=value
	WorkingDir string
	Mounts     []Mount
	Resources  Resources
	// NetNS is the path of the pod's network namespace (SPEC NET-1),
	// which the container joins; empty: the host's network. Hostname is
	// the container's host name there (the pod's name); empty: the
	// host's.
	NetNS, Hostname string
	// ResolvConf and HostsFile are files of the node mounted at the
	// container's /etc/resolv.conf and /etc/hosts (SPEC NET-4); empty:
	// the node's own.
	ResolvConf, HostsFile string
	// Labels must hold the Label* keys above; more are kept as given.
	Labels map[string]string
}

// State is where a container is in its life.
type State string

// Container states.
const (
	StateCreated State = "Created"
	StateRunning State = "Running"
	StateExited  State = "Exited"
	StateUnknown State = "Unknown"
)

// ContainerStatus is what the runtime knows of one container.
type ContainerStatus struct {
	ID     string
	Labels map[string]string
	Image  string
	// ImageDigest is the digest of the image it was created from.
	ImageDigest string
	State       State
	Pid         uint32
	CreatedAt   time.Time
	StartedAt   time.Time
	FinishedAt  time.Time
	// ExitCode is set once State is Exited; 128+n for a signal n.
	ExitCode int32
	// Reason: "Completed" (exit 0), "Error", "OOMKilled", or a
	// start failure's reason.
	Reason  string
	Message string
}

// Usage is one reading of a container's resource use.
type Usage struct {
	// Time is when it was read.
	Time time.Time
	// CPUNanos is the CPU time the container used since it started, in
	// nanoseconds of one core; two readings give a rate.
	CPUNanos uint64
	// MemoryWorkingSetBytes is its cgroup's memory in use less the
	// inactive file cache, as the kubelet counts it for memory pressure
	// and `kubectl top`.
	MemoryWorkingSetBytes uint64
}

// LogOptions select what Logs writes.
type LogOptions struct {
	// Follow keeps writing as the container writes, until ctx ends or the
	// container exits.
	Follow bool
	// TailLines writes only the last n lines first; 0 means all.
	TailLines int
	// Timestamps prefixes each line with its RFC 3339 time.
	Timestamps bool
}

// ExecOptions describe a command run in a running container.
type ExecOptions struct {
	Command []string
	Stdin   io.Reader // nil: none
	Stdout  io.Writer
	Stderr  io.Writer
	TTY     bool
}

// Runtime is what the agent needs from a container runtime. The agent
// declares the same method set as its own interface; runtime/runtimetest
// runs one contract suite against every implementation.
type Runtime interface {
	// Version names the runtime and its version ("containerd 1.6.20
	// (crun)": containerd and the OCI runtime it runs containers with).
	Version(ctx context.Context) (string, error)
	// EnsureImage makes ref available per policy (pulling with auth when
	// it names the registry's host) and returns it.
	EnsureImage(ctx context.Context, ref string, policy PullPolicy, auth []RegistryAuth) (Image, error)
	// ImportImages loads an OCI or docker archive (a tar) and returns the
	// images it held.
	ImportImages(ctx context.Context, archive io.Reader) ([]Image, error)
	// ListImages lists the images held.
	ListImages(ctx context.Context) ([]Image, error)
	// CreateContainer creates, without starting, a container.
	CreateContainer(ctx context.Context, spec ContainerSpec) error
	// StartContainer starts a created container's process.
	StartContainer(ctx context.Context, id string) error
	// StopContainer sends SIGTERM, waits up to grace, then SIGKILL; it
	// returns once the process is gone. Stopping a stopped container is
	// not an error.
	StopContainer(ctx context.Context, id string, grace time.Duration) error
	// RemoveContainer deletes a stopped container and its logs.
	RemoveContainer(ctx context.Context, id string) error
	// ContainerStatus reports one container (ErrNotFound if absent).
	ContainerStatus(ctx context.Context, id string) (ContainerStatus, error)
	// ContainerUsage reads a running container's cgroup: its cumulative
	// CPU time and its memory working set. It is the zero Usage for a
	// container that is not running (ErrNotFound if absent).
	ContainerUsage(ctx context.Context, id string) (Usage, error)
	// ListContainers reports the containers outpost created (those with
	// LabelPodUID); others are not listed and never touched.
	ListContainers(ctx context.Context) ([]ContainerStatus, error)
	// PodContainers reports the containers of one pod (LabelPodUID ==
	// podUID), at a cost that does not grow with the node's other
	// containers: the agent reads a pod's containers to stop it.
	PodContainers(ctx context.Context, podUID string) ([]ContainerStatus, error)
	// Logs writes the container's output (stdout and stderr, in order).
	Logs(ctx context.Context, id string, opts LogOptions, w io.Writer) error
	// Exec runs a command in a running container and returns its exit
	// code.
	Exec(ctx context.Context, id string, opts ExecOptions) (int, error)
}

// NormalizeImageRef turns "busybox" into "docker.io/library/busybox:latest",
// as a pod's image field means it, so that every runtime names images
// alike.
func NormalizeImageRef(ref string) (string, error) {
	if strings.TrimSpace(ref) == "" {
		return "", errors.New("image reference is empty")
	}
	named, err := reference.ParseDockerRef(ref)
	if err != nil {
		return "", fmt.Errorf("image reference %q: %w", ref, err)
	}
	return named.String(), nil
}

// ExitWatcher is implemented by runtimes that can say when a container's
// process exits, so the agent need not poll each container to notice.
type ExitWatcher interface {
	// WatchExits sends the ID of each of outpost's containers whose main
	// process exited, until ctx ends or the event stream breaks; the
	// channel is then closed, and the caller may watch again.
	WatchExits(ctx context.Context) (<-chan string, error)
}

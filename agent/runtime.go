package agent

import (
	"context"
	"io"
	"time"

	"github.com/outpost-edge/outpost/runtime"
)

// Runtime is what the agent needs of a container runtime; runtime/
// containerd is the real one, runtime/fake the one for tests, and
// runtime/runtimetest checks both against the same contract.
type Runtime interface {
	Version(ctx context.Context) (string, error)
	EnsureImage(ctx context.Context, ref string, policy runtime.PullPolicy, auth []runtime.RegistryAuth) (runtime.Image, error)
	ImportImages(ctx context.Context, archive io.Reader) ([]runtime.Image, error)
	ListImages(ctx context.Context) ([]runtime.Image, error)
	CreateContainer(ctx context.Context, spec runtime.ContainerSpec) error
	StartContainer(ctx context.Context, id string) error
	StopContainer(ctx context.Context, id string, grace time.Duration) error
	RemoveContainer(ctx context.Context, id string) error
	ContainerStatus(ctx context.Context, id string) (runtime.ContainerStatus, error)
	ListContainers(ctx context.Context) ([]runtime.ContainerStatus, error)
	PodContainers(ctx context.Context, podUID string) ([]runtime.ContainerStatus, error)
	ContainerUsage(ctx context.Context, id string) (runtime.Usage, error)
	Logs(ctx context.Context, id string, opts runtime.LogOptions, w io.Writer) error
	Exec(ctx context.Context, id string, opts runtime.ExecOptions) (int, error)
}

package endpointtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outpost-edge/outpost/runtime"
)

// LogTime is the time the fake stamps on every log line when asked for
// timestamps.
var LogTime = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

type container struct {
	status runtime.ContainerStatus
	lines  []string
	// changed is closed and replaced whenever lines or status change,
	// so a follower wakes up.
	changed chan struct{}
}

// Runtime is the fake. The zero value is not usable; call New.
type Runtime struct {
	mu         sync.Mutex
	containers map[string]*container
	imports    []Import
	// active counts Logs and Exec calls in progress, so a test can see
	// that a caller going away ends them.
	active atomic.Int32
}

// Active is the number of Logs and Exec calls in progress.
func (r *Runtime) Active() int { return int(r.active.Load()) }

// New returns an empty fake runtime.
func New() *Runtime {
	return &Runtime{containers: map[string]*container{}}
}

// AddContainer adds a running container of pod ns/pod named name, in its
// attempt-th incarnation, and returns its ID.
func (r *Runtime) AddContainer(ns, pod, name string, attempt int) string {
	id := fmt.Sprintf("%s_%s_%s_%d", ns, pod, name, attempt)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.containers[id] = &container{
		status: runtime.ContainerStatus{
			ID: id,
			Labels: map[string]string{
				runtime.LabelPodUID:       "uid-" + pod,
				runtime.LabelPodNamespace: ns,
				runtime.LabelPodName:      pod,
				runtime.LabelContainer:    name,
				runtime.LabelAttempt:      strconv.Itoa(attempt),
			},
			State:     runtime.StateRunning,
			StartedAt: LogTime,
		},
		changed: make(chan struct{}),
	}
	return id
}

// Log appends lines (without their newline) to a container's output.
func (r *Runtime) Log(id string, lines ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.containers[id]
	c.lines = append(c.lines, lines...)
	close(c.changed)
	c.changed = make(chan struct{})
}

// Exit marks a container as exited with code.
func (r *Runtime) Exit(id string, code int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.containers[id]
	c.status.State = runtime.StateExited
	c.status.ExitCode = code
	close(c.changed)
	c.changed = make(chan struct{})
}

// Imports returns what ImportImages was given, in order.
func (r *Runtime) Imports() []Import {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Import(nil), r.imports...)
}

// Version implements runtime.Runtime.
func (r *Runtime) Version(context.Context) (string, error) { return "fake 1", nil }

// EnsureImage is not supported by the fake.
func (r *Runtime) EnsureImage(context.Context, string, runtime.PullPolicy, []runtime.RegistryAuth) (runtime.Image, error) {
	return runtime.Image{}, errors.ErrUnsupported
}

// Import is what one ImportImages call received: its size, SHA-256 and
// first bytes. The archive itself is not kept, so a test can send
// hundreds of MiB and watch the memory of the path it travelled.
type Import struct {
	Size   int64
	SHA256 string
	Head   string
}

// ImportImages reads the archive to its end and reports one image named
// after the archive's first line, with the archive's SHA-256 as digest.
// An archive that starts with "bad" is refused, as a corrupt tar would
// be.
func (r *Runtime) ImportImages(ctx context.Context, archive io.Reader) ([]runtime.Image, error) {
	h := sha256.New()
	head := make([]byte, 64)
	n, err := io.ReadFull(archive, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read archive: %w", err)
	}
	head = head[:n]
	h.Write(head)
	rest, err := io.Copy(h, archive)
	if err != nil {
		return nil, fmt.Errorf("read archive: %w", err)
	}
	if bytes.HasPrefix(head, []byte("bad")) {
		return nil, errors.New("archive is not a tar: unexpected EOF")
	}
	imp := Import{Size: int64(n) + rest, SHA256: hex.EncodeToString(h.Sum(nil)), Head: string(head)}
	r.mu.Lock()
	r.imports = append(r.imports, imp)
	r.mu.Unlock()
	name, _, _ := bytes.Cut(head, []byte("\n"))
	return []runtime.Image{{Names: []string{"example.local/" + string(name) + ":1"}, Digest: "sha256:" + imp.SHA256, Size: imp.Size}}, nil
}

// ListImages is not supported by the fake.
func (r *Runtime) ListImages(context.Context) ([]runtime.Image, error) {
	return nil, errors.ErrUnsupported
}

// CreateContainer is not supported by the fake.
func (r *Runtime) CreateContainer(context.Context, runtime.ContainerSpec) error {
	return errors.ErrUnsupported
}

// StartContainer is not supported by the fake.
func (r *Runtime) StartContainer(context.Context, string) error { return errors.ErrUnsupported }

// StopContainer is not supported by the fake.
func (r *Runtime) StopContainer(context.Context, string, time.Duration) error {
	return errors.ErrUnsupported
}

// RemoveContainer is not supported by the fake.
func (r *Runtime) RemoveContainer(context.Context, string) error { return errors.ErrUnsupported }

// ContainerStatus implements runtime.Runtime.
func (r *Runtime) ContainerStatus(_ context.Context, id string) (runtime.ContainerStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.containers[id]
	if !ok {
		return runtime.ContainerStatus{}, fmt.Errorf("container %s: %w", id, runtime.ErrNotFound)
	}
	return c.status, nil
}

// ContainerUsage is unsupported: the endpoint reads usage from its
// Config.Summary, not the runtime.
func (r *Runtime) ContainerUsage(context.Context, string) (runtime.Usage, error) {
	return runtime.Usage{}, errors.ErrUnsupported
}

// PodContainers implements runtime.Runtime.
func (r *Runtime) PodContainers(ctx context.Context, podUID string) ([]runtime.ContainerStatus, error) {
	if podUID == "" {
		return nil, errors.New("pod containers: no pod UID")
	}
	all, err := r.ListContainers(ctx)
	return slices.DeleteFunc(all, func(st runtime.ContainerStatus) bool { return st.Labels[runtime.LabelPodUID] != podUID }), err
}

// ListContainers implements runtime.Runtime.
func (r *Runtime) ListContainers(context.Context) ([]runtime.ContainerStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]runtime.ContainerStatus, 0, len(r.containers))
	for _, c := range r.containers {
		out = append(out, c.status)
	}
	return out, nil
}

// Logs writes the container's lines; with Follow it goes on writing new
// ones until the container exits or ctx ends.
func (r *Runtime) Logs(ctx context.Context, id string, opts runtime.LogOptions, w io.Writer) error {
	r.active.Add(1)
	defer r.active.Add(-1)
	sent := 0
	r.mu.Lock()
	c, ok := r.containers[id]
	if !ok {
		r.mu.Unlock()
		return fmt.Errorf("container %s: %w", id, runtime.ErrNotFound)
	}
	if opts.TailLines > 0 && len(c.lines) > opts.TailLines {
		sent = len(c.lines) - opts.TailLines
	}
	r.mu.Unlock()
	for {
		r.mu.Lock()
		lines := c.lines[sent:]
		sent = len(c.lines)
		exited := c.status.State == runtime.StateExited
		changed := c.changed
		r.mu.Unlock()
		var b strings.Builder
		for _, l := range lines {
			if opts.Timestamps {
				b.WriteString(LogTime.Format(time.RFC3339Nano))
				b.WriteByte(' ')
			}
			b.WriteString(l)
			b.WriteByte('\n')
		}
		if b.Len() > 0 {
			if _, err := io.WriteString(w, b.String()); err != nil {
				return fmt.Errorf("write logs: %w", err)
			}
		}
		if !opts.Follow || exited {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Exec runs a few commands in the fake's imagination: "echo ARGS..."
// writes its arguments, "cat" copies stdin to stdout, "fail CODE MSG"
// writes MSG to stderr and exits with CODE, "sleep" waits until ctx
// ends. Anything else does not exist.
func (r *Runtime) Exec(ctx context.Context, id string, opts runtime.ExecOptions) (int, error) {
	r.active.Add(1)
	defer r.active.Add(-1)
	st, err := r.ContainerStatus(ctx, id)
	if err != nil {
		return 0, err
	}
	if st.State != runtime.StateRunning {
		return 0, fmt.Errorf("container %s is not running", id)
	}
	switch opts.Command[0] {
	case "echo":
		_, err := fmt.Fprintln(opts.Stdout, strings.Join(opts.Command[1:], " "))
		return 0, err
	case "cat":
		if opts.Stdin == nil {
			return 0, nil
		}
		if _, err := io.Copy(opts.Stdout, opts.Stdin); err != nil {
			return 0, fmt.Errorf("cat: %w", err)
		}
		return 0, nil
	case "sleep":
		<-ctx.Done()
		return 137, nil
	case "fail":
		code, _ := strconv.Atoi(opts.Command[1])
		_, err := fmt.Fprintln(opts.Stderr, strings.Join(opts.Command[2:], " "))
		return code, err
	}
	return 0, fmt.Errorf("%w: exec: %q: executable file not found in $PATH", runtime.ErrStart, opts.Command[0])
}

var _ runtime.Runtime = (*Runtime)(nil)

package containerd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync"

	containerd "github.com/containerd/containerd"
	"github.com/containerd/containerd/cio"

	"github.com/outpost-edge/outpost/runtime"
)

// Exec runs opts.Command in the running container id (with the
// container's environment, user and working directory) and returns its
// exit code once it has exited and its output is copied.
func (r *Runtime) Exec(ctx context.Context, id string, opts runtime.ExecOptions) (int, error) {
	if len(opts.Command) == 0 {
		return -1, errors.New("exec: command is empty")
	}
	_, ctr, err := r.load(ctx, id)
	if err != nil {
		return -1, err
	}
	nctx := r.ns(ctx)
	task, err := ctr.Task(nctx, nil)
	if err != nil {
		return -1, fmt.Errorf("exec in %s: container is not running: %w", id, wrap(err, "task"))
	}
	st, err := task.Status(nctx)
	if err != nil {
		return -1, wrap(err, "container %s status", id)
	}
	if st.Status != containerd.Running {
		return -1, fmt.Errorf("exec in %s: container is %s, not running", id, st.Status)
	}
	spec, err := ctr.Spec(nctx)
	if err != nil {
		return -1, wrap(err, "container %s spec", id)
	}
	if spec.Process == nil {
		return -1, fmt.Errorf("exec in %s: the container's spec has no process", id)
	}
	p := *spec.Process
	p.Args = opts.Command
	p.Terminal = opts.TTY
	stdout, stderr := opts.Stdout, opts.Stderr
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	// The shim keeps the process's stdin open until told otherwise: once
	// the caller's reader is drained, CloseIO gives the process its EOF.
	var stdin io.Reader
	stdinDone := make(chan struct{})
	if opts.Stdin != nil {
		stdin = &eofReader{r: opts.Stdin, done: stdinDone}
	}
	ioOpts := []cio.Opt{cio.WithStreams(stdin, stdout, stderr)}
	if opts.TTY {
		ioOpts = append(ioOpts, cio.WithTerminal)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	execID := "exec-" + hex.EncodeToString(b[:])
	proc, err := task.Exec(nctx, execID, &p, cio.NewCreator(ioOpts...))
	if err != nil {
		return -1, wrap(err, "exec in %s", id)
	}
	defer func() {
		if _, err := proc.Delete(context.WithoutCancel(nctx)); err != nil {
			r.log.Warn("delete exec process", "id", id, "exec", execID, "err", err)
		}
	}()
	exited, err := proc.Wait(nctx)
	if err != nil {
		return -1, wrap(err, "exec in %s: wait", id)
	}
	if err := proc.Start(nctx); err != nil {
		return -1, fmt.Errorf("exec in %s: %w: %s", id, runtime.ErrStart, runcReason(err))
	}
	if stdin != nil {
		execDone := make(chan struct{})
		defer close(execDone)
		go func() {
			select {
			case <-execDone:
			case <-stdinDone:
				if err := proc.CloseIO(nctx, containerd.WithStdinCloser); err != nil {
					r.log.Debug("close exec stdin", "id", id, "exec", execID, "err", err)
				}
			case <-nctx.Done():
			}
		}()
	}
	select {
	case s := <-exited:
		code, _, err := s.Result()
		if err != nil {
			return -1, wrap(err, "exec in %s: result", id)
		}
		// The copy of the output ends when the process's pipes close.
		proc.IO().Wait()
		return int(code), nil
	case <-ctx.Done():
		_ = proc.Kill(context.WithoutCancel(nctx), 9)
		return -1, fmt.Errorf("exec in %s: %w", id, ctx.Err())
	}
}

// eofReader closes done when its reader reports EOF (or any error).
type eofReader struct {
	r    io.Reader
	done chan struct{}
	once sync.Once
}

func (e *eofReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil {
		e.once.Do(func() { close(e.done) })
	}
	return n, err
}

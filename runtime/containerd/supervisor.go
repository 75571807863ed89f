package containerd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	containerd "github.com/containerd/containerd"
)

// SupervisorConfig configures StartSupervised.
type SupervisorConfig struct {
	// Binary is the containerd executable; empty looks "containerd" up
	// in PATH.
	Binary string
	// Root holds everything of the private containerd: root/, state/,
	// config.toml, containerd.sock and containerd.log (required). The
	// socket's path must stay under 100 bytes.
	Root string
	// Logger gets the supervisor's log; slog.Default() if nil.
	Logger *slog.Logger
	// ReadyTimeout bounds each wait for the socket to answer (default
	// 30 s).
	ReadyTimeout time.Duration
}

// Supervisor runs a private containerd and restarts it when it dies.
type Supervisor struct {
	fork   *forker
	cfg    SupervisorConfig
	log    *slog.Logger
	socket string
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
}

// Back-off between restarts: it doubles from restartMin up to restartMax
// and starts over once containerd ran for stableAfter.
const (
	restartMin  = 250 * time.Millisecond
	restartMax  = 10 * time.Second
	stableAfter = 30 * time.Second
	stopGrace   = 10 * time.Second
)

// StartSupervised writes the config, starts containerd, waits until its
// socket answers and returns; containerd then runs until ctx ends or Stop
// is called. Stopping containerd does not stop containers: their shims
// run on their own and a containerd started on the same Root finds them.
func StartSupervised(ctx context.Context, cfg SupervisorConfig) (*Supervisor, error) {
	if cfg.Root == "" {
		return nil, fmt.Errorf("%w: root is required", ErrConfig)
	}
	root, err := filepath.Abs(cfg.Root)
	if err != nil {
		return nil, fmt.Errorf("%w: root %q: %w", ErrConfig, cfg.Root, err)
	}
	cfg.Root = root
	if cfg.Binary == "" {
		cfg.Binary, err = exec.LookPath("containerd")
		if err != nil {
			return nil, fmt.Errorf("%w: binary: containerd is not installed (apt-get install containerd runc): %w", ErrConfig, err)
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ReadyTimeout <= 0 {
		cfg.ReadyTimeout = 30 * time.Second
	}
	s := &Supervisor{
		cfg:    cfg,
		log:    cfg.Logger.With("component", "containerd-supervisor"),
		socket: filepath.Join(root, "containerd.sock"),
		done:   make(chan struct{}),
	}
	if len(s.socket) > 100 {
		return nil, fmt.Errorf("%w: root: socket path %s is longer than a unix socket allows", ErrConfig, s.socket)
	}
	if err := s.writeConfig(); err != nil {
		return nil, err
	}
	if err := s.clearSocket(); err != nil {
		return nil, err
	}
	s.fork = newForker()
	if err := s.start(ctx); err != nil {
		s.fork.close()
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	go func() {
		select {
		case <-ctx.Done():
			cancel()
		case <-runCtx.Done():
		}
	}()
	go s.run(runCtx)
	return s, nil
}

// Socket is the private containerd's gRPC socket.
func (s *Supervisor) Socket() string { return s.socket }

// Pid is the current containerd process's id, 0 between restarts.
func (s *Supervisor) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Done is closed once containerd has been stopped for good.
func (s *Supervisor) Done() <-chan struct{} { return s.done }

// Stop stops containerd (SIGTERM, then SIGKILL after 10 s) and returns
// once it has exited. Containers keep running.
func (s *Supervisor) Stop() error {
	s.cancel()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *Supervisor) writeConfig() error {
	for _, d := range []string{"root", "state", "opt"} {
		if err := os.MkdirAll(filepath.Join(s.cfg.Root, d), 0o711); err != nil {
			return fmt.Errorf("containerd root: %w", err)
		}
	}
	q := func(p string) string { return fmt.Sprintf("%q", filepath.Join(s.cfg.Root, p)) }
	// The CRI plugin is off: outpost is its only client and talks the
	// containerd API; CRI would want its own config and CNI.
	conf := strings.Join([]string{
		"# Written by outpost; rewritten at every start.",
		"version = 2",
		"root = " + q("root"),
		"state = " + q("state"),
		`disabled_plugins = ["io.containerd.grpc.v1.cri"]`,
		"",
		"[grpc]",
		"  address = " + q("containerd.sock"),
		"",
		"[ttrpc]",
		"  address = " + q("containerd.sock.ttrpc"),
		"",
		"[debug]",
		`  address = ""`,
		"",
		`[plugins."io.containerd.internal.v1.opt"]`,
		"  path = " + q("opt"),
		"",
	}, "\n")
	if err := os.WriteFile(filepath.Join(s.cfg.Root, "config.toml"), []byte(conf), 0o600); err != nil {
		return fmt.Errorf("containerd config: %w", err)
	}
	return nil
}

// clearSocket removes a stale socket file, refusing if a containerd still
// answers on it.
func (s *Supervisor) clearSocket() error {
	c, err := net.DialTimeout("unix", s.socket, time.Second)
	if err == nil {
		c.Close()
		return fmt.Errorf("%w: %s", ErrSocketInUse, s.socket)
	}
	for _, p := range []string{s.socket, s.socket + ".ttrpc"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove stale socket: %w", err)
		}
	}
	return nil
}

// start launches containerd and waits until it answers.
func (s *Supervisor) start(ctx context.Context) error {
	logf, err := os.OpenFile(filepath.Join(s.cfg.Root, "containerd.log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return fmt.Errorf("containerd log: %w", err)
	}
	cmd := exec.Command(s.cfg.Binary, "--config", filepath.Join(s.cfg.Root, "config.toml"))
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = procAttr()
	cmd.Dir = s.cfg.Root
	if err := s.fork.start(cmd); err != nil {
		logf.Close()
		return fmt.Errorf("start containerd: %w", err)
	}
	logf.Close() // the child holds its own copy
	exited := make(chan struct{})
	go func() {
		// Reaped here only; run() waits on exited.
		_ = cmd.Wait()
		close(exited)
	}()
	s.mu.Lock()
	s.cmd = cmd
	s.exited = exited
	s.mu.Unlock()
	s.log.Info("containerd started", "pid", cmd.Process.Pid, "socket", s.socket)
	if err := s.waitReady(ctx, exited); err != nil {
		_ = cmd.Process.Kill()
		<-exited
		return err
	}
	return nil
}

// waitReady polls until containerd's version call answers.
func (s *Supervisor) waitReady(ctx context.Context, exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ReadyTimeout)
	defer cancel()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		if _, err := os.Stat(s.socket); err == nil {
			c, err := containerd.New(s.socket, containerd.WithTimeout(time.Second))
			if err == nil {
				_, err = c.Version(ctx)
				c.Close()
				if err == nil {
					return nil
				}
			}
		}
		select {
		case <-exited:
			return fmt.Errorf("containerd exited at start; see %s", filepath.Join(s.cfg.Root, "containerd.log"))
		case <-ctx.Done():
			return fmt.Errorf("containerd did not answer on %s: %w", s.socket, ctx.Err())
		case <-t.C:
		}
	}
}

// run restarts containerd when it dies, until ctx ends; then it stops it.
func (s *Supervisor) run(ctx context.Context) {
	defer close(s.done)
	defer s.fork.close()
	backoff := restartMin
	for {
		s.mu.Lock()
		cmd, exited := s.cmd, s.exited
		s.mu.Unlock()
		started := time.Now()
		select {
		case <-ctx.Done():
			s.stop(cmd, exited)
			return
		case <-exited:
		}
		if time.Since(started) > stableAfter {
			backoff = restartMin
		}
		s.log.Warn("containerd exited; restarting", "pid", cmd.Process.Pid, "state", cmd.ProcessState.String(), "backoff", backoff)
		for {
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			backoff = min(backoff*2, restartMax)
			if err := s.clearSocket(); err != nil {
				s.log.Error("containerd restart", "err", err)
				continue
			}
			if err := s.start(ctx); err != nil {
				s.log.Error("containerd restart", "err", err)
				continue
			}
			break
		}
	}
}

func (s *Supervisor) stop(cmd *exec.Cmd, exited <-chan struct{}) {
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		s.log.Warn("SIGTERM containerd", "err", err)
	}
	t := time.NewTimer(stopGrace)
	defer t.Stop()
	select {
	case <-exited:
	case <-t.C:
		s.log.Warn("containerd ignored SIGTERM; killing", "pid", cmd.Process.Pid)
		_ = cmd.Process.Kill()
		<-exited
	}
	s.log.Info("containerd stopped", "pid", cmd.Process.Pid)
}

// forker starts processes from one OS thread, locked for the supervisor's
// life. The kernel's parent-death signal (Pdeathsig, which kills
// containerd if the agent dies) follows the thread that forked the child,
// not the process, and Go ends a thread that a goroutine leaves locked:
// the agent's network namespace code does that for every pod network
// (internal/linuxns). Forked from any thread, containerd was SIGKILLed
// whenever such a goroutine happened to run on that thread and end.
type forker struct{ reqs chan forkReq }

type forkReq struct {
	cmd  *exec.Cmd
	done chan error
}

func newForker() *forker {
	f := &forker{reqs: make(chan forkReq)}
	ready := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		close(ready)
		for r := range f.reqs {
			r.done <- r.cmd.Start()
		}
	}()
	<-ready
	return f
}

// start runs cmd.Start on the forker's thread.
func (f *forker) start(cmd *exec.Cmd) error {
	r := forkReq{cmd: cmd, done: make(chan error, 1)}
	f.reqs <- r
	return <-r.done
}

// close ends the forker once nothing it started runs any more.
func (f *forker) close() { close(f.reqs) }

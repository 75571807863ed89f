package fake

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/outpost-edge/outpost/runtime"
)

// nextPid numbers simulated processes, unique per test binary.
var nextPid atomic.Uint32

func init() { nextPid.Store(1000) }

// logLine is one line of a container's output.
type logLine struct {
	at     time.Time
	stream string
	text   string
}

// container is one container and its simulated process.
type container struct {
	// onExit is told when the process ends (WatchExits).
	onExit  func(id string)
	spec    runtime.ContainerSpec
	img     *image
	imgName string

	mu     sync.Mutex
	status runtime.ContainerStatus
	log    []logLine
	// changed is closed and replaced whenever the log or state changes,
	// so followers wait on a channel (virtual time friendly).
	changed chan struct{}
	// signals to the running process; exited is closed when it ends.
	sig    chan syscall.Signal
	exited chan struct{}
	// forced carries a code (and reason) a knob imposes.
	forced chan forcedExit
	// memory is the working set the process holds and cpu the CPU time
	// it used (testbin hold, or the SetUsage knob).
	memory uint64
	cpu    time.Duration
}

type forcedExit struct {
	code   int32
	reason string
}

func (c *container) snapshot() runtime.ContainerStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.status
	st.Labels = maps.Clone(c.status.Labels)
	return st
}

// notifyLocked wakes followers; c.mu must be held.
func (c *container) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

func (c *container) write(stream, text string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log = append(c.log, logLine{at: time.Now(), stream: stream, text: text})
	c.notifyLocked()
}

// argv applies Kubernetes' rules to the image's entrypoint and cmd.
func (c *container) argv() []string {
	if len(c.spec.Command) > 0 {
		return append(slices.Clone(c.spec.Command), c.spec.Args...)
	}
	if len(c.spec.Args) > 0 {
		return append(slices.Clone(c.img.entrypoint), c.spec.Args...)
	}
	return append(slices.Clone(c.img.entrypoint), c.img.cmd...)
}

// lookup checks that argv[0] is an executable file of the image, with
// runc's wording when it is not.
func (c *container) lookup(argv []string) error {
	if len(argv) == 0 {
		return fmt.Errorf("exec: no command")
	}
	p := argv[0]
	if !strings.HasPrefix(p, "/") {
		found := ""
		for _, dir := range []string{"/", "/bin", "/usr/bin", "/usr/local/bin"} {
			if _, ok := c.img.files[path.Join(dir, p)]; ok {
				found = path.Join(dir, p)
				break
			}
		}
		if found == "" {
			return fmt.Errorf("exec: %q: executable file not found in $PATH", p)
		}
		p = found
	}
	f, ok := c.img.files[p]
	if !ok {
		return fmt.Errorf("exec: %q: stat %s: no such file or directory", argv[0], argv[0])
	}
	if f.Mode&0o111 == 0 {
		return fmt.Errorf("exec: %q: permission denied", argv[0])
	}
	return nil
}

func (c *container) start() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.status.State != runtime.StateCreated {
		if c.status.Reason == "StartError" {
			return fmt.Errorf("container %s: %w: %s", c.spec.ID, runtime.ErrStart, c.status.Message)
		}
		return fmt.Errorf("container %s: %w: already started", c.spec.ID, runtime.ErrStart)
	}
	argv := c.argv()
	now := time.Now()
	if err := c.lookup(argv); err != nil {
		c.status.State = runtime.StateExited
		c.status.ExitCode = 128
		c.status.Reason = "StartError"
		c.status.Message = err.Error()
		c.status.FinishedAt = now
		c.notifyLocked()
		return fmt.Errorf("container %s: %w: %s", c.spec.ID, runtime.ErrStart, err.Error())
	}
	c.status.State = runtime.StateRunning
	c.status.StartedAt = now
	c.status.Pid = nextPid.Add(1)
	c.sig = make(chan syscall.Signal, 8)
	c.exited = make(chan struct{})
	c.forced = make(chan forcedExit, 1)
	c.notifyLocked()
	p := &proc{c: c, sig: c.sig, forced: c.forced, stdout: streamWriter{c, "stdout"}, stderr: streamWriter{c, "stderr"}}
	go func() {
		code, reason := p.run(argv[1:])
		c.exit(code, reason)
	}()
	return nil
}

func (c *container) exit(code int32, reason string) {
	if c.onExit != nil {
		// After c.mu is released: watchers may read the status at once.
		defer c.onExit(c.spec.ID)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if reason == "" {
		reason = "Completed"
		if code != 0 {
			reason = "Error"
		}
	}
	c.status.State = runtime.StateExited
	c.status.ExitCode = code
	c.status.Reason = reason
	c.status.Pid = 0
	c.status.FinishedAt = time.Now()
	close(c.exited)
	c.notifyLocked()
}

func (c *container) force(code int32, reason string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.status.State != runtime.StateRunning {
		return false
	}
	select {
	case c.forced <- forcedExit{code, reason}:
	default:
	}
	return true
}

func (c *container) stop(ctx context.Context, grace time.Duration) error {
	c.mu.Lock()
	if c.status.State != runtime.StateRunning {
		c.mu.Unlock()
		return nil
	}
	sig, exited := c.sig, c.exited
	c.mu.Unlock()
	send := func(s syscall.Signal) {
		select {
		case sig <- s:
		default: // enough signals pending already
		}
	}
	if grace > 0 {
		send(syscall.SIGTERM)
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-exited:
			return nil
		case <-t.C:
		case <-ctx.Done():
			return fmt.Errorf("container %s: stop: %w", c.spec.ID, ctx.Err())
		}
	}
	send(syscall.SIGKILL)
	select {
	case <-exited:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("container %s: stop: %w", c.spec.ID, ctx.Err())
	}
}

func (c *container) logs(ctx context.Context, opts runtime.LogOptions, w io.Writer) error {
	write := func(l logLine) error {
		var b bytes.Buffer
		if opts.Timestamps {
			b.WriteString(l.at.UTC().Format(time.RFC3339Nano))
			b.WriteByte(' ')
		}
		b.WriteString(l.text)
		b.WriteByte('\n')
		if _, err := w.Write(b.Bytes()); err != nil {
			return fmt.Errorf("write log: %w", err)
		}
		return nil
	}
	c.mu.Lock()
	lines := slices.Clone(c.log)
	changed := c.changed
	done := c.status.State == runtime.StateExited
	c.mu.Unlock()
	start := 0
	if opts.TailLines > 0 && len(lines) > opts.TailLines {
		start = len(lines) - opts.TailLines
	}
	for _, l := range lines[start:] {
		if err := write(l); err != nil {
			return err
		}
	}
	if !opts.Follow {
		return nil
	}
	next := len(lines)
	for !done {
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		}
		c.mu.Lock()
		lines = slices.Clone(c.log[next:])
		next = len(c.log)
		changed = c.changed
		done = c.status.State == runtime.StateExited
		c.mu.Unlock()
		for _, l := range lines {
			if err := write(l); err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *container) exec(ctx context.Context, opts runtime.ExecOptions) (int, error) {
	c.mu.Lock()
	running := c.status.State == runtime.StateRunning
	c.mu.Unlock()
	if !running {
		return -1, fmt.Errorf("exec in %s: container is not running", c.spec.ID)
	}
	if err := c.lookup(opts.Command); err != nil {
		return -1, fmt.Errorf("exec in %s: %w: %s", c.spec.ID, runtime.ErrStart, err.Error())
	}
	stdout, stderr := opts.Stdout, opts.Stderr
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	if opts.TTY {
		stderr = stdout
	}
	// An exec'd process gets no signals from stop; it ends with ctx.
	sig := make(chan syscall.Signal)
	p := &proc{c: c, sig: sig, forced: make(chan forcedExit), stdout: lineWriter{stdout}, stderr: lineWriter{stderr}, ctx: ctx, stdin: opts.Stdin}
	code, _ := p.run(opts.Command[1:])
	if err := ctx.Err(); err != nil {
		return -1, fmt.Errorf("exec in %s: %w", c.spec.ID, err)
	}
	return int(code), nil
}

// lines are what the simulated process writes, one line per call.
type lines interface{ line(text string) }

type streamWriter struct {
	c      *container
	stream string
}

func (s streamWriter) line(text string) { s.c.write(s.stream, text) }

type lineWriter struct{ w io.Writer }

func (l lineWriter) line(text string) { _, _ = io.WriteString(l.w, text+"\n") }

// proc is one simulated run of the test binary.
type proc struct {
	c      *container
	sig    <-chan syscall.Signal
	forced <-chan forcedExit
	stdout lines
	stderr lines
	ctx    context.Context // exec only
	stdin  io.Reader       // exec only
}

// Exit codes of a Go program killed by a signal, as runc reports them.
const (
	codeKilled     = 128 + int32(syscall.SIGKILL)
	codeTerminated = 128 + int32(syscall.SIGTERM)
)

// wait blocks for d (forever if d < 0) and returns ended=true with the
// exit code if a signal or a knob ended the process meanwhile. onTerm
// handles SIGTERM: nil means Go's default (die), ignore means keep going.
func (p *proc) wait(d time.Duration, onTerm func() int32, ignoreTerm bool) (code int32, reason string, ended bool) {
	var timer <-chan time.Time
	if d >= 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timer = t.C
	}
	var ctxDone <-chan struct{}
	if p.ctx != nil {
		ctxDone = p.ctx.Done()
	}
	for {
		select {
		case <-timer:
			return 0, "", false
		case <-ctxDone:
			return codeKilled, "", true
		case f := <-p.forced:
			return f.code, f.reason, true
		case s := <-p.sig:
			switch {
			case s == syscall.SIGKILL:
				return codeKilled, "", true
			case ignoreTerm:
			case onTerm != nil:
				return onTerm(), "", true
			default:
				return codeTerminated, "", true
			}
		}
	}
}

// run simulates testbin's commands (runtime/runtimetest/testbin).
func (p *proc) run(args []string) (int32, string) {
	if len(args) == 0 {
		p.stderr.line("usage: testbin COMMAND [ARGS]")
		return 2, ""
	}
	rest := args[1:]
	atoi := func(i, def int) int {
		if len(rest) > i {
			if n, err := strconv.Atoi(rest[i]); err == nil {
				return n
			}
		}
		return def
	}
	switch args[0] {
	case "sleep":
		p.stdout.line("sleeping")
		code, reason, _ := p.wait(-1, func() int32 { p.stdout.line("got SIGTERM"); return 0 }, false)
		return code, reason
	case "ignore-term":
		p.stdout.line("ignoring SIGTERM")
		code, reason, _ := p.wait(-1, nil, true)
		return code, reason
	case "exit":
		n := atoi(0, 0)
		p.stdout.line(fmt.Sprintf("exiting %d", n))
		return int32(n), ""
	case "echo":
		p.stdout.line(strings.Join(rest, " "))
	case "stderr":
		p.stderr.line(strings.Join(rest, " "))
	case "lines":
		for i := 1; i <= atoi(0, 0); i++ {
			if i%2 == 1 {
				p.stdout.line(fmt.Sprintf("line %d", i))
			} else {
				p.stderr.line(fmt.Sprintf("line %d", i))
			}
		}
	case "ticks":
		n, ms := atoi(0, 5), atoi(1, 100)
		for i := 1; i <= n; i++ {
			p.stdout.line(fmt.Sprintf("tick %d", i))
			if code, reason, ended := p.wait(time.Duration(ms)*time.Millisecond, nil, false); ended {
				return code, reason
			}
		}
	case "env":
		p.env(rest)
	case "cat":
		if p.stdin != nil {
			b, err := io.ReadAll(p.stdin)
			if err != nil {
				p.stderr.line(err.Error())
				return 1, ""
			}
			for _, l := range strings.SplitAfter(string(b), "\n") {
				if l != "" {
					p.stdout.line(strings.TrimSuffix(l, "\n"))
				}
			}
		}
		p.stdout.line("EOF")
	case "limits":
		p.limits()
	case "listen":
		return p.listen(rest)
	case "mount-check":
		return p.mountCheck(rest)
	case "hold":
		p.c.mu.Lock()
		p.c.memory = uint64(atoi(0, 0)) << 20
		// Touching every page costs CPU time, as it does for real.
		p.c.cpu += 5 * time.Millisecond
		p.c.mu.Unlock()
		p.stdout.line("holding")
		code, reason, _ := p.wait(-1, func() int32 { return 0 }, false)
		return code, reason
	case "oom":
		if p.c.spec.Resources.MemoryBytes > 0 {
			return codeKilled, "OOMKilled"
		}
		code, reason, _ := p.wait(-1, nil, false)
		return code, reason
	default:
		p.stderr.line(fmt.Sprintf("testbin: unknown command %q", args[0]))
		return 2, ""
	}
	return 0, ""
}

func (p *proc) env(args []string) {
	wd := p.c.spec.WorkingDir
	if wd == "" {
		wd = p.c.img.workingDir
	}
	if wd == "" {
		wd = "/"
	}
	env := map[string]string{}
	for _, list := range [][]string{p.c.img.env, p.c.spec.Env} {
		for _, e := range list {
			k, v, _ := strings.Cut(e, "=")
			env[k] = v
		}
	}
	p.stdout.line("ARGS=" + strings.Join(args, ","))
	p.stdout.line("CWD=" + wd)
	for _, k := range slices.Sorted(maps.Keys(env)) {
		p.stdout.line("ENV " + k + "=" + env[k])
	}
}

func (p *proc) limits() {
	res := p.c.spec.Resources
	val := func(v int64) string {
		if v <= 0 {
			return "max"
		}
		return strconv.FormatInt(v, 10)
	}
	quota := "max"
	if res.CPUMillis > 0 {
		quota = strconv.FormatInt(res.CPUMillis*100, 10)
	}
	shares := int64(1024)
	if res.CPURequestMillis > 0 {
		shares = max(res.CPURequestMillis*1024/1000, 2)
	}
	p.stdout.line(fmt.Sprintf("cgroup=fake memory=%s cpu_quota=%s cpu_period=100000 cpu_shares=%d pids=%s",
		val(res.MemoryBytes), quota, shares, val(res.PIDs)))
}

// listen opens a real port on 127.0.0.1 (the fake's only real I/O), as
// the host-network container would.
func (p *proc) listen(args []string) (int32, string) {
	port := "8080"
	if len(args) > 0 {
		port = args[0]
	}
	ln, err := net.Listen("tcp", "127.0.0.1:"+port)
	if err != nil {
		p.stderr.line(err.Error())
		return 1, ""
	}
	defer ln.Close()
	p.stdout.line("listening on " + ln.Addr().String())
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, "hello from testbin\n")
			c.Close()
		}
	}()
	code, reason, _ := p.wait(-1, func() int32 { return 0 }, false)
	return code, reason
}

// mountCheck reads DIR/in.txt and writes DIR/out.txt through the
// container's mounts, on the host's files.
func (p *proc) mountCheck(args []string) (int32, string) {
	dir := "/mnt"
	if len(args) > 0 {
		dir = args[0]
	}
	var host string
	readOnly := false
	for _, m := range p.c.spec.Mounts {
		if m.ContainerPath == dir {
			host, readOnly = m.HostPath, m.ReadOnly
		}
	}
	if host == "" {
		p.stderr.line("open " + dir + "/in.txt: no such file or directory")
		return 1, ""
	}
	b, err := os.ReadFile(path.Join(host, "in.txt"))
	if err != nil {
		p.stderr.line(err.Error())
		return 1, ""
	}
	p.stdout.line("read " + strings.TrimSpace(string(b)))
	if readOnly {
		p.stderr.line("open " + dir + "/out.txt: read-only file system")
		return 1, ""
	}
	if err := os.WriteFile(path.Join(host, "out.txt"), []byte("written by container\n"), 0o644); err != nil {
		p.stderr.line(err.Error())
		return 1, ""
	}
	return 0, ""
}

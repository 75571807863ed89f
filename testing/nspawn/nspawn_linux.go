package nspawn

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/internal/realtest"

	"github.com/outpost-edge/outpost/testing/proc"
)

var (
	// ErrUnavailable is a host asked for on a machine that cannot boot one.
	ErrUnavailable = errors.New("nspawn hosts need root, systemd-nspawn, debootstrap, nsenter and unshare (apt-get install systemd-container debootstrap)")
	// ErrNotRunning is a command for a host whose systemd is not up: it is
	// between two boots, or has not started yet.
	ErrNotRunning = errors.New("nspawn: host is not running")
	// ErrExited is a wait for a host that has powered off or failed; Err
	// says how it ended.
	ErrExited = errors.New("nspawn: host has exited")
)

// rebootStatus is systemd-nspawn's exit status when the container's
// systemd rebooted (systemd-nspawn@.service restarts it on this status).
const rebootStatus = 133

// cgroupBase is the directory, in each cgroup hierarchy systemd uses, that
// holds one cgroup per host (see Boot).
const cgroupBase = "outpost-nspawn"

// Options say what a host is made of.
type Options struct {
	// NetNS is a network namespace from testing/netns (its Name) the host
	// runs in; it then has that namespace's address and route. Empty gives
	// it a network of its own with only loopback.
	NetNS string
	// Hostname, if set, is the host's hostname; it defaults to the
	// machine's name.
	Hostname string
	// Binds are paths of this machine made visible inside the host.
	Binds []Bind
	// Files are written into the host's filesystem before its first
	// boot, by absolute path inside it; missing directories are made. A
	// path leading through an absolute symlink (as /var/run) is refused.
	Files map[string]File
	// Enable are units enabled before the first boot, as `systemctl
	// enable` would (a unit written through Files, say).
	Enable []string
	// Args are further systemd-nspawn arguments, before the ones for the
	// container's systemd.
	Args []string
	// Rootfs is the read-only tree the host starts from; it defaults to
	// the cached Debian base (MustRootfs).
	Rootfs string
}

// Bind is a path of this machine bind-mounted into a host.
type Bind struct {
	// Source is the path on this machine, Target the path inside the
	// host (made if missing); neither may contain a colon.
	Source, Target string
	ReadOnly       bool
}

// File is a file written into a host before it boots.
type File struct {
	Content string
	// Mode defaults to 0644.
	Mode fs.FileMode
}

// Host is a booted systemd-nspawn container: a machine with its own
// systemd as PID 1, which reboots like one.
type Host struct {
	// Name is the machine's name, unique on this machine.
	Name string

	t        testing.TB
	dir      string // everything of the host: layers, console log
	root     string // the host's "/" as seen from here
	overlay  bool   // root is an overlay mount (not a copy)
	console  *os.File
	args     []string // systemd-nspawn and its arguments
	cgroups  []string // the host's cgroup in each hierarchy
	exited   chan struct{}
	supervis chan struct{} // closed when the supervising goroutine ends

	mu       sync.Mutex
	cmd      *exec.Cmd // the current boot's systemd-nspawn
	boots    int
	leader   int // the current boot's systemd, on this machine; 0 not known yet
	stopping bool
	// cut is set by PowerCut: the boot that ends next is followed by
	// another, as after a reboot.
	cut bool
	err error

	closeOnce sync.Once
	closeErr  error
}

// Available reports whether hosts can be booted here, and what is missing
// if not.
func Available() error {
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "not root")
	}
	for _, b := range []string{"systemd-nspawn", "debootstrap", "nsenter", "unshare", "systemctl"} {
		if _, err := exec.LookPath(b); err != nil {
			missing = append(missing, b+" not installed")
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s", ErrUnavailable, strings.Join(missing, ", "))
	}
	return nil
}

// Require skips the test when hosts cannot be booted here, unless
// OUTPOST_TEST_REAL=1 (as `make test` sets) says the real parts must be
// tested, in which case it fails.
func Require(t testing.TB) {
	t.Helper()
	realtest.RequireNoError(t, Available())
}

// seq numbers the hosts of this process; with the process ID it makes
// machine names unique on the machine.
var seq atomic.Int64

// Boot starts a host and returns without waiting for its systemd: call
// WaitRunning. The host is powered off and removed when the test ends,
// and its console log is shown if the test failed.
//
// The host's filesystem is an overlay: the shared base below, read-only,
// and a directory of the test's above, which takes every write and lives
// across the host's reboots. Where overlayfs cannot be mounted, the base
// is copied instead (cp --reflink=auto, seconds to minutes).
func Boot(t testing.TB, opts Options) *Host {
	t.Helper()
	if err := Available(); err != nil {
		t.Fatal(err)
	}
	base := opts.Rootfs
	if base == "" {
		base = MustRootfs(t)
	}
	dir := t.TempDir() // before Cleanup below, so removed after it ran
	h := &Host{
		Name:     fmt.Sprintf("opns%d-%d", os.Getpid()%100000, seq.Add(1)),
		t:        t,
		dir:      dir,
		root:     filepath.Join(dir, "root"),
		exited:   make(chan struct{}),
		supervis: make(chan struct{}),
	}
	t.Cleanup(func() {
		if err := h.Close(); err != nil {
			t.Errorf("host %s: %v", h.Name, err)
		}
		if t.Failed() {
			h.logConsoleTail(80)
		}
	})
	if err := h.setUp(base, opts); err != nil {
		t.Fatalf("host %s: %v", h.Name, err)
	}
	t.Logf("host %s: booting (root %s, console log %s)", h.Name, h.root, h.ConsoleLog())
	return h
}

// netSysfsUnit shows a host in a network namespace its own interfaces
// under /sys/class/net (see setUp).
const netSysfsUnit = "outpost-test-netsysfs.service"

const netSysfsUnitText = `[Unit]
Description=sysfs of this network namespace under /sys/class/net (test harness)
DefaultDependencies=no
Before=sysinit.target network-pre.target
[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh -c 'mkdir -p /run/netsysfs && mount -t sysfs sysfs /run/netsysfs && mount --bind /run/netsysfs/class/net /sys/class/net && mount --bind /run/netsysfs/devices/virtual/net /sys/devices/virtual/net'
[Install]
WantedBy=sysinit.target
`

func (h *Host) setUp(base string, opts Options) error {
	if err := h.makeRoot(base); err != nil {
		return err
	}
	if err := writeFiles(h.root, opts.Files); err != nil {
		return err
	}
	if opts.NetNS != "" {
		// nspawn joining a network namespace by path leaves the sysfs it
		// mounts showing this machine's interfaces, not the host's, so a
		// program inside that looks its interface up there (the agent's
		// network check) finds it absent. A unit early in each boot binds
		// a sysfs mounted from inside the namespace over the net parts.
		if err := writeFiles(h.root, map[string]File{"/etc/systemd/system/" + netSysfsUnit: {Content: netSysfsUnitText}}); err != nil {
			return err
		}
		opts.Enable = append(slices.Clone(opts.Enable), netSysfsUnit)
	}
	if len(opts.Enable) > 0 {
		// The host's systemctl would need the host running; this
		// machine's, pointed at the tree, makes the same links offline.
		out, err := exec.Command("systemctl", append([]string{"--root=" + h.root, "enable"}, opts.Enable...)...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("enable %v: %w: %s", opts.Enable, err, bytes.TrimSpace(out))
		}
	}
	cgroups, err := makeCgroups(h.Name)
	h.cgroups = cgroups // what was made is removed by Close even on error
	if err != nil {
		return err
	}
	h.console, err = os.OpenFile(h.ConsoleLog(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("console log: %w", err)
	}
	h.args, err = nspawnArgs(h.Name, h.root, opts)
	if err != nil {
		return err
	}
	h.mu.Lock()
	err = h.start()
	h.mu.Unlock()
	if err != nil {
		close(h.exited)
		close(h.supervis)
		return err
	}
	go h.supervise()
	return nil
}

// makeRoot mounts the overlay that is the host's root, or copies the base
// where overlayfs does not work.
func (h *Host) makeRoot(base string) error {
	upper, work := filepath.Join(h.dir, "upper"), filepath.Join(h.dir, "work")
	for _, d := range []string{upper, work, h.root} {
		// 0755: the upper directory's mode is the mode of the host's "/".
		if err := os.Mkdir(d, 0o755); err != nil {
			return fmt.Errorf("make root: %w", err)
		}
	}
	data := "lowerdir=" + base + ",upperdir=" + upper + ",workdir=" + work
	err := syscall.Mount("overlay", h.root, "overlay", 0, data)
	if err == nil {
		h.overlay = true
		return nil
	}
	h.t.Logf("host %s: overlayfs failed (%v); copying the base instead", h.Name, err)
	out, cerr := exec.Command("cp", "-a", "--reflink=auto", base+"/.", h.root).CombinedOutput()
	if cerr != nil {
		return fmt.Errorf("copy base %s: %w: %s", base, cerr, bytes.TrimSpace(out))
	}
	return nil
}

// writeFiles writes files into the tree at root. It goes through os.Root
// so that a symlink in the tree cannot send a write out of it: the
// tree's absolute symlinks mean the host's paths, not this machine's.
func writeFiles(root string, files map[string]File) error {
	if len(files) == 0 {
		return nil
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return fmt.Errorf("write files: %w", err)
	}
	defer r.Close()
	for _, p := range slices.Sorted(maps.Keys(files)) {
		f := files[p]
		if !filepath.IsAbs(p) {
			return fmt.Errorf("write file %q: path is not absolute", p)
		}
		rel := strings.TrimPrefix(filepath.Clean(p), "/")
		mode := f.Mode
		if mode == 0 {
			mode = 0o644
		}
		if err := r.MkdirAll(filepath.Dir(rel), 0o755); err != nil {
			return fmt.Errorf("write file %s: %w", p, err)
		}
		if err := r.WriteFile(rel, []byte(f.Content), mode); err != nil {
			return fmt.Errorf("write file %s: %w", p, err)
		}
		// WriteFile's mode passes through the umask and is not applied
		// to a file that was there already.
		if err := r.Chmod(rel, mode); err != nil {
			return fmt.Errorf("write file %s: %w", p, err)
		}
	}
	return nil
}

// cgroupHierarchies lists where systemd keeps its cgroups on this
// machine: the named v1 hierarchy and the v2 one of a hybrid setup, or
// the v2 hierarchy alone.
func cgroupHierarchies() []string {
	const (
		cgroup1Magic = 0x27e0eb
		cgroup2Magic = 0x63677270
	)
	is := func(path string, magic int64) bool {
		var st syscall.Statfs_t
		return syscall.Statfs(path, &st) == nil && int64(st.Type) == magic
	}
	if is("/sys/fs/cgroup", cgroup2Magic) {
		return []string{"/sys/fs/cgroup"}
	}
	var out []string
	if is("/sys/fs/cgroup/unified", cgroup2Magic) {
		out = append(out, "/sys/fs/cgroup/unified")
	}
	if is("/sys/fs/cgroup/systemd", cgroup1Magic) {
		out = append(out, "/sys/fs/cgroup/systemd")
	}
	return out
}

// makeCgroups makes the host's own cgroup in each hierarchy systemd uses.
// Without systemd on this machine, systemd-nspawn --keep-unit puts the
// container below whatever cgroup it was started in; two hosts started
// from the same test would share one and trample each other's
// "payload" cgroup, and nothing would remove it afterwards.
func makeCgroups(name string) ([]string, error) {
	var made []string
	for _, h := range cgroupHierarchies() {
		d := filepath.Join(h, cgroupBase, name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return made, fmt.Errorf("make cgroup: %w", err)
		}
		made = append(made, d)
	}
	if len(made) == 0 {
		return nil, errors.New("make cgroup: no systemd or cgroup2 hierarchy under /sys/fs/cgroup")
	}
	return made, nil
}

// nspawnArgs is the systemd-nspawn command line of a host.
func nspawnArgs(name, root string, opts Options) ([]string, error) {
	args := []string{
		"systemd-nspawn",
		"--boot",
		"--directory=" + root,
		"--machine=" + name,
		// No systemd-machined here (this machine's PID 1 is not systemd)
		// to register with, and no systemd to make a scope unit through:
		// nspawn stays in the cgroup it is started in, the host's own.
		"--register=no",
		"--keep-unit",
		// The agent inside manages containers and reboots the host.
		"--capability=all",
		// Output only: nobody types into a host, and with a pty systemd's
		// boot messages read as on a real console.
		"--console=read-only",
		// Nothing of the host's journal on this machine.
		"--link-journal=no",
		// A console log free of colour escapes.
		"--setenv=SYSTEMD_COLORS=0",
	}
	if opts.NetNS != "" {
		args = append(args, "--network-namespace-path=/run/netns/"+opts.NetNS)
	} else {
		args = append(args, "--private-network")
	}
	if opts.Hostname != "" {
		args = append(args, "--hostname="+opts.Hostname)
	}
	for _, b := range opts.Binds {
		if strings.Contains(b.Source+b.Target, ":") || !filepath.IsAbs(b.Source) || !filepath.IsAbs(b.Target) {
			return nil, fmt.Errorf("bind %s to %s: paths must be absolute and without colons", b.Source, b.Target)
		}
		flag := "--bind="
		if b.ReadOnly {
			flag = "--bind-ro="
		}
		args = append(args, flag+b.Source+":"+b.Target)
	}
	return append(args, opts.Args...), nil
}

// start starts systemd-nspawn for the next boot; h.mu is held.
//
// It runs through a shell that first moves itself into the host's
// cgroups: systemd-nspawn reads its cgroup as it starts, so the move must
// come before, and Go can only start a process in a cgroup2 cgroup.
func (h *Host) start() error {
	h.boots++
	h.leader = 0
	fmt.Fprintf(h.console, "\n==== nspawn harness: boot %d of %s at %s ====\n", h.boots, h.Name, time.Now().Format(time.RFC3339Nano))
	script := `for g in $OUTPOST_NSPAWN_CGROUPS; do echo $$ > "$g/cgroup.procs" || exit 1; done; unset OUTPOST_NSPAWN_CGROUPS; exec "$@"`
	cmd := exec.Command("/bin/sh", append([]string{"-c", script, "sh"}, h.args...)...)
	cmd.Env = append(os.Environ(),
		"OUTPOST_NSPAWN_CGROUPS="+strings.Join(h.cgroups, " "),
		// Lock files would go to /run/systemd/nspawn/locks, which is on
		// disk on a machine without systemd and would outlive a crash;
		// each host's tree is its own anyway.
		"SYSTEMD_NSPAWN_LOCK=0",
	)
	cmd.Stdout, cmd.Stderr = h.console, h.console
	// If the test binary dies, systemd-nspawn powers the host off
	// (SIGTERM is its signal for that) rather than leave it running.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start systemd-nspawn: %w", err)
	}
	h.cmd = cmd
	return nil
}

// supervise waits for each boot's systemd-nspawn to end: a reboot (status
// 133) starts the next boot on the same tree, anything else is the end.
func (h *Host) supervise() {
	defer close(h.supervis)
	for {
		h.mu.Lock()
		cmd := h.cmd
		h.mu.Unlock()
		err := cmd.Wait()

		h.mu.Lock()
		var exit *exec.ExitError
		cut := h.cut
		h.cut = false
		if cut && !h.stopping {
			// Nothing of the cut boot lives on into the next.
			for range 100 {
				if killCgroups(h.cgroups) == 0 {
					break
				}
				time.Sleep(20 * time.Millisecond) // processes take a moment to die
			}
		}
		if (cut || errors.As(err, &exit) && exit.ExitCode() == rebootStatus) && !h.stopping {
			if err = h.start(); err == nil {
				h.mu.Unlock()
				continue
			}
		}
		if err != nil {
			h.err = fmt.Errorf("host %s, boot %d: systemd-nspawn: %w", h.Name, h.boots, err)
		}
		h.leader = 0
		close(h.exited)
		h.mu.Unlock()
		return
	}
}

// Boots returns how many times the host has been booted: 1 at first, one
// more for each reboot.
func (h *Host) Boots() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.boots
}

// Exited is closed when the host has ended other than by a reboot: it
// powered off, failed, or was closed.
func (h *Host) Exited() <-chan struct{} { return h.exited }

// Err is how the host ended: nil while it runs and after a clean power
// off, else systemd-nspawn's failure.
func (h *Host) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// Path is the path of the host's file p as seen from the test, while the
// host exists. It shows the host's own tree; what the host mounts over
// it, as its /run, /tmp and /dev, shows only through Run.
func (h *Host) Path(p string) string {
	return filepath.Join(h.root, filepath.Clean("/"+p))
}

// ConsoleLog is the path of the file that holds the host's console output
// of every boot.
func (h *Host) ConsoleLog() string { return filepath.Join(h.dir, "console.log") }

// current returns the boot number and the PID (on this machine) of that
// boot's systemd, or ErrNotRunning.
func (h *Host) current() (boot, pid int, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-h.exited:
		return h.boots, 0, fmt.Errorf("%w: %w", ErrNotRunning, ErrExited)
	default:
	}
	if h.leader == 0 {
		h.leader = childNamed(h.cmd.Process.Pid, "systemd")
	}
	if h.leader == 0 {
		return h.boots, 0, ErrNotRunning
	}
	return h.boots, h.leader, nil
}

// childNamed returns the child of pid whose name is comm, or 0. The
// container's systemd is systemd-nspawn's child: nspawn makes itself the
// subreaper of the child that forks it, and the name tells it apart
// from that child before its exec.
func childNamed(pid int, comm string) int {
	for _, p := range proc.Processes() {
		if p.PPID == pid && p.Comm == comm {
			return p.PID
		}
	}
	return 0
}

// containerEnv is the environment of commands run in a host: none of the
// test's own (GOFLAGS, OUTPOST_*), and what a login shell there would
// have.
var containerEnv = []string{
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"HOME=/root",
	"LANG=C.UTF-8",
	"TERM=dumb",
	"SYSTEMD_COLORS=0",
}

// Run runs a command inside the host, as root in all its namespaces, and
// returns its standard output; a failure's error holds its standard error
// and wraps the *exec.ExitError. It fails with ErrNotRunning while the
// host is between boots.
//
// It goes through nsenter on the host's systemd: machinectl shell and
// systemd-run --machine need systemd-machined, which needs systemd on
// this machine. The command is not in the host's cgroup tree and is no
// unit of its systemd; start long-running things with systemd-run inside.
func (h *Host) Run(ctx context.Context, args ...string) ([]byte, error) {
	_, pid, err := h.current()
	if err != nil {
		return nil, fmt.Errorf("run %q in %s: %w", args, h.Name, err)
	}
	return runIn(ctx, pid, args...)
}

func runIn(ctx context.Context, pid int, args ...string) ([]byte, error) {
	nsargs := []string{"--target", strconv.Itoa(pid), "--mount", "--uts", "--ipc", "--net", "--pid", "--cgroup", "--root", "--wd", "--"}
	cmd := exec.CommandContext(ctx, "nsenter", append(nsargs, args...)...)
	cmd.Env = containerEnv
	// nsenter forks to enter the PID namespace; end both on ctx.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("run %q: %w: %s", args, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return stdout.Bytes(), nil
}

// WaitRunning waits until the host's systemd has finished booting: `systemctl
// is-system-running` says running, or degraded (a unit failed; the failed
// units are logged).
func (h *Host) WaitRunning(ctx context.Context) error {
	return h.WaitBoot(ctx, 1)
}

// WaitBoot waits until the host has booted at least n times and the
// current boot's systemd has finished booting (see WaitRunning). After a
// reboot is asked for, WaitBoot(ctx, Boots()+1) waits for the new boot.
func (h *Host) WaitBoot(ctx context.Context, n int) error {
	wait := 50 * time.Millisecond
	var last string
	for {
		boot, pid, err := h.current()
		switch {
		case errors.Is(err, ErrExited):
			return fmt.Errorf("host %s: waiting for boot %d: %w (%v)", h.Name, n, ErrExited, h.Err())
		case err != nil:
			last = err.Error()
		case boot < n:
			last = fmt.Sprintf("boot %d", boot)
		default:
			out, rerr := runIn(ctx, pid, "systemctl", "is-system-running")
			// It exits non-zero for every state but running, and prints it.
			state := strings.TrimSpace(string(out))
			if state == "running" || state == "degraded" {
				if b, _, _ := h.current(); b == boot {
					if state == "degraded" {
						failed, _ := runIn(ctx, pid, "systemctl", "--failed", "--no-legend")
						h.t.Logf("host %s: boot %d degraded; failed units:\n%s", h.Name, boot, failed)
					}
					return nil
				}
			}
			last = fmt.Sprintf("boot %d: state %q", boot, state)
			if state == "" && rerr != nil {
				last += fmt.Sprintf(" (%v)", rerr)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("host %s: waiting for boot %d to run, last %s: %w", h.Name, n, last, ctx.Err())
		case <-h.exited:
		case <-time.After(wait):
		}
		wait = min(wait*3/2, time.Second)
	}
}

// Close powers the host off and removes everything of it but its
// directory (the test's TempDir, removed after). It is called when the
// test ends, and may be called before to check what is left; a second
// call returns the first's result.
func (h *Host) Close() error {
	h.closeOnce.Do(func() { h.closeErr = h.close() })
	return h.closeErr
}

func (h *Host) close() error {
	var errs []error
	h.mu.Lock()
	h.stopping = true
	cmd := h.cmd
	h.mu.Unlock()
	if cmd != nil {
		errs = append(errs, h.stop(cmd))
	}
	errs = append(errs, removeCgroups(h.cgroups))
	// nspawn makes this for `machinectl bind`, and will not remove it
	// where /run is not a tmpfs, as here.
	if err := os.Remove(filepath.Join("/run/systemd/nspawn/propagate", h.Name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	if h.overlay {
		errs = append(errs, unmount(h.root))
	}
	if h.console != nil {
		_ = h.console.Close()
	}
	return errors.Join(errs...)
}

// stop powers the host off and waits for systemd-nspawn to end. SIGTERM
// is systemd-nspawn's request for an orderly shutdown of a --boot
// container (it passes it on as SIGRTMIN+3). If that takes too long, the
// host's processes are killed.
func (h *Host) stop(cmd *exec.Cmd) error {
	select {
	case <-h.exited:
	default:
		_ = cmd.Process.Signal(syscall.SIGTERM)
	}
	select {
	case <-h.exited:
		<-h.supervis
		return nil
	case <-time.After(30 * time.Second):
	}
	h.t.Logf("host %s: no power off within 30s; killing it", h.Name)
	h.mu.Lock()
	cmd = h.cmd // the supervisor may have started one more boot meanwhile
	h.mu.Unlock()
	killCgroups(h.cgroups)
	_ = cmd.Process.Kill()
	select {
	case <-h.exited:
		<-h.supervis
		return errors.New("did not power off within 30s; killed")
	case <-time.After(10 * time.Second):
		return errors.New("systemd-nspawn outlived SIGKILL")
	}
}

// PowerCut ends the running boot as a power failure would and boots the
// host again: every process of the host is SIGKILLed at once, so nothing
// shuts down and the next boot's /run is empty. What the host's
// processes wrote to files stays (the machine's page cache is not
// lost): this cuts the host's processes, not its disk, which
// testing/lossyfs simulates. It returns once the boot has ended; the
// next one is under way (WaitBoot waits for it).
func (h *Host) PowerCut(ctx context.Context) error {
	h.mu.Lock()
	if h.stopping || h.cmd == nil {
		h.mu.Unlock()
		return fmt.Errorf("host %s: power cut: not running", h.Name)
	}
	h.cut = true
	boot := h.boots
	cmd := h.cmd
	h.mu.Unlock()
	// systemd-nspawn first, so that it cannot shut the container down
	// in order; the supervisor kills the rest before the next boot.
	_ = cmd.Process.Kill()
	killCgroups(h.cgroups)
	for {
		h.mu.Lock()
		next := h.boots > boot
		h.mu.Unlock()
		if next {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("host %s: power cut: %w", h.Name, ctx.Err())
		case <-h.exited:
			return fmt.Errorf("host %s: power cut: the host ended: %v", h.Name, h.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// killCgroups kills every process in the host's cgroups: what is left of
// a container whose systemd-nspawn died. It returns how many it found.
func killCgroups(cgroups []string) int {
	found := 0
	for _, d := range cgroups {
		_ = filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() || e.Name() != "cgroup.procs" {
				return nil
			}
			b, _ := os.ReadFile(p)
			for f := range strings.FieldsSeq(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					found++
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			return nil
		})
	}
	return found
}

// removeCgroups removes the host's cgroups and the ones nspawn and the
// host's systemd made below, deepest first; a cgroup with a process left
// cannot be removed, so that is also the check that none is left. Dying
// processes linger in a cgroup for a moment, hence the retries.
func removeCgroups(cgroups []string) error {
	var errs []error
	for _, d := range cgroups {
		var err error
		for wait := 10 * time.Millisecond; wait < 5*time.Second; wait *= 2 {
			if err = removeCgroup(d); err == nil {
				break
			}
			time.Sleep(wait) // a process leaving its cgroup gives no event to wait on
		}
		if err != nil {
			errs = append(errs, err)
		}
		// The parent is shared with other hosts; removing it fails while
		// one is left, which is fine.
		_ = syscall.Rmdir(filepath.Dir(d))
	}
	return errors.Join(errs...)
}

func removeCgroup(d string) error {
	var dirs []string
	err := filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove cgroup %s: %w", d, err)
	}
	// Walked parents first; remove children first. Cgroup files cannot
	// be removed and need not be: rmdir takes them along.
	for _, p := range slices.Backward(dirs) {
		if err := syscall.Rmdir(p); err != nil && !errors.Is(err, syscall.ENOENT) {
			return fmt.Errorf("remove cgroup %s: %w", p, err)
		}
	}
	return nil
}

// unmount unmounts the host's root, retrying while it is busy: the last
// processes of the container may still be on their way out.
func unmount(dir string) error {
	var err error
	for wait := 10 * time.Millisecond; wait < 5*time.Second; wait *= 2 {
		if err = syscall.Unmount(dir, 0); err == nil || errors.Is(err, syscall.EINVAL) {
			return nil // EINVAL: not mounted (any more)
		}
		if !errors.Is(err, syscall.EBUSY) {
			break
		}
		time.Sleep(wait) // no event tells when the last user is gone
	}
	return fmt.Errorf("unmount %s: %w", dir, err)
}

// logConsoleTail shows the last n lines of the console log in the test log.
func (h *Host) logConsoleTail(n int) {
	b, err := os.ReadFile(h.ConsoleLog())
	if err != nil {
		h.t.Logf("host %s: console log: %v", h.Name, err)
		return
	}
	lines := strings.Split(strings.TrimRight(strings.ReplaceAll(string(b), "\r", ""), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	h.t.Logf("host %s: last %d lines of the console (%s):\n%s", h.Name, len(lines), h.ConsoleLog(), strings.Join(lines, "\n"))
}

package nspawn

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/testing/proc"
)

// The base root filesystem. Bump rootfsVersion whenever what goes into it
// changes (packages, customisation): the cache is keyed by it, and an old
// tree is never patched in place.
const (
	Suite         = "bookworm"
	Mirror        = "http://deb.debian.org/debian"
	rootfsVersion = "v1"
)

// CacheDir holds built root filesystems between test runs; it is a
// variable so that a machine with a small /var can point it elsewhere.
var CacheDir = "/var/cache/outpost-test/nspawn"

// basePackages go into the base on top of minbase: systemd as PID 1 and
// its bus, ip to check a host's addresses, ps and pgrep to check its
// processes. Anything a later test needs beyond this belongs in a new
// rootfsVersion, not in an apt-get run at test time (there is no network
// to the mirror from inside a host).
var basePackages = []string{"systemd", "systemd-sysv", "dbus", "iproute2", "procps"}

// maskedUnits never start in a host: nobody logs in on the console (its
// getty would end every console log with a login prompt), and apt's
// timers would reach for a mirror the host cannot see.
var maskedUnits = []string{"console-getty.service", "apt-daily.timer", "apt-daily-upgrade.timer"}

// MustRootfs is Rootfs for tests: it logs progress to t and fails the test
// on error. A first build takes a minute or two (debootstrap).
func MustRootfs(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	dir, err := Rootfs(ctx, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// Rootfs returns the cached base root filesystem, building it first if it
// is not there: a minbase Debian with systemd, made by debootstrap. The
// tree is shared by every host and must not be written to; Boot puts an
// overlay over it. logf, if not nil, gets progress lines.
//
// Concurrent callers, in this process or another test binary, build it
// once: the build holds a lock file beside the cache and goes into a
// temporary directory that is renamed into place only when complete, so a
// tree at the cache path is always whole.
func Rootfs(ctx context.Context, logf func(format string, args ...any)) (string, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	dir := filepath.Join(CacheDir, Suite+"-"+rootfsVersion)
	return cached(ctx, dir, logf, debootstrap)
}

// cached returns dir, calling build to make it first when it does not
// exist. build fills an empty directory; it is taken out so the locking
// and the renaming are tested without debootstrap.
func cached(ctx context.Context, dir string, logf func(string, ...any), build func(ctx context.Context, tmp string, logf func(string, ...any)) error) (string, error) {
	if _, err := os.Stat(dir); err == nil {
		return dir, nil
	}
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", fmt.Errorf("rootfs cache: %w", err)
	}
	unlock, err := lockFile(ctx, dir+".lock", logf)
	if err != nil {
		return "", err
	}
	defer unlock()
	// Another process may have built it while this one waited.
	if _, err := os.Stat(dir); err == nil {
		return dir, nil
	}
	// Left by a build that died; nobody else builds while the lock is held.
	stale, _ := filepath.Glob(dir + ".tmp-*")
	for _, s := range stale {
		logf("nspawn: removing a half-built root filesystem %s", s)
		if err := removeTree(s); err != nil {
			return "", err
		}
	}
	tmp, err := os.MkdirTemp(parent, filepath.Base(dir)+".tmp-")
	if err != nil {
		return "", fmt.Errorf("rootfs cache: %w", err)
	}
	// MkdirTemp makes it 0700, and this directory becomes the hosts' "/":
	// services running as other users could not reach anything.
	if err := os.Chmod(tmp, 0o755); err != nil {
		_ = removeTree(tmp)
		return "", fmt.Errorf("rootfs cache: %w", err)
	}
	start := time.Now()
	if err := build(ctx, tmp, logf); err != nil {
		if rerr := removeTree(tmp); rerr != nil {
			return "", errors.Join(err, rerr)
		}
		return "", err
	}
	if err := os.Rename(tmp, dir); err != nil {
		_ = removeTree(tmp)
		return "", fmt.Errorf("rootfs cache: %w", err)
	}
	// The rename is the commit; make it survive a power cut of the machine.
	if d, err := os.Open(parent); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	logf("nspawn: root filesystem %s built in %s", dir, time.Since(start).Round(100*time.Millisecond))
	return dir, nil
}

// lockFile takes an exclusive flock on path, polling so that ctx can end
// the wait (a blocking flock cannot be interrupted). The lock goes with
// the process, so a build that dies does not leave it held.
func lockFile(ctx context.Context, path string, logf func(string, ...any)) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("rootfs lock: %w", err)
	}
	wait := 50 * time.Millisecond
	logged := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { _ = f.Close() }, nil // closing releases the lock
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			_ = f.Close()
			return nil, fmt.Errorf("rootfs lock %s: %w", path, err)
		}
		if !logged {
			logf("nspawn: waiting for another process building the root filesystem (%s)", path)
			logged = true
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("rootfs lock %s: %w", path, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(wait*2, 2*time.Second)
	}
}

// removeTree removes a directory that a build may have left mounts in;
// with a mount below it, it refuses rather than remove through the mount
// (debootstrap binds /dev and mounts /proc in its target).
func removeTree(dir string) error {
	mounts, err := proc.MountsUnder(dir)
	if err != nil {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	if len(mounts) > 0 {
		return fmt.Errorf("remove %s: still mounted below it: %v", dir, mounts)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	return nil
}

// debootstrap builds the base into dir. It runs in a mount namespace of
// its own, so the /proc, /sys and /dev it mounts into the target go with
// it even when it is killed.
func debootstrap(ctx context.Context, dir string, logf func(string, ...any)) error {
	logf("nspawn: building the %s root filesystem in %s (debootstrap, a minute or two)", Suite, dir)
	logPath := dir + ".log"
	logFile, err := os.Create(logPath)
	if err != nil {
		return fmt.Errorf("debootstrap: %w", err)
	}
	defer os.Remove(logPath)
	defer logFile.Close()

	cmd := exec.CommandContext(ctx, "unshare", "--mount", "--propagation", "private",
		"debootstrap", "--variant=minbase", "--include="+strings.Join(basePackages, ","), Suite, dir, Mirror)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// debootstrap runs dpkg and chroots below it: end them all.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("debootstrap: %w", err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("debootstrap: %w", err)
	}
	last := progress(io.TeeReader(out, logFile), logf)
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("debootstrap (last output: %s): %w", last, err)
	}
	return customise(dir)
}

// progress logs debootstrap's output sparingly: its five hundred lines
// would bury the test log, so only warnings, errors and one line every
// ten seconds get through. It returns the last line.
func progress(r io.Reader, logf func(string, ...any)) string {
	sc := bufio.NewScanner(r)
	var last string
	var shown time.Time
	for sc.Scan() {
		last = sc.Text()
		if strings.HasPrefix(last, "W:") || strings.HasPrefix(last, "E:") || time.Since(shown) > 10*time.Second {
			logf("debootstrap: %s", last)
			shown = time.Now()
		}
	}
	return last
}

// customise turns the fresh debootstrap tree into the shared base.
func customise(dir string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("customise rootfs: %w", err)
	}
	defer root.Close()
	// Empty rather than missing or "uninitialized": every boot then gets a
	// machine ID from nspawn's container UUID, and systemd does not treat
	// it as a first boot (Debian's systemd-firstboot would prompt on the
	// console and wait for an answer). systemd-machine-id-commit writes
	// the ID into the host's overlay, so it is stable across its reboots.
	if err := root.WriteFile("etc/machine-id", nil, 0o444); err != nil {
		return fmt.Errorf("customise rootfs: %w", err)
	}
	// debootstrap copied the building machine's ID and name here.
	_ = root.Remove("var/lib/dbus/machine-id")
	if err := root.Symlink("/etc/machine-id", "var/lib/dbus/machine-id"); err != nil {
		return fmt.Errorf("customise rootfs: %w", err)
	}
	// Without /etc/hostname a host is named after its machine (or
	// Options.Hostname).
	if err := root.Remove("etc/hostname"); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("customise rootfs: %w", err)
	}
	for _, u := range maskedUnits {
		if err := root.Symlink("/dev/null", "etc/systemd/system/"+u); err != nil {
			return fmt.Errorf("customise rootfs: mask %s: %w", u, err)
		}
	}
	// The packages debootstrap downloaded: 40 MB nobody reads again.
	debs, _ := filepath.Glob(filepath.Join(dir, "var/cache/apt/archives/*.deb"))
	for _, d := range debs {
		if err := os.Remove(d); err != nil {
			return fmt.Errorf("customise rootfs: %w", err)
		}
	}
	return nil
}

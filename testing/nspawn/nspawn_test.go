//go:build linux

package nspawn

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/testing/netns"
	"github.com/outpost-edge/outpost/testing/proc"
)

// probeUnit records each of its starts in /run, which is new each boot.
const probeUnit = `[Unit]
Description=nspawn harness probe

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh -c 'cat /proc/sys/kernel/random/uuid > /run/probe'
ExecStop=/bin/sh -c 'echo stopped > /var/lib/probe-stopped'

[Install]
WantedBy=multi-user.target
`

// A host boots with what Options put in it, reboots into a second boot
// of the same filesystem when its systemd reboots, boots a third time
// after a power cut (which stops nothing in order), stays off when it
// powers off, and leaves nothing behind.
func TestBootRebootPoweroff(t *testing.T) {
	Require(t)
	netns.Require(t)
	start := time.Now()
	MustRootfs(t)
	t.Logf("TIMING rootfs ready (built or cached) in %s", time.Since(start).Round(time.Millisecond))

	ns := netns.New(t, 200)
	bin := filepath.Join(t.TempDir(), "probe")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho probe ran\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	h := Boot(t, Options{
		NetNS:    ns.Name,
		Hostname: "node-a",
		Binds:    []Bind{{Source: bin, Target: "/usr/local/bin/probe", ReadOnly: true}},
		Files: map[string]File{
			"/etc/outpost/agent.env":            {Content: "OUTPOST_NODE=node-a\n", Mode: 0o600},
			"/etc/systemd/system/probe.service": {Content: probeUnit},
		},
		Enable: []string{"probe.service"},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := h.WaitRunning(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("TIMING boot to running in %s", time.Since(start).Round(time.Millisecond))

	run := func(args ...string) string {
		t.Helper()
		out, err := h.Run(ctx, args...)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	if got := run("hostname"); got != "node-a" {
		t.Errorf("hostname %q, want node-a", got)
	}
	if got := run("stat", "-c", "%a %U", "/etc/outpost/agent.env"); got != "600 root" {
		t.Errorf("agent.env mode and owner %q, want 600 root", got)
	}
	if got := run("cat", "/etc/outpost/agent.env"); got != "OUTPOST_NODE=node-a" {
		t.Errorf("agent.env inside: %q", got)
	}
	if b, err := os.ReadFile(h.Path("/etc/outpost/agent.env")); err != nil || string(b) != "OUTPOST_NODE=node-a\n" {
		t.Errorf("agent.env through Path: %q, %v", b, err)
	}
	if got := run("/usr/local/bin/probe"); got != "probe ran" {
		t.Errorf("bound binary printed %q", got)
	}
	if _, err := h.Run(ctx, "sh", "-c", "echo x >> /usr/local/bin/probe"); err == nil {
		t.Error("wrote to a read-only bind")
	}
	if got := run("ip", "-4", "-o", "addr", "show"); !strings.Contains(got, " "+ns.Addr+"/24 ") {
		t.Errorf("address %s not configured inside:\n%s", ns.Addr, got)
	}
	// /sys/class/net shows the namespace's interfaces, not this
	// machine's: a program inside looks its interface up there.
	links := run("sh", "-c", "ip -o link show | cut -d: -f2 | cut -d@ -f1 | tr -d ' ' | sort | tr '\\n' ' '")
	if got := run("sh", "-c", "ls /sys/class/net | sort | tr '\\n' ' '"); got != links {
		t.Errorf("/sys/class/net inside lists %q, the namespace has %q", got, links)
	}
	if got := run("systemctl", "is-active", "probe.service"); got != "active" {
		t.Errorf("probe.service %q after boot, want active", got)
	}
	probe1 := run("cat", "/run/probe")
	machineID := run("cat", "/etc/machine-id")
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(machineID) {
		t.Errorf("machine ID %q", machineID)
	}
	run("touch", "/run/marker")
	run("sh", "-c", "echo kept > /var/lib/outpost-kept")

	start = time.Now()
	run("systemctl", "reboot")
	if err := h.WaitBoot(ctx, 2); err != nil {
		t.Fatal(err)
	}
	t.Logf("TIMING reboot to running in %s", time.Since(start).Round(time.Millisecond))
	if n := h.Boots(); n != 2 {
		t.Errorf("Boots() = %d after one reboot, want 2", n)
	}
	var exit *exec.ExitError
	if _, err := h.Run(ctx, "test", "-e", "/run/marker"); !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Errorf("/run/marker of the first boot: test -e gave %v, want exit status 1 (gone)", err)
	}
	if got := run("systemctl", "is-active", "probe.service"); got != "active" {
		t.Errorf("probe.service %q after reboot, want active", got)
	}
	if probe2 := run("cat", "/run/probe"); probe2 == probe1 || probe2 == "" {
		t.Errorf("probe.service's mark %q after reboot, before %q: want a new one", probe2, probe1)
	}
	if got := run("cat", "/var/lib/outpost-kept"); got != "kept" {
		t.Errorf("file written before the reboot: %q", got)
	}
	if got := run("cat", "/etc/machine-id"); got != machineID {
		t.Errorf("machine ID %q after reboot, before %q", got, machineID)
	}
	if got := run("ip", "-4", "-o", "addr", "show"); !strings.Contains(got, " "+ns.Addr+"/24 ") {
		t.Errorf("address %s gone after reboot:\n%s", ns.Addr, got)
	}

	// The orderly reboot stopped probe.service; a power cut stops
	// nothing, and the host boots again with a new /run.
	if got := run("cat", "/var/lib/probe-stopped"); got != "stopped" {
		t.Errorf("probe.service's stop mark after the reboot: %q", got)
	}
	run("rm", "/var/lib/probe-stopped")
	probe2 := run("cat", "/run/probe")
	start = time.Now()
	if err := h.PowerCut(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.WaitBoot(ctx, 3); err != nil {
		t.Fatal(err)
	}
	t.Logf("TIMING power cut to running in %s", time.Since(start).Round(time.Millisecond))
	if _, err := h.Run(ctx, "test", "-e", "/var/lib/probe-stopped"); !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Errorf("probe.service was stopped in order by a power cut (test -e gave %v)", err)
	}
	if probe3 := run("cat", "/run/probe"); probe3 == probe2 || probe3 == "" {
		t.Errorf("probe.service's mark %q after the power cut, before %q: want a new one", probe3, probe2)
	}
	if got := run("cat", "/var/lib/outpost-kept"); got != "kept" {
		t.Errorf("file written before the power cut: %q", got)
	}

	run("systemctl", "poweroff")
	select {
	case <-h.Exited():
	case <-ctx.Done():
		t.Fatal("host did not power off")
	}
	if err := h.Err(); err != nil {
		t.Errorf("power off: %v", err)
	}
	if n := h.Boots(); n != 3 {
		t.Errorf("Boots() = %d after power off, want 3 (no new boot)", n)
	}
	if _, err := h.Run(ctx, "true"); !errors.Is(err, ErrNotRunning) {
		t.Errorf("Run after power off: %v, want ErrNotRunning", err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	requireGone(t, h)
}

// Two hosts run side by side, each its own machine; Close powers a
// running host off and leaves nothing behind.
func TestTwoHostsClose(t *testing.T) {
	Require(t)
	MustRootfs(t)
	a, b := Boot(t, Options{}), Boot(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ids := map[string]bool{}
	for _, h := range []*Host{a, b} {
		if err := h.WaitRunning(ctx); err != nil {
			t.Fatal(err)
		}
		out, err := h.Run(ctx, "sh", "-c", "hostname; cat /etc/machine-id; ls /sys/class/net")
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Fields(string(out))
		if len(f) != 3 || f[0] != h.Name || f[2] != "lo" {
			t.Errorf("host %s: hostname, machine ID, links: %q; want its name, an ID, only lo", h.Name, f)
		}
		if len(f) > 1 {
			ids[f[1]] = true
		}
	}
	if len(ids) != 2 {
		t.Errorf("machine IDs %v: want one each", ids)
	}
	for _, h := range []*Host{a, b} {
		start := time.Now()
		if err := h.Close(); err != nil {
			t.Fatal(err)
		}
		t.Logf("TIMING close (power off and clean up) of a running host in %s", time.Since(start).Round(time.Millisecond))
		if err := h.Err(); err != nil {
			t.Errorf("host %s: %v", h.Name, err)
		}
		requireGone(t, h)
	}
}

// A systemd-nspawn that fails ends the host, with the failure in Err and
// no second boot.
func TestFailedStart(t *testing.T) {
	Require(t)
	h := Boot(t, Options{Args: []string{"--no-such-flag"}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := h.WaitRunning(ctx); !errors.Is(err, ErrExited) {
		t.Fatalf("WaitRunning: %v, want ErrExited", err)
	}
	var exit *exec.ExitError
	if err := h.Err(); !errors.As(err, &exit) || exit.ExitCode() == rebootStatus {
		t.Errorf("Err() = %v, want systemd-nspawn's exit status", err)
	}
	if n := h.Boots(); n != 1 {
		t.Errorf("Boots() = %d, want 1", n)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	requireGone(t, h)
}

// requireGone checks that nothing of a closed host is left on this
// machine: mounts, processes, cgroups, nspawn's state.
func requireGone(t *testing.T, h *Host) {
	t.Helper()
	mounts, err := os.ReadFile("/proc/mounts")
	if err != nil {
		t.Fatal(err)
	}
	for l := range strings.SplitSeq(string(mounts), "\n") {
		if strings.Contains(l, h.dir) || strings.Contains(l, h.Name) {
			t.Errorf("mount left: %s", l)
		}
	}
	for _, p := range proc.Processes() {
		if p.Names(h.dir) || p.Names(h.Name) {
			t.Errorf("process left: %d %s %q", p.PID, p.Comm, p.Args)
		}
	}
	for _, d := range h.cgroups {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("cgroup %s left (%v)", d, err)
		}
	}
	if _, err := os.Stat(filepath.Join("/run/systemd/nspawn/propagate", h.Name)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("nspawn's propagate directory left (%v)", err)
	}
}

// The cache builds once for concurrent callers, never hands out a half
// build, and clears one a dead build left.
func TestCached(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "base-v1")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	fail := errors.New("build broke")
	_, err := cached(ctx, dir, t.Logf, func(ctx context.Context, tmp string, _ func(string, ...any)) error {
		return errors.Join(os.WriteFile(filepath.Join(tmp, "half"), nil, 0o644), fail)
	})
	if !errors.Is(err, fail) {
		t.Fatalf("failed build: %v", err)
	}
	if left, _ := filepath.Glob(dir + "*"); len(left) != 1 || left[0] != dir+".lock" {
		t.Fatalf("after a failed build: %v, want only the lock file", left)
	}
	// As a build killed midway leaves it.
	if err := os.MkdirAll(dir+".tmp-dead/etc", 0o755); err != nil {
		t.Fatal(err)
	}

	var builds atomic.Int32
	inBuild, waiting := make(chan struct{}), make(chan struct{})
	build := func(ctx context.Context, tmp string, _ func(string, ...any)) error {
		builds.Add(1)
		close(inBuild)
		// Hold the lock until the other caller waits for it.
		select {
		case <-ctx.Done():
		case <-waiting:
		}
		return os.WriteFile(filepath.Join(tmp, "whole"), nil, 0o644)
	}
	var once sync.Once
	waitLog := func(format string, args ...any) {
		if strings.Contains(format, "waiting for another") {
			once.Do(func() { close(waiting) })
		}
		t.Logf(format, args...)
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Go(func() {
			logf := t.Logf
			if i == 1 {
				<-inBuild
				logf = waitLog
			}
			var got string
			got, errs[i] = cached(ctx, dir, logf, build)
			if errs[i] == nil && got != dir {
				errs[i] = errors.New("returned " + got)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := builds.Load(); n != 1 {
		t.Errorf("%d builds for two callers, want 1", n)
	}
	if _, err := os.Stat(filepath.Join(dir, "whole")); err != nil {
		t.Error(err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("cache dir mode: %v, %v; want 0755 (it is a host's /)", fi.Mode(), err)
	}
	if left, _ := filepath.Glob(dir + ".tmp-*"); len(left) != 0 {
		t.Errorf("temporary trees left: %v", left)
	}
}

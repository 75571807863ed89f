package systemd_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/outpost-edge/outpost/osupdate"
	"github.com/outpost-edge/outpost/osupdate/systemd"
	"github.com/outpost-edge/outpost/testing/nspawn"
)

var _ osupdate.Systemd = (*systemd.Systemd)(nil)

// The tests boot a host (testing/nspawn) and run this test binary again
// inside it, where the host's system bus is: TestInner, with
// OUTPOST_SYSTEMD_INNER=1, makes one call of the adapter and prints what
// came of it as "RESULT key=value" lines. The outer tests check those and
// the host's systemd itself (systemctl, the unit files, its boots).
const (
	innerBin  = "/usr/local/bin/outpost-systemd.test"
	innerEnv  = "OUTPOST_SYSTEMD_INNER"
	inhibitBy = "outpost-test"
)

const helloUnit = `[Unit]
Description=Hello %s

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/true

[Install]
WantedBy=multi-user.target
`

// counterUnit writes each start and reload to /run/counter.
const counterUnit = `[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh -c 'echo start >> /run/counter'
ExecReload=/bin/sh -c 'echo reload >> /run/counter'
`

const failUnit = `[Unit]
Description=Fails

[Service]
Type=oneshot
ExecStart=/bin/false
`

// bootHost boots a host with this test binary bound in and waits for it
// to run.
func bootHost(t *testing.T, ctx context.Context, files map[string]nspawn.File) *nspawn.Host {
	t.Helper()
	nspawn.Require(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	h := nspawn.Boot(t, nspawn.Options{
		Binds: []nspawn.Bind{{Source: self, Target: innerBin, ReadOnly: true}},
		Files: files,
	})
	if err := h.WaitRunning(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("TIMING boot to running in %s", time.Since(start).Round(time.Millisecond))
	return h
}

// inner runs TestInner in the host with the given environment
// (OUTPOST_SYSTEMD_OP and its arguments) and returns its results. It
// fails the test unless TestInner passed.
func inner(t *testing.T, ctx context.Context, h *nspawn.Host, env ...string) map[string]string {
	t.Helper()
	out, err := h.Run(ctx, innerCommand(env)...)
	if err != nil {
		t.Logf("inner %s:\n%s", strings.Join(env, " "), out)
		t.Fatalf("inner %s: %v", strings.Join(env, " "), err)
	}
	return results(t, env, string(out))
}

func innerCommand(env []string) []string {
	args := append([]string{"env", innerEnv + "=1"}, env...)
	return append(args, innerBin, "-test.run=^TestInner$", "-test.v", "-test.count=1", "-test.timeout=5m")
}

// results checks that TestInner passed and returns its results, and its
// whole output as "output".
func results(t *testing.T, env []string, out string) map[string]string {
	t.Helper()
	t.Logf("inner %s:\n%s", strings.Join(env, " "), out)
	if !strings.Contains(out, "\n--- PASS: TestInner") || !strings.Contains(out, "\nPASS\n") {
		t.Fatalf("inner %s did not pass", strings.Join(env, " "))
	}
	res := map[string]string{"output": out}
	for line := range strings.Lines(out) {
		if kv, ok := strings.CutPrefix(strings.TrimSpace(line), "RESULT "); ok {
			k, v, _ := strings.Cut(kv, "=")
			res[k] = v
		}
	}
	return res
}

// innerRebooting runs TestInner in the host as a service, as the agent
// runs, for a call that reboots the host: it waits for the second boot
// and returns TestInner's results, which it wrote to a file of the host.
//
// Not through Run: a command run so that is still there when the host's
// shutdown stops every process (SIGSTOP, then SIGTERM and SIGCONT) stops
// nsenter for good (it stops itself when its child stops), and Run never
// returns. A service is stopped before that, with SIGTERM, which the
// shell and TestInner ignore so that it ends on its own, after writing
// its results.
func innerRebooting(t *testing.T, ctx context.Context, h *nspawn.Host, env ...string) (map[string]string, time.Time) {
	t.Helper()
	const log = "/var/lib/outpost-inner.log"
	script := `trap "" TERM; "$@" >` + log + ` 2>&1; echo "EXIT $?" >>` + log
	args := append([]string{"systemd-run", "--unit=outpost-inner", "--service-type=exec", "--quiet", "--", "/bin/sh", "-c", script, "sh"}, innerCommand(env)...)
	if _, err := h.Run(ctx, args...); err != nil {
		t.Fatal(err)
	}
	exited := func() (string, bool) {
		b, _ := os.ReadFile(h.Path(log))
		_, status, ok := strings.Cut(string(b), "\nEXIT ")
		return strings.TrimSpace(status), ok
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for h.Boots() < 2 {
		if status, ok := exited(); ok && status != "0" {
			b, _ := os.ReadFile(h.Path(log))
			t.Fatalf("inner %s exited with status %s before a reboot:\n%s", strings.Join(env, " "), status, b)
		}
		select {
		case <-ctx.Done():
			b, _ := os.ReadFile(h.Path(log))
			t.Fatalf("no reboot: %v; the inner's output:\n%s", ctx.Err(), b)
		case <-tick.C:
		}
	}
	if err := h.WaitBoot(ctx, 2); err != nil {
		t.Fatal(err)
	}
	booted := time.Now()
	if status, ok := exited(); !ok || status != "0" {
		b, _ := os.ReadFile(h.Path(log))
		t.Fatalf("inner %s: exit status %q (none if empty): it was cut short by the reboot\n%s", strings.Join(env, " "), status, b)
	}
	b, err := os.ReadFile(h.Path(log))
	if err != nil {
		t.Fatal(err)
	}
	return results(t, env, string(b)), booted
}

// show runs a command in the host and returns its output trimmed; a
// non-zero exit status is not a failure (systemctl is-enabled exits 1
// for "disabled").
func show(t *testing.T, ctx context.Context, h *nspawn.Host, args ...string) string {
	t.Helper()
	out, err := h.Run(ctx, args...)
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// Unit file calls change what systemctl sees, and ActiveState reads what
// systemd says, on a real systemd.
func TestUnits(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	const reload = "/etc/systemd/system/reload.service"
	h := bootHost(t, ctx, map[string]nspawn.File{
		"/etc/systemd/system/hello.service":   {Content: fmt.Sprintf(helloUnit, "hello")},
		reload:                                {Content: fmt.Sprintf(helloUnit, "v1")},
		"/etc/systemd/system/fail.service":    {Content: failUnit},
		"/etc/systemd/system/counter.service": {Content: counterUnit},
		// A unit of the OS, which can be masked (one in /etc cannot:
		// the mask link would go where its file is).
		"/usr/local/lib/systemd/system/vendor.service": {Content: fmt.Sprintf(helloUnit, "vendor")},
	})
	op := func(op string, units ...string) map[string]string {
		t.Helper()
		return inner(t, ctx, h, "OUTPOST_SYSTEMD_OP="+op, "OUTPOST_SYSTEMD_UNITS="+strings.Join(units, " "))
	}
	isEnabled := func(unit, want string) {
		t.Helper()
		if got := show(t, ctx, h, "systemctl", "is-enabled", unit); got != want {
			t.Errorf("after the calls above, systemctl is-enabled %s = %q, want %q", unit, got, want)
		}
	}
	wantsLink := h.Path("/etc/systemd/system/multi-user.target.wants/hello.service")
	linked := func() bool {
		_, err := os.Lstat(wantsLink)
		return err == nil
	}

	start := time.Now()
	// DaemonReload: systemd reads a changed unit file. The unit runs, so
	// that systemd keeps it loaded (it forgets units nothing needs, and
	// would load the new file afresh when asked).
	show(t, ctx, h, "systemctl", "start", "reload.service")
	if got := show(t, ctx, h, "systemctl", "show", "-p", "Description", "--value", "reload.service"); got != "Hello v1" {
		t.Fatalf("Description %q at first", got)
	}
	if err := os.WriteFile(h.Path(reload), fmt.Appendf(nil, helloUnit, "v2"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := show(t, ctx, h, "systemctl", "show", "-p", "NeedDaemonReload", "--value", "reload.service"); got != "yes" {
		t.Errorf("NeedDaemonReload %q after the file changed, want yes", got)
	}
	op("reload")
	if got := show(t, ctx, h, "systemctl", "show", "-p", "NeedDaemonReload", "--value", "reload.service"); got != "no" {
		t.Errorf("NeedDaemonReload %q after DaemonReload, want no", got)
	}
	if got := show(t, ctx, h, "systemctl", "show", "-p", "Description", "--value", "reload.service"); got != "Hello v2" {
		t.Errorf("Description %q after DaemonReload, want Hello v2", got)
	}

	isEnabled("hello.service", "disabled")
	op("enable", "hello.service")
	isEnabled("hello.service", "enabled")
	if !linked() {
		t.Errorf("no %s after EnableUnits", wantsLink)
	}
	// Enabled, not started (no --now).
	if got := op("active-state", "hello.service")["state"]; got != "inactive" {
		t.Errorf("ActiveState %q after EnableUnits, want inactive", got)
	}
	show(t, ctx, h, "systemctl", "start", "hello.service")
	if got := op("active-state", "hello.service")["state"]; got != "active" {
		t.Errorf("ActiveState %q after start, want active", got)
	}
	op("disable", "hello.service")
	isEnabled("hello.service", "disabled")
	if linked() {
		t.Errorf("%s left after DisableUnits", wantsLink)
	}

	isEnabled("vendor.service", "disabled")
	op("mask", "vendor.service")
	isEnabled("vendor.service", "masked")
	if dest, err := os.Readlink(h.Path("/etc/systemd/system/vendor.service")); err != nil || dest != "/dev/null" {
		t.Errorf("mask link: %q, %v; want a link to /dev/null", dest, err)
	}
	// The manager knows at once (MaskUnits reloaded): a masked unit does
	// not start.
	if got := show(t, ctx, h, "systemctl", "show", "-p", "LoadState", "--value", "vendor.service"); got != "masked" {
		t.Errorf("LoadState %q after MaskUnits, want masked", got)
	}
	op("unmask", "vendor.service")
	isEnabled("vendor.service", "disabled")
	show(t, ctx, h, "systemctl", "start", "vendor.service")
	if got := op("active-state", "vendor.service")["state"]; got != "active" {
		t.Errorf("ActiveState %q of vendor.service after unmask and start, want active", got)
	}

	// Several units at once.
	op("enable", "hello.service", "vendor.service")
	isEnabled("hello.service", "enabled")
	isEnabled("vendor.service", "enabled")

	// A unit without [Install] cannot be enabled; as systemctl, it is not
	// an error, but it is logged.
	if out := op("enable", "fail.service")["output"]; !strings.Contains(out, "no [Install] section") {
		t.Error("EnableUnits of a unit without [Install] logged no warning")
	}
	isEnabled("fail.service", "static")

	// Errors name the units and wrap systemd's D-Bus error. A missing
	// unit fails the whole call: systemd changes none of the others.
	op("disable", "vendor.service")
	res := op("enable-fails", "vendor.service", "nosuch.service")
	if !strings.Contains(res["error"], "nosuch.service") || res["dbus_error"] == "" {
		t.Errorf("EnableUnits of a missing unit: error %q, D-Bus error %q; want one naming nosuch.service and wrapping a dbus.Error", res["error"], res["dbus_error"])
	}
	isEnabled("vendor.service", "disabled")
	res = op("mask-fails", "hello.service")
	if !strings.Contains(res["error"], "hello.service") || res["dbus_error"] == "" {
		t.Errorf("MaskUnits of a unit whose file is in /etc: error %q, D-Bus error %q; want one naming hello.service", res["error"], res["dbus_error"])
	}
	isEnabled("hello.service", "enabled")

	// ActiveState of a unit that failed, and of one systemd does not know.
	if _, err := h.Run(ctx, "systemctl", "start", "fail.service"); err == nil {
		t.Error("systemctl start fail.service succeeded")
	}
	if got := op("active-state", "fail.service")["state"]; got != "failed" {
		t.Errorf("ActiveState %q of a unit whose start failed, want failed", got)
	}
	if got := op("active-state", "nosuch.service")["state"]; got != "inactive" {
		t.Errorf("ActiveState %q of a unit that does not exist, want inactive", got)
	}

	// RestartUnit starts a stopped unit and restarts a running one;
	// ReloadUnit runs ExecReload; both wait for their job, so the file
	// holds each line when they return. A job that fails, or a reload of
	// a unit without ExecReload, is an error naming the unit.
	op("restart-unit", "counter.service")
	op("reload-unit", "counter.service")
	op("restart-unit", "counter.service")
	if got := show(t, ctx, h, "cat", "/run/counter"); got != "start\nreload\nstart" {
		t.Errorf("/run/counter = %q after restart, reload, restart; want start, reload, start", got)
	}
	if res := op("restart-unit-fails", "fail.service"); !strings.Contains(res["error"], "fail.service") || !strings.Contains(res["error"], "failed") {
		t.Errorf("RestartUnit of a unit that fails: %q, want an error naming it and the job's result", res["error"])
	}
	if res := op("reload-unit-fails", "hello.service"); !strings.Contains(res["error"], "hello.service") {
		t.Errorf("ReloadUnit of a unit without ExecReload: %q, want an error naming it", res["error"])
	}
	t.Logf("TIMING unit calls and checks in %s", time.Since(start).Round(time.Millisecond))
}

// Reboot reboots the host: through logind, after a block inhibitor lock
// is released or when its time is up, and through the systemd manager
// where logind is not there.
func TestReboot(t *testing.T) {
	nspawn.Require(t)
	for _, tc := range []struct {
		name    string
		hold    time.Duration // the inhibitor lock's, from when it is taken
		timeout time.Duration // InhibitTimeout
		noLogin bool          // mask logind before
	}{
		{name: "lock released", hold: 4 * time.Second, timeout: time.Minute},
		{name: "lock timeout", hold: 10 * time.Minute, timeout: 3 * time.Second},
		{name: "no logind", noLogin: true, timeout: time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
			defer cancel()
			h := bootHost(t, ctx, nil)
			if tc.noLogin {
				show(t, ctx, h, "systemctl", "mask", "--now", "systemd-logind.service")
				if got := show(t, ctx, h, "systemctl", "is-active", "systemd-logind.service"); got != "inactive" {
					t.Fatalf("logind %q after mask --now", got)
				}
			} else if got := show(t, ctx, h, "systemctl", "is-active", "systemd-logind.service"); got != "active" {
				// It is started on demand (bus activation) if not yet.
				t.Logf("logind %q before the test", got)
			}

			res, booted := innerRebooting(t, ctx, h, "OUTPOST_SYSTEMD_OP=reboot",
				"OUTPOST_SYSTEMD_HOLD="+tc.hold.String(), "OUTPOST_SYSTEMD_TIMEOUT="+tc.timeout.String())
			at := func(k string) time.Time {
				t.Helper()
				n, err := strconv.ParseInt(res[k], 10, 64)
				if err != nil {
					t.Fatalf("result %s: %q", k, res[k])
				}
				return time.Unix(0, n)
			}
			called, asked := at("reboot_called"), at("reboot_asked")
			took := asked.Sub(called)
			out := res["output"]
			wantLog := func(s string) {
				t.Helper()
				if !strings.Contains(out, s) {
					t.Errorf("the inner log lacks %q", s)
				}
			}
			switch {
			case tc.noLogin:
				wantLog("logind is not available")
				wantLog(fmt.Sprintf("via=%q", systemd.ViaManager))
			case tc.hold < tc.timeout:
				// It waited for the lock: Reboot returned no sooner than
				// the lock's process ended, hold after it was started.
				held := at("inhibit_start").Add(tc.hold)
				if asked.Before(held) {
					t.Errorf("reboot asked %s before the lock could be released", held.Sub(asked))
				}
				if took >= tc.timeout {
					t.Errorf("Reboot took %s, the whole timeout %s: it did not see the lock go", took, tc.timeout)
				}
				if res["lock_running"] != "false" {
					t.Errorf("the lock's process still ran when Reboot returned")
				}
				wantLog("reboot blocked by an inhibitor lock")
				wantLog("who=" + inhibitBy)
				wantLog("inhibitor locks released")
				wantLog("via=" + systemd.ViaLogind)
			default:
				// It waited for the timeout, then rebooted with the lock
				// held.
				if took < tc.timeout {
					t.Errorf("Reboot returned after %s, before the timeout %s", took, tc.timeout)
				}
				if took > tc.timeout+30*time.Second {
					t.Errorf("Reboot took %s for a timeout of %s", took, tc.timeout)
				}
				// That the lock was still held when Reboot gave up is
				// its log line below: once the reboot was asked, the
				// shutdown may end the lock's process before the inner
				// test looks (CI saw it once under load).
				wantLog("who=" + inhibitBy)
				wantLog("inhibitor lock still held; rebooting anyway")
				wantLog("via=" + systemd.ViaLogind)
			}
			t.Logf("TIMING Reboot returned %s after it was called", took.Round(time.Millisecond))

			t.Logf("TIMING second boot running %s after Reboot returned", booted.Sub(asked).Round(time.Millisecond))
			if n := h.Boots(); n != 2 {
				t.Errorf("Boots() = %d, want 2", n)
			}
		})
	}
}

// TestInner is the half of the tests that runs inside a host; see inner.
func TestInner(t *testing.T) {
	if os.Getenv(innerEnv) != "1" {
		t.Skip("runs inside a test host only, started by the other tests of this package")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	result := func(k string, v any) { fmt.Printf("RESULT %s=%v\n", k, v) }
	timeout, _ := time.ParseDuration(os.Getenv("OUTPOST_SYSTEMD_TIMEOUT"))
	s, err := systemd.New(ctx, systemd.Options{
		Logger:         slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{Level: slog.LevelDebug})),
		InhibitTimeout: timeout,
		InhibitPoll:    100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	units := strings.Fields(os.Getenv("OUTPOST_SYSTEMD_UNITS"))
	wantErr := func(err error) {
		if err == nil {
			t.Fatal("no error")
		}
		result("error", strconv.Quote(err.Error()))
		var de dbus.Error
		if errors.As(err, &de) {
			result("dbus_error", de.Name)
		}
	}
	switch op := os.Getenv("OUTPOST_SYSTEMD_OP"); op {
	case "reload":
		err = s.DaemonReload(ctx)
	case "enable":
		err = s.EnableUnits(ctx, units)
	case "disable":
		err = s.DisableUnits(ctx, units)
	case "mask":
		err = s.MaskUnits(ctx, units)
	case "unmask":
		err = s.UnmaskUnits(ctx, units)
	case "enable-fails":
		wantErr(s.EnableUnits(ctx, units))
	case "mask-fails":
		wantErr(s.MaskUnits(ctx, units))
	case "reload-unit":
		err = s.ReloadUnit(ctx, units[0])
	case "restart-unit":
		err = s.RestartUnit(ctx, units[0])
	case "reload-unit-fails":
		wantErr(s.ReloadUnit(ctx, units[0]))
	case "restart-unit-fails":
		wantErr(s.RestartUnit(ctx, units[0]))
	case "active-state":
		var state string
		state, err = s.ActiveState(ctx, units[0])
		result("state", state)
	case "reboot":
		err = rebootInside(t, ctx, s, result)
	default:
		t.Fatalf("no op %q", op)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// rebootInside takes an inhibitor lock for OUTPOST_SYSTEMD_HOLD (unless
// 0) and reboots, printing when each happened.
func rebootInside(t *testing.T, ctx context.Context, s *systemd.Systemd, result func(string, any)) error {
	// The reboot stops this service with SIGTERM, which would cut it
	// short (see innerRebooting). The shell's ignoring it is not enough:
	// Go keeps only SIGHUP and SIGINT ignored when started so.
	signal.Ignore(syscall.SIGTERM)
	hold, err := time.ParseDuration(os.Getenv("OUTPOST_SYSTEMD_HOLD"))
	if err != nil {
		return err
	}
	lockEnded := make(chan struct{})
	if hold > 0 {
		cmd := exec.Command("systemd-inhibit", "--what=shutdown", "--mode=block", "--who="+inhibitBy,
			"--why=holding for the test", "sleep", strconv.FormatFloat(hold.Seconds(), 'f', -1, 64))
		// Not this process's stdout: the test reads it until every
		// writer has closed it, and the lock may be held past the reboot.
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		result("inhibit_start", time.Now().UnixNano())
		if err := cmd.Start(); err != nil {
			return err
		}
		go func() {
			_ = cmd.Wait()
			close(lockEnded)
		}()
		// Wait for logind to list the lock: Reboot would not wait for a
		// lock it cannot see yet.
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			list, err := s.Inhibitors(ctx)
			if err != nil {
				return err
			}
			if slices.ContainsFunc(list, func(in systemd.Inhibitor) bool { return in.Who == inhibitBy }) {
				break
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-lockEnded:
				return fmt.Errorf("systemd-inhibit ended before its lock was listed: %s", stderr.Bytes())
			case <-tick.C:
			}
		}
		result("inhibit_listed", time.Now().UnixNano())
	}
	result("reboot_called", time.Now().UnixNano())
	if err := s.Reboot(ctx, "test of osupdate/systemd"); err != nil {
		return err
	}
	result("reboot_asked", time.Now().UnixNano())
	select {
	case <-lockEnded:
		result("lock_running", false)
	default:
		result("lock_running", hold > 0)
	}
	return nil
}

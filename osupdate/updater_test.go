package osupdate

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/outpost-edge/outpost/controlplane/api"
)

var yes = true

func helloUnit() api.IgnitionUnit {
	return api.IgnitionUnit{Name: "hello.service", Enabled: &yes, Contents: "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"}
}

// sync runs Sync and fails the test on an error.
func syncOK(t *testing.T, u *Updater) {
	t.Helper()
	if _, err := u.Sync(context.Background()); err != nil {
		t.Fatalf("Sync: %v", err)
	}
}

// UPD-8, the node's half: cordon, drain, write files and units, stage
// the OS, reboot once; after the boot verify and report Done, uncordoned.
func TestUpdateAppliesAndReboots(t *testing.T) {
	h := newHost(t)
	h.writeFile("/etc/chrony.conf", "old\n")
	mc := config("rendered-worker-1", map[string]string{"/etc/chrony.conf": "pool%20x%0A", "/etc/new": "new"}, helloUnit())
	mc.Spec.OSImageURL = "v2"
	mc.Spec.KernelArguments = []string{"nosmt"}
	h.desire(mc, "")
	u := h.updater()
	syncOK(t, u)
	a := h.cluster.annotations()
	if a[api.AnnotationMCState] != api.MCStateRebooting || !h.cluster.unschedulable() || h.sd.rebootCount() != 1 || h.cluster.drains != 1 {
		t.Fatalf("before the reboot: state %q, cordoned %v, reboots %d, drains %d; want Rebooting, cordoned, one reboot, one drain",
			a[api.AnnotationMCState], h.cluster.unschedulable(), h.sd.rebootCount(), h.cluster.drains)
	}
	if s, _ := h.file("/etc/chrony.conf"); s != "pool x\n" {
		t.Errorf("/etc/chrony.conf = %q before the reboot", s)
	}
	if s, ok := h.file("/etc/systemd/system/hello.service"); !ok || !strings.Contains(s, "ExecStart=/bin/true") || !h.sd.enabled["hello.service"] {
		t.Errorf("unit file %q, enabled %v", s, h.sd.enabled["hello.service"])
	}
	// The same process looks again before the reboot comes: no second
	// reboot asked.
	syncOK(t, u)
	if n := h.sd.rebootCount(); n != 1 {
		t.Errorf("%d reboots asked by one process in one boot, want 1", n)
	}
	h.reboot()
	syncOK(t, h.updater())
	a = h.cluster.annotations()
	if a[api.AnnotationCurrentConfig] != mc.Name || a[api.AnnotationMCState] != api.MCStateDone || h.cluster.unschedulable() || a[api.AnnotationUpdateCordoned] != "" {
		t.Errorf("after the boot: %v, cordoned %v; want current %s, Done, uncordoned", a, h.cluster.unschedulable(), mc.Name)
	}
	if os, err := h.backend.Booted(context.Background()); err != nil || os.Version != "v2" || strings.Join(os.KernelArgs, " ") != "nosmt" {
		t.Errorf("booted %+v %v, want v2 with nosmt", os, err)
	}
	if h.sd.rebootCount() != 1 {
		t.Errorf("%d reboots, want 1", h.sd.rebootCount())
	}
}

// A config whose health check fails after the boot is rolled back: the
// old files, units and OS are restored, the host reboots back, and the
// node is Degraded with the reason, uncordoned; the config is not tried
// again, a newer one is.
func TestUpdateRollsBack(t *testing.T) {
	h := newHost(t)
	h.writeFile("/etc/chrony.conf", "old\n")
	mc := config("rendered-worker-2", map[string]string{"/etc/chrony.conf": "bad", "/etc/added": "x"}, helloUnit())
	mc.Spec.OSImageURL = "v2"
	mc.Spec.HealthCheck = &api.ConfigHealthCheck{Command: []string{"/usr/local/bin/site-check"}}
	h.desire(mc, "rendered-worker-1")
	h.checkFn = func(argv []string) error { return errors.New("exit status 3: ntp unreachable") }
	syncOK(t, h.updater())
	h.reboot()
	syncOK(t, h.updater()) // verify fails: roll back, reboot
	if h.sd.rebootCount() != 2 {
		t.Fatalf("%d reboots, want 2 (the update's and the rollback's)", h.sd.rebootCount())
	}
	if s, _ := h.file("/etc/chrony.conf"); s != "old\n" {
		t.Errorf("/etc/chrony.conf = %q after the rollback, want the old contents", s)
	}
	if _, ok := h.file("/etc/added"); ok {
		t.Error("/etc/added, new with the config, is still there after the rollback")
	}
	if _, ok := h.file("/etc/systemd/system/hello.service"); ok || h.sd.enabled["hello.service"] {
		t.Error("the config's unit is still there or enabled after the rollback")
	}
	h.reboot()
	u := h.updater()
	syncOK(t, u)
	a := h.cluster.annotations()
	if a[api.AnnotationMCState] != api.MCStateDegraded || !strings.Contains(a[api.AnnotationMCReason], "ntp unreachable") ||
		!strings.Contains(a[api.AnnotationMCReason], "rolled back to rendered-worker-1") || a[api.AnnotationCurrentConfig] != "rendered-worker-1" || h.cluster.unschedulable() {
		t.Errorf("after the rollback: %v cordoned %v; want Degraded with the reason, current unchanged, uncordoned", a, h.cluster.unschedulable())
	}
	if os, _ := h.backend.Booted(context.Background()); os.Version != "v1" {
		t.Errorf("booted %s after the rollback, want v1", os.Version)
	}
	// Not tried again.
	syncOK(t, u)
	if h.sd.rebootCount() != 2 || h.cluster.drains != 1 {
		t.Errorf("the failed config was tried again: %d reboots, %d drains", h.sd.rebootCount(), h.cluster.drains)
	}
	// A newer config is.
	h.checkFn = nil
	h.desire(config("rendered-worker-3", map[string]string{"/etc/chrony.conf": "good"}), "")
	syncOK(t, u)
	h.reboot()
	syncOK(t, h.updater())
	if a := h.cluster.annotations(); a[api.AnnotationCurrentConfig] != "rendered-worker-3" || a[api.AnnotationMCState] != api.MCStateDone {
		t.Errorf("the newer config: %v", a)
	}
}

// A drain that fails never leads to a reboot: the node stays Working
// (its place in the pool kept) with the reason, cordoned, nothing
// written; the next try goes on.
func TestUpdateDrainFails(t *testing.T) {
	h := newHost(t)
	h.desire(config("rendered-worker-1", map[string]string{"/etc/x": "x"}), "")
	h.cluster.drainErr = errors.New("pod web-1: Cannot evict pod as it would violate the pod's disruption budget")
	u := h.updater()
	if _, err := u.Sync(context.Background()); err == nil {
		t.Fatal("Sync with a failing drain: no error")
	}
	a := h.cluster.annotations()
	if a[api.AnnotationMCState] != api.MCStateWorking || !strings.Contains(a[api.AnnotationMCReason], "drain blocked, retrying") ||
		!strings.Contains(a[api.AnnotationMCReason], "disruption budget") || !h.cluster.unschedulable() || h.sd.rebootCount() != 0 {
		t.Errorf("after a failed drain: %v, %d reboots", a, h.sd.rebootCount())
	}
	if _, ok := h.file("/etc/x"); ok {
		t.Error("a file was written though the drain failed")
	}
	h.cluster.drainErr = nil
	syncOK(t, u)
	h.reboot()
	syncOK(t, h.updater())
	if a := h.cluster.annotations(); a[api.AnnotationMCState] != api.MCStateDone || a[api.AnnotationMCReason] != "" {
		t.Errorf("after the drain passed: %v", a)
	}
}

// An administrator's cordon is not the update's to lift.
func TestUpdateKeepsAnAdministratorsCordon(t *testing.T) {
	h := newHost(t)
	h.cluster.node.Spec.Unschedulable = true
	h.desire(config("rendered-worker-1", map[string]string{"/etc/x": "x"}), "")
	syncOK(t, h.updater())
	h.reboot()
	syncOK(t, h.updater())
	if !h.cluster.unschedulable() || h.cluster.annotations()[api.AnnotationMCState] != api.MCStateDone {
		t.Errorf("the administrator's cordon was lifted (cordoned %v) or the update did not finish", h.cluster.unschedulable())
	}
}

// The agent killed right after each recorded step (UPD-8: every step is
// idempotent and recorded before it acts): a new agent process converges
// with at most one reboot more, and the node ends Done, uncordoned, with
// the config's files and unit.
func TestUpdateKilledAtEveryStep(t *testing.T) {
	// The steps a run records without a kill.
	probe := newHost(t)
	probe.writeFile("/etc/chrony.conf", "old\n")
	probe.desire(config("rendered-worker-1", map[string]string{"/etc/chrony.conf": "new"}, helloUnit()), "")
	syncOK(t, probe.updater())
	probe.reboot()
	syncOK(t, probe.updater())
	steps := probe.journal.saves
	if steps < 6 {
		t.Fatalf("only %d journal saves in an update", steps)
	}
	for kill := 1; kill <= steps; kill++ {
		h := newHost(t)
		h.writeFile("/etc/chrony.conf", "old\n")
		h.desire(config("rendered-worker-1", map[string]string{"/etc/chrony.conf": "new"}, helloUnit()), "")
		h.journal.killAt = kill
		rebootsSeen := 0
		for range 10 {
			_, err := h.updater().Sync(context.Background())
			if err != nil && !errors.Is(err, errKilled) {
				t.Fatalf("kill at save %d: %v", kill, err)
			}
			if n := h.sd.rebootCount(); n > rebootsSeen {
				rebootsSeen = n
				h.reboot()
			}
			if a := h.cluster.annotations(); a[api.AnnotationMCState] == api.MCStateDone && a[api.AnnotationCurrentConfig] == "rendered-worker-1" {
				break
			}
		}
		a := h.cluster.annotations()
		if a[api.AnnotationMCState] != api.MCStateDone || a[api.AnnotationCurrentConfig] != "rendered-worker-1" || h.cluster.unschedulable() {
			t.Errorf("kill at save %d: ended %v cordoned %v", kill, a, h.cluster.unschedulable())
		}
		if s, _ := h.file("/etc/chrony.conf"); s != "new" {
			t.Errorf("kill at save %d: /etc/chrony.conf = %q", kill, s)
		}
		if n := h.sd.rebootCount(); n > 2 {
			t.Errorf("kill at save %d: %d reboots, want at most one more than 1", kill, n)
		}
		for _, st := range h.cluster.history {
			if strings.HasPrefix(st, api.MCStateRebooting) && strings.HasSuffix(st, "cordoned=false") {
				t.Errorf("kill at save %d: the node was Rebooting uncordoned (%v)", kill, h.cluster.history)
				break
			}
		}
	}
}

// Nothing to change: no cordon-and-reboot cycle beyond reporting Done.
func TestUpdateWithoutChangesSkipsTheReboot(t *testing.T) {
	h := newHost(t)
	h.writeFile("/etc/x", "x")
	if err := chmodFile(h, "/etc/x", 0o644); err != nil {
		t.Fatal(err)
	}
	h.desire(config("rendered-worker-1", map[string]string{"/etc/x": "x"}), "")
	syncOK(t, h.updater())
	if a := h.cluster.annotations(); a[api.AnnotationMCState] != api.MCStateDone || a[api.AnnotationCurrentConfig] != "rendered-worker-1" || h.sd.rebootCount() != 0 {
		t.Errorf("a config the host already has: %v, %d reboots", a, h.sd.rebootCount())
	}
	if h.cluster.drains != 0 || slices.ContainsFunc(h.cluster.history, func(s string) bool { return strings.HasSuffix(s, "cordoned=true") }) {
		t.Errorf("a config that changes nothing cordoned or drained the node: %v, %d drains", h.cluster.history, h.cluster.drains)
	}
}

// A config the OS backend cannot stage is refused before anything is
// touched: Degraded with the reason, no cordon, no drain, no reboot.
func TestUpdateRefusedByTheBackend(t *testing.T) {
	h := newHost(t)
	h.backend = nil
	mc := config("rendered-worker-1", map[string]string{"/etc/x": "x"})
	mc.Spec.OSImageURL = "quay.io/site/os:42"
	h.desire(mc, "")
	u, err := New(Config{Cluster: h.cluster, Systemd: h.sd, Backend: NoneBackend{}, Journal: h.journal, Root: h.root, RunDir: h.runDir})
	if err != nil {
		t.Fatal(err)
	}
	syncOK(t, u)
	a := h.cluster.annotations()
	if a[api.AnnotationMCState] != api.MCStateDegraded || !strings.Contains(a[api.AnnotationMCReason], "--os-backend") || h.cluster.unschedulable() || h.cluster.drains != 0 {
		t.Errorf("an OS image on the none backend: %v cordoned %v drains %d", a, h.cluster.unschedulable(), h.cluster.drains)
	}
	if _, ok := h.file("/etc/x"); ok {
		t.Error("a file was written for a config that was refused")
	}
	syncOK(t, u) // not tried again
	if h.cluster.drains != 0 {
		t.Error("the refused config was tried again")
	}
}

// The rollback killed after each recorded step still ends with the old
// files, the node Degraded with the check's own reason, uncordoned.
func TestRollbackKilledAtEveryStep(t *testing.T) {
	run := func(kill int) (*host, int) {
		h := newHost(t)
		h.writeFile("/etc/chrony.conf", "old\n")
		mc := config("rendered-worker-2", map[string]string{"/etc/chrony.conf": "new"}, helloUnit())
		mc.Spec.HealthCheck = &api.ConfigHealthCheck{Command: []string{"check"}}
		h.desire(mc, "")
		h.checkFn = func([]string) error { return errors.New("exit status 3: site check failed") }
		h.journal.killAt = kill
		seen := 0
		for range 12 {
			if _, err := h.updater().Sync(context.Background()); err != nil && !errors.Is(err, errKilled) {
				t.Fatalf("kill at save %d: %v", kill, err)
			}
			if n := h.sd.rebootCount(); n > seen {
				seen = n
				h.reboot()
			}
			if h.cluster.annotations()[api.AnnotationMCState] == api.MCStateDegraded {
				break
			}
		}
		return h, h.journal.saves
	}
	_, saves := run(0)
	for kill := 1; kill <= saves; kill++ {
		h, _ := run(kill)
		a := h.cluster.annotations()
		if a[api.AnnotationMCState] != api.MCStateDegraded || !strings.Contains(a[api.AnnotationMCReason], "site check failed") || h.cluster.unschedulable() {
			t.Errorf("kill at save %d: %v cordoned %v", kill, a, h.cluster.unschedulable())
		}
		if s, _ := h.file("/etc/chrony.conf"); s != "old\n" {
			t.Errorf("kill at save %d: /etc/chrony.conf = %q after the rollback", kill, s)
		}
		if n := h.sd.rebootCount(); n > 3 {
			t.Errorf("kill at save %d: %d reboots, want at most 3", kill, n)
		}
	}
}

// A write step that fails halfway (the files written, systemd not
// reached) is done again; the backups it keeps are of the files as they
// were before the first try, so a rollback restores those.
func TestUpdateRetriedWriteKeepsTheFirstBackup(t *testing.T) {
	h := newHost(t)
	h.writeFile("/etc/chrony.conf", "old\n")
	mc := config("rendered-worker-1", map[string]string{"/etc/chrony.conf": "new"})
	mc.Spec.HealthCheck = &api.ConfigHealthCheck{Command: []string{"false"}}
	h.desire(mc, "")
	h.checkFn = func([]string) error { return errors.New("exit status 1") }
	h.sd.failReloads = 1
	u := h.updater()
	if _, err := u.Sync(context.Background()); err == nil {
		t.Fatal("a failed daemon-reload: no error")
	}
	if s, _ := h.file("/etc/chrony.conf"); s != "new" {
		t.Fatalf("the first try did not write the file (%q): the test does not test the retry", s)
	}
	syncOK(t, u)
	h.reboot()
	syncOK(t, h.updater())
	h.reboot()
	syncOK(t, h.updater())
	if s, _ := h.file("/etc/chrony.conf"); s != "old\n" {
		t.Errorf("after the rollback /etc/chrony.conf = %q, want the contents from before the first try", s)
	}
}

// A setuid file's mode is written and verified as such (Ignition's mode
// is Unix bits; Go keeps setuid elsewhere): no endless rollback.
func TestUpdateSetuidFile(t *testing.T) {
	h := newHost(t)
	mc := config("rendered-worker-1", map[string]string{"/usr/local/bin/tool": "x"})
	mode := 0o4755
	mc.Spec.Config.Storage.Files[0].Mode = &mode
	h.desire(mc, "")
	syncOK(t, h.updater())
	h.reboot()
	syncOK(t, h.updater())
	if a := h.cluster.annotations(); a[api.AnnotationMCState] != api.MCStateDone {
		t.Fatalf("setuid file: %v", a)
	}
	st, err := os.Stat(filepath.Join(h.root, "usr/local/bin/tool"))
	if err != nil || st.Mode()&os.ModeSetuid == 0 || st.Mode().Perm() != 0o755 {
		t.Errorf("mode %v %v, want setuid 0755", st.Mode(), err)
	}
}

// A path that is a symbolic link (/etc/resolv.conf) is replaced by the
// config's file and comes back as the same link on a rollback.
func TestUpdateOverASymlink(t *testing.T) {
	h := newHost(t)
	h.writeFile("/run/resolv.conf", "nameserver 10.0.0.1\n")
	if err := os.MkdirAll(filepath.Join(h.root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../run/resolv.conf", filepath.Join(h.root, "etc/resolv.conf")); err != nil {
		t.Fatal(err)
	}
	mc := config("rendered-worker-1", map[string]string{"/etc/resolv.conf": "nameserver%2010.0.0.2%0A"})
	mc.Spec.HealthCheck = &api.ConfigHealthCheck{Command: []string{"check"}}
	h.desire(mc, "")
	h.checkFn = func([]string) error { return errors.New("exit status 1") }
	syncOK(t, h.updater())
	if st, err := os.Lstat(filepath.Join(h.root, "etc/resolv.conf")); err != nil || !st.Mode().IsRegular() {
		t.Fatalf("/etc/resolv.conf after the write: %v %v, want a regular file", st, err)
	}
	h.reboot()
	syncOK(t, h.updater())
	h.reboot()
	syncOK(t, h.updater())
	if target, err := os.Readlink(filepath.Join(h.root, "etc/resolv.conf")); err != nil || target != "../run/resolv.conf" {
		t.Errorf("/etc/resolv.conf after the rollback: link %q %v, want the link back", target, err)
	}
}

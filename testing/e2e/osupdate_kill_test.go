package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/testing/nspawn"
)

// updatingHost is one nspawn host whose agent is held at update steps by
// its test hook, and the checks the kill and power-cut tests make of it.
type updatingHost struct {
	t   *testing.T
	ctx context.Context
	c   *testCluster
	h   *nspawn.Host
}

// startUpdatingHost boots one agent host whose agent holds at the
// Cordoned and Written steps once per boot, and gives its pool
// (maxUnavailable 1) a config whose unit takes 20 s to start, so that
// the health gate after the boot lasts long enough to be interrupted.
func startUpdatingHost(t *testing.T, ctx context.Context) *updatingHost {
	c, hosts := startSystemdHosts(t, ctx, 1, map[string]nspawn.File{
		"/etc/systemd/system/outpost-agent.service.d/20-hold.conf": {Content: "[Service]\nEnvironment=OUTPOST_TEST_HOLD_UPDATE_STEPS=Cordoned,Written\n"},
	})
	return &updatingHost{t: t, ctx: ctx, c: c, h: hosts[0].h}
}

func (u *updatingHost) applySlowPool() {
	u.t.Helper()
	pool := strings.Replace(updatePoolManifest(u.t), "maxUnavailable: 2", "maxUnavailable: 1", 1)
	pool = strings.Replace(pool, "ExecStart=/bin/sh -c 'cat /etc/outpost-e2e-live.conf > /run/e2e-hello || echo hello > /run/e2e-hello'", "ExecStart=/bin/sleep 20", 1)
	if !strings.Contains(pool, "/bin/sleep 20") {
		u.t.Fatal("the config's unit was not made slow")
	}
	u.c.apply(u.ctx, "pool", pool)
}

func (u *updatingHost) run(args ...string) string {
	u.t.Helper()
	out, err := u.h.Run(u.ctx, args...)
	if err != nil {
		u.t.Fatalf("%s: %v (%s)", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// journal is the agent's log of this boot (the host's journal is in
// /run, as on a minimal Debian).
func (u *updatingHost) journal() string {
	out, _ := u.h.Run(u.ctx, "journalctl", "-u", "outpost-agent", "-o", "cat", "--no-pager")
	return string(out)
}

func (u *updatingHost) node() *api.Node {
	u.t.Helper()
	n, err := u.c.node(u.ctx, "n1")
	if err != nil {
		u.t.Fatal(err)
	}
	return n
}

func (u *updatingHost) state() string {
	n, err := u.c.node(u.ctx, "n1")
	if err != nil {
		return err.Error()
	}
	return n.Annotations[api.AnnotationMCState] + " " + n.Annotations[api.AnnotationMCReason]
}

// held waits for the agent to hold at step.
func (u *updatingHost) held(step string) {
	u.t.Helper()
	waitFor(u.t, 2*time.Minute, "the agent held at step "+step, func() (bool, string) {
		for _, l := range strings.Split(u.journal(), "\n") {
			if strings.Contains(l, `msg="update held for a test"`) && strings.Contains(l, " step="+step+" ") {
				return true, ""
			}
		}
		return false, u.state()
	})
}

// heldBeforeDrain and heldAfterWrite check the host where the agent holds.
func (u *updatingHost) heldBeforeDrain() {
	u.t.Helper()
	u.held("Cordoned")
	if n := u.node(); !n.Spec.Unschedulable || n.Annotations[api.AnnotationMCState] != api.MCStateWorking {
		u.t.Errorf("held before the drain: cordoned %v, state %q; want cordoned and Working", n.Spec.Unschedulable, n.Annotations[api.AnnotationMCState])
	}
	if _, err := u.h.Run(u.ctx, "test", "-e", "/etc/outpost-e2e.conf"); err == nil {
		u.t.Error("/etc/outpost-e2e.conf written before the drain")
	}
}

func (u *updatingHost) heldAfterWrite(boots int) {
	u.t.Helper()
	u.held("Written")
	if s := u.run("cat", "/etc/outpost-e2e.conf"); s != "updated" || u.h.Boots() != boots {
		u.t.Errorf("held after the write: /etc/outpost-e2e.conf %q, %d boots; want the file written and %d boots", s, u.h.Boots(), boots)
	}
}

// inHealthGate waits for the agent of boot at least boots to be in the
// health gate, the config's slow unit still starting. Not WaitBoot: a
// boot counts as up once its jobs are done, the slow unit's too, and the
// health gate would be over by then.
func (u *updatingHost) inHealthGate(boots int) {
	u.t.Helper()
	waitFor(u.t, 2*time.Minute, "the agent of a new boot in its health gate", func() (bool, string) {
		if u.h.Boots() < boots {
			return false, fmt.Sprintf("%d boots", u.h.Boots())
		}
		j := u.journal()
		return strings.Contains(j, "step=Rebooting next=Booted"), lastLines(j, 3)
	})
	if out, _ := u.h.Run(u.ctx, "systemctl", "is-active", "e2e-hello.service"); strings.TrimSpace(string(out)) != "activating" {
		u.t.Errorf("the config's slow unit is %q: this is not the health gate", strings.TrimSpace(string(out)))
	}
}

// converged waits for the node Done on its config, uncordoned, and
// checks the file and that the host booted between min and max times.
func (u *updatingHost) converged(minBoots, maxBoots int) {
	u.t.Helper()
	waitFor(u.t, 2*time.Minute, "the node Done", func() (bool, string) {
		n := u.node()
		a := n.Annotations
		return a[api.AnnotationMCState] == api.MCStateDone && a[api.AnnotationCurrentConfig] == a[api.AnnotationDesiredConfig] && !n.Spec.Unschedulable, u.state()
	})
	if b := u.h.Boots(); b > maxBoots || b < minBoots {
		u.t.Errorf("%d boots, want %d (at most one more)", b, minBoots)
	} else {
		u.t.Logf("%d boots for the update", b)
	}
	if s := u.run("cat", "/etc/outpost-e2e.conf"); s != "updated" {
		u.t.Errorf("/etc/outpost-e2e.conf = %q", s)
	}
}

// TestConfigUpdateAgentKilled (SPEC UPD-8; issue 12's "the agent
// SIGKILLed at each step"), on a host booting a real systemd: the agent
// (the packaged unit, restarted by systemd) is SIGKILLed before the
// drain and after the write (held there by the agent's test hook, once
// per boot, so that the kill lands on that step), after it asked for
// the reboot (while a block inhibitor holds the reboot back), and after
// the boot (while the health gate waits for the config's slow unit).
// Each new agent goes on from its journal: the host reboots once, and
// the node ends Done with the config's file. Every step is also killed
// after each journal save in osupdate's tests.
func TestConfigUpdateAgentKilled(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	u := startUpdatingHost(t, ctx)
	h := u.h
	// A shutdown inhibitor a login session would hold (a backup, say).
	u.run("systemd-run", "--unit=hold-reboot", "systemd-inhibit", "--what=shutdown", "--mode=block", "--who=e2e", "--why=hold the reboot", "sleep", "600")
	waitFor(t, 30*time.Second, "the inhibitor held", func() (bool, string) {
		out, _ := h.Run(ctx, "systemd-inhibit", "--list", "--no-legend")
		return strings.Contains(string(out), "hold the reboot"), string(out)
	})
	agentPID := func() string { return u.run("systemctl", "show", "-p", "MainPID", "--value", "outpost-agent.service") }
	kill := func(why string) {
		t.Helper()
		before := agentPID()
		u.run("systemctl", "kill", "--signal=SIGKILL", "outpost-agent.service")
		waitFor(t, 30*time.Second, "the agent restarted by systemd after the kill "+why, func() (bool, string) {
			pid := agentPID()
			return pid != "0" && pid != before, pid
		})
		t.Logf("agent SIGKILLed %s (pid %s), systemd restarted it", why, before)
	}

	u.applySlowPool()
	u.heldBeforeDrain()
	kill("before the drain")
	u.heldAfterWrite(1)
	kill("after the write")
	waitFor(t, 2*time.Minute, "the agent asking the reboot", func() (bool, string) {
		return strings.Count(u.journal(), `msg=rebooting`) >= 1 && strings.HasPrefix(u.state(), api.MCStateRebooting), u.state()
	})
	kill("after it asked the reboot")
	waitFor(t, time.Minute, "the new agent asking the reboot again (same boot)", func() (bool, string) {
		n := strings.Count(u.journal(), `msg=rebooting`)
		return n >= 2, fmt.Sprintf("%d reboot requests", n)
	})
	if h.Boots() != 1 {
		t.Fatalf("%d boots while the inhibitor held", h.Boots())
	}
	u.run("systemctl", "stop", "hold-reboot.service")
	u.inHealthGate(2)
	kill("after the boot, in the health gate")
	if s := u.state(); !strings.HasPrefix(s, api.MCStateRebooting) {
		t.Errorf("state %q when the agent was killed in the health gate, want Rebooting still", s)
	}
	u.converged(2, 3)
}

// TestConfigUpdatePowerCut (SPEC UPD-8; issue 12's "a host that loses
// power mid-apply converges when it comes back"): the whole host, not
// only the agent, is cut off at once (every process SIGKILLed, no
// orderly shutdown, /run gone) before the drain, after the write, and
// in the health gate after the update's reboot; each time it boots
// again and the agent the boot starts goes on from its journal. The
// update ends Done with one reboot of its own: five boots, at most six.
func TestConfigUpdatePowerCut(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	u := startUpdatingHost(t, ctx)
	// Not WaitBoot after a cut: the boot after the write starts the
	// config's slow unit, and the agent reboots it before it is up.
	cut := func(why string, boots int) {
		t.Helper()
		if err := u.h.PowerCut(ctx); err != nil {
			t.Fatal(err)
		}
		if b := u.h.Boots(); b != boots {
			t.Fatalf("boot %d after the power cut %s, want %d", b, why, boots)
		}
		t.Logf("power cut %s; boot %d under way", why, boots)
	}
	u.applySlowPool()
	u.heldBeforeDrain()
	cut("before the drain", 2)
	u.heldAfterWrite(2)
	cut("after the write", 3)
	// The agent of boot 3 asks the update's reboot (boot 4) and is in
	// its health gate there.
	u.inHealthGate(4)
	cut("in the health gate", 5)
	u.converged(5, 6)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

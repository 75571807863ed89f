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
	c, hosts := startSystemdHosts(t, ctx, 1, map[string]nspawn.File{
		"/etc/systemd/system/outpost-agent.service.d/20-hold.conf": {Content: "[Service]\nEnvironment=OUTPOST_TEST_HOLD_UPDATE_STEPS=Cordoned,Written\n"},
	})
	h := hosts[0].h
	run := func(args ...string) string {
		t.Helper()
		out, err := h.Run(ctx, args...)
		if err != nil {
			t.Fatalf("%s: %v (%s)", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	// A shutdown inhibitor a login session would hold (a backup, say).
	run("systemd-run", "--unit=hold-reboot", "systemd-inhibit", "--what=shutdown", "--mode=block", "--who=e2e", "--why=hold the reboot", "sleep", "600")
	waitFor(t, 30*time.Second, "the inhibitor held", func() (bool, string) {
		out, _ := h.Run(ctx, "systemd-inhibit", "--list", "--no-legend")
		return strings.Contains(string(out), "hold the reboot"), string(out)
	})
	agentPID := func() string { return run("systemctl", "show", "-p", "MainPID", "--value", "outpost-agent.service") }
	kill := func(why string) {
		t.Helper()
		before := agentPID()
		run("systemctl", "kill", "--signal=SIGKILL", "outpost-agent.service")
		waitFor(t, 30*time.Second, "the agent restarted by systemd after the kill "+why, func() (bool, string) {
			pid := agentPID()
			return pid != "0" && pid != before, pid
		})
		t.Logf("agent SIGKILLed %s (pid %s), systemd restarted it", why, before)
	}
	journal := func() string {
		out, _ := h.Run(ctx, "journalctl", "-u", "outpost-agent", "-o", "cat", "--no-pager")
		return string(out)
	}

	pool := strings.Replace(updatePoolManifest(t), "maxUnavailable: 2", "maxUnavailable: 1", 1)
	pool = strings.Replace(pool, "ExecStart=/bin/sh -c 'cat /etc/outpost-e2e-live.conf > /run/e2e-hello || echo hello > /run/e2e-hello'", "ExecStart=/bin/sleep 20", 1)
	if !strings.Contains(pool, "/bin/sleep 20") {
		t.Fatal("the config's unit was not made slow")
	}
	c.apply(ctx, "pool", pool)
	state := func() string {
		n, err := c.node(ctx, "n1")
		if err != nil {
			return err.Error()
		}
		return n.Annotations[api.AnnotationMCState] + " " + n.Annotations[api.AnnotationMCReason]
	}
	held := func(step string) {
		t.Helper()
		waitFor(t, 2*time.Minute, "the agent held at step "+step, func() (bool, string) {
			for _, l := range strings.Split(journal(), "\n") {
				if strings.Contains(l, `msg="update held for a test"`) && strings.Contains(l, " step="+step+" ") {
					return true, ""
				}
			}
			return false, state()
		})
	}
	node := func() *api.Node {
		t.Helper()
		n, err := c.node(ctx, "n1")
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	held("Cordoned")
	if n := node(); !n.Spec.Unschedulable || n.Annotations[api.AnnotationMCState] != api.MCStateWorking {
		t.Errorf("held before the drain: cordoned %v, state %q; want cordoned and Working", n.Spec.Unschedulable, n.Annotations[api.AnnotationMCState])
	}
	if _, err := h.Run(ctx, "test", "-e", "/etc/outpost-e2e.conf"); err == nil {
		t.Error("/etc/outpost-e2e.conf written before the drain")
	}
	kill("before the drain")
	held("Written")
	if s := run("cat", "/etc/outpost-e2e.conf"); s != "updated" || h.Boots() != 1 {
		t.Errorf("held after the write: /etc/outpost-e2e.conf %q, %d boots; want the file written and no reboot yet", s, h.Boots())
	}
	kill("after the write")
	waitFor(t, 2*time.Minute, "the agent asking the reboot", func() (bool, string) {
		return strings.Count(journal(), `msg=rebooting`) >= 1 && strings.HasPrefix(state(), api.MCStateRebooting), state()
	})
	kill("after it asked the reboot")
	waitFor(t, time.Minute, "the new agent asking the reboot again (same boot)", func() (bool, string) {
		n := strings.Count(journal(), `msg=rebooting`)
		return n >= 2, fmt.Sprintf("%d reboot requests", n)
	})
	if h.Boots() != 1 {
		t.Fatalf("%d boots while the inhibitor held", h.Boots())
	}
	run("systemctl", "stop", "hold-reboot.service")
	// Not WaitBoot: a boot counts as up once its jobs are done, the slow
	// unit's too, and the health gate would be over by then.
	waitFor(t, time.Minute, "the new boot's agent in its health gate", func() (bool, string) {
		if h.Boots() < 2 {
			return false, fmt.Sprintf("%d boots", h.Boots())
		}
		j := journal()
		return strings.Contains(j, "step=Rebooting next=Booted"), lastLines(j, 3)
	})
	if out, _ := h.Run(ctx, "systemctl", "is-active", "e2e-hello.service"); strings.TrimSpace(string(out)) != "activating" {
		t.Errorf("the config's slow unit is %q: the kill below is not in the health gate", strings.TrimSpace(string(out)))
	}
	kill("after the boot, in the health gate")
	if s := state(); !strings.HasPrefix(s, api.MCStateRebooting) {
		t.Errorf("state %q when the agent was killed in the health gate, want Rebooting still", s)
	}
	waitFor(t, 2*time.Minute, "the node Done", func() (bool, string) {
		n, err := c.node(ctx, "n1")
		if err != nil {
			return false, err.Error()
		}
		a := n.Annotations
		return a[api.AnnotationMCState] == api.MCStateDone && a[api.AnnotationCurrentConfig] == a[api.AnnotationDesiredConfig] && !n.Spec.Unschedulable, state()
	})
	if b := h.Boots(); b > 3 || b < 2 {
		t.Errorf("%d boots, want 2 (one reboot; at most one more)", b)
	} else {
		t.Logf("%d boots for the update with four kills", b)
	}
	if s := run("cat", "/etc/outpost-e2e.conf"); s != "updated" {
		t.Errorf("/etc/outpost-e2e.conf = %q", s)
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

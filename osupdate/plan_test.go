package osupdate

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/outpost-edge/outpost/controlplane/api"
)

func restart(unit string) api.NodeDisruptionAction {
	return api.NodeDisruptionAction{Type: api.DisruptionRestart, Restart: &api.NodeDisruptionService{ServiceName: unit}}
}

func reload(unit string) api.NodeDisruptionAction {
	return api.NodeDisruptionAction{Type: api.DisruptionReload, Reload: &api.NodeDisruptionService{ServiceName: unit}}
}

func policy(files map[string][]api.NodeDisruptionAction, units map[string][]api.NodeDisruptionAction) *api.MachineConfiguration {
	mc := &api.MachineConfiguration{ObjectMeta: api.ObjectMeta{Name: api.MachineConfigurationName}}
	for p, a := range files {
		mc.Spec.NodeDisruptionPolicy.Files = append(mc.Spec.NodeDisruptionPolicy.Files, api.NodeDisruptionPolicyFile{Path: p, Actions: a})
	}
	for n, a := range units {
		mc.Spec.NodeDisruptionPolicy.Units = append(mc.Spec.NodeDisruptionPolicy.Units, api.NodeDisruptionPolicyUnit{Name: n, Actions: a})
	}
	return mc
}

// The node disruption policy decides per change (as the MCO does): a
// change no policy names drains and reboots, Reboot wins over anything,
// Drain drains without a reboot, and reloads and restarts are kept in
// order, once each. The OS changing always reboots.
func TestPlanFor(t *testing.T) {
	none := []api.NodeDisruptionAction{{Type: api.DisruptionNone}}
	pol := policy(map[string][]api.NodeDisruptionAction{
		"/etc/a":   none,
		"/etc/b":   {reload("b.service")},
		"/etc/c":   {{Type: api.DisruptionDrain}, restart("c.service"), reload("b.service")},
		"/etc/r":   {{Type: api.DisruptionReboot}},
		"/etc/dup": {reload("b.service")},
	}, map[string][]api.NodeDisruptionAction{
		"u.service": {{Type: api.DisruptionDaemonReload}, restart("u.service")},
	})
	file := func(p string) fileOp { return fileOp{path: p} }
	unitFile := func(u string) fileOp { return fileOp{path: unitDir + "/" + u, unit: u} }
	for _, tt := range []struct {
		name    string
		pol     *api.MachineConfiguration
		files   []fileOp
		units   []string
		os      bool
		reboot  bool
		drain   bool
		actions []string
		whyHas  string
	}{
		{name: "no policy object", files: []fileOp{file("/etc/a")}, reboot: true, drain: true, whyHas: "/etc/a changes and no node disruption policy"},
		{name: "None", pol: pol, files: []fileOp{file("/etc/a")}},
		{name: "reload", pol: pol, files: []fileOp{file("/etc/b")}, actions: []string{"Reload b.service"}},
		{name: "drain, restart, reload once", pol: pol, files: []fileOp{file("/etc/b"), file("/etc/c"), file("/etc/dup")}, drain: true,
			actions: []string{"Reload b.service", "Restart c.service"}, whyHas: "/etc/c changes and its policy drains"},
		{name: "an unnamed file among named", pol: pol, files: []fileOp{file("/etc/b"), file("/etc/other")}, reboot: true, drain: true, whyHas: "/etc/other"},
		{name: "Reboot", pol: pol, files: []fileOp{file("/etc/a"), file("/etc/r")}, reboot: true, drain: true, whyHas: "its policy reboots"},
		{name: "unit file goes by the unit's policy", pol: pol, files: []fileOp{unitFile("u.service")}, actions: []string{"DaemonReload", "Restart u.service"}},
		{name: "unit state change", pol: pol, units: []string{"u.service"}, actions: []string{"DaemonReload", "Restart u.service"}},
		{name: "unit without a policy", pol: pol, units: []string{"v.service"}, reboot: true, drain: true, whyHas: "unit v.service"},
		{name: "a policy for a file path is not a unit's", pol: policy(map[string][]api.NodeDisruptionAction{unitDir + "/w.service": none}, nil), files: []fileOp{unitFile("w.service")}, reboot: true, drain: true},
		{name: "OS", pol: pol, files: []fileOp{file("/etc/a")}, os: true, reboot: true, drain: true, whyHas: "OS image"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := planFor(tt.pol, tt.files, tt.units, tt.os)
			var got []string
			for _, a := range p.Actions {
				s := a.Type
				if a.Reload != nil {
					s += " " + a.Reload.ServiceName
				}
				if a.Restart != nil {
					s += " " + a.Restart.ServiceName
				}
				got = append(got, s)
			}
			if p.Reboot != tt.reboot || p.Drain != tt.drain || !slices.Equal(got, tt.actions) || !strings.Contains(p.Why, tt.whyHas) {
				t.Errorf("plan %+v (actions %v), want reboot %v drain %v actions %v why containing %q", p, got, tt.reboot, tt.drain, tt.actions, tt.whyHas)
			}
		})
	}
}

// A file whose policy restarts its service is taken up without a
// reboot, a drain or a cordon: the service is restarted after the write,
// the health gate runs, and the node reports Done.
func TestUpdateWithoutRebootByPolicy(t *testing.T) {
	h := newHost(t)
	old := config("rendered-worker-1", map[string]string{"/etc/chrony.conf": "old"})
	h.cluster.configs[old.Name] = old
	h.writeFile("/etc/chrony.conf", "old")
	h.cluster.policy = policy(map[string][]api.NodeDisruptionAction{"/etc/chrony.conf": {restart("chronyd.service")}}, nil)
	h.desire(config("rendered-worker-2", map[string]string{"/etc/chrony.conf": "new"}), old.Name)
	syncOK(t, h.updater())
	a := h.cluster.annotations()
	if a[api.AnnotationMCState] != api.MCStateDone || a[api.AnnotationCurrentConfig] != "rendered-worker-2" {
		t.Fatalf("after one sync: %v, want Done on rendered-worker-2", a)
	}
	if s, _ := h.file("/etc/chrony.conf"); s != "new" {
		t.Errorf("/etc/chrony.conf = %q", s)
	}
	if n := h.sd.rebootCount(); n != 0 || h.cluster.drains != 0 {
		t.Errorf("%d reboots, %d drains, want none", n, h.cluster.drains)
	}
	if slices.ContainsFunc(h.cluster.history, func(s string) bool { return strings.HasSuffix(s, "cordoned=true") }) {
		t.Errorf("cordoned on the way: %v", h.cluster.history)
	}
	if !slices.Contains(h.cluster.history, api.MCStateWorking+" cordoned=false") {
		t.Errorf("never Working (the pool counts the node as updating): %v", h.cluster.history)
	}
	if got := h.sd.jobList(); !slices.Equal(got, []string{"restart chronyd.service"}) {
		t.Errorf("jobs %v, want the one restart", got)
	}
}

// A Drain action drains (so cordons) and takes the config up without a
// reboot; the cordon is lifted at the end.
func TestUpdateDrainWithoutReboot(t *testing.T) {
	h := newHost(t)
	h.cluster.policy = policy(map[string][]api.NodeDisruptionAction{"/etc/app.conf": {{Type: api.DisruptionDrain}, reload("app.service")}}, nil)
	h.desire(config("rendered-worker-1", map[string]string{"/etc/app.conf": "v2"}), "")
	syncOK(t, h.updater())
	a := h.cluster.annotations()
	if a[api.AnnotationMCState] != api.MCStateDone || h.cluster.drains != 1 || h.sd.rebootCount() != 0 || h.cluster.unschedulable() {
		t.Errorf("state %v, %d drains, %d reboots, cordoned %v; want Done, one drain, no reboot, uncordoned", a, h.cluster.drains, h.sd.rebootCount(), h.cluster.unschedulable())
	}
	if !slices.Contains(h.cluster.history, api.MCStateWorking+" cordoned=true") {
		t.Errorf("not cordoned for the drain: %v", h.cluster.history)
	}
}

// A reload that fails on the new file rolls the update back without a
// reboot: the old file is back, the service is reloaded again onto it,
// the node is Degraded with the reason and the config is not retried.
func TestUpdateWithoutRebootRollsBack(t *testing.T) {
	h := newHost(t)
	h.writeFile("/etc/app.conf", "good")
	h.cluster.policy = policy(map[string][]api.NodeDisruptionAction{"/etc/app.conf": {reload("app.service")}}, nil)
	h.desire(config("rendered-worker-1", map[string]string{"/etc/app.conf": "bad"}), "")
	h.sd.failJobs["app.service"] = true
	syncOK(t, h.updater())
	a := h.cluster.annotations()
	if a[api.AnnotationMCState] != api.MCStateDegraded || !strings.Contains(a[api.AnnotationMCReason], "reload app.service") || a[api.AnnotationCurrentConfig] != "" {
		t.Errorf("annotations %v, want Degraded naming the failed reload, no current config", a)
	}
	if s, _ := h.file("/etc/app.conf"); s != "good" {
		t.Errorf("/etc/app.conf = %q after the rollback, want the old contents", s)
	}
	if n := h.sd.rebootCount(); n != 0 {
		t.Errorf("%d reboots, want none", n)
	}
	if got := h.sd.jobList(); len(got) != 2 {
		t.Errorf("jobs %v, want the reload onto the new file and onto the old", got)
	}
	// Not tried again: the same desired config stays failed here.
	h.sd.failJobs["app.service"] = false
	syncOK(t, h.updater())
	if s, _ := h.file("/etc/app.conf"); s != "good" {
		t.Errorf("the failed config was tried again: /etc/app.conf = %q", s)
	}
}

// A new enabled unit taken up without a reboot is started, as the boot
// would have; the health gate then finds it active.
func TestUpdateWithoutRebootStartsEnabledUnits(t *testing.T) {
	h := newHost(t)
	h.cluster.policy = policy(nil, map[string][]api.NodeDisruptionAction{"hello.service": {{Type: api.DisruptionNone}}})
	h.desire(config("rendered-worker-1", nil, helloUnit()), "")
	syncOK(t, h.updater())
	if a := h.cluster.annotations(); a[api.AnnotationMCState] != api.MCStateDone || h.sd.rebootCount() != 0 {
		t.Errorf("annotations %v, %d reboots; want Done without a reboot", a, h.sd.rebootCount())
	}
	if !h.sd.enabled["hello.service"] {
		t.Error("hello.service not enabled")
	}
}

// Killed after each recorded step of an update without a reboot: a new
// process converges, never reboots, never cordons, and the restart runs
// at least once after the write.
func TestUpdateWithoutRebootKilledAtEveryStep(t *testing.T) {
	setup := func(h *host) {
		h.cluster.policy = policy(map[string][]api.NodeDisruptionAction{"/etc/chrony.conf": {restart("chronyd.service")}}, nil)
		h.writeFile("/etc/chrony.conf", "old")
		h.desire(config("rendered-worker-1", map[string]string{"/etc/chrony.conf": "new"}), "")
	}
	probe := newHost(t)
	setup(probe)
	syncOK(t, probe.updater())
	steps := probe.journal.saves
	if steps < 4 {
		t.Fatalf("only %d journal saves in an update without a reboot", steps)
	}
	for kill := 1; kill <= steps; kill++ {
		h := newHost(t)
		setup(h)
		h.journal.killAt = kill
		for range 5 {
			if _, err := h.updater().Sync(context.Background()); err != nil && !errors.Is(err, errKilled) {
				t.Fatalf("kill at save %d: %v", kill, err)
			}
		}
		a := h.cluster.annotations()
		if a[api.AnnotationMCState] != api.MCStateDone || a[api.AnnotationCurrentConfig] != "rendered-worker-1" || h.sd.rebootCount() != 0 || h.cluster.unschedulable() {
			t.Errorf("kill at save %d: %v, %d reboots, cordoned %v", kill, a, h.sd.rebootCount(), h.cluster.unschedulable())
		}
		if s, _ := h.file("/etc/chrony.conf"); s != "new" || !slices.Contains(h.sd.jobList(), "restart chronyd.service") {
			t.Errorf("kill at save %d: /etc/chrony.conf = %q, jobs %v", kill, s, h.sd.jobList())
		}
	}
}

// The OS changing reboots even when every file's policy says None.
func TestUpdateOSChangeRebootsDespitePolicy(t *testing.T) {
	h := newHost(t)
	h.cluster.policy = policy(map[string][]api.NodeDisruptionAction{"/etc/a": {{Type: api.DisruptionNone}}}, nil)
	mc := config("rendered-worker-1", map[string]string{"/etc/a": "x"})
	mc.Spec.KernelArguments = []string{"nosmt"}
	h.desire(mc, "")
	syncOK(t, h.updater())
	if h.sd.rebootCount() != 1 || h.cluster.drains != 1 {
		t.Errorf("%d reboots, %d drains; want the kernel arguments to drain and reboot", h.sd.rebootCount(), h.cluster.drains)
	}
}

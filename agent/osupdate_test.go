package agent_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
	"github.com/outpost-edge/outpost/osupdate"
)

// recordingSystemd stands for the host's systemd: it records what it is
// asked; enabled units are active; a reboot is counted (the test
// restarts the agent with /run emptied, as a boot would).
type recordingSystemd struct {
	mu      sync.Mutex
	enabled map[string]bool
	reboots int
	jobs    []string
}

func (s *recordingSystemd) DaemonReload(context.Context) error { return nil }
func (s *recordingSystemd) set(units []string, v bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, u := range units {
		s.enabled[u] = v
	}
	return nil
}
func (s *recordingSystemd) EnableUnits(_ context.Context, u []string) error  { return s.set(u, true) }
func (s *recordingSystemd) DisableUnits(_ context.Context, u []string) error { return s.set(u, false) }
func (s *recordingSystemd) MaskUnits(context.Context, []string) error        { return nil }
func (s *recordingSystemd) UnmaskUnits(context.Context, []string) error      { return nil }
func (s *recordingSystemd) ActiveState(_ context.Context, unit string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.enabled[unit] {
		return "active", nil
	}
	return "inactive", nil
}
func (s *recordingSystemd) ReloadUnit(_ context.Context, unit string) error {
	return s.job("reload " + unit)
}
func (s *recordingSystemd) RestartUnit(_ context.Context, unit string) error {
	return s.job("restart " + unit)
}
func (s *recordingSystemd) job(what string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.jobs = append(s.jobs, what)
	return nil
}
func (s *recordingSystemd) jobList() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.jobs)
}
func (s *recordingSystemd) Reboot(context.Context, string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reboots++
	return nil
}
func (s *recordingSystemd) rebootCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reboots
}

// TestConfigUpdate (SPEC UPD-8, UPD-9) drives the agent's config update
// against a real control plane: a pool and its config, the controller
// giving the node the rendered config, the agent cordoning itself
// (through NodeRestriction), draining its pod through the eviction API,
// writing the file and the unit, staging the OS and asking a reboot;
// after the "boot" (the agent restarted with /run emptied) it verifies,
// uncordons and reports Done, and the pool is Updated.
func TestConfigUpdate(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	root, run := filepath.Join(dir, "root"), filepath.Join(dir, "run")
	sd := &recordingSystemd{enabled: map[string]bool{}}
	cfg := e.config(e.rt)
	cfg.JoinToken = e.joinString()
	cfg.Labels["node-role.kubernetes.io/worker"] = ""
	cfg.OSSystemd = sd
	cfg.OSBackend = &osupdate.DirBackend{Dir: filepath.Join(dir, "os"), Initial: "v1", BootID: func() (string, error) { return osupdate.BootID(run) }}
	cfg.OSRoot, cfg.OSRunDir = root, run
	cfg.OSUpdateInterval = 100 * time.Millisecond
	e.start(cfg)
	waitFor(t, "the node ready", 30*time.Second, func() (bool, string) {
		obj, err := e.admin.Get(e.ctx, nodesR, "", e.node, client.GetOptions{})
		return err == nil && nodeReady(obj.(*api.Node)) == "True", errString(err)
	})
	e.createPod("web", nil)
	e.waitPhase("web", api.PodRunning, nil)

	// The README's example pool, and a config of the test's.
	pool, err := os.ReadFile("../examples/machineconfig/00-pool-worker.yaml")
	if err != nil {
		t.Fatal(err)
	}
	objs, _, err := api.DecodeYAMLOrJSON([]byte(string(pool) + `---
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: 50-site
  labels:
    machineconfiguration.openshift.io/role: worker
spec:
  osImageURL: v2
  kernelArguments: [nosmt]
  config:
    ignition:
      version: 3.2.0
    storage:
      files:
      - path: /etc/site.conf
        mode: 384
        contents:
          source: data:,site%3Da%0A
    systemd:
      units:
      - name: site.service
        enabled: true
        contents: |
          [Service]
          ExecStart=/bin/true
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if _, _, err := e.admin.Create(e.ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	node := func() *api.Node {
		obj, err := e.admin.Get(e.ctx, nodesR, "", e.node, client.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return obj.(*api.Node)
	}
	waitFor(t, "the agent asking a reboot", 60*time.Second, func() (bool, string) {
		n := node()
		return sd.rebootCount() == 1, n.Annotations[api.AnnotationMCState] + " " + n.Annotations[api.AnnotationMCReason]
	})
	n := node()
	if !n.Spec.Unschedulable || n.Annotations[api.AnnotationMCState] != api.MCStateRebooting {
		t.Errorf("before the reboot: unschedulable %v, state %q; want cordoned and Rebooting", n.Spec.Unschedulable, n.Annotations[api.AnnotationMCState])
	}
	if _, err := e.admin.Get(e.ctx, podsR, "default", "web", client.GetOptions{}); !api.IsNotFound(err) {
		t.Errorf("pod web after the drain: %v, want it evicted and gone", err)
	}
	if b, err := os.ReadFile(filepath.Join(root, "etc/site.conf")); err != nil || string(b) != "site=a\n" {
		t.Errorf("/etc/site.conf: %q %v", b, err)
	}
	if st, err := os.Stat(filepath.Join(root, "etc/site.conf")); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("/etc/site.conf mode: %v %v, want 0600 (384)", st.Mode(), err)
	}

	// The boot: the agent comes back with /run empty.
	e.stopAgent()
	if err := os.RemoveAll(run); err != nil {
		t.Fatal(err)
	}
	cfg.JoinToken = ""
	e.start(cfg)
	waitFor(t, "the node Done and the pool Updated", 60*time.Second, func() (bool, string) {
		n := node()
		obj, err := e.admin.Get(e.ctx, api.ResourceForKind("MachineConfigPool"), "", "worker", client.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		p := obj.(*api.MachineConfigPool)
		updated := false
		for _, c := range p.Status.Conditions {
			updated = updated || c.Type == api.PoolUpdated && c.Status == api.ConditionTrue
		}
		a := n.Annotations
		return a[api.AnnotationMCState] == api.MCStateDone && a[api.AnnotationCurrentConfig] == a[api.AnnotationDesiredConfig] &&
				strings.HasPrefix(a[api.AnnotationCurrentConfig], "rendered-worker-") && !n.Spec.Unschedulable && updated && p.Status.UpdatedMachineCount == 1,
			a[api.AnnotationMCState] + " " + a[api.AnnotationMCReason] + " " + p.Status.Configuration.Name
	})
	if booted, err := cfg.OSBackend.Booted(e.ctx); err != nil || booted.Version != "v2" || strings.Join(booted.KernelArgs, " ") != "nosmt" {
		t.Errorf("booted %+v %v, want v2 with nosmt", booted, err)
	}
	if n := sd.rebootCount(); n != 1 {
		t.Errorf("%d reboots, want 1", n)
	}

	// With the cluster's node disruption policy restarting site.service
	// for /etc/site.conf, a new contents of it is taken up without a
	// reboot, a drain or a cordon: the agent reads the policy through
	// its own credential.
	policy, _, err := api.DecodeYAMLOrJSON([]byte(`apiVersion: operator.openshift.io/v1
kind: MachineConfiguration
metadata:
  name: cluster
spec:
  managementState: Managed
  nodeDisruptionPolicy:
    files:
    - path: /etc/site.conf
      actions:
      - type: Restart
        restart:
          serviceName: site.service
`))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.admin.Create(e.ctx, policy[0]); err != nil {
		t.Fatal(err)
	}
	before := node().Annotations[api.AnnotationCurrentConfig]
	obj, err := e.admin.Get(e.ctx, api.ResourceForKind("MachineConfig"), "", "50-site", client.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	site := obj.(*api.MachineConfig)
	site.Spec.Config.Storage.Files[0].Contents.Source = "data:,site%3Db%0A"
	if _, _, err := e.admin.Update(e.ctx, site); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new config Done without a reboot", 60*time.Second, func() (bool, string) {
		a := node().Annotations
		return a[api.AnnotationMCState] == api.MCStateDone && a[api.AnnotationCurrentConfig] != before && a[api.AnnotationCurrentConfig] == a[api.AnnotationDesiredConfig],
			a[api.AnnotationMCState] + " " + a[api.AnnotationMCReason]
	})
	if b, err := os.ReadFile(filepath.Join(root, "etc/site.conf")); err != nil || string(b) != "site=b\n" {
		t.Errorf("/etc/site.conf: %q %v", b, err)
	}
	if n := sd.rebootCount(); n != 1 || !slices.Contains(sd.jobList(), "restart site.service") || node().Spec.Unschedulable {
		t.Errorf("%d reboots (want still 1), jobs %v (want site.service restarted), cordoned %v", n, sd.jobList(), node().Spec.Unschedulable)
	}
}

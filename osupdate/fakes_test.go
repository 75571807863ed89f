package osupdate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// fakeCluster is the node's API: its Node, the configs, and what a drain
// and the pods say.
type fakeCluster struct {
	mu       sync.Mutex
	node     *api.Node
	configs  map[string]*api.MachineConfig
	policy   *api.MachineConfiguration
	drainErr error
	podsErr  error
	drains   int
	// history is every state the node was written with, and whether it
	// was cordoned then: a node must never reboot uncordoned.
	history []string
}

func newFakeCluster() *fakeCluster {
	return &fakeCluster{
		node: &api.Node{ObjectMeta: api.ObjectMeta{Name: "n1", Annotations: map[string]string{}},
			Status: api.NodeStatus{Conditions: []api.NodeCondition{{Type: api.NodeReady, Status: api.ConditionTrue}}}},
		configs: map[string]*api.MachineConfig{},
	}
}

func (c *fakeCluster) Node(context.Context) (*api.Node, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.copyNode(), nil
}

func (c *fakeCluster) copyNode() *api.Node {
	b, _ := json.Marshal(c.node)
	n := new(api.Node)
	_ = json.Unmarshal(b, n)
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	return n
}

func (c *fakeCluster) UpdateNode(_ context.Context, fn func(*api.Node)) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.copyNode()
	fn(n)
	c.node = n
	c.history = append(c.history, fmt.Sprintf("%s cordoned=%v", n.Annotations[api.AnnotationMCState], n.Spec.Unschedulable))
	return nil
}

func (c *fakeCluster) MachineConfig(_ context.Context, name string) (*api.MachineConfig, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	mc, ok := c.configs[name]
	if !ok {
		return nil, api.NewNotFound(api.ResourceForKind("MachineConfig"), name)
	}
	return mc, nil
}

func (c *fakeCluster) DisruptionPolicy(context.Context) (*api.MachineConfiguration, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.policy, nil
}

func (c *fakeCluster) Drain(context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.drains++
	return c.drainErr
}

func (c *fakeCluster) PodsRunning(context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.podsErr
}

func (c *fakeCluster) annotations() map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.node.Annotations)
}

func (c *fakeCluster) unschedulable() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.node.Spec.Unschedulable
}

// fakeSystemd records unit states as systemctl would and counts reboots;
// units enabled are "active" after a boot unless failing says otherwise.
type fakeSystemd struct {
	mu      sync.Mutex
	enabled map[string]bool
	masked  map[string]bool
	failing map[string]bool
	reboots int
	reloads int
	// jobs are the reloads and restarts asked ("reload x.service");
	// a unit in failJobs fails them.
	jobs     []string
	failJobs map[string]bool
	// started are the units started since the boot; running those the
	// boot started (the enabled ones).
	started, running map[string]bool
	// failReloads makes that many daemon-reloads fail.
	failReloads int
}

func newFakeSystemd() *fakeSystemd {
	return &fakeSystemd{enabled: map[string]bool{}, masked: map[string]bool{}, failing: map[string]bool{}, failJobs: map[string]bool{}, started: map[string]bool{}, running: map[string]bool{}}
}

func (s *fakeSystemd) DaemonReload(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reloads++
	if s.failReloads > 0 {
		s.failReloads--
		return errors.New("connection to the bus lost (test)")
	}
	return nil
}

func (s *fakeSystemd) set(m map[string]bool, units []string, v bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, u := range units {
		m[u] = v
	}
	return nil
}

func (s *fakeSystemd) EnableUnits(_ context.Context, u []string) error {
	return s.set(s.enabled, u, true)
}
func (s *fakeSystemd) DisableUnits(_ context.Context, u []string) error {
	return s.set(s.enabled, u, false)
}
func (s *fakeSystemd) MaskUnits(_ context.Context, u []string) error { return s.set(s.masked, u, true) }
func (s *fakeSystemd) UnmaskUnits(_ context.Context, u []string) error {
	return s.set(s.masked, u, false)
}

func (s *fakeSystemd) ReloadUnit(_ context.Context, unit string) error { return s.job("reload", unit) }

func (s *fakeSystemd) RestartUnit(_ context.Context, unit string) error {
	return s.job("restart", unit)
}

func (s *fakeSystemd) job(verb, unit string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.jobs = append(s.jobs, verb+" "+unit)
	if s.failJobs[unit] {
		return fmt.Errorf("%s %s: the job ended failed (test)", verb, unit)
	}
	if verb == "restart" {
		s.started[unit] = true
	}
	return nil
}

func (s *fakeSystemd) jobList() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.jobs)
}

func (s *fakeSystemd) ActiveState(_ context.Context, unit string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.failing[unit]:
		return "failed", nil
	case !s.masked[unit] && (s.running[unit] || s.started[unit]):
		return "active", nil
	}
	return "inactive", nil
}

func (s *fakeSystemd) Reboot(context.Context, string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reboots++
	return nil
}

func (s *fakeSystemd) boot() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running, s.started = map[string]bool{}, map[string]bool{}
	for u, on := range s.enabled {
		s.running[u] = on && !s.masked[u]
	}
}

func (s *fakeSystemd) rebootCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reboots
}

// memJournal keeps the record in memory; killAt makes the kill-th Save
// keep the record and then fail, as an agent killed right after it.
type memJournal struct {
	mu     sync.Mutex
	rec    Record
	saves  int
	killAt int
}

var errKilled = errors.New("killed (test)")

func (j *memJournal) Load() (Record, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	b, _ := json.Marshal(j.rec)
	var r Record
	_ = json.Unmarshal(b, &r)
	return r, nil
}

func (j *memJournal) Save(r Record) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.rec = r
	j.saves++
	if j.saves == j.killAt {
		return errKilled
	}
	return nil
}

// host is one test host: a root for files, a run dir a reboot clears,
// an A/B directory OS, and the fakes.
type host struct {
	t       *testing.T
	root    string
	runDir  string
	cluster *fakeCluster
	sd      *fakeSystemd
	journal *memJournal
	backend *DirBackend
	checkFn func([]string) error
}

func newHost(t *testing.T) *host {
	t.Helper()
	dir := t.TempDir()
	h := &host{t: t, root: filepath.Join(dir, "root"), runDir: filepath.Join(dir, "run"), cluster: newFakeCluster(), sd: newFakeSystemd(), journal: &memJournal{}}
	h.backend = &DirBackend{Dir: filepath.Join(dir, "os"), Initial: "v1", BootID: func() (string, error) { return BootID(h.runDir) }}
	return h
}

// updater is a fresh agent process on the host.
func (h *host) updater() *Updater {
	h.t.Helper()
	u, err := New(Config{Cluster: h.cluster, Systemd: h.sd, Backend: h.backend, Journal: h.journal, Root: h.root, RunDir: h.runDir,
		RunCheck: func(_ context.Context, argv []string) error {
			if h.checkFn != nil {
				return h.checkFn(argv)
			}
			return nil
		}})
	if err != nil {
		h.t.Fatal(err)
	}
	return u
}

// reboot is the host coming back: /run is empty again, and the enabled
// units run.
func (h *host) reboot() {
	h.t.Helper()
	h.sd.boot()
	if err := os.RemoveAll(h.runDir); err != nil {
		h.t.Fatal(err)
	}
}

func (h *host) file(p string) (string, bool) {
	b, err := os.ReadFile(filepath.Join(h.root, p))
	if err != nil {
		return "", false
	}
	return string(b), true
}

func (h *host) writeFile(p, s string) {
	h.t.Helper()
	if err := os.MkdirAll(filepath.Dir(filepath.Join(h.root, p)), 0o755); err != nil {
		h.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(h.root, p), []byte(s), 0o600); err != nil {
		h.t.Fatal(err)
	}
}

// desire makes mc the node's desired config (as the pool controller
// would), with current as its current one.
func (h *host) desire(mc *api.MachineConfig, current string) {
	h.cluster.mu.Lock()
	defer h.cluster.mu.Unlock()
	h.cluster.configs[mc.Name] = mc
	h.cluster.node.Annotations[api.AnnotationDesiredConfig] = mc.Name
	if current != "" {
		h.cluster.node.Annotations[api.AnnotationCurrentConfig] = current
	}
}

func config(name string, files map[string]string, units ...api.IgnitionUnit) *api.MachineConfig {
	mc := &api.MachineConfig{ObjectMeta: api.ObjectMeta{Name: name}, Spec: api.MachineConfigSpec{Config: api.IgnitionConfig{Ignition: api.IgnitionMeta{Version: "3.2.0"}}}}
	keys := slices.Sorted(maps.Keys(files))
	for _, p := range keys {
		mc.Spec.Config.Storage.Files = append(mc.Spec.Config.Storage.Files, api.IgnitionFile{Path: p, Contents: api.IgnitionContents{Source: "data:," + files[p]}})
	}
	mc.Spec.Config.Systemd.Units = units
	return mc
}

func chmodFile(h *host, p string, mode os.FileMode) error {
	return os.Chmod(filepath.Join(h.root, p), mode)
}

package controllers

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/outpost-edge/outpost/controlplane/api"
)

var (
	mcRes  = api.ResourceForKind("MachineConfig")
	mcpRes = api.ResourceForKind("MachineConfigPool")
)

func fileConfig(name, role string, files map[string]string) *api.MachineConfig {
	mc := &api.MachineConfig{ObjectMeta: api.ObjectMeta{Name: name, Labels: map[string]string{api.LabelMachineConfigRole: role}},
		Spec: api.MachineConfigSpec{Config: api.IgnitionConfig{Ignition: api.IgnitionMeta{Version: "3.2.0"}}}}
	for _, p := range sortedKeys(files) {
		mc.Spec.Config.Storage.Files = append(mc.Spec.Config.Storage.Files, api.IgnitionFile{Path: p, Contents: api.IgnitionContents{Source: "data:," + files[p]}})
	}
	return mc
}

// UPD-8: configs merge in name order, later ones winning; the rendered
// name is a hash of the content, the same whatever order the sources'
// keys were written in.
func TestRenderConfigs(t *testing.T) {
	yes, no := true, false
	a := fileConfig("50-base", "worker", map[string]string{"/etc/a": "base", "/etc/b": "base"})
	a.Spec.KernelArguments = []string{"nosmt", "quiet"}
	a.Spec.OSImageURL = "v1"
	a.Spec.Config.Systemd.Units = []api.IgnitionUnit{{Name: "x.service", Contents: "[Service]\n", Enabled: &yes,
		Dropins: []api.IgnitionDropin{{Name: "10-a.conf", Contents: "a"}, {Name: "20-b.conf", Contents: "b"}}}}
	b := fileConfig("60-site", "worker", map[string]string{"/etc/a": "site"})
	b.Spec.KernelArguments = []string{"quiet", "audit=1"}
	b.Spec.OSImageURL = "v2"
	b.Spec.Config.Ignition.Version = "3.4.0"
	b.Spec.Config.Systemd.Units = []api.IgnitionUnit{{Name: "x.service", Enabled: &no, Dropins: []api.IgnitionDropin{{Name: "20-b.conf", Contents: "site"}}}}
	spec, err := renderConfigs([]*api.MachineConfig{b, a}) // order given does not matter
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, f := range spec.Config.Storage.Files {
		files[f.Path] = f.Contents.Source
	}
	if files["/etc/a"] != "data:,site" || files["/etc/b"] != "data:,base" {
		t.Errorf("files %v: want /etc/a from 60-site, /etc/b from 50-base", files)
	}
	if got := strings.Join(spec.KernelArguments, " "); got != "nosmt quiet audit=1" {
		t.Errorf("kernel arguments %q, want each once in order", got)
	}
	if spec.OSImageURL != "v2" || spec.Config.Ignition.Version != "3.4.0" {
		t.Errorf("OS image %q, version %q: want the last and the highest", spec.OSImageURL, spec.Config.Ignition.Version)
	}
	u := spec.Config.Systemd.Units[0]
	if u.Contents != "[Service]\n" || u.Enabled == nil || *u.Enabled || len(u.Dropins) != 2 || u.Dropins[1].Contents != "site" {
		t.Errorf("unit merged as %+v: want base's contents, disabled by 60-site, drop-in 20-b.conf from 60-site", u)
	}

	// The hash: same content in another key order → same name; a change
	// → another.
	doc := func(order string) *api.MachineConfig {
		var body string
		if order == "a" {
			body = "spec:\n  config:\n    ignition:\n      version: 3.2.0\n    storage:\n      files:\n      - path: /etc/x\n        mode: 420\n        contents:\n          source: data:,x\n"
		} else {
			body = "spec:\n  config:\n    storage:\n      files:\n      - contents:\n          source: data:,x\n        mode: 420\n        path: /etc/x\n    ignition:\n      version: 3.2.0\n"
		}
		objs, _, err := api.DecodeYAMLOrJSON([]byte("apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: 10-x\n" + body))
		if err != nil {
			t.Fatal(err)
		}
		return objs[0].(*api.MachineConfig)
	}
	s1, _ := renderConfigs([]*api.MachineConfig{doc("a")})
	s2, _ := renderConfigs([]*api.MachineConfig{doc("b")})
	if n1, n2 := renderedName("worker", s1), renderedName("worker", s2); n1 != n2 || !strings.HasPrefix(n1, "rendered-worker-") || len(n1) != len("rendered-worker-")+32 {
		t.Errorf("rendered names %s and %s: want one name, rendered-worker- and 32 hex digits", n1, n2)
	}
	s2.Config.Storage.Files[0].Contents.Source = "data:,y"
	if renderedName("worker", s1) == renderedName("worker", s2) {
		t.Error("different content rendered to the same name")
	}
}

// Two configs of one priority writing one file differently cannot be
// ordered but by accident: the render fails and says which.
func TestRenderConflict(t *testing.T) {
	_, err := renderConfigs([]*api.MachineConfig{
		fileConfig("50-a", "worker", map[string]string{"/etc/x": "a"}),
		fileConfig("50-b", "worker", map[string]string{"/etc/x": "b"}),
	})
	if err == nil || !strings.Contains(err.Error(), "50-a and 50-b") || !strings.Contains(err.Error(), "/etc/x") {
		t.Errorf("same-priority conflict: %v", err)
	}
	// The same bytes at one priority, or a later priority: fine.
	if _, err := renderConfigs([]*api.MachineConfig{
		fileConfig("50-a", "worker", map[string]string{"/etc/x": "a"}),
		fileConfig("50-b", "worker", map[string]string{"/etc/x": "a"}),
		fileConfig("60-c", "worker", map[string]string{"/etc/x": "c"}),
	}); err != nil {
		t.Errorf("no conflict: %v", err)
	}
}

// The seed's example (001 §1.2.5): five nodes, maxUnavailable 3. Nodes
// 1, 2 and 3 start; 2 finishes and 4 starts; 1 finishes and 5 starts;
// then 3, 5 and 4 finish; never more than three unavailable.
func TestPlanPoolSeedExample(t *testing.T) {
	const old, target = "rendered-worker-old", "rendered-worker-new"
	nodes := map[string]*poolNode{}
	var order []string
	for i := 1; i <= 5; i++ {
		n := fmt.Sprintf("node-%d", i)
		order = append(order, n)
		nodes[n] = &poolNode{name: n, ready: true, current: old, desired: old, state: api.MCStateDone}
	}
	list := func() []poolNode {
		var out []poolNode
		for _, n := range order {
			out = append(out, *nodes[n])
		}
		return out
	}
	step := func(want ...string) {
		t.Helper()
		p := planPool(target, list(), 3, false, 0)
		if !slices.Equal(p.assign, want) {
			t.Fatalf("assigned %v, want %v", p.assign, want)
		}
		for _, n := range p.assign {
			nodes[n].desired = target
			nodes[n].state = api.MCStateWorking
			nodes[n].unschedulable = true
		}
		unavailable := 0
		for _, n := range list() {
			if n.unavailable() {
				unavailable++
			}
		}
		if unavailable > 3 {
			t.Fatalf("%d nodes unavailable, maxUnavailable 3", unavailable)
		}
	}
	finish := func(n string) {
		nodes[n].current, nodes[n].state, nodes[n].unschedulable = target, api.MCStateDone, false
	}
	step("node-1", "node-2", "node-3")
	step() // all three busy
	finish("node-2")
	step("node-4")
	finish("node-1")
	step("node-5")
	for _, n := range []string{"node-3", "node-5", "node-4"} {
		finish(n)
		step()
	}
	p := planPool(target, list(), 3, false, 0)
	if st := p.status; st.MachineCount != 5 || st.UpdatedMachineCount != 5 || st.ReadyMachineCount != 5 || st.UnavailableMachineCount != 0 {
		t.Errorf("final status %+v: want 5 machines all updated and ready", st)
	}
}

// A config that degraded a node goes to no other; a paused pool starts
// none; a node that is down already is given the config at no cost.
func TestPlanPoolStops(t *testing.T) {
	const old, target = "rendered-worker-old", "rendered-worker-new"
	done := func(n string) poolNode {
		return poolNode{name: n, ready: true, current: old, desired: old, state: api.MCStateDone}
	}
	bad := poolNode{name: "a", ready: true, current: old, desired: target, state: api.MCStateDegraded, reason: "health check failed"}
	p := planPool(target, []poolNode{bad, done("b"), done("c")}, 2, false, 0)
	if len(p.assign) != 0 || !slices.Equal(p.failed, []string{"a"}) || p.status.DegradedMachineCount != 1 {
		t.Errorf("after a failure: assign %v failed %v status %+v; want nothing assigned, a failed", p.assign, p.failed, p.status)
	}
	// A newer config goes to the degraded node too.
	p = planPool("rendered-worker-newer", []poolNode{bad, done("b"), done("c")}, 2, false, 0)
	if !slices.Equal(p.assign, []string{"a", "b"}) {
		t.Errorf("a newer config assigned to %v, want a (already unavailable) and b", p.assign)
	}
	if p := planPool(target, []poolNode{done("a"), done("b")}, 1, true, 0); len(p.assign) != 0 {
		t.Errorf("paused pool assigned %v", p.assign)
	}
	// A node that is not Ready, or that an administrator cordoned, is
	// left until it is back; it counts as unavailable meanwhile.
	down := done("a")
	down.ready = false
	if p := planPool(target, []poolNode{down, done("b"), done("c")}, 1, false, 0); len(p.assign) != 0 {
		t.Errorf("with a down, maxUnavailable 1: assigned %v, want none", p.assign)
	}
	if p := planPool(target, []poolNode{down, done("b"), done("c")}, 2, false, 0); !slices.Equal(p.assign, []string{"b"}) || p.status.UnavailableMachineCount != 2 {
		t.Errorf("with a down, maxUnavailable 2: assigned %v (unavailable %d), want b (2)", p.assign, p.status.UnavailableMachineCount)
	}
	maint := done("a")
	maint.unschedulable = true
	if p := planPool(target, []poolNode{maint, done("b")}, 2, false, 0); !slices.Equal(p.assign, []string{"b"}) {
		t.Errorf("with a cordoned by an administrator: assigned %v, want b only", p.assign)
	}
	// A FleetLock client holding the pool's lock takes a place.
	if p := planPool(target, []poolNode{done("a"), done("b"), done("c")}, 2, false, 1); !slices.Equal(p.assign, []string{"a"}) {
		t.Errorf("maxUnavailable 2 with a FleetLock holder: assigned %v, want only a", p.assign)
	}
}

// The controller end to end on the fake store (UPD-8, UPD-9): the pool's
// configs are rendered, nodes are given the rendered config two at a time
// (maxUnavailable 2), a node the agent finishes makes room for the next,
// the counts follow, and the pool ends Updated. A config that then
// degrades a node stops the pool.
func TestMachineConfigPoolRollout(t *testing.T) {
	e := newEnv(t)
	for _, n := range []string{"w1", "w2", "w3"} {
		node := newNode(n, map[string]string{"node-role.kubernetes.io/worker": ""})
		node.Annotations = map[string]string{api.AnnotationCurrentConfig: "none", api.AnnotationDesiredConfig: "none", api.AnnotationMCState: api.MCStateDone}
		e.create(node)
	}
	e.create(newNode("other", nil))
	off := newNode("w4", map[string]string{"node-role.kubernetes.io/worker": ""})
	off.Annotations = map[string]string{api.AnnotationConfigUpdates: "off"}
	e.create(off)
	two := api.FromInt(2)
	e.create(&api.MachineConfigPool{ObjectMeta: api.ObjectMeta{Name: "worker"}, Spec: api.MachineConfigPoolSpec{
		MachineConfigSelector: &api.LabelSelector{MatchLabels: map[string]string{api.LabelMachineConfigRole: "worker"}},
		NodeSelector:          &api.LabelSelector{MatchLabels: map[string]string{"node-role.kubernetes.io/worker": ""}},
		MaxUnavailable:        &two,
	}})
	e.create(fileConfig("50-chrony", "worker", map[string]string{"/etc/chrony.conf": "pool%20x"}))
	e.create(fileConfig("50-master", "master", map[string]string{"/etc/master": "m"}))
	e.start(nil)

	pool := func() *api.MachineConfigPool { return e.get(mcpRes, "", "worker").(*api.MachineConfigPool) }
	var target string
	e.waitFor("the pool's config rendered", func() (bool, string) {
		target = pool().Spec.Configuration.Name
		return strings.HasPrefix(target, "rendered-worker-"), fmt.Sprintf("%+v", pool().Spec.Configuration)
	})
	rendered := e.get(mcRes, "", target).(*api.MachineConfig)
	if fs := rendered.Spec.Config.Storage.Files; len(fs) != 1 || fs[0].Path != "/etc/chrony.conf" || len(rendered.OwnerReferences) != 1 || rendered.OwnerReferences[0].Name != "worker" {
		t.Fatalf("rendered config %+v: want chrony only (not the master's), owned by the pool", rendered)
	}
	desired := func(n string) string {
		return e.get(nodesRes, "", n).(*api.Node).Annotations[api.AnnotationDesiredConfig]
	}
	given := func() []string {
		var out []string
		for _, n := range []string{"w1", "w2", "w3", "w4", "other"} {
			if desired(n) == target {
				out = append(out, n)
			}
		}
		return out
	}
	e.waitFor("w1 and w2 given the config", func() (bool, string) {
		return slices.Equal(given(), []string{"w1", "w2"}), fmt.Sprint(given())
	})
	// The agent of w1 takes the update, then finishes it.
	agent := func(n, state, current string, unschedulable bool) {
		e.update(nodesRes, "", n, false, func(o api.Object) {
			node := o.(*api.Node)
			node.Annotations[api.AnnotationMCState] = state
			node.Annotations[api.AnnotationCurrentConfig] = current
			node.Spec.Unschedulable = unschedulable
		})
	}
	agent("w1", api.MCStateWorking, "none", true)
	agent("w2", api.MCStateWorking, "none", true)
	e.waitFor("the pool counting two unavailable", func() (bool, string) {
		st := pool().Status
		return st.MachineCount == 3 && st.UnavailableMachineCount == 2 && st.UpdatedMachineCount == 0, fmt.Sprintf("%+v", st)
	})
	if g := given(); !slices.Equal(g, []string{"w1", "w2"}) {
		t.Fatalf("given to %v while two are unavailable (maxUnavailable 2)", g)
	}
	agent("w1", api.MCStateDone, target, false)
	e.waitFor("w3 given the config once w1 is done", func() (bool, string) {
		return slices.Equal(given(), []string{"w1", "w2", "w3"}), fmt.Sprint(given())
	})
	agent("w2", api.MCStateDone, target, false)
	agent("w3", api.MCStateDone, target, false)
	e.waitFor("the pool Updated", func() (bool, string) {
		p := pool()
		st := p.Status
		return st.MachineCount == 3 && st.UpdatedMachineCount == 3 && st.ReadyMachineCount == 3 && st.Configuration.Name == target &&
			strings.Contains(conditionMessage(p, api.PoolUpdated), "take no config updates (no systemd, or --os-updates off): w4") &&
			poolCondition(p, api.PoolUpdated) == api.ConditionTrue && poolCondition(p, api.PoolUpdating) == api.ConditionFalse, fmt.Sprintf("%+v", st)
	})

	// A new config: w1 takes it and degrades; w2 and w3 never get it.
	e.create(fileConfig("60-bad", "worker", map[string]string{"/etc/bad": "x"}))
	var bad string
	e.waitFor("the new config rendered and given to w1 and w2", func() (bool, string) {
		bad = pool().Spec.Configuration.Name
		return bad != target && desired("w1") == bad && desired("w2") == bad, bad
	})
	e.update(nodesRes, "", "w1", false, func(o api.Object) {
		node := o.(*api.Node)
		node.Annotations[api.AnnotationMCState] = api.MCStateDegraded
		node.Annotations[api.AnnotationMCReason] = "health check failed: exit status 1"
	})
	agent("w2", api.MCStateDone, bad, false)
	e.waitFor("the pool Degraded, not updating", func() (bool, string) {
		p := pool()
		return poolCondition(p, api.PoolDegraded) == api.ConditionTrue && poolCondition(p, api.PoolUpdating) == api.ConditionFalse &&
			p.Status.DegradedMachineCount == 1, fmt.Sprintf("%+v", p.Status)
	})
	if desired("w3") == bad {
		t.Error("w3 was given the config that degraded w1")
	}
	if p := pool(); !strings.Contains(conditionMessage(p, api.PoolNodeDegraded), "health check failed") {
		t.Errorf("NodeDegraded says %q, want the node's reason", conditionMessage(p, api.PoolNodeDegraded))
	}

	// The pool goes: its rendered configs go with it.
	e.delete(mcpRes, "", "worker")
	e.waitFor("the rendered configs deleted", func() (bool, string) {
		var left []string
		for _, o := range e.list(mcRes) {
			if strings.HasPrefix(o.GetObjectMeta().Name, "rendered-") {
				left = append(left, o.GetObjectMeta().Name)
			}
		}
		return len(left) == 0, fmt.Sprint(left)
	})
}

func poolCondition(p *api.MachineConfigPool, typ string) string {
	for _, c := range p.Status.Conditions {
		if c.Type == typ {
			return c.Status
		}
	}
	return ""
}

func conditionMessage(p *api.MachineConfigPool, typ string) string {
	for _, c := range p.Status.Conditions {
		if c.Type == typ {
			return c.Message
		}
	}
	return ""
}

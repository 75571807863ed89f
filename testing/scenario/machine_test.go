package scenario

import (
	"strings"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
)

// Machines through the real server (issue 11 items 1, 2, 6): every node
// an agent registers gets a Machine; `outpost delete machine` runs the
// deletion phase: a preDrain hook holds it until its owner removes it,
// the node is drained through the eviction API under the deployment's
// budget, then the Node object and the machine go.
func TestMachineDelete(t *testing.T) {
	e := newEnv(t, 1, nil)
	adminCfg := e.c.Leader().Server.AdminConfig()
	e.simNodes(map[string]map[string]string{"m1": {"topology.kubernetes.io/zone": "zone-m1"}, "m2": {"topology.kubernetes.io/zone": "zone-m2"}})
	e.waitFor("a Running machine per node", func() bool {
		out, _, _ := e.outpost("get", "machines")
		return strings.Contains(out, "m1     Running   m1     worker   zone-m1") && strings.Contains(out, "m2     Running   m2     worker   zone-m2")
	}, func() string { out, stderr, _ := e.outpost("get", "machines"); return out + stderr })

	two := int32(2)
	labels := map[string]string{"app": "web"}
	e.create(&api.Deployment{ObjectMeta: api.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: api.DeploymentSpec{Replicas: &two, Selector: &api.LabelSelector{MatchLabels: labels},
			Template: api.PodTemplateSpec{ObjectMeta: api.ObjectMeta{Labels: labels}, Spec: newPod("x", nil).Spec}}})
	maxOne := api.FromInt(1)
	e.create(&api.PodDisruptionBudget{ObjectMeta: api.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: api.PodDisruptionBudgetSpec{MaxUnavailable: &maxOne, Selector: &api.LabelSelector{MatchLabels: labels}}})
	e.waitFor("2 web pods running", func() bool { return len(e.running("m1", "app=web"))+len(e.running("m2", "app=web")) == 2 },
		func() string { return "" })

	// A hook's owner adds its hook through the API.
	cl, err := client.New(adminCfg)
	if err != nil {
		t.Fatal(err)
	}
	machines := api.ResourceForKind("Machine")
	hold := func(hooks []api.LifecycleHook) {
		for range 20 {
			obj, err := cl.Get(e.ctx, machines, "", "m1", client.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			m := obj.(*api.Machine)
			m.Spec.LifecycleHooks.PreDrain = hooks
			if _, _, err = cl.Update(e.ctx, m); err == nil {
				return
			} else if !api.IsConflict(err) {
				t.Fatal(err)
			}
		}
		t.Fatal("conflicts without end")
	}
	hold([]api.LifecycleHook{{Name: "MigrateImportantApp", Owner: "my-app-migration-controller"}})
	// Bad hooks are refused by field path, nothing changed.
	if obj, err := cl.Get(e.ctx, machines, "", "m1", client.GetOptions{}); err == nil {
		m := obj.(*api.Machine)
		m.Spec.LifecycleHooks.PreTerminate = []api.LifecycleHook{{Name: "x"}}
		if _, _, err := cl.Update(e.ctx, m); err == nil || !strings.Contains(err.Error(), "spec.lifecycleHooks.preTerminate[0].owner: Required value") {
			t.Errorf("a hook without an owner: %v", err)
		}
	}

	if out, stderr, code := e.outpost("delete", "machine", "m1", "--wait=false"); code != 0 {
		t.Fatalf("delete machine: exit %d %s %s", code, out, stderr)
	}
	getM1 := func() *api.Machine {
		obj, err := cl.Get(e.ctx, machines, "", "m1", client.GetOptions{})
		if err != nil {
			return nil
		}
		return obj.(*api.Machine)
	}
	getNode := func(name string) *api.Node {
		obj, err := cl.Get(e.ctx, api.ResourceForKind("Node"), "", name, client.GetOptions{})
		if err != nil {
			return nil
		}
		return obj.(*api.Node)
	}
	cond := func(m *api.Machine, typ string) string {
		for _, c := range m.Status.Conditions {
			if c.Type == typ {
				return c.Status
			}
		}
		return ""
	}
	e.waitFor("m1 Deleting, Drainable=False", func() bool {
		m := getM1()
		return m != nil && m.Status.Phase == api.MachineDeleting && cond(m, api.MachineDrainable) == api.ConditionFalse
	}, func() string { return "" })
	if got := getNode("m1"); got == nil || got.Spec.Unschedulable {
		t.Fatal("m1 was cordoned while a preDrain hook held it")
	}
	hold(nil)
	e.waitFor("m1's machine and node gone", func() bool { return getM1() == nil && getNode("m1") == nil }, func() string {
		if m := getM1(); m != nil {
			return m.Status.Phase + " " + strings.TrimSpace(strings.ReplaceAll(describeConds(m), "\n", "; "))
		}
		return "node still there"
	})
	// Its credential was revoked: the simulated agent, which heartbeats
	// every 200 ms and registers again when its Node is gone, cannot
	// bring the node (or a machine) back. Fifteen heartbeats' worth:
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if getM1() != nil || getNode("m1") != nil {
			t.Fatalf("m1 came back after its machine was deleted: machine %v, node %v", getM1() != nil, getNode("m1") != nil)
		}
		time.Sleep(100 * time.Millisecond) // an observation window: nothing may happen in it
	}
	// The release waited for m1's (simulated) agent, told in its
	// heartbeat's reply, to say it stopped outpost's roles (MCH-1).
	evs, _, err := cl.List(e.ctx, api.ResourceForKind("Event"), "default", client.ListOptions{FieldSelector: "reason=Released"})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || !strings.HasPrefix(evs[0].(*api.Event).Message, "the agent stopped outpost's roles on the host at ") {
		t.Errorf("Released events %+v, want one saying the agent stopped the roles", evs)
	}
	e.waitFor("both web pods running on m2", func() bool { return len(e.running("m2", "app=web")) == 2 }, func() string { return "" })
	if out, _, _ := e.outpost("get", "machines", "-o", "name"); strings.TrimSpace(out) != "machine.machine.openshift.io/m2" && strings.TrimSpace(out) != "machine/m2" {
		t.Errorf("machines after the delete: %q", out)
	}
}

func describeConds(m *api.Machine) string {
	var b strings.Builder
	for _, c := range m.Status.Conditions {
		b.WriteString(c.Type + "=" + c.Status + " " + c.Reason + ": " + c.Message + "\n")
	}
	return b.String()
}

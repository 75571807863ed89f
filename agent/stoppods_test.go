package agent_test

import (
	"testing"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/runtime"
)

// With StopPodsOnExit (`outpost dev --stop-pods`, issue 15 item 7) the
// agent's end stops and removes its pods' containers, and leaves other
// programs' containers alone; without it they run on (TestAutonomy).
func TestStopPodsOnExit(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(e.rt)
	cfg.JoinToken = e.joinString()
	cfg.StopPodsOnExit = true
	e.start(cfg)
	e.createPod("a", nil)
	e.createPod("b", func(p *api.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr(int64(0)) })
	a := e.waitPhase("a", api.PodRunning, nil)
	b := e.waitPhase("b", api.PodRunning, nil)
	e.rt.AddForeign("someone-elses")
	if n := len(e.podContainers(string(a.UID))) + len(e.podContainers(string(b.UID))); n != 2 {
		t.Fatalf("%d containers before the agent ends, want 2", n)
	}
	e.stopAgent()
	all, err := e.rt.ListContainers(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range all {
		if c.Labels[runtime.LabelPodUID] != "" {
			t.Errorf("container %s of pod %s/%s outlived the agent: %s", c.ID, c.Labels[runtime.LabelPodNamespace], c.Labels[runtime.LabelPodName], c.State)
		}
	}
	if !e.rt.ForeignExists("someone-elses") {
		t.Error("the agent removed a container that is not outpost's")
	}
}

package agent_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// Node-pressure eviction (issue 10 item 8), driven by a hard threshold
// the host always crosses: the agent evicts the node's pods one at a
// time, each Failed with reason Evicted, a message naming the signal and
// an Evicted event, its containers stopped and never started again.
func TestNodePressureEviction(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(e.rt)
	cfg.JoinToken = e.joinString()
	cfg.EvictionHard = "memory.available<100%"
	e.createPod("besteffort", nil)
	e.createPod("guaranteed", func(p *api.Pod) {
		rl := api.ResourceList{"cpu": api.MustParseQuantity("100m"), "memory": api.MustParseQuantity("64Mi")}
		p.Spec.Containers[0].Resources = api.ResourceRequirements{Requests: rl, Limits: rl}
	})
	e.start(cfg)
	for _, name := range []string{"besteffort", "guaranteed"} {
		p := e.waitPhase(name, api.PodFailed, func(p *api.Pod) bool { return p.Status.Reason == "Evicted" })
		if p.Status.Message != "The node was low on resource: memory. " {
			t.Errorf("%s: message %q", name, p.Status.Message)
		}
		waitFor(t, name+"'s containers gone", 20*time.Second, func() (bool, string) {
			n := len(e.podContainers(string(p.UID)))
			return n == 0, fmt.Sprintf("%d containers", n)
		})
	}
	e.waitEvents("besteffort", "Evicted")
	e.waitEvents("guaranteed", "Evicted")
	if all, _ := e.rt.ListContainers(e.ctx); len(all) != 0 {
		t.Errorf("%d containers run after every pod was evicted", len(all))
	}
}

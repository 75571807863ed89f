package agent_test

import (
	"strings"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
	"github.com/outpost-edge/outpost/controlplane/server"
	"github.com/outpost-edge/outpost/runtime"
	"github.com/outpost-edge/outpost/testing/cluster"
)

// running reports whether a container of pod uid runs.
func (e *env) running(uid string) bool {
	for _, c := range e.podContainers(uid) {
		if c.State == runtime.StateRunning {
			return true
		}
	}
	return false
}

func unreachableFor(s *int64) api.Toleration {
	return api.Toleration{Key: api.TaintNodeUnreachable, Operator: api.TolerationOpExists, Effect: api.TaintEffectNoExecute, TolerationSeconds: s}
}

// The agent fences itself (issue 10 item 6, TNT-9): cut off from the
// control plane, it stops a pod once the node monitor grace period and
// the pod's toleration of unreachable have passed since its last
// acknowledged heartbeat, and not before; pods that tolerate longer, or
// for ever, run on. A restart while still cut off does not bring the
// stopped pod back. Once the control plane answers again and still wants
// the pod, the agent writes its status and starts it again.
func TestAgentFencesItselfWhenCutOff(t *testing.T) {
	const grace = 2 * time.Second
	e := newEnvWith(t, cluster.Options{Servers: 1, ControlLoops: true, Configure: func(c *server.Config) {
		c.NodeMonitorGracePeriod = grace
	}})
	cfg := e.config(e.rt)
	cfg.JoinToken = e.joinString()
	cfg.Heartbeat = 200 * time.Millisecond
	e.start(cfg)
	one := int64(1)
	e.createPod("short", func(p *api.Pod) { p.Spec.Tolerations = []api.Toleration{unreachableFor(&one)} })
	e.createPod("forever", func(p *api.Pod) { p.Spec.Tolerations = []api.Toleration{unreachableFor(nil)} })
	short := e.waitPhase("short", api.PodRunning, nil)
	long := e.waitPhase("forever", api.PodRunning, nil)

	m := e.c.Members[0]
	// The agent learns the grace period from a heartbeat's reply; until
	// then it would fence early (safe, but not what is measured here).
	waitFor(t, "a heartbeat", 20*time.Second, func() (bool, string) {
		_, ok := m.Server.NodeHeartbeat(e.node)
		return ok, "none yet"
	})
	cut := time.Now()
	e.c.Stop(m)
	waitFor(t, "short stopped by its agent", 30*time.Second, func() (bool, string) {
		return !e.running(string(short.UID)), "still running"
	})
	took := time.Since(cut)
	t.Logf("MEASURED control plane gone → pod with 1 s toleration stopped by its agent: %v (grace %v + 1 s after the last acknowledged heartbeat)", took, grace)
	// The last acknowledged heartbeat was sent at most one heartbeat
	// period (and its round trip) before the cut.
	if min := grace + time.Second - cfg.Heartbeat - 300*time.Millisecond; took < min {
		t.Fatalf("pod stopped %v after the cut, before grace + toleration (at least %v)", took, min)
	}
	if !e.running(string(long.UID)) {
		t.Fatal("the pod that tolerates unreachable for ever was stopped")
	}

	// Restarted while cut off: the fenced pod stays stopped, the other is
	// adopted and runs on.
	e.stopAgent()
	cfg.JoinToken = ""
	e.start(cfg)
	waitFor(t, "the restarted agent adopts forever", 20*time.Second, func() (bool, string) {
		return e.running(string(long.UID)), "not running"
	})
	if e.running(string(short.UID)) {
		t.Fatal("the restarted agent, still cut off, started the pod it had fenced")
	}

	// Back: the control plane still has short here (nothing evicted it,
	// it was down); the agent starts it again.
	e.c.Restart(m)
	e.admin = e.c.Client(m)
	waitFor(t, "short running again", 60*time.Second, func() (bool, string) {
		return e.running(string(short.UID)), "not running"
	})
	e.waitEvents("short", "StoppedByNode", "StartedByNode")
	evs, _, err := e.admin.List(e.ctx, eventsR, "default", client.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range evs {
		if ev := o.(*api.Event); ev.Reason == "StoppedByNode" && !strings.Contains(ev.Message, "toleration of unreachable (1s) ran out") {
			t.Errorf("StoppedByNode event says %q; want why, with the toleration", ev.Message)
		}
	}
}

package controllers

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
)

func secsPtr(s int64) *int64 { return &s }

// boundPod creates pod name on node with tolerations.
func (e *env) boundPod(name, node string, grace int64, tols ...api.Toleration) *api.Pod {
	e.t.Helper()
	p := e.create(&api.Pod{ObjectMeta: api.ObjectMeta{Namespace: "default", Name: name},
		Spec: api.PodSpec{Containers: []api.Container{{Name: "c", Image: "i"}}, Tolerations: tols, TerminationGracePeriodSeconds: secsPtr(grace)}}).(*api.Pod)
	e.bindTo(node, p)
	return p
}

// terminating reports whether pod name is being deleted (false when gone).
func (e *env) terminating(name string) bool {
	obj, err := e.f.Get(podsRes, "default", name)
	return err == nil && obj.GetObjectMeta().DeletionTimestamp != nil
}

// looked waits until the taint eviction controller has looked at pod
// name twice more: the second look began after what the test changed.
func (e *env) looked(name string) {
	e.t.Helper()
	key := "default/" + name
	before := e.syncCount("tainteviction", key)
	e.waitFor("two more looks at "+key, func() (bool, string) {
		n := e.syncCount("tainteviction", key)
		return n >= before+2, fmt.Sprintf("%d looks", n-before)
	})
}

// Taint eviction (issue 10 item 4, TNT-4): a pod that does not tolerate a
// NoExecute taint is evicted at once; one that tolerates it for N seconds
// N seconds after the taint was added; one that tolerates it without
// seconds stays; one whose taint goes first stays. Evicting is a
// DisruptionTarget condition, a TaintManagerEviction event and a graceful
// delete.
func TestTaintEviction(t *testing.T) {
	e := newEnv(t)
	e.holdTerminating.Store(true)
	e.agentNode("n1")
	e.agentNode("n2")
	n := e.node("n1")
	n.Spec.Taints = []api.Taint{{Key: "dedicated", Value: "x", Effect: api.TaintEffectNoExecute, TimeAdded: api.NewTime(e.clock.Now())}}
	if _, err := e.f.Update(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	tol := func(s *int64) api.Toleration {
		return api.Toleration{Key: "dedicated", Operator: api.TolerationOpEqual, Value: "x", Effect: api.TaintEffectNoExecute, TolerationSeconds: s}
	}
	e.boundPod("intolerant", "n1", 30)
	e.boundPod("sixty", "n1", 30, tol(secsPtr(60)))
	e.boundPod("forever", "n1", 30, tol(nil))
	e.boundPod("elsewhere", "n2", 30)
	e.startConfig(Config{Client: e.f, NodeLifecycle: NodeLifecycle{MonitorGracePeriod: time.Hour}})

	e.waitFor("intolerant evicted", func() (bool, string) { return e.terminating("intolerant"), "not terminating" })
	p := e.get(podsRes, "default", "intolerant").(*api.Pod)
	var cond *api.PodCondition
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == api.PodDisruptionTarget {
			cond = &p.Status.Conditions[i]
		}
	}
	if cond == nil || cond.Status != api.ConditionTrue || cond.Reason != "DeletionByTaintManager" || !strings.Contains(cond.Message, "dedicated=x:NoExecute") {
		t.Fatalf("DisruptionTarget condition %+v, want True, DeletionByTaintManager, naming the taint", cond)
	}
	if g := p.DeletionGracePeriodSeconds; g == nil || *g != 30 {
		t.Fatalf("evicted with grace %v, want the pod's 30 s (a graceful delete)", g)
	}
	e.waitFor("a TaintManagerEviction event", func() (bool, string) {
		return len(e.events("intolerant", "TaintManagerEviction")) == 1, fmt.Sprint(e.events("intolerant", "TaintManagerEviction"))
	})

	e.boundPod("ninety", "n1", 30, tol(secsPtr(90)))
	e.looked("sixty")
	e.looked("ninety")
	for _, name := range []string{"sixty", "forever", "elsewhere", "ninety"} {
		if e.terminating(name) {
			t.Fatalf("%s evicted at once", name)
		}
	}
	// timeAdded has a precision of a second, as in Kubernetes.
	e.clock.Advance(58 * time.Second)
	e.looked("sixty")
	if e.terminating("sixty") {
		t.Fatal("sixty evicted 58 s after the taint, before its 60 s")
	}
	e.clock.Advance(3 * time.Second)
	e.waitFor("sixty evicted after 60 s", func() (bool, string) { return e.terminating("sixty"), "not terminating" })

	// The taint goes before ninety's 90 s are up: it stays. The node's
	// change makes the controller look at ninety (so it has seen it).
	n = e.node("n1")
	n.Spec.Taints = nil
	untainted, err := e.f.Update(context.Background(), n)
	if err != nil {
		t.Fatal(err)
	}
	// The controllers see the node without its taint before the clock
	// moves: a look at ninety from then on finds no taint.
	e.waitDelivered(untainted)
	e.clock.Advance(time.Minute)
	// A change of its tolerations makes the controller look at it again,
	// 120 s after the taint was added.
	before := e.syncCount("tainteviction", "default/ninety")
	e.update(podsRes, "default", "ninety", false, func(o api.Object) {
		p := o.(*api.Pod)
		p.Spec.Tolerations = append(p.Spec.Tolerations, api.Toleration{Key: "unrelated", Operator: api.TolerationOpExists})
	})
	e.waitFor("a look at ninety", func() (bool, string) {
		return e.syncCount("tainteviction", "default/ninety") > before, "none"
	})
	for _, name := range []string{"forever", "elsewhere", "ninety"} {
		if e.terminating(name) {
			t.Fatalf("%s evicted", name)
		}
	}
}

// TNT-9, the control plane's half: a pod being deleted on a node that
// cannot be reached is removed only once its agent, cut off, must have
// stopped it by its own rule: node monitor grace + toleration of
// unreachable + grace period + margin after the last sign of the node. A
// pod that tolerates unreachable without a limit is never removed so.
func TestFenceRelease(t *testing.T) {
	e := newEnv(t)
	e.holdTerminating.Store(true)
	e.agentNode("n1")
	unreach := func(s *int64) api.Toleration {
		return api.Toleration{Key: api.TaintNodeUnreachable, Operator: api.TolerationOpExists, Effect: api.TaintEffectNoExecute, TolerationSeconds: s}
	}
	e.agentNode("n2") // beside it, so that n1 alone is cut off (TNT-8)
	e.boundPod("web", "n1", 4, unreach(secsPtr(6)))
	e.boundPod("daemon", "n1", 4, unreach(nil))
	e.startConfig(Config{Client: e.f, NodeLifecycle: NodeLifecycle{MonitorGracePeriod: 40 * time.Second}, FenceMargin: 5 * time.Second})
	e.settle("n1")

	// Silent for 41 s: Unknown, tainted unreachable. n2 goes on posting.
	e.clock.Advance(20 * time.Second)
	e.heartbeat("n2")
	e.clock.Advance(21 * time.Second)
	e.heartbeat("n2")
	e.waitUnknown("n1", msgHeartbeatsStopped)
	e.waitFor("the unreachable taint", func() (bool, string) {
		for _, tn := range e.node("n1").Spec.Taints {
			if tn.Key == api.TaintNodeUnreachable && tn.Effect == api.TaintEffectNoExecute {
				return true, ""
			}
		}
		return false, fmt.Sprint(e.node("n1").Spec.Taints)
	})
	// 6 s later web is evicted; it stays, terminating, until 40 + 6 + 4
	// + 5 = 55 s after the last sign of the node.
	e.clock.Advance(7 * time.Second) // 48 s
	e.waitFor("web evicted", func() (bool, string) { return e.terminating("web"), "not terminating" })
	e.clock.Advance(5 * time.Second) // 53 s
	e.looked("web")
	if !e.terminating("web") {
		t.Fatal("web removed 53 s after the node's last sign, before its agent must have stopped it (55 s)")
	}
	e.clock.Advance(3 * time.Second) // 56 s
	e.waitFor("web removed", func() (bool, string) {
		_, err := e.f.Get(podsRes, "default", "web")
		return api.IsNotFound(err), fmt.Sprint(err)
	})
	e.waitFor("a FencedPodDeleted event", func() (bool, string) {
		evs := e.events("web", "FencedPodDeleted")
		return len(evs) == 1 && strings.Contains(evs[0].Message, "toleration of unreachable 6s"), fmt.Sprint(evs)
	})
	// The daemon pod tolerates unreachable for ever: neither evicted nor
	// removed, even when deleted.
	e.delete(podsRes, "default", "daemon")
	e.clock.Advance(time.Hour)
	e.looked("daemon")
	if !e.terminating("daemon") {
		t.Fatal("a pod that runs on while its node is cut off was removed")
	}
}

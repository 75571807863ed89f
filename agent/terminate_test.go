package agent_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
)

// Graceful deletion, the agent's half (issue 10 item 1): a pod deleted
// with a grace period stays Terminating while its container runs; the
// agent sends SIGTERM, kills the container that ignores it once the
// grace period is over, and only then deletes the object, as its node.
func TestGracefulDeleteStopsThenRemoves(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(e.rt)
	cfg.JoinToken = e.joinString()
	e.start(cfg)
	e.createPod("stubborn", func(p *api.Pod) {
		p.Spec.TerminationGracePeriodSeconds = ptr(int64(600))
		p.Spec.Containers[0].Args = []string{"ignore-term"}
	})
	p := e.waitPhase("stubborn", api.PodRunning, nil)

	const grace = 3 * time.Second
	secs := int64(grace / time.Second)
	start := time.Now()
	obj, err := e.admin.DeleteWith(e.ctx, podsR, "default", "stubborn", client.DeleteOptions{GracePeriodSeconds: &secs})
	if err != nil {
		t.Fatal(err)
	}
	if m := obj.GetObjectMeta(); m.DeletionTimestamp == nil || m.DeletionGracePeriodSeconds == nil || *m.DeletionGracePeriodSeconds != secs {
		t.Fatalf("DELETE answered %v / %v; want the pod terminating with %d s", m.DeletionTimestamp, m.DeletionGracePeriodSeconds, secs)
	}
	// The object is there as long as a container of the pod is.
	ch, err := e.admin.Watch(e.ctx, podsR, "default", client.ListOptions{FieldSelector: "metadata.name=stubborn"}, obj.GetObjectMeta().ResourceVersion)
	if err != nil {
		t.Fatal(err)
	}
	var gone time.Time
	for ev := range ch {
		if ev.Type == client.EventError {
			t.Fatalf("watch: %v", ev.Err)
		}
		if ev.Type == client.EventDeleted {
			gone = time.Now()
			if n := len(e.podContainers(string(p.UID))); n != 0 {
				t.Fatalf("pod object removed while %d of its containers remain", n)
			}
			break
		}
		if ev.Object.GetObjectMeta().DeletionTimestamp == nil {
			t.Fatalf("a write cleared the deletionTimestamp: %+v", ev.Object.GetObjectMeta())
		}
	}
	if gone.IsZero() {
		t.Fatal("the watch ended before the pod was deleted")
	}
	// It ignored SIGTERM: nothing could remove it before the grace period
	// (not the pod's 600 s) ran out.
	if took := gone.Sub(start); took < grace || took > 60*time.Second {
		t.Fatalf("pod gone %s after the delete; want between the %s grace period and a minute", took, grace)
	}
	e.waitEvents("stubborn", "Killing")
	evs, _, err := e.admin.List(e.ctx, eventsR, "default", client.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, o := range evs {
		ev := o.(*api.Event)
		found = found || ev.Reason == "Killing" && ev.InvolvedObject.Name == "stubborn" && ev.Message == fmt.Sprintf("Stopping container c (grace period %s)", grace)
	}
	if !found {
		t.Errorf("no Killing event naming the %s grace period", grace)
	}
	if all, _ := e.rt.ListContainers(e.ctx); len(all) != 0 {
		t.Errorf("containers left: %d", len(all))
	}
}

// A pod deleted while its agent was down is stopped and removed by the
// agent once it is back, though no worker of the new run ever ran it.
func TestGracefulDeleteFinishedAfterAgentRestart(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(e.rt)
	cfg.JoinToken = e.joinString()
	e.start(cfg)
	e.createPod("web", nil)
	p := e.waitPhase("web", api.PodRunning, nil)
	e.stopAgent()
	if n := len(e.podContainers(string(p.UID))); n != 1 {
		t.Fatalf("%d containers after the agent stopped, want the pod's 1 still there", n)
	}
	if _, err := e.admin.Delete(e.ctx, podsR, "default", "web", nil); err != nil {
		t.Fatal(err)
	}
	if got := e.pod("web"); got == nil || got.DeletionTimestamp == nil {
		t.Fatalf("pod after delete with its agent down: %v; want it terminating", got)
	}
	cfg.JoinToken = ""
	e.start(cfg)
	waitFor(t, "pod web gone", 30*time.Second, func() (bool, string) {
		got := e.pod("web")
		return got == nil, "still there"
	})
	if n := len(e.podContainers(string(p.UID))); n != 0 {
		t.Fatalf("%d containers of the deleted pod left", n)
	}
}

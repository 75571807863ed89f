package cluster

import (
	"strings"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
)

// A pod the scheduler binds gets a Normal Scheduled event, "Successfully
// assigned NS/POD to NODE", from the scheduler that chose the node, so
// that describe pod shows who placed it (SCH-12, issue 9 item 10).
func TestBoundPodHasScheduledEvent(t *testing.T) {
	ctx := ctxT(t, time.Minute)
	c := New(t, Options{ControlLoops: true})
	cl := c.Client(c.WaitForLeader(ctx))
	ts := api.NewTime(time.Now())
	n := &api.Node{ObjectMeta: api.ObjectMeta{Name: "n1"}, Status: api.NodeStatus{
		Capacity:    api.ResourceList{"cpu": api.MustParseQuantity("4"), "memory": api.MustParseQuantity("8Gi"), "pods": api.MustParseQuantity("110")},
		Allocatable: api.ResourceList{"cpu": api.MustParseQuantity("4"), "memory": api.MustParseQuantity("8Gi"), "pods": api.MustParseQuantity("110")},
		Conditions: []api.NodeCondition{
			{Type: api.NodeReady, Status: api.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: ts, LastTransitionTime: ts},
		}}}
	if _, _, err := cl.Create(ctx, n); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"web-1", "web-2"} {
		p := &api.Pod{ObjectMeta: api.ObjectMeta{Name: name, Namespace: "default"},
			Spec: api.PodSpec{Containers: []api.Container{{Name: "c", Image: "example.com/web:1"}}}}
		if _, _, err := cl.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"web-1", "web-2"} {
		var got *api.Event
		waitFor(t, ctx, "a Scheduled event for "+name, func() bool {
			evs, _, err := cl.List(ctx, api.ResourceForKind("Event"), "default", client.ListOptions{})
			if err != nil {
				return false
			}
			for _, o := range evs {
				if ev := o.(*api.Event); ev.Reason == "Scheduled" && ev.InvolvedObject.Name == name {
					got = ev
					return true
				}
			}
			return false
		})
		want := "Successfully assigned default/" + name + " to n1"
		if got.Message != want || got.Type != api.EventTypeNormal || got.Source.Component != "default-scheduler" ||
			got.InvolvedObject.Kind != "Pod" || got.InvolvedObject.UID == "" {
			t.Errorf("event %+v, want Normal %q from default-scheduler about the pod", got, want)
		}
		pod, err := cl.Get(ctx, api.ResourceForKind("Pod"), "default", name, client.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if node := pod.(*api.Pod).Spec.NodeName; node != "n1" || !strings.HasSuffix(got.Message, node) {
			t.Errorf("pod bound to %q, event says %q", node, got.Message)
		}
	}
}

package agent

import (
	"fmt"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// While the control plane is away, repeats of an event wait as one, its
// count and last time raised, so that a crash loop does not push the
// other held events out (issue 15 item 7).
func TestHeldRepeatsFold(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ev := func(pod, msg string, at time.Duration) *api.Event {
		ts := api.NewTime(t0.Add(at))
		return &api.Event{
			InvolvedObject: api.ObjectReference{Kind: "Pod", Namespace: "default", Name: pod, UID: "u-" + pod},
			Reason:         "BackOff", Message: msg, Type: api.EventTypeWarning,
			Source:         api.EventSource{Component: "outpost-agent", Host: "n1"},
			FirstTimestamp: ts, LastTimestamp: ts, Count: 1,
		}
	}
	var held []*api.Event
	held = holdEvent(held, ev("web", "Back-off restarting failed container", 0))
	held = holdEvent(held, ev("db", "Back-off restarting failed container", time.Second))
	for i := range 4 {
		held = holdEvent(held, ev("web", "Back-off restarting failed container", time.Duration(i+2)*time.Minute))
	}
	if len(held) != 2 {
		t.Fatalf("%d held, want 2 (web's repeats folded)", len(held))
	}
	web := held[0]
	if web.Count != 5 || !web.FirstTimestamp.Equal(t0) || !web.LastTimestamp.Equal(t0.Add(5*time.Minute)) {
		t.Errorf("web held as count %d from %v to %v, want 5 from the first to the last", web.Count, web.FirstTimestamp, web.LastTimestamp)
	}
	for i := range heldEvents + 10 {
		held = holdEvent(held, ev(fmt.Sprintf("p%d", i), "m", 0))
	}
	if len(held) != heldEvents || held[len(held)-1].InvolvedObject.Name != fmt.Sprintf("p%d", heldEvents+9) {
		t.Errorf("%d held, want the newest %d", len(held), heldEvents)
	}
}

package agent

import (
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// The order of node-pressure eviction (issue 10 item 8): BestEffort, then
// Burstable, then Guaranteed; within a class the lower priority, then the
// newest first.
func TestEvictionOrder(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	res := func(req, lim string) api.ResourceRequirements {
		r := api.ResourceRequirements{}
		if req != "" {
			r.Requests = api.ResourceList{"cpu": api.MustParseQuantity(req), "memory": api.MustParseQuantity("64Mi")}
		}
		if lim != "" {
			r.Limits = api.ResourceList{"cpu": api.MustParseQuantity(lim), "memory": api.MustParseQuantity("64Mi")}
		}
		return r
	}
	pod := func(name string, r api.ResourceRequirements, prio int32, age time.Duration) *api.Pod {
		return &api.Pod{ObjectMeta: api.ObjectMeta{Name: name, CreationTimestamp: api.NewTime(t0.Add(-age))},
			Spec: api.PodSpec{Priority: &prio, Containers: []api.Container{{Name: "c", Resources: r}}}}
	}
	pods := []*api.Pod{
		pod("guaranteed", res("1", "1"), 0, time.Hour),
		pod("burstable-old", res("100m", ""), 0, time.Hour),
		pod("besteffort-high", res("", ""), 1000, time.Hour),
		pod("burstable-new", res("100m", ""), 0, time.Minute),
		pod("besteffort-low", res("", ""), 0, time.Hour),
	}
	evictionOrder(pods)
	var got []string
	for _, p := range pods {
		got = append(got, p.Name)
	}
	want := []string{"besteffort-low", "besteffort-high", "burstable-new", "burstable-old", "guaranteed"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("order %v, want %v", got, want)
		}
	}
	if s := pressureSignal([]api.NodeCondition{{Type: api.NodeDiskPressure, Status: api.ConditionTrue}}); s != "ephemeral-storage" {
		t.Fatalf("disk pressure signal %q", s)
	}
}

package agent

import (
	"slices"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// The order of node-pressure eviction (issue 10 item 8) without use
// figures (disk pressure): BestEffort, then Burstable, then Guaranteed;
// within a class the lower priority, then the newest first.
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
	evictionOrder(pods, nil)
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

// Under memory pressure use ranks, as the kubelet ranks it: Burstable
// pods over their memory requests come before those within them, and
// within a tier (after priority) the larger use over requests first.
func TestEvictionOrderByMemoryUse(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	burstable := func(name, mem string, prio int32, age time.Duration) *api.Pod {
		return &api.Pod{ObjectMeta: api.ObjectMeta{Name: name, UID: "uid-" + name, CreationTimestamp: api.NewTime(t0.Add(-age))},
			Spec: api.PodSpec{Priority: &prio, Containers: []api.Container{{Name: "c",
				Resources: api.ResourceRequirements{Requests: api.ResourceList{"memory": api.MustParseQuantity(mem)}}}}}}
	}
	pods := []*api.Pod{
		burstable("within-new", "256Mi", 0, time.Minute),   // uses 100Mi of 256Mi
		burstable("over-little", "64Mi", 0, time.Hour),     // 80Mi: 16Mi over
		burstable("over-much", "64Mi", 0, time.Hour),       // 400Mi: 336Mi over
		burstable("over-much-high", "64Mi", 10, time.Hour), // 400Mi, but priority 10
		burstable("within-old", "256Mi", 0, time.Hour),     // uses 200Mi: nearer its request
		{ObjectMeta: api.ObjectMeta{Name: "besteffort", UID: "uid-besteffort"}, Spec: api.PodSpec{Containers: []api.Container{{Name: "c"}}}},
	}
	mib := uint64(1 << 20)
	usage := map[string]uint64{
		"uid-within-new": 100 * mib, "uid-over-little": 80 * mib, "uid-over-much": 400 * mib,
		"uid-over-much-high": 400 * mib, "uid-within-old": 200 * mib, "uid-besteffort": mib,
	}
	evictionOrder(pods, usage)
	var got []string
	for _, p := range pods {
		got = append(got, p.Name)
	}
	want := []string{"besteffort", "over-much", "over-little", "over-much-high", "within-old", "within-new"}
	if !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
}

// A status queued before an eviction (Running) and retried after a
// conflict with the eviction's Failed must not be written over it: a pod
// never leaves Failed or Succeeded. TestNodePressureEviction met this
// race now and then (the evicted pod back at Running).
func TestStatusRetryKeepsTerminalPhase(t *testing.T) {
	for _, tc := range []struct {
		stored, queued string
		leaves         bool
	}{
		{api.PodFailed, api.PodRunning, true},
		{api.PodSucceeded, api.PodPending, true},
		{api.PodFailed, api.PodFailed, false},
		{api.PodSucceeded, api.PodFailed, false},
		{api.PodRunning, api.PodFailed, false},
		{api.PodRunning, api.PodRunning, false},
	} {
		pod := &api.Pod{Status: api.PodStatus{Phase: tc.stored}}
		if got := leavesTerminalPhase(pod, api.PodStatus{Phase: tc.queued}); got != tc.leaves {
			t.Errorf("stored %s, queued %s: leaves a terminal phase %v, want %v", tc.stored, tc.queued, got, tc.leaves)
		}
	}
}

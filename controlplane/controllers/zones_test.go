package controllers

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
)

func zoneNode(name, zone, ready string) *api.Node {
	n := &api.Node{ObjectMeta: api.ObjectMeta{Name: name, Labels: map[string]string{"topology.kubernetes.io/zone": zone}}}
	n.Status.Conditions = []api.NodeCondition{{Type: api.NodeReady, Status: ready}}
	return n
}

// zoneNodes makes total nodes of zone, the first notReady of them Unknown.
func zoneNodes(zone string, total, notReady int) []*api.Node {
	var out []*api.Node
	for i := range total {
		st := api.ConditionTrue
		if i < notReady {
			st = api.ConditionUnknown
		}
		out = append(out, zoneNode(fmt.Sprintf("%s-%d", zone, i), zone, st))
	}
	return out
}

// TNT-8's zone states, Kubernetes' rule.
func TestZoneStateOf(t *testing.T) {
	for _, tt := range []struct {
		ready, notReady int
		want            ZoneState
	}{
		{10, 0, ZoneNormal},
		{8, 2, ZoneNormal},              // 2 not ready: never partial
		{1, 2, ZoneNormal},              // 67 %, but only 2
		{2, 3, ZonePartialDisruption},   // 60 %
		{5, 5, ZoneNormal},              // 50 % < 55 %
		{45, 55, ZonePartialDisruption}, // 55 %
		{0, 1, ZoneFullDisruption},
		{0, 0, ZoneNormal},
	} {
		if got := zoneStateOf(tt.ready, tt.notReady, DefaultUnhealthyZoneThreshold); got != tt.want {
			t.Errorf("ready %d, not ready %d: %s, want %s", tt.ready, tt.notReady, got, tt.want)
		}
	}
}

// The state machine with a fake clock: Normal → PartialDisruption →
// FullDisruption and back, small and large zones, the rate of tainting
// in each state within its setting, and master disruption when every
// zone is down.
func TestZonesRateLimitTainting(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	unreach := []api.Taint{{Key: api.TaintNodeUnreachable, Effect: api.TaintEffectNoExecute}, {Key: api.TaintNodeUnreachable, Effect: api.TaintEffectNoSchedule}}
	// tainted counts how many of zone's silent nodes gate lets through
	// over d, asking for each every 100 ms as the queue would.
	tainted := func(z *zones, nodes []*api.Node, from time.Time, d time.Duration) int {
		n := 0
		done := map[string]bool{}
		for at := from; at.Before(from.Add(d)); at = at.Add(100 * time.Millisecond) {
			for _, node := range nodes {
				if done[node.Name] || readyOf(node) == api.ConditionTrue {
					continue
				}
				got, _, _ := z.gate(node, unreach, at)
				if hasTaint(got, api.TaintNodeUnreachable, api.TaintEffectNoExecute) {
					done[node.Name] = true
					n++
				}
				if !hasTaint(got, api.TaintNodeUnreachable, api.TaintEffectNoSchedule) {
					t.Fatal("the NoSchedule taint was held back: only NoExecute is rate-limited")
				}
			}
		}
		return n
	}

	// Normal: 0.1 node/s, so 1 at once and one more every 10 s.
	z := newZones(Eviction{}, nil)
	a := zoneNodes("a", 20, 2)
	b := zoneNodes("b", 20, 0)
	observeNodes(z, append(a, b...), t0)
	if st, _ := z.State("a"); st != ZoneNormal {
		t.Fatalf("zone a %s, want Normal", st)
	}
	if n := tainted(z, a, t0, 9*time.Second); n != 1 {
		t.Fatalf("Normal zone: %d nodes tainted in 9 s, want 1 (0.1/s, burst 1)", n)
	}

	// PartialDisruption in a small zone (≤ 50 nodes): nothing.
	z = newZones(Eviction{}, nil)
	a = zoneNodes("a", 20, 12)
	observeNodes(z, append(a, b...), t0)
	if st, _ := z.State("a"); st != ZonePartialDisruption {
		t.Fatalf("zone a %s, want PartialDisruption", st)
	}
	z.buckets["a"].tokens = 0
	if n := tainted(z, a, t0, time.Minute); n != 0 {
		t.Fatalf("small zone in PartialDisruption: %d nodes tainted, want none", n)
	}
	// Large (> 50): 0.01 node/s.
	z = newZones(Eviction{}, nil)
	a = zoneNodes("a", 100, 60)
	observeNodes(z, append(a, b...), t0)
	z.buckets["a"].tokens = 0
	if n := tainted(z, a, t0, 250*time.Second); n != 2 {
		t.Fatalf("large zone in PartialDisruption: %d nodes tainted in 250 s, want 2 (0.01/s)", n)
	}
	// The other zone is untouched by it: its own limiter, Normal.
	if st, _ := z.State("b"); st != ZoneNormal {
		t.Fatalf("zone b %s, want Normal", st)
	}

	// FullDisruption of one zone while another is fine: the normal rate.
	rep := NewZoneReport()
	if _, ok := rep.Zones(); ok {
		t.Fatal("an empty report claims a count")
	}
	z = newZones(Eviction{}, rep)
	a = zoneNodes("a", 5, 5)
	changes := observeNodes(z, append(a, b...), t0)
	if st, master := z.State("a"); st != ZoneFullDisruption || master {
		t.Fatalf("zone a %s master %v, want FullDisruption without master disruption", st, master)
	}
	if len(changes) != 1 || changes[0].to != ZoneFullDisruption {
		t.Fatalf("changes %v, want zone a to FullDisruption", changes)
	}
	if n := tainted(z, a, t0, 21*time.Second); n != 3 {
		t.Fatalf("FullDisruption zone beside a healthy one: %d nodes tainted in 21 s, want 3 (0.1/s)", n)
	}
	// The report, as describe node and the metrics read it.
	l, ok := rep.Zones()
	want := []api.ZoneStatus{
		{Name: "a", State: api.ZoneFullDisruption, Nodes: 5, Ready: 0, EvictionRate: 0.1, Evictions: 3},
		{Name: "b", State: api.ZoneNormal, Nodes: 20, Ready: 20, EvictionRate: 0.1},
	}
	if !ok || l.MasterDisruption || !slices.Equal(l.Items, want) {
		t.Fatalf("report %+v (counted %v), want %+v", l, ok, want)
	}

	// Every zone down: master disruption; nothing is tainted and the
	// eviction taints a node holds go.
	b = zoneNodes("b", 20, 20)
	changes = observeNodes(z, append(a, b...), t0)
	if _, master := z.State("a"); !master {
		t.Fatal("every zone in FullDisruption, but not master disruption")
	}
	if last := changes[len(changes)-1]; !last.masterChange || !last.master {
		t.Fatalf("changes %v, want the master disruption change", changes)
	}
	if l, _ := rep.Zones(); !l.MasterDisruption || l.Items[0].EvictionRate != 0 || l.Items[1].EvictionRate != 0 || l.Items[0].Evictions != 3 {
		t.Fatalf("report in master disruption %+v, want it said, rates 0, the count kept", l)
	}
	rep.Reset()
	if l, ok := rep.Zones(); ok || len(l.Items) != 0 {
		t.Fatalf("report after Reset %+v (counted %v), want empty", l, ok)
	}
	held := a[0]
	held.Spec.Taints = unreach
	got, _, _ := z.gate(held, unreach, t0)
	if hasTaint(got, api.TaintNodeUnreachable, api.TaintEffectNoExecute) || !hasTaint(got, api.TaintNodeUnreachable, api.TaintEffectNoSchedule) {
		t.Fatalf("master disruption: taints %v, want the NoExecute one removed and NoSchedule kept", got)
	}

	// A node of b is back: out of master disruption.
	b[0].Status.Conditions[0].Status = api.ConditionTrue
	observeNodes(z, append(a, b...), t0.Add(time.Minute))
	if st, master := z.State("b"); master || st != ZonePartialDisruption {
		t.Fatalf("one node back: zone b %s master %v, want PartialDisruption, no master disruption", st, master)
	}
}

// With every node silent the control plane takes itself for the one cut
// off: the NoExecute taints it added go, including those of a node that
// was tainted a moment before the last one went (TNT-8).
func TestMasterDisruptionRemovesEvictionTaints(t *testing.T) {
	e := newEnv(t)
	e.agentNode("n1")
	e.agentNode("n2")
	e.startLifecycle(NodeLifecycle{MonitorGracePeriod: 40 * time.Second})
	e.settle("n1")
	e.clock.Advance(20 * time.Second)
	e.heartbeat("n2")
	e.settle("n2")
	e.clock.Advance(21 * time.Second)
	e.waitUnknown("n1", msgHeartbeatsStopped)
	e.waitFor("n1 tainted unreachable:NoExecute", func() (bool, string) {
		return hasTaint(e.node("n1").Spec.Taints, api.TaintNodeUnreachable, api.TaintEffectNoExecute), fmt.Sprint(e.node("n1").Spec.Taints)
	})
	e.clock.Advance(21 * time.Second) // n2 silent too
	e.waitUnknown("n2", msgHeartbeatsStopped)
	e.waitFor("no NoExecute taint on either", func() (bool, string) {
		for _, n := range []string{"n1", "n2"} {
			if hasTaint(e.node(n).Spec.Taints, api.TaintNodeUnreachable, api.TaintEffectNoExecute) {
				return false, n + ": " + fmt.Sprint(e.node(n).Spec.Taints)
			}
		}
		return hasTaint(e.node("n1").Spec.Taints, api.TaintNodeUnreachable, api.TaintEffectNoSchedule), "NoSchedule gone too"
	})
	// One is back: eviction resumes, the other is tainted again.
	e.heartbeat("n1")
	e.waitFor("n2 tainted again", func() (bool, string) {
		return hasTaint(e.node("n2").Spec.Taints, api.TaintNodeUnreachable, api.TaintEffectNoExecute), fmt.Sprint(e.node("n2").Spec.Taints)
	})
}

// Workers read the clock before they wait for the zones' lock, so the
// bucket sees times out of order; they must not credit an interval twice
// (the 2,000-node benchmark measured 1.5 × the rate before this).
func TestBucketOutOfOrderTimes(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := &bucket{rate: 2, tokens: 1, last: t0}
	taken := 0
	// 10 s of attempts every 10 ms, each followed by one 50 ms late.
	for at := t0; at.Before(t0.Add(10 * time.Second)); at = at.Add(10 * time.Millisecond) {
		for _, now := range []time.Time{at, at.Add(-50 * time.Millisecond)} {
			if ok, _ := b.take(now); ok {
				taken++
			}
		}
	}
	// The first token at once, then 2/s for 10 s.
	if taken < 20 || taken > 21 {
		t.Fatalf("%d tokens taken in 10 s at 2/s with late callers, want 20 or 21", taken)
	}
}

// observeNodes counts nodes (as the informer's events would) and
// observes the zones.
func observeNodes(z *zones, nodes []*api.Node, now time.Time) []zoneChange {
	for _, n := range nodes {
		z.track(n)
	}
	return z.observe(now)
}

// The counts follow the informer's events: a node that changes is
// counted once as it is now, one that moves zone leaves the old, a
// deleted one goes, and one without a Ready condition never counts.
func TestZonesTrackEvents(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rep := NewZoneReport()
	z := newZones(Eviction{}, rep)
	for _, n := range zoneNodes("a", 3, 0) {
		z.track(n)
	}
	z.track(&api.Node{ObjectMeta: api.ObjectMeta{Name: "made-by-hand"}})
	z.track(zoneNode("a-0", "a", api.ConditionUnknown)) // a-0 goes silent
	z.track(zoneNode("a-1", "b", api.ConditionTrue))    // a-1 moves to zone b
	z.forget("a-2")
	z.forget("never-seen")
	z.observe(t0)
	l, _ := rep.Zones()
	want := []api.ZoneStatus{
		{Name: "a", State: api.ZoneFullDisruption, Nodes: 1, Ready: 0, EvictionRate: 0.1},
		{Name: "b", State: api.ZoneNormal, Nodes: 1, Ready: 1, EvictionRate: 0.1},
	}
	if !slices.Equal(l.Items, want) {
		t.Fatalf("zones %+v, want %+v", l.Items, want)
	}
	z.forget("a-0")
	z.forget("a-1")
	z.observe(t0)
	if l, _ := rep.Zones(); len(l.Items) != 0 || l.MasterDisruption {
		t.Fatalf("zones of no nodes %+v, want none", l)
	}
}

package taints

import (
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
)

func secs(n int64) *int64 { return &n }

func TestToleratesTaint(t *testing.T) {
	taint := api.Taint{Key: "key1", Value: "value1", Effect: api.TaintEffectNoExecute}
	tests := []struct {
		name string
		tol  api.Toleration
		want bool
	}{
		// Seed 000 14.9.4: the Equal and the Exists sample tolerations.
		{"seed Equal sample", api.Toleration{Key: "key1", Operator: "Equal", Value: "value1", Effect: "NoExecute", TolerationSeconds: secs(3600)}, true},
		{"seed Exists sample", api.Toleration{Key: "key1", Operator: "Exists", Effect: "NoExecute", TolerationSeconds: secs(3600)}, true},
		{"empty operator is Equal", api.Toleration{Key: "key1", Value: "value1", Effect: "NoExecute"}, true},
		{"Equal needs the value", api.Toleration{Key: "key1", Operator: "Equal", Value: "other", Effect: "NoExecute"}, false},
		{"Equal with empty value does not match a valued taint", api.Toleration{Key: "key1", Operator: "Equal", Effect: "NoExecute"}, false},
		{"key must match", api.Toleration{Key: "key2", Operator: "Exists", Effect: "NoExecute"}, false},
		{"effect must match", api.Toleration{Key: "key1", Operator: "Equal", Value: "value1", Effect: "NoSchedule"}, false},
		{"empty effect matches every effect", api.Toleration{Key: "key1", Operator: "Equal", Value: "value1"}, true},
		{"empty key with Exists matches every taint", api.Toleration{Operator: "Exists"}, true},
		{"empty key with Exists and an effect", api.Toleration{Operator: "Exists", Effect: "NoSchedule"}, false},
		{"empty key with Equal matches nothing", api.Toleration{Operator: "Equal"}, false},
		{"unknown operator matches nothing", api.Toleration{Key: "key1", Operator: "Like", Value: "value1"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ToleratesTaint(&tt.tol, &taint); got != tt.want {
				t.Errorf("ToleratesTaint(%+v, %+v) = %v, want %v", tt.tol, taint, got, tt.want)
			}
		})
	}
}

// The seed's 14.9.4 text claims its NoExecute sample tolerations match the
// taint key1=value1:NoSchedule made just before; by the rule it states
// itself (and SPEC TNT-2) the effect must be the same, so they do not.
func TestSeedSampleTolerationsDoNotMatchOtherEffect(t *testing.T) {
	taint := api.Taint{Key: "key1", Value: "value1", Effect: api.TaintEffectNoSchedule}
	tols := []api.Toleration{
		{Key: "key1", Operator: "Equal", Value: "value1", Effect: "NoExecute", TolerationSeconds: secs(3600)},
		{Key: "key1", Operator: "Exists", Effect: "NoExecute", TolerationSeconds: secs(3600)},
	}
	if TolerationsTolerateTaint(tols, &taint) {
		t.Fatal("NoExecute tolerations matched a NoSchedule taint")
	}
}

// Seed 000 14.9.2.1: three taints, two tolerations.
func TestSeedThreeTaintsTwoTolerations(t *testing.T) {
	taints := []api.Taint{
		{Key: "key1", Value: "value1", Effect: api.TaintEffectNoSchedule},
		{Key: "key1", Value: "value1", Effect: api.TaintEffectNoExecute},
		{Key: "key2", Value: "value2", Effect: api.TaintEffectNoSchedule},
	}
	tols := []api.Toleration{
		{Key: "key1", Operator: "Equal", Value: "value1", Effect: "NoSchedule"},
		{Key: "key1", Operator: "Equal", Value: "value1", Effect: "NoExecute"},
	}
	v := Evaluate(taints, tols)
	if v.Placement != Refused {
		t.Errorf("placement = %v, want Refused: the third taint is not tolerated", v.Placement)
	}
	if v.Evict {
		t.Error("Evict = true; the seed says a pod already running keeps running")
	}
	if len(v.Untolerated) != 1 || v.Untolerated[0].Key != "key2" {
		t.Errorf("untolerated = %+v, want only key2=value2:NoSchedule", v.Untolerated)
	}
	got, ok := FindMatchingUntoleratedTaint(taints, tols, IsNoScheduleOrNoExecute)
	if !ok || got.Key != "key2" {
		t.Errorf("FindMatchingUntoleratedTaint = %+v, %v; want key2", got, ok)
	}
	if _, ok := FindMatchingUntoleratedTaint(taints, tols, IsNoExecute); ok {
		t.Error("a NoExecute taint reported untolerated; the pod tolerates key1:NoExecute")
	}
	if _, forever, now := NoExecuteDeadline(taints, tols); !forever || now {
		t.Errorf("NoExecuteDeadline: forever=%v now=%v, want a pod that stays for ever", forever, now)
	}
}

func TestEvaluate(t *testing.T) {
	ns := api.Taint{Key: "a", Effect: api.TaintEffectNoSchedule}
	pns := api.Taint{Key: "b", Effect: api.TaintEffectPreferNoSchedule}
	ne := api.Taint{Key: "c", Effect: api.TaintEffectNoExecute}
	tests := []struct {
		name   string
		taints []api.Taint
		tols   []api.Toleration
		want   Placement
		evict  bool
	}{
		{"no taints", nil, nil, Allowed, false},
		{"NoSchedule refuses", []api.Taint{ns, pns}, nil, Refused, false},
		{"PreferNoSchedule alone avoids", []api.Taint{pns}, nil, Avoided, false},
		{"NoExecute refuses and evicts", []api.Taint{pns, ne}, nil, Refused, true},
		{"tolerated NoSchedule leaves PreferNoSchedule", []api.Taint{ns, pns}, []api.Toleration{{Key: "a", Operator: "Exists"}}, Avoided, false},
		{"tolerate everything", []api.Taint{ns, pns, ne}, []api.Toleration{{Operator: "Exists"}}, Allowed, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Evaluate(tt.taints, tt.tols)
			if v.Placement != tt.want || v.Evict != tt.evict {
				t.Errorf("Evaluate = %v evict=%v, want %v evict=%v", v.Placement, v.Evict, tt.want, tt.evict)
			}
		})
	}
}

func TestNoExecuteDeadline(t *testing.T) {
	ne := []api.Taint{
		{Key: "node.kubernetes.io/unreachable", Effect: api.TaintEffectNoExecute},
		{Key: "node.kubernetes.io/not-ready", Effect: api.TaintEffectNoExecute},
	}
	tests := []struct {
		name    string
		tols    []api.Toleration
		d       time.Duration
		forever bool
		now     bool
	}{
		{"none tolerated", nil, 0, false, true},
		{"one of two tolerated", []api.Toleration{{Key: "node.kubernetes.io/unreachable", Operator: "Exists", Effect: "NoExecute", TolerationSeconds: secs(300)}}, 0, false, true},
		{"both without seconds", []api.Toleration{{Operator: "Exists"}}, 0, true, false},
		{"least of the matching", []api.Toleration{
			{Key: "node.kubernetes.io/unreachable", Operator: "Exists", Effect: "NoExecute", TolerationSeconds: secs(6000)},
			{Key: "node.kubernetes.io/not-ready", Operator: "Exists", Effect: "NoExecute", TolerationSeconds: secs(300)},
		}, 300 * time.Second, false, false},
		{"negative counts as zero", []api.Toleration{{Operator: "Exists", Effect: "NoExecute", TolerationSeconds: secs(-5)}}, 0, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, forever, now := NoExecuteDeadline(ne, tt.tols)
			if d != tt.d || forever != tt.forever || now != tt.now {
				t.Errorf("NoExecuteDeadline = %v forever=%v now=%v, want %v %v %v", d, forever, now, tt.d, tt.forever, tt.now)
			}
		})
	}
}

func TestCountUntoleratedPreferNoSchedule(t *testing.T) {
	taints := []api.Taint{
		{Key: "a", Effect: api.TaintEffectPreferNoSchedule},
		{Key: "b", Effect: api.TaintEffectPreferNoSchedule},
		{Key: "c", Effect: api.TaintEffectNoSchedule},
	}
	if n := CountUntoleratedPreferNoSchedule(taints, []api.Toleration{{Key: "a", Operator: "Exists"}}); n != 1 {
		t.Errorf("count = %d, want 1", n)
	}
}

// Seed 000 §14.9.5 writes tolerations of the condition taints by their
// older names; they tolerate today's taints (issue 10 item 10), with the
// same tolerationSeconds, and nothing else.
func TestSeedOlderTaintNames(t *testing.T) {
	unreachable := api.Taint{Key: api.TaintNodeUnreachable, Effect: api.TaintEffectNoExecute}
	notReady := api.Taint{Key: api.TaintNodeNotReady, Effect: api.TaintEffectNoExecute}
	oldUnreachable := api.Toleration{Key: "node.alpha.kubernetes.io/unreachable", Operator: "Exists", Effect: "NoExecute", TolerationSeconds: secs(6000)}
	oldNotReady := api.Toleration{Key: "node.alpha.kubernetes.io/notReady", Operator: "Exists", Effect: "NoExecute", TolerationSeconds: secs(6000)}
	if !ToleratesTaint(&oldUnreachable, &unreachable) || !ToleratesTaint(&oldNotReady, &notReady) {
		t.Error("a toleration by the older name does not tolerate today's taint")
	}
	if ToleratesTaint(&oldUnreachable, &notReady) || ToleratesTaint(&oldNotReady, &unreachable) {
		t.Error("an older name tolerates the other condition's taint")
	}
	other := api.Taint{Key: "node.alpha.kubernetes.io/notReady", Effect: api.TaintEffectNoExecute}
	if !ToleratesTaint(&oldNotReady, &other) {
		t.Error("a taint set under the older name is no longer tolerated by it")
	}
	d, forever, now := NoExecuteDeadline([]api.Taint{unreachable}, []api.Toleration{oldUnreachable})
	if d != 6000*time.Second || forever || now {
		t.Errorf("deadline with the seed's toleration: %v forever=%v now=%v, want 6000s", d, forever, now)
	}
}

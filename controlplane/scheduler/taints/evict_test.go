package taints

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// refTolerates is SPEC TNT-2 written again for the reference model, with
// the seed's older names of the condition taints (issue 10 item 10).
func refTolerates(tol api.Toleration, taint api.Taint) bool {
	older := map[string]string{
		"node.alpha.kubernetes.io/notReady":    "node.kubernetes.io/not-ready",
		"node.alpha.kubernetes.io/unreachable": "node.kubernetes.io/unreachable",
	}
	if tol.Effect != "" && tol.Effect != taint.Effect {
		return false
	}
	key := tol.Key
	if k, ok := older[key]; ok {
		key = k
	}
	if tol.Operator == "Exists" {
		return tol.Key == "" || key == taint.Key
	}
	return key == taint.Key && tol.Value == taint.Value
}

// refEvictAt is SPEC TNT-3/TNT-4 read literally: of the NoExecute taints,
// one no toleration matches evicts at once (from when it was added); one
// matched only by tolerations without tolerationSeconds never evicts;
// otherwise the least tolerationSeconds of its matching tolerations
// (negative as 0) after it was added. The earliest wins.
func refEvictAt(taints []api.Taint, tols []api.Toleration, added map[string]time.Time) (time.Time, bool) {
	var best time.Time
	found := false
	for _, taint := range taints {
		if taint.Effect != "NoExecute" {
			continue
		}
		var least *int64
		any := false
		for _, tol := range tols {
			if !refTolerates(tol, taint) {
				continue
			}
			any = true
			if tol.TolerationSeconds != nil && (least == nil || *tol.TolerationSeconds < *least) {
				v := *tol.TolerationSeconds
				least = &v
			}
		}
		var when time.Time
		switch {
		case !any:
			when = added[taint.Key+"="+taint.Value]
		case least == nil:
			continue
		default:
			s := *least
			if s < 0 {
				s = 0
			}
			when = added[taint.Key+"="+taint.Value].Add(time.Duration(s) * time.Second)
		}
		if !found || when.Before(best) {
			best, found = when, true
		}
	}
	return best, found
}

// Seed 003's examples (TNT-2/3/4) as eviction times.
func TestEvictAtSeedExamples(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	added := func(*api.Taint) time.Time { return t0 }
	k1 := []api.Taint{
		{Key: "key1", Value: "value1", Effect: "NoSchedule"},
		{Key: "key1", Value: "value1", Effect: "NoExecute"},
		{Key: "key2", Value: "value2", Effect: "NoSchedule"},
	}
	tests := []struct {
		name   string
		taints []api.Taint
		tols   []api.Toleration
		after  time.Duration
		evict  bool
	}{
		// The multiple-taints example: key2's NoSchedule is not tolerated,
		// but a running pod stays: only NoExecute evicts.
		{"multiple taints, NoExecute tolerated", k1, []api.Toleration{
			{Key: "key1", Operator: "Equal", Value: "value1", Effect: "NoSchedule"},
			{Key: "key1", Operator: "Equal", Value: "value1", Effect: "NoExecute"}}, 0, false},
		{"multiple taints, NoExecute not tolerated", k1, []api.Toleration{
			{Key: "key1", Operator: "Equal", Value: "value1", Effect: "NoSchedule"}}, 0, true},
		{"tolerationSeconds 3600", k1[1:2], []api.Toleration{
			{Key: "key1", Operator: "Equal", Value: "value1", Effect: "NoExecute", TolerationSeconds: secs(3600)}}, time.Hour, true},
		{"empty key with Exists tolerates everything", k1, []api.Toleration{{Operator: "Exists"}}, 0, false},
		{"empty effect matches NoExecute", k1[1:2], []api.Toleration{{Key: "key1", Operator: "Exists", TolerationSeconds: secs(60)}}, time.Minute, true},
		{"unreachable, the default 300 s", []api.Taint{{Key: api.TaintNodeUnreachable, Effect: "NoExecute"}},
			[]api.Toleration{{Key: api.TaintNodeUnreachable, Operator: "Exists", Effect: "NoExecute", TolerationSeconds: secs(300)}}, 5 * time.Minute, true},
		{"the seed's older name", []api.Taint{{Key: api.TaintNodeUnreachable, Effect: "NoExecute"}},
			[]api.Toleration{{Key: "node.alpha.kubernetes.io/unreachable", Operator: "Exists", Effect: "NoExecute", TolerationSeconds: secs(6000)}}, 6000 * time.Second, true},
		{"with and without seconds: the seconds win", k1[1:2], []api.Toleration{
			{Key: "key1", Operator: "Exists"}, {Key: "key1", Operator: "Exists", Effect: "NoExecute", TolerationSeconds: secs(10)}}, 10 * time.Second, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			at, evict := EvictAt(tt.taints, tt.tols, added)
			if evict != tt.evict || evict && !at.Equal(t0.Add(tt.after)) {
				t.Errorf("EvictAt = %v, %v; want evict=%v at t0+%v", at, evict, tt.evict, tt.after)
			}
		})
	}
}

// A property test (issue 10, "How it is checked"): random sequences of
// taint adds and removes, toleration sets and clock steps; at every step
// EvictAt must agree with the reference model on whether the pod is to
// be evicted now and, if later, when.
func TestEvictAtAgreesWithReference(t *testing.T) {
	keys := []string{"a", "b", api.TaintNodeUnreachable, api.TaintNodeNotReady}
	tolKeys := append([]string{"", "node.alpha.kubernetes.io/unreachable", "node.alpha.kubernetes.io/notReady"}, keys...)
	effects := []string{"NoSchedule", "PreferNoSchedule", "NoExecute"}
	values := []string{"", "x"}
	for seed := range uint64(3000) {
		r := rand.New(rand.NewPCG(seed, 7))
		var tols []api.Toleration
		for range r.IntN(4) {
			tol := api.Toleration{Key: tolKeys[r.IntN(len(tolKeys))]}
			if r.IntN(2) == 0 {
				tol.Operator = "Exists"
			} else {
				tol.Operator, tol.Value = "Equal", values[r.IntN(len(values))]
				if tol.Key == "" {
					tol.Key = "a"
				}
			}
			if r.IntN(3) > 0 {
				tol.Effect = effects[r.IntN(len(effects))]
			}
			if r.IntN(3) > 0 {
				tol.TolerationSeconds = secs(int64(r.IntN(40)) - 5)
			}
			tols = append(tols, tol)
		}
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		added := map[string]time.Time{}
		var taints []api.Taint
		for step := range 30 {
			switch r.IntN(3) {
			case 0: // add a taint (a key=value holds one effect at a time)
				tn := api.Taint{Key: keys[r.IntN(len(keys))], Value: values[r.IntN(len(values))], Effect: effects[r.IntN(len(effects))]}
				k := tn.Key + "=" + tn.Value
				if _, ok := added[k]; !ok {
					added[k] = now
					tn.TimeAdded = api.NewTime(now)
					taints = append(taints, tn)
				}
			case 1: // remove one
				if len(taints) > 0 {
					i := r.IntN(len(taints))
					delete(added, taints[i].Key+"="+taints[i].Value)
					taints = append(taints[:i], taints[i+1:]...)
				}
			default:
				now = now.Add(time.Duration(r.IntN(20)) * time.Second)
			}
			got, gotEvict := EvictAt(taints, tols, func(t *api.Taint) time.Time { return t.TimeAdded.Time })
			want, wantEvict := refEvictAt(taints, tols, added)
			if gotEvict != wantEvict || gotEvict && !got.Equal(want) {
				t.Fatalf("seed %d step %d: taints %v tolerations %v: EvictAt = %v %v, reference %v %v",
					seed, step, taints, fmt.Sprint(tols), got, gotEvict, want, wantEvict)
			}
			if gotEvict && !now.Before(got) {
				break // evicted: the sequence ends for this pod
			}
		}
	}
}

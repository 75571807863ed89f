package api

import (
	"fmt"
	"strings"
	"testing"
)

func budget(minAvail, maxUnavail *IntOrString) *PodDisruptionBudget {
	return &PodDisruptionBudget{ObjectMeta: ObjectMeta{Name: "b", Namespace: "default"},
		Spec: PodDisruptionBudgetSpec{MinAvailable: minAvail, MaxUnavailable: maxUnavail, Selector: &LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
}

func ptrIOS(v IntOrString) *IntOrString { return &v }

// PDB arithmetic (issue 10, "How it is checked"): counts and
// percentages, which round up as Kubernetes rounds them.
func TestBudgetStatus(t *testing.T) {
	ready := func(n int, healthy int) []*Pod {
		var out []*Pod
		for i := range n {
			st := ConditionFalse
			if i < healthy {
				st = ConditionTrue
			}
			out = append(out, &Pod{Status: PodStatus{Phase: PodRunning, Conditions: []PodCondition{{Type: PodReady, Status: st}}}})
		}
		return out
	}
	for _, tt := range []struct {
		name                    string
		b                       *PodDisruptionBudget
		pods                    []*Pod
		expected, healthy, want int32
		allowed                 int32
	}{
		{"minAvailable 2 of 4 ready", budget(ptrIOS(FromInt(2)), nil), ready(4, 4), 4, 4, 2, 2},
		{"minAvailable 2 of 3 ready", budget(ptrIOS(FromInt(2)), nil), ready(4, 3), 4, 3, 2, 1},
		{"minAvailable 50% of 3 rounds up to 2", budget(ptrIOS(FromString("50%")), nil), ready(3, 3), 3, 3, 2, 1},
		{"minAvailable 100%", budget(ptrIOS(FromString("100%")), nil), ready(4, 4), 4, 4, 4, 0},
		{"maxUnavailable 1 of 4", budget(nil, ptrIOS(FromInt(1))), ready(4, 4), 4, 4, 3, 1},
		{"maxUnavailable 1 with one not ready", budget(nil, ptrIOS(FromInt(1))), ready(4, 3), 4, 3, 3, 0},
		{"maxUnavailable 30% of 5 rounds up to 2", budget(nil, ptrIOS(FromString("30%"))), ready(5, 5), 5, 5, 3, 2},
		{"maxUnavailable more than there are", budget(nil, ptrIOS(FromInt(9))), ready(2, 2), 2, 2, 0, 2},
		{"no pods", budget(ptrIOS(FromInt(1)), nil), nil, 0, 0, 1, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := BudgetStatus(tt.b, tt.pods, nil)
			if st.ExpectedPods != tt.expected || st.CurrentHealthy != tt.healthy || st.DesiredHealthy != tt.want || st.DisruptionsAllowed != tt.allowed {
				t.Errorf("status %+v, want expected %d healthy %d desired %d allowed %d", st, tt.expected, tt.healthy, tt.want, tt.allowed)
			}
		})
	}
	// A terminating pod holds its place but is not healthy; a finished
	// one is not expected.
	pods := ready(3, 3)
	pods[0].DeletionTimestamp = &Time{}
	pods = append(pods, &Pod{Status: PodStatus{Phase: PodSucceeded}})
	if st := BudgetStatus(budget(ptrIOS(FromInt(1)), nil), pods, nil); st.ExpectedPods != 3 || st.CurrentHealthy != 2 {
		t.Errorf("terminating and finished pods: %+v, want expected 3, healthy 2", st)
	}
}

// With maxUnavailable (or a percentage) the pods expected are the scale
// of their controllers, as in Kubernetes: a pod gone and not yet replaced
// is still expected, so a second eviction is not allowed meanwhile.
func TestBudgetStatusByScale(t *testing.T) {
	yes := true
	rs := OwnerReference{Kind: "ReplicaSet", Name: "web", UID: "rs-1", Controller: &yes}
	var pods []*Pod
	for range 2 {
		pods = append(pods, &Pod{ObjectMeta: ObjectMeta{Namespace: "default", OwnerReferences: []OwnerReference{rs}},
			Status: PodStatus{Phase: PodRunning, Conditions: []PodCondition{{Type: PodReady, Status: ConditionTrue}}}})
	}
	scale := func(ns string, ref *OwnerReference) (string, int32, bool) { return ref.UID, 3, ref.UID == "rs-1" }
	st := BudgetStatus(budget(nil, ptrIOS(FromInt(1))), pods, scale)
	if st.ExpectedPods != 3 || st.DesiredHealthy != 2 || st.DisruptionsAllowed != 0 {
		t.Fatalf("one of 3 replicas gone: %+v, want expected 3, desired 2, none allowed", st)
	}
	if st := BudgetStatus(budget(ptrIOS(FromInt(1)), nil), pods, scale); st.ExpectedPods != 2 {
		t.Fatalf("minAvailable as a count: expected %d, want the 2 pods", st.ExpectedPods)
	}
}

// A Deployment's replicas are the scale of its pods, whichever replica
// set they belong to (mid-rollout, old and new), as in Kubernetes; a
// replica set of its own counts its replicas; a stale ref counts the pod.
func TestResolveScale(t *testing.T) {
	yes := true
	three, five := int32(3), int32(5)
	objs := map[string]Object{
		"Deployment/web": &Deployment{ObjectMeta: ObjectMeta{Name: "web", UID: "d-1"}, Spec: DeploymentSpec{Replicas: &three}},
		"ReplicaSet/web-a": &ReplicaSet{ObjectMeta: ObjectMeta{Name: "web-a", UID: "rs-a",
			OwnerReferences: []OwnerReference{{Kind: "Deployment", Name: "web", UID: "d-1", Controller: &yes}}}, Spec: ReplicaSetSpec{Replicas: &five}},
		"ReplicaSet/web-b": &ReplicaSet{ObjectMeta: ObjectMeta{Name: "web-b", UID: "rs-b",
			OwnerReferences: []OwnerReference{{Kind: "Deployment", Name: "web", UID: "d-1", Controller: &yes}}}},
		"ReplicaSet/solo": &ReplicaSet{ObjectMeta: ObjectMeta{Name: "solo", UID: "rs-s"}, Spec: ReplicaSetSpec{Replicas: &five}},
	}
	get := func(kind, ns, name string) (Object, bool) { o, ok := objs[kind+"/"+name]; return o, ok }
	scale := func(ns string, ref *OwnerReference) (string, int32, bool) { return ResolveScale(get, ns, ref) }
	for _, tt := range []struct {
		ref     OwnerReference
		uid     string
		n       int32
		resolve bool
	}{
		{OwnerReference{Kind: "ReplicaSet", Name: "web-a", UID: "rs-a"}, "d-1", 3, true},
		{OwnerReference{Kind: "ReplicaSet", Name: "web-b", UID: "rs-b"}, "d-1", 3, true},
		{OwnerReference{Kind: "ReplicaSet", Name: "solo", UID: "rs-s"}, "rs-s", 5, true},
		{OwnerReference{Kind: "ReplicaSet", Name: "solo", UID: "stale"}, "", 0, false},
		{OwnerReference{Kind: "StatefulSet", Name: "db", UID: "x"}, "", 0, false},
	} {
		if uid, n, ok := scale("default", &tt.ref); uid != tt.uid || n != tt.n || ok != tt.resolve {
			t.Errorf("%s/%s: %q %d %v, want %q %d %v", tt.ref.Kind, tt.ref.Name, uid, n, ok, tt.uid, tt.n, tt.resolve)
		}
	}
	// Mid-rollout: 2 pods of the old replica set, 2 of the new, one scale
	// of 3: expected 3, not 5 + 1.
	var pods []*Pod
	for i, rs := range []string{"web-a", "web-a", "web-b", "web-b"} {
		uid := map[string]string{"web-a": "rs-a", "web-b": "rs-b"}[rs]
		pods = append(pods, &Pod{ObjectMeta: ObjectMeta{Name: fmt.Sprint(i), Namespace: "default", OwnerReferences: []OwnerReference{{Kind: "ReplicaSet", Name: rs, UID: uid, Controller: &yes}}},
			Status: PodStatus{Phase: PodRunning, Conditions: []PodCondition{{Type: PodReady, Status: ConditionTrue}}}})
	}
	if st := BudgetStatus(budget(nil, ptrIOS(FromInt(1))), pods, scale); st.ExpectedPods != 3 || st.DesiredHealthy != 2 || st.DisruptionsAllowed != 2 {
		t.Fatalf("mid-rollout: %+v, want expected 3 (the deployment's), desired 2, 2 allowed", st)
	}
}

// Bad budgets are refused with every problem by field path.
func TestValidatePodDisruptionBudget(t *testing.T) {
	for _, tt := range []struct {
		name string
		b    *PodDisruptionBudget
		want []string
	}{
		{"both", budget(ptrIOS(FromInt(1)), ptrIOS(FromInt(1))), []string{"spec: Invalid value", "minAvailable and maxUnavailable cannot be both set"}},
		{"neither", budget(nil, nil), []string{"spec.minAvailable: Required value"}},
		{"negative", budget(ptrIOS(FromInt(-1)), nil), []string{"spec.minAvailable: Invalid value: -1: must be greater than or equal to 0"}},
		{"over 100%", budget(nil, ptrIOS(FromString("120%"))), []string{`spec.maxUnavailable: Invalid value: "120%": must not be greater than 100%`}},
		{"not a percent", budget(ptrIOS(FromString("half")), nil), []string{"spec.minAvailable: Invalid value: \"half\""}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var msgs []string
			for _, e := range Validate(tt.b) {
				msgs = append(msgs, e.Error())
			}
			all := strings.Join(msgs, "; ")
			for _, w := range tt.want {
				if !strings.Contains(all, w) {
					t.Errorf("errors %q, want one saying %q", all, w)
				}
			}
		})
	}
}

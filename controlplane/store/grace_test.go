package store

import (
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
)

func ptr[T any](v T) *T { return &v }

// Graceful deletion of pods (issue 10 item 1), as Kubernetes does it: a
// pod a node runs is marked terminating with a deadline; one no node runs
// goes at once; a second delete may only shorten the grace period; 0
// removes it whatever is left.
func TestDeleteGrace(t *testing.T) {
	now := t0.Add(time.Hour)
	cases := []struct {
		name        string
		node        string
		phase       string
		specGrace   *int64
		finalizers  []string
		grace       []int64 // deletes in order
		wantGone    bool
		wantGrace   int64
		wantEndsSec int64 // deletionTimestamp - now
	}{
		{name: "bound, the pod's default", node: "n1", grace: []int64{GraceDefault}, wantGrace: 30, wantEndsSec: 30},
		{name: "bound, the pod's own period", node: "n1", specGrace: ptr[int64](7), grace: []int64{GraceDefault}, wantGrace: 7, wantEndsSec: 7},
		{name: "bound, asked period", node: "n1", specGrace: ptr[int64](7), grace: []int64{3}, wantGrace: 3, wantEndsSec: 3},
		{name: "bound, spec says 0", node: "n1", specGrace: ptr[int64](0), grace: []int64{GraceDefault}, wantGone: true},
		{name: "bound, forced", node: "n1", grace: []int64{0}, wantGone: true},
		{name: "unbound goes at once", grace: []int64{GraceDefault}, wantGone: true},
		{name: "succeeded goes at once", node: "n1", phase: api.PodSucceeded, grace: []int64{GraceDefault}, wantGone: true},
		{name: "failed goes at once", node: "n1", phase: api.PodFailed, grace: []int64{GraceDefault}, wantGone: true},
		{name: "second delete shortens", node: "n1", grace: []int64{GraceDefault, 5}, wantGrace: 5, wantEndsSec: 5},
		{name: "second delete does not lengthen", node: "n1", grace: []int64{5, 60}, wantGrace: 5, wantEndsSec: 5},
		{name: "force after graceful", node: "n1", grace: []int64{GraceDefault, 0}, wantGone: true},
		{name: "finalizer holds a forced pod", node: "n1", finalizers: []string{"example.com/hold"}, grace: []int64{GraceDefault, 0}, wantGrace: 0, wantEndsSec: 30},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Options{})
			h.mustCreate(newNamespace("default"))
			p := newPod("default", "web", tc.node, nil)
			p.Spec.TerminationGracePeriodSeconds = tc.specGrace
			p.Finalizers = tc.finalizers
			if tc.phase != "" {
				p.Status.Phase = tc.phase
			}
			h.mustCreate(p)
			for _, g := range tc.grace {
				if r := h.apply(DeleteGraceCmd(rPods, "default", "web", Preconditions{}, now, g)); r.Err != nil {
					t.Fatalf("delete with grace %d: %v", g, r.Err)
				}
			}
			if tc.wantGone {
				h.absent(rPods, "default", "web")
				return
			}
			got := h.get(rPods, "default", "web").(*api.Pod)
			if got.DeletionGracePeriodSeconds == nil || *got.DeletionGracePeriodSeconds != tc.wantGrace {
				t.Errorf("deletionGracePeriodSeconds %v, want %d", got.DeletionGracePeriodSeconds, tc.wantGrace)
			}
			if got.DeletionTimestamp == nil || !got.DeletionTimestamp.Equal(now.Add(time.Duration(tc.wantEndsSec)*time.Second)) {
				t.Errorf("deletionTimestamp %v, want now + %ds", got.DeletionTimestamp, tc.wantEndsSec)
			}
		})
	}
}

// A terminating pod stays through its node's status writes, and goes
// when its node deletes it with grace 0; a status write can neither set
// nor clear the deletion fields.
func TestTerminatingPodLifecycle(t *testing.T) {
	h := newHarness(t, Options{})
	h.mustCreate(newNamespace("default"))
	h.mustCreate(newPod("default", "web", "n1", nil))
	r := h.apply(DeleteGraceCmd(rPods, "default", "web", Preconditions{}, t0, GraceDefault))
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	marked := r.Object.(*api.Pod)

	st := *marked
	st.Status.Phase = api.PodRunning
	st.DeletionTimestamp, st.DeletionGracePeriodSeconds = nil, nil
	if r := h.update(&st, SubresourceStatus); r.Err != nil {
		t.Fatalf("status write of a terminating pod: %v", r.Err)
	}
	spec := *h.get(rPods, "default", "web").(*api.Pod)
	spec.Labels = map[string]string{"a": "b"}
	spec.DeletionTimestamp, spec.DeletionGracePeriodSeconds = nil, nil
	if r := h.update(&spec, SubresourceMain); r.Err != nil {
		t.Fatalf("update of a terminating pod: %v", r.Err)
	}
	got := h.get(rPods, "default", "web").(*api.Pod)
	if got.Status.Phase != api.PodRunning || got.DeletionTimestamp == nil || !got.DeletionTimestamp.Equal(marked.DeletionTimestamp.Time) ||
		got.DeletionGracePeriodSeconds == nil || *got.DeletionGracePeriodSeconds != 30 {
		t.Fatalf("after writes: phase %s, deletionTimestamp %v, grace %v; want Running and the deletion fields kept",
			got.Status.Phase, got.DeletionTimestamp, got.DeletionGracePeriodSeconds)
	}

	// A create never carries them.
	fresh := newPod("default", "other", "n1", nil)
	fresh.DeletionTimestamp, fresh.DeletionGracePeriodSeconds = api.NewTime(t0), ptr[int64](3)
	if c := h.mustCreate(fresh).Object.(*api.Pod); c.DeletionTimestamp != nil || c.DeletionGracePeriodSeconds != nil {
		t.Fatalf("created pod kept deletion fields: %v %v", c.DeletionTimestamp, c.DeletionGracePeriodSeconds)
	}

	// The node finishes: grace 0 with the UID as precondition.
	if r := h.apply(DeleteGraceCmd(rPods, "default", "web", Preconditions{UID: "someone-else"}, t0, 0)); !api.IsConflict(r.Err) {
		t.Fatalf("delete with a stale UID: %v, want a conflict", r.Err)
	}
	h.ok(DeleteGraceCmd(rPods, "default", "web", Preconditions{UID: marked.UID}, t0, 0))
	h.absent(rPods, "default", "web")
}

// A namespace's delete gives its running pods their grace period and
// waits for them; the unbound ones go at once.
func TestNamespaceDeleteWaitsForTerminatingPods(t *testing.T) {
	h := newHarness(t, Options{})
	h.mustCreate(newNamespace("team"))
	h.mustCreate(newPod("team", "running", "n1", nil))
	h.mustCreate(newPod("team", "pending", "", nil))
	h.ok(DeleteCmd(rNamespaces, "", "team", Preconditions{}, t0))
	h.absent(rPods, "team", "pending")
	p := h.get(rPods, "team", "running").(*api.Pod)
	if p.DeletionTimestamp == nil || p.DeletionGracePeriodSeconds == nil {
		t.Fatalf("running pod of a deleted namespace: %v %v; want it terminating", p.DeletionTimestamp, p.DeletionGracePeriodSeconds)
	}
	if ns := h.get(rNamespaces, "", "team").(*api.Namespace); ns.Status.Phase != api.NamespaceTerminating {
		t.Fatalf("namespace phase %s, want Terminating while its pod stops", ns.Status.Phase)
	}
	h.ok(DeleteGraceCmd(rPods, "team", "running", Preconditions{UID: p.UID}, t0, 0))
	h.absent(rPods, "team", "running")
	h.absent(rNamespaces, "", "team")
}

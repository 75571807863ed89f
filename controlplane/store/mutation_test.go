package store

import (
	"strings"
	"testing"
)

// catchMutations makes a detected change record its message instead of
// panicking, for the test's length.
func catchMutations(t *testing.T) *[]string {
	var got []string
	prev := onMutation
	onMutation = func(msg string) { got = append(got, msg) }
	t.Cleanup(func() { onMutation = prev })
	return &got
}

// A stored object changed by a reader is found when a write replaces it,
// when it is deleted, and when a snapshot is written, and the message
// names the object (issue 9 item 5). Objects nobody changed pass.
func TestMutationDetector(t *testing.T) {
	if !detectMutations() {
		t.Fatal("the mutation detector is off in a test binary")
	}
	got := catchMutations(t)
	h := newHarness(t, Options{})
	h.mustCreate(newNamespace("default"))
	for _, n := range []string{"a", "b", "c"} {
		h.mustCreate(newPod("default", n, "", map[string]string{"app": "web"}))
	}
	h.ok(mustCmd(UpdateCmd(newPod("default", "a", "", map[string]string{"app": "db"}), SubresourceMain)))
	snapshotBytes(t, h.s)
	if len(*got) != 0 {
		t.Fatalf("reports without a change: %q", *got)
	}

	cases := []struct {
		name  string
		write func()
	}{
		{"a", func() {
			h.ok(mustCmd(UpdateCmd(newPod("default", "a", "", map[string]string{"app": "x"}), SubresourceMain)))
		}},
		{"b", func() { h.ok(DeleteCmd(rPods, "default", "b", Preconditions{}, t0)) }},
		{"c", func() { snapshotBytes(t, h.s) }},
	}
	for _, c := range cases {
		*got = nil
		// What a careless reader does: change the object Get returned.
		h.get(rPods, "default", c.name).GetObjectMeta().Labels["app"] = "changed"
		c.write()
		if len(*got) != 1 || !strings.Contains((*got)[0], "pods default/"+c.name+" ") || !strings.Contains((*got)[0], "changed") {
			t.Errorf("pod %s changed: reports %q, want one naming it", c.name, *got)
		}
	}
}

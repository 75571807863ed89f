package store

import (
	"fmt"
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
// names the object (issue 9 item 5). Objects nobody changed pass. It
// holds for entries that keep their JSON and for those that dropped it
// (compared by hash; a watch window of 1 keeps only the last write's).
func TestMutationDetector(t *testing.T) {
	if !detectMutations() {
		t.Fatal("the mutation detector is off in a test binary")
	}
	for _, window := range []int{0, 1} {
		t.Run(fmt.Sprintf("window %d", window), func(t *testing.T) {
			got := catchMutations(t)
			h := newHarness(t, Options{WatchWindow: window})
			h.mustCreate(newNamespace("default"))
			for _, n := range []string{"a", "b", "c"} {
				h.mustCreate(newPod("default", n, "", map[string]string{"app": "web"}))
			}
			h.ok(mustCmd(UpdateCmd(newPod("default", "a", "", map[string]string{"app": "db"}), SubresourceMain)))
			h.mustCreate(newPod("default", "last", "", nil))
			snapshotBytes(t, h.s)
			if len(*got) != 0 {
				t.Fatalf("reports without a change: %q", *got)
			}
			if e := h.s.podTable.get("default", "b"); (e.kept() == nil) != (window == 1) {
				t.Fatalf("with a window of %d, pod b keeps its JSON: %v", window, e.kept() != nil)
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
		})
	}
}

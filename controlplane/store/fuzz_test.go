package store

import (
	"bytes"
	"testing"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// FuzzApply feeds arbitrary commands to a store: Apply may fail but must
// not panic, and a failed entry must not change what a snapshot holds
// unless it reports success somewhere.
func FuzzApply(f *testing.F) {
	c1, _ := CreateCmd(newPod("default", "x", "n1", nil))
	c2, _ := UpdateCmd(newPod("default", "x", "n2", nil), SubresourceStatus)
	for _, c := range [][]byte{c1, c2, DeleteCmd(rPods, "default", "x", Preconditions{}, t0),
		DeleteCmd(rNamespaces, "", "default", Preconditions{}, t0), ExpireEventsCmd(t0), BatchCmd(c1, c2),
		BindCmd("default", "x", Binding{NodeName: "n1", Now: t0}), BatchCmd(c1, BindCmd("default", "x", Binding{NodeName: "n1", Now: t0}))} {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, cmd []byte) {
		s := New(Options{})
		ns, _ := CreateCmd(newNamespace("default"))
		s.Apply(1, ns)
		before := stateBytes(s)
		out := s.Apply(2, cmd)
		changed := false
		switch r := out.(type) {
		case *Result:
			changed = r.Err == nil
		case []*Result:
			for _, x := range r {
				changed = changed || x.Err == nil
			}
		}
		if !changed && !bytes.Equal(before, stateBytes(s)) {
			t.Fatal("a command that failed changed the state")
		}
	})
}

// stateBytes is every stored object's JSON, in List order.
func stateBytes(s *Store) []byte {
	var b []byte
	for _, r := range api.Resources {
		items, _, _ := s.List(r, "", ListOptions{})
		for _, it := range items {
			b = append(b, it.Raw...)
		}
	}
	return b
}

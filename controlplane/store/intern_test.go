package store

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// TestInternSharesEqualParts: pods of one template stored separately end
// up sharing their labels, containers and tolerations, while a pod whose
// parts differ keeps its own, and what is stored and encoded is unchanged.
func TestInternSharesEqualParts(t *testing.T) {
	s := New(Options{})
	nsCmd, _ := CreateCmd(newNamespace("default"))
	if r := s.Apply(1, nsCmd).(*Result); r.Err != nil {
		t.Fatal(r.Err)
	}
	var stored []*api.Pod
	for i, name := range []string{"a", "b", "c"} {
		p := bigPod("default", name, "n1")
		if name == "c" {
			p.Labels["tier"] = "backend"
			p.Spec.Containers[0].Image = "registry.example/team/web-frontend:v2"
		}
		cmd, err := CreateCmd(p)
		if err != nil {
			t.Fatal(err)
		}
		r := s.Apply(uint64(10+i), cmd).(*Result)
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		obj, raw, err := s.Get(rPods, "default", name)
		if err != nil {
			t.Fatal(err)
		}
		got := obj.(*api.Pod)
		// The stored bytes are those of the object (resourceVersion aside),
		// and the object still encodes to them.
		if now, _ := encode(got); !bytes.Equal(now, raw) {
			t.Fatalf("%s: stored object encodes to\n%s\nnot its stored bytes\n%s", name, now, raw)
		}
		stored = append(stored, got)
	}
	a, b, c := stored[0], stored[1], stored[2]
	if reflect.ValueOf(a.Labels).UnsafePointer() != reflect.ValueOf(b.Labels).UnsafePointer() {
		t.Error("a and b have equal labels but hold two maps")
	}
	if &a.Spec.Containers[0] != &b.Spec.Containers[0] {
		t.Error("a and b have equal containers but hold two slices")
	}
	if &a.Spec.Tolerations[0] != &b.Spec.Tolerations[0] {
		t.Error("a and b have equal tolerations but hold two slices")
	}
	if reflect.ValueOf(a.Labels).UnsafePointer() == reflect.ValueOf(c.Labels).UnsafePointer() {
		t.Error("c's labels differ from a's but are shared")
	}
	if &a.Spec.Containers[0] == &c.Spec.Containers[0] {
		t.Error("c's containers differ from a's but are shared")
	}
	if c.Labels["tier"] != "backend" || a.Labels["tier"] != "frontend" {
		t.Errorf("labels changed: a %v, c %v", a.Labels, c.Labels)
	}
	if &a.Spec.Tolerations[0] != &c.Spec.Tolerations[0] {
		t.Error("c's tolerations equal a's but are not shared")
	}

	// A store restored from a snapshot shares them too.
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := snap.Persist(&buf); err != nil {
		t.Fatal(err)
	}
	r := New(Options{})
	if err := r.Restore(&buf, 0); err != nil {
		t.Fatal(err)
	}
	ra, _, _ := r.Get(rPods, "default", "a")
	rb, _, _ := r.Get(rPods, "default", "b")
	if pa, pb := ra.(*api.Pod), rb.(*api.Pod); &pa.Spec.Containers[0] != &pb.Spec.Containers[0] ||
		reflect.ValueOf(pa.Labels).UnsafePointer() != reflect.ValueOf(pb.Labels).UnsafePointer() {
		t.Error("restored a and b have equal labels and containers but do not share them")
	}
}

// TestInternTellsApartWhatDeepEqualDoes: values that differ only where a
// hash might not look (nil against empty, one map entry's value, the order
// of a slice) are not merged.
func TestInternTellsApartWhatDeepEqualDoes(t *testing.T) {
	var in interner
	pairs := []struct{ a, b any }{
		{[]string{}, []string(nil)},
		{[]string{"x", "y"}, []string{"y", "x"}},
		{map[string]string{"a": "1", "b": "2"}, map[string]string{"a": "2", "b": "1"}},
		{map[string]string{}, map[string]string{"": ""}},
		{[]api.Toleration{{Key: "k"}}, []api.Toleration{{Key: "k", Value: "v"}}},
		{api.ResourceList{"cpu": api.MustParseQuantity("1")}, api.ResourceList{"cpu": api.MustParseQuantity("2")}},
	}
	for _, p := range pairs {
		va, vb := reflect.ValueOf(p.a), reflect.ValueOf(p.b)
		in.value(va)
		if got := in.value(vb).Interface(); !reflect.DeepEqual(got, p.b) {
			t.Errorf("%#v was given %#v", p.b, got)
		}
	}
	same := api.ResourceList{"cpu": api.MustParseQuantity("1")}
	first := in.value(reflect.ValueOf(same))
	if got := in.value(reflect.ValueOf(api.ResourceList{"cpu": api.MustParseQuantity("1")})); got.UnsafePointer() != first.UnsafePointer() {
		t.Error("equal resource lists not shared")
	}
}

package store

import (
	"bytes"
	"reflect"
	"strconv"
	"testing"
	"time"
	"unsafe"

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

// podLifeLog is the log of pods that are created, bound, given the
// scheduler's Scheduled event, started (runningStatus, ten a second, so
// that pods share times and conditions), and then changed in the ways
// agents change them: a container restarting, readiness lost, a label
// changed, a delete.
func podLifeLog(pods int) [][]byte {
	var log [][]byte
	add := func(c []byte, err error) {
		if err != nil {
			panic(err)
		}
		log = append(log, c)
	}
	for _, ns := range []string{"a", "b"} {
		add(CreateCmd(newNamespace(ns)))
	}
	for i := range 3 {
		add(CreateCmd(newNode("n" + strconv.Itoa(i))))
	}
	start := time.Unix(1_780_000_000, 0).UTC()
	running := func(i, at int) *api.Pod {
		ns, name := []string{"a", "b"}[i%2], "web-"+strconv.Itoa(i)
		return runningStatus(bigPod(ns, name, "n"+strconv.Itoa(i%3)), at, start)
	}
	for i := range pods {
		ns, name, node := []string{"a", "b"}[i%2], "web-"+strconv.Itoa(i), "n"+strconv.Itoa(i%3)
		add(CreateCmd(bigPod(ns, name, "")))
		at := start.Add(time.Duration(i) * 100 * time.Millisecond)
		log = append(log, BindCmd(ns, name, Binding{NodeName: node, Now: at}))
		bound := bigPod(ns, name, node)
		bound.ResourceVersion = strconv.Itoa(len(log))
		add(CreateCmd(scheduledEvent(bound, i*100, start)))
		add(UpdateCmd(running(i, i*100), SubresourceStatus))
	}
	for i := 0; i < pods; i += 3 {
		// The container restarted: a new id, the last one terminated.
		p := running(i, i*100)
		cs := &p.Status.ContainerStatuses[0]
		cs.RestartCount = 1
		cs.LastState.Terminated = &api.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled", ContainerID: cs.ContainerID,
			StartedAt: p.Status.StartTime, FinishedAt: api.NewTime(start.Add(time.Hour))}
		cs.ContainerID = "containerd://restarted-" + strconv.Itoa(i)
		add(UpdateCmd(p, SubresourceStatus))
	}
	for i := 1; i < pods; i += 4 {
		p := running(i, i*100)
		for c := range p.Status.Conditions {
			if p.Status.Conditions[c].Type != api.PodScheduled && p.Status.Conditions[c].Type != api.PodInitialized {
				p.Status.Conditions[c].Status = api.ConditionFalse
				p.Status.Conditions[c].Reason = "ContainersNotReady"
				p.Status.Conditions[c].Message = "containers with unready status: [web]"
			}
		}
		p.Status.ContainerStatuses[0].Ready = false
		add(UpdateCmd(p, SubresourceStatus))
	}
	for i := 2; i < pods; i += 5 {
		p := running(i, i*100)
		p.Labels = map[string]string{"app": "web", "tier": "frontend", "pod-template-hash": "77c6d9f5b"}
		add(UpdateCmd(p, ""))
		log = append(log, DeleteCmd(rPods, p.Namespace, p.Name, Preconditions{}, start.Add(time.Hour)))
	}
	return log
}

// TestInternChangesNothing: a store that shares strings, times and status
// parts (intern.go) holds, encodes and hashes exactly what one that shares
// nothing does, at every index and after a restore; and it did share.
func TestInternChangesNothing(t *testing.T) {
	const pods = 60
	log := podLifeLog(pods)
	on, off := New(Options{WatchWindow: 8}), New(Options{WatchWindow: 8})
	off.intern.off = true
	for i, c := range log {
		idx := uint64(i + 1)
		ra, rb := on.Apply(idx, c).(*Result), off.Apply(idx, c).(*Result)
		if !bytes.Equal(ra.Raw, rb.Raw) || !reflect.DeepEqual(ra.Object, rb.Object) || (ra.Err == nil) != (rb.Err == nil) {
			t.Fatalf("entry %d: results differ:\n%s %v\n%s %v", idx, ra.Raw, ra.Err, rb.Raw, rb.Err)
		}
		ha, _ := on.StateHash(idx)
		hb, _ := off.StateHash(idx)
		if ha != hb {
			t.Fatalf("entry %d: state hash %x with interning, %x without", idx, ha, hb)
		}
	}
	sameObjects(t, on, off)
	data := snapshotBytes(t, on)
	if !bytes.Equal(data, snapshotBytes(t, off)) {
		t.Fatal("snapshots differ")
	}
	ron, roff := New(Options{}), New(Options{})
	roff.intern.off = true
	restoreInto(t, ron, data, on.AppliedIndex())
	restoreInto(t, roff, data, on.AppliedIndex())
	sameObjects(t, ron, roff)
	sameObjects(t, ron, on)

	// It shared: pods 4 and 8 started in one second and did not change
	// since, so their conditions are one slice, as are their times and
	// image names; the Scheduled event names its pod with the pod's own
	// strings. The store that shares nothing holds copies of the slices
	// and times (its strings the JSON decoder may share: it keeps a small
	// cache of recent ones).
	for _, c := range []struct {
		s      *Store
		shares bool
	}{{on, true}, {ron, true}, {off, false}, {roff, false}} {
		p0 := getPod(t, c.s, "a", "web-4")
		p1 := getPod(t, c.s, "a", "web-8")
		if &p0.Status.Conditions[0] == &p1.Status.Conditions[0] != c.shares {
			t.Errorf("pods of one second share conditions: %v, want %v", !c.shares, c.shares)
		}
		if p0.Status.StartTime == p1.Status.StartTime != c.shares {
			t.Errorf("pods of one second share their start time: %v, want %v", !c.shares, c.shares)
		}
		i0, i1 := p0.Status.ContainerStatuses[0].Image, p1.Status.ContainerStatuses[0].Image
		if c.shares && unsafe.StringData(i0) != unsafe.StringData(i1) {
			t.Error("pods do not share their container's image name")
		}
		if c.shares && unsafe.StringData(p0.Status.PodIP) != unsafe.StringData(p0.Status.PodIPs[0].IP) {
			t.Error("podIP and podIPs[0] are two strings")
		}
		objs, _, err := c.s.ListObjects(api.ResourceForPlural("events"), "a", ListOptions{})
		if err != nil || len(objs) == 0 {
			t.Fatal(len(objs), err)
		}
		ev := objs[0].(*api.Event)
		p := getPod(t, c.s, "a", ev.InvolvedObject.Name)
		if ev.InvolvedObject.UID != p.UID {
			t.Fatalf("event %s names uid %s, its pod has %s", ev.Name, ev.InvolvedObject.UID, p.UID)
		}
		if c.shares && (unsafe.StringData(ev.InvolvedObject.UID) != unsafe.StringData(p.UID) ||
			unsafe.StringData(ev.InvolvedObject.Name) != unsafe.StringData(p.Name)) {
			t.Errorf("event %s does not name its pod with the pod's strings", ev.Name)
		}
	}
}

func getPod(t *testing.T, s *Store, ns, name string) *api.Pod {
	t.Helper()
	obj, err := s.GetObject(rPods, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	return obj.(*api.Pod)
}

// sameObjects fails unless a and b hold the same objects, encoded to the
// same bytes and equal field by field.
func sameObjects(t *testing.T, a, b *Store) {
	t.Helper()
	sameState(t, a, b)
	for _, r := range api.Resources {
		oa, _, _ := a.ListObjects(r, "", ListOptions{})
		ob, _, _ := b.ListObjects(r, "", ListOptions{})
		if !reflect.DeepEqual(oa, ob) {
			t.Fatalf("%s: objects differ", r.Plural)
		}
	}
}

// TestInternChangesNoObjectItDoesNotOwn: an object the server handed over
// (Store.CreateCmd) shares its slices with its caller's, so its parts are
// shared whole or left alone, never changed inside; an equal decoded one
// had its strings interned first.
func TestInternChangesNoObjectItDoesNotOwn(t *testing.T) {
	s := New(Options{})
	nsCmd, _ := CreateCmd(newNamespace("default"))
	s.Apply(1, nsCmd)
	start := time.Unix(1_780_000_000, 0).UTC()
	c, _ := CreateCmd(runningStatus(bigPod("default", "decoded", "n1"), 1, start))
	if r := s.Apply(2, c).(*Result); r.Err != nil {
		t.Fatal(r.Err)
	}
	// The caller's pod: its container statuses are the caller's too.
	caller := runningStatus(bigPod("default", "handed", "n1"), 2, start)
	statuses := caller.Status.ContainerStatuses
	image := unsafe.StringData(statuses[0].Image)
	c, err := s.CreateCmd(caller)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release(c)
	if r := s.Apply(3, c).(*Result); r.Err != nil {
		t.Fatal(r.Err)
	}
	if got := getPod(t, s, "default", "handed"); &got.Status.ContainerStatuses[0] != &statuses[0] {
		t.Fatal("the handed pod was decoded: the test does not test the hand-over")
	}
	if unsafe.StringData(statuses[0].Image) != image {
		t.Error("interning changed the caller's container status")
	}
	// A decoded one shares the image name.
	dec := getPod(t, s, "default", "decoded")
	if unsafe.StringData(dec.Status.ContainerStatuses[0].Image) == image {
		t.Fatal("the decoded pod shares the caller's string: the test does not test interning")
	}
}

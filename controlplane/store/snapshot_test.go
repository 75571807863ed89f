package store

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// commandLog builds a mixed, seeded log of commands: creates, updates,
// status writes, binds, deletes with finalizers, a namespace cascade, event
// expiry and batches. Some commands fail (conflicts, missing objects):
// failures must be deterministic too.
func commandLog(seed uint64, n int) [][]byte {
	rng := rand.New(rand.NewPCG(seed, 1))
	var log [][]byte
	add := func(c []byte, err error) {
		if err != nil {
			panic(err)
		}
		log = append(log, c)
	}
	for _, ns := range []string{"a", "b", "c"} {
		add(CreateCmd(newNamespace(ns)))
	}
	for i := range 3 {
		add(CreateCmd(newNode("n" + strconv.Itoa(i))))
	}
	for i := range n {
		ns := []string{"a", "b", "c"}[rng.IntN(3)]
		name := "p" + strconv.Itoa(rng.IntN(40))
		now := t0.Add(time.Duration(i) * time.Second)
		switch rng.IntN(8) {
		case 0, 1:
			p := bigPod(ns, name, "")
			if rng.IntN(4) == 0 {
				p.Finalizers = []string{"example.com/f"}
			}
			add(CreateCmd(p))
		case 2:
			node := "n" + strconv.Itoa(rng.IntN(3))
			if rng.IntN(2) == 0 {
				log = append(log, BindCmd(ns, name, Binding{NodeName: node, Now: now}))
				break
			}
			add(UpdateCmd(bigPod(ns, name, node), ""))
		case 3:
			p := bigPod(ns, name, "")
			p.Status.Phase = api.PodRunning
			p.Status.Message = "step " + strconv.Itoa(i)
			add(UpdateCmd(p, SubresourceStatus))
		case 4:
			log = append(log, DeleteCmd(rPods, ns, name, Preconditions{}, now))
		case 5:
			add(CreateCmd(newEvent(ns, "ev"+strconv.Itoa(i), now)))
		case 6:
			p := bigPod(ns, name, "")
			p.Labels = map[string]string{"v": strconv.Itoa(i)}
			p.ResourceVersion = strconv.Itoa(rng.IntN(i + 10)) // usually stale
			c1, _ := UpdateCmd(p, "")
			c2, _ := CreateCmd(bigPod(ns, name+"x", "n1"))
			log = append(log, BatchCmd(c1, c2))
		case 7:
			log = append(log, ExpireEventsCmd(now.Add(-20*time.Second)))
		}
	}
	log = append(log, DeleteCmd(rNamespaces, "", "c", Preconditions{}, t0))
	return log
}

func applyLog(t testing.TB, s *Store, log [][]byte, from uint64) {
	for i, c := range log {
		s.Apply(from+uint64(i), c)
	}
}

func TestSnapshotRestoreRoundTrip(t *testing.T) {
	log := commandLog(7, 400)
	src := New(Options{})
	applyLog(t, src, log, 1)
	data := snapshotBytes(t, src)

	dst := New(Options{})
	restoreInto(t, dst, data, src.AppliedIndex())
	if dst.AppliedIndex() != src.AppliedIndex() {
		t.Fatalf("applied %d, want %d", dst.AppliedIndex(), src.AppliedIndex())
	}
	sameState(t, src, dst)

	// Both go on alike after the restore.
	more := commandLog(8, 50)
	applyLog(t, src, more, src.AppliedIndex()+1)
	applyLog(t, dst, more, dst.AppliedIndex()+1)
	sameState(t, src, dst)
	if !bytes.Equal(snapshotBytes(t, src), snapshotBytes(t, dst)) {
		t.Fatal("snapshots differ after applying the same commands")
	}
}

// As in production, without the mutation detector (which tests switch on,
// and which hands Persist each object's encoding itself), a snapshot of
// entries that dropped their JSON encodes each again into one reused
// buffer: the stream must be the detector's, byte for byte, and restore.
func TestSnapshotWithoutDetectorIsTheSame(t *testing.T) {
	src := New(Options{WatchWindow: 1})
	applyLog(t, src, commandLog(9, 400), 1)
	withDetector := snapshotBytes(t, src)
	defer func(on func() bool) { detectMutations = on }(detectMutations)
	detectMutations = func() bool { return false }
	without := snapshotBytes(t, src)
	if !bytes.Equal(without, withDetector) {
		t.Fatalf("snapshot without the detector differs (%d against %d bytes)", len(without), len(withDetector))
	}
	dst := New(Options{})
	restoreInto(t, dst, without, src.AppliedIndex())
	sameState(t, src, dst)
}

// TestRestoreDecodesAsItReads checks that Restore decodes a stream in
// batches as it reads it, so that a joining member's heap holds one batch
// of JSON beside the state it restores, not the whole stream (issue 16
// item 3), and that batches change nothing in what is restored: events
// whose pods came in an earlier batch, the state hash.
func TestRestoreDecodesAsItReads(t *testing.T) {
	smallBatches(t, 5)
	src := New(Options{})
	applyLog(t, src, commandLog(7, 400), 1)
	data := snapshotBytes(t, src)

	r := &trickleReader{data: data}
	type batch struct{ objects, read int }
	var batches []batch
	restoreBatchDone = func(objects int) { batches = append(batches, batch{objects, r.off}) }
	dst := New(Options{})
	if err := dst.Restore(r, src.AppliedIndex()); err != nil {
		t.Fatal(err)
	}
	if len(batches) < 10 {
		t.Fatalf("%d batches, want one per 5 objects", len(batches))
	}
	for i, b := range batches[:len(batches)-1] {
		if b.objects != 5*(i+1) {
			t.Fatalf("batch %d ended at object %d, want %d", i, b.objects, 5*(i+1))
		}
	}
	if first := batches[0]; first.read > len(data)/4 {
		t.Fatalf("the first batch was decoded after reading %d of %d bytes: the stream is read whole first", first.read, len(data))
	}
	sameState(t, src, dst)
	want, _ := src.StateHash(src.AppliedIndex())
	if got, ok := dst.StateHash(dst.AppliedIndex()); !ok || got != want {
		t.Fatalf("state hash %x after restore, want %x", got, want)
	}
}

// smallBatches makes Restore decode every n objects for the test.
func smallBatches(t *testing.T, n int) {
	objects, done := restoreBatchObjects, restoreBatchDone
	restoreBatchObjects = n
	t.Cleanup(func() { restoreBatchObjects, restoreBatchDone = objects, done })
}

// trickleReader hands out data 64 bytes per Read and says how far it got.
type trickleReader struct {
	data []byte
	off  int
}

func (r *trickleReader) Read(p []byte) (int, error) {
	if r.off == len(r.data) {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), 64)], r.data[r.off:])
	r.off += n
	return n, nil
}

func sameState(t *testing.T, a, b *Store) {
	t.Helper()
	total := 0
	for _, r := range api.Resources {
		ia, rva, err := a.List(r, "", ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ib, rvb, err := b.List(r, "", ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if rva != rvb || len(ia) != len(ib) {
			t.Fatalf("%s: %d items at %d vs %d items at %d", r.Plural, len(ia), rva, len(ib), rvb)
		}
		for i := range ia {
			if !bytes.Equal(ia[i].Raw, ib[i].Raw) {
				t.Fatalf("%s item %d:\n%s\n%s", r.Plural, i, ia[i].Raw, ib[i].Raw)
			}
			m := ia[i].Object.GetObjectMeta()
			_, raw, err := b.Get(r, m.Namespace, m.Name)
			if err != nil || !bytes.Equal(raw, ia[i].Raw) {
				t.Fatalf("Get %s %s/%s after restore: %v", r.Plural, m.Namespace, m.Name, err)
			}
			if !api.SemanticEqual(ia[i].Object, ib[i].Object) {
				t.Fatalf("%s %s/%s: typed objects differ", r.Plural, m.Namespace, m.Name)
			}
		}
		total += len(ia)
	}
	if total < 20 {
		t.Fatalf("only %d objects: the log does not exercise the store", total)
	}
}

func TestDeterminism(t *testing.T) {
	log := commandLog(42, 600)
	a, b := New(Options{}), New(Options{WatchWindow: 7})
	applyLog(t, a, log, 1)
	applyLog(t, b, log, 1)
	sa, sb := snapshotBytes(t, a), snapshotBytes(t, b)
	if !bytes.Equal(sa, sb) {
		t.Fatal("two stores fed the same log wrote different snapshots")
	}
	// A third one restored half way ends the same too.
	c := New(Options{})
	half := len(log) / 2
	applyLog(t, c, log[:half], 1)
	mid := snapshotBytes(t, c)
	d := New(Options{})
	restoreInto(t, d, mid, uint64(half))
	applyLog(t, d, log[half:], uint64(half)+1)
	if !bytes.Equal(sa, snapshotBytes(t, d)) {
		t.Fatal("a store restored half way diverged")
	}
}

func TestRestoreRejectsBadSnapshots(t *testing.T) {
	src := New(Options{})
	applyLog(t, src, commandLog(3, 50), 1)
	good := snapshotBytes(t, src)
	flip := func(i int) []byte {
		b := bytes.Clone(good)
		b[i] ^= 0x01
		return b
	}
	tests := []struct {
		name string
		data []byte
		want error
	}{
		{"empty", nil, ErrBadSnapshot},
		{"bad magic", flip(0), ErrBadSnapshot},
		{"newer format", flip(len(snapMagic)), ErrBadSnapshot},
		{"flipped body byte", flip(len(good) / 2), ErrBadSnapshot},
		{"truncated", good[:len(good)-10], ErrBadSnapshot},
		{"unknown resource", func() []byte {
			b := append([]byte(snapMagic), snapVersion)
			b = append(b, 5)
			b = appendString(b, "widgets")
			return append(b, 0)
		}(), ErrUnknownResource},
	}
	for _, tc := range tests {
		for _, batch := range []int{restoreBatchObjects, 3} {
			t.Run(fmt.Sprintf("%s/batch=%d", tc.name, batch), func(t *testing.T) {
				smallBatches(t, batch)
				h := newHarness(t, Options{})
				h.mustCreate(newNamespace("keep"))
				err := h.s.Restore(bytes.NewReader(tc.data), 99)
				if !errors.Is(err, tc.want) {
					t.Fatalf("err %v, want %v", err, tc.want)
				}
				h.get(rNamespaces, "", "keep")
				if h.s.AppliedIndex() != 1 {
					t.Fatal("a failed restore moved the applied index")
				}
			})
		}
	}
}

// TestSnapshotIsPointInTime checks that Persist writes the state as of
// Snapshot, not as of Persist, while Apply goes on.
func TestSnapshotIsPointInTime(t *testing.T) {
	h := newHarness(t, Options{})
	h.mustCreate(newNamespace("default"))
	h.mustCreate(newPod("default", "a", "", nil))
	snap, err := h.s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	h.mustCreate(newPod("default", "b", "", nil))
	h.del(rPods, "default", "a", Preconditions{})
	var buf bytes.Buffer
	if err := snap.Persist(&buf); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	dst := New(Options{})
	restoreInto(t, dst, buf.Bytes(), 0)
	if dst.AppliedIndex() != 2 {
		t.Fatalf("index from stream %d, want 2", dst.AppliedIndex())
	}
	if _, _, err := dst.Get(rPods, "default", "a"); err != nil {
		t.Fatal("pod a missing from the snapshot")
	}
	if _, _, err := dst.Get(rPods, "default", "b"); err == nil {
		t.Fatal("pod b, created after Snapshot, is in it")
	}
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	h := newHarness(t, Options{Registerer: reg})
	h.mustCreate(newNamespace("default"))
	h.mustCreate(newPod("default", "a", "", nil))
	h.mustCreate(newPod("default", "b", "", nil))
	if _, err := h.s.Watch(ctxT(t), rPods, "", ListOptions{}, 0, false); err != nil {
		t.Fatal(err)
	}
	// A second store on the same registry shares the series.
	New(Options{Registerer: reg})

	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			key := f.GetName()
			for _, l := range m.GetLabel() {
				key += fmt.Sprintf("{%s=%s}", l.GetName(), l.GetValue())
			}
			got[key] = value(m)
		}
	}
	want := map[string]float64{
		"outpost_store_objects{resource=pods}":       2,
		"outpost_store_objects{resource=namespaces}": 1,
		"outpost_store_watchers":                     1,
		"outpost_store_apply_duration_seconds":       3,
		"outpost_store_watch_events_dropped_total":   0,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return -1
}

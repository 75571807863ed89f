package store

import (
	"bytes"
	"testing"
	"unsafe"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// keptJSON counts the entries of s that keep their JSON, and all entries.
func keptJSON(s *Store) (kept, all int) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, t := range s.tables {
		for _, names := range t.ns {
			for _, e := range names {
				all++
				if e.kept() != nil {
					kept++
				}
			}
		}
	}
	return kept, all
}

// An entry keeps its JSON only while its write's event is in the watch
// window, and a restored one keeps none (issue 16 item 3: the JSON was
// over half of the heap at 150,000 pods); every reader still gets the
// same bytes as from a store that keeps every encoding: Get, List, a list
// by node, a watch's initial objects, a snapshot, and the state hash.
func TestColdEntriesKeepNoJSONAndServeTheSameBytes(t *testing.T) {
	const window = 5
	log := commandLog(42, 600)
	hot := New(Options{WatchWindow: 1 << 20}) // every event stays: keeps all
	cold := New(Options{WatchWindow: window})
	applyLog(t, hot, log, 1)
	applyLog(t, cold, log, 1)
	last := uint64(len(log))

	kept, all := keptJSON(cold)
	if limit := window * len(api.Resources); kept > limit || all-kept < 20 {
		t.Fatalf("%d of %d entries keep their JSON; want at most %d (%d resources' windows of %d) and at least 20 without",
			kept, all, limit, len(api.Resources), window)
	}
	if k, a := keptJSON(hot); k != a {
		t.Fatalf("with every event in the window, %d of %d entries keep their JSON; want all", k, a)
	}

	sameState(t, hot, cold)
	for _, r := range api.Resources {
		items, _, err := cold.List(r, "", ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range items {
			checkRawIsEncoding(t, r.Plural, it.Raw, it.Object)
		}
		ch, err := cold.Watch(ctxT(t), r, "", ListOptions{}, 0, true)
		if err != nil {
			t.Fatal(err)
		}
		for i := range items {
			ev := next(t, ch)
			if ev.Type != Added || !bytes.Equal(ev.Raw, items[i].Raw) {
				t.Fatalf("%s: initial watch event %d is %s %s, want ADDED %s", r.Plural, i, ev.Type, ev.Raw, items[i].Raw)
			}
		}
	}
	for _, node := range []string{"n0", "n1", "n2", ""} {
		opts := ListOptions{Field: fieldSel(t, "spec.nodeName="+node)}
		a, _, err := hot.List(rPods, "", opts)
		if err != nil {
			t.Fatal(err)
		}
		b, _, err := cold.List(rPods, "", opts)
		if err != nil || len(a) != len(b) {
			t.Fatalf("node %q: %d pods and %d (%v)", node, len(a), len(b), err)
		}
		// ListItems, which the API's list replies are written from,
		// appends the same bytes.
		c, _, err := cold.ListItems(rPods, "", opts)
		if err != nil || c.Len() != len(a) {
			t.Fatalf("node %q: ListItems gave %d pods (%v), List %d", node, c.Len(), err, len(a))
		}
		for i := range a {
			if !bytes.Equal(a[i].Raw, b[i].Raw) {
				t.Fatalf("node %q pod %d:\n%s\n%s", node, i, a[i].Raw, b[i].Raw)
			}
			got, err := c.AppendJSON([]byte("x"), i)
			if err != nil || string(got) != "x"+string(a[i].Raw) || c.Object(i) != b[i].Object {
				t.Fatalf("node %q pod %d: ListItems appended %s (%v), want x%s", node, i, got, err, a[i].Raw)
			}
		}
	}
	hh, _ := hot.StateHash(last)
	hc, ok := cold.StateHash(last)
	if !ok || hh != hc || wholeHash(cold) != hc {
		t.Fatalf("state hash %x, and %x (%v) without the JSON, %x computed from what it serves", hh, hc, ok, wholeHash(cold))
	}
	snap := snapshotBytes(t, hot)
	if !bytes.Equal(snap, snapshotBytes(t, cold)) {
		t.Fatal("the snapshot of entries without their JSON differs")
	}

	restored := New(Options{})
	restoreInto(t, restored, snap, last)
	if k, a := keptJSON(restored); k != 0 || a != all {
		t.Fatalf("restored: %d of %d entries keep their JSON; want 0 of %d", k, a, all)
	}
	sameState(t, hot, restored)
	if h, _ := restored.StateHash(last); h != hh || wholeHash(restored) != hh {
		t.Fatalf("restored state hash %x, computed %x; want %x", h, wholeHash(restored), hh)
	}
	// Writes over entries without their JSON (a bind splices nothing, a
	// delete patches nothing) go on alike.
	more := commandLog(43, 300)
	applyLog(t, hot, more, last+1)
	applyLog(t, restored, more, last+1)
	sameState(t, hot, restored)
	end := last + uint64(len(more))
	if a, b := snapshotBytes(t, hot), snapshotBytes(t, restored); !bytes.Equal(a, b) {
		t.Fatal("snapshots differ after the same writes over a restored store")
	}
	if a, _ := hot.StateHash(end); a != wholeHash(restored) {
		t.Fatalf("state hash %x, restored store's %x", a, wholeHash(restored))
	}
}

// TestEntryIsSmall: every server holds an entry per object (300,000 at
// 150,000 pods and their events), so it stays in the 32-byte size class:
// the object, its hash part, and a pointer to its JSON while it keeps it.
func TestEntryIsSmall(t *testing.T) {
	if n := unsafe.Sizeof(entry{}); n > 32 {
		t.Fatalf("an entry is %d bytes; want at most 32", n)
	}
}

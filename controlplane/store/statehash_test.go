package store

import (
	"testing"
)

// wholeHash computes the state hash from scratch, from everything stored.
func wholeHash(s *Store) uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var sum uint64
	for _, t := range s.tables {
		for _, names := range t.ns {
			for _, e := range names {
				// From the JSON readers get, not the sums entries keep.
				raw, err := e.json()
				if err != nil {
					panic(err)
				}
				sum += hashJSON(t, raw)
			}
		}
	}
	return sum
}

// Servers that apply the same log report the same state hash at every
// index, also one restored from a snapshot half way; the hash kept as
// entries apply equals one computed from everything stored; a store that
// applied one different command reports another hash from there on
// (issue 9 item 4b).
func TestStateHash(t *testing.T) {
	log := commandLog(42, 600)
	a, b := New(Options{}), New(Options{WatchWindow: 7})
	applyLog(t, a, log, 1)
	applyLog(t, b, log, 1)
	last := uint64(len(log))
	for i := uint64(0); i <= last; i++ {
		ha, oka := a.StateHash(i)
		hb, okb := b.StateHash(i)
		if !oka || !okb || ha != hb {
			t.Fatalf("index %d: hashes %x (%v) and %x (%v), want equal", i, ha, oka, hb, okb)
		}
	}
	final, _ := a.StateHash(last)
	if w := wholeHash(a); final != w {
		t.Fatalf("the hash kept while applying is %x, computed from the stored objects %x", final, w)
	}
	if first, _ := a.StateHash(1); first == final {
		t.Fatal("the hash did not change over 600 commands")
	}

	half := uint64(len(log) / 2)
	c := New(Options{})
	applyLog(t, c, log[:half], 1)
	d := New(Options{})
	restoreInto(t, d, snapshotBytes(t, c), half)
	if h, ok := d.StateHash(half - 1); ok {
		t.Errorf("a store restored at %d answered for %d (%x): it cannot know", half, half-1, h)
	}
	applyLog(t, d, log[half:], half+1)
	for _, i := range []uint64{half, half + 1, last} {
		ha, _ := a.StateHash(i)
		hd, ok := d.StateHash(i)
		if !ok || ha != hd {
			t.Fatalf("restored store at %d: %x (%v), want %x", i, hd, ok, ha)
		}
	}

	// One command differs: a pod created with another label.
	e := New(Options{})
	changed := append([][]byte(nil), log...)
	for i, cmd := range changed {
		if cmd[0] != cmdCreate || i < 10 {
			continue
		}
		p := bigPod("a", "diverged", "")
		p.Labels = map[string]string{"x": "y"}
		var err error
		if changed[i], err = CreateCmd(p); err != nil {
			t.Fatal(err)
		}
		applyLog(t, e, changed, 1)
		at := uint64(i + 1)
		before, _ := e.StateHash(at - 1)
		want, _ := a.StateHash(at - 1)
		if before != want {
			t.Fatalf("index %d, before the different command: %x, want %x", at-1, before, want)
		}
		for _, j := range []uint64{at, last} {
			got, _ := e.StateHash(j)
			other, _ := a.StateHash(j)
			if got == other {
				t.Fatalf("index %d: a store that applied another command has the same hash %x", j, got)
			}
		}
		return
	}
	t.Fatal("no create command in the log")
}

// The log answers for the last hashLogSize entries and no older.
func TestStateHashLogWindow(t *testing.T) {
	var l hashLog
	l.reset(100, 7)
	for i := uint64(101); i <= 100+hashLogSize+10; i++ {
		l.record(i, i*3)
	}
	if _, ok := l.at(105); ok {
		t.Error("index 105 answered after the ring overwrote it")
	}
	oldest := uint64(100 + 11)
	if h, ok := l.at(oldest); !ok || h != oldest*3 {
		t.Errorf("oldest kept index %d: %d %v, want %d", oldest, h, ok, oldest*3)
	}
	top := uint64(100 + hashLogSize + 10)
	if h, ok := l.at(top + 5); !ok || h != top*3 {
		t.Errorf("an index past the last entry (raft entries the store does not see): %d %v, want %d", h, ok, top*3)
	}
}

package raftstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func openTestWAL(t testing.TB, dir string) *walStore {
	t.Helper()
	s, err := openWALStore(dir, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// smallSegments makes the WAL start a new segment after about n bytes.
func smallSegments(t *testing.T, n int64) {
	old := walSegmentBytes
	walSegmentBytes = n
	t.Cleanup(func() { walSegmentBytes = old })
}

func entries(lo, hi uint64) []*raft.Log {
	var logs []*raft.Log
	for i := lo; i <= hi; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 1 + i/50, Data: []byte(fmt.Sprint("cmd", i))})
	}
	return logs
}

// storeInFives stores entries 1 to last (a multiple of 5) five at a time.
func storeInFives(t *testing.T, s raft.LogStore, last uint64) {
	t.Helper()
	for i := uint64(1); i <= last; i += 5 {
		if err := s.StoreLogs(entries(i, i+4)); err != nil {
			t.Fatal(err)
		}
	}
}

// filledWAL opens a WAL of small segments (about 300 bytes) in a new
// directory and stores entries 1 to last in it, five at a time.
func filledWAL(t *testing.T, last uint64) (string, *walStore) {
	t.Helper()
	smallSegments(t, 300)
	dir := filepath.Join(t.TempDir(), "wal")
	s := openTestWAL(t, dir)
	storeInFives(t, s, last)
	return dir, s
}

// reopenTestWAL closes s and opens dir again.
func reopenTestWAL(t *testing.T, s *walStore, dir string) *walStore {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return openTestWAL(t, dir)
}

// checkLogFrom asserts that the log starts at or before atMost (entries a
// compaction hid come back after a reopen) and holds every entry from
// there to last; it returns the first index.
func checkLogFrom(t *testing.T, s raft.LogStore, atMost, last uint64) uint64 {
	t.Helper()
	first, _ := s.FirstIndex()
	if first > atMost {
		t.Fatalf("first index %d, want ≤ %d", first, atMost)
	}
	checkLog(t, s, first, last)
	return first
}

// holdRemovals makes each file removal of a prefix deletion say so on
// removing and wait until release is closed.
func holdRemovals(t *testing.T) (removing <-chan struct{}, release chan struct{}) {
	r := make(chan struct{}, 64)
	release = make(chan struct{})
	walBeforeRemove = func() {
		r <- struct{}{}
		<-release
	}
	t.Cleanup(func() { walBeforeRemove = nil })
	return r, release
}

// checkLog asserts the store's bounds and that every entry inside them
// reads back whole.
func checkLog(t *testing.T, s raft.LogStore, first, last uint64) {
	t.Helper()
	f, _ := s.FirstIndex()
	l, _ := s.LastIndex()
	if f != first || l != last {
		t.Fatalf("bounds %d-%d, want %d-%d", f, l, first, last)
	}
	for i := f; i <= l && l != 0; i++ {
		var got raft.Log
		if err := s.GetLog(i, &got); err != nil {
			t.Fatalf("GetLog(%d) inside %d-%d: %v", i, f, l, err)
		}
		if want := fmt.Sprint("cmd", i); string(got.Data) != want || got.Index != i {
			t.Fatalf("GetLog(%d) = %d %q, want %q", i, got.Index, got.Data, want)
		}
	}
	var got raft.Log
	if err := s.GetLog(last+1, &got); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("GetLog(%d) past the end: %v", last+1, err)
	}
}

func segmentCount(t *testing.T, dir string) int {
	t.Helper()
	names, err := segmentNames(dir)
	if err != nil {
		t.Fatal(err)
	}
	return len(names)
}

func TestWALStoreDeleteAndReopen(t *testing.T) {
	smallSegments(t, 400) // a few dozen entries per segment
	dir := filepath.Join(t.TempDir(), "wal")
	s := openTestWAL(t, dir)
	checkLog(t, s, 0, 0)
	all := entries(1, 200)
	for lo := 0; lo < len(all); lo += 7 {
		if err := s.StoreLogs(all[lo:min(lo+7, len(all))]); err != nil {
			t.Fatal(err)
		}
	}
	checkLog(t, s, 1, 200)
	if n := segmentCount(t, dir); n < 5 {
		t.Fatalf("%d segments, want several", n)
	}
	// A gap and a rewrite of an existing index are refused.
	if err := s.StoreLogs(entries(202, 202)); err == nil {
		t.Fatal("StoreLogs with a gap accepted")
	}
	if err := s.StoreLogs(entries(150, 150)); err == nil {
		t.Fatal("StoreLogs over existing entries accepted")
	}
	if err := s.DeleteRange(50, 60); err == nil {
		t.Fatal("DeleteRange inside the log accepted")
	}

	// Compaction from the front, conflict truncation from the back.
	segs := segmentCount(t, dir)
	if err := s.DeleteRange(1, 120); err != nil {
		t.Fatal(err)
	}
	if segmentCount(t, dir) >= segs {
		t.Fatalf("compaction removed no segment")
	}
	if err := s.DeleteRange(171, 200); err != nil {
		t.Fatal(err)
	}
	checkLog(t, s, 121, 170)
	if err := s.StoreLogs(entries(171, 180)); err != nil {
		t.Fatal(err)
	}
	checkLog(t, s, 121, 180)

	// After a reopen the log ends where it did; entries of a partly
	// compacted segment come back at the front, which raft accepts.
	s = reopenTestWAL(t, s, dir)
	first := checkLogFrom(t, s, 121, 180)

	// After a snapshot install raft deletes everything and starts over.
	if err := s.DeleteRange(first, 180); err != nil {
		t.Fatal(err)
	}
	checkLog(t, s, 0, 0)
	if n := segmentCount(t, dir); n != 0 {
		t.Fatalf("%d segments left after deleting all", n)
	}
	if err := s.StoreLogs(entries(5000, 5010)); err != nil {
		t.Fatal(err)
	}
	checkLog(t, s, 5000, 5010)
}

// A crash while a batch was written leaves a torn tail: reopening cuts it
// (it was never acknowledged) and appending goes on from the last whole
// entry. A bad record in an earlier segment is corruption, not a tail.
func TestWALTornTail(t *testing.T) {
	tails := map[string]func(size int64) (int64, []byte){
		"half a header":     func(int64) (int64, []byte) { return -1, []byte{9, 0, 0} },
		"short payload":     func(int64) (int64, []byte) { return -1, []byte{200, 0, 0, 0, 1, 2, 3, 4, 5} },
		"zeros":             func(int64) (int64, []byte) { return -1, make([]byte, 4096) },
		"bad checksum":      func(size int64) (int64, []byte) { return size - 3, []byte{'X'} },
		"cut inside record": func(size int64) (int64, []byte) { return size - 2, nil },
	}
	for name, tail := range tails {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "wal")
			s := openTestWAL(t, dir)
			if err := s.StoreLogs(entries(1, 10)); err != nil {
				t.Fatal(err)
			}
			// The records' end, which a spare's zeros may follow.
			end := s.segs[len(s.segs)-1].size
			_ = s.Close()
			names, _ := segmentNames(dir)
			path := filepath.Join(dir, names[len(names)-1])
			at, b := tail(end)
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			if at < 0 {
				_, err = f.WriteAt(b, end)
			} else if b == nil {
				err = f.Truncate(at)
			} else {
				_, err = f.WriteAt(b, at)
			}
			_ = f.Close()
			if err != nil {
				t.Fatal(err)
			}
			s = openTestWAL(t, dir)
			want := uint64(10)
			if at >= 0 {
				want = 9 // the last entry itself was damaged
			}
			checkLog(t, s, 1, want)
			if err := s.StoreLogs(entries(want+1, 20)); err != nil {
				t.Fatal(err)
			}
			_ = s.Close()
			checkLog(t, openTestWAL(t, dir), 1, 20)
		})
	}

	t.Run("earlier segment", func(t *testing.T) {
		smallSegments(t, 100)
		dir := filepath.Join(t.TempDir(), "wal")
		s := openTestWAL(t, dir)
		for i := uint64(1); i <= 30; i += 3 {
			if err := s.StoreLogs(entries(i, i+2)); err != nil {
				t.Fatal(err)
			}
		}
		_ = s.Close()
		names, _ := segmentNames(dir)
		if len(names) < 2 {
			t.Fatalf("%d segments, want several", len(names))
		}
		f, err := os.OpenFile(filepath.Join(dir, names[0]), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = f.WriteAt([]byte{'X'}, 12)
		_ = f.Close()
		if _, err := openWALStore(dir, false, nil); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("open with a damaged first segment: %v, want ErrCorrupt", err)
		}
	})
}

// Removing a compacted prefix's files is slow on some disks (an unlink of
// a segment took 3.8 ms with ext4's online discard): the log's writes and
// reads must not wait for it (issue 16 item 2: writes beside a snapshot
// took up to 25 ms while the leader's log was compacted).
func TestWALPrefixRemovalHoldsNoWrites(t *testing.T) {
	dir, s := filledWAL(t, 200)
	segs := segmentCount(t, dir)
	removing, release := holdRemovals(t)
	deleted := make(chan error, 1)
	go func() { deleted <- s.DeleteRange(1, 150) }()
	<-removing // the first file's removal is held
	wrote := make(chan error, 1)
	go func() {
		var l raft.Log
		err := s.GetLog(160, &l)
		if err == nil {
			err = s.StoreLogs(entries(201, 205))
		}
		wrote <- err
	}()
	var werr error
	waited := false
	select {
	case werr = <-wrote:
	case <-time.After(10 * time.Second):
		waited = true
	}
	close(release) // before failing: the held removal would hold Close too
	if waited {
		t.Fatal("a read and a write of the log waited for the removal of compacted segments")
	}
	if werr != nil {
		t.Fatal(werr)
	}
	if err := <-deleted; err != nil {
		t.Fatal(err)
	}
	walBeforeRemove = nil
	checkLog(t, s, 151, 205)
	if n := segmentCount(t, dir); n >= segs {
		t.Fatalf("%d segments after compaction, %d before", n, segs)
	}
	// Reopened, the log is whole from where compaction left it.
	checkLogFrom(t, reopenTestWAL(t, s, dir), 151, 205)
}

// A suffix deletion stopped after any segment it removed, as by a crash,
// leaves a contiguous log on disk, only shorter.
func TestWALSuffixDeleteCrashLeavesNoHole(t *testing.T) {
	for stopAfter := 1; stopAfter <= 3; stopAfter++ {
		t.Run(fmt.Sprint("crash after segment ", stopAfter), func(t *testing.T) {
			dir, s := filledWAL(t, 200)
			crash := errors.New("power cut")
			n := 0
			walAfterRemove = func() error {
				if n++; n == stopAfter {
					return crash
				}
				return nil
			}
			t.Cleanup(func() { walAfterRemove = nil })
			if err := s.DeleteRange(20, 200); !errors.Is(err, crash) {
				t.Fatalf("DeleteRange: %v, want the planted crash", err)
			}
			walAfterRemove = nil
			_ = s.Close()
			r := openTestWAL(t, dir)
			last, _ := r.LastIndex()
			if last >= 200 || last < 20 {
				t.Fatalf("last index %d after a crash in the deletion of 20-200", last)
			}
			checkLog(t, r, 1, last)
		})
	}
}

// A data directory of an earlier version keeps its log in raft.db: it is
// moved into the WAL once (the contiguous run that ends at the last entry)
// and the bbolt file stays the stable store.
func TestWALMigratesBoltLog(t *testing.T) {
	b, path := openTestStore(t)
	logs := append(entries(1, 10), entries(40, 120)...) // a gap below a snapshot
	if err := b.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	if err := b.SetUint64([]byte("CurrentTerm"), 7); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(filepath.Dir(path), "wal")
	// Leftovers of a move that crashed before its rename are ignored.
	if err := os.MkdirAll(dir+".tmp", 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir+".tmp", segmentName(1)), []byte("junk"), 0o600); err != nil {
		t.Fatal(err)
	}
	w, err := openWALStore(dir, false, b)
	if err != nil {
		t.Fatal(err)
	}
	checkLog(t, w, 40, 120)
	if f, _ := b.FirstIndex(); f != 0 {
		t.Fatalf("bbolt log still has entries from %d", f)
	}
	if v, _ := b.GetUint64([]byte("CurrentTerm")); v != 7 {
		t.Fatalf("stable store lost the term: %d", v)
	}
	_ = w.Close()
	// Reopening moves nothing again.
	w = openTestWAL(t, dir)
	checkLog(t, w, 40, 120)
}

const walCrashChildEnv = "RAFTSTORE_WAL_CRASH_CHILD_DIR"

// TestWALCrashChild is the child half of TestWALSurvivesKill: it stores
// batches and prints "ack N" after each StoreLogs returns.
func TestWALCrashChild(t *testing.T) {
	dir := os.Getenv(walCrashChildEnv)
	if dir == "" {
		t.Skip("only runs as the child of TestWALSurvivesKill")
	}
	walSegmentBytes = 8 << 10 // rotate during the run
	s, err := openWALStore(dir, false, nil)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	crashChildWrites(s)
}

// kill -9 while the WAL is written: every acknowledged entry is there after.
func TestWALSurvivesKill(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a child process")
	}
	dir := filepath.Join(t.TempDir(), "wal")
	acked := killAfterAcks(t, "TestWALCrashChild", walCrashChildEnv+"="+dir, 2000)
	s := openTestWAL(t, dir)
	last, _ := s.LastIndex()
	if last < acked {
		t.Fatalf("last index %d after kill, but %d were acknowledged", last, acked)
	}
	checkLog(t, s, 1, last)
	if segmentCount(t, dir) < 2 {
		t.Fatal("the run did not rotate segments")
	}
}

// BenchmarkWALStoreLogs64x1KiB is BenchmarkStoreLogs64x1KiB on the WAL:
// one write and one fdatasync per 64-entry batch.
func BenchmarkWALStoreLogs64x1KiB(b *testing.B) {
	s := openTestWAL(b, filepath.Join(b.TempDir(), "wal"))
	benchStoreLogs(b, s)
}

// copyDir copies the files of dir into a new directory: what a crash
// (kill -9) at this moment would leave on disk.
func copyDir(t *testing.T, dir string) string {
	t.Helper()
	to := filepath.Join(t.TempDir(), "wal")
	if err := os.MkdirAll(to, 0o700); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return to
}

// A crash at any step of a prefix's removal, in particular while a
// segment's file is cut down (shrink), leaves a log that opens whole from
// an index at or before the new first one (issue 16 item 2).
func TestWALPrefixRemovalCrashLeavesALog(t *testing.T) {
	oldStep := shrinkStep
	shrinkStep = 64 // cut the small segments in several steps
	t.Cleanup(func() { shrinkStep = oldStep })
	dir, s := filledWAL(t, 200)
	var crashes []string
	walBeforeRemove = func() { crashes = append(crashes, copyDir(t, dir)) }
	shrinkAfterCut = func() { crashes = append(crashes, copyDir(t, dir)) }
	t.Cleanup(func() { walBeforeRemove, shrinkAfterCut = nil, nil })
	if err := s.DeleteRange(1, 150); err != nil {
		t.Fatal(err)
	}
	walBeforeRemove, shrinkAfterCut = nil, nil
	crashes = append(crashes, copyDir(t, dir))
	if len(crashes) < 4 {
		t.Fatalf("only %d crash points: the removal cut no file in steps", len(crashes))
	}
	for i, c := range crashes {
		t.Run(fmt.Sprint("crash point ", i), func(t *testing.T) {
			r, err := openWALStore(c, false, nil)
			if err != nil {
				t.Fatalf("the log does not open: %v", err)
			}
			defer r.Close()
			checkLogFrom(t, r, 151, 200)
		})
	}
}

// Raft deletes the whole log after installing a snapshot and writes on
// from the snapshot's index: a crash before an earlier prefix's files
// were removed must not leave them beside the new log, a gap open refuses.
func TestWALPrefixRemovalThenResetLeavesNoGap(t *testing.T) {
	dir, s := filledWAL(t, 200)
	removing, release := holdRemovals(t)
	deleted := make(chan error, 1)
	go func() { deleted <- s.DeleteRange(1, 150) }()
	<-removing // the prefix's files are not removed yet
	err := s.DeleteRange(151, 200)
	if err == nil {
		err = s.StoreLogs(entries(1001, 1005))
	}
	crash := copyDir(t, dir)
	close(release)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-deleted; err != nil {
		t.Fatal(err)
	}
	walBeforeRemove = nil
	r, err := openWALStore(crash, false, nil)
	if err != nil {
		t.Fatalf("the log after a crash does not open: %v", err)
	}
	defer r.Close()
	checkLog(t, r, 1001, 1005)
}

// raft deletes the whole log, DeleteRange(FirstIndex, LastIndex), after
// installing a snapshot: entries hidden below the first index by an
// earlier compaction (a partly compacted segment) must go too, or the
// log keeps a last index below its first and refuses the entries after
// the snapshot.
func TestWALDeleteAllAfterCompaction(t *testing.T) {
	dir, s := filledWAL(t, 200)
	if err := s.DeleteRange(1, 151); err != nil {
		t.Fatal(err)
	}
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	if err := s.DeleteRange(first, last); err != nil {
		t.Fatal(err)
	}
	checkLog(t, s, 0, 0)
	if err := s.StoreLogs(entries(5000, 5010)); err != nil {
		t.Fatal(err)
	}
	checkLog(t, s, 5000, 5010)
	checkLog(t, reopenTestWAL(t, s, dir), 5000, 5010)
}

// Segments that do not follow each other are corruption: open refuses
// them with ErrCorrupt (it panicked making the message).
func TestWALGapIsCorrupt(t *testing.T) {
	dir, s := filledWAL(t, 100)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	names, err := segmentNames(dir)
	if err != nil || len(names) < 3 {
		t.Fatalf("segments %v (%v), want at least 3", names, err)
	}
	if err := os.Remove(filepath.Join(dir, names[1])); err != nil {
		t.Fatal(err)
	}
	if r, err := openWALStore(dir, false, nil); !errors.Is(err, ErrCorrupt) {
		if r != nil {
			_ = r.Close()
		}
		t.Fatalf("open with a gap between segments: %v, want ErrCorrupt", err)
	}
}

package raftstore

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func spareReady(s *walStore) bool {
	s.spare.mu.Lock()
	defer s.spare.mu.Unlock()
	return s.spare.ready != nil
}

// openWithSpare opens a new log whose segments roll after segBytes and
// waits until its first spare is ready.
func openWithSpare(t *testing.T, segBytes int64) (*walStore, string) {
	t.Helper()
	smallSegments(t, segBytes)
	dir := filepath.Join(t.TempDir(), "wal")
	s := openTestWAL(t, dir)
	waitFor(t, 10*time.Second, "a spare segment", func() bool { return spareReady(s) })
	return s, dir
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// A new segment is a spare made ahead: appends overwrite its zeros, so
// the file does not grow with them and an fdatasync has no size to commit
// (issue 16 item 1). Its unused rest survives a restart as the place the
// next appends go, and is no corruption in a segment before the last.
func TestWALSpareSegments(t *testing.T) {
	s, dir := openWithSpare(t, 4<<10)
	if err := s.StoreLogs(entries(1, 5)); err != nil {
		t.Fatal(err)
	}
	names, _ := segmentNames(dir)
	if len(names) != 1 {
		t.Fatalf("segments %v, want one", names)
	}
	first := filepath.Join(dir, names[0])
	if got := fileSize(t, first); got != 4<<10 {
		t.Fatalf("the first segment's file is %d bytes after 5 small entries, want the spare's 4096 (appends inside it)", got)
	}
	if s.segs[0].size >= 4<<10 {
		t.Fatalf("logical size %d, want the records' only", s.segs[0].size)
	}
	waitFor(t, 10*time.Second, "the next spare", func() bool { return spareReady(s) })
	// Fill the first segment, then roll into the second spare.
	next := uint64(6)
	for len(s.segs) < 2 {
		if err := s.StoreLogs(entries(next, next+9)); err != nil {
			t.Fatal(err)
		}
		next += 10
	}
	last := next - 1
	_ = s.Close()
	if _, err := os.Stat(filepath.Join(dir, spareName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the spare outlived Close: %v", err)
	}
	names, _ = segmentNames(dir)
	second := filepath.Join(dir, names[1])
	if got := fileSize(t, second); got != 4<<10 {
		t.Fatalf("the second segment's file is %d bytes, want the spare's 4096", got)
	}

	// Reopened, the last segment's zeros are kept for the appends. With
	// smaller segments now, it rolls before they are all overwritten:
	// a segment before the last with zeros at its end is no corruption.
	smallSegments(t, 1<<10)
	s = openTestWAL(t, dir)
	checkLog(t, s, 1, last)
	if got := fileSize(t, second); got != 4<<10 {
		t.Fatalf("open cut the last segment's unused zeros (%d bytes), want them kept for appends", got)
	}
	for len(s.segs) < 3 {
		if err := s.StoreLogs(entries(next, next+9)); err != nil {
			t.Fatal(err)
		}
		next += 10
	}
	last = next - 1
	if s.segs[1].size >= fileSize(t, second) {
		t.Fatalf("the second segment was filled to its end (%d bytes), want zeros left after it rolled", s.segs[1].size)
	}
	_ = s.Close()
	checkLog(t, openTestWAL(t, dir), 1, last)
}

// A torn record inside a spare's zeros is cut off at open, as one past a
// file's end is, so that no byte of it can follow a later record.
func TestWALTornTailInSpare(t *testing.T) {
	s, dir := openWithSpare(t, 8<<10)
	if err := s.StoreLogs(entries(1, 10)); err != nil {
		t.Fatal(err)
	}
	end := s.segs[0].size
	_ = s.Close()
	names, _ := segmentNames(dir)
	path := filepath.Join(dir, names[0])
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	// A header that promises 200 bytes, then half of them.
	_, err = f.WriteAt(append([]byte{200, 0, 0, 0, 1, 2, 3, 4}, make([]byte, 100)...), end)
	if err == nil {
		_, err = f.WriteAt([]byte{7, 7, 7}, end+50)
	}
	_ = f.Close()
	if err != nil {
		t.Fatal(err)
	}
	s = openTestWAL(t, dir)
	checkLog(t, s, 1, 10)
	if got := fileSize(t, path); got != end {
		t.Fatalf("segment file %d bytes after open, want it cut at the torn record (%d)", got, end)
	}
}

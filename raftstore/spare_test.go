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

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// fillTo stores entries from next on, ten at a time, until the log has
// segs segments and its last holds at least half a segment; it returns
// the next index.
func fillTo(t *testing.T, s *walStore, next uint64, segs int) uint64 {
	t.Helper()
	for len(s.segs) < segs || s.segs[len(s.segs)-1].size < walSegmentBytes/2 {
		if err := s.StoreLogs(entries(next, next+9)); err != nil {
			t.Fatal(err)
		}
		next += 10
	}
	return next
}

// A new segment is a spare made ahead: appends overwrite its zeros, so
// the file does not grow with them and an fdatasync has no size to commit
// (issue 16 item 1). Its unused rest survives a restart as the place the next
// appends go, and is no corruption in a segment before the last.
func TestWALSpareSegments(t *testing.T) {
	smallSegments(t, 4<<10)
	dir := filepath.Join(t.TempDir(), "wal")
	s := openTestWAL(t, dir)
	waitFor(t, 10*time.Second, "the first spare", func() bool { return spareReady(s) })
	if err := s.StoreLogs(entries(1, 5)); err != nil {
		t.Fatal(err)
	}
	first := filepath.Join(dir, segmentName(1))
	if got := fileSize(t, first); got != 4<<10 {
		t.Fatalf("the first segment's file is %d bytes after 5 small entries, want the spare's 4096 (appends inside it)", got)
	}
	next := fillTo(t, s, 6, 1)
	waitFor(t, 10*time.Second, "a spare segment", func() bool { return spareReady(s) })
	// Into the spare, then on until the next one is ready.
	next = fillTo(t, s, next, 2)
	names, _ := segmentNames(dir)
	second := filepath.Join(dir, names[1])
	if got := fileSize(t, second); got < 4<<10 {
		t.Fatalf("the second segment's file is %d bytes while it holds %d, want the spare's 4096 (appends inside it)", got, s.segs[1].size)
	}
	waitFor(t, 10*time.Second, "the next spare", func() bool { return spareReady(s) })
	if err := s.StoreLogs(entries(next, next+99)); err != nil { // past the second's end
		t.Fatal(err)
	}
	next += 100
	if err := s.StoreLogs(entries(next, next+2)); err != nil {
		t.Fatal(err)
	}
	next += 3
	last := next - 1
	_ = s.Close()
	if _, err := os.Stat(filepath.Join(dir, spareName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the spare outlived Close: %v", err)
	}
	names, _ = segmentNames(dir)
	third := filepath.Join(dir, names[2])
	if got := fileSize(t, third); got != 4<<10 {
		t.Fatalf("the third segment's file is %d bytes, want the spare's 4096", got)
	}

	// Reopened, the last segment's zeros are kept for the appends. With
	// smaller segments now, it rolls before they are all overwritten:
	// a segment before the last with zeros at its end is no corruption.
	smallSegments(t, 1<<10)
	s = openTestWAL(t, dir)
	checkLog(t, s, 1, last)
	if got := fileSize(t, third); got != 4<<10 {
		t.Fatalf("open cut the last segment's unused zeros (%d bytes), want them kept for appends", got)
	}
	next = fillTo(t, s, next, 4)
	last = next - 1
	if s.segs[2].size >= fileSize(t, third) {
		t.Fatalf("the third segment was filled to its end (%d bytes), want zeros left after it rolled", s.segs[2].size)
	}
	_ = s.Close()
	checkLog(t, openTestWAL(t, dir), 1, last)
}

// A torn record inside a spare's zeros is cut off at open, as one past a
// file's end is, so that no byte of it can follow a later record: also
// when its first bytes, the header, were lost and later ones written.
func TestWALTornTailInSpare(t *testing.T) {
	for name, torn := range map[string][]byte{
		"half a record":  append([]byte{200, 0, 0, 0, 1, 2, 3, 4}, make([]byte, 100)...),
		"header lost":    append(make([]byte, 600), 7, 7, 7),
		"one stray byte": append(make([]byte, 3000), 1),
	} {
		t.Run(name, func(t *testing.T) {
			smallSegments(t, 8<<10)
			dir := filepath.Join(t.TempDir(), "wal")
			s := openTestWAL(t, dir)
			next := fillTo(t, s, 1, 1)
			waitFor(t, 10*time.Second, "a spare segment", func() bool { return spareReady(s) })
			next = fillTo(t, s, next, 2)
			last := next - 1
			end := s.segs[1].size
			_ = s.Close()
			names, _ := segmentNames(dir)
			path := filepath.Join(dir, names[1])
			if fileSize(t, path) <= end+int64(len(torn)) {
				t.Fatalf("the segment is not a spare with room after its records (%d bytes, records end at %d)", fileSize(t, path), end)
			}
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			_, err = f.WriteAt(torn, end)
			_ = f.Close()
			if err != nil {
				t.Fatal(err)
			}
			s = openTestWAL(t, dir)
			checkLog(t, s, 1, last)
			if got := fileSize(t, path); got != end {
				t.Fatalf("segment file %d bytes after open, want it cut at the torn record (%d)", got, end)
			}
		})
	}
}

// A segment with no entry before the last one lost what it held: open
// refuses the log and leaves the file for whoever looks.
func TestWALEmptySegmentBeforeLastIsCorrupt(t *testing.T) {
	smallSegments(t, 1<<10)
	dir := filepath.Join(t.TempDir(), "wal")
	s := openTestWAL(t, dir)
	fillTo(t, s, 1, 3)
	_ = s.Close()
	names, _ := segmentNames(dir)
	path := filepath.Join(dir, names[1])
	if err := os.WriteFile(path, make([]byte, fileSize(t, path)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := openWALStore(dir, false, nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("open with a zeroed middle segment: %v, want ErrCorrupt", err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the zeroed segment was removed: %v", err)
	}
}

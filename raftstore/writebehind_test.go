package raftstore

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"golang.org/x/sys/unix"
)

// TestSnapshotWriteBehind writes a 20 MiB snapshot through raft's real
// file store and checks that its pages were sent to the disk chunk by
// chunk while it was written, not all at the final fsync, where they
// would stall the raft log's fdatasync (issue 16 item 2); and that the
// snapshot reads back whole.
func TestSnapshotWriteBehind(t *testing.T) {
	type call struct {
		off, n int64
		flags  int
		err    error
	}
	var mu sync.Mutex
	var calls []call
	real := syncFileRange
	syncFileRange = func(fd int, off, n int64, flags int) error {
		err := real(fd, off, n, flags)
		mu.Lock()
		calls = append(calls, call{off, n, flags, err})
		mu.Unlock()
		return err
	}
	t.Cleanup(func() { syncFileRange = real })

	const size = 20 << 20
	files, _, err := writeSnapshot(t, size)
	if err != nil {
		t.Fatal(err)
	}

	mu.Lock()
	defer mu.Unlock()
	// n chunks with two chunks of lag: writeback started for chunks
	// 0..n-2 and waited for 0..n-3; the rest is the final fsync's.
	n := int64(size / writeBehindChunk)
	var wantStarted, wantWaited []int64
	for i := range n - 1 {
		wantStarted = append(wantStarted, i)
		if i < n-2 {
			wantWaited = append(wantWaited, i)
		}
	}
	var started, waited []int64
	for _, c := range calls {
		if c.err != nil {
			t.Errorf("sync_file_range(%d, %d, %#x): %v", c.off, c.n, c.flags, c.err)
		}
		if c.n != writeBehindChunk {
			t.Errorf("range of %d bytes, want %d", c.n, writeBehindChunk)
		}
		if c.flags&unix.SYNC_FILE_RANGE_WAIT_AFTER != 0 {
			waited = append(waited, c.off/writeBehindChunk)
		} else {
			started = append(started, c.off/writeBehindChunk)
		}
	}
	if !slices.Equal(started, wantStarted) {
		t.Errorf("writeback started for chunks %v, want %v", started, wantStarted)
	}
	if !slices.Equal(waited, wantWaited) {
		t.Errorf("writeback waited for chunks %v, want %v", waited, wantWaited)
	}

	metas, err := files.List()
	if err != nil || len(metas) != 1 {
		t.Fatalf("snapshots %v, %v; want one", metas, err)
	}
	_, rc, err := files.Open(metas[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got, err := io.Copy(io.Discard, rc)
	if err != nil || got != size {
		t.Errorf("read back %d bytes, %v; want %d", got, err, size)
	}
}

// A wait for written pages that fails keeps the snapshot from being
// kept: on kernels before 4.13 the failed wait clears the file's error,
// and the final fsync would succeed over pages never written.
func TestSnapshotWriteBehindFailureDropsSnapshot(t *testing.T) {
	real := syncFileRange
	syncFileRange = func(fd int, off, n int64, flags int) error {
		if flags&unix.SYNC_FILE_RANGE_WAIT_AFTER != 0 {
			return unix.EIO
		}
		return real(fd, off, n, flags)
	}
	t.Cleanup(func() { syncFileRange = real })

	files, store, err := writeSnapshot(t, 16<<20)
	if !errors.Is(err, unix.EIO) {
		t.Fatalf("Close: %v, want the writeback's EIO", err)
	}
	if metas, err := files.List(); err != nil || len(metas) != 0 {
		t.Errorf("snapshots after a failed writeback: %v, %v; want none", metas, err)
	}
	if store.last.Load() != 0 {
		t.Errorf("last snapshot index %d, want 0", store.last.Load())
	}
}

// testSnapshotStore opens the snapshot store in a new directory, as the
// node opens it.
func testSnapshotStore(t *testing.T) *snapshotStore {
	t.Helper()
	store, err := openSnapshotStore(t.TempDir(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return store
}

// writeSnapshot writes size bytes through a sink of raft's real file
// store, wrapped as the node wraps it, and returns the store, the
// wrapper and what the sink's Close said.
func writeSnapshot(t *testing.T, size int) (raft.SnapshotStore, *snapshotStore, error) {
	t.Helper()
	store := testSnapshotStore(t)
	files := store.SnapshotStore
	sink, err := store.Create(raft.SnapshotVersionMax, 10, 1, raft.Configuration{}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	block := bytes.Repeat([]byte("outpost!"), 8<<10) // 64 KiB
	for written := 0; written < size; written += len(block) {
		if _, err := sink.Write(block); err != nil {
			t.Fatal(err)
		}
	}
	return files, store, sink.Close()
}

// The snapshot store keeps the newest snapshotsKept snapshots and removes
// older ones itself, each file cut down first (shrink) unless it is open:
// one being sent to a follower when it is removed is still read whole.
func TestSnapshotStoreKeepsTwoAndReadersReadWhole(t *testing.T) {
	store := testSnapshotStore(t)
	content := func(index uint64) []byte {
		return bytes.Repeat([]byte{byte(index)}, 3*shrinkStep+123)
	}
	take := func(index uint64) string {
		t.Helper()
		sink, err := store.Create(raft.SnapshotVersionMax, index, 1, raft.Configuration{}, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sink.Write(content(index)); err != nil {
			t.Fatal(err)
		}
		if err := sink.Close(); err != nil {
			t.Fatal(err)
		}
		return sink.ID()
	}
	first := take(10)
	_, open, err := store.Open(first)
	if err != nil {
		t.Fatal(err)
	}
	take(20)
	take(30) // removes the first, which is open
	got, err := io.ReadAll(open)
	if err != nil {
		t.Fatal(err)
	}
	if err := open.Close(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, content(10)) {
		t.Fatalf("the open snapshot read %d bytes after its removal, want its %d", len(got), len(content(10)))
	}
	take(40) // removes the second, which is not open
	metas, err := store.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(metas) != snapshotsKept || metas[0].Index != 40 || metas[1].Index != 30 {
		t.Fatalf("snapshots kept: %v, want 40 and 30", metas)
	}
	left, err := filepath.Glob(filepath.Join(store.dir, "*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != snapshotsKept {
		t.Fatalf("%d snapshot directories left, want %d: %v", len(left), snapshotsKept, left)
	}
	if len(store.reading) != 0 {
		t.Fatalf("snapshots still noted open: %v", store.reading)
	}
}

// Cutting an old snapshot down takes many steps (a whole state, 1 MiB at
// a time): opening the snapshots kept must not wait for it, and the one
// being cut is not opened.
func TestSnapshotStoreOpensWhileReapCuts(t *testing.T) {
	store := testSnapshotStore(t)
	take := func(index uint64) string {
		t.Helper()
		sink, err := store.Create(raft.SnapshotVersionMax, index, 1, raft.Configuration{}, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sink.Write(bytes.Repeat([]byte{1}, 3*shrinkStep)); err != nil {
			t.Fatal(err)
		}
		if err := sink.Close(); err != nil {
			t.Fatal(err)
		}
		return sink.ID()
	}
	first := take(10)
	second := take(20)
	cutting, release := make(chan struct{}, 8), make(chan struct{})
	shrinkAfterCut = func() {
		cutting <- struct{}{}
		<-release
	}
	t.Cleanup(func() { shrinkAfterCut = nil })
	reaped := make(chan struct{})
	go func() {
		defer close(reaped)
		take(30) // its Close reaps the first
	}()
	<-cutting
	opened := make(chan error, 1)
	go func() {
		_, rc, err := store.Open(second)
		if err == nil {
			err = rc.Close()
		}
		opened <- err
	}()
	var err error
	select {
	case err = <-opened:
	case <-time.After(10 * time.Second):
		close(release) // before failing: the held cut would hold the cleanup
		<-reaped
		t.Fatal("opening a kept snapshot waited for an old one's cut")
	}
	_, _, ferr := store.Open(first)
	close(release)
	<-reaped
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(ferr, os.ErrNotExist) {
		t.Fatalf("open of the snapshot being cut: %v, want not found", ferr)
	}
}

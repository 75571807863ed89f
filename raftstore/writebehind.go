package raftstore

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// writeBehindChunk is how much of a snapshot may be dirty in the page
// cache before its writer waits for the disk. What is in flight is what
// a raft log fdatasync may wait behind: writing 150 MiB beside a 4 KiB
// fdatasync loop on this machine's disk, its worst stall was 58–72 ms
// with no write-behind, 4–10 ms with 4 MiB chunks and 1.5–3.7 ms with
// 1 MiB ones (p99 1.9 against 1.0–1.5 ms), the file written as fast.
const writeBehindChunk = 1 << 20

// writeBehind sends a file being written to the disk as it grows: a
// snapshot, and a spare log segment's zeros (spare.go) (issue 16 item 2). Left to the final fsync, hundreds of MiB of
// dirty pages reach the disk at once, and the raft log's fdatasync, on
// the same disk (and on ext4 the same journal), waits behind them: writes
// stalled for tens of ms whenever a snapshot was taken. Every chunk it
// starts the writeback of a chunk and waits for the one before, two
// chunks behind what was written (the sink buffers), so about three
// chunks are dirty or in flight and the writer goes at the disk's pace.
//
// It works beside raft's file sink through a second descriptor of the
// same file: sync_file_range acts on the file's pages, whichever
// descriptor names it. If the file cannot be opened (raft named it
// otherwise), it does nothing and the final fsync does all.
type writeBehind struct {
	f       *os.File
	path    string
	written int64 // bytes handed to the sink
	started int64 // bytes whose writeback was started
	off     bool  // the file could not be opened
	// err is the first failure of a wait for written pages: on kernels
	// before 4.13 the wait clears the file's error flag, and the sink's
	// final fsync would then succeed over pages that were never written.
	err error
}

// syncFileRange is unix.SyncFileRange; tests record the calls.
var syncFileRange = unix.SyncFileRange

// wrote counts n more bytes written; the sink's own buffer may hold some
// of them still, which sync_file_range then passes over.
func (w *writeBehind) wrote(n int) {
	if w.off {
		return
	}
	w.written += int64(n)
	for w.written-w.started >= 2*writeBehindChunk {
		if w.f == nil {
			f, err := os.Open(w.path)
			if err != nil {
				w.off = true
				return
			}
			w.f = f
		}
		fd := int(w.f.Fd())
		// Wait for the chunk before the last one started, then start the
		// next. A failed start only leaves more to the final fsync; a
		// failed wait is kept for close.
		if w.started >= writeBehindChunk {
			err := syncFileRange(fd, w.started-writeBehindChunk, writeBehindChunk,
				unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER)
			if err != nil && w.err == nil {
				w.err = fmt.Errorf("snapshot writeback: %w", err)
			}
		}
		_ = syncFileRange(fd, w.started, writeBehindChunk, unix.SYNC_FILE_RANGE_WRITE)
		w.started += writeBehindChunk
	}
}

// close lets the file go and returns the first failed wait, if any.
func (w *writeBehind) close() error {
	if w.f != nil {
		w.f.Close()
		w.f = nil
	}
	return w.err
}

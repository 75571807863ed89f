package raftstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
)

// spareName is the file a spare segment is made in; it does not end in
// .wal, so open never reads it as a segment (it removes it).
const spareName = "spare.wal.tmp"

// spareSegment is the segment file made ahead of need: walSegmentBytes of
// zeros, synced, so that the appends that fill it change no metadata.
// On this project's test machine (ext4) an fdatasync after a 1.4 KiB
// append took 154–158 µs at p50 past the file's end and 102–116 µs inside
// written zeros; with three writers at once 273–289 against 174–176 µs.
type spareSegment struct {
	mu     sync.Mutex
	making bool     // a goroutine is making one
	ready  *os.File // made and synced, not yet taken
	closed bool
	done   sync.WaitGroup
}

// spareZeros is what a spare is written from, a write-behind chunk at a
// time. Never written to, its pages are the kernel's shared zero page
// when write(2) reads them, so it costs no memory, and no garbage per
// spare.
var spareZeros [writeBehindChunk]byte

// makeSpare starts making a spare unless one is ready or being made.
func (s *walStore) makeSpare() {
	if !s.spares {
		return
	}
	sp := &s.spare
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.closed || sp.making || sp.ready != nil {
		return
	}
	sp.making = true
	size := walSegmentBytes
	sp.done.Add(1)
	go func() {
		defer sp.done.Done()
		f, err := s.fillSpare(size, sp.isClosed)
		sp.mu.Lock()
		defer sp.mu.Unlock()
		// A spare that failed leaves the log to plain segments, as
		// before spares; the next roll tries again.
		sp.making = false
		if err != nil {
			return
		}
		if sp.closed {
			_ = f.Close()
			_ = os.Remove(f.Name())
			return
		}
		sp.ready = f
	}()
}

func (sp *spareSegment) isClosed() bool {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.closed
}

// errSpareDropped ends a spare being made when the log is closed.
var errSpareDropped = errors.New("the log was closed")

// fillSpare writes size bytes of zeros to a new spare file and syncs it,
// giving up with errSpareDropped once closed says so. It is written
// behind as a snapshot is (writeBehind), so that the log's fdatasync
// never queues behind megabytes of zeros.
func (s *walStore) fillSpare(size int64, closed func() bool) (*os.File, error) {
	path := filepath.Join(s.dir, spareName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("spare log segment: %w", err)
	}
	fail := func(err error) (*os.File, error) {
		_ = f.Close()
		_ = os.Remove(path)
		return nil, fmt.Errorf("spare log segment: %w", err)
	}
	wb := &writeBehind{path: path, off: s.noSync}
	for off := int64(0); off < size; off += writeBehindChunk {
		if closed() {
			wb.close()
			return fail(errSpareDropped)
		}
		n := min(writeBehindChunk, size-off)
		if _, err := f.WriteAt(spareZeros[:n], off); err != nil {
			wb.close()
			return fail(err)
		}
		wb.wrote(int(n))
	}
	if err := errors.Join(wb.close(), s.sync(f)); err != nil {
		return fail(err)
	}
	return f, nil
}

// takeSpare makes the ready spare the segment that starts at base. With
// none ready, or one that cannot be put in place, it returns nil and the
// caller makes a plain segment, as before spares.
func (s *walStore) takeSpare(base uint64) *walSegment {
	if !s.spares {
		return nil
	}
	sp := &s.spare
	sp.mu.Lock()
	f := sp.ready
	sp.ready = nil
	sp.mu.Unlock()
	// The next one is made while this one fills: at this machine's disk
	// speed it is ready long before the log rolls again.
	defer s.makeSpare()
	if f == nil {
		return nil
	}
	spare := f.Name()
	_ = f.Close()
	path := filepath.Join(s.dir, segmentName(base))
	// Never over a file of that name, as newSegment's O_EXCL.
	if err := unix.Renameat2(unix.AT_FDCWD, spare, unix.AT_FDCWD, path, unix.RENAME_NOREPLACE); err != nil {
		_ = os.Remove(spare)
		return nil
	}
	// Opened again under its name: detachPrefix renames by the file's
	// name.
	seg, err := os.OpenFile(path, os.O_RDWR, 0o600)
	if err == nil {
		if err = s.syncDir(); err != nil {
			_ = seg.Close()
		}
	}
	if err != nil {
		// All zeros, so no part of the log even if the removal fails
		// (open drops an empty last segment); newSegment then refuses
		// the name and the write fails, as without spares.
		_ = os.Remove(path)
		return nil
	}
	return &walSegment{f: seg, base: base}
}

// dropSpare stops making spares, waits for one being made and removes it.
func (s *walStore) dropSpare() {
	sp := &s.spare
	sp.mu.Lock()
	sp.closed = true
	sp.mu.Unlock()
	sp.done.Wait()
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.ready != nil {
		_ = sp.ready.Close()
		_ = os.Remove(sp.ready.Name())
		sp.ready = nil
	}
}

// allZero reports whether b holds only zero bytes.
func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

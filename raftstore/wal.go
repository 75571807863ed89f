package raftstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/hashicorp/raft"
	"github.com/outpost-edge/outpost/internal/fsync"
	bolt "go.etcd.io/bbolt"
	"golang.org/x/sys/unix"
)

// walStore is raft's LogStore as append-only segment files in raft/wal:
// a StoreLogs batch is one write and one fdatasync, where a bbolt commit
// costs two (pages, then meta). raft persists on the leader before it
// replicates and on each follower before it answers, so the log's sync
// sits twice on every write's path.
//
// A segment is named by the index of its first entry (20 digits, so names
// sort as indexes) and holds records back to back:
//
//	uint32 len(payload) | uint32 CRC-32C(payload) | payload (encodeLog)
//
// Crash safety: StoreLogs returns only after the fdatasync, and raft
// acknowledges nothing before that, so every acknowledged entry is on disk.
// A crash part-way through a batch leaves a torn tail in the last segment
// (a short record, a bad checksum, or garbage where the file grew): open
// truncates the last segment at its first invalid record, which drops only
// entries that were never acknowledged. Zeros and nothing else after the
// last record are a spare's unused rest (below), kept. Any other invalid
// record in an earlier segment, or an earlier segment with no record, is
// corruption, refused with ErrCorrupt. New segments and removals are
// followed by an fsync of the directory.
//
// A new segment is, when one is ready, a spare: a file of zeros made
// ahead in the background (spare.go), so that appends overwrite blocks the
// filesystem has already allocated and an fdatasync flushes data alone.
// Appending past a file's end makes every fdatasync commit the size, and
// on ext4 that is a journal commit, which the three servers of a machine
// also wait on each other for.
//
// The store is raft.MonotonicLogStore: entries are contiguous, so raft
// deletes the whole log after installing a snapshot instead of leaving a gap.
type walStore struct {
	dir    string
	noSync bool

	// wmu serialises writers (StoreLogs, DeleteRange); readers take only mu.
	wmu sync.Mutex
	buf []byte

	// mu guards segs, first and last. GetLog holds it shared while it reads,
	// so DeleteRange cannot close a file under it.
	mu    sync.RWMutex
	segs  []*walSegment
	first uint64 // 0: empty; may be above segs[0].base after a prefix deletion
	last  uint64

	// spares is off for a store that makes no spare segments (a bbolt
	// log's move); spare holds the one being made or ready (spare.go).
	spares bool
	spare  spareSegment
}

type walSegment struct {
	f    *os.File
	base uint64  // index of the first entry
	offs []int64 // offs[i]: offset of entry base+i
	size int64   // end of the last valid record
}

func (s *walSegment) lastIndex() uint64 { return s.base + uint64(len(s.offs)) - 1 }

// walSegmentBytes is the size after which a new segment is started;
// compaction removes whole segments, so this bounds the log kept beyond
// TrailingLogs.
var walSegmentBytes int64 = 16 << 20 // a variable so that tests can rotate sooner

const walHeader = 8

var (
	castagnoli                        = crc32.MakeTable(crc32.Castagnoli)
	_          raft.LogStore          = (*walStore)(nil)
	_          raft.MonotonicLogStore = (*walStore)(nil)
)

// openWALStore opens the log in dir, creating it if needed. When dir has no
// log yet and legacy (the bbolt file of earlier versions) holds entries,
// they are moved over first.
func openWALStore(dir string, noSync bool, legacy *boltStore) (*walStore, error) {
	if legacy != nil {
		if err := migrateBoltLog(dir, legacy); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	s := &walStore{dir: dir, noSync: noSync, spares: true}
	removeGoneSegments(dir)
	_ = os.Remove(filepath.Join(dir, spareName)) // one a crash left half made
	names, err := segmentNames(dir)
	if err != nil {
		return nil, err
	}
	for i, name := range names {
		seg, err := s.openSegment(name, i == len(names)-1)
		if err != nil {
			s.closeFiles()
			return nil, err
		}
		if len(seg.offs) == 0 {
			if i != len(names)-1 {
				// Only the last segment can be empty (created, crash
				// before its first sync). One before it lost what it
				// held: kept for whoever looks, and refused.
				_ = seg.f.Close()
				s.closeFiles()
				return nil, fmt.Errorf("log segment %s: %w: holds no entry but is not the last", name, ErrCorrupt)
			}
			// Dropped rather than kept as a hole-less nothing.
			_ = seg.f.Close()
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				s.closeFiles()
				return nil, fmt.Errorf("remove empty segment: %w", err)
			}
			continue
		}
		if n := len(s.segs); n > 0 && s.segs[n-1].lastIndex()+1 != seg.base {
			// The message is made before closeFiles empties segs.
			err := fmt.Errorf("log segment %s: %w: starts at %d, the one before ends at %d", name, ErrCorrupt, seg.base, s.segs[n-1].lastIndex())
			_ = seg.f.Close()
			s.closeFiles()
			return nil, err
		}
		s.segs = append(s.segs, seg)
	}
	if len(s.segs) > 0 {
		s.first, s.last = s.segs[0].base, s.segs[len(s.segs)-1].lastIndex()
	}
	// Made at once, so that a new log's first segment is a spare too
	// when it is ready before raft's first write.
	s.makeSpare()
	return s, nil
}

func segmentName(base uint64) string { return fmt.Sprintf("%020d.wal", base) }

func segmentNames(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", dir, err)
	}
	var names []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".wal") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names, nil
}

// openSegment reads a segment's records; zeros alone after the last are
// a spare's unused rest, kept; in the last segment any other invalid
// record is a torn write and the file is cut there.
func (s *walStore) openSegment(name string, last bool) (*walSegment, error) {
	base, err := strconv.ParseUint(strings.TrimSuffix(name, ".wal"), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("log segment %s: %w: bad name", name, ErrCorrupt)
	}
	path := filepath.Join(s.dir, name)
	f, err := os.OpenFile(path, os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open log segment: %w", err)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("read log segment %s: %w", name, err)
	}
	seg := &walSegment{f: f, base: base}
	var off int64
	var l raft.Log
	for off < int64(len(data)) {
		payload, err := recordAt(data, off)
		if err == nil {
			err = decodeLog(payload, &l)
		}
		if err == nil && l.Index != base+uint64(len(seg.offs)) {
			err = fmt.Errorf("%w: entry %d where %d belongs", ErrCorrupt, l.Index, base+uint64(len(seg.offs)))
		}
		if err != nil {
			if allZero(data[off:]) {
				// The unused rest of a spare (spare.go): in the last
				// segment appends go on overwriting it. Before the last,
				// a lost entry shows as a gap to the next segment.
				break
			}
			if !last {
				_ = f.Close()
				return nil, fmt.Errorf("log segment %s at %d: %w", name, off, err)
			}
			// A torn tail: nothing after it was acknowledged. It is cut
			// off, not overwritten, so that no byte of it can follow a
			// later record.
			if err := f.Truncate(off); err != nil {
				_ = f.Close()
				return nil, fmt.Errorf("cut torn tail of %s: %w", name, err)
			}
			if err := s.sync(f); err != nil {
				_ = f.Close()
				return nil, err
			}
			break
		}
		seg.offs = append(seg.offs, off)
		off += walHeader + int64(len(payload))
	}
	seg.size = off
	return seg, nil
}

var errBadRecord = errors.New("bad record")

// recordAt returns the payload of the record at off, checking its length
// and checksum.
func recordAt(data []byte, off int64) ([]byte, error) {
	rest := data[off:]
	if len(rest) < walHeader {
		return nil, fmt.Errorf("%w: %w: short header", ErrCorrupt, errBadRecord)
	}
	n := binary.LittleEndian.Uint32(rest)
	if n == 0 || uint64(n) > uint64(len(rest)-walHeader) {
		return nil, fmt.Errorf("%w: %w: length %d", ErrCorrupt, errBadRecord, n)
	}
	payload := rest[walHeader : walHeader+int(n)]
	if crc32.Checksum(payload, castagnoli) != binary.LittleEndian.Uint32(rest[4:]) {
		return nil, fmt.Errorf("%w: %w: checksum", ErrCorrupt, errBadRecord)
	}
	return payload, nil
}

func (s *walStore) sync(f *os.File) error {
	if s.noSync {
		return nil
	}
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		return fmt.Errorf("fdatasync %s: %w", f.Name(), err)
	}
	return nil
}

// syncDir makes file creations and removals in the log's directory durable.
func (s *walStore) syncDir() error {
	if s.noSync {
		return nil
	}
	return fsync.Dir(s.dir)
}

func (s *walStore) closeFiles() {
	closeSegments(s.segs)
	s.segs = nil
}

// Close closes the segment files and drops the spare.
func (s *walStore) Close() error {
	s.dropSpare()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeFiles()
	s.first, s.last = 0, 0
	return nil
}

// IsMonotonic implements raft.MonotonicLogStore.
func (s *walStore) IsMonotonic() bool { return true }

// FirstIndex implements raft.LogStore.
func (s *walStore) FirstIndex() (uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.first, nil
}

// LastIndex implements raft.LogStore.
func (s *walStore) LastIndex() (uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.last, nil
}

// GetLog implements raft.LogStore.
func (s *walStore) GetLog(index uint64, l *raft.Log) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.first == 0 || index < s.first || index > s.last {
		return raft.ErrLogNotFound
	}
	i := sort.Search(len(s.segs), func(i int) bool { return s.segs[i].lastIndex() >= index })
	seg := s.segs[i]
	k := index - seg.base
	off, end := seg.offs[k], seg.size
	if k+1 < uint64(len(seg.offs)) {
		end = seg.offs[k+1]
	}
	buf := make([]byte, end-off)
	if _, err := seg.f.ReadAt(buf, off); err != nil {
		return fmt.Errorf("log %d: read: %w", index, err)
	}
	payload, err := recordAt(buf, 0)
	if err == nil {
		err = decodeLog(payload, l)
	}
	if err != nil {
		return fmt.Errorf("log %d: %w", index, err)
	}
	if l.Index != index {
		return fmt.Errorf("log %d: %w: entry says index %d", index, ErrCorrupt, l.Index)
	}
	return nil
}

// StoreLog implements raft.LogStore.
func (s *walStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

// StoreLogs implements raft.LogStore: one write and one fdatasync for the
// whole batch, which must continue the log without a gap.
func (s *walStore) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.RLock()
	last, nsegs := s.last, len(s.segs)
	var tail *walSegment
	if nsegs > 0 {
		tail = s.segs[nsegs-1]
	}
	s.mu.RUnlock()
	lo, hi := logs[0].Index, logs[len(logs)-1].Index
	if last != 0 && lo != last+1 {
		return fmt.Errorf("store logs %d-%d: not contiguous with last index %d", lo, hi, last)
	}
	if tail != nil && len(tail.offs) == 0 && tail.base != lo {
		return fmt.Errorf("store logs %d-%d: the empty segment at %d was made for another batch", lo, hi, tail.base)
	}
	size := 0
	for i, l := range logs {
		if l.Index != lo+uint64(i) {
			return fmt.Errorf("store logs %d-%d: entry %d out of order", lo, hi, l.Index)
		}
		size += walHeader + encodedLogSize(l)
	}
	if tail == nil || tail.size >= walSegmentBytes {
		seg := s.takeSpare(lo)
		var err error
		if seg == nil {
			seg, err = s.newSegment(lo)
		}
		if err != nil {
			return fmt.Errorf("store logs %d-%d: %w", lo, hi, err)
		}
		s.mu.Lock()
		s.segs = append(s.segs, seg)
		s.mu.Unlock()
		tail = seg
	}
	if cap(s.buf) < size {
		s.buf = make([]byte, size)
	}
	buf := s.buf[:size]
	offs := make([]int64, len(logs))
	pos := 0
	for i, l := range logs {
		offs[i] = tail.size + int64(pos)
		n := encodedLogSize(l)
		payload := buf[pos+walHeader : pos+walHeader+n]
		encodeLog(payload, l)
		binary.LittleEndian.PutUint32(buf[pos:], uint32(n))
		binary.LittleEndian.PutUint32(buf[pos+4:], crc32.Checksum(payload, castagnoli))
		pos += walHeader + n
	}
	_, err := tail.f.WriteAt(buf, tail.size)
	if err == nil {
		err = s.sync(tail.f)
	}
	if err != nil {
		// Leave no partial batch behind a later, good one.
		_ = tail.f.Truncate(tail.size)
		return fmt.Errorf("store logs %d-%d: %w", lo, hi, err)
	}
	s.mu.Lock()
	tail.offs = append(tail.offs, offs...)
	tail.size += int64(size)
	if s.first == 0 {
		s.first = lo
	}
	s.last = hi
	s.mu.Unlock()
	// Big one-off batches (a catch-up) should not pin memory.
	if cap(s.buf) > 4<<20 {
		s.buf = nil
	}
	return nil
}

func (s *walStore) newSegment(base uint64) (*walSegment, error) {
	f, err := os.OpenFile(filepath.Join(s.dir, segmentName(base)), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("new log segment: %w", err)
	}
	if err := s.syncDir(); err != nil {
		_ = f.Close()
		return nil, err
	}
	return &walSegment{f: f, base: base}, nil
}

// DeleteRange implements raft.LogStore; min and max are inclusive. raft
// deletes a prefix after a snapshot, a suffix when a follower's log
// conflicts with the leader's, and everything after installing a
// snapshot. A prefix removes the segments that lie wholly inside it (an
// entry left before the new first index is hidden, and comes back after a
// restart: an older first index is harmless). A suffix removes segments
// from the top and then cuts the one it starts in, so a crash part-way
// leaves a contiguous, shorter log.
func (s *walStore) DeleteRange(lo, hi uint64) error {
	s.wmu.Lock()
	s.mu.RLock()
	first, last := s.first, s.last
	s.mu.RUnlock()
	if first == 0 || hi < first || lo > last {
		s.wmu.Unlock()
		return nil
	}
	if lo <= first && hi < last {
		// A prefix, after a snapshot. Its segments leave the log under
		// the locks; their files are removed after, because that is
		// slow (an unlink of a 16 MiB segment took 3.8 ms on this
		// project's test machines, ext4 with online discard), and with
		// the locks held the leader's next write and raft's reads of
		// the log waited for every one of them: a write beside a
		// snapshot took up to 25 ms (issue 16 item 2).
		gone, err := s.detachPrefix(hi)
		s.wmu.Unlock()
		if err := errors.Join(err, s.removeSegments(gone)); err != nil {
			return fmt.Errorf("delete logs %d-%d: %w", lo, hi, err)
		}
		return nil
	}
	defer s.wmu.Unlock()
	var err error
	switch {
	case lo <= first && hi >= last:
		// From 0, not first: a partly compacted segment holds entries
		// below first, and they must go too, or the log is left with
		// a last index below its first (and refuses what follows).
		err = s.deleteSuffix(0)
	case hi >= last:
		err = s.deleteSuffix(lo)
	default:
		err = fmt.Errorf("a range inside the log (%d-%d of %d-%d) cannot be removed", lo, hi, first, last)
	}
	if err != nil {
		return fmt.Errorf("delete logs %d-%d: %w", lo, hi, err)
	}
	return nil
}

// detachPrefix makes hi+1 the first index and takes out of the log the
// segments that lie wholly before it (never the last one), returning
// them for removeSegments. Each file is renamed to its name and
// goneSuffix first, oldest first, so that open no longer reads it: a
// crash while removeSegments cuts it down would otherwise leave a torn
// segment before the last (refused as corrupt), and a crash after raft
// deleted the rest of the log and wrote on from a later index would
// leave it beside the new log (a gap, refused too). Renames are cheap
// (no blocks are freed); a failed one keeps that segment and those
// after it in the log, still contiguous.
func (s *walStore) detachPrefix(hi uint64) ([]*walSegment, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.first = hi + 1
	keep := 0
	var err error
	for keep < len(s.segs)-1 && s.segs[keep].lastIndex() <= hi {
		name := s.segs[keep].f.Name()
		if err = os.Rename(name, name+goneSuffix); err != nil {
			break
		}
		keep++
	}
	gone := slices.Clone(s.segs[:keep])
	s.segs = slices.Delete(s.segs, 0, keep)
	return gone, err
}

// goneSuffix ends the name of a segment file detachPrefix took out of the
// log; open removes any such file a crash left.
const goneSuffix = ".gone"

// removeGoneSegments removes the files of detached segments that a crash
// left in dir. Errors are ignored: such a file is never read.
func removeGoneSegments(dir string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".wal"+goneSuffix) {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// removeSegments removes the files of segments detachPrefix took out and
// renamed, and stops at the first that fails; open removes what is left.
func (s *walStore) removeSegments(gone []*walSegment) error {
	if len(gone) == 0 {
		return nil
	}
	// The renames must be on disk before a file is cut.
	if err := s.syncDir(); err != nil {
		closeSegments(gone)
		return err
	}
	for i, seg := range gone {
		if hook := walBeforeRemove; hook != nil {
			hook()
		}
		shrink(seg.f)
		_ = seg.f.Close()
		if err := os.Remove(seg.f.Name() + goneSuffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			closeSegments(gone[i+1:])
			return err
		}
	}
	return nil
}

func closeSegments(segs []*walSegment) {
	for _, seg := range segs {
		_ = seg.f.Close()
	}
}

// walBeforeRemove, when set by a test, runs before each file a prefix
// deletion removes.
var walBeforeRemove func()

// shrinkStep is how much of a file shrink frees at a time; a variable so
// that tests can cut small files in steps.
var shrinkStep = 1 << 20

// shrinkAfterCut, when set by a test, runs after each step of shrink.
var shrinkAfterCut func()

// shrink cuts f down to nothing a step at a time before it is removed.
// Unlinking a large file frees all its blocks at once, and on ext4 (with
// online discard, as on this project's test machines) an fdatasync of
// the log beside it waited for that: up to 5 ms beside two 16 MiB
// segments and 18 ms beside two 70 MiB files, against 0.8–3.7 ms when
// they were cut 1 MiB at a time first. Errors are ignored: the remove
// that follows frees what is left.
func shrink(f *os.File) {
	st, err := f.Stat()
	if err != nil {
		return
	}
	for size := st.Size() - int64(shrinkStep); size > 0; size -= int64(shrinkStep) {
		if f.Truncate(size) != nil {
			return
		}
		if hook := shrinkAfterCut; hook != nil {
			hook()
		}
	}
}

// walAfterRemove, when set by a test, runs after each segment a suffix
// deletion removed; an error stops it there, as a crash would.
var walAfterRemove func() error

// deleteSuffix removes every entry from lo on.
func (s *walStore) deleteSuffix(lo uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.segs) > 0 {
		seg := s.segs[len(s.segs)-1]
		if seg.base < lo {
			break
		}
		_ = seg.f.Close()
		if err := os.Remove(seg.f.Name()); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if err := s.syncDir(); err != nil {
			return err
		}
		s.segs = s.segs[:len(s.segs)-1]
		if hook := walAfterRemove; hook != nil {
			if err := hook(); err != nil {
				return err
			}
		}
	}
	if n := len(s.segs); n > 0 && s.segs[n-1].lastIndex() >= lo {
		seg := s.segs[n-1]
		k := lo - seg.base
		if err := seg.f.Truncate(seg.offs[k]); err != nil {
			return err
		}
		if err := s.sync(seg.f); err != nil {
			return err
		}
		seg.size, seg.offs = seg.offs[k], seg.offs[:k]
	}
	if len(s.segs) == 0 {
		s.first, s.last = 0, 0
	} else {
		s.last = s.segs[len(s.segs)-1].lastIndex()
		s.first = max(s.first, s.segs[0].base)
	}
	return nil
}

// migrateBoltLog moves the entries that earlier versions kept in raft.db's
// logs bucket into a new log at dir. The new log is written under a
// temporary name and renamed into place, so a crash leaves either no log
// (the bucket is still there and the move starts again) or the whole one
// (the bucket is then just emptied).
func migrateBoltLog(dir string, legacy *boltStore) error {
	first, _ := legacy.FirstIndex()
	if first == 0 {
		return nil
	}
	if _, err := os.Stat(dir); err == nil {
		return legacy.dropLogs()
	}
	// The bbolt store allowed gaps below a snapshot: keep the contiguous
	// run that ends at the last entry, which is all raft reads.
	var logs []*raft.Log
	err := legacy.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketLogs).Cursor()
		for k, v := c.Last(); k != nil; k, v = c.Prev() {
			l := new(raft.Log)
			if err := decodeLog(v, l); err != nil {
				return fmt.Errorf("log %d: %w", binary.BigEndian.Uint64(k), err)
			}
			if len(logs) > 0 && logs[len(logs)-1].Index != l.Index+1 {
				break
			}
			logs = append(logs, l)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read the bbolt log to move it: %w", err)
	}
	slices.Reverse(logs)
	tmp := dir + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return err
	}
	w := &walStore{dir: tmp}
	for len(logs) > 0 {
		n := min(len(logs), 1024)
		if err := w.StoreLogs(logs[:n]); err != nil {
			w.closeFiles()
			return fmt.Errorf("move the bbolt log: %w", err)
		}
		logs = logs[n:]
	}
	w.closeFiles()
	if err := fsync.Dir(tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return fmt.Errorf("move the bbolt log: %w", err)
	}
	if err := fsync.Dir(filepath.Dir(dir)); err != nil {
		return err
	}
	return legacy.dropLogs()
}

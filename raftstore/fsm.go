package raftstore

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// FSM is the replicated state machine. raft calls Apply, Snapshot and
// Restore from one goroutine; FSMSnapshot.Persist runs concurrently with
// later Apply calls.
type FSM interface {
	// Apply applies a committed command. It must be deterministic; its
	// result goes back to Node.Apply's caller on the leader.
	Apply(index uint64, cmd []byte) any
	// Snapshot captures a point-in-time view cheaply; the expensive writing
	// happens in FSMSnapshot.Persist.
	Snapshot() (FSMSnapshot, error)
	// Restore replaces all state with the snapshot read from r. index is the
	// last log index the snapshot covers that the FSM saw (see DESIGN.md).
	Restore(r io.Reader, index uint64) error
}

// FSMSnapshot is a point-in-time view of the FSM.
type FSMSnapshot interface {
	Persist(w io.Writer) error
	Release()
}

// readBarrierExt marks the entry a new leader appends before it serves
// linearizable reads. The adapter consumes it: the user FSM never sees it,
// but the applied index moves past it. See DESIGN.md ("read index").
var readBarrierExt = []byte("outpost/read-barrier")

// snapshotMagic starts every snapshot this package writes, followed by the
// big-endian applied index.
var snapshotMagic = [8]byte{'O', 'P', 'S', 'N', 'A', 'P', '0', '1'}

const snapshotIOBuffer = 256 << 10

// fsmAdapter turns a raft.BatchingFSM into calls on the user FSM and keeps
// the applied index that WaitApplied waits on.
type fsmAdapter struct {
	fsm  FSM
	done <-chan struct{} // closed when the node closes
	// onFatal is called once when the FSM reports a fatal result.
	onFatal   func(error)
	fatalOnce sync.Once

	// applied is the index of the last entry the adapter saw: commands,
	// configuration changes and read barriers. raft's own LogNoop and
	// LogBarrier entries never reach an FSM and so are not counted.
	applied atomic.Uint64
	waiters atomic.Int32
	mu      sync.Mutex
	changed chan struct{} // closed and replaced when applied moves and someone waits

	restores atomic.Uint64
	// onRestore, when set, runs after each restore, before the restored
	// index is seen as applied (WaitApplied) and before raft goes on to
	// apply the entries after the snapshot.
	onRestore func()
}

var (
	_ raft.BatchingFSM        = (*fsmAdapter)(nil)
	_ raft.ConfigurationStore = (*fsmAdapter)(nil)
)

func newFSMAdapter(fsm FSM, done <-chan struct{}) *fsmAdapter {
	return &fsmAdapter{fsm: fsm, done: done, changed: make(chan struct{})}
}

// ApplyBatch implements raft.BatchingFSM.
func (a *fsmAdapter) ApplyBatch(logs []*raft.Log) []any {
	out := make([]any, len(logs))
	for i, l := range logs {
		out[i] = a.applyOne(l)
	}
	if len(logs) > 0 {
		a.advance(logs[len(logs)-1].Index)
	}
	return out
}

// Apply implements raft.FSM (raft uses ApplyBatch; this is for completeness).
func (a *fsmAdapter) Apply(l *raft.Log) any {
	r := a.applyOne(l)
	a.advance(l.Index)
	return r
}

func (a *fsmAdapter) applyOne(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	if len(l.Extensions) != 0 && bytes.Equal(l.Extensions, readBarrierExt) {
		return nil
	}
	res := a.fsm.Apply(l.Index, l.Data)
	if f, ok := res.(fatalResult); ok && a.onFatal != nil {
		if err := f.FatalErr(); err != nil {
			a.fatalOnce.Do(func() { go a.onFatal(fmt.Errorf("raft entry %d: %w", l.Index, err)) })
		}
	}
	return res
}

// fatalResult is an FSM result that can say the FSM cannot go on: applying
// further entries would diverge from servers that understood this one.
type fatalResult interface{ FatalErr() error }

// StoreConfiguration implements raft.ConfigurationStore; the configuration
// itself is read from raft, only the index matters here.
func (a *fsmAdapter) StoreConfiguration(index uint64, _ raft.Configuration) {
	a.advance(index)
}

func (a *fsmAdapter) advance(index uint64) {
	a.applied.Store(index)
	if a.waiters.Load() > 0 {
		a.mu.Lock()
		close(a.changed)
		a.changed = make(chan struct{})
		a.mu.Unlock()
	}
}

// waitApplied blocks until the applied index reaches index.
func (a *fsmAdapter) waitApplied(ctx context.Context, index uint64) error {
	for a.applied.Load() < index {
		a.waiters.Add(1)
		a.mu.Lock()
		ch := a.changed
		a.mu.Unlock()
		if a.applied.Load() >= index {
			a.waiters.Add(-1)
			return nil
		}
		select {
		case <-ch:
			a.waiters.Add(-1)
		case <-ctx.Done():
			a.waiters.Add(-1)
			return fmt.Errorf("wait for index %d (applied %d): %w", index, a.applied.Load(), ctx.Err())
		case <-a.done:
			a.waiters.Add(-1)
			return ErrClosed
		}
	}
	return nil
}

// Snapshot implements raft.FSM. It runs on raft's FSM goroutine, so the
// applied index read here is exactly the state the user snapshot captures.
func (a *fsmAdapter) Snapshot() (raft.FSMSnapshot, error) {
	index := a.applied.Load()
	s, err := a.fsm.Snapshot()
	if err != nil {
		return nil, fmt.Errorf("fsm snapshot: %w", err)
	}
	return &snapshotAdapter{snap: s, index: index}, nil
}

// Restore implements raft.FSM; raft closes rc.
func (a *fsmAdapter) Restore(rc io.ReadCloser) error {
	br := bufio.NewReaderSize(rc, snapshotIOBuffer)
	var hdr [16]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		return fmt.Errorf("snapshot header: %w: %w", ErrCorrupt, err)
	}
	if !bytes.Equal(hdr[:8], snapshotMagic[:]) {
		return fmt.Errorf("snapshot header: %w: bad magic %q", ErrCorrupt, hdr[:8])
	}
	index := binary.BigEndian.Uint64(hdr[8:])
	if err := a.fsm.Restore(br, index); err != nil {
		return fmt.Errorf("fsm restore at index %d: %w", index, err)
	}
	if a.onRestore != nil {
		a.onRestore()
	}
	a.restores.Add(1)
	a.advance(index)
	return nil
}

type snapshotAdapter struct {
	snap  FSMSnapshot
	index uint64
}

// Persist implements raft.FSMSnapshot.
func (s *snapshotAdapter) Persist(sink raft.SnapshotSink) error {
	bw := bufio.NewWriterSize(sink, snapshotIOBuffer)
	var hdr [16]byte
	copy(hdr[:8], snapshotMagic[:])
	binary.BigEndian.PutUint64(hdr[8:], s.index)
	_, err := bw.Write(hdr[:])
	if err == nil {
		err = s.snap.Persist(bw)
	}
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("persist snapshot at index %d: %w", s.index, err)
	}
	if err := sink.Close(); err != nil {
		return fmt.Errorf("close snapshot at index %d: %w", s.index, err)
	}
	return nil
}

// Release implements raft.FSMSnapshot.
func (s *snapshotAdapter) Release() { s.snap.Release() }

// snapshotStore wraps raft's file snapshot store to remember the index of
// the last snapshot written (taken here or installed from the leader), and
// to remove old snapshots itself.
//
// raft's store removes the snapshots beyond the ones it keeps in one
// unlink each, when a new one is closed; a snapshot is the whole state
// (70 MiB at 50,000 pods, 400 MiB at 150,000), and on ext4 (with online
// discard, as on this project's test machines) every log fdatasync on the
// disk waited while its blocks were freed: up to 18 ms beside two 70 MiB
// files, 1.3–3.7 ms when they were cut 1 MiB at a time first (shrink).
// So raft's store is made to keep them all (retain snapshotsRetainedByRaft),
// and Close removes all but the newest snapshotsKept, cutting each file
// down first unless it is open: a snapshot being sent to a follower is
// only unlinked, so that its reader still reads it whole.
type snapshotStore struct {
	raft.SnapshotStore
	last atomic.Uint64
	// dir is where the file store keeps snapshots, for the sinks'
	// write-behind and the removal of old ones.
	dir string

	mu       sync.Mutex
	reading  map[string]int  // snapshots open for reading, by ID
	removing map[string]bool // snapshots reap is cutting down, by ID
	log      *slog.Logger
}

// snapshotsKept is how many snapshots a server keeps: the newest, and the
// one before in case the newest cannot be read.
const snapshotsKept = 2

// snapshotsRetainedByRaft is the retain count given to raft's file store:
// more than it will ever hold, so that it removes none itself.
const snapshotsRetainedByRaft = 1 << 30

// openSnapshotStore opens raft's file snapshot store in raftDir (its
// snapshots/ directory), wrapped: the node and the tests get the same.
func openSnapshotStore(raftDir string, log *slog.Logger) (*snapshotStore, error) {
	files, err := raft.NewFileSnapshotStoreWithLogger(raftDir, snapshotsRetainedByRaft, newHCLog(log.With("component", "raft")).Named("snapshots"))
	if err != nil {
		return nil, fmt.Errorf("snapshot store in %s: %w", raftDir, err)
	}
	s := &snapshotStore{SnapshotStore: files, dir: filepath.Join(raftDir, "snapshots"), reading: map[string]int{}, removing: map[string]bool{}, log: log}
	if metas, err := files.List(); err == nil && len(metas) > 0 {
		s.last.Store(metas[0].Index)
	}
	return s, nil
}

// Create implements raft.SnapshotStore.
func (s *snapshotStore) Create(version raft.SnapshotVersion, index, term uint64, configuration raft.Configuration,
	configurationIndex uint64, trans raft.Transport) (raft.SnapshotSink, error) {
	sink, err := s.SnapshotStore.Create(version, index, term, configuration, configurationIndex, trans)
	if err != nil {
		return nil, err
	}
	// raft's file store writes SNAPDIR/ID.tmp/state.bin until Close.
	wb := &writeBehind{path: filepath.Join(s.dir, sink.ID()+".tmp", "state.bin")}
	return &snapshotSink{SnapshotSink: sink, store: s, index: index, wb: wb}, nil
}

type snapshotSink struct {
	raft.SnapshotSink
	store *snapshotStore
	index uint64
	wb    *writeBehind
}

func (s *snapshotSink) Write(p []byte) (int, error) {
	n, err := s.SnapshotSink.Write(p)
	s.wb.wrote(n)
	return n, err
}

func (s *snapshotSink) Cancel() error {
	_ = s.wb.close()
	return s.SnapshotSink.Cancel()
}

func (s *snapshotSink) Close() error {
	if err := s.wb.close(); err != nil {
		// Pages the disk refused: the snapshot must not be kept.
		_ = s.SnapshotSink.Cancel()
		return err
	}
	if err := s.SnapshotSink.Close(); err != nil {
		return err
	}
	for {
		cur := s.store.last.Load()
		if s.index <= cur || s.store.last.CompareAndSwap(cur, s.index) {
			break
		}
	}
	// The new snapshot is safe on disk whatever happens to old ones:
	// failing here would make raft skip compacting the log (or answer
	// an install as failed) for a removal it does not need.
	if err := s.store.reap(); err != nil {
		s.store.log.Warn("removing an old snapshot failed; it is tried again after the next one", "err", err)
	}
	return nil
}

// Open implements raft.SnapshotStore, noting the snapshot open until its
// reader is closed, so that reap does not cut its file. It is noted
// before raft's store opens it (which reads the whole file for its
// checksum) and without holding the lock meanwhile. A snapshot reap is
// cutting down fails at once, as it would a moment later, removed.
func (s *snapshotStore) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	s.mu.Lock()
	if s.removing[id] {
		s.mu.Unlock()
		return nil, nil, fmt.Errorf("open snapshot %s: being removed: %w", id, os.ErrNotExist)
	}
	s.reading[id]++
	s.mu.Unlock()
	done := func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.reading[id]--; s.reading[id] <= 0 {
			delete(s.reading, id)
		}
	}
	meta, rc, err := s.SnapshotStore.Open(id)
	if err != nil {
		done()
		return meta, rc, err
	}
	return meta, &openSnapshot{ReadCloser: rc, done: done}, nil
}

// openSnapshot is a snapshot's reader that tells its store when closed.
type openSnapshot struct {
	io.ReadCloser
	once sync.Once
	done func()
}

func (o *openSnapshot) Close() error {
	err := o.ReadCloser.Close()
	o.once.Do(o.done)
	return err
}

// reap removes all but the newest snapshotsKept snapshots, each file cut
// down first unless the snapshot is open.
func (s *snapshotStore) reap() error {
	metas, err := s.SnapshotStore.List()
	if err != nil || len(metas) <= snapshotsKept {
		return err
	}
	for _, m := range metas[snapshotsKept:] {
		dir := filepath.Join(s.dir, m.ID)
		s.mu.Lock()
		cut := s.reading[m.ID] == 0
		if cut {
			s.removing[m.ID] = true
		}
		s.mu.Unlock()
		// Cut without the lock: a cut of a whole state takes many steps,
		// and Open of the snapshots kept must not wait for them.
		if cut {
			if f, err := os.OpenFile(filepath.Join(dir, "state.bin"), os.O_WRONLY, 0); err == nil {
				shrink(f)
				_ = f.Close()
			}
		}
		err := os.RemoveAll(dir)
		if cut {
			s.mu.Lock()
			delete(s.removing, m.ID)
			s.mu.Unlock()
		}
		if err != nil {
			return fmt.Errorf("remove snapshot %s: %w", m.ID, err)
		}
	}
	return nil
}

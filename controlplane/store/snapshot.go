package store

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// Snapshot stream layout (all integers uvarint unless said otherwise):
//
//	magic "OPFSM" | format version byte | index
//	per non-empty resource, in api.Resources order:
//	    len(plural) plural | count | count × (len(json) json)
//	0 (an empty plural ends the resources)
//	CRC-32C of every byte before it, 4 bytes big-endian
//
// Objects are sorted by namespace and name, so two servers with the same
// state write the same bytes. The JSON is each object's stored encoding,
// the same bytes a GET returns.
const (
	snapMagic   = "OPFSM"
	snapVersion = 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

type snapTable struct {
	t      *table
	n      int
	groups []snapGroup
}

// snapGroup is one namespace's objects, with their names taken from the
// map keys so that sorting them does not touch the objects.
type snapGroup struct {
	namespace string
	entries   []namedEntry
}

type namedEntry struct {
	name string
	e    *entry
}

type snapshot struct {
	index  uint64
	tables []snapTable
}

// Snapshot captures the current state. It copies only pointers: stored
// entries never change, so Persist can read them while Apply goes on.
func (s *Store) Snapshot() (FSMSnapshot, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	snap := &snapshot{index: s.applied.Load()}
	for _, t := range s.tables {
		if t.n == 0 {
			continue
		}
		st := snapTable{t: t, n: t.n, groups: make([]snapGroup, 0, len(t.ns))}
		for ns, m := range t.ns {
			g := snapGroup{namespace: ns, entries: make([]namedEntry, 0, len(m))}
			for name, e := range m {
				g.entries = append(g.entries, namedEntry{name, e})
			}
			st.groups = append(st.groups, g)
		}
		snap.tables = append(snap.tables, st)
	}
	return snap, nil
}

// Release drops the snapshot's references.
func (snap *snapshot) Release() { snap.tables = nil }

// Persist writes the snapshot to w.
func (snap *snapshot) Persist(w io.Writer) error {
	sw := &snapWriter{w: w, crc: crc32.New(castagnoli), buf: make([]byte, 0, 1<<20), scratch: make([]byte, 0, 4<<10)}
	sw.buf = append(sw.buf, snapMagic...)
	sw.buf = append(sw.buf, snapVersion)
	sw.buf = binary.AppendUvarint(sw.buf, snap.index)
	for _, st := range snap.tables {
		slices.SortFunc(st.groups, func(a, b snapGroup) int { return strings.Compare(a.namespace, b.namespace) })
		sw.buf = appendString(sw.buf, st.t.res.Plural)
		sw.buf = binary.AppendUvarint(sw.buf, uint64(st.n))
		for _, g := range st.groups {
			slices.SortFunc(g.entries, func(a, b namedEntry) int { return strings.Compare(a.name, b.name) })
			for _, ne := range g.entries {
				// An entry that dropped its JSON is encoded again, to the
				// same bytes (see entry).
				raw := ne.e.kept()
				if detectMutations() {
					now := checkUnchanged(st.t, ne.e)
					if raw == nil {
						raw = now
					}
				}
				if raw == nil {
					// Into one buffer for every entry: a fresh slice each
					// was most of a snapshot's garbage.
					var err error
					if sw.scratch, err = ne.e.encodeAppend(sw.scratch[:0]); err != nil {
						return fmt.Errorf("write snapshot: %w", err)
					}
					raw = sw.scratch
				}
				sw.buf = binary.AppendUvarint(sw.buf, uint64(len(raw)))
				sw.buf = append(sw.buf, raw...)
				if len(sw.buf) >= 1<<20 {
					if err := sw.flush(); err != nil {
						return err
					}
				}
			}
		}
	}
	sw.buf = binary.AppendUvarint(sw.buf, 0)
	if err := sw.flush(); err != nil {
		return err
	}
	if _, err := w.Write(binary.BigEndian.AppendUint32(nil, sw.crc.Sum32())); err != nil {
		return fmt.Errorf("write snapshot checksum: %w", err)
	}
	return nil
}

type snapWriter struct {
	w   io.Writer
	crc hash.Hash32
	buf []byte
	// scratch holds an entry encoded again, until it is copied to buf.
	scratch []byte
}

func (sw *snapWriter) flush() error {
	sw.crc.Write(sw.buf)
	if _, err := sw.w.Write(sw.buf); err != nil {
		return fmt.Errorf("write snapshot: %w", err)
	}
	sw.buf = sw.buf[:0]
	return nil
}

// snapReader reads a snapshot stream and checksums what it reads.
type snapReader struct {
	r    *bufio.Reader
	crc  hash.Hash32
	slab []byte // object encodings are cut from large slabs, not allocated one by one
}

func (sr *snapReader) ReadByte() (byte, error) {
	b, err := sr.r.ReadByte()
	if err == nil {
		sr.crc.Write([]byte{b})
	}
	return b, err
}

func (sr *snapReader) uvarint(what string) (uint64, error) {
	v, err := binary.ReadUvarint(sr)
	if err != nil {
		return 0, fmt.Errorf("%w: %s: %w", ErrBadSnapshot, what, unexpected(err))
	}
	return v, nil
}

// bytes reads n bytes into a slab; the result is never appended to.
func (sr *snapReader) bytes(n uint64, what string) ([]byte, error) {
	if n > 1<<30 {
		return nil, fmt.Errorf("%w: %s of %d bytes", ErrBadSnapshot, what, n)
	}
	if uint64(cap(sr.slab)-len(sr.slab)) < n {
		sr.slab = make([]byte, 0, max(1<<20, int(n)))
	}
	start := len(sr.slab)
	sr.slab = sr.slab[:start+int(n)]
	b := sr.slab[start : start+int(n) : start+int(n)]
	if _, err := io.ReadFull(sr.r, b); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBadSnapshot, what, unexpected(err))
	}
	sr.crc.Write(b)
	return b, nil
}

func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

type snapRecord struct {
	t   *table
	raw []byte
	obj api.Object
	sum uint64
}

// restoreBatch is how much of a stream Restore reads before it decodes
// what it read: objects are decoded as the stream goes, so a restore's
// heap holds the restored state and one batch of JSON, not the whole
// stream beside its objects. A joining member restores the full state
// under the same memory limit as the others (issue 16 item 3).
var (
	restoreBatchBytes   = 8 << 20
	restoreBatchObjects = 8192
	// restoreBatchDone, if set (tests), is called after each batch with
	// the number of objects restored so far.
	restoreBatchDone func(objects int)
)

// restoring is the state a Restore builds aside, to swap in at once.
type restoring struct {
	s       *Store
	fresh   map[*table]*restoredTable
	objects int
	sum     uint64 // the state hash of what is restored (statehash.go)
	// decoders are the decoding workers' interners, kept from one batch
	// to the next so that later batches share with earlier ones.
	decoders []interner
}

type restoredTable struct {
	ns     map[string]map[string]*entry
	n      int
	byNode map[string]map[*entry]struct{}
}

// Restore replaces the whole state with the snapshot read from r, taken at
// index (the index in the stream is used if index is 0). Every open watch
// ends with a 410, since the history it stood on is gone. On error the
// state is left as it was.
func (s *Store) Restore(r io.Reader, index uint64) error {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	start := time.Now()

	sr := &snapReader{r: bufio.NewReaderSize(r, 1<<20), crc: crc32.New(castagnoli)}
	head, err := sr.bytes(uint64(len(snapMagic)+1), "header")
	if err != nil {
		return err
	}
	if string(head[:len(snapMagic)]) != snapMagic {
		return fmt.Errorf("%w: not a store snapshot", ErrBadSnapshot)
	}
	if v := head[len(snapMagic)]; v != snapVersion {
		return fmt.Errorf("%w: format version %d, this server reads %d; a newer server wrote it", ErrBadSnapshot, v, snapVersion)
	}
	streamIndex, err := sr.uvarint("index")
	if err != nil {
		return err
	}
	if index == 0 {
		index = streamIndex
	} else if index != streamIndex {
		s.log.Warn("snapshot index differs from raft's; using raft's", "stream", streamIndex, "raft", index)
	}

	rs := &restoring{
		s:        s,
		fresh:    make(map[*table]*restoredTable, len(s.tables)),
		decoders: make([]interner, runtime.GOMAXPROCS(0)),
	}
	for i := range rs.decoders {
		rs.decoders[i].off = s.intern.off
	}
	for _, t := range s.tables {
		c := &restoredTable{ns: make(map[string]map[string]*entry)}
		if t.byNode != nil {
			c.byNode = make(map[string]map[*entry]struct{})
		}
		rs.fresh[t] = c
	}
	var (
		recs      []snapRecord
		recsBytes int
	)
	for {
		n, err := sr.uvarint("resource")
		if err != nil {
			return err
		}
		if n == 0 {
			break
		}
		pb, err := sr.bytes(n, "resource")
		if err != nil {
			return err
		}
		t := s.byPlural[string(pb)]
		if t == nil {
			return fmt.Errorf("snapshot holds %q: %w; a newer server wrote it", pb, ErrUnknownResource)
		}
		count, err := sr.uvarint(t.res.Plural + " count")
		if err != nil {
			return err
		}
		for range count {
			n, err := sr.uvarint(t.res.Plural + " object")
			if err != nil {
				return err
			}
			raw, err := sr.bytes(n, t.res.Plural+" object")
			if err != nil {
				return err
			}
			recs = append(recs, snapRecord{t: t, raw: raw})
			recsBytes += len(raw)
			if recsBytes >= restoreBatchBytes || len(recs) >= restoreBatchObjects {
				if err := rs.add(recs); err != nil {
					return err
				}
				// The batch's JSON goes with its records.
				clear(recs)
				recs, recsBytes = recs[:0], 0
				sr.slab = nil
			}
		}
	}
	if err := rs.add(recs); err != nil {
		return err
	}
	sum := sr.crc.Sum32()
	var tail [4]byte
	if _, err := io.ReadFull(sr.r, tail[:]); err != nil {
		return fmt.Errorf("%w: checksum: %w", ErrBadSnapshot, unexpected(err))
	}
	if got := binary.BigEndian.Uint32(tail[:]); got != sum {
		return fmt.Errorf("%w: checksum %08x, computed %08x", ErrBadSnapshot, got, sum)
	}

	s.mu.Lock()
	s.closeWatchers(api.NewGone(fmt.Sprintf("too old resource version: the store was restored from a snapshot at %d; relist", index)))
	for _, t := range s.tables {
		c := rs.fresh[t]
		t.ns, t.n, t.byNode = c.ns, c.n, c.byNode
		t.win.init(s.watchWindow, index)
		if t.objects != nil {
			t.objects.Set(float64(t.n))
		}
	}
	s.sum = rs.sum
	s.hashes.reset(index, rs.sum)
	s.applied.Store(index)
	s.mu.Unlock()
	s.notifyApplied()
	s.log.Info("store restored from snapshot", "index", index, "objects", rs.objects, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// add decodes a batch of a snapshot's records and puts their objects in
// the tables being restored, in the stream's order.
func (rs *restoring) add(recs []snapRecord) error {
	if err := decodeRecords(recs, rs.objects, rs.decoders); err != nil {
		return err
	}
	if restoreBatchDone != nil {
		defer func() { restoreBatchDone(rs.objects) }()
	}
	for i := range recs {
		rec := &recs[i]
		c := rs.fresh[rec.t]
		m := rec.obj.GetObjectMeta()
		if !rec.t.res.Namespaced {
			m.Namespace = ""
		}
		if m.Name == "" || (rec.t.res.Namespaced && m.Namespace == "") {
			return fmt.Errorf("%w: %s object %d has no name or namespace", ErrBadSnapshot, rec.t.res.Plural, rs.objects)
		}
		names := c.ns[m.Namespace]
		if names == nil {
			names = make(map[string]*entry)
			c.ns[m.Namespace] = names
		}
		if names[m.Name] != nil {
			return fmt.Errorf("%w: %s %s/%s twice", ErrBadSnapshot, rec.t.res.Plural, m.Namespace, m.Name)
		}
		if ev, ok := rec.obj.(*api.Event); ok {
			// Pods come before events (api.Resources), so an event's pod
			// is restored already.
			rs.s.shareInvolved(ev, func(t *table, ns, name string) *entry { return rs.fresh[t].ns[ns][name] })
		}
		// A restored entry keeps no JSON: the windows start empty (see
		// entry), and the stream's buffers can go.
		e := &entry{obj: rec.obj, sum: rec.sum}
		names[m.Name] = e
		c.n++
		rs.objects++
		rs.sum += e.sum
		if c.byNode != nil {
			set := c.byNode[e.node()]
			if set == nil {
				set = make(map[*entry]struct{})
				c.byNode[e.node()] = set
			}
			set[e] = struct{}{}
		}
	}
	return nil
}

// decodeRecords decodes the objects of a snapshot on every core, one
// worker per interner: decoding JSON is nearly all of a restore's time,
// and each object is independent.
// first is the number of recs[0] in the stream, for errors.
func decodeRecords(recs []snapRecord, first int, decoders []interner) error {
	workers := min(len(decoders), max(1, len(recs)/512))
	errs := make([]error, workers)
	var wg sync.WaitGroup
	chunk := (len(recs) + workers - 1) / max(workers, 1)
	for w := range workers {
		lo, hi := w*chunk, min((w+1)*chunk, len(recs))
		in := &decoders[w]
		wg.Go(func() {
			for i := lo; i < hi; i++ {
				rec := &recs[i]
				obj := rec.t.res.New()
				if err := unmarshal(rec.raw, obj); err != nil {
					errs[w] = fmt.Errorf("%w: %s object %d: %w", ErrBadSnapshot, rec.t.res.Plural, first+i, err)
					return
				}
				tm := obj.GetTypeMeta()
				tm.APIVersion, tm.Kind = rec.t.res.APIVersion(), rec.t.res.Kind
				in.object(obj, nil, true)
				rec.obj = obj
				rec.sum = hashJSON(rec.t, rec.raw)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

package raftstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
)

var (
	bucketLogs = []byte("logs")
	bucketConf = []byte("conf")
)

// logFormatV1 is the first byte of every encoded log entry, so that the
// encoding can change later without guessing.
const logFormatV1 = 1

// boltStore is raft's LogStore and StableStore in one bbolt file. Each
// StoreLogs call is one bbolt transaction, so a batch costs one fsync; raft
// acknowledges an entry only after that fsync, which is what makes an
// acknowledged write survive kill -9.
type boltStore struct {
	db *bolt.DB

	// first and last cache the index range so that raft's frequent
	// FirstIndex/LastIndex calls do not open a read transaction.
	mu          sync.Mutex
	first, last uint64

	// buf is reused across StoreLogs calls; bbolt needs keys and values to
	// stay valid until the transaction commits, and raft calls StoreLogs
	// from one goroutine at a time (guarded by wmu anyway).
	wmu sync.Mutex
	buf []byte
}

var (
	_ raft.LogStore    = (*boltStore)(nil)
	_ raft.StableStore = (*boltStore)(nil)
)

// openBoltStore opens (creating if needed) the store at path.
func openBoltStore(path string, noSync bool) (*boltStore, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout: time.Second, // another process holding the file lock
		// The freelist is rebuilt on open instead of written on every
		// commit: fewer pages per fsync on the write path.
		NoFreelistSync: true,
		FreelistType:   bolt.FreelistMapType,
	})
	if err != nil {
		return nil, fmt.Errorf("open log store %s: %w", path, err)
	}
	db.NoSync, db.NoGrowSync = noSync, noSync
	s := &boltStore{db: db}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketLogs, bucketConf} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		s.first, s.last = boundsTx(tx)
		return nil
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("init log store %s: %w", path, err)
	}
	return s, nil
}

func boundsTx(tx *bolt.Tx) (first, last uint64) {
	c := tx.Bucket(bucketLogs).Cursor()
	if k, _ := c.First(); k != nil {
		first = binary.BigEndian.Uint64(k)
	}
	if k, _ := c.Last(); k != nil {
		last = binary.BigEndian.Uint64(k)
	}
	return first, last
}

// Close closes the bbolt file.
func (s *boltStore) Close() error { return s.db.Close() }

// FirstIndex implements raft.LogStore.
func (s *boltStore) FirstIndex() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.first, nil
}

// LastIndex implements raft.LogStore.
func (s *boltStore) LastIndex() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last, nil
}

// GetLog implements raft.LogStore.
func (s *boltStore) GetLog(index uint64, l *raft.Log) error {
	var key [8]byte
	binary.BigEndian.PutUint64(key[:], index)
	return s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketLogs).Get(key[:])
		if v == nil {
			return raft.ErrLogNotFound
		}
		if err := decodeLog(v, l); err != nil {
			return fmt.Errorf("log %d: %w", index, err)
		}
		if l.Index != index {
			return fmt.Errorf("log %d: %w: entry says index %d", index, ErrCorrupt, l.Index)
		}
		return nil
	})
}

// StoreLog implements raft.LogStore.
func (s *boltStore) StoreLog(l *raft.Log) error {
	return s.StoreLogs([]*raft.Log{l})
}

// StoreLogs implements raft.LogStore: the whole batch is one transaction.
func (s *boltStore) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	size := 0
	for _, l := range logs {
		size += 8 + encodedLogSize(l)
	}
	if cap(s.buf) < size {
		s.buf = make([]byte, size)
	}
	buf := s.buf[:size]
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketLogs)
		// Entries are appended in index order; full pages waste no space.
		b.FillPercent = 1.0
		off := 0
		for _, l := range logs {
			key := buf[off : off+8 : off+8]
			binary.BigEndian.PutUint64(key, l.Index)
			off += 8
			n := encodedLogSize(l)
			val := buf[off : off+n : off+n]
			encodeLog(val, l)
			off += n
			if err := b.Put(key, val); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store logs %d-%d: %w", logs[0].Index, logs[len(logs)-1].Index, err)
	}
	lo, hi := logs[0].Index, logs[len(logs)-1].Index
	s.mu.Lock()
	if s.first == 0 || lo < s.first {
		s.first = lo
	}
	if hi > s.last {
		s.last = hi
	}
	s.mu.Unlock()
	// Big one-off batches (a snapshot catch-up) should not pin memory.
	if cap(s.buf) > 4<<20 {
		s.buf = nil
	}
	return nil
}

// deleteChunk bounds the entries one DeleteRange transaction removes.
// Compaction after a snapshot deletes thousands of entries; in one
// transaction that held the write lock for seconds and stalled every
// StoreLogs (writes waited up to 4 s at 256 clients). In chunks, appends
// slip in between, and a crash part-way leaves a shorter prefix removed,
// which raft handles as it handles any first index.
const deleteChunk = 1024

// DeleteRange implements raft.LogStore; min and max are inclusive.
//
// Raft deletes a prefix after a snapshot and a suffix when a follower's
// log conflicts with the leader's. Each chunk commits on its own, so the
// order matters for a crash part-way: a prefix goes bottom-up and a suffix
// top-down, and every intermediate state is a contiguous log, only shorter
// at the end being cut. A suffix deleted bottom-up left a hole (entries
// 1..999 and 2024..3000, say), and the follower failed GetLog on it until a
// snapshot arrived.
func (s *boltStore) DeleteRange(lo, hi uint64) error {
	s.mu.Lock()
	prefix := lo <= s.first
	s.mu.Unlock()
	for {
		done, err := s.deleteSome(lo, hi, prefix)
		if err != nil {
			return fmt.Errorf("delete logs %d-%d: %w", lo, hi, err)
		}
		if done {
			return nil
		}
		if hook := afterDeleteChunk; hook != nil {
			if err := hook(); err != nil {
				return fmt.Errorf("delete logs %d-%d: %w", lo, hi, err)
			}
		}
	}
}

// indexKey is the bucket key of a log index: big-endian, so keys sort as indexes.
func indexKey(index uint64) []byte {
	return binary.BigEndian.AppendUint64(nil, index)
}

// afterDeleteChunk, when set by a test, runs after each committed chunk of
// a DeleteRange that is not finished; an error stops it there, as a crash
// would.
var afterDeleteChunk func() error

// deleteSome removes up to deleteChunk entries of [lo, hi] in one
// transaction, from the bottom when prefix is set and from the top
// otherwise, and reports whether none are left.
func (s *boltStore) deleteSome(lo, hi uint64, prefix bool) (bool, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	var first, last uint64
	done := true
	err := s.db.Update(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketLogs).Cursor()
		// Seek again after each delete rather than trusting Next or Prev
		// after Delete, whose position is easy to get wrong.
		loKey := indexKey(lo)
		var pastHi []byte // nil: nothing lies above hi
		if hi < math.MaxUint64 {
			pastHi = indexKey(hi + 1)
		}
		next := func() []byte {
			if prefix {
				k, _ := c.Seek(loKey)
				if k == nil || binary.BigEndian.Uint64(k) > hi {
					return nil
				}
				return k
			}
			var k []byte
			if pastHi != nil {
				k, _ = c.Seek(pastHi)
			}
			if k == nil {
				k, _ = c.Last()
			} else {
				k, _ = c.Prev()
			}
			if k == nil || binary.BigEndian.Uint64(k) < lo {
				return nil
			}
			return k
		}
		n := 0
		for k := next(); k != nil; k = next() {
			if n == deleteChunk {
				done = false
				break
			}
			if err := c.Delete(); err != nil {
				return err
			}
			n++
		}
		first, last = boundsTx(tx)
		return nil
	})
	if err != nil {
		return false, err
	}
	s.mu.Lock()
	s.first, s.last = first, last
	s.mu.Unlock()
	return done, nil
}

// dropLogs empties the logs bucket once its entries live in the WAL
// (walStore): the file is the stable store only from then on.
func (s *boltStore) dropLogs() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	err := s.db.Update(func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket(bucketLogs); err != nil {
			return err
		}
		_, err := tx.CreateBucket(bucketLogs)
		return err
	})
	if err != nil {
		return fmt.Errorf("empty the bbolt log: %w", err)
	}
	s.mu.Lock()
	s.first, s.last = 0, 0
	s.mu.Unlock()
	return nil
}

// Set implements raft.StableStore.
func (s *boltStore) Set(key, val []byte) error {
	err := s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketConf).Put(key, val)
	})
	if err != nil {
		return fmt.Errorf("stable store set %q: %w", key, err)
	}
	return nil
}

// Get implements raft.StableStore: a missing key yields nil and no error.
func (s *boltStore) Get(key []byte) ([]byte, error) {
	var out []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketConf).Get(key); v != nil {
			out = append([]byte{}, v...)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("stable store get %q: %w", key, err)
	}
	return out, nil
}

// SetUint64 implements raft.StableStore.
func (s *boltStore) SetUint64(key []byte, val uint64) error {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], val)
	return s.Set(key, b[:])
}

// GetUint64 implements raft.StableStore: a missing key yields 0.
func (s *boltStore) GetUint64(key []byte) (uint64, error) {
	v, err := s.Get(key)
	if err != nil || v == nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("stable store key %q: %w: %d bytes, want 8", key, ErrCorrupt, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// The entry encoding, after the format byte:
//
//	uvarint index | uvarint term | byte type | varint appendedAt (unix ns, 0 = zero time)
//	uvarint len(data) | data | uvarint len(extensions) | extensions
//
// The index is repeated from the key so that a misplaced value is caught.
func encodedLogSize(l *raft.Log) int {
	return 1 + uvarintLen(l.Index) + uvarintLen(l.Term) + 1 + varintLen(appendedAtNanos(l.AppendedAt)) +
		uvarintLen(uint64(len(l.Data))) + len(l.Data) + uvarintLen(uint64(len(l.Extensions))) + len(l.Extensions)
}

func encodeLog(dst []byte, l *raft.Log) {
	dst[0] = logFormatV1
	n := 1
	n += binary.PutUvarint(dst[n:], l.Index)
	n += binary.PutUvarint(dst[n:], l.Term)
	dst[n] = byte(l.Type)
	n++
	n += binary.PutVarint(dst[n:], appendedAtNanos(l.AppendedAt))
	n += binary.PutUvarint(dst[n:], uint64(len(l.Data)))
	n += copy(dst[n:], l.Data)
	n += binary.PutUvarint(dst[n:], uint64(len(l.Extensions)))
	copy(dst[n:], l.Extensions)
}

var errShortEntry = errors.New("truncated entry")

// decodeLog fills l from v, copying data and extensions into one new
// allocation (v is only valid inside the bbolt transaction).
func decodeLog(v []byte, l *raft.Log) error {
	if len(v) == 0 || v[0] != logFormatV1 {
		return fmt.Errorf("%w: unknown entry format", ErrCorrupt)
	}
	p := v[1:]
	next := func() (uint64, bool) {
		x, n := binary.Uvarint(p)
		if n <= 0 {
			return 0, false
		}
		p = p[n:]
		return x, true
	}
	var ok bool
	if l.Index, ok = next(); !ok {
		return fmt.Errorf("%w: index: %w", ErrCorrupt, errShortEntry)
	}
	if l.Term, ok = next(); !ok {
		return fmt.Errorf("%w: term: %w", ErrCorrupt, errShortEntry)
	}
	if len(p) < 1 {
		return fmt.Errorf("%w: type: %w", ErrCorrupt, errShortEntry)
	}
	l.Type = raft.LogType(p[0])
	p = p[1:]
	at, n := binary.Varint(p)
	if n <= 0 {
		return fmt.Errorf("%w: appendedAt: %w", ErrCorrupt, errShortEntry)
	}
	p = p[n:]
	if at == 0 {
		l.AppendedAt = time.Time{}
	} else {
		l.AppendedAt = time.Unix(0, at)
	}
	dlen, ok := next()
	if !ok || dlen > uint64(len(p)) {
		return fmt.Errorf("%w: data: %w", ErrCorrupt, errShortEntry)
	}
	data := p[:dlen]
	p = p[dlen:]
	elen, ok := next()
	if !ok || elen != uint64(len(p)) {
		return fmt.Errorf("%w: extensions: %w", ErrCorrupt, errShortEntry)
	}
	l.Data, l.Extensions = nil, nil
	if total := len(data) + len(p); total > 0 {
		buf := make([]byte, total)
		copy(buf, data)
		copy(buf[len(data):], p)
		if len(data) > 0 {
			l.Data = buf[:len(data):len(data)]
		}
		if len(p) > 0 {
			l.Extensions = buf[len(data):]
		}
	}
	return nil
}

func appendedAtNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

func varintLen(x int64) int {
	ux := uint64(x) << 1
	if x < 0 {
		ux = ^ux
	}
	return uvarintLen(ux)
}

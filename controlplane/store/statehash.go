package store

import (
	"sync"

	"github.com/cespare/xxhash/v2"
)

// The state hash lets servers find out that their states drifted apart
// (issue 9 item 4b), as etcd's corruption check does: two servers that
// applied the same log must hold the same bytes, and a hash of everything
// stored, taken at the same applied index, says whether they do.
//
// Hashing the whole store at a check would stop applies for as long as
// reading every object takes (a tenth of a second or more at 100,000
// pods), so the store keeps the hash as it goes: the sum, modulo 2^64, of
// a hash of each stored object's resource and bytes. A write adds the new
// object's hash and subtracts the old one's; order does not matter, so a
// restored snapshot gives the same sum as the entries it stands for.
// Recent sums are kept by index, so a check can compare servers at one
// index while they apply at their own pace.

// hashLogSize is how many recent applied entries' sums are kept: enough
// for a server thousands of entries ahead of the one asking.
const hashLogSize = 8192

// hashJSON is the part of the state hash of a stored object of t whose
// JSON is raw. An entry keeps its own (entry.sum), so that replacing or
// removing it needs no JSON.
func hashJSON(t *table, raw []byte) uint64 {
	var d xxhash.Digest
	d.Reset()
	_, _ = d.WriteString(t.res.Plural)
	_, _ = d.Write([]byte{0})
	_, _ = d.Write(raw)
	return d.Sum64()
}

type hashRec struct{ index, sum uint64 }

// hashLog is the state hash after each recently applied entry.
type hashLog struct {
	mu   sync.Mutex
	recs []hashRec // a ring, oldest at next once full
	next int
	// floor is the oldest index the log can answer for, with the sum at
	// it: the start, the last restored snapshot, or the record the ring
	// overwrote last.
	floor, floorSum uint64
}

func (l *hashLog) reset(index, sum uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs, l.next = l.recs[:0], 0
	l.floor, l.floorSum = index, sum
}

func (l *hashLog) record(index, sum uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.recs) < hashLogSize {
		l.recs = append(l.recs, hashRec{index, sum})
		return
	}
	old := l.recs[l.next]
	l.floor, l.floorSum = old.index, old.sum
	l.recs[l.next] = hashRec{index, sum}
	l.next = (l.next + 1) % hashLogSize
}

// at returns the sum after the last entry at or below index, if the log
// still covers index. The caller makes sure index has been applied.
func (l *hashLog) at(index uint64) (uint64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if index < l.floor {
		return 0, false
	}
	sum := l.floorSum
	best := l.floor
	for _, r := range l.recs {
		if r.index <= index && r.index >= best {
			best, sum = r.index, r.sum
		}
	}
	return sum, true
}

// StateHash returns the hash of the stored state as it was right after
// the raft entry at index was applied, and whether this store can still
// tell: it keeps the last few thousand entries' hashes. The caller must
// have waited until index was applied (raft applies entries that are not
// the store's, such as configuration changes, without calling Apply).
// Servers that applied the same log return the same hash at the same
// index.
func (s *Store) StateHash(index uint64) (uint64, bool) {
	return s.hashes.at(index)
}

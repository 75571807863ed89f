package store

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// handoff passes the object behind a create command from Store.CreateCmd
// to Apply on the same server, so that the leader does not decode a
// command it has just encoded. It is keyed by the command's bytes
// themselves (their address and length): raft hands the leader's Apply the
// very slice the caller passed to it, while a follower, or the leader
// reading the entry back from its log, gets a copy and decodes. Either way
// the store ends up with equal objects, because the object handed over is
// canonical (see canonicalize).
type handoff struct {
	n  atomic.Int32 // len(m), read by Apply without the lock
	mu sync.Mutex
	m  map[*byte]handed
}

type handed struct {
	cmd []byte
	obj api.Object
}

func (h *handoff) put(cmd []byte, obj api.Object) {
	h.mu.Lock()
	if h.m == nil {
		h.m = make(map[*byte]handed)
	}
	h.m[unsafe.SliceData(cmd)] = handed{cmd: cmd, obj: obj}
	h.n.Store(int32(len(h.m)))
	h.mu.Unlock()
}

// take returns and forgets the object handed over with exactly these
// bytes, or nil.
func (h *handoff) take(cmd []byte) api.Object {
	if h.n.Load() == 0 || len(cmd) == 0 {
		return nil
	}
	key := unsafe.SliceData(cmd)
	h.mu.Lock()
	defer h.mu.Unlock()
	e, ok := h.m[key]
	if !ok || len(e.cmd) != len(cmd) {
		return nil
	}
	delete(h.m, key)
	h.n.Store(int32(len(h.m)))
	return e.obj
}

func (h *handoff) forget(cmd []byte) {
	if h.n.Load() == 0 || len(cmd) == 0 {
		return
	}
	h.mu.Lock()
	delete(h.m, unsafe.SliceData(cmd))
	h.n.Store(int32(len(h.m)))
	h.mu.Unlock()
}

// CreateCmd builds the same command as the package's CreateCmd, for this
// server's own raft node to apply. While the caller waits for that Apply,
// the store keeps the prepared object, so that Apply stores it instead of
// decoding the command again; the object is made canonical first, equal to
// what every other server decodes. obj, and what it points to, must be the
// caller's own and must not change once the command was applied (the store
// may keep its maps and slices). Call Release(cmd) once Apply returned,
// whatever its outcome.
func (s *Store) CreateCmd(obj api.Object) ([]byte, error) {
	r := api.ResourceOf(obj)
	if r == nil {
		return nil, fmt.Errorf("create %T: %w", obj, ErrUnknownResource)
	}
	c := shallowCopy(obj)
	prepareCreate(r, c)
	c.GetObjectMeta().ResourceVersion = rvPlaceholder
	// Canonical before it is encoded: the command then encodes exactly the
	// object kept (canonicalization never changes an encoding anyway).
	keep := canonicalize(c)
	cmd, err := encodeCreate(r, c)
	if err != nil {
		return nil, err
	}
	if keep {
		s.handoff.put(cmd, c)
	}
	return cmd, nil
}

// Release ends the hand-over of a command from CreateCmd: if it has not
// been applied yet, Apply decodes it as followers do.
func (s *Store) Release(cmd []byte) { s.handoff.forget(cmd) }

package client

import (
	"strconv"
	"sync/atomic"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// Latest keeps the newest version seen of one object, from a watch and
// from the caller's own writes, so that the next write can start from it
// without a read: a watch may deliver an older version after a write
// returned a newer one, and the older is not kept. Safe for concurrent
// use.
type Latest[T api.Object] struct {
	v atomic.Pointer[T]
}

// See keeps obj unless a version at least as new is kept.
func (l *Latest[T]) See(obj T) {
	rv, err := strconv.ParseUint(obj.GetObjectMeta().ResourceVersion, 10, 64)
	if err != nil {
		return
	}
	for {
		old := l.v.Load()
		if old != nil {
			if orv, err := strconv.ParseUint((*old).GetObjectMeta().ResourceVersion, 10, 64); err == nil && orv >= rv {
				return
			}
		}
		if l.v.CompareAndSwap(old, &obj) {
			return
		}
	}
}

// Forget drops what is kept (the object was deleted).
func (l *Latest[T]) Forget() { l.v.Store(nil) }

// Copy is a private deep copy of what is kept, for the caller to change;
// ok is false when nothing is.
func (l *Latest[T]) Copy() (out T, ok bool, err error) {
	p := l.v.Load()
	if p == nil {
		return out, false, nil
	}
	obj, err := api.DeepCopy(*p)
	if err != nil {
		return out, false, err
	}
	out, ok = obj.(T)
	return out, ok, nil
}

package events

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// Sink writes Events: the API client of the agent, the controllers'
// controller.Client. Both return the stored event (with its
// resourceVersion) and *api.StatusError failures.
type Sink interface {
	Create(ctx context.Context, ev *api.Event) (*api.Event, error)
	Update(ctx context.Context, ev *api.Event) (*api.Event, error)
}

// AsEvent is the answer of a client's Create or Update of an Event as a
// Sink returns it: the stored Event, or the error.
func AsEvent(obj api.Object, err error) (*api.Event, error) {
	if err != nil {
		return nil, err
	}
	ev, ok := obj.(*api.Event)
	if !ok {
		return nil, fmt.Errorf("an event write returned a %T", obj)
	}
	return ev, nil
}

const (
	// DefaultWindow is how long after its last occurrence an event is
	// still counted on: Kubernetes' aggregation window.
	DefaultWindow = 10 * time.Minute
	// maxKeys bounds the memory of recent events; past it, the ones last
	// seen before the window are forgotten, then the oldest.
	maxKeys = 4096
)

// Correlator aggregates repeated events. It is safe for concurrent use;
// events of different keys are written concurrently, those of one key one
// at a time.
type Correlator struct {
	sink Sink
	now  func() time.Time
	// Window: a repeat within it of the last occurrence counts on the
	// stored Event; a later one starts a new Event.
	Window time.Duration
	// MinInterval: a repeat within it of the last write is counted in
	// memory only; the next write after it (a repeat, or Flush) carries
	// the count.
	MinInterval time.Duration

	mu   sync.Mutex
	seen map[string]*entry
}

// entry is what is known of one key: the stored Event and the repeats not
// written yet.
type entry struct {
	mu        sync.Mutex
	stored    *api.Event // nil until created
	lastSeen  time.Time  // by the Correlator's clock, for the window
	lastTime  *api.Time  // the last repeat's lastTimestamp, to be written
	lastWrite time.Time
	pending   int32 // repeats since the last write
}

// New returns a Correlator writing to sink with the clock now (time.Now
// when nil), DefaultWindow and no MinInterval.
func New(sink Sink, now func() time.Time) *Correlator {
	if now == nil {
		now = time.Now
	}
	return &Correlator{sink: sink, now: now, Window: DefaultWindow, seen: map[string]*entry{}}
}

// Key is what makes two events the same one: the involved object, reason,
// message, source and type (not the names, times or counts).
func Key(ev *api.Event) string {
	o := ev.InvolvedObject
	return strings.Join([]string{o.Kind, o.APIVersion, o.Namespace, o.Name, o.UID, o.FieldPath,
		ev.Reason, ev.Message, ev.Source.Component, ev.Source.Host, ev.Type}, "\x00")
}

// Record writes ev, or counts it on the Event already stored for its key.
// ev.Count (1 when 0) is how many occurrences ev stands for: a caller that
// held repeats (the agent, while the control plane was away) passes them
// as one. It returns the Event as stored, or nil when the repeat is held:
// within MinInterval of the last write, or when writing it failed for a
// reason other than the Event being gone (the repeat is counted then, and
// Flush writes it: the caller must not record it again). A stored Event
// that is gone (expired) or was changed by someone else is replaced by a
// new one. An error means nothing was recorded.
func (c *Correlator) Record(ctx context.Context, ev *api.Event) (*api.Event, error) {
	now := c.now()
	k := Key(ev)
	c.mu.Lock()
	e := c.seen[k]
	if e == nil {
		c.prune(now)
		e = &entry{}
		c.seen[k] = e
	}
	c.mu.Unlock()

	e.mu.Lock()
	defer e.mu.Unlock()
	// The time is read again under the entry's lock: read before it, a
	// Record that waited for the lock would be older than the write it
	// waited for, and a repeat with no interval to keep would be held
	// for Flush (20 concurrent repeats wrote a count of 19).
	now = c.now()
	if e.stored != nil && now.Sub(e.lastSeen) < c.Window {
		e.lastSeen = now
		e.pending += max(ev.Count, 1)
		e.lastTime = ev.LastTimestamp
		if e.lastTime == nil {
			e.lastTime = api.NewTime(now)
		}
		if now.Sub(e.lastWrite) < c.MinInterval {
			return nil, nil
		}
		out, err := c.writePending(ctx, e)
		if err == nil || !replaceable(err) {
			return out, nil // a failure leaves the repeat to Flush
		}
	}
	if ev.FirstTimestamp == nil {
		ev.FirstTimestamp = api.NewTime(now)
	}
	if ev.LastTimestamp == nil {
		ev.LastTimestamp = ev.FirstTimestamp
	}
	if ev.Count == 0 {
		ev.Count = 1
	}
	out, err := c.sink.Create(ctx, ev)
	if err != nil {
		return nil, err
	}
	e.stored, e.lastSeen, e.lastWrite, e.pending = out, now, now, 0
	return out, nil
}

// writePending adds the held repeats to the stored Event. The caller
// holds e.mu.
func (c *Correlator) writePending(ctx context.Context, e *entry) (*api.Event, error) {
	// A shallow copy with new top-level values: the stored Event may be
	// the store's own object (the controllers' client hands those out).
	cp := *e.stored
	cp.Count = max(cp.Count, 1) + e.pending
	cp.LastTimestamp = e.lastTime
	out, err := c.sink.Update(ctx, &cp)
	if err != nil {
		if replaceable(err) {
			e.stored, e.pending = nil, 0
		}
		return nil, err
	}
	e.stored, e.lastWrite, e.pending = out, c.now(), 0
	return out, nil
}

// replaceable reports whether a failed update means a new Event is due:
// the stored one expired or someone else changed it.
func replaceable(err error) bool {
	return api.IsNotFound(err) || api.IsConflict(err)
}

// Flush writes the repeats held back by MinInterval whose interval has
// passed; the agent and the controllers call it every few seconds.
// Writes that failed are tried again by the next Flush.
func (c *Correlator) Flush(ctx context.Context) error {
	now := c.now()
	c.mu.Lock()
	var due []*entry
	for _, e := range c.seen {
		due = append(due, e)
	}
	c.mu.Unlock()
	var errs []error
	for _, e := range due {
		e.mu.Lock()
		if e.stored != nil && e.pending > 0 && now.Sub(e.lastWrite) >= c.MinInterval {
			if _, err := c.writePending(ctx, e); err != nil && !replaceable(err) {
				errs = append(errs, err)
			}
		}
		e.mu.Unlock()
	}
	return errors.Join(errs...)
}

// prune forgets keys when there are too many: first those past the
// window, then any (they start a new Event if they come again). The
// caller holds c.mu.
func (c *Correlator) prune(now time.Time) {
	if len(c.seen) < maxKeys {
		return
	}
	for k, e := range c.seen {
		if e.mu.TryLock() {
			if now.Sub(e.lastSeen) >= c.Window && e.pending == 0 {
				delete(c.seen, k)
			}
			e.mu.Unlock()
		}
	}
	for k := range c.seen {
		if len(c.seen) < maxKeys {
			break
		}
		delete(c.seen, k)
	}
}

package client

import (
	"context"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// ListWatchHandler receives what ListWatch sees. Every field may be nil.
type ListWatchHandler struct {
	// Reset gets a fresh list: the whole current set.
	Reset func(objs []api.Object)
	// Event gets each ADDED, MODIFIED or DELETED object of the watch.
	Event func(typ string, obj api.Object)
	// Error is told of each failed list, watch or watch stream (not of
	// the 410s ListWatch handles by listing again).
	Error func(op string, err error)
}

// Pauses between failed attempts: from listWatchMinWait doubling to
// listWatchMaxWait, so a server that is away is not hammered and one
// that is back is found soon.
const (
	listWatchMinWait = 100 * time.Millisecond
	listWatchMaxWait = 5 * time.Second
)

// ListWatch keeps a view of r (in ns, "" for all) until ctx ends: a list
// handed to Reset, then watch events handed to Event, watching again from
// the last version seen when a stream ends and listing again when the
// server no longer has that version (410 Gone). It is how agents and the
// simulator follow the objects they act on.
func (c *Client) ListWatch(ctx context.Context, r *api.Resource, ns string, opts ListOptions, h ListWatchHandler) {
	wait := listWatchMinWait
	pause := func() bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(wait):
		}
		wait = min(wait*2, listWatchMaxWait)
		return true
	}
	fail := func(op string, err error) {
		if h.Error != nil && ctx.Err() == nil {
			h.Error(op, err)
		}
	}
	rv := ""
	for ctx.Err() == nil {
		if rv == "" {
			objs, listRV, err := c.List(ctx, r, ns, opts)
			if err != nil {
				fail("list", err)
				if !pause() {
					return
				}
				continue
			}
			if h.Reset != nil {
				h.Reset(objs)
			}
			rv = listRV
		}
		ch, err := c.Watch(ctx, r, ns, opts, rv)
		if err != nil {
			if api.IsGone(err) {
				rv = ""
				continue
			}
			fail("watch", err)
			if !pause() {
				return
			}
			continue
		}
		events := 0
		for ev := range ch {
			events++
			switch ev.Type {
			case EventAdded, EventModified, EventDeleted:
				rv = ev.Object.GetObjectMeta().ResourceVersion
				if h.Event != nil {
					h.Event(ev.Type, ev.Object)
				}
			case EventBookmark:
				rv = ev.Object.GetObjectMeta().ResourceVersion
			case EventError:
				if api.IsGone(ev.Err) {
					rv = "" // fell behind the server's window: list again
				} else {
					fail("watch stream", ev.Err)
				}
			}
		}
		// A stream that ends at once, again and again, must not become
		// a busy loop.
		if events > 0 {
			wait = listWatchMinWait
		} else if !pause() {
			return
		}
	}
}

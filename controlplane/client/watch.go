package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// Watch event types.
const (
	EventAdded    = "ADDED"
	EventModified = "MODIFIED"
	EventDeleted  = "DELETED"
	EventBookmark = "BOOKMARK"
	EventError    = "ERROR"
)

// WatchEvent is one change. For ERROR events Object is nil and Err is set:
// an *api.StatusError from the server (api.IsGone means the watch fell
// behind the server's window: list again and watch from the new
// resourceVersion), or an error reading the stream. BOOKMARK events carry
// an object with only its resourceVersion set, so the watcher can resume
// from there.
type WatchEvent struct {
	Type   string
	Object api.Object
	Err    error
}

// watchLine is one line of a watch reply, the object left undecoded until
// the type says what it is.
type watchLine struct {
	Type   string          `json:"type"`
	Object json.RawMessage `json:"object"`
}

// Watch streams changes of r in ns ("" for all namespaces) after
// resourceVersion rv. Without rv the server first sends an ADDED event for
// every current object. The channel is closed when the server ends the
// stream or ctx is done; the caller drains it or cancels ctx. The client's
// request timeout does not apply to watches.
func (c *Client) Watch(ctx context.Context, r *api.Resource, ns string, opts ListOptions, rv string) (<-chan WatchEvent, error) {
	q := listQuery(opts)
	q.Set("watch", "true")
	if rv != "" {
		q.Set("resourceVersion", rv)
	}
	if !r.Namespaced {
		ns = ""
	}
	resp, err := c.send(ctx, http.MethodGet, PathFor(r, ns, "", ""), q, nil)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return nil, ErrorFromReply(resp.StatusCode, data)
	}
	ch := make(chan WatchEvent, 16)
	go c.readWatch(ctx, r, resp.Body, ch)
	return ch, nil
}

func (c *Client) readWatch(ctx context.Context, r *api.Resource, body io.ReadCloser, ch chan<- WatchEvent) {
	defer close(ch)
	defer body.Close()
	dec := json.NewDecoder(body)
	send := func(ev WatchEvent) bool {
		select {
		case ch <- ev:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for {
		var line watchLine
		if err := dec.Decode(&line); err != nil {
			if errors.Is(err, io.EOF) || ctx.Err() != nil {
				return
			}
			send(WatchEvent{Type: EventError, Err: fmt.Errorf("%w: watch %s: %w", ErrBadReply, r.Plural, err)})
			return
		}
		ev := WatchEvent{Type: line.Type}
		switch line.Type {
		case EventError:
			ev.Err = ErrorFromReply(http.StatusInternalServerError, line.Object)
			// The Status inside carries its own code (410 for Gone).
		case EventAdded, EventModified, EventDeleted, EventBookmark:
			obj, err := DecodeObject(r, line.Object)
			if err != nil {
				ev = WatchEvent{Type: EventError, Err: err}
			} else {
				ev.Object = obj
			}
		default:
			// An event type a newer server added: skip it rather than
			// hand callers something they cannot act on.
			continue
		}
		if !send(ev) {
			return
		}
	}
}

package client

import (
	"bufio"
	"bytes"
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

	// fast says Object was cut out of raw, the whole line, by its
	// position rather than decoded; the caller decodes raw when Object
	// turns out not to be one JSON value.
	fast bool
	raw  []byte
}

// watchLineReader reads a watch reply one line (one event) at a time.
// Every watcher decodes every event it gets, so on a busy stream this is
// the client's main cost: json.Decoder scans each object twice (finding
// its end, then decoding it into the RawMessage) before the typed decode
// scans it again. The server writes each event on a line of its own as
// {"type":"T","object":OBJ}, so the object is the line between that
// prefix and the closing brace; anything else is decoded as JSON.
type watchLineReader struct {
	br  *bufio.Reader
	buf []byte
}

// next returns the next event line. Its slices are valid until the next
// call.
func (lr *watchLineReader) next() (watchLine, error) {
	for {
		b, err := lr.br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A line longer than the buffer: gather it.
			lr.buf = append(lr.buf[:0], b...)
			for errors.Is(err, bufio.ErrBufferFull) {
				b, err = lr.br.ReadSlice('\n')
				lr.buf = append(lr.buf, b...)
			}
			b = lr.buf
		}
		if err != nil && (!errors.Is(err, io.EOF) || len(bytes.TrimSpace(b)) == 0) {
			return watchLine{}, err
		}
		b = bytes.TrimSpace(b)
		if len(b) == 0 {
			continue
		}
		if l, ok := fastWatchLine(b); ok {
			return l, nil
		}
		return slowWatchLine(b)
	}
}

const (
	watchLinePrefix = `{"type":"`
	watchLineObject = `","object":`
)

// fastWatchLine cuts a line of the server's own form into its type and
// object without decoding it. Only event types a client acts on on the
// hot path take it.
func fastWatchLine(b []byte) (watchLine, bool) {
	rest, ok := bytes.CutPrefix(b, []byte(watchLinePrefix))
	if !ok {
		return watchLine{}, false
	}
	typ, rest, ok := bytes.Cut(rest, []byte(watchLineObject))
	if !ok || len(rest) < 2 || rest[len(rest)-1] != '}' {
		return watchLine{}, false
	}
	var t string
	switch string(typ) {
	case EventAdded:
		t = EventAdded
	case EventModified:
		t = EventModified
	case EventDeleted:
		t = EventDeleted
	default:
		return watchLine{}, false
	}
	return watchLine{Type: t, Object: rest[:len(rest)-1], fast: true, raw: b}, true
}

// slowWatchLine decodes a line as JSON.
func slowWatchLine(b []byte) (watchLine, error) {
	var l watchLine
	if err := json.Unmarshal(b, &l); err != nil {
		return watchLine{}, err
	}
	return l, nil
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
	lr := watchLineReader{br: bufio.NewReaderSize(body, 32<<10)}
	send := func(ev WatchEvent) bool {
		select {
		case ch <- ev:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for {
		line, err := lr.next()
		if err != nil {
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
			if err != nil && line.fast {
				// The cut was wrong (say, a field after "object"):
				// read the line as the JSON it is. A line that is not
				// JSON ends the watch, as any other.
				l, lerr := slowWatchLine(line.raw)
				if lerr != nil {
					send(WatchEvent{Type: EventError, Err: fmt.Errorf("%w: watch %s: %w", ErrBadReply, r.Plural, lerr)})
					return
				}
				obj, err = DecodeObject(r, l.Object)
			}
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

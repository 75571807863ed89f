package server

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/auth"
	"github.com/outpost-edge/outpost/controlplane/core"
	"github.com/outpost-edge/outpost/controlplane/store"
	"github.com/outpost-edge/outpost/internal/plant"
	"github.com/outpost-edge/outpost/raftstore"
)

// notOlderThanTimeout bounds the wait for this server to apply the
// resourceVersion a read asked for at least.
const notOlderThanTimeout = 3 * time.Second

// Read modes of a get, list or watch, chosen by readModeOf.
const (
	// readLatest is a linearizable read: the leader's commit index, then
	// the local store once it has applied that far.
	readLatest = iota
	// readAny serves the local store as it is, possibly stale.
	readAny
	// readNotOlder serves the local store once it has applied a given
	// resourceVersion.
	readNotOlder
)

// readModeOf reads the Kubernetes read semantics off the query: no
// resourceVersion asks for the most recent state (a quorum read),
// resourceVersion=0 for any state (this server's own), resourceVersion=N
// for a state not older than N. consistent=true forces a quorum read,
// consistent=false allows the server's own state. Serving the local state
// by default made a lone restarted server answer an empty list with 200,
// and a follower answer values several writes old.
func readModeOf(q url.Values) (mode int, rv uint64, err error) {
	switch q.Get("consistent") {
	case "true", "1", "True", "TRUE":
		return readLatest, 0, nil
	case "false", "0", "False", "FALSE":
		return readAny, 0, nil
	}
	v, ok := q["resourceVersion"]
	if !ok || len(v) == 0 || v[0] == "" {
		return readLatest, 0, nil
	}
	if v[0] == "0" {
		return readAny, 0, nil
	}
	rv, err = strconv.ParseUint(v[0], 10, 64)
	if err != nil {
		return 0, 0, api.NewBadRequest("resourceVersion: " + strconv.Quote(v[0]) + " is not a resource version (a decimal number)")
	}
	return readNotOlder, rv, nil
}

// prepareRead waits until the local store may serve a read of the given
// mode.
func (s *Server) prepareRead(ctx context.Context, mode int, rv uint64) error {
	switch mode {
	case readLatest:
		return s.consistentRead(ctx)
	case readNotOlder:
		if s.node.AppliedIndex() >= rv {
			return nil
		}
		ctx, cancel := context.WithTimeout(ctx, notOlderThanTimeout)
		defer cancel()
		if err := s.node.WaitApplied(ctx, rv); err != nil {
			return api.NewTimeout("Too large resource version: " + strconv.FormatUint(rv, 10) + ", current: " + strconv.FormatUint(s.node.AppliedIndex(), 10))
		}
	}
	return nil
}

// consistentRead returns once the local store has applied everything the
// leader had committed when it was called, which makes the read that
// follows linearizable. It waits on raftstore's applied index, not the
// store's: the read index may point at a read barrier or a configuration
// entry, which the store never sees. Without a leader it is a 503: this
// server cannot know whether its copy is current.
func (s *Server) consistentRead(ctx context.Context) error {
	if plant.On(plant.StaleRead) {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, core.ReadIndexTimeout)
	defer cancel()
	if s.node.Leader().ID == "" {
		// A server that has just started, or whose leader has just gone,
		// may learn of one within an election; past that, waiting longer
		// only delays the answer.
		wctx, wcancel := context.WithTimeout(ctx, s.leaderWait())
		_, err := s.node.WaitForLeader(wctx)
		wcancel()
		if err != nil && s.node.Leader().ID == "" {
			if errors.Is(err, raftstore.ErrClosed) {
				return raftError(err, "serve the read")
			}
			return s.noLeaderForRead(ctx)
		}
	}
	idx, err := s.node.ReadIndex(ctx)
	if err != nil {
		// A leader that lost its leadership while confirming it leaves the
		// barrier entry's outcome unknown; for a read that only means no
		// leader could vouch for the state.
		if errors.Is(err, raftstore.ErrNoLeader) || errors.Is(err, raftstore.ErrNotLeader) || errors.Is(err, raftstore.ErrUnknownOutcome) {
			return s.noLeaderForRead(ctx)
		}
		return raftError(err, "confirm the commit index for a consistent read")
	}
	if err := s.node.WaitApplied(ctx, idx); err != nil {
		return api.NewTimeout("waiting for this server to apply index " + strconv.FormatUint(idx, 10) + ": " + err.Error())
	}
	return nil
}

// noLeaderForRead is the 503 of a read that asks for the latest state
// while the cluster has no leader.
func (s *Server) noLeaderForRead(ctx context.Context) error {
	if s.node.Removed(ctx) {
		return unavailable(s.noLeader(ctx), 30)
	}
	return unavailable("cannot serve an up-to-date read: the cluster has no raft leader (an election is under way, "+
		"or fewer than a quorum of servers are up); retry shortly, or add ?resourceVersion=0 to read this server's possibly stale copy", 1)
}

// leaderWait is how long a read waits for a leader this server does not
// know yet: two rounds of heartbeat timeout and election.
func (s *Server) leaderWait() time.Duration {
	hb := s.cfg.HeartbeatTimeout
	if hb <= 0 {
		hb = time.Second // raftstore's default
	}
	el := max(s.cfg.ElectionTimeout, hb)
	return 2 * (hb + el)
}

// raftError turns a raftstore error into the Status to reply with; one
// it does not know is a 503.
func raftError(err error, doing string) error {
	if se := knownRaftError(err, doing); se != nil {
		return se
	}
	return unavailable("cannot "+doing+": "+err.Error(), 1)
}

// knownRaftError is the Status of one of raftstore's errors, or err itself
// when it is a Status already; nil for any other error, whose meaning the
// caller decides (writeOutcome: it may have committed).
func knownRaftError(err error, doing string) error {
	switch {
	case errors.Is(err, raftstore.ErrUnknownOutcome):
		return api.NewTimeout("the write may or may not have been applied (raft leadership changed or the server stopped before it was known to be committed): read the object to find out; " + err.Error())
	case errors.Is(err, raftstore.ErrNoLeader), errors.Is(err, raftstore.ErrNotLeader):
		return unavailable("cannot "+doing+": the cluster has no leader right now; retry shortly ("+err.Error()+")", 1)
	case errors.Is(err, raftstore.ErrClosed):
		return unavailable("cannot "+doing+": the server is shutting down", 1)
	case errors.Is(err, context.DeadlineExceeded):
		return api.NewTimeout("cannot " + doing + " in time: " + err.Error())
	}
	if se, ok := errors.AsType[*api.StatusError](err); ok {
		return se
	}
	return nil
}

func (s *Server) serveGet(w *recorder, r *http.Request, id *auth.Identity, rt *route, q url.Values) {
	if err := s.authorize(id, rt.request(verbGet)); err != nil {
		writeError(w, err)
		return
	}
	mode, rv, err := readModeOf(q)
	if err != nil {
		writeError(w, err)
		return
	}
	if err := s.prepareRead(r.Context(), mode, rv); err != nil {
		writeError(w, err)
		return
	}
	_, raw, err := s.core.Get(rt.res, rt.ns, rt.name)
	if err != nil {
		writeError(w, err)
		return
	}
	writeRaw(w, http.StatusOK, raw)
}

// listOptions parses the selectors of a list or watch; a bad one is 400.
func listOptions(r *api.Resource, q url.Values) (store.ListOptions, error) {
	var opts store.ListOptions
	if s := q.Get("labelSelector"); s != "" {
		sel, err := api.ParseSelector(s)
		if err != nil {
			return opts, api.NewBadRequest("labelSelector: " + err.Error())
		}
		opts.Label = sel
	}
	if s := q.Get("fieldSelector"); s != "" {
		sel, err := api.ParseFieldSelector(r, s)
		if err != nil {
			return opts, api.NewBadRequest("fieldSelector: " + err.Error())
		}
		opts.Field = sel
	}
	return opts, nil
}

// listPrefixes are the bytes before the resourceVersion of each list
// reply: `{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"`.
var listPrefixes = func() map[*api.Resource]string {
	m := map[*api.Resource]string{}
	for _, r := range api.Resources {
		m[r] = `{"kind":"` + r.Kind + `List","apiVersion":"` + r.APIVersion() + `","metadata":{"resourceVersion":"`
	}
	return m
}()

func (s *Server) serveList(w *recorder, r *http.Request, id *auth.Identity, rt *route, q url.Values) {
	if err := s.authorize(id, rt.request(verbList)); err != nil {
		writeError(w, err)
		return
	}
	opts, err := listOptions(rt.res, q)
	if err != nil {
		writeError(w, err)
		return
	}
	mode, minRV, err := readModeOf(q)
	if err != nil {
		writeError(w, err)
		return
	}
	if err := s.prepareRead(r.Context(), mode, minRV); err != nil {
		writeError(w, err)
		return
	}
	items, rv, err := s.core.ListItems(rt.res, rt.ns, opts)
	if err != nil {
		writeError(w, err)
		return
	}
	// The items are the store's encodings, joined without decoding, and
	// written a piece at a time: a list of every pod at scale is hundreds
	// of MB, which the reply would otherwise hold whole.
	b := make([]byte, 0, min(listChunkBytes*2, 4<<10+items.Len()*2<<10))
	b = append(b, listPrefixes[rt.res]...)
	b = strconv.AppendUint(b, rv, 10)
	b = append(b, `"},"items":[`...)
	streaming := false
	for i := range items.Len() {
		if i > 0 {
			b = append(b, ',')
		}
		if b, err = items.AppendJSON(b, i); err != nil {
			if !streaming {
				writeError(w, err)
				return
			}
			// Part of the reply is out: cut it off, so that the client
			// sees a broken reply and not a short list.
			s.log.Error("list cut off", "resource", rt.res.Plural, "err", err)
			panic(http.ErrAbortHandler)
		}
		if len(b) >= listChunkBytes {
			if !streaming {
				w.Header()["Content-Type"] = headerJSON
				w.WriteHeader(http.StatusOK)
				streaming = true
			}
			if _, err := w.Write(b); err != nil {
				return
			}
			b = b[:0]
		}
	}
	b = append(b, "]}"...)
	if !streaming {
		writeRaw(w, http.StatusOK, b)
		return
	}
	_, _ = w.Write(b)
}

// listChunkBytes is how much of a list reply is gathered before it is
// written; a reply shorter than that goes out whole, with its length.
const listChunkBytes = 256 << 10

// watchFlushBytes is how much a watch buffers before it writes even though
// more events are waiting; below it, events go out as soon as none is
// waiting, so each one reaches the client without delay.
const watchFlushBytes = 64 << 10

func (s *Server) serveWatch(w *recorder, r *http.Request, id *auth.Identity, rt *route, q url.Values) {
	if err := s.authorize(id, rt.request(verbWatch)); err != nil {
		writeError(w, err)
		return
	}
	opts, err := listOptions(rt.res, q)
	if err != nil {
		writeError(w, err)
		return
	}
	var fromRV uint64
	sendInitial := true
	if v := q.Get("resourceVersion"); v != "" && v != "0" {
		fromRV, err = strconv.ParseUint(v, 10, 64)
		if err != nil {
			writeError(w, api.NewBadRequest("resourceVersion: "+strconv.Quote(v)+" is not a resource version (a decimal number)"))
			return
		}
		sendInitial = false
	} else if v == "" {
		// No resourceVersion: the watch starts from the current state,
		// which on a follower or a server without a leader needs a quorum
		// read first (resourceVersion=0 takes this server's own state).
		if mode, _, _ := readModeOf(q); mode == readLatest {
			if err := s.consistentRead(r.Context()); err != nil {
				writeError(w, err)
				return
			}
		}
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	// Close ends watches at once: they would otherwise hold the HTTP
	// server's graceful shutdown until its deadline.
	stop := context.AfterFunc(s.stopCtx, cancel)
	defer stop()
	if v := q.Get("timeoutSeconds"); v != "" {
		secs, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			writeError(w, api.NewBadRequest("timeoutSeconds: "+strconv.Quote(v)+" is not a whole number of seconds"))
			return
		}
		if secs > 0 {
			var cancelT context.CancelFunc
			ctx, cancelT = context.WithTimeout(ctx, time.Duration(secs)*time.Second)
			defer cancelT()
		}
	}
	ch, err := s.core.Watch(ctx, rt.res, rt.ns, opts, fromRV, sendInitial)
	if err != nil {
		writeError(w, err)
		return
	}
	h := w.Header()
	h["Content-Type"] = headerJSON
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	w.Flush()
	buf := make([]byte, 0, 4096)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				return
			}
			buf = appendWatchEvent(buf, &ev)
			last := ev.Type == store.Error
			if !last && len(ch) > 0 && len(buf) < watchFlushBytes {
				continue
			}
			if _, err := w.Write(buf); err != nil {
				return
			}
			w.Flush()
			if last {
				return
			}
			if cap(buf) > 4*watchFlushBytes {
				buf = make([]byte, 0, 4096)
			} else {
				buf = buf[:0]
			}
		case <-ctx.Done():
			return
		}
	}
}

// appendWatchEvent appends one JSON line: {"type":"ADDED","object":{...}}.
func appendWatchEvent(b []byte, ev *store.WatchEvent) []byte {
	b = append(b, `{"type":"`...)
	b = append(b, ev.Type...)
	b = append(b, `","object":`...)
	if len(ev.Raw) > 0 {
		b = append(b, ev.Raw...)
	} else {
		b = append(b, "null"...)
	}
	return append(b, "}\n"...)
}

package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
)

const contentTypeJSON = "application/json"

// bodyReadTimeout bounds the reading of a request body.
var bodyReadTimeout = 30 * time.Second

// headerJSON is shared by every JSON reply so that setting the header does
// not allocate a slice per request.
var headerJSON = []string{contentTypeJSON}

// writeRaw replies with JSON bytes the store (or an encoder) produced.
func writeRaw(w http.ResponseWriter, code int, body []byte) {
	h := w.Header()
	h["Content-Type"] = headerJSON
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

// writeJSON encodes v and replies with it.
func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := api.Marshal(v)
	if err != nil {
		writeError(w, api.NewInternalError(fmt.Errorf("encoding reply: %w", err)))
		return
	}
	writeRaw(w, code, b)
}

// statusOf turns any error into the Status to reply with: a StatusError as
// it is, a cancelled or timed-out context as 504, anything else as 500.
func statusOf(err error) *api.StatusError {
	if se, ok := errors.AsType[*api.StatusError](err); ok {
		return se
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return api.NewTimeout("the request did not finish in time: " + err.Error())
	case errors.Is(err, context.Canceled):
		return api.NewTimeout("the request was cancelled: " + err.Error())
	}
	return api.NewInternalError(err)
}

// writeError replies with the Status of err.
func writeError(w http.ResponseWriter, err error) {
	se := statusOf(err)
	if d := se.Status.Details; d != nil && d.RetryAfterSeconds > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(d.RetryAfterSeconds)))
	}
	b, mErr := api.Marshal(&se.Status)
	if mErr != nil {
		b = []byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"InternalError","code":500}`)
	}
	code := se.Code()
	if code < 400 || code > 599 {
		code = http.StatusInternalServerError
	}
	writeRaw(w, code, b)
}

// unavailable is a 503 that tells the client when to try again.
func unavailable(msg string, retryAfter int32) *api.StatusError {
	se := api.NewServiceUnavailable(msg)
	se.Status.Details = &api.StatusDetails{RetryAfterSeconds: retryAfter}
	return se
}

// statusErr builds a failure Status with any code and reason.
func statusErr(code int, reason, msg string) *api.StatusError {
	se := api.NewBadRequest(msg)
	se.Status.Code = int32(code)
	se.Status.Reason = reason
	return se
}

// unsupportedMedia is the 415 for a body that is not JSON.
func unsupportedMedia(ct string) *api.StatusError {
	if isYAML(ct) {
		return statusErr(http.StatusUnsupportedMediaType, api.ReasonUnsupportedMedia,
			fmt.Sprintf("Content-Type %q is not accepted: the API takes JSON only (the outpost CLI converts YAML manifests)", ct))
	}
	return statusErr(http.StatusUnsupportedMediaType, api.ReasonUnsupportedMedia,
		fmt.Sprintf("Content-Type %q is not accepted: send application/json", ct))
}

func isYAML(ct string) bool {
	return strings.Contains(strings.ToLower(ct), "yaml")
}

// checkContentType accepts JSON or no Content-Type at all.
func checkContentType(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	if ct == "" || ct == contentTypeJSON {
		return nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err == nil && mt == contentTypeJSON {
		return nil
	}
	return unsupportedMedia(ct)
}

// readBody reads the whole body up to limit bytes; over it is 413.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) (_ []byte, err error) {
	if err := checkContentType(r); err != nil {
		return nil, err
	}
	if r.ContentLength > limit {
		return nil, tooLarge(r.ContentLength, limit)
	}
	// A client that sends its body slowly must not hold a handler for
	// ever. On HTTP/1 a read deadline on the connection does it, lifted
	// again before the (possibly long) reply. On HTTP/2 a read deadline is
	// two messages to the connection's serve goroutine, whose queue is full
	// under load (it cost more than decoding the body); a timer that closes
	// the body ends a stalled read alike, without that round trip.
	var stalled atomic.Bool
	if r.ProtoMajor >= 2 {
		t := time.AfterFunc(bodyReadTimeout, func() {
			stalled.Store(true)
			_ = r.Body.Close()
		})
		defer t.Stop()
	} else {
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Now().Add(bodyReadTimeout))
		defer func() {
			// After a failed read the deadline stays: net/http reads what
			// is left of a short body before it replies, and would wait
			// for the stalled client for ever.
			if err == nil {
				_ = rc.SetReadDeadline(time.Time{})
			}
		}()
	}
	body := http.MaxBytesReader(w, r.Body, limit)
	var buf []byte
	if r.ContentLength > 0 {
		// One exact allocation for the common case of a known length.
		buf = make([]byte, r.ContentLength)
		n, err := io.ReadFull(body, buf)
		if err != nil {
			if stalled.Load() {
				err = os.ErrDeadlineExceeded // what the read says on HTTP/1
			}
			return nil, bodyReadError(err, limit)
		}
		buf = buf[:n]
		// A body longer than it said it was is cut off by net/http, so
		// nothing more needs reading here.
		return buf, nil
	}
	buf, err = io.ReadAll(body)
	if err != nil {
		if stalled.Load() {
			err = os.ErrDeadlineExceeded
		}
		return nil, bodyReadError(err, limit)
	}
	return buf, nil
}

func bodyReadError(err error, limit int64) error {
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return tooLarge(-1, limit)
	}
	return api.NewBadRequest("reading the request body: " + err.Error())
}

func tooLarge(n, limit int64) *api.StatusError {
	if n >= 0 {
		return api.NewRequestTooLarge(fmt.Sprintf("the request body has %d bytes, more than the limit of %d", n, limit))
	}
	return api.NewRequestTooLarge(fmt.Sprintf("the request body is larger than the limit of %d bytes", limit))
}

// addWarnings sets one `Warning: 299 - "..."` header per warning.
func addWarnings(w http.ResponseWriter, warnings []string) {
	if len(warnings) == 0 {
		return
	}
	h := w.Header()
	for _, msg := range warnings {
		h.Add("Warning", "299 - "+quoteWarning(msg))
	}
}

// quoteWarning quotes msg as an HTTP quoted-string: backslash and double
// quote escaped, control characters (which may not appear in a header)
// replaced by spaces.
func quoteWarning(msg string) string {
	var b strings.Builder
	b.Grow(len(msg) + 2)
	b.WriteByte('"')
	for i := 0; i < len(msg); i++ {
		c := msg[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c == 0x7f:
			b.WriteByte(' ')
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

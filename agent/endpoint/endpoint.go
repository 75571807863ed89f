package endpoint

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"runtime/debug"
	"slices"
	"strconv"

	"github.com/outpost-edge/outpost/agent/endpoint/wire"
	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/runtime"
)

// Runtime is what the endpoint needs of the container runtime; every
// runtime.Runtime has it.
type Runtime interface {
	ListContainers(ctx context.Context) ([]runtime.ContainerStatus, error)
	Logs(ctx context.Context, id string, opts runtime.LogOptions, w io.Writer) error
	Exec(ctx context.Context, id string, opts runtime.ExecOptions) (int, error)
	ImportImages(ctx context.Context, archive io.Reader) ([]runtime.Image, error)
}

// Config configures the endpoint's handler.
type Config struct {
	Runtime Runtime
	// Logger receives one line per failed request; nil discards.
	Logger *slog.Logger
	// NodeName is the node this agent runs, for messages and logs.
	NodeName string
	// Summary, when set, gives the latest resource usage readings (GET
	// /stats/summary); Metrics, when set, serves the agent's Prometheus
	// metrics (GET /metrics).
	Summary func() wire.Summary
	Metrics http.Handler
}

// DefaultPort is the port agents serve on unless told otherwise, the
// kubelet's.
const DefaultPort = 10250

type handler struct {
	rt      Runtime
	log     *slog.Logger
	node    string
	summary func() wire.Summary
}

// New returns the endpoint's handler. It authorizes nothing: serve it
// behind TLSConfig, as Serve does.
func New(cfg Config) http.Handler {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &handler{rt: cfg.Runtime, log: log.With("component", "endpoint"), node: cfg.NodeName, summary: cfg.Summary}
	mux := http.NewServeMux()
	if cfg.Summary != nil {
		mux.HandleFunc("/stats/summary", h.method(http.MethodGet, h.serveSummary))
	}
	if cfg.Metrics != nil {
		mux.Handle("/metrics", h.method(http.MethodGet, cfg.Metrics.ServeHTTP))
	}
	mux.HandleFunc("/containerLogs/{ns}/{pod}/{container}", h.method(http.MethodGet, h.serveLogs))
	mux.HandleFunc("/exec/{ns}/{pod}/{container}", h.method(http.MethodPost, h.serveExec))
	mux.HandleFunc("/images", h.method(http.MethodPost, h.serveImages))
	mux.HandleFunc("/portForward/{ns}/{pod}", h.method(http.MethodPost, h.servePortForward))
	mux.HandleFunc("/healthz", h.method(http.MethodGet, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok")
	}))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeStatus(w, statusError(http.StatusNotFound, api.ReasonNotFound, "the agent does not serve "+r.URL.Path))
	})
	return mux
}

// method refuses other methods with a Status rather than the mux's
// plain-text 405.
func (h *handler) method(m string, fn http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != m && !(m == http.MethodGet && r.Method == http.MethodHead) {
			w.Header().Set("Allow", m)
			writeStatus(w, statusError(http.StatusMethodNotAllowed, api.ReasonMethodNotAllowed, r.Method+" is not supported on "+r.URL.Path+"; use "+m))
			return
		}
		fn(w, r)
	}
}

func statusError(code int, reason, msg string) *api.StatusError {
	return &api.StatusError{Status: api.Status{
		TypeMeta: api.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   "Failure", Code: int32(code), Reason: reason, Message: msg,
	}}
}

func badRequest(msg string) *api.StatusError {
	return statusError(http.StatusBadRequest, api.ReasonBadRequest, msg)
}

// writeStatus replies with err as a Status; errors that are not a
// StatusError are a runtime failure: 503 when the runtime is down, else
// 500.
func writeStatus(w http.ResponseWriter, err error) {
	se, ok := errors.AsType[*api.StatusError](err)
	if !ok {
		if errors.Is(err, runtime.ErrUnavailable) {
			se = statusError(http.StatusServiceUnavailable, api.ReasonServiceUnavailable, err.Error())
		} else {
			se = statusError(http.StatusInternalServerError, api.ReasonInternalError, err.Error())
		}
	}
	b, mErr := json.Marshal(&se.Status)
	if mErr != nil {
		b = []byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"InternalError","code":500}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(se.Code())
	_, _ = w.Write(b)
}

// boolQuery reads an optional boolean query parameter.
func boolQuery(q url.Values, name string) (bool, error) {
	v := q.Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, badRequest(fmt.Sprintf("invalid value %q for query parameter %s: want true or false", v, name))
	}
	return b, nil
}

// target is the container a request names.
type target struct{ ns, pod, container string }

func targetOf(r *http.Request) target {
	return target{r.PathValue("ns"), r.PathValue("pod"), r.PathValue("container")}
}

// find returns the container t names: the highest attempt, or with
// previous the one before it.
func (h *handler) find(ctx context.Context, t target, previous bool) (runtime.ContainerStatus, error) {
	all, err := h.rt.ListContainers(ctx)
	if err != nil {
		return runtime.ContainerStatus{}, fmt.Errorf("list containers: %w", err)
	}
	type attempt struct {
		n  int
		st runtime.ContainerStatus
	}
	var found []attempt
	for _, c := range all {
		l := c.Labels
		if l[runtime.LabelPodNamespace] != t.ns || l[runtime.LabelPodName] != t.pod || l[runtime.LabelContainer] != t.container {
			continue
		}
		// A container with a broken attempt label still counts, as the
		// oldest: outpost wrote every label, so this is only defence.
		n, err := strconv.Atoi(l[runtime.LabelAttempt])
		if err != nil {
			n = -1
		}
		found = append(found, attempt{n, c})
	}
	slices.SortFunc(found, func(a, b attempt) int { return cmp.Compare(b.n, a.n) })
	i := 0
	if previous {
		i = 1
	}
	if len(found) == 0 {
		return runtime.ContainerStatus{}, statusError(http.StatusNotFound, api.ReasonNotFound,
			fmt.Sprintf("container %s of pod %s/%s is not on this node", t.container, t.ns, t.pod))
	}
	if i >= len(found) {
		return runtime.ContainerStatus{}, badRequest(fmt.Sprintf("previous terminated container %q in pod %q not found", t.container, t.pod))
	}
	return found[i].st, nil
}

// flushWriter flushes after every write, so a follower sees each line
// as the container writes it. Before the first write it sends the reply
// header, so an error before any output can still be a Status.
type flushWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	started bool
}

func (f *flushWriter) start() {
	if !f.started {
		f.started = true
		f.w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		f.w.Header().Set("X-Content-Type-Options", "nosniff")
		f.w.WriteHeader(http.StatusOK)
	}
}

func (f *flushWriter) Write(p []byte) (int, error) {
	f.start()
	n, err := f.w.Write(p)
	if err != nil {
		return n, err
	}
	if err := f.rc.Flush(); err != nil {
		return n, fmt.Errorf("flush: %w", err)
	}
	return n, nil
}

func (h *handler) serveLogs(w http.ResponseWriter, r *http.Request) {
	t := targetOf(r)
	opts, previous, err := logOptions(r.URL.Query())
	if err != nil {
		writeStatus(w, err)
		return
	}
	c, err := h.find(r.Context(), t, previous)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	fw := &flushWriter{w: w, rc: http.NewResponseController(w)}
	if opts.Follow {
		// The caller learns at once that the stream is open, even if
		// the container has nothing to say yet.
		fw.start()
		_ = fw.rc.Flush()
	}
	if r.Method == http.MethodHead {
		fw.start()
		return
	}
	err = h.rt.Logs(r.Context(), c.ID, opts, fw)
	if err != nil && r.Context().Err() == nil {
		if !fw.started {
			h.fail(w, r, fmt.Errorf("logs of container %s: %w", c.ID, err))
			return
		}
		// Too late for a Status: the caller sees the stream end early.
		h.log.Warn("log stream failed", "container", c.ID, "err", err)
		return
	}
	fw.start()
}

// logOptions reads the query of a logs request.
func logOptions(q url.Values) (opts runtime.LogOptions, previous bool, err error) {
	if opts.Follow, err = boolQuery(q, "follow"); err != nil {
		return opts, false, err
	}
	if opts.Timestamps, err = boolQuery(q, "timestamps"); err != nil {
		return opts, false, err
	}
	if previous, err = boolQuery(q, "previous"); err != nil {
		return opts, false, err
	}
	if v := q.Get("tailLines"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return opts, false, badRequest(fmt.Sprintf("invalid value %q for query parameter tailLines: want a whole number of lines, 0 or more", v))
		}
		if n == 0 {
			// The runtime's 0 means "all"; "none" has no spelling there.
			return opts, false, badRequest("tailLines=0 is not supported: omit tailLines for all lines, or ask for 1 or more")
		}
		opts.TailLines = n
	}
	return opts, previous, nil
}

func (h *handler) serveExec(w http.ResponseWriter, r *http.Request) {
	t := targetOf(r)
	q := r.URL.Query()
	cmd := q["command"]
	if len(cmd) == 0 || cmd[0] == "" {
		writeStatus(w, badRequest("you must specify at least one command for the container"))
		return
	}
	stdin, err := boolQuery(q, "stdin")
	if err != nil {
		writeStatus(w, err)
		return
	}
	tty, err := boolQuery(q, "tty")
	if err != nil {
		writeStatus(w, err)
		return
	}
	c, err := h.find(r.Context(), t, false)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if c.State != runtime.StateRunning {
		writeStatus(w, badRequest(fmt.Sprintf("container %s of pod %s/%s is not running (state %s)", t.container, t.ns, t.pod, c.State)))
		return
	}
	rc := http.NewResponseController(w)
	// HTTP/1.1 would otherwise stop reading stdin once the reply began;
	// HTTP/2 is full duplex already and may say so with an error.
	_ = rc.EnableFullDuplex()
	w.Header().Set("Content-Type", wire.ContentTypeExec)
	w.WriteHeader(http.StatusOK)
	_ = rc.Flush()
	fw := wire.NewFrameWriter(w, func() { _ = rc.Flush() })
	opts := runtime.ExecOptions{
		Command: cmd,
		Stdout:  fw.Stream(wire.StreamStdout),
		Stderr:  fw.Stream(wire.StreamStderr),
		TTY:     tty,
	}
	if stdin {
		opts.Stdin = r.Body
	}
	code, err := h.rt.Exec(r.Context(), c.ID, opts)
	st := wire.ExitStatus{ExitCode: code}
	if err != nil {
		st = wire.ExitStatus{ExitCode: -1, Error: err.Error()}
		h.log.Info("exec failed", "container", c.ID, "command", cmd[0], "err", err)
	}
	if werr := fw.WriteExit(st); werr != nil && r.Context().Err() == nil {
		h.log.Warn("exec: writing the exit status failed", "container", c.ID, "err", werr)
	}
}

func (h *handler) serveImages(w http.ResponseWriter, r *http.Request) {
	// An import streams an archive of any size through buffers the agent
	// does not need afterwards; give the memory back at once rather than
	// over the runtime's minutes of scavenging (issue 16 item 4: the
	// agent's RSS).
	defer debug.FreeOSMemory()
	imgs, err := h.rt.ImportImages(r.Context(), r.Body)
	if err != nil {
		if errors.Is(err, runtime.ErrUnavailable) {
			h.fail(w, r, err)
			return
		}
		h.fail(w, r, badRequest("image import failed on node "+h.node+": "+err.Error()))
		return
	}
	out := wire.ImageList{Kind: wire.KindImageList, Images: make([]wire.Image, 0, len(imgs))}
	for _, im := range imgs {
		out.Images = append(out.Images, wire.Image{Names: im.Names, Digest: im.Digest, Size: im.Size})
	}
	h.log.Info("images imported", "count", len(out.Images))
	b, err := json.Marshal(out)
	if err != nil {
		h.fail(w, r, fmt.Errorf("encode reply: %w", err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

func (h *handler) serveSummary(w http.ResponseWriter, r *http.Request) {
	b, err := json.Marshal(h.summary())
	if err != nil {
		h.fail(w, r, fmt.Errorf("encode summary: %w", err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

// fail logs a refused request and replies with its Status.
func (h *handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	h.log.Debug("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	writeStatus(w, err)
}

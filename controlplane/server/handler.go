package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"runtime/debug"
	"strings"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/auth"
	"github.com/outpost-edge/outpost/controlplane/console"
)

// recorder remembers the reply code and the metric labels of a request.
type recorder struct {
	http.ResponseWriter
	code     int
	wrote    bool
	verb     string
	resource string
}

func (r *recorder) WriteHeader(code int) {
	if !r.wrote {
		r.code, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if !r.wrote {
		r.code, r.wrote = http.StatusOK, true
	}
	return r.ResponseWriter.Write(b)
}

// Flush passes flushes through, for watches and the forwarding proxy.
func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		if !r.wrote {
			r.code, r.wrote = http.StatusOK, true
		}
		f.Flush()
	}
}

// Hijack is not used by the API, but the proxy may ask for it.
func (r *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(r.ResponseWriter).Hijack()
}

// Unwrap lets http.ResponseController reach the real writer.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r *recorder) label(verb, resource string) { r.verb, r.resource = verb, resource }

// ServeHTTP is the API's single entry point. It never lets a panic escape:
// one caused by input is a bug, answered with 500 and logged with its
// stack, and the server goes on.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &recorder{ResponseWriter: w, code: http.StatusOK, verb: methodLabel(r.Method), resource: "other"}
	defer s.finish(rec, r, start)
	s.serve(rec, r)
}

// finish, deferred by ServeHTTP, answers a panic with 500 and counts the
// request.
func (s *Server) finish(rec *recorder, r *http.Request, start time.Time) {
	if v := recover(); v != nil {
		if v == http.ErrAbortHandler {
			// A reply cut off midway on purpose (a list whose item
			// could not be encoded): net/http drops the connection so
			// that the client sees a broken reply. Its status line may
			// have said 200, but it failed: counted as 500.
			s.metrics.observe(rec.verb, rec.resource, http.StatusInternalServerError, time.Since(start))
			panic(v)
		}
		s.log.Error("panic while serving a request", "method", r.Method, "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
		if !rec.wrote {
			writeError(rec, api.NewInternalError(fmt.Errorf("panic: %v", v)))
		}
		rec.code = http.StatusInternalServerError
	}
	s.metrics.observe(rec.verb, rec.resource, rec.code, time.Since(start))
}

func (s *Server) serve(w *recorder, r *http.Request) {
	path := r.URL.Path
	// Health and version need no token, as in Kubernetes: load balancers,
	// systemd and install scripts probe them without credentials, and they
	// reveal nothing about the cluster's objects.
	switch path {
	case "/healthz", "/livez":
		w.label(verbGet, "healthz")
		s.serveHealthz(w, r)
		return
	case "/readyz":
		w.label(verbGet, "readyz")
		s.serveReadyz(w, r)
		return
	case "/version":
		w.label(verbGet, "version")
		s.serveVersion(w, r)
		return
	}
	// A web browser sent to the server's address (no token, asking for a
	// page) is sent on to the console rather than shown a 401 in JSON.
	// API clients do not ask for text/html and keep their 401.
	if path == "/" && browserWithoutToken(r) {
		w.label(verbGet, "console")
		http.Redirect(w, r, console.Prefix+"/", http.StatusFound)
		return
	}
	// The console's files hold no cluster data (issue 15 item 3): the
	// page logs in with a token and every call it makes for data is an
	// authenticated API request like any other.
	if console.Match(path) {
		w.label(verbGet, "console")
		s.console.ServeHTTP(w, r)
		return
	}
	// Before authentication: tokens live in the store too.
	if reason := s.core.CatchingUp(); reason != "" {
		writeError(w, unavailable(reason+"; retry shortly", 1))
		return
	}
	fleetOp, fleetToken, fleet := fleetLockRoute(path)
	if fleetToken != "" {
		// FleetLock clients carry their token in the URL (fleetlock.go):
		// it moves to the header, and out of the path that logs and a
		// forward to the leader would show.
		r.Header.Set("Authorization", "Bearer "+fleetToken)
		r.URL.Path, r.URL.RawPath = "/v1/"+fleetOp, ""
		if fleetOp == "" {
			r.URL.Path = "/fleetlock/unknown"
		}
	}
	id, err := s.authenticate(r)
	if err != nil {
		if fleet {
			w.label(verbCreate, "fleetlock")
			writeFleetLockError(w, http.StatusUnauthorized, "unauthorized", "a valid token is required: base_url https://SERVER:6443/fleetlock/TOKEN/")
			return
		}
		writeError(w, err)
		return
	}
	if fleet {
		s.serveFleetLock(w, r, id, fleetOp)
		return
	}
	var segs [10]string
	n, ok := segments(path, segs[:])
	if !ok || n == 0 {
		writeError(w, notFoundPath())
		return
	}
	switch segs[0] {
	case "debug":
		// Profiles of a live server, for the same callers as /metrics.
		w.label(verbGet, "pprof")
		if n >= 2 && segs[1] == "pprof" {
			s.servePprof(w, r, id)
			return
		}
		if n == 2 && segs[1] == "statehash" {
			w.label(verbGet, "statehash")
			s.serveStateHash(w, r, id)
			return
		}
	case "metrics":
		w.label(verbGet, "metrics")
		if n != 1 {
			break
		}
		s.serveMetrics(w, r, id)
		return
	case "api":
		w.label(verbGet, "discovery")
		switch {
		case n == 1:
			s.serveAPIVersions(w, r)
			return
		case segs[1] != "v1":
			break
		case n == 2:
			s.serveResourceList(w, r, "")
			return
		default:
			if s.serveNodeStream(w, r, id, "", segs[2:n]) {
				return
			}
			s.serveResource(w, r, id, "", segs[2:n])
			return
		}
	case "apis":
		w.label(verbGet, "discovery")
		if n == 1 {
			s.serveAPIGroups(w, r)
			return
		}
		group := segs[1]
		if group == api.MetricsGroup {
			s.serveMetricsGroup(w, r, id, segs[2:n])
			return
		}
		v, known := groupVersions[group]
		if !known || group == "" {
			break
		}
		if n == 2 {
			s.serveGroup(w, r, group)
			return
		}
		if segs[2] != v {
			break
		}
		if n == 3 {
			s.serveResourceList(w, r, group)
			return
		}
		if group == raftGroup && segs[3] == "raft" {
			s.serveRaft(w, r, id, segs[4:n])
			return
		}
		if group == raftGroup && segs[3] == "admintoken" {
			s.serveAdminToken(w, r, id, segs[4:n])
			return
		}
		if group == raftGroup && segs[3] == "zones" {
			s.serveZones(w, r, id, segs[4:n])
			return
		}
		if group == raftGroup && segs[3] == "schedulers" {
			s.serveSchedulers(w, r, id, segs[4:n])
			return
		}
		if group == raftGroup && segs[3] == auth.ResourceServers {
			s.serveServers(w, r, id, segs[4:n])
			return
		}
		if group == raftGroup && segs[3] == ResourceBinaries {
			s.serveBinaries(w, r, id, segs[4:n])
			return
		}
		if group == raftGroup && segs[3] == auth.ResourceNodeCredentials {
			s.serveNodeCredentials(w, r, id, segs[4:n])
			return
		}
		if s.serveNodeStream(w, r, id, group, segs[3:n]) {
			return
		}
		s.serveResource(w, r, id, group, segs[3:n])
		return
	}
	writeError(w, notFoundPath())
}

// browserWithoutToken reports whether r is a web browser's page load with
// no credentials: GET or HEAD, no Authorization header, text/html among
// the types it accepts.
func browserWithoutToken(r *http.Request) bool {
	if (r.Method != http.MethodGet && r.Method != http.MethodHead) || r.Header.Get("Authorization") != "" {
		return false
	}
	for _, accept := range r.Header.Values("Accept") {
		for part := range strings.SplitSeq(accept, ",") {
			media, _, _ := strings.Cut(part, ";")
			if strings.EqualFold(strings.TrimSpace(media), "text/html") {
				return true
			}
		}
	}
	return false
}

// authenticate finds who sent r: a bearer token, else a verified client
// certificate of the cluster CA. A follower may not have applied a token
// created a moment ago on the leader, so on a failure it catches up with
// the leader's commit index once and tries again. Every failure is the
// same bare 401: a reply that said "no such token" to one guess and "wrong
// secret" to another would tell a prober which token IDs exist. The
// reason goes to the server's debug log only.
func (s *Server) authenticate(r *http.Request) (*auth.Identity, error) {
	id, err := s.identify(r)
	if err != nil {
		s.log.Debug("authentication failed", "remote", r.RemoteAddr, "method", r.Method, "path", r.URL.Path, "err", err)
		return nil, api.NewUnauthorized("Unauthorized")
	}
	return id, nil
}

// identify does authenticate's work and says why it failed.
func (s *Server) identify(r *http.Request) (*auth.Identity, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return s.certIdentity(r)
	}
	id, err := s.authn.Authenticate(h)
	if err == nil {
		return id, nil
	}
	// Only a well-formed token that is unknown here may be one the leader
	// has just created; garbage does not cost the leader a round trip.
	if errors.Is(err, auth.ErrInvalidToken) && !s.node.IsLeader() && wellFormed(h) && s.catchUp(r.Context()) {
		// The token may be the admin token's new generation, which this
		// server has applied but its watch has not put in force yet.
		s.syncAdminToken()
		if id, err2 := s.authn.Authenticate(h); err2 == nil {
			return id, nil
		}
	}
	return nil, err
}

// wellFormed reports whether an Authorization header carries a token of
// the right shape.
func wellFormed(header string) bool {
	_, tok, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok {
		return false
	}
	_, _, err := auth.ParseToken(strings.TrimSpace(tok))
	return err == nil
}

// catchUp waits, briefly, until this server has applied what the leader
// has committed; it reports whether it got there.
func (s *Server) catchUp(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	idx, err := s.node.ReadIndex(ctx)
	return err == nil && s.node.WaitApplied(ctx, idx) == nil
}

// authorize asks the authorizer whether id may do req; a refusal is a 403
// that names the verb and the resource.
func (s *Server) authorize(id *auth.Identity, req auth.Request) error {
	if err := auth.Authorize(id, req, s.core); err != nil {
		return api.NewForbidden(err.Error())
	}
	return nil
}

// queryOf parses the query string only when there is one.
func queryOf(r *http.Request) url.Values {
	if r.URL.RawQuery == "" {
		return nil
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		// Keep what parsed; a broken pair is ignored as net/http does.
		return q
	}
	return q
}

// boolParam reads a boolean query parameter ("true", "1").
func boolParam(q url.Values, name string) bool {
	switch q.Get(name) {
	case "true", "1", "True", "TRUE":
		return true
	}
	return false
}

// serveResource serves everything under a group's resources.
func (s *Server) serveResource(w *recorder, r *http.Request, id *auth.Identity, group string, segs []string) {
	rt, err := parseResourcePath(group, segs)
	if err != nil {
		writeError(w, err)
		return
	}
	q := queryOf(r)
	verb, err := verbFor(r.Method, &rt, boolParam(q, "watch"))
	w.label(verb, metricName(&rt))
	if err != nil {
		writeError(w, err)
		return
	}
	switch verb {
	case verbGet:
		s.serveGet(w, r, id, &rt, q)
	case verbList:
		s.serveList(w, r, id, &rt, q)
	case verbWatch:
		s.serveWatch(w, r, id, &rt, q)
	default:
		if s.forwardIfFollower(w, r) {
			return
		}
		switch {
		case verb == verbCreate && rt.sub == subBinding:
			s.serveBind(w, r, id, &rt)
		case verb == verbCreate && rt.sub == subEviction:
			s.serveEvict(w, r, id, &rt)
		case verb == verbCreate:
			s.serveCreate(w, r, id, &rt)
		case verb == verbUpdate:
			s.serveUpdate(w, r, id, &rt, q)
		case verb == verbDelete:
			s.serveDelete(w, r, id, &rt, q)
		}
	}
}

// metricNames holds the resource label of every route, built once so that
// labelling a request does not concatenate strings.
var metricNames = func() map[*api.Resource][4]string {
	m := map[*api.Resource][4]string{}
	for _, r := range api.Resources {
		m[r] = [4]string{r.Plural, r.Plural + "/" + subStatus, r.Plural + "/" + subBinding, r.Plural + "/" + subEviction}
	}
	return m
}()

func metricName(rt *route) string {
	n := metricNames[rt.res]
	switch rt.sub {
	case subStatus:
		return n[1]
	case subBinding:
		return n[2]
	case subEviction:
		return n[3]
	}
	return n[0]
}

// request is the authorizer's view of rt.
func (rt *route) request(verb string) auth.Request {
	return auth.Request{
		Verb:        verb,
		Group:       rt.res.Group,
		Resource:    rt.res.Plural,
		Subresource: rt.sub,
		Namespace:   rt.ns,
		Name:        rt.name,
	}
}

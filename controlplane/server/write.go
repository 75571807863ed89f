package server

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/auth"
	"github.com/outpost-edge/outpost/controlplane/store"
	"github.com/outpost-edge/outpost/internal/plant"
	"github.com/outpost-edge/outpost/raftstore"
)

// failWrite replies to a write that did not go through. A write that met
// a lost leadership before reaching the log goes to the new leader with
// the body already read.
func (s *Server) failWrite(w *recorder, r *http.Request, body []byte, err error) {
	if errors.Is(err, raftstore.ErrNotLeader) && r.Header.Get(hopHeader) == "" {
		s.forward(w, r, body)
		return
	}
	err = writeOutcome(err)
	se := statusOf(err)
	if se.Code() >= 500 {
		s.log.Warn("write failed", "method", r.Method, "path", r.URL.Path, "code", se.Code(), "err", se.Status.Message)
	}
	writeError(w, se)
}

// writeOutcome maps why a write failed onto the status the client gets.
// Only a failure known to have happened before the entry reached the log
// (no leader, this server closed before enqueueing) is a 503, which clients
// and the linearizability checker take as "not applied"; anything else may
// have committed and is a 504 telling the client to read before retrying.
func writeOutcome(err error) error {
	if plant.On(plant.UnknownAs503) && errors.Is(err, raftstore.ErrUnknownOutcome) {
		return unavailable("the write failed: "+err.Error(), 1)
	}
	if se := knownRaftError(err, "apply the write"); se != nil {
		return se
	}
	return api.NewTimeout("the write may or may not have been applied: read the object to find out; " + err.Error())
}

// logWrite records one successful write at debug level.
func (s *Server) logWrite(r *http.Request, id *auth.Identity, rt *route, code int, res *store.Result) {
	if !s.log.Enabled(r.Context(), slog.LevelDebug) {
		return
	}
	var name, rv string
	if res != nil && res.Object != nil {
		m := res.Object.GetObjectMeta()
		name, rv = m.Name, m.ResourceVersion
	}
	s.log.Debug("write", "method", r.Method, "resource", metricName(rt), "namespace", rt.ns, "name", name,
		"user", id.Name, "code", code, "resourceVersion", rv)
}

// decodeBody reads the body into a new object of rt's kind and checks its
// namespace against the URL.
func (s *Server) decodeBody(w *recorder, r *http.Request, rt *route) (api.Object, []byte, api.Warnings, error) {
	body, err := readBody(w, r, s.cfg.MaxBodyBytes)
	if err != nil {
		return nil, nil, nil, err
	}
	obj := rt.res.New()
	warnings, err := api.DecodeRequestInto(body, obj)
	if err != nil {
		return nil, nil, nil, err
	}
	warnings = append(warnings, api.DeprecationWarnings(obj)...)
	m := obj.GetObjectMeta()
	// A version that is not a number can match none, and a 409 would send
	// the client to re-read and retry for ever.
	if rv := m.ResourceVersion; rv != "" {
		if _, err := strconv.ParseUint(rv, 10, 64); err != nil {
			return nil, nil, nil, api.NewBadRequest(fmt.Sprintf(
				"metadata.resourceVersion: Invalid value: %q: must be the decimal resource version the object was read at", rv))
		}
	}
	if rt.res.Namespaced {
		switch m.Namespace {
		case "":
			m.Namespace = rt.ns
		case rt.ns:
		default:
			return nil, nil, nil, api.NewBadRequest(fmt.Sprintf(
				"the namespace of the object (%s) does not match the namespace on the URL (%s)", m.Namespace, rt.ns))
		}
	} else {
		m.Namespace = ""
	}
	if rt.name != "" {
		switch m.Name {
		case "":
			m.Name = rt.name
		case rt.name:
		default:
			return nil, nil, nil, api.NewBadRequest(fmt.Sprintf(
				"the name of the object (%s) does not match the name on the URL (%s)", m.Name, rt.name))
		}
	}
	return obj, body, warnings, nil
}

func (s *Server) serveCreate(w *recorder, r *http.Request, id *auth.Identity, rt *route) {
	if rt.res.Namespaced && rt.ns == "" {
		writeError(w, api.NewMethodNotAllowed(fmt.Sprintf(
			"%s are namespaced: create them with POST %s", rt.res.Plural, collectionPath(rt.res, "NAMESPACE"))))
		return
	}
	obj, body, warnings, err := s.decodeBody(w, r, rt)
	if err != nil {
		writeError(w, err)
		return
	}
	m := obj.GetObjectMeta()
	// The name is in the body, so authorization waits for the decode: a
	// node may create only its own Node.
	req := rt.request(verbCreate)
	req.Name = m.Name
	if err := s.authorize(id, req); err != nil {
		writeError(w, err)
		return
	}
	if tok, ok := obj.(*api.Token); ok {
		if err := checkToken(id, verbCreate, tok); err != nil {
			writeError(w, err)
			return
		}
	}
	res, err := s.core.Create(r.Context(), id, obj)
	if err != nil {
		s.failWrite(w, r, body, err)
		return
	}
	addWarnings(w, warnings)
	writeRaw(w, http.StatusCreated, res.Raw)
	s.logWrite(r, id, rt, http.StatusCreated, res)
}

// checkToken keeps token writes to cluster admins and refuses a token
// whose secretHash is not a SHA-256: the server never sees, stores or
// returns a token's secret, only its hash.
func checkToken(id *auth.Identity, verb string, tok *api.Token) error {
	if id.Role != api.RoleClusterAdmin {
		return api.NewForbidden(fmt.Sprintf("tokens %q is forbidden: User %q cannot %s tokens: only a %s may", tok.Name, id.Name, verb, api.RoleClusterAdmin))
	}
	h := tok.Spec.SecretHash
	if _, err := hex.DecodeString(h); err != nil || len(h) != 64 || strings.ToLower(h) != h {
		// The value is not echoed: a user who pasted the secret itself
		// must not find it in logs and replies.
		return api.NewInvalid("Token", tok.Name, api.ErrorList{api.Invalid(api.Root("spec").Child("secretHash"), "(hidden)",
			"must be the SHA-256 of the secret as 64 lower-case hex digits, never the secret itself")})
	}
	return nil
}

// collectionPath is the URL path of r's collection in namespace ns.
func collectionPath(r *api.Resource, ns string) string {
	p := "/api/v1"
	if r.Group != "" {
		p = "/apis/" + r.Group + "/" + r.Version
	}
	if r.Namespaced {
		p += "/namespaces/" + ns
	}
	return p + "/" + r.Plural
}

func (s *Server) serveUpdate(w *recorder, r *http.Request, id *auth.Identity, rt *route, q url.Values) {
	if err := s.authorize(id, rt.request(verbUpdate)); err != nil {
		writeError(w, err)
		return
	}
	obj, body, warnings, err := s.decodeBody(w, r, rt)
	if err != nil {
		writeError(w, err)
		return
	}
	if tok, ok := obj.(*api.Token); ok {
		if err := checkToken(id, verbUpdate, tok); err != nil {
			writeError(w, err)
			return
		}
	}
	again := func() (api.Object, error) {
		o := rt.res.New()
		if _, err := api.DecodeInto(body, o); err != nil {
			return nil, err
		}
		return o, nil
	}
	res, err := s.core.Update(r.Context(), id, rt.res, rt.ns, rt.name, rt.sub == subStatus, obj, again)
	if err != nil {
		s.failWrite(w, r, body, err)
		return
	}
	addWarnings(w, warnings)
	writeRaw(w, http.StatusOK, res.Raw)
	s.logWrite(r, id, rt, http.StatusOK, res)
}

// deleteOptions reads the options of a DELETE from its body and its
// ?resourceVersion= and ?gracePeriodSeconds= query; where both give one,
// they must agree.
func (s *Server) deleteOptions(w *recorder, r *http.Request, q url.Values) (api.DeleteOptions, []byte, error) {
	opts := api.DeleteOptions{Preconditions: store.Preconditions{ResourceVersion: q.Get("resourceVersion")}}
	if v := q.Get("gracePeriodSeconds"); v != "" {
		g, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return opts, nil, api.NewBadRequest(fmt.Sprintf("gracePeriodSeconds: %q is not a whole number of seconds", v))
		}
		opts.GracePeriodSeconds = &g
	}
	if r.ContentLength == 0 {
		return opts, nil, nil
	}
	body, err := readBody(w, r, s.cfg.MaxBodyBytes)
	if err != nil || len(strings.TrimSpace(string(body))) == 0 {
		return opts, body, err
	}
	var do api.DeleteOptionsBody
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&do); err != nil {
		return opts, body, api.NewBadRequest("the DeleteOptions in the body cannot be read: " + err.Error())
	}
	if do.Kind != "" && do.Kind != "DeleteOptions" {
		return opts, body, api.NewBadRequest(fmt.Sprintf("the kind in the body (%s) does not match the expected kind (DeleteOptions)", do.Kind))
	}
	if len(do.DryRun) > 0 {
		return opts, body, api.NewBadRequest("dryRun: outpost does not support dry-run deletes")
	}
	if g := do.GracePeriodSeconds; g != nil {
		if opts.GracePeriodSeconds != nil && *opts.GracePeriodSeconds != *g {
			return opts, body, api.NewBadRequest(fmt.Sprintf("the gracePeriodSeconds in the query (%d) and in the body (%d) differ", *opts.GracePeriodSeconds, *g))
		}
		opts.GracePeriodSeconds = g
	}
	if p := do.Preconditions; p != nil {
		if p.ResourceVersion != nil {
			if opts.ResourceVersion != "" && opts.ResourceVersion != *p.ResourceVersion {
				return opts, body, api.NewBadRequest(fmt.Sprintf("the resourceVersion in the query (%s) and in preconditions (%s) differ", opts.ResourceVersion, *p.ResourceVersion))
			}
			opts.ResourceVersion = *p.ResourceVersion
		}
		if p.UID != nil {
			opts.UID = *p.UID
		}
	}
	return opts, body, nil
}

func (s *Server) serveDelete(w *recorder, r *http.Request, id *auth.Identity, rt *route, q url.Values) {
	if err := s.authorize(id, rt.request(verbDelete)); err != nil {
		writeError(w, err)
		return
	}
	opts, body, err := s.deleteOptions(w, r, q)
	if err != nil {
		writeError(w, err)
		return
	}
	res, err := s.core.Delete(r.Context(), id, rt.res, rt.ns, rt.name, opts)
	if err != nil {
		s.failWrite(w, r, body, err)
		return
	}
	if len(res.Raw) == 0 {
		writeJSON(w, http.StatusOK, &api.Status{TypeMeta: api.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: "Success",
			Details: &api.StatusDetails{Name: rt.name, Group: rt.res.Group, Kind: rt.res.Plural}})
	} else {
		writeRaw(w, http.StatusOK, res.Raw)
	}
	s.logWrite(r, id, rt, http.StatusOK, res)
}

// decodeSubresource authorizes a POST to a subresource (binding,
// eviction), then reads and decodes its body into obj. When it reports
// !ok the reply is written.
func (s *Server) decodeSubresource(w *recorder, r *http.Request, id *auth.Identity, rt *route, obj api.Object) (body []byte, warnings api.Warnings, ok bool) {
	if err := s.authorize(id, rt.request(verbCreate)); err != nil {
		writeError(w, err)
		return nil, nil, false
	}
	body, err := readBody(w, r, s.cfg.MaxBodyBytes)
	if err != nil {
		writeError(w, err)
		return nil, nil, false
	}
	if warnings, err = api.DecodeInto(body, obj); err != nil {
		writeError(w, err)
		return nil, nil, false
	}
	return body, warnings, true
}

// serveBind assigns a pod to a node: spec.nodeName and the condition
// PodScheduled=True, in one raft entry (store.BindCmd), so that a pod is
// never bound without its condition. A pod that is bound already or being
// deleted is a 409, and the body's metadata.uid and metadata.resourceVersion
// are preconditions, as in Kubernetes. Nothing is retried: a binding
// depends on no other field of the pod, so a conflict is a real one.
func (s *Server) serveBind(w *recorder, r *http.Request, id *auth.Identity, rt *route) {
	var b api.Binding
	body, warnings, ok := s.decodeSubresource(w, r, id, rt, &b)
	if !ok {
		return
	}
	if err := checkBinding(&b, rt); err != nil {
		writeError(w, err)
		return
	}
	bind := store.Binding{NodeName: b.Target.Name, UID: b.UID, ResourceVersion: b.ResourceVersion, Now: time.Now()}
	res, err := s.core.Bind(r.Context(), id, rt.ns, rt.name, bind)
	if err != nil {
		s.failWrite(w, r, body, err)
		return
	}
	addWarnings(w, warnings)
	writeJSON(w, http.StatusCreated, &api.Status{TypeMeta: api.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: "Success", Code: http.StatusCreated,
		Details: &api.StatusDetails{Name: rt.name, Kind: "pods"}})
	s.logWrite(r, id, rt, http.StatusCreated, res)
}

// checkBinding checks a Binding body against the URL.
func checkBinding(b *api.Binding, rt *route) error {
	if b.Kind != "" && b.Kind != "Binding" {
		return api.NewBadRequest(fmt.Sprintf("the kind in the body (%s) does not match the expected kind (Binding)", b.Kind))
	}
	if b.APIVersion != "" && b.APIVersion != "v1" {
		return api.NewBadRequest(fmt.Sprintf("the API version in the body (%s) does not match the expected API version (v1)", b.APIVersion))
	}
	if b.Name != "" && b.Name != rt.name {
		return api.NewBadRequest(fmt.Sprintf("the name of the binding (%s) does not match the pod on the URL (%s)", b.Name, rt.name))
	}
	if b.Namespace != "" && b.Namespace != rt.ns {
		return api.NewBadRequest(fmt.Sprintf("the namespace of the binding (%s) does not match the namespace on the URL (%s)", b.Namespace, rt.ns))
	}
	var errs api.ErrorList
	target := api.Root("target")
	if b.Target.Kind != "" && b.Target.Kind != "Node" {
		errs = append(errs, api.NotSupported(target.Child("kind"), b.Target.Kind, []string{"Node"}))
	}
	if b.Target.Name == "" {
		errs = append(errs, api.Required(target.Child("name"), "the node to bind to"))
	} else if msgs := api.IsDNS1123Subdomain(b.Target.Name); len(msgs) > 0 {
		errs = append(errs, api.Invalid(target.Child("name"), b.Target.Name, strings.Join(msgs, "; ")))
	}
	if len(errs) > 0 {
		return api.NewInvalid("Binding", rt.name, errs)
	}
	return nil
}

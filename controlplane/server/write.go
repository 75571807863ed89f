package server

import (
	"context"
	"crypto/rand"
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

// maxWriteAttempts bounds the internal retries of a write that lost a race
// it may retry: an update without a resourceVersion, a generated name that
// was taken.
const maxWriteAttempts = 5

// applyTimeout bounds one raft Apply when the request has no deadline of
// its own; past it the outcome is unknown and the client gets 504.
const applyTimeout = 30 * time.Second

// apply replicates cmd through raft and returns the store's result; the
// error is the store's *api.StatusError, or a raftstore error.
func (s *Server) apply(ctx context.Context, cmd []byte) (*store.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, applyTimeout)
	defer cancel()
	resp, _, err := s.node.Apply(ctx, cmd)
	if err != nil {
		return nil, err
	}
	res, ok := resp.(*store.Result)
	if !ok || res == nil {
		return nil, api.NewInternalError(fmt.Errorf("the store returned %T for a single command", resp))
	}
	if res.Fatal() {
		s.log.Error("a raft entry could not be applied by this server; it must be upgraded", "err", res.Err)
		return nil, api.NewInternalError(res.Err)
	}
	if res.Err != nil {
		return res, res.Err
	}
	return res, nil
}

// createBatch creates objs, put through defaulting, validation and
// admission like any create, in one raft entry. Each create succeeds or
// fails on its own; the errors of those that failed are joined.
func (s *Server) createBatch(ctx context.Context, id *auth.Identity, objs []api.Object) error {
	var errs []error
	cmds := make([][]byte, 0, len(objs))
	now := time.Now()
	for _, obj := range objs {
		m := obj.GetObjectMeta()
		m.UID, m.CreationTimestamp, m.ResourceVersion, m.Generation, m.DeletionTimestamp = newUID(), api.NewTime(now), "", 0, nil
		if err := s.checkObject(ctx, OpCreate, id, obj, nil); err != nil {
			errs = append(errs, err)
			continue
		}
		cmd, err := s.store.CreateCmd(obj)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		cmds = append(cmds, cmd)
	}
	defer func() {
		for _, cmd := range cmds {
			s.store.Release(cmd)
		}
	}()
	switch len(cmds) {
	case 0:
		return errors.Join(errs...)
	case 1:
		if _, err := s.apply(ctx, cmds[0]); err != nil {
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	}
	actx, cancel := context.WithTimeout(ctx, applyTimeout)
	defer cancel()
	resp, _, err := s.node.Apply(actx, store.BatchCmd(cmds...))
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	results, _ := resp.([]*store.Result)
	for _, r := range results {
		if r != nil && r.Err != nil {
			errs = append(errs, r.Err)
		}
	}
	return errors.Join(errs...)
}

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

// newUID returns a random (version 4) UUID in its text form.
func newUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var out [36]byte
	hex.Encode(out[0:8], b[0:4])
	out[8] = '-'
	hex.Encode(out[9:13], b[4:6])
	out[13] = '-'
	hex.Encode(out[14:18], b[6:8])
	out[18] = '-'
	hex.Encode(out[19:23], b[8:10])
	out[23] = '-'
	hex.Encode(out[24:], b[10:])
	return string(out[:])
}

// nameSuffixChars are the characters of generated name suffixes: no
// vowels (no words) and no characters that look alike.
const nameSuffixChars = "bcdfghjklmnpqrstvwxz2456789"

// randomSuffix returns the five random characters appended to a
// generateName.
func randomSuffix() string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	for i := range b {
		b[i] = nameSuffixChars[int(b[i])%len(nameSuffixChars)]
	}
	return string(b[:])
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
	res, err := s.createObject(r.Context(), id, obj)
	if err != nil {
		s.failWrite(w, r, body, err)
		return
	}
	addWarnings(w, warnings)
	writeRaw(w, http.StatusCreated, res.Raw)
	s.logWrite(r, id, rt, http.StatusCreated, res)
}

// createObject creates obj as id: the namespace must exist and not be
// terminating; uid and creationTimestamp are set here; a generateName is
// retried with a new suffix when the name is taken. obj is changed
// (defaults, name) and handed to the store.
func (s *Server) createObject(ctx context.Context, id *auth.Identity, obj api.Object) (*store.Result, error) {
	res := api.ResourceOf(obj)
	m := obj.GetObjectMeta()
	// The store checks the namespace again when it applies the create;
	// checking here first keeps a doomed write out of the raft log.
	if res.Namespaced {
		nsObj, _, err := s.store.Get(namespacesResource, "", m.Namespace)
		if err != nil {
			return nil, err
		}
		if nsObj.GetObjectMeta().DeletionTimestamp != nil {
			return nil, api.NewForbidden(fmt.Sprintf("%s %q is forbidden: unable to create new content in namespace %s because it is being terminated", res.Plural, m.Name, m.Namespace))
		}
	}
	generated := m.Name == "" && m.GenerateName != ""
	now := time.Now()
	m.UID = newUID()
	m.CreationTimestamp = api.NewTime(now)
	m.ResourceVersion = ""
	m.Generation = 0
	m.DeletionTimestamp = nil
	for attempt := 1; ; attempt++ {
		if generated {
			m.Name = m.GenerateName + randomSuffix()
		}
		if err := s.checkObject(ctx, OpCreate, id, obj, nil); err != nil {
			return nil, err
		}
		// The store's CreateCmd hands obj to this server's Apply, which
		// then does not decode the command again.
		cmd, err := s.store.CreateCmd(obj)
		if err != nil {
			return nil, api.NewInternalError(err)
		}
		out, err := s.apply(ctx, cmd)
		s.store.Release(cmd)
		if err != nil {
			if generated && api.IsAlreadyExists(err) && attempt < maxWriteAttempts {
				continue
			}
			return nil, err
		}
		return out, nil
	}
}

// checkObject defaults, validates and admits obj; old is nil on create.
// Validation runs again after an admission chain, which may have changed
// the object, so what goes to raft is always valid.
func (s *Server) checkObject(ctx context.Context, op string, id *auth.Identity, obj, old api.Object) error {
	api.SetDefaults(obj)
	if err := s.validate(obj, old); err != nil {
		return err
	}
	if !s.admits(op, id, api.ResourceOf(obj)) {
		return nil
	}
	if err := s.admit(ctx, op, id, obj, old); err != nil {
		return err
	}
	if len(s.cfg.Admission) == 0 {
		return nil // the built-in steps only refuse
	}
	return s.validate(obj, old)
}

func (s *Server) validate(obj, old api.Object) error {
	var errs api.ErrorList
	if old == nil {
		errs = api.Validate(obj)
	} else {
		errs = api.ValidateUpdate(obj, old)
	}
	if len(errs) > 0 {
		return api.NewInvalid(api.ResourceOf(obj).Kind, obj.GetObjectMeta().Name, errs)
	}
	return nil
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

// copyOf returns a private deep copy of a stored object, decoded from its
// stored JSON.
func copyOf(r *api.Resource, raw []byte) (api.Object, error) {
	obj := r.New()
	if err := api.Unmarshal(raw, obj); err != nil {
		return nil, api.NewInternalError(fmt.Errorf("decoding stored %s: %w", r.Kind, err))
	}
	return obj, nil
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
	res, err := s.updateObject(r.Context(), id, rt.res, rt.ns, rt.name, rt.sub == subStatus, obj, again)
	if err != nil {
		s.failWrite(w, r, body, err)
		return
	}
	addWarnings(w, warnings)
	writeRaw(w, http.StatusOK, res.Raw)
	s.logWrite(r, id, rt, http.StatusOK, res)
}

// updateObject writes obj over the stored res ns/name as id: its status
// only when status is set, else everything but its status. Without a
// resourceVersion in obj the client asked for last-writer-wins; the write
// is still conditional on the version it was validated against, and is
// tried again (with a fresh object from again) if another write came
// between.
func (s *Server) updateObject(ctx context.Context, id *auth.Identity, res *api.Resource, ns, name string, status bool, obj api.Object, again func() (api.Object, error)) (*store.Result, error) {
	op := OpUpdate
	if status {
		op = OpUpdateStatus
	}
	m := obj.GetObjectMeta()
	wantRV, wantUID := m.ResourceVersion, m.UID
	for attempt := 1; ; attempt++ {
		cur, raw, err := s.store.Get(res, ns, name)
		if err != nil {
			return nil, err
		}
		cm := cur.GetObjectMeta()
		if wantRV != "" && wantRV != cm.ResourceVersion {
			return nil, api.NewConflict(res, name, "the object has been modified; please apply your changes to the latest version and try again")
		}
		if wantUID != "" && wantUID != cm.UID {
			return nil, api.NewConflict(res, name, fmt.Sprintf("Precondition failed: UID in object meta: %s, UID stored: %s", wantUID, cm.UID))
		}
		old, err := copyOf(res, raw)
		if err != nil {
			return nil, err
		}
		if attempt > 1 {
			// The previous attempt changed obj; start again from the request.
			if obj, err = again(); err != nil {
				return nil, err
			}
			m = obj.GetObjectMeta()
			m.Namespace, m.Name = old.GetObjectMeta().Namespace, name
		}
		if status {
			keepAllButStatus(obj, old)
		} else {
			om := old.GetObjectMeta()
			m.UID, m.CreationTimestamp, m.DeletionTimestamp, m.Generation = om.UID, om.CreationTimestamp, om.DeletionTimestamp, om.Generation
			if res.HasStatus {
				keepStatus(obj, old)
			}
		}
		m.ResourceVersion = cm.ResourceVersion
		if err := s.checkObject(ctx, op, id, obj, old); err != nil {
			return nil, err
		}
		sub := store.SubresourceMain
		if status {
			sub = store.SubresourceStatus
		}
		cmd, err := store.UpdateCmd(obj, sub)
		if err != nil {
			return nil, api.NewInternalError(err)
		}
		out, err := s.apply(ctx, cmd)
		if err != nil {
			if wantRV == "" && api.IsConflict(err) && attempt < maxWriteAttempts {
				continue
			}
			return nil, err
		}
		return out, nil
	}
}

// deleteOptions is the body a DELETE may carry, as Kubernetes clients send
// it. Only the preconditions act; the other fields are accepted so that
// such clients work.
type deleteOptions struct {
	Kind               string `json:"kind,omitempty"`
	APIVersion         string `json:"apiVersion,omitempty"`
	GracePeriodSeconds *int64 `json:"gracePeriodSeconds,omitempty"`
	Preconditions      *struct {
		UID             *string `json:"uid,omitempty"`
		ResourceVersion *string `json:"resourceVersion,omitempty"`
	} `json:"preconditions,omitempty"`
	OrphanDependents  *bool    `json:"orphanDependents,omitempty"`
	PropagationPolicy *string  `json:"propagationPolicy,omitempty"`
	DryRun            []string `json:"dryRun,omitempty"`
}

// deletePreconditions reads the preconditions of a DELETE from its body and
// its ?resourceVersion= query.
func (s *Server) deletePreconditions(w *recorder, r *http.Request, q url.Values) (store.Preconditions, []byte, error) {
	pre := store.Preconditions{ResourceVersion: q.Get("resourceVersion")}
	if r.ContentLength == 0 {
		return pre, nil, nil
	}
	body, err := readBody(w, r, s.cfg.MaxBodyBytes)
	if err != nil || len(strings.TrimSpace(string(body))) == 0 {
		return pre, body, err
	}
	var opts deleteOptions
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&opts); err != nil {
		return pre, body, api.NewBadRequest("the DeleteOptions in the body cannot be read: " + err.Error())
	}
	if opts.Kind != "" && opts.Kind != "DeleteOptions" {
		return pre, body, api.NewBadRequest(fmt.Sprintf("the kind in the body (%s) does not match the expected kind (DeleteOptions)", opts.Kind))
	}
	if len(opts.DryRun) > 0 {
		return pre, body, api.NewBadRequest("dryRun: outpost does not support dry-run deletes")
	}
	if p := opts.Preconditions; p != nil {
		if p.ResourceVersion != nil {
			if pre.ResourceVersion != "" && pre.ResourceVersion != *p.ResourceVersion {
				return pre, body, api.NewBadRequest(fmt.Sprintf("the resourceVersion in the query (%s) and in preconditions (%s) differ", pre.ResourceVersion, *p.ResourceVersion))
			}
			pre.ResourceVersion = *p.ResourceVersion
		}
		if p.UID != nil {
			pre.UID = *p.UID
		}
	}
	return pre, body, nil
}

func (s *Server) serveDelete(w *recorder, r *http.Request, id *auth.Identity, rt *route, q url.Values) {
	if err := s.authorize(id, rt.request(verbDelete)); err != nil {
		writeError(w, err)
		return
	}
	if rt.res == namespacesResource && (rt.name == NamespaceDefault || rt.name == NamespaceSystem) {
		writeError(w, api.NewForbidden(fmt.Sprintf("namespaces %q is forbidden: this namespace may not be deleted", rt.name)))
		return
	}
	if rt.res == tokensResource && rt.name == s.adminTokenID {
		// The token is derived from the cluster secret and authenticates
		// without its object (auth.AddStatic), so a delete would say
		// "deleted" while it kept working, and /readyz would go false.
		writeError(w, api.NewForbidden(fmt.Sprintf("tokens %q is forbidden: this is the built-in admin token, derived from the cluster secret; "+
			"deleting it would not revoke it. It stops working only with another cluster secret, which is another cluster. "+
			"Keep the secret and admin.conf private, and give people tokens of their own (outpost adm token create), which can be deleted", rt.name)))
		return
	}
	pre, body, err := s.deletePreconditions(w, r, q)
	if err != nil {
		writeError(w, err)
		return
	}
	res, err := s.deleteObject(r.Context(), id, rt.res, rt.ns, rt.name, pre)
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

// deleteObject deletes res ns/name as id, under pre.
func (s *Server) deleteObject(ctx context.Context, id *auth.Identity, res *api.Resource, ns, name string, pre store.Preconditions) (*store.Result, error) {
	if s.admits(OpDelete, id, res) {
		_, raw, err := s.store.Get(res, ns, name)
		if err != nil {
			return nil, err
		}
		old, err := copyOf(res, raw)
		if err != nil {
			return nil, err
		}
		if err := s.admit(ctx, OpDelete, id, nil, old); err != nil {
			return nil, err
		}
	}
	return s.apply(ctx, store.DeleteCmd(res, ns, name, pre, time.Now()))
}

// serveBind assigns a pod to a node: spec.nodeName and the condition
// PodScheduled=True, in one raft entry (store.BindCmd), so that a pod is
// never bound without its condition. A pod that is bound already or being
// deleted is a 409, and the body's metadata.uid and metadata.resourceVersion
// are preconditions, as in Kubernetes. Nothing is retried: a binding
// depends on no other field of the pod, so a conflict is a real one.
func (s *Server) serveBind(w *recorder, r *http.Request, id *auth.Identity, rt *route) {
	if err := s.authorize(id, rt.request(verbCreate)); err != nil {
		writeError(w, err)
		return
	}
	body, err := readBody(w, r, s.cfg.MaxBodyBytes)
	if err != nil {
		writeError(w, err)
		return
	}
	var b api.Binding
	warnings, err := api.DecodeInto(body, &b)
	if err != nil {
		writeError(w, err)
		return
	}
	if err := checkBinding(&b, rt); err != nil {
		writeError(w, err)
		return
	}
	bind := store.Binding{NodeName: b.Target.Name, UID: b.UID, ResourceVersion: b.ResourceVersion, Now: time.Now()}
	cmd, err := s.bindCmd(r.Context(), id, rt.ns, rt.name, bind)
	if err != nil {
		writeError(w, err)
		return
	}
	res, err := s.apply(r.Context(), cmd)
	if err != nil {
		s.failWrite(w, r, body, err)
		return
	}
	addWarnings(w, warnings)
	writeJSON(w, http.StatusCreated, &api.Status{TypeMeta: api.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: "Success", Code: http.StatusCreated,
		Details: &api.StatusDetails{Name: rt.name, Kind: "pods"}})
	s.logWrite(r, id, rt, http.StatusCreated, res)
}

// bindCmd checks a binding of pod ns/name as id and returns its command.
// What the store would refuse is refused here without a raft entry; the
// store checks again on the state the entry meets.
func (s *Server) bindCmd(ctx context.Context, id *auth.Identity, ns, name string, bind store.Binding) ([]byte, error) {
	cur, raw, err := s.store.Get(podsResource, ns, name)
	if err != nil {
		return nil, err
	}
	pod, ok := cur.(*api.Pod)
	if !ok {
		return nil, api.NewInternalError(fmt.Errorf("pod %s/%s is stored as %T", ns, name, cur))
	}
	if err := store.CheckBind(pod, bind); err != nil {
		return nil, err
	}
	if s.admits(OpBind, id, podsResource) {
		if err := s.admitBind(ctx, id, raw, bind.NodeName); err != nil {
			return nil, err
		}
		// The admission chain judged this pod: a pod created again under
		// the same name meanwhile is not bound on its word.
		if bind.UID == "" {
			bind.UID = pod.UID
		}
	}
	return store.BindCmd(ns, name, bind), nil
}

// admitBind runs the admission chain on the pod stored as raw, as the
// binding would leave it. A bind writes only the node: changes the chain
// makes to the pod are not kept.
func (s *Server) admitBind(ctx context.Context, id *auth.Identity, raw []byte, node string) error {
	old, err := copyOf(podsResource, raw)
	if err != nil {
		return err
	}
	obj, err := copyOf(podsResource, raw)
	if err != nil {
		return err
	}
	p := obj.(*api.Pod)
	p.Spec.NodeName = node
	return s.admit(ctx, OpBind, id, p, old)
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

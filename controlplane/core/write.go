package core

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/outpost-edge/outpost/controlplane/admission"
	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/auth"
	"github.com/outpost-edge/outpost/controlplane/store"
	"github.com/outpost-edge/outpost/internal/plant"
)

// maxWriteAttempts bounds the internal retries of a write that lost a race
// it may retry: an update without a resourceVersion, a generated name that
// was taken.
const maxWriteAttempts = 5

// ApplyTimeout bounds one raft Apply when the caller's context has no
// deadline of its own; past it the outcome is unknown.
const ApplyTimeout = 30 * time.Second

// Apply replicates cmd through raft and returns the store's result; the
// error is the store's *api.StatusError, or a raftstore error.
func (c *Core) Apply(ctx context.Context, cmd []byte) (*store.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, ApplyTimeout)
	defer cancel()
	resp, _, err := c.node.Apply(ctx, cmd)
	if err != nil {
		return nil, err
	}
	res, ok := resp.(*store.Result)
	if !ok || res == nil {
		return nil, api.NewInternalError(fmt.Errorf("the store returned %T for a single command", resp))
	}
	return c.result(res)
}

// confirmRefusal is called when a write is about to be refused from this
// server's own store, without a raft entry (the object is missing, or its
// resourceVersion or UID is not the one asked for). Only a leader runs
// writes (followers forward them), but a leader that was paused or cut
// off may not know yet that another was elected, and its store then
// misses what the new one committed: refusing from it is not
// linearizable (a paused leader answered NotFound for an object another
// leader had created again; TestLinearizableUnderCrashes caught it). So
// the refusal stands only once the store has applied a read index the
// leader of now gave after the request arrived; look is then asked again.
// Any other error, and a failure to get the read index, is returned as
// it is: the write is then not refused but fails.
func (c *Core) confirmRefusal(ctx context.Context, refusal error, look func() (api.Object, []byte, error)) (api.Object, []byte, error) {
	if !api.IsNotFound(refusal) && !api.IsConflict(refusal) || plant.On(plant.SkipReadBarrier) {
		// The planted bug skips this barrier as it skips the leader's.
		return nil, nil, refusal
	}
	rctx, cancel := context.WithTimeout(ctx, ReadIndexTimeout)
	defer cancel()
	idx, err := c.node.ReadIndex(rctx)
	if err != nil {
		return nil, nil, err
	}
	if err := c.node.WaitApplied(rctx, idx); err != nil {
		return nil, nil, err
	}
	return look()
}

// result turns one command's outcome into the caller's.
func (c *Core) result(res *store.Result) (*store.Result, error) {
	if res.Fatal() {
		c.log.Error("a raft entry could not be applied by this server; it must be upgraded", "err", res.Err)
		return nil, api.NewInternalError(res.Err)
	}
	if res.Err != nil {
		return res, res.Err
	}
	return res, nil
}

// applyBatch applies cmds in one raft entry and returns each command's
// result, or one error for all when the entry did not apply. Each result
// goes through result before use.
func (c *Core) applyBatch(ctx context.Context, cmds [][]byte) ([]*store.Result, error) {
	cmd := cmds[0]
	if len(cmds) > 1 {
		cmd = store.BatchCmd(cmds...)
	}
	ctx, cancel := context.WithTimeout(ctx, ApplyTimeout)
	defer cancel()
	resp, _, err := c.node.Apply(ctx, cmd)
	if err != nil {
		return nil, err
	}
	var results []*store.Result
	switch r := resp.(type) {
	case *store.Result:
		results = []*store.Result{r}
	case []*store.Result:
		results = r
	}
	if len(results) != len(cmds) || slices.Contains(results, nil) {
		return nil, api.NewInternalError(fmt.Errorf("the store returned %d results for %d commands", len(results), len(cmds)))
	}
	return results, nil
}

// Create creates obj as id: the namespace must exist and not be
// terminating; uid and creationTimestamp are set here; a generateName is
// retried with a new suffix when the name is taken. obj is changed
// (defaults, name) and handed to the store, which keeps it: the caller
// must not touch it afterwards.
func (c *Core) Create(ctx context.Context, id *auth.Identity, obj api.Object) (*store.Result, error) {
	if err := c.awaitBarrier(ctx); err != nil {
		return nil, err
	}
	defer c.allocations.hold(obj)()
	res := api.ResourceOf(obj)
	if res == nil {
		return nil, fmt.Errorf("create %T: %w", obj, api.ErrUnknownKind)
	}
	m := obj.GetObjectMeta()
	// The store checks the namespace again when it applies the create;
	// checking here first keeps a doomed write out of the raft log.
	if res.Namespaced {
		nsObj, err := c.st.GetObject(namespacesResource, "", m.Namespace)
		if err != nil {
			return nil, err
		}
		if nsObj.GetObjectMeta().DeletionTimestamp != nil {
			return nil, api.NewForbidden(fmt.Sprintf("%s %q is forbidden: unable to create new content in namespace %s because it is being terminated", res.Plural, m.Name, m.Namespace))
		}
	}
	generated := m.Name == "" && m.GenerateName != ""
	ownedFields(m, time.Now())
	for attempt := 1; ; attempt++ {
		if generated {
			m.Name = m.GenerateName + randomSuffix()
		}
		if err := c.check(ctx, admission.OpCreate, id, obj, nil); err != nil {
			return nil, err
		}
		// The store's CreateCmd hands obj to this server's Apply, which
		// then does not decode the command again.
		cmd, err := c.st.CreateCmd(obj)
		if err != nil {
			return nil, api.NewInternalError(err)
		}
		out, err := c.Apply(ctx, cmd)
		c.st.Release(cmd)
		if err != nil {
			if generated && api.IsAlreadyExists(err) && attempt < maxWriteAttempts {
				continue
			}
			return nil, err
		}
		return out, nil
	}
}

// ownedFields sets the metadata the server owns on a new object.
func ownedFields(m *api.ObjectMeta, now time.Time) {
	m.UID, m.CreationTimestamp, m.ResourceVersion, m.Generation, m.DeletionTimestamp, m.DeletionGracePeriodSeconds = NewUID(), api.NewTime(now), "", 0, nil, nil
}

// CreateBatch creates objs as id, each put through defaulting, validation
// and admission like any create, in one raft entry. Each create succeeds
// or fails on its own; the errors of those that failed are joined. Names
// are not generated: a batch is for objects whose names are unique.
func (c *Core) CreateBatch(ctx context.Context, id *auth.Identity, objs []api.Object) error {
	if err := c.awaitBarrier(ctx); err != nil {
		return err
	}
	defer c.allocations.hold(objs...)()
	var errs []error
	cmds := make([][]byte, 0, len(objs))
	now := time.Now()
	for _, obj := range objs {
		ownedFields(obj.GetObjectMeta(), now)
		if err := c.check(ctx, admission.OpCreate, id, obj, nil); err != nil {
			errs = append(errs, err)
			continue
		}
		cmd, err := c.st.CreateCmd(obj)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		cmds = append(cmds, cmd)
	}
	defer func() {
		for _, cmd := range cmds {
			c.st.Release(cmd)
		}
	}()
	if len(cmds) == 0 {
		return errors.Join(errs...)
	}
	results, err := c.applyBatch(ctx, cmds)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, r := range results {
		if _, err := c.result(r); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// check defaults, validates and admits obj; old is nil on create.
// Validation runs again after a configured admission chain, which may
// have changed the object, so what goes to raft is always valid.
func (c *Core) check(ctx context.Context, op string, id *auth.Identity, obj, old api.Object) error {
	api.SetDefaults(obj)
	if err := api.CheckValid(obj, old); err != nil {
		return err
	}
	if !c.admits(op, id, api.ResourceOf(obj)) {
		return nil
	}
	changing, err := c.admitChain(ctx, op, id, obj, old)
	if err != nil || !changing {
		return err
	}
	return api.CheckValid(obj, old)
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

// Update writes obj over the stored res ns/name as id: its status only
// when status is set, else everything but its status. Without a
// resourceVersion in obj the caller asked for last-writer-wins; the write
// is still conditional on the version it was validated against, and is
// tried again (with a fresh object from again) if another write came
// between. obj is changed and handed to the store.
func (c *Core) Update(ctx context.Context, id *auth.Identity, res *api.Resource, ns, name string, status bool, obj api.Object, again func() (api.Object, error)) (*store.Result, error) {
	if err := c.awaitBarrier(ctx); err != nil {
		return nil, err
	}
	if !status && c.mayAllocate(res, ns, name) {
		defer c.allocations.hold(obj)()
	}
	if res == tokensResource && name == c.cfg.AdminTokenID {
		return nil, api.NewForbidden(fmt.Sprintf("tokens %q is forbidden: this is the built-in admin token, derived from the cluster secret; "+
			"it is changed only by rotating it: outpost adm token rotate-admin", name))
	}
	op := admission.OpUpdate
	if status {
		op = admission.OpUpdateStatus
	}
	m := obj.GetObjectMeta()
	wantRV, wantUID := m.ResourceVersion, m.UID
	current := func() (api.Object, []byte, error) {
		cur, raw, err := c.st.Get(res, ns, name)
		if err != nil {
			return nil, nil, err
		}
		cm := cur.GetObjectMeta()
		if wantRV != "" && wantRV != cm.ResourceVersion {
			return nil, nil, api.NewConflict(res, name, "the object has been modified; please apply your changes to the latest version and try again")
		}
		if wantUID != "" && wantUID != cm.UID {
			return nil, nil, api.NewConflict(res, name, fmt.Sprintf("Precondition failed: UID in object meta: %s, UID stored: %s", wantUID, cm.UID))
		}
		return cur, raw, nil
	}
	for attempt := 1; ; attempt++ {
		cur, raw, err := current()
		if err != nil && attempt == 1 {
			cur, raw, err = c.confirmRefusal(ctx, err, current)
		}
		if err != nil {
			return nil, err
		}
		cm := cur.GetObjectMeta()
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
			m.DeletionGracePeriodSeconds = om.DeletionGracePeriodSeconds
			if res.HasStatus {
				keepStatus(obj, old)
			}
		}
		m.ResourceVersion = cm.ResourceVersion
		if err := c.check(ctx, op, id, obj, old); err != nil {
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
		out, err := c.Apply(ctx, cmd)
		if err != nil {
			if wantRV == "" && api.IsConflict(err) && attempt < maxWriteAttempts {
				continue
			}
			return nil, err
		}
		return out, nil
	}
}

// Delete deletes res ns/name as id, under opts' preconditions. A pod
// bound to a node is deleted gracefully (store.DeleteGraceCmd): marked
// terminating with opts' grace period or its own, and removed by its node
// once stopped, or at once with a grace period of 0. The fixed namespaces
// and the built-in admin token are refused, saying why.
func (c *Core) Delete(ctx context.Context, id *auth.Identity, res *api.Resource, ns, name string, opts api.DeleteOptions) (*store.Result, error) {
	if err := c.awaitBarrier(ctx); err != nil {
		return nil, err
	}
	if g := opts.GracePeriodSeconds; g != nil && *g < 0 {
		return nil, api.NewInvalid("DeleteOptions", name, api.ErrorList{
			api.Invalid(api.Root("gracePeriodSeconds"), *g, "must be greater than or equal to 0")})
	}
	if res == namespacesResource && (name == NamespaceDefault || name == NamespaceSystem) {
		return nil, api.NewForbidden(fmt.Sprintf("namespaces %q is forbidden: this namespace may not be deleted", name))
	}
	if res == tokensResource && name == c.cfg.AdminTokenID {
		// The token is derived from the cluster secret and authenticates
		// without its object (auth.AddStatic), so a delete would say
		// "deleted" while it kept working, and /readyz would go false.
		return nil, api.NewForbidden(fmt.Sprintf("tokens %q is forbidden: this is the built-in admin token, derived from the cluster secret; "+
			"deleting it would not revoke it. To revoke a leaked admin token or admin.conf, rotate it: outpost adm token rotate-admin "+
			"(every server's admin.conf gets the new one). Give people tokens of their own (outpost adm token create), which can be deleted", name))
	}
	if c.admits(admission.OpDelete, id, res) {
		_, raw, err := c.st.Get(res, ns, name)
		if err != nil {
			_, raw, err = c.confirmRefusal(ctx, err, func() (api.Object, []byte, error) { return c.st.Get(res, ns, name) })
		}
		if err != nil {
			return nil, err
		}
		old, err := copyOf(res, raw)
		if err != nil {
			return nil, err
		}
		if _, err := c.admitChain(ctx, admission.OpDelete, id, nil, old); err != nil {
			return nil, err
		}
	}
	if res == podsResource {
		grace := store.GraceDefault
		if g := opts.GracePeriodSeconds; g != nil {
			grace = *g
		}
		return c.Apply(ctx, store.DeleteGraceCmd(res, ns, name, opts.Preconditions, time.Now(), grace))
	}
	return c.Apply(ctx, store.DeleteCmd(res, ns, name, opts.Preconditions, time.Now()))
}

// AdminToken returns the built-in admin token's object and the
// generation of its secret (auth.AdminTokenGeneration); nil before the
// leader's bootstrap wrote it.
func (c *Core) AdminToken() (*api.Token, int) {
	obj, err := c.st.GetObject(tokensResource, "", c.cfg.AdminTokenID)
	if err != nil {
		return nil, 0
	}
	tok, ok := obj.(*api.Token)
	if !ok {
		return nil, 0
	}
	return tok, adminGeneration(tok)
}

func adminGeneration(tok *api.Token) int {
	gen, _ := strconv.Atoi(tok.Annotations[api.AnnotationAdminTokenGeneration])
	return max(gen, 0)
}

// RotateAdminToken moves the built-in admin token to its next
// generation, as id (a cluster admin): one conditional update of its
// object's secretHash and generation, so two rotations at once cannot both
// win. hashOf gives a generation's secret hash. It returns the new
// generation.
func (c *Core) RotateAdminToken(ctx context.Context, id *auth.Identity, hashOf func(gen int) string) (int, error) {
	if id.Role != api.RoleClusterAdmin {
		return 0, api.NewForbidden(fmt.Sprintf("tokens %q is forbidden: User %q cannot rotate the admin token: only a %s may", c.cfg.AdminTokenID, id.Name, api.RoleClusterAdmin))
	}
	obj, raw, err := c.st.Get(tokensResource, "", c.cfg.AdminTokenID)
	if api.IsNotFound(err) {
		return 0, api.NewServiceUnavailable("the admin token's object does not exist yet: the cluster is still bootstrapping; retry shortly")
	}
	if err != nil {
		return 0, err
	}
	cur, ok := obj.(*api.Token)
	if !ok {
		return 0, api.NewInternalError(fmt.Errorf("token %s is stored as %T", c.cfg.AdminTokenID, obj))
	}
	// The copy keeps the stored resourceVersion: the update is
	// conditional on it.
	next, err := copyOf(tokensResource, raw)
	if err != nil {
		return 0, err
	}
	tok := next.(*api.Token)
	gen := adminGeneration(cur) + 1
	if tok.Annotations == nil {
		tok.Annotations = map[string]string{}
	}
	tok.Annotations[api.AnnotationAdminTokenGeneration] = strconv.Itoa(gen)
	tok.Spec.SecretHash = hashOf(gen)
	tok.Spec.Description = fmt.Sprintf("cluster admin, derived from the cluster secret (generation %d)", gen)
	if err := c.check(ctx, admission.OpUpdate, id, tok, cur); err != nil {
		return 0, err
	}
	cmd, err := store.UpdateCmd(tok, store.SubresourceMain)
	if err != nil {
		return 0, api.NewInternalError(err)
	}
	if _, err := c.Apply(ctx, cmd); err != nil {
		return 0, err
	}
	return gen, nil
}

// Bind assigns pod ns/name to a node as id: spec.nodeName and the
// condition PodScheduled=True, in one raft entry (store.BindCmd), so that
// a pod is never bound without its condition.
func (c *Core) Bind(ctx context.Context, id *auth.Identity, ns, name string, bind store.Binding) (*store.Result, error) {
	if err := c.awaitBarrier(ctx); err != nil {
		return nil, err
	}
	cmd, err := c.bindCmd(ctx, id, ns, name, bind)
	if err != nil {
		return nil, err
	}
	return c.Apply(ctx, cmd)
}

// bindCmd checks a binding of pod ns/name as id and returns its command.
// What the store would refuse is refused here without a raft entry; the
// store checks again on the state the entry meets.
func (c *Core) bindCmd(ctx context.Context, id *auth.Identity, ns, name string, bind store.Binding) ([]byte, error) {
	cur, raw, err := c.st.Get(podsResource, ns, name)
	if err != nil {
		cur, raw, err = c.confirmRefusal(ctx, err, func() (api.Object, []byte, error) { return c.st.Get(podsResource, ns, name) })
	}
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
	if c.admits(admission.OpBind, id, podsResource) {
		if err := c.admitBind(ctx, id, raw, bind.NodeName); err != nil {
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
func (c *Core) admitBind(ctx context.Context, id *auth.Identity, raw []byte, node string) error {
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
	_, err = c.admitChain(ctx, admission.OpBind, id, p, old)
	return err
}

// NewUID returns a random (version 4) UUID in its text form.
func NewUID() string {
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

// Package controllertest gives control-loop tests a controller.Client
// backed by a real store.Store, with commands applied at increasing
// indexes as raft would apply them, but without raft, HTTP or admission.
// Writes are defaulted and validated as the server does, so a loop that
// passes here writes objects the server accepts.
package controllertest

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/controller"
	"github.com/outpost-edge/outpost/controlplane/store"
)

// Fake is a controller.Client over an in-memory store.
type Fake struct {
	st *store.Store
	mu sync.Mutex // serialises applies, as raft does
	// Now is the clock writes use; default time.Now.
	Now func() time.Time
	// Writes counts successful writes by kind of call ("create pods",
	// "update deployments", "bind", ...), for tests that check a loop
	// writes no more than it must.
	writes map[string]int
	idx    uint64
	// EvictHook, when set, may refuse an eviction (as a disruption
	// budget would, with a 429) before Evict deletes the pod. Budgets
	// themselves are the core's (controlplane/core).
	EvictHook func(namespace, name string) error
}

var _ controller.Client = (*Fake)(nil)

// New returns a fake with namespaces default and outpost-system.
func New() *Fake {
	f := &Fake{st: store.New(store.Options{}), Now: time.Now, writes: map[string]int{}}
	for _, ns := range []string{"default", "outpost-system"} {
		if _, err := f.Create(context.Background(), &api.Namespace{ObjectMeta: api.ObjectMeta{Name: ns}}); err != nil {
			panic(err) // a bug of this package, not of input
		}
	}
	return f
}

// Store is the underlying store.
func (f *Fake) Store() *store.Store { return f.st }

// Writes returns how many successful writes of kind ("create pods",
// "update replicasets", "status deployments", "delete pods", "bind") were
// made.
func (f *Fake) Writes(kind string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.writes[kind]
}

func (f *Fake) apply(cmd []byte) any {
	f.idx++
	return f.st.Apply(f.idx, cmd)
}

func (f *Fake) applyOne(kind string, cmd []byte) (api.Object, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	res, ok := f.apply(cmd).(*store.Result)
	if !ok {
		return nil, fmt.Errorf("store returned a batch result for one command")
	}
	if res.Err != nil {
		return nil, res.Err
	}
	f.writes[kind]++
	return res.Object, nil
}

// Get implements controller.Client.
func (f *Fake) Get(r *api.Resource, namespace, name string) (api.Object, error) {
	obj, _, err := f.st.Get(r, namespace, name)
	return obj, err
}

// List implements controller.Client.
func (f *Fake) List(r *api.Resource) ([]api.Object, uint64, error) {
	return f.st.Objects(r)
}

// Watch implements controller.Client.
func (f *Fake) Watch(ctx context.Context, r *api.Resource, fromRV uint64) (<-chan api.WatchEvent, error) {
	return f.st.Watch(ctx, r, "", store.ListOptions{}, fromRV, false)
}

func (f *Fake) check(obj, old api.Object) error {
	api.SetDefaults(obj)
	return api.CheckValid(obj, old)
}

// Create implements controller.Client.
func (f *Fake) Create(_ context.Context, obj api.Object) (api.Object, error) {
	m := obj.GetObjectMeta()
	if m.Name == "" && m.GenerateName != "" {
		m.Name = m.GenerateName + suffix()
	}
	m.UID = uid()
	m.CreationTimestamp = api.NewTime(f.Now())
	m.ResourceVersion = ""
	if err := f.check(obj, nil); err != nil {
		return nil, err
	}
	cmd, err := store.CreateCmd(obj)
	if err != nil {
		return nil, err
	}
	return f.applyOne("create "+api.ResourceOf(obj).Plural, cmd)
}

// Update implements controller.Client.
func (f *Fake) Update(ctx context.Context, obj api.Object) (api.Object, error) {
	return f.update(obj, store.SubresourceMain, "update ")
}

// UpdateStatus implements controller.Client.
func (f *Fake) UpdateStatus(ctx context.Context, obj api.Object) (api.Object, error) {
	return f.update(obj, store.SubresourceStatus, "status ")
}

func (f *Fake) update(obj api.Object, sub store.Subresource, kind string) (api.Object, error) {
	r := api.ResourceOf(obj)
	m := obj.GetObjectMeta()
	cur, _, err := f.st.Get(r, m.Namespace, m.Name)
	if err != nil {
		return nil, err
	}
	cm := cur.GetObjectMeta()
	if m.ResourceVersion == "" {
		m.ResourceVersion = cm.ResourceVersion
	}
	m.UID, m.CreationTimestamp = cm.UID, cm.CreationTimestamp
	if err := f.check(obj, cur); err != nil {
		return nil, err
	}
	cmd, err := store.UpdateCmd(obj, sub)
	if err != nil {
		return nil, err
	}
	return f.applyOne(kind+r.Plural, cmd)
}

// Delete implements controller.Client.
func (f *Fake) Delete(_ context.Context, r *api.Resource, namespace, name string, opts api.DeleteOptions) error {
	cmd := store.DeleteCmd(r, namespace, name, opts.Preconditions, f.Now())
	if r.Kind == "Pod" {
		// As the core does: a bound pod is marked terminating.
		grace := store.GraceDefault
		if opts.GracePeriodSeconds != nil {
			grace = *opts.GracePeriodSeconds
		}
		cmd = store.DeleteGraceCmd(r, namespace, name, opts.Preconditions, f.Now(), grace)
	}
	_, err := f.applyOne("delete "+r.Plural, cmd)
	return err
}

// Evict implements controller.Client: EvictHook's answer, then a
// graceful delete.
func (f *Fake) Evict(ctx context.Context, namespace, name string, opts api.DeleteOptions) error {
	f.mu.Lock()
	hook := f.EvictHook
	f.mu.Unlock()
	if hook != nil {
		if err := hook(namespace, name); err != nil {
			return err
		}
	}
	return f.Delete(ctx, api.ResourceForKind("Pod"), namespace, name, opts)
}

// Bind implements controller.Client: all bindings in one entry, as the
// server batches them.
func (f *Fake) Bind(_ context.Context, bindings []controller.Binding) []error {
	errs := make([]error, len(bindings))
	cmds := make([][]byte, len(bindings))
	now := f.Now()
	for i, b := range bindings {
		cmds[i] = store.BindCmd(b.Namespace, b.Name, store.Binding{NodeName: b.NodeName, UID: b.UID, Now: now})
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	results, ok := f.apply(store.BatchCmd(cmds...)).([]*store.Result)
	if !ok || len(results) != len(bindings) {
		for i := range errs {
			errs[i] = fmt.Errorf("store returned %d results for %d bindings", len(results), len(bindings))
		}
		return errs
	}
	for i, res := range results {
		if res.Err != nil {
			errs[i] = res.Err
			continue
		}
		f.writes["bind"]++
	}
	return errs
}

func uid() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

func suffix() string {
	const chars = "bcdfghjklmnpqrstvwxz2456789"
	var b [5]byte
	_, _ = rand.Read(b[:])
	for i := range b {
		b[i] = chars[int(b[i])%len(chars)]
	}
	return string(b[:])
}

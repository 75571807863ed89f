package controller

import (
	"context"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// Client is how a control loop reads and changes the cluster.
//
// Objects returned by List, Get and Watch are shared with the store: a
// loop that wants to change one works on Copy(obj). Writes return the
// stored object; their errors are *api.StatusError (IsConflict,
// IsNotFound, IsAlreadyExists ... tell them apart) or, when the write's
// outcome is unknown (leadership lost), another error.
type Client interface {
	// Get returns the object r namespace/name from the local store.
	Get(r *api.Resource, namespace, name string) (api.Object, error)
	// List returns every object of r and the resourceVersion the list was
	// read at; Watch(fromRV) then misses nothing.
	List(r *api.Resource) ([]api.Object, uint64, error)
	// Watch streams the changes of r after fromRV. The channel closes when
	// ctx ends; an ERROR event (410) means the watch fell behind and the
	// caller must list again.
	Watch(ctx context.Context, r *api.Resource, fromRV uint64) (<-chan api.WatchEvent, error)

	// Create creates obj; generateName is honoured.
	Create(ctx context.Context, obj api.Object) (api.Object, error)
	// Update replaces obj's spec and metadata (not its status); a
	// non-empty resourceVersion must match the stored one (else 409).
	Update(ctx context.Context, obj api.Object) (api.Object, error)
	// UpdateStatus replaces obj's status only, under the same rule.
	UpdateStatus(ctx context.Context, obj api.Object) (api.Object, error)
	// Delete deletes an object; non-empty preconditions must hold. A pod
	// bound to a node is marked terminating unless the grace period is 0.
	Delete(ctx context.Context, r *api.Resource, namespace, name string, opts api.DeleteOptions) error
	// Evict asks for a pod's graceful deletion through the eviction API,
	// which refuses (429 TooManyRequests) when a disruption budget would
	// break; non-empty preconditions must hold.
	Evict(ctx context.Context, namespace, name string, opts api.DeleteOptions) error
	// Bind binds pods to nodes, as POST pods/NAME/binding would, in as
	// few raft entries as it can. errs[i] is the outcome of bindings[i].
	Bind(ctx context.Context, bindings []Binding) (errs []error)
}

// Binding is one pod placed on one node.
type Binding struct {
	Namespace, Name string
	// UID, when set, must be the pod's: a pod deleted and created again
	// under the same name is not bound on a decision made for the old one.
	UID string
	// NodeName is where the pod goes.
	NodeName string
	// Scheduler is the scheduler that chose the node; the Scheduled event
	// of a successful binding names it as its source, so that `describe
	// pod` shows which scheduler placed the pod (SCH-12).
	Scheduler string
}

// Copy returns a private deep copy of obj, for a loop to change.
func Copy(obj api.Object) (api.Object, error) { return api.DeepCopy(obj) }

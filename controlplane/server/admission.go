package server

import (
	"context"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/auth"
)

// Admission operations, the op argument of Admit.
const (
	// OpCreate is a new object; old is nil.
	OpCreate = "CREATE"
	// OpUpdate replaces an object's spec and metadata (status is kept).
	OpUpdate = "UPDATE"
	// OpUpdateStatus replaces an object's status; obj carries the stored
	// spec and metadata.
	OpUpdateStatus = "UPDATE_STATUS"
	// OpBind assigns a pod to a node through pods/NAME/binding; obj is the
	// pod with spec.nodeName set. A bind writes only the node: changes to
	// obj are not kept.
	OpBind = "BIND"
	// OpDelete removes an object; obj is nil and old is the stored object.
	OpDelete = "DELETE"
)

// Admission is one step of the admission chain. Admit runs on the leader
// after defaulting and validation, before the write goes to raft; it may
// change obj (a mutating step) and refuses the write by returning an error,
// preferably an *api.StatusError (a 403 or 422 naming the problem). obj and
// old are private copies: changing them touches nothing stored. Admit must
// not block for long: it holds up the write.
type Admission interface {
	Admit(ctx context.Context, op string, id *auth.Identity, obj, old api.Object) error
}

// admits reports whether any step of the chain acts on op by id on r.
func (s *Server) admits(op string, id *auth.Identity, r *api.Resource) bool {
	for _, a := range s.admission {
		if sc, ok := a.(AdmissionScope); !ok || sc.Applies(op, id, r) {
			return true
		}
	}
	return false
}

// admit runs the chain in order, the built-in steps first, and stops at
// the first refusal.
func (s *Server) admit(ctx context.Context, op string, id *auth.Identity, obj, old api.Object) error {
	r := obj
	if r == nil {
		r = old
	}
	res := api.ResourceOf(r)
	for _, a := range s.admission {
		if sc, ok := a.(AdmissionScope); ok && !sc.Applies(op, id, res) {
			continue
		}
		if err := a.Admit(ctx, op, id, obj, old); err != nil {
			return err
		}
	}
	return nil
}

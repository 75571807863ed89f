package server

import (
	"context"

	"github.com/outpost-edge/outpost/controlplane/admission"
	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/auth"
)

// Admission operations, the op argument of Admit (see package admission).
const (
	OpCreate       = admission.OpCreate
	OpUpdate       = admission.OpUpdate
	OpUpdateStatus = admission.OpUpdateStatus
	OpBind         = admission.OpBind
	OpDelete       = admission.OpDelete
)

// Admission is one step of the admission chain (admission.Interface).
type Admission = admission.Interface

// AdmissionScope is an Admission step that acts only on some requests
// (admission.Scope). The server asks it before it reads and copies the
// stored object for a delete or a binding, which most requests then skip.
type AdmissionScope = admission.Scope

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

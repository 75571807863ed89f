package core

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/outpost-edge/outpost/controlplane/admission"
	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/auth"
)

// admits reports whether any step of the chain acts on op by id on r. A
// delete or a binding reads and copies the stored object only when one
// does, which most requests then skip.
func (c *Core) admits(op string, id *auth.Identity, r *api.Resource) bool {
	for _, a := range c.admit {
		if sc, ok := a.(admission.Scope); !ok || sc.Applies(op, id, r) {
			return true
		}
	}
	return false
}

// admitChain runs the chain in order, the built-in steps first, and stops
// at the first refusal. It reports whether a step that may make obj
// invalid (one that is not admission.KeepsValid) ran.
func (c *Core) admitChain(ctx context.Context, op string, id *auth.Identity, obj, old api.Object) (changing bool, err error) {
	r := obj
	if r == nil {
		r = old
	}
	res := api.ResourceOf(r)
	for _, a := range c.admit {
		if sc, ok := a.(admission.Scope); ok && !sc.Applies(op, id, res) {
			continue
		}
		if err := a.Admit(ctx, op, id, obj, old); err != nil {
			var se *api.StatusError
			if !errors.As(err, &se) {
				// A refusal happens before raft: the write certainly did
				// not apply. Left bare, the error would reach the client
				// as a 504 "may or may not have been applied".
				err = api.NewInternalError(fmt.Errorf("admission refused the %s: %w", strings.ToLower(op), err))
			}
			return changing, err
		}
		if _, safe := a.(admission.KeepsValid); !safe {
			changing = true
		}
	}
	return changing, nil
}

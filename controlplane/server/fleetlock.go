package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/auth"
)

// FleetLock (the reboot-coordination protocol of Zincati, Flatcar's
// update agents and Airlock; SPEC UPD-8 item 6): a host that updates
// itself asks POST /v1/pre-reboot before it reboots and POST
// /v1/steady-state once it is back, each with the header
// fleet-lock-protocol: true and the body {"client_params": {"id", "group"}}.
// The group names a MachineConfigPool ("default" is "worker"); the lock
// is a place in the pool's maxUnavailable, shared with the pool's own
// updating nodes, and its holders are kept on the pool (raft-replicated,
// written conditionally, so two servers cannot hand out one place twice).
//
// Zincati sends no credentials, so the token goes in the URL its config
// names: base_url = "https://SERVER:6443/fleetlock/TOKEN/" (a fleetlock
// token, as `outpost adm token create --role fleetlock` makes: it can do
// nothing else). A client that can send an Authorization header may use
// /v1/... directly.

const (
	fleetLockHeader = "fleet-lock-protocol"
	fleetLockPrefix = "/fleetlock/"
	// fleetLockBodyMax bounds a FleetLock request's body.
	fleetLockBodyMax = 4096
)

var mcpResource = api.ResourceForKind("MachineConfigPool")

// fleetLockError is the protocol's error body.
type fleetLockError struct {
	Kind  string `json:"kind"`
	Value string `json:"value"`
}

func writeFleetLockError(w *recorder, code int, kind, value string) {
	writeJSON(w, code, fleetLockError{Kind: kind, Value: value})
}

// fleetLockRoute splits a FleetLock path: the operation ("pre-reboot",
// "steady-state") and the token in the path, if any.
func fleetLockRoute(path string) (op, token string, ok bool) {
	rest := path
	if p, found := strings.CutPrefix(path, fleetLockPrefix); found {
		// Anything under /fleetlock/ is FleetLock's, and its token is
		// taken out of the path even when the rest is wrong (404).
		tok, r, _ := strings.Cut(p, "/")
		token, rest = tok, "/"+r
		ok = true
	}
	switch rest {
	case "/v1/pre-reboot":
		return "pre-reboot", token, true
	case "/v1/steady-state":
		return "steady-state", token, true
	}
	return "", token, ok
}

// fleetLockRequest is the protocol's body.
type fleetLockRequest struct {
	ClientParams struct {
		ID    string `json:"id"`
		Group string `json:"group"`
	} `json:"client_params"`
}

// serveFleetLock answers a FleetLock request; the caller has
// authenticated it.
func (s *Server) serveFleetLock(w *recorder, r *http.Request, id *auth.Identity, op string) {
	w.label(verbCreate, "fleetlock")
	if op == "" {
		writeFleetLockError(w, http.StatusNotFound, "not_found", "FleetLock serves POST /fleetlock/TOKEN/v1/pre-reboot and /v1/steady-state")
		return
	}
	if r.Method != http.MethodPost {
		writeFleetLockError(w, http.StatusMethodNotAllowed, "method_not_allowed", "FleetLock requests are POSTs")
		return
	}
	// A FleetLock token, good for nothing else, or an administrator's.
	if id == nil || (id.Role != api.RoleFleetLock && id.Role != api.RoleClusterAdmin && id.Role != api.RoleServer) {
		writeFleetLockError(w, http.StatusForbidden, "forbidden", "FleetLock needs a fleetlock token (outpost adm token create --role fleetlock)")
		return
	}
	if r.Header.Get(fleetLockHeader) != "true" {
		writeFleetLockError(w, http.StatusBadRequest, "missing_header", "the header fleet-lock-protocol: true is required")
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, fleetLockBodyMax+1))
	if err != nil || len(body) > fleetLockBodyMax {
		writeFleetLockError(w, http.StatusBadRequest, "bad_body", "the body could not be read or is too large")
		return
	}
	var req fleetLockRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeFleetLockError(w, http.StatusBadRequest, "bad_body", "the body is not FleetLock JSON: "+err.Error())
		return
	}
	var problems []string
	if req.ClientParams.ID == "" {
		problems = append(problems, "client_params.id: required")
	} else if len(req.ClientParams.ID) > 256 {
		problems = append(problems, "client_params.id: longer than 256 characters")
	}
	group := req.ClientParams.Group
	if group == "" || group == "default" {
		group = "worker"
	}
	if len(problems) > 0 {
		writeFleetLockError(w, http.StatusBadRequest, "bad_params", strings.Join(problems, "; "))
		return
	}
	if s.forwardIfFollowerBody(w, r, body) {
		return
	}
	// The machine config controller gives nodes places under this lock
	// and writes the pool's count before it lets go.
	s.poolMu.Lock()
	defer s.poolMu.Unlock()
	for range 5 {
		obj, err := s.core.GetObject(mcpResource, "", group)
		if api.IsNotFound(err) {
			writeFleetLockError(w, http.StatusNotFound, "unknown_group", fmt.Sprintf("no machine config pool %q for group %q", group, req.ClientParams.Group))
			return
		}
		if err != nil {
			writeFleetLockError(w, http.StatusInternalServerError, "internal", err.Error())
			return
		}
		pool := obj.(*api.MachineConfigPool)
		holders := api.FleetLockHolders(pool)
		held := slices.IndexFunc(holders, func(h api.FleetLockHolder) bool { return h.ID == req.ClientParams.ID })
		var next []api.FleetLockHolder
		switch op {
		case "pre-reboot":
			if held >= 0 {
				writeJSON(w, http.StatusOK, struct{}{}) // it holds one already
				return
			}
			if pool.Spec.Paused {
				writeFleetLockError(w, http.StatusLocked, "paused", fmt.Sprintf("pool %s is paused: no host starts a reboot (outpost adm upgrade nodes --pool %s --resume)", group, group))
				return
			}
			limit := pool.Spec.MaxUnavailableOf(pool.Status.MachineCount)
			used := pool.Status.UnavailableMachineCount + int32(len(holders))
			if used >= limit {
				writeFleetLockError(w, http.StatusLocked, "failed_lock",
					fmt.Sprintf("pool %s has no place to reboot: %d of maxUnavailable %d taken (%d nodes updating or unavailable, %d FleetLock holders)",
						group, used, limit, pool.Status.UnavailableMachineCount, len(holders)))
				return
			}
			next = append(slices.Clone(holders), api.FleetLockHolder{ID: req.ClientParams.ID, Since: *api.NewTime(time.Now())})
		case "steady-state":
			if held < 0 {
				writeJSON(w, http.StatusOK, struct{}{})
				return
			}
			next = slices.Delete(slices.Clone(holders), held, held+1)
		}
		if err := s.setFleetLockHolders(r, id, pool, next); err != nil {
			if api.IsConflict(err) {
				continue // another lock or release came between: look again
			}
			writeFleetLockError(w, http.StatusInternalServerError, "internal", err.Error())
			return
		}
		s.log.Info("fleetlock", "op", op, "client", req.ClientParams.ID, "pool", group, "holders", len(next))
		writeJSON(w, http.StatusOK, struct{}{})
		return
	}
	writeFleetLockError(w, http.StatusServiceUnavailable, "busy", "the pool changed under every try; retry")
}

// setFleetLockHolders writes the pool's holders, conditional on the
// version read.
func (s *Server) setFleetLockHolders(r *http.Request, id *auth.Identity, pool *api.MachineConfigPool, holders []api.FleetLockHolder) error {
	b, err := json.Marshal(pool)
	if err != nil {
		return err
	}
	cp := new(api.MachineConfigPool)
	if err := json.Unmarshal(b, cp); err != nil {
		return err
	}
	if cp.Annotations == nil {
		cp.Annotations = map[string]string{}
	}
	if len(holders) == 0 {
		delete(cp.Annotations, api.AnnotationFleetLockHolders)
	} else {
		v, err := json.Marshal(holders)
		if err != nil {
			return err
		}
		cp.Annotations[api.AnnotationFleetLockHolders] = string(v)
	}
	_, err = s.core.Update(r.Context(), id, mcpResource, "", pool.Name, false, cp, nil)
	if err != nil && !api.IsConflict(err) {
		return errors.Join(errors.New("write the pool's lock holders"), err)
	}
	return err
}

// forwardIfFollowerBody is forwardIfFollower for a handler that has read
// the body.
func (s *Server) forwardIfFollowerBody(w *recorder, r *http.Request, body []byte) bool {
	if s.node.IsLeader() {
		return false
	}
	s.forward(w, r, body)
	return true
}

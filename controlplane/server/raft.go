package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/auth"
	"github.com/outpost-edge/outpost/raftstore"
)

// raftGroup is the API group of the raft membership endpoints.
const raftGroup = "outpost.io"

// membershipTimeout bounds one membership change.
const membershipTimeout = 30 * time.Second

// raftPeerList is the reply of GET /apis/outpost.io/v1/raft/peers.
type raftPeerList struct {
	Kind       string           `json:"kind"`
	APIVersion string           `json:"apiVersion"`
	Items      []raftstore.Peer `json:"items"`
}

// serveRaft serves /apis/outpost.io/v1/raft/peers[/ID[/promote|/demote]]:
// GET lists the members, POST .../promote and .../demote change a
// member's vote, DELETE .../ID removes it. Changes go to the leader and
// pass raftstore's quorum check; a refusal is a 409 saying why.
func (s *Server) serveRaft(w *recorder, r *http.Request, id *auth.Identity, segs []string) {
	w.label(verbGet, "raft/peers")
	if len(segs) == 0 || segs[0] != "peers" || len(segs) > 3 {
		writeError(w, notFoundPath())
		return
	}
	var op, peer string
	switch {
	case len(segs) == 1 && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		op = verbList
	case len(segs) == 2 && r.Method == http.MethodDelete:
		op, peer = "remove", segs[1]
	case len(segs) == 3 && r.Method == http.MethodPost && (segs[2] == "promote" || segs[2] == "demote"):
		op, peer = segs[2], segs[1]
	default:
		writeError(w, api.NewMethodNotAllowed(r.Method+" is not supported on "+r.URL.Path))
		return
	}
	verb := auth.VerbUpdate
	switch op {
	case verbList:
		verb = auth.VerbList
	case "remove":
		verb = auth.VerbDelete
	}
	w.label(verb, "raft/peers")
	if err := auth.Authorize(id, auth.Request{Verb: verb, Path: "/apis/outpost.io/v1/raft/peers"}, nil); err != nil {
		writeError(w, api.NewForbidden(err.Error()))
		return
	}
	if op == verbList {
		ctx, cancel := context.WithTimeout(r.Context(), membershipTimeout)
		defer cancel()
		peers, err := s.node.Peers(ctx)
		if err != nil {
			writeError(w, raftError(err, "list the raft members"))
			return
		}
		writeJSON(w, http.StatusOK, &raftPeerList{Kind: "RaftPeerList", APIVersion: raftGroup + "/v1", Items: peers})
		return
	}
	if s.forwardIfFollower(w, r) {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), membershipTimeout)
	defer cancel()
	var err error
	var msg string
	switch op {
	case "promote":
		err, msg = s.node.Promote(ctx, peer), "promoted "+peer+" to voter"
	case "demote":
		err, msg = s.node.Demote(ctx, peer), "demoted "+peer+" to non-voter"
	case "remove":
		err, msg = s.node.Remove(ctx, peer), "removed "+peer+" from the raft configuration"
	}
	if err != nil {
		if errors.Is(err, raftstore.ErrNotLeader) {
			s.forward(w, r, nil)
			return
		}
		writeError(w, membershipError(err, peer))
		return
	}
	s.log.Info("raft membership changed", "op", op, "peer", peer, "user", id.Name)
	writeJSON(w, http.StatusOK, &api.Status{TypeMeta: api.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: "Success", Message: msg, Code: http.StatusOK})
}

// membershipError maps a refused membership change to its Status: the
// quorum check's refusal is a 409 carrying its reason, an unknown member a
// 404.
func membershipError(err error, peer string) error {
	var se *api.StatusError
	switch {
	case errors.Is(err, raftstore.ErrQuorum):
		se = statusErr(http.StatusConflict, api.ReasonConflict, err.Error())
	case errors.Is(err, raftstore.ErrUnknownServer):
		se = statusErr(http.StatusNotFound, api.ReasonNotFound, fmt.Sprintf("raft peer %q not found", peer))
	default:
		return raftError(err, "change the raft membership")
	}
	se.Status.Details = &api.StatusDetails{Name: peer, Group: raftGroup, Kind: "raft/peers"}
	return se
}

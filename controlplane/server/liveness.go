package server

import (
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/auth"
	"github.com/outpost-edge/outpost/controlplane/controllers"
	"github.com/outpost-edge/outpost/raftstore"
)

// subHeartbeat is the heartbeat subresource of nodes in the outpost.io
// group: POST /apis/outpost.io/v1/nodes/NAME/heartbeat.
const subHeartbeat = auth.SubresourceHeartbeat

// liveness is the leader's memory of node heartbeats, as Nomad keeps its
// heartbeat timers: a heartbeat renews it without a raft entry, so that a
// node that is alive and unchanged costs the log nothing. It lives as
// long as one leadership's loops; the next leader starts empty, and the
// node lifecycle controller gives every node a full grace period from
// the moment it first looks, so a failover marks no node Unknown for
// heartbeats the old leader received.
type liveness struct {
	mu   sync.Mutex
	last map[string]time.Time
}

func newLiveness() *liveness { return &liveness{last: map[string]time.Time{}} }

func (l *liveness) renew(name string, at time.Time) {
	l.mu.Lock()
	l.last[name] = at
	l.mu.Unlock()
}

// LastHeartbeat is when the leader last heard node name's heartbeat (the
// leader's clock).
func (l *liveness) LastHeartbeat(name string) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.last[name]
	return t, ok
}

// serveNodeHeartbeat answers POST /apis/outpost.io/v1/nodes/NAME/heartbeat:
// a follower forwards it to the leader, which renews the node's liveness
// in memory and answers with the Ready status its store holds (so an
// agent whose node was marked Unknown posts its status again) and the
// servers to fail over to.
func (s *Server) serveNodeHeartbeat(w *recorder, r *http.Request, id *auth.Identity, name string) {
	if r.Method != http.MethodPost {
		writeError(w, api.NewMethodNotAllowed(r.Method+" is not supported on nodes "+name+"/"+subHeartbeat))
		return
	}
	if err := s.authorize(id, auth.Request{Verb: auth.VerbCreate, Resource: "nodes", Subresource: subHeartbeat, Name: name}); err != nil {
		writeError(w, err)
		return
	}
	if s.forwardIfFollower(w, r) {
		return
	}
	lv := s.liveness.Load()
	if lv == nil {
		// Leading, but before the barrier: the store may not hold the
		// node yet, and no controller reads liveness.
		writeError(w, unavailable("the leader is starting; retry", 1))
		return
	}
	obj, err := s.core.GetObject(nodesResource, "", name)
	if err != nil {
		writeError(w, api.NewNotFound(nodesResource, name))
		return
	}
	lv.renew(name, time.Now())
	ready := ""
	if n, ok := obj.(*api.Node); ok {
		for _, c := range n.Status.Conditions {
			if c.Type == api.NodeReady {
				ready = c.Status
			}
		}
	}
	hb := &api.NodeHeartbeat{
		TypeMeta: api.TypeMeta{APIVersion: "outpost.io/v1", Kind: "NodeHeartbeat"},
		NodeName: name,
		Ready:    ready,
		Servers:  s.ServerURLs(r.Context()),

		NodeMonitorGracePeriodMillis: s.nodeMonitorGrace().Milliseconds(),
	}
	s.machineRequests(hb)
	writeJSON(w, http.StatusOK, hb)
}

// machineRequests adds to a heartbeat's reply what the node's machine
// asks of its agent (the machine named as the node, as the agent's
// machine is): start the server role when the control plane machine set
// chose the host and it is no raft member yet; stop outpost's roles once
// the machine's deletion reached its provider (Terminable=True).
func (s *Server) machineRequests(hb *api.NodeHeartbeat) {
	obj, err := s.core.GetObject(machinesResource, "", hb.NodeName)
	if err != nil {
		return
	}
	m, ok := obj.(*api.Machine)
	if !ok {
		return
	}
	if m.DeletionTimestamp != nil {
		hb.Release = slices.ContainsFunc(m.Status.Conditions, func(c api.MachineCondition) bool {
			return c.Type == api.MachineTerminable && c.Status == api.ConditionTrue
		})
		return
	}
	req, asked := m.Annotations[controllers.AnnotationServerRequested]
	if !asked {
		return
	}
	peers, err := s.node.Configured()
	if err != nil || slices.ContainsFunc(peers, func(p raftstore.Peer) bool { return p.ID == hb.NodeName }) {
		return
	}
	sr := &api.ServerRoleRequest{}
	sr.Domain, _, _ = strings.Cut(req, " ")
	// The leader (this server) first: a lost member is likely among the
	// voters, and a join that asks it first waits for its dial to time
	// out.
	slices.SortStableFunc(peers, func(a, b raftstore.Peer) int {
		switch {
		case a.Leader == b.Leader:
			return 0
		case a.Leader:
			return -1
		}
		return 1
	})
	for _, p := range peers {
		if p.Suffrage == "Voter" {
			sr.Join = append(sr.Join, p.Address)
		}
	}
	hb.ServerRole = sr
}

// nodeMonitorGrace is the node monitor grace period in force.
func (s *Server) nodeMonitorGrace() time.Duration {
	if s.cfg.NodeMonitorGracePeriod > 0 {
		return s.cfg.NodeMonitorGracePeriod
	}
	return controllers.DefaultNodeMonitorGracePeriod
}

// NodeHeartbeat is when this server, as leader, last heard node name's
// heartbeat; false when it does not lead or has not heard one.
func (s *Server) NodeHeartbeat(name string) (time.Time, bool) {
	lv := s.liveness.Load()
	if lv == nil {
		return time.Time{}, false
	}
	return lv.LastHeartbeat(name)
}

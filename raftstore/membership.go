package raftstore

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Peer describes one server of the configuration. LastIndex, APIAddr and
// Reachable come from the peer's own status RPC; Error says why it failed.
type Peer struct {
	ID        string `json:"id"`
	Address   string `json:"address"`
	APIAddr   string `json:"apiAddr,omitempty"`
	Suffrage  string `json:"suffrage"` // "Voter" or "Nonvoter"
	Leader    bool   `json:"leader"`
	LastIndex uint64 `json:"lastIndex"`
	Reachable bool   `json:"reachable"`
	Error     string `json:"error,omitempty"`
	// Version and Info are what the server's status says (Status).
	Version string            `json:"version,omitempty"`
	Info    map[string]string `json:"info,omitempty"`
}

func (n *Node) configuration() (raft.Configuration, uint64, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return raft.Configuration{}, 0, n.raftError("get configuration", err)
	}
	return f.Configuration(), f.Index(), nil
}

// removedProbeEvery bounds how often a leaderless node asks the others
// whether it was removed.
const removedProbeEvery = 2 * time.Second

// Removed reports whether this server was removed from the cluster and
// will never have a leader again: its own configuration no longer holds
// it, or, while it has no leader, the leader it can reach says so. The
// leader stops replicating to a removed server as soon as it appends the
// change, so a removed server often never learns it from the log. Once
// true, it stays true until the node is closed.
func (n *Node) Removed(ctx context.Context) bool {
	if n.closed.Load() {
		return false
	}
	n.removedMu.Lock()
	if n.removed {
		n.removedMu.Unlock()
		return true
	}
	n.removedMu.Unlock()
	c, _, err := n.configuration()
	if err != nil || len(c.Servers) == 0 {
		return false
	}
	if _, found := findServer(c, n.cfg.ID); !found {
		n.markRemoved()
		return true
	}
	if id, _ := n.raft.LeaderWithID(); id != "" {
		return false
	}
	n.removedMu.Lock()
	due := time.Since(n.removedProbe) >= removedProbeEvery
	if due {
		n.removedProbe = time.Now()
	}
	n.removedMu.Unlock()
	if !due {
		return false
	}
	for _, p := range n.probe(ctx, c.Servers) {
		if p.err == nil && p.status.IsLeader && p.status.ID != n.cfg.ID && !slices.Contains(p.status.Servers, n.cfg.ID) {
			n.markRemoved()
			return true
		}
	}
	return false
}

func (n *Node) markRemoved() {
	n.removedMu.Lock()
	defer n.removedMu.Unlock()
	if !n.removed {
		n.removed = true
		n.log.Warn("this server was removed from the cluster")
	}
}

func findServer(c raft.Configuration, id string) (raft.Server, bool) {
	for _, s := range c.Servers {
		if string(s.ID) == id {
			return s, true
		}
	}
	return raft.Server{}, false
}

// server returns the member id of the current configuration.
func (n *Node) server(id string) (raft.Server, error) {
	c, _, err := n.configuration()
	if err != nil {
		return raft.Server{}, err
	}
	s, ok := findServer(c, id)
	if !ok {
		return raft.Server{}, fmt.Errorf("%q: %w", id, ErrUnknownServer)
	}
	return s, nil
}

type probeResult struct {
	status Status
	err    error
}

// probeTimeout bounds one server's answer to a probe: a dead one (its
// link cut, so no reset) would otherwise hold every listing of the
// members for the RPC's dial timeout, and with it the quorum guard and
// the control plane machine set.
const probeTimeout = 3 * time.Second

// probe asks every server for its status, in parallel.
func (n *Node) probe(ctx context.Context, servers []raft.Server) []probeResult {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	out := make([]probeResult, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		wg.Go(func() {
			st, err := n.status(ctx, string(s.ID), string(s.Address))
			out[i] = probeResult{status: st, err: err}
		})
	}
	wg.Wait()
	return out
}

// Peers lists the configuration with each server's own view of itself.
func (n *Node) Peers(ctx context.Context) ([]Peer, error) {
	peers, err := n.Configured()
	if err != nil {
		return nil, err
	}
	servers := make([]raft.Server, len(peers))
	for i, p := range peers {
		servers[i] = raft.Server{ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.Address)}
	}
	for i, r := range n.probe(ctx, servers) {
		p := &peers[i]
		if r.err != nil {
			p.Error = r.err.Error()
		} else {
			p.Reachable = true
			p.APIAddr = r.status.APIAddr
			p.LastIndex = r.status.LastIndex
			p.Version, p.Info = r.status.Version, r.status.Info
		}
	}
	return peers, nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// members returns the configuration as the quorum rule sees it: voters and
// the change's target are probed, other non-voters do not matter.
func (n *Node) members(ctx context.Context, target string) ([]Member, raft.Configuration, uint64, error) {
	c, index, err := n.configuration()
	if err != nil {
		return nil, c, 0, err
	}
	var probed []raft.Server
	for _, s := range c.Servers {
		if s.Suffrage == raft.Voter || string(s.ID) == target {
			probed = append(probed, s)
		}
	}
	res := n.probe(ctx, probed)
	healthy := make(map[raft.ServerID]bool, len(probed))
	for i, s := range probed {
		healthy[s.ID] = res[i].err == nil
	}
	ms := make([]Member, len(c.Servers))
	for i, s := range c.Servers {
		ms[i] = Member{ID: string(s.ID), Voter: s.Suffrage == raft.Voter, Healthy: healthy[s.ID]}
	}
	return ms, c, index, nil
}

// CheckChange is THE quorum check (SPEC CPL-1): it probes the voters and
// applies DecideChange to the current configuration. Every membership
// change of this package calls it; callers planning a change (a controller,
// a CLI command) call it to learn early whether it would be refused.
func (n *Node) CheckChange(ch Change) error {
	ctx, cancel := context.WithTimeout(n.ctx, 2*n.probeTimeout())
	defer cancel()
	ms, _, _, err := n.members(ctx, ch.ID)
	if err != nil {
		return err
	}
	return DecideChange(ms, ch)
}

// change runs one membership change on the leader: check, then apply it
// against exactly the configuration that was checked (prevIndex).
func (n *Node) change(ctx context.Context, ch Change, do func(s raft.Server, found bool, prevIndex uint64, timeout time.Duration) raft.IndexFuture) error {
	if n.closed.Load() {
		return ErrClosed
	}
	if ch.ID == "" {
		return fmt.Errorf("%s: id: required", ch.Op)
	}
	n.changeMu.Lock()
	defer n.changeMu.Unlock()
	if !n.IsLeader() {
		return fmt.Errorf("%s %q: %w", ch.Op, ch.ID, n.notLeaderErr())
	}
	ms, c, index, err := n.members(ctx, ch.ID)
	if err != nil {
		return err
	}
	s, found := findServer(c, ch.ID)
	// Only an add names a server that may be new; any other change of an
	// unknown ID is most likely a typo, and "done" would hide it.
	if !found && ch.Op != ChangeAddNonVoter {
		return fmt.Errorf("%s %q: %w", ch.Op, ch.ID, ErrUnknownServer)
	}
	if err := DecideChange(ms, ch); err != nil {
		return err
	}
	timeout, err := enqueueTimeout(ctx)
	if err != nil {
		return fmt.Errorf("%s %q: %w", ch.Op, ch.ID, err)
	}
	f := do(s, found, index, timeout)
	if f == nil {
		return nil // nothing to change
	}
	if err := waitFuture(ctx, f); err != nil {
		return n.raftError(fmt.Sprintf("%s %q", ch.Op, ch.ID), err)
	}
	n.log.Info("raft membership changed", "change", string(ch.Op), "server", ch.ID, "index", f.Index())
	return nil
}

// AddNonVoter adds a server that receives the log but does not vote (the
// first step of the safe join path). An existing voter keeps its vote and
// only has its address updated.
func (n *Node) AddNonVoter(ctx context.Context, id, addr string) error {
	if addr == "" {
		return fmt.Errorf("%s %q: addr: required", ChangeAddNonVoter, id)
	}
	return n.change(ctx, Change{Op: ChangeAddNonVoter, ID: id}, func(s raft.Server, found bool, prev uint64, timeout time.Duration) raft.IndexFuture {
		if found && string(s.Address) == addr {
			return nil
		}
		return n.raft.AddNonvoter(raft.ServerID(id), raft.ServerAddress(addr), prev, timeout)
	})
}

// Promote makes a non-voter a voter; it should be caught up (WaitCaughtUp).
// An ID that is not in the configuration is ErrUnknownServer.
func (n *Node) Promote(ctx context.Context, id string) error {
	return n.change(ctx, Change{Op: ChangePromote, ID: id}, func(s raft.Server, found bool, prev uint64, timeout time.Duration) raft.IndexFuture {
		if s.Suffrage == raft.Voter {
			return nil
		}
		return n.raft.AddVoter(s.ID, s.Address, prev, timeout)
	})
}

// Demote turns a voter into a non-voter. An ID that is not in the
// configuration is ErrUnknownServer.
func (n *Node) Demote(ctx context.Context, id string) error {
	return n.change(ctx, Change{Op: ChangeDemote, ID: id}, func(s raft.Server, _ bool, prev uint64, timeout time.Duration) raft.IndexFuture {
		if s.Suffrage != raft.Voter {
			return nil
		}
		return n.raft.DemoteVoter(s.ID, prev, timeout)
	})
}

// Remove takes a server out of the configuration. An ID that is not in the
// configuration is ErrUnknownServer: a caller retrying a removal that may
// have happened treats that error as done.
func (n *Node) Remove(ctx context.Context, id string) error {
	return n.change(ctx, Change{Op: ChangeRemove, ID: id}, func(s raft.Server, _ bool, prev uint64, timeout time.Duration) raft.IndexFuture {
		return n.raft.RemoveServer(s.ID, prev, timeout)
	})
}

// caughtUp reports whether a server whose log ends at last has every entry
// up to target (the commit index when the wait began) and is at most lag
// entries behind the commit index now.
func caughtUp(last, target, commit, lag uint64) bool {
	return last >= target && last+lag >= commit
}

// WaitCaughtUp blocks until the server has every entry that was committed
// when the call began and is within Config.CatchUpLag entries of the commit
// index now (which keeps moving under load). Call it on the leader.
func (n *Node) WaitCaughtUp(ctx context.Context, id string) error {
	target := n.raft.CommitIndex()
	backoff := 10 * time.Millisecond
	for {
		if n.closed.Load() {
			return ErrClosed
		}
		s, err := n.server(id)
		if err != nil {
			return fmt.Errorf("wait for it to catch up: %w", err)
		}
		st, err := n.status(ctx, id, string(s.Address))
		commit := n.raft.CommitIndex()
		if err == nil && caughtUp(st.LastIndex, target, commit, n.cfg.CatchUpLag) {
			return nil
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			if err != nil {
				return fmt.Errorf("wait for %q to catch up: %w (last error: %w)", id, ctx.Err(), err)
			}
			return fmt.Errorf("wait for %q to catch up: %w (at %d, commit index %d)", id, ctx.Err(), st.LastIndex, commit)
		case <-n.ctx.Done():
			t.Stop()
			return ErrClosed
		case <-t.C:
		}
		backoff = min(2*backoff, 250*time.Millisecond)
	}
}

// handleJoin serves a Join RPC: on the leader, add the server as a
// non-voter, wait until it has caught up, then promote it; a follower
// passes the request to the leader once.
func (n *Node) handleJoin(ctx context.Context, req joinRequest) error {
	if req.ID == "" || req.RaftAddr == "" {
		return fmt.Errorf("join: id and raftAddr: required")
	}
	if !n.IsLeader() {
		if req.Forwarded {
			return n.notLeaderErr()
		}
		li := n.Leader()
		if li.ID == "" {
			return fmt.Errorf("join %q: %w", req.ID, ErrNoLeader)
		}
		req.Forwarded = true
		return n.rpc.call(ctx, li.RaftAddr, rpcJoin, &req, nil)
	}
	c, _, err := n.configuration()
	if err != nil {
		return err
	}
	if s, ok := findServer(c, req.ID); ok && string(s.Address) == req.RaftAddr &&
		(s.Suffrage == raft.Voter || req.NonVoter) {
		return nil
	}
	n.log.Info("server asks to join", "server", req.ID, "addr", req.RaftAddr)
	if err := n.AddNonVoter(ctx, req.ID, req.RaftAddr); err != nil {
		return err
	}
	if req.NonVoter {
		return nil
	}
	if err := n.WaitCaughtUp(ctx, req.ID); err != nil {
		return err
	}
	return n.Promote(ctx, req.ID)
}

// Configured lists the members of the raft configuration this server
// holds (ID, address, suffrage, leader) without asking any of them:
// Peers is the same with each member probed.
func (n *Node) Configured() ([]Peer, error) {
	if n.closed.Load() {
		return nil, ErrClosed
	}
	c, _, err := n.configuration()
	if err != nil {
		return nil, err
	}
	_, leaderID := n.raft.LeaderWithID()
	peers := make([]Peer, len(c.Servers))
	for i, s := range c.Servers {
		peers[i] = Peer{ID: string(s.ID), Address: string(s.Address), Suffrage: s.Suffrage.String(), Leader: s.ID == leaderID}
	}
	slices.SortFunc(peers, func(a, b Peer) int { return cmpString(a.ID, b.ID) })
	return peers, nil
}

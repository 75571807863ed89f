package raftstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func TestBootstrapExpectFormsOneClusterAndReplicates(t *testing.T) {
	reg := prometheus.NewRegistry()
	var regs []*prometheus.Registry
	nodes := startCluster(t, 3, func(c *Config) {
		r := prometheus.NewRegistry()
		if c.ID == "s1" {
			r = reg
		}
		regs = append(regs, r)
		c.Registerer = r
	})
	leader := waitLeader(t, nodes)

	peers, err := leader.node.Peers(ctxT(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if len(peers) != 3 {
		t.Fatalf("peers = %+v, want 3", peers)
	}
	leaders := 0
	for i, p := range peers {
		want := fmt.Sprintf("s%d", i+1)
		if p.ID != want || p.Suffrage != "Voter" || !p.Reachable || p.Address != nodes[i].cfg.BindAddr {
			t.Errorf("peer %d = %+v, want reachable voter %s at %s", i, p, want, nodes[i].cfg.BindAddr)
		}
		if p.APIAddr != nodes[i].cfg.APIAddr {
			t.Errorf("peer %s API = %q, want %q", p.ID, p.APIAddr, nodes[i].cfg.APIAddr)
		}
		if p.Leader {
			leaders++
			if p.ID != leader.cfg.ID {
				t.Errorf("peer %s marked leader, leader is %s", p.ID, leader.cfg.ID)
			}
		}
	}
	if leaders != 1 {
		t.Errorf("%d peers marked leader", leaders)
	}

	var last uint64
	for i := range 50 {
		last = set(t, leader.node, fmt.Sprintf("k%d", i), fmt.Sprintf("v%d", i))
	}
	for _, tn := range nodes {
		if err := tn.node.WaitApplied(ctxT(t, 5*time.Second), last); err != nil {
			t.Fatalf("%s: %v", tn.cfg.ID, err)
		}
		for i := range 50 {
			if v, _ := tn.fsm.get(fmt.Sprintf("k%d", i)); v != fmt.Sprintf("v%d", i) {
				t.Fatalf("%s: k%d = %q", tn.cfg.ID, i, v)
			}
		}
	}
	// Every server applied the same entries in the same order.
	want := leader.fsm.appliedIndexes()
	if !slices.IsSorted(want) || len(want) != 50 {
		t.Fatalf("leader applied %v", want)
	}
	for _, tn := range nodes {
		if got := tn.fsm.appliedIndexes(); !slices.Equal(got, want) {
			t.Errorf("%s applied %v, leader %v", tn.cfg.ID, got, want)
		}
	}

	// Metrics of s1: gauges always, the commit histogram when it leads.
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		got[mf.GetName()] = mf
	}
	for _, name := range []string{"outpost_raft_commit_seconds", "outpost_raft_apply_inflight", "outpost_raft_leader_changes_total",
		"outpost_raft_term", "outpost_raft_commit_index", "outpost_raft_applied_index", "outpost_raft_last_snapshot_index", "outpost_raft_sent_ahead_total", "outpost_raft_answered_early_total"} {
		if got[name] == nil {
			t.Errorf("metric %s missing", name)
		}
	}
	if mf := got["outpost_raft_applied_index"]; mf != nil && mf.Metric[0].GetGauge().GetValue() < float64(last) {
		t.Errorf("applied index gauge = %v, want >= %d", mf.Metric[0].GetGauge().GetValue(), last)
	}
	if mf := got["outpost_raft_leader_changes_total"]; mf != nil && mf.Metric[0].GetCounter().GetValue() < 1 {
		t.Errorf("leader changes = %v, want >= 1", mf.Metric[0].GetCounter().GetValue())
	}
	if leader.cfg.ID == "s1" {
		if mf := got["outpost_raft_commit_seconds"]; mf != nil && mf.Metric[0].GetHistogram().GetSampleCount() != 50 {
			t.Errorf("commit histogram count = %d, want 50", mf.Metric[0].GetHistogram().GetSampleCount())
		}
	}
}

func TestLeaderCloseElectsNewLeaderKeepingAcknowledgedWrites(t *testing.T) {
	nodes := startCluster(t, 3, nil)
	leader := waitLeader(t, nodes)
	sub, cancel := leader.node.Subscribe()
	defer cancel()
	waitTrue(t, sub)
	for i := range 30 {
		set(t, leader.node, fmt.Sprintf("k%d", i), "v")
	}
	old := leader.cfg.ID
	leader.close(t)
	// Close tells subscribers leadership is gone, then closes the channel.
	var seen []bool
	for v := range sub {
		seen = append(seen, v)
	}
	if len(seen) == 0 || seen[len(seen)-1] {
		t.Errorf("subscription after close saw %v, want it to end with false", seen)
	}

	next := waitLeader(t, nodes)
	if next.cfg.ID == old {
		t.Fatalf("closed server %s still leads", old)
	}
	idx := set(t, next.node, "after", "close")
	for _, tn := range followers(nodes, nil) {
		if err := tn.node.WaitApplied(ctxT(t, 5*time.Second), idx); err != nil {
			t.Fatal(err)
		}
		for i := range 30 {
			if _, ok := tn.fsm.get(fmt.Sprintf("k%d", i)); !ok {
				t.Errorf("%s lost acknowledged write k%d", tn.cfg.ID, i)
			}
		}
	}
}

func TestFollowerApplyRefusedAndReadIndexIsLinearizable(t *testing.T) {
	nodes := startCluster(t, 3, nil)
	leader := waitLeader(t, nodes)
	f := followers(nodes, leader)[0]

	_, _, err := f.node.Apply(ctxT(t, 5*time.Second), []byte("set x y"))
	if !errors.Is(err, ErrNotLeader) {
		t.Fatalf("apply on follower: %v, want ErrNotLeader", err)
	}
	var nl *NotLeaderError
	if !errors.As(err, &nl) || nl.Leader.ID != leader.cfg.ID || nl.Leader.RaftAddr != leader.cfg.BindAddr {
		t.Fatalf("apply on follower: %v, want the leader %s at %s", err, leader.cfg.ID, leader.cfg.BindAddr)
	}
	if !strings.Contains(err.Error(), leader.cfg.BindAddr) {
		t.Errorf("error %q does not name the leader's address", err)
	}
	li, err := f.node.WaitForLeader(ctxT(t, 5*time.Second))
	if err != nil || li.APIAddr != leader.cfg.APIAddr {
		t.Fatalf("WaitForLeader = %+v, %v; want API %s", li, err, leader.cfg.APIAddr)
	}

	for i := range 20 {
		v := fmt.Sprintf("v%d", i)
		set(t, leader.node, "key", v)
		// The write was acknowledged: a read through ReadIndex on any
		// follower must see it.
		for _, tn := range followers(nodes, leader) {
			ctx := ctxT(t, 5*time.Second)
			idx, err := tn.node.ReadIndex(ctx)
			if err != nil {
				t.Fatalf("ReadIndex on %s: %v", tn.cfg.ID, err)
			}
			if err := tn.node.WaitApplied(ctx, idx); err != nil {
				t.Fatalf("WaitApplied(%d) on %s: %v", idx, tn.cfg.ID, err)
			}
			if got, _ := tn.fsm.get("key"); got != v {
				t.Fatalf("%s read %q after ReadIndex %d, want %q", tn.cfg.ID, got, idx, v)
			}
		}
	}
	// The leader's own read index covers its writes too.
	idx := set(t, leader.node, "key", "last")
	ri, err := leader.node.ReadIndex(ctxT(t, 5*time.Second))
	if err != nil || ri < idx {
		t.Fatalf("leader ReadIndex = %d, %v; want >= %d", ri, err, idx)
	}
}

func TestRestartRejoinsWithData(t *testing.T) {
	nodes := startCluster(t, 3, nil)
	leader := waitLeader(t, nodes)
	f := followers(nodes, leader)[0]
	var idx uint64
	for i := range 40 {
		idx = set(t, leader.node, fmt.Sprintf("a%d", i), "v")
	}
	if err := f.node.WaitApplied(ctxT(t, 5*time.Second), idx); err != nil {
		t.Fatal(err)
	}
	// A snapshot on the follower, then more log after it.
	if err := f.node.Snapshot(); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		idx = set(t, leader.node, fmt.Sprintf("b%d", i), "v")
	}
	if err := f.node.WaitApplied(ctxT(t, 5*time.Second), idx); err != nil {
		t.Fatal(err)
	}
	f.close(t)
	idx = set(t, leader.node, "while", "down")

	if err := f.open(ctxT(t, 10*time.Second)); err != nil {
		t.Fatalf("restart: %v", err)
	}
	if f.fsm.restoreCount() != 1 {
		t.Errorf("restarted FSM restores = %d, want 1 (from its snapshot)", f.fsm.restoreCount())
	}
	if err := f.node.WaitApplied(ctxT(t, 10*time.Second), idx); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a0", "a39", "b0", "b19", "while"} {
		if _, ok := f.fsm.get(k); !ok {
			t.Errorf("restarted server lacks %s", k)
		}
	}
	if st := f.node.Status(); !st.Bootstrapped || st.Term == 0 {
		t.Errorf("restarted status %+v", st)
	}
}

func TestSnapshotInstallOnFarBehindServer(t *testing.T) {
	nodes := startCluster(t, 3, func(c *Config) {
		c.SnapshotThreshold = 64
		c.TrailingLogs = 32
		c.SnapshotInterval = time.Hour // snapshots are taken explicitly
	})
	leader := waitLeader(t, nodes)
	f := followers(nodes, leader)[0]
	set(t, leader.node, "early", "v")
	f.close(t)

	var idx uint64
	for i := range 300 {
		idx = set(t, leader.node, fmt.Sprintf("k%03d", i), fmt.Sprint(i))
	}
	if err := leader.node.Snapshot(); err != nil {
		t.Fatal(err)
	}
	first, _ := leader.node.logs.FirstIndex()
	if first < 200 {
		t.Fatalf("leader log starts at %d after snapshot: not compacted", first)
	}
	if err := f.open(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := f.node.WaitApplied(ctxT(t, 10*time.Second), idx); err != nil {
		t.Fatal(err)
	}
	if f.fsm.restoreCount() == 0 {
		t.Fatal("far-behind server caught up without installing a snapshot")
	}
	for i := range 300 {
		if v, _ := f.fsm.get(fmt.Sprintf("k%03d", i)); v != fmt.Sprint(i) {
			t.Fatalf("k%03d = %q after snapshot install", i, v)
		}
	}
	if _, ok := f.fsm.get("early"); !ok {
		t.Error("early write missing after snapshot install")
	}
}

func TestMembershipAddPromoteDemoteRemoveAndJoin(t *testing.T) {
	nodes := startCluster(t, 3, nil)
	leader := waitLeader(t, nodes)
	ctx := ctxT(t, 20*time.Second)
	for i := range 20 {
		set(t, leader.node, fmt.Sprintf("k%d", i), "v")
	}

	// A fresh server with no bootstrap and no join waits to be added.
	s4 := &testNode{cfg: testConfig(t, "s4")}
	if err := s4.open(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s4.close(t) })

	f := followers(nodes, leader)[0]
	if err := f.node.AddNonVoter(ctx, "s4", s4.node.advertise); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("AddNonVoter on a follower: %v, want ErrNotLeader", err)
	}
	if err := leader.node.AddNonVoter(ctx, "s4", s4.node.advertise); err != nil {
		t.Fatal(err)
	}
	if err := leader.node.WaitCaughtUp(ctx, "s4"); err != nil {
		t.Fatal(err)
	}
	peer := func(id string) (Peer, bool) {
		peers, err := leader.node.Peers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range peers {
			if p.ID == id {
				return p, true
			}
		}
		return Peer{}, false
	}
	p, ok := peer("s4")
	if !ok || p.Suffrage != "Nonvoter" || p.Address != s4.node.advertise || !p.Reachable || p.Leader || p.LastIndex < 20 {
		t.Fatalf("s4 after AddNonVoter+WaitCaughtUp: %+v", p)
	}
	if lp, _ := peer(leader.cfg.ID); !lp.Leader || lp.LastIndex == 0 {
		t.Errorf("leader peer entry %+v", lp)
	}

	if err := leader.node.Promote(ctx, "s4"); err != nil {
		t.Fatal(err)
	}
	if p, _ := peer("s4"); p.Suffrage != "Voter" {
		t.Fatalf("s4 after Promote: %+v", p)
	}
	if err := leader.node.Demote(ctx, "s4"); err != nil {
		t.Fatal(err)
	}
	if p, _ := peer("s4"); p.Suffrage != "Nonvoter" {
		t.Fatalf("s4 after Demote: %+v", p)
	}
	if err := leader.node.Remove(ctx, "s4"); err != nil {
		t.Fatal(err)
	}
	if _, ok := peer("s4"); ok {
		t.Fatal("s4 still listed after Remove")
	}
	// s4 runs on and still takes the leader for its own: a read index it
	// asks for is refused, not handed out (it would wait for entries no
	// leader sends it any more, and its reads time out instead of going
	// to another server), and it knows itself removed.
	if idx, err := s4.node.ReadIndex(ctx); !errors.Is(err, ErrNoLeader) || !s4.node.Removed(ctx) {
		t.Errorf("a read index on the removed s4: %d %v (removed: %v), want ErrNoLeader", idx, err, s4.node.Removed(ctx))
	}
	// A change naming a server that is not in the configuration must not
	// look done: `remove-peer nosuch` once printed "removed".
	for name, change := range map[string]func(context.Context, string) error{
		"Promote": leader.node.Promote, "Demote": leader.node.Demote, "Remove": leader.node.Remove,
	} {
		for _, id := range []string{"s4", "nosuch"} {
			if err := change(ctx, id); !errors.Is(err, ErrUnknownServer) {
				t.Errorf("%s(%q) of a server not in the configuration: %v, want ErrUnknownServer", name, id, err)
			}
		}
	}

	// The join path: a new server names a follower; the request is
	// forwarded to the leader, which adds, catches up and promotes it.
	s5 := &testNode{cfg: testConfig(t, "s5")}
	s5.cfg.Join = []string{f.cfg.BindAddr}
	if err := s5.open(ctx); err != nil {
		t.Fatalf("join: %v", err)
	}
	t.Cleanup(func() { s5.close(t) })
	p, ok = peer("s5")
	if !ok || p.Suffrage != "Voter" {
		t.Fatalf("s5 after join: %+v", p)
	}
	idx := set(t, leader.node, "after", "join")
	if err := s5.node.WaitApplied(ctx, idx); err != nil {
		t.Fatal(err)
	}
	if _, ok := s5.fsm.get("k0"); !ok {
		t.Error("joined server lacks earlier data")
	}
}

func TestQuorumRefusalInACluster(t *testing.T) {
	nodes := startCluster(t, 3, nil)
	leader := waitLeader(t, nodes)
	ctx := ctxT(t, 20*time.Second)
	fs := followers(nodes, leader)
	down, healthy := fs[0], fs[1]
	downID := down.cfg.ID
	down.close(t)

	// One voter down: removing a healthy one would leave 1 of 2 healthy.
	err := leader.node.Remove(ctx, healthy.cfg.ID)
	if !errors.Is(err, ErrQuorum) {
		t.Fatalf("remove healthy voter with one down: %v, want ErrQuorum", err)
	}
	for _, want := range []string{"refusing to remove voter", fmt.Sprintf("1 unreachable (%q)", downID), "a quorum needs 2"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}
	if err := leader.node.CheckChange(Change{Op: ChangeDemote, ID: healthy.cfg.ID}); !errors.Is(err, ErrQuorum) {
		t.Errorf("CheckChange demote healthy: %v, want ErrQuorum", err)
	}
	// Removing the dead voter is the repair, and is allowed.
	if err := leader.node.Remove(ctx, downID); err != nil {
		t.Fatalf("remove the unreachable voter: %v", err)
	}
	// Two healthy voters left: removing another would drop to one.
	err = leader.node.Remove(ctx, healthy.cfg.ID)
	if !errors.Is(err, ErrQuorum) || !strings.Contains(err.Error(), "2 voters, all reachable") {
		t.Fatalf("remove second voter: %v, want ErrQuorum saying why", err)
	}
	peers, err := leader.node.Peers(ctx)
	if err != nil || len(peers) != 2 {
		t.Fatalf("peers after refusals: %+v, %v", peers, err)
	}
	// The cluster still works.
	set(t, leader.node, "still", "ok")
}

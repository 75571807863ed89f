package raftstore

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// gatedStore is a log store whose StoreLogs waits until open is closed,
// as a slow fsync would.
type gatedStore struct {
	*raft.InmemStore
	entered chan struct{}
	open    chan struct{}
}

func (g *gatedStore) StoreLogs(logs []*raft.Log) error {
	g.entered <- struct{}{}
	<-g.open
	return g.InmemStore.StoreLogs(logs)
}

// sendAheadRig is a leader's sendAhead over a real TCP transport, and a
// follower's transport whose RPCs the test answers.
type sendAheadRig struct {
	s        *sendAhead
	logs     *gatedStore
	follower *raft.NetworkTransport
	leading  bool
	members  []raft.Server
}

func newSendAheadRig(t *testing.T) *sendAheadRig {
	t.Helper()
	newTrans := func() *raft.NetworkTransport {
		tr, err := raft.NewTCPTransport("127.0.0.1:0", nil, 2, 5*time.Second, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		return tr
	}
	leader, follower := newTrans(), newTrans()
	rig := &sendAheadRig{logs: &gatedStore{raft.NewInmemStore(), make(chan struct{}, 1), nil}, follower: follower, leading: true}
	rig.s = newSendAhead(rig.logs, leader, "s1", leader.LocalAddr(), false)
	rig.s.leading = func() bool { return rig.leading }
	rig.members = []raft.Server{{ID: "s1", Address: leader.LocalAddr()}, {ID: "s2", Address: follower.LocalAddr()}}
	rig.s.members = func() []raft.Server { return rig.members }
	return rig
}

// store stores entries from..to of term through the sendAhead, with the
// log store held until the follower has answered what it was sent ahead
// (answer, if it is sent anything), and returns what it was sent.
func (rig *sendAheadRig) store(t *testing.T, term, from, to uint64) *raft.AppendEntriesRequest {
	t.Helper()
	return rig.storeAnswering(t, term, from, to, func(req *raft.AppendEntriesRequest) *raft.AppendEntriesResponse {
		return &raft.AppendEntriesResponse{Term: req.Term, Success: true, LastLog: to}
	})
}

// storeAnswering is store with the follower's answer to an early send.
func (rig *sendAheadRig) storeAnswering(t *testing.T, term, from, to uint64, answer func(*raft.AppendEntriesRequest) *raft.AppendEntriesResponse) *raft.AppendEntriesRequest {
	t.Helper()
	var logs []*raft.Log
	for i := from; i <= to; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: term, Type: raft.LogCommand, Data: []byte(fmt.Sprint("set k ", i))})
	}
	rig.logs.open = make(chan struct{})
	// Read before StoreLogs starts: read after, an early send it had
	// already made would be taken for none (CI saw "entry 6 sent ahead
	// with <nil>").
	before := rig.s.started.Load()
	done := make(chan error, 1)
	go func() { done <- rig.s.StoreLogs(logs) }()
	var got *raft.AppendEntriesRequest
	// sendAhead decides before the store is reached.
	<-rig.logs.entered
	if rig.s.started.Load() > before {
		select {
		case rpc := <-rig.follower.Consumer():
			req, ok := rpc.Command.(*raft.AppendEntriesRequest)
			if !ok {
				t.Fatalf("follower got %T", rpc.Command)
			}
			got = req
			rpc.Respond(answer(req), nil)
		case err := <-done:
			t.Fatalf("the leader's StoreLogs returned (%v) before the follower got the entries", err)
		case <-time.After(5 * time.Second):
			t.Fatal("the follower got nothing while the leader stored")
		}
		waitFor(t, 5*time.Second, "the early send to end", func() bool {
			rig.s.mu.Lock()
			defer rig.s.mu.Unlock()
			return rig.s.peers["s2"].sending == nil
		})
	}
	close(rig.logs.open)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return got
}

// raftAcked is the follower's successful reply to raft's own replication
// of entries up to index in term.
func (rig *sendAheadRig) raftAcked(term, prev, last uint64) {
	req := &raft.AppendEntriesRequest{Term: term, PrevLogEntry: prev}
	for i := prev + 1; i <= last; i++ {
		req.Entries = append(req.Entries, &raft.Log{Index: i, Term: term})
	}
	rig.s.acked("s2", req, &raft.AppendEntriesResponse{Term: term, Success: true, LastLog: last})
}

// TestSendAheadSendsWhileLeaderStores checks that a leader's new entries
// reach a follower that holds the entry before them while the leader's own
// store (its fsync) has not finished, as an AppendEntries raft could have
// sent: same term, the right previous entry, no commit index (issue 16
// item 1).
func TestSendAheadSendsWhileLeaderStores(t *testing.T) {
	rig := newSendAheadRig(t)
	if req := rig.store(t, 2, 1, 3); req != nil {
		t.Fatal("sent ahead to a follower not known to hold anything")
	}
	rig.raftAcked(2, 0, 3)

	req := rig.store(t, 2, 4, 5)
	if req == nil {
		t.Fatal("entries 4-5 were not sent ahead to a follower holding 1-3")
	}
	if req.Term != 2 || req.PrevLogEntry != 3 || req.PrevLogTerm != 2 || len(req.Entries) != 2 ||
		req.Entries[0].Index != 4 || req.Entries[1].Index != 5 || req.LeaderCommitIndex != 0 {
		t.Fatalf("sent term %d prev %d/%d, %d entries, commit %d; want term 2, prev 3/2, entries 4-5, commit 0",
			req.Term, req.PrevLogEntry, req.PrevLogTerm, len(req.Entries), req.LeaderCommitIndex)
	}
	if string(req.ID) != "s1" || len(req.Addr) == 0 {
		t.Fatalf("header names %q at %q, want the leader", req.ID, req.Addr)
	}
	// The early send's own reply counts: 6 follows 5 at once.
	if req := rig.store(t, 2, 6, 6); req == nil || req.PrevLogEntry != 5 {
		t.Fatalf("entry 6 sent ahead with %+v, want after 5", req)
	}
}

// TestSendAheadOnlyWhenSafe checks the cases where the leader leaves its
// entries to raft's replication: a follower behind, a follower known only
// from an older term, a server that is not the leader, a previous entry
// it did not store itself, and the option off.
func TestSendAheadOnlyWhenSafe(t *testing.T) {
	tests := []struct {
		name string
		// term of entries 1-3, and the last of them raft's replication
		// saw the follower hold
		term, acked uint64
		before      func(t *testing.T, rig *sendAheadRig)
	}{
		{name: "follower behind", term: 2, acked: 2},
		{name: "older term", term: 1, acked: 3},
		{name: "not the leader", term: 2, acked: 3, before: func(t *testing.T, rig *sendAheadRig) { rig.leading = false }},
		{name: "previous entry unknown", term: 2, acked: 3, before: func(t *testing.T, rig *sendAheadRig) {
			if err := rig.s.DeleteRange(1, 1); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "off", term: 2, acked: 3, before: func(t *testing.T, rig *sendAheadRig) { rig.s.off = true }},
		{name: "removed from the configuration", term: 2, acked: 3, before: func(t *testing.T, rig *sendAheadRig) { rig.members = rig.members[:1] }},
		{name: "sent a snapshot", term: 2, acked: 3, before: func(t *testing.T, rig *sendAheadRig) { rig.s.forget("s2") }},
		{name: "turned an append down", term: 2, acked: 3, before: func(t *testing.T, rig *sendAheadRig) {
			req := &raft.AppendEntriesRequest{Term: 2, PrevLogEntry: 3, PrevLogTerm: 2}
			rig.s.acked("s2", req, &raft.AppendEntriesResponse{Term: 2, Success: false})
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rig := newSendAheadRig(t)
			rig.store(t, tc.term, 1, 3)
			rig.raftAcked(tc.term, 0, tc.acked)
			if tc.before != nil {
				tc.before(t, rig)
			}
			if req := rig.store(t, 2, 4, 4); req != nil {
				t.Fatalf("entry 4 of term 2 sent ahead (prev %d/%d)", req.PrevLogEntry, req.PrevLogTerm)
			}
		})
	}
}

// TestSendAheadCluster checks that a real 3-server cluster sends its
// writes ahead, that no follower turns an early send down (each goes only
// to a follower known to hold the entry before it), and that every server
// ends with the same state, with one writer and with 16.
func TestSendAheadCluster(t *testing.T) {
	var rejected atomic.Int64
	nodes := startCluster(t, 3, func(c *Config) {
		c.Logger = slog.New(&countingHandler{Handler: c.Logger.Handler(), n: &rejected, msgs: []string{"failed to get previous log", "previous log term mis-match"}})
	})
	leader := waitLeader(t, nodes)
	// raft's own first appends find the followers' logs empty.
	first := set(t, leader.node, "start", "0")
	for _, f := range followers(nodes, leader) {
		waitFor(t, 10*time.Second, "followers apply the first write", func() bool { return f.node.fsm.applied.Load() >= first })
	}
	rejected.Store(0)
	var last atomic.Uint64
	for i := range 50 {
		last.Store(set(t, leader.node, fmt.Sprint("k", i), fmt.Sprint(i)))
	}
	if n := leader.node.ahead.started.Load(); n < 10 {
		t.Fatalf("%d of 50 writes sent ahead; one writer at a time should send most", n)
	}
	if n := leader.node.ahead.covered.Load(); n < 10 {
		t.Fatalf("%d appends of raft's pipeline answered by an early send, want most of 50 writes' 100", n)
	}
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := range 20 {
				idx := set(t, leader.node, fmt.Sprintf("w%d-%d", w, i), fmt.Sprint(i))
				for {
					old := last.Load()
					if idx <= old || last.CompareAndSwap(old, idx) {
						break
					}
				}
			}
		})
	}
	wg.Wait()
	for _, f := range followers(nodes, leader) {
		waitFor(t, 10*time.Second, "follower applies every write", func() bool { return f.node.fsm.applied.Load() >= last.Load() })
		for i := range 50 {
			if v, ok := f.fsm.get(fmt.Sprint("k", i)); !ok || v != fmt.Sprint(i) {
				t.Fatalf("%s: k%d = %q, %v", f.cfg.ID, i, v, ok)
			}
		}
		for w := range 16 {
			if _, ok := f.fsm.get(fmt.Sprintf("w%d-19", w)); !ok {
				t.Fatalf("%s: writer %d's last write missing", f.cfg.ID, w)
			}
		}
	}
	if n := rejected.Load(); n > 0 {
		t.Fatalf("followers turned down %d appends for a missing or different previous entry", n)
	}
}

// countingHandler counts the records whose message is one of msgs.
type countingHandler struct {
	slog.Handler
	n    *atomic.Int64
	msgs []string
}

func (h *countingHandler) Handle(ctx context.Context, r slog.Record) error {
	if slices.Contains(h.msgs, r.Message) {
		h.n.Add(1)
	}
	return h.Handler.Handle(ctx, r)
}

func (h *countingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &countingHandler{h.Handler.WithAttrs(as), h.n, h.msgs}
}

func (h *countingHandler) WithGroup(g string) slog.Handler {
	return &countingHandler{h.Handler.WithGroup(g), h.n, h.msgs}
}

// TestSendAheadAnswersOnlyFreshly checks which early send answers raft's
// append of the same entries: one of exactly those entries and that term,
// in flight or ended within earlyFresh, and not once the follower was
// sent a snapshot (which replaces its log).
func TestSendAheadAnswersOnlyFreshly(t *testing.T) {
	rig := newSendAheadRig(t)
	rig.store(t, 2, 1, 3)
	rig.raftAcked(2, 0, 3)
	if rig.store(t, 2, 4, 5) == nil {
		t.Fatal("entries 4-5 not sent ahead")
	}
	append45 := func(term uint64) *raft.AppendEntriesRequest {
		return &raft.AppendEntriesRequest{Term: term, PrevLogEntry: 3, PrevLogTerm: 2,
			Entries: []*raft.Log{{Index: 4, Term: 2}, {Index: 5, Term: 2}}}
	}
	endedAgo := func(d time.Duration) {
		rig.s.mu.Lock()
		rig.s.peers["s2"].sent.ended = time.Now().Add(-d)
		rig.s.mu.Unlock()
	}
	endedAgo(0)
	if e := rig.s.covering("s2", append45(2)); e == nil || !e.ok {
		t.Fatalf("raft's append of 4-5 not answered by the early send that just ended: %+v", e)
	}
	wider := append45(2)
	wider.Entries = append(wider.Entries, &raft.Log{Index: 6, Term: 2})
	if rig.s.covering("s2", wider) != nil {
		t.Fatal("an append of 4-6 answered by the early send of 4-5")
	}
	if rig.s.covering("s2", append45(3)) != nil {
		t.Fatal("an append of term 3 answered by an early send of term 2")
	}
	endedAgo(earlyFresh + time.Millisecond)
	if rig.s.covering("s2", append45(2)) != nil {
		t.Fatal("answered by an early send older than earlyFresh")
	}
	endedAgo(0)
	rig.s.forget("s2")
	if rig.s.covering("s2", append45(2)) != nil {
		t.Fatal("answered by an early send after the follower was sent a snapshot")
	}
}

// TestSendAheadNewerTermTurnsDown checks that an early send the follower
// turns down for a newer term answers nothing later and tells how far the
// follower's log matches no more.
func TestSendAheadNewerTermTurnsDown(t *testing.T) {
	rig := newSendAheadRig(t)
	rig.store(t, 2, 1, 3)
	rig.raftAcked(2, 0, 3)
	req := rig.storeAnswering(t, 2, 4, 4, func(*raft.AppendEntriesRequest) *raft.AppendEntriesResponse {
		return &raft.AppendEntriesResponse{Term: 5, Success: false}
	})
	if req == nil {
		t.Fatal("entry 4 not sent ahead")
	}
	if e := rig.s.covering("s2", &raft.AppendEntriesRequest{Term: 2, Entries: []*raft.Log{{Index: 4, Term: 2}}}); e != nil {
		t.Fatalf("answered by an early send turned down: %+v", e)
	}
	if rig.store(t, 2, 5, 5) != nil {
		t.Fatal("sent ahead to a follower that turned the last one down")
	}
}

// TestSendAheadWaitEndsWithTheEarlySends checks that wait, which Node's
// shutdown calls, returns only once an early send in flight has its
// reply: an early send must not outlive the node that made it.
func TestSendAheadWaitEndsWithTheEarlySends(t *testing.T) {
	rig := newSendAheadRig(t)
	rig.store(t, 2, 1, 3)
	rig.raftAcked(2, 0, 3)
	rig.logs.open = make(chan struct{})
	close(rig.logs.open)
	go func() { <-rig.logs.entered }()
	if err := rig.s.StoreLogs([]*raft.Log{{Index: 4, Term: 2, Type: raft.LogCommand}}); err != nil {
		t.Fatal(err)
	}
	var rpc raft.RPC
	select {
	case rpc = <-rig.follower.Consumer():
	case <-time.After(5 * time.Second):
		t.Fatal("entry 4 was not sent ahead")
	}
	waited := make(chan struct{})
	go func() {
		rig.s.wait()
		close(waited)
	}()
	// Its absence can only be checked for a while: long enough for a
	// wait that does not wait to have returned many times over.
	select {
	case <-waited:
		t.Fatal("wait returned while the early send had no reply")
	case <-time.After(100 * time.Millisecond):
	}
	rpc.Respond(&raft.AppendEntriesResponse{Term: 2, Success: true, LastLog: 4}, nil)
	select {
	case <-waited:
	case <-time.After(5 * time.Second):
		t.Fatal("wait did not return after the early send's reply")
	}
}

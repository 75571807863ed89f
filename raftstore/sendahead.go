package raftstore

import (
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// sendAhead sends a leader's new entries to its followers while the leader
// writes them to its own log, instead of after (issue 16 item 1).
//
// hashicorp/raft's leader stores a batch (one fsync) and only then tells
// its replicators, whose followers store it (a second fsync): a write
// waits for two fsyncs one after the other. Raft does not need that order
// (the leader may count itself only once its own write is durable, which
// raft still does: it counts itself when StoreLogs returns). So when the
// leader stores a batch, sendAhead also sends it, as an AppendEntries the
// leader could have sent itself, to every follower known to hold the
// entry just before it; the follower stores it while the leader does.
// raft's own replication then sends the same entries, which the follower
// finds it has (raft skips entries it holds with the same term) and acks
// without a second fsync. The early send's reply is used only to know how
// far the follower's log matches; nothing of raft's commit rules changes.
//
// If the leader's own store then fails, followers may hold entries the
// leader never counted, which a later leader may commit: raft answers
// that write with an error that Apply reports as ErrUnknownOutcome, as it
// already did (a failed store may have written part of the batch).
//
// A follower is sent ahead to only when a successful append of this term
// showed that it holds the previous entry, and one early send at a time:
// a follower still catching up is left to raft's replication alone, so
// the early send costs an RPC only when a follower keeps up, which is
// when its fsync is the write's latency.
type sendAhead struct {
	raft.LogStore
	trans  *raft.NetworkTransport
	header raft.RPCHeader
	leader []byte // the deprecated Leader field raft still fills
	off    bool
	// leading reports whether this server is raft's leader, whose leader
	// loop is then the only one to store entries. Set before raft starts.
	leading func() bool
	// started counts the early sends.
	started atomic.Uint64

	mu    sync.Mutex
	last  raft.Log // index and term of the last entry stored; zero: unknown
	peers map[raft.ServerID]*peerLog
}

// peerLog is how far a follower's log is known to match the leader's, in
// term: it holds every entry up to index. addr is where raft's
// replication last reached it.
type peerLog struct {
	term, index uint64
	addr        raft.ServerAddress
	sending     bool
}

func newSendAhead(logs raft.LogStore, trans *raft.NetworkTransport, id raft.ServerID, addr raft.ServerAddress, off bool) *sendAhead {
	enc := trans.EncodePeer(id, addr)
	return &sendAhead{
		LogStore: logs,
		trans:    trans,
		header:   raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(id), Addr: enc},
		leader:   enc,
		off:      off,
		peers:    make(map[raft.ServerID]*peerLog),
	}
}

// StoreLogs stores logs and, on the leader, sends them ahead meanwhile.
func (s *sendAhead) StoreLogs(logs []*raft.Log) error {
	if len(logs) > 0 && !s.off {
		if s.leading() {
			s.send(logs)
		}
	}
	err := s.LogStore.StoreLogs(logs)
	s.mu.Lock()
	if err == nil && len(logs) > 0 {
		s.last = raft.Log{Index: logs[len(logs)-1].Index, Term: logs[len(logs)-1].Term}
	} else {
		s.last = raft.Log{}
	}
	s.mu.Unlock()
	return err
}

// StoreLog stores one entry; raft's leader does not use it for writes.
func (s *sendAhead) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

// IsMonotonic passes on the store's answer (raft.MonotonicLogStore): raft
// clears the whole log before a snapshot only for a store that says so.
func (s *sendAhead) IsMonotonic() bool {
	m, ok := s.LogStore.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

// DeleteRange deletes entries; what was last may be gone.
func (s *sendAhead) DeleteRange(lo, hi uint64) error {
	s.mu.Lock()
	s.last = raft.Log{}
	s.mu.Unlock()
	return s.LogStore.DeleteRange(lo, hi)
}

// send starts an early AppendEntries of logs to every follower that holds
// the entry before them and has no early send in flight.
func (s *sendAhead) send(logs []*raft.Log) {
	first, term := logs[0].Index, logs[0].Term
	for _, l := range logs {
		if l.Term != term {
			return
		}
	}
	prev := raft.Log{Index: first - 1}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case first == 1:
	case s.last.Index == prev.Index:
		prev.Term = s.last.Term
	default:
		// Not the entry stored last (a restart or a restored snapshot
		// since): leave this batch to raft.
		return
	}
	for id, p := range s.peers {
		if p.term != term || p.index < prev.Index || p.sending {
			continue
		}
		p.sending = true
		s.started.Add(1)
		req := &raft.AppendEntriesRequest{
			RPCHeader:    s.header,
			Term:         term,
			Leader:       s.leader,
			PrevLogEntry: prev.Index,
			PrevLogTerm:  prev.Term,
			Entries:      logs,
			// No commit index: what the leader has committed reaches
			// the follower through raft's own replication.
		}
		go s.appendEntries(id, p.addr, req)
	}
}

func (s *sendAhead) appendEntries(id raft.ServerID, addr raft.ServerAddress, req *raft.AppendEntriesRequest) {
	var resp raft.AppendEntriesResponse
	if s.trans.AppendEntries(id, addr, req, &resp) == nil {
		s.acked(id, addr, req, &resp)
	}
	s.mu.Lock()
	s.peers[id].sending = false
	s.mu.Unlock()
}

// acked records a reply to an AppendEntries sent to follower id at addr,
// by raft's replication or ahead of it: after a successful one of req's
// term, the follower holds every entry up to req's last.
func (s *sendAhead) acked(id raft.ServerID, addr raft.ServerAddress, req *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) {
	if s == nil || !resp.Success || resp.Term != req.Term {
		return
	}
	matched := req.PrevLogEntry
	if n := len(req.Entries); n > 0 {
		matched = req.Entries[n-1].Index
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.peers[id]
	if p == nil {
		p = &peerLog{}
		s.peers[id] = p
	}
	p.addr = addr
	switch {
	case req.Term > p.term:
		p.term, p.index = req.Term, matched
	case req.Term == p.term && matched > p.index:
		p.index = matched
	}
}

package raftstore

import (
	"sync"
	"sync/atomic"
	"time"

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
//
// raft's own replication then appends the same entries to the follower.
// Its pipeline (pipeline.go) answers that append from the early send
// instead of sending it: a successful early send means the follower
// holds those entries durably, with the leader's term, which is all a
// successful reply to raft's append would say; so the follower counts
// toward the commit as soon as its early reply is in. A failed early send
// answers raft's append as rejected, and raft replicates to that follower
// the usual way. raft's commit rule (a majority holding an entry of the
// leader's term, the leader itself only once its own store returned) is
// unchanged; only the follower's half starts earlier.
//
// If the leader's own store then fails, followers may hold entries the
// leader never counted, which a later leader may commit: raft answers
// that write with an error that Apply reports as ErrUnknownOutcome, as it
// already did (a failed store may have written part of the batch).
//
// A follower is sent ahead to only when it is in raft's latest
// configuration and a successful append of this term showed that it holds
// the previous entry, and one early send at a time: a follower still
// catching up is left to raft's replication alone, so the early send
// costs an RPC only when a follower keeps up, which is when its fsync is
// the write's latency. A rejected append, or a snapshot sent to it,
// forgets what was known of its log. An early send answers raft's append
// only while in flight or for earlyFresh after: raft takes an answer for
// recent contact with the follower.
type sendAhead struct {
	raft.LogStore
	trans  *raft.NetworkTransport
	header raft.RPCHeader
	leader []byte // the deprecated Leader field raft still fills
	off    bool
	// leading reports whether this server is raft's leader, whose leader
	// loop is then the only one to store entries. Set before raft starts.
	leading func() bool
	// started counts the early sends, covered the appends of raft's
	// pipeline they answered.
	started, covered atomic.Uint64
	// commitIndex is raft's, for the early sends; nil: none.
	commitIndex func() uint64
	// members is raft's latest configuration. Set before raft starts.
	members func() []raft.Server

	mu    sync.Mutex
	last  raft.Log // index and term of the last entry stored; zero: unknown
	peers map[raft.ServerID]*peerLog

	// sends are the early sends' goroutines, which Node's shutdown waits
	// for: one left running would use the transport and the log's
	// bookkeeping of a node that is gone (a restart in the same process
	// builds a new one).
	sends sync.WaitGroup
}

// peerLog is how far a follower's log is known to match the leader's, in
// term: it holds every entry up to index.
type peerLog struct {
	term, index uint64
	sending     *earlySend // the one in flight
	sent        *earlySend // the last one that ended
	gen         uint64     // counts forget
}

// earlySend is a batch sent ahead to one follower. done is closed once its
// reply is in; ok then says whether the follower stored the batch, and
// replyTerm is the follower's term.
type earlySend struct {
	term, first, last uint64
	gen               uint64 // the follower's peerLog.gen when sent
	done              chan struct{}
	ok                bool
	replyTerm         uint64
	ended             time.Time
}

// answers reports whether e answers raft's append of entries first..last
// in term: the same entries, and still in flight or ended within
// earlyFresh. An older reply is not taken for the follower's answer: raft
// counts an answer as the follower's contact, which must be recent (its
// leader lease, VerifyLeader), and the follower's log may have changed
// since (a snapshot install clears it).
func (e *earlySend) answers(term, first, last uint64, now time.Time) bool {
	if e == nil || e.term != term || e.first != first || e.last != last {
		return false
	}
	select {
	case <-e.done:
		return now.Sub(e.ended) < earlyFresh
	default:
		return true
	}
}

// earlyFresh is how old an early send's reply may be to answer raft's
// append: far below any election timeout, and more than the leader's
// fsync usually takes after the follower's reply came in.
const earlyFresh = 20 * time.Millisecond

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

// send starts an early AppendEntries of logs to every member that holds
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
	var commit uint64
	if s.commitIndex != nil {
		commit = s.commitIndex()
	}
	// Members of raft's latest configuration only: a server removed from
	// it would go on following this leader.
	for _, m := range s.members() {
		p := s.peers[m.ID]
		if p == nil || p.term != term || p.index < prev.Index || p.sending != nil {
			continue
		}
		e := &earlySend{term: term, first: first, last: logs[len(logs)-1].Index, gen: p.gen, done: make(chan struct{})}
		p.sending = e
		s.started.Add(1)
		req := &raft.AppendEntriesRequest{
			RPCHeader:    s.header,
			Term:         term,
			Leader:       s.leader,
			PrevLogEntry: prev.Index,
			PrevLogTerm:  prev.Term,
			Entries:      logs,
			// What raft's own request would carry: it commits on the
			// follower only entries up to prev, which it holds.
			LeaderCommitIndex: commit,
		}
		s.sends.Go(func() { s.appendEntries(m.ID, m.Address, req, e) })
	}
}

// wait returns once every early send has ended. Call it after raft has
// stopped, so that no new one starts, and after the transport is closed.
func (s *sendAhead) wait() { s.sends.Wait() }

func (s *sendAhead) appendEntries(id raft.ServerID, addr raft.ServerAddress, req *raft.AppendEntriesRequest, e *earlySend) {
	var resp raft.AppendEntriesResponse
	err := s.trans.AppendEntries(id, addr, req, &resp)
	s.mu.Lock()
	p := s.peers[id]
	p.sending = nil
	e.ended = time.Now()
	// A snapshot sent to the follower meanwhile (forget) may have
	// replaced what the reply says it holds.
	if err == nil && e.gen == p.gen {
		e.ok, e.replyTerm = resp.Success && resp.Term == req.Term, resp.Term
		p.acked(req, &resp)
		p.sent = e
	}
	s.mu.Unlock()
	close(e.done)
}

// covering is the early send that answers raft's append req to follower
// id (pipeline.go): one of exactly req's entries, in flight or just
// ended; nil if none.
func (s *sendAhead) covering(id raft.ServerID, req *raft.AppendEntriesRequest) *earlySend {
	n := len(req.Entries)
	if n == 0 {
		return nil
	}
	first, last := req.Entries[0].Index, req.Entries[n-1].Index
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.peers[id]
	if p == nil {
		return nil
	}
	for _, e := range []*earlySend{p.sending, p.sent} {
		if e != nil && e.gen == p.gen && e.answers(req.Term, first, last, now) {
			s.covered.Add(1)
			return e
		}
	}
	return nil
}

// forget drops what is known of follower id's log: raft is sending it a
// snapshot, which replaces its log.
func (s *sendAhead) forget(id raft.ServerID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.peers[id]; p != nil {
		p.forget()
	}
}

// forget drops what is known of the follower's log, and makes the early
// send in flight count for nothing.
func (p *peerLog) forget() {
	p.index, p.sent = 0, nil
	p.gen++
}

// acked records a reply to an AppendEntries sent to follower id by raft's
// replication.
func (s *sendAhead) acked(id raft.ServerID, req *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.peers[id]
	if p == nil {
		p = &peerLog{}
		s.peers[id] = p
	}
	p.acked(req, resp)
}

// acked records a reply to req: after a successful one of req's term, the
// follower holds every entry up to req's last.
func (p *peerLog) acked(req *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) {
	if !resp.Success || resp.Term != req.Term {
		// Turned down (a missing or different previous entry, a newer
		// term): how far its log matches is unknown again.
		p.forget()
		return
	}
	matched := req.PrevLogEntry
	if n := len(req.Entries); n > 0 {
		matched = req.Entries[n-1].Index
	}
	switch {
	case req.Term > p.term:
		p.term, p.index = req.Term, matched
	case req.Term == p.term && matched > p.index:
		p.index = matched
	}
}

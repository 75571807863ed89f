package raftstore

import (
	"io"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// pipelined is the network transport with AppendEntries pipelining made
// safe to stop. hashicorp/raft's own pipeline can hang for ever: when a
// response ends raft's consumer (a rejected append, a newer term, a broken
// connection), nobody reads the pipeline's finished futures any more, so
// its decoder blocks on a full channel, then the sender blocks on a full
// in-flight channel inside AppendEntries, where the replication goroutine
// can no longer see its stop signal; the pipeline is only closed by that
// same goroutine, so raft's Shutdown waits for it for ever (seen in
// TestLeaderLossKeepsAcknowledgedWrites). guardedPipeline watches the
// responses itself and closes the pipeline after the one that ends the
// consumer, and when the node stops, so a blocked send always returns.
type pipelined struct {
	observed
	stop <-chan struct{} // closed when the node shuts down
}

// observed is the network transport telling the leader's early sends
// (sendahead.go) how far each follower's log matches, from raft's own
// AppendEntries replies.
type observed struct {
	*raft.NetworkTransport
	ahead *sendAhead
}

// AppendEntries sends one AppendEntries and notes a successful reply.
func (t observed) AppendEntries(id raft.ServerID, addr raft.ServerAddress, req *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	err := t.NetworkTransport.AppendEntries(id, addr, req, resp)
	if err == nil {
		t.ahead.acked(id, req, resp)
	}
	return err
}

// InstallSnapshot sends a snapshot, which replaces the follower's log:
// what the early sends knew of it no longer holds.
func (t observed) InstallSnapshot(id raft.ServerID, addr raft.ServerAddress, req *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	t.ahead.forget(id)
	return t.NetworkTransport.InstallSnapshot(id, addr, req, resp, data)
}

// AppendEntriesPipeline wraps the transport's pipeline in a guard.
func (t pipelined) AppendEntriesPipeline(id raft.ServerID, addr raft.ServerAddress) (raft.AppendPipeline, error) {
	p, err := t.NetworkTransport.AppendEntriesPipeline(id, addr)
	if err != nil {
		return nil, err
	}
	g := guard(p, t.stop, func(f raft.AppendFuture) { t.ahead.acked(id, f.Request(), f.Response()) })
	g.covering = func(req *raft.AppendEntriesRequest) *earlySend { return t.ahead.covering(id, req) }
	return g, nil
}

// guard wraps p and starts its forwarder, which ends with p. done, if
// not nil, sees each answered future first (one that did not fail to
// reach the follower): accepted or turned down, but for one accepted by
// its early send, whose reply was recorded already.
func guard(p raft.AppendPipeline, stop <-chan struct{}, done func(raft.AppendFuture)) *guardedPipeline {
	g := &guardedPipeline{
		inner:  p,
		out:    make(chan raft.AppendFuture),
		closed: make(chan struct{}),
		quit:   make(chan struct{}),
		sent:   make(chan sent, maxPipelined),
	}
	go func() {
		select {
		case <-g.closed:
		case <-stop:
		}
		close(g.quit)
	}()
	go g.forward(done)
	return g
}

// guardedPipeline hands the inner pipeline's finished futures on to raft
// and closes the inner pipeline once raft stops reading them.
//
// It also answers, without sending it, an append whose entries the
// follower was sent ahead of it (sendahead.go): once that early send
// succeeded, the follower holds them, durably, which is all a successful
// reply says. So the leader counts the follower when the early send's
// reply comes in instead of a round trip after its own fsync. If the
// early send failed, the append is answered as rejected, and raft
// replicates to that follower without a pipeline, from where it matches.
// Answers go to raft in the order of the appends.
type guardedPipeline struct {
	inner  raft.AppendPipeline
	out    chan raft.AppendFuture
	closed chan struct{} // by Close
	quit   chan struct{} // once closed or the node stops
	once   sync.Once
	// covering finds an early send that answers req; nil: none do.
	covering func(req *raft.AppendEntriesRequest) *earlySend
	sent     chan sent
	// lastEarly is the early send that answered the last append, if it
	// did; only raft's replication goroutine for the follower appends.
	lastEarly *earlySend
}

// earlyWait is how long an append waits for the early send before it,
// so as not to overtake it.
const earlyWait = time.Second

// sent is one append raft made, in order: early is the early send that
// answers it, or nil if it went through the inner pipeline.
type sent struct {
	early *earlySend
	req   *raft.AppendEntriesRequest
	resp  *raft.AppendEntriesResponse
	start time.Time
}

// maxPipelined bounds the appends waiting for their answer; raft's
// network pipeline has at most 128 in flight, and early answers are
// quick.
const maxPipelined = 1024

func (g *guardedPipeline) AppendEntries(req *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	var early *earlySend
	if g.covering != nil {
		early = g.covering(req)
	}
	select {
	case g.sent <- sent{early: early, req: req, resp: resp, start: time.Now()}:
	case <-g.quit:
		return nil, raft.ErrPipelineShutdown
	}
	if early != nil {
		g.lastEarly = early
		// raft reads the answer from Consumer, not from this future.
		return nil, nil
	}
	if e := g.lastEarly; e != nil {
		// The entries before req went on the early send's connection:
		// sent now, req could reach the follower first, which would
		// turn it down for a missing previous entry.
		// A follower cut off mid-send holds the early send until the
		// transport's timeout: after earlyWait, req goes anyway (and is
		// turned down at worst, which raft mends).
		t := time.NewTimer(earlyWait)
		defer t.Stop()
		select {
		case <-e.done:
		case <-t.C:
		case <-g.quit:
			return nil, raft.ErrPipelineShutdown
		}
		g.lastEarly = nil
	}
	return g.inner.AppendEntries(req, resp)
}

func (g *guardedPipeline) Consumer() <-chan raft.AppendFuture { return g.out }

func (g *guardedPipeline) Close() error {
	g.once.Do(func() { close(g.closed) })
	return g.inner.Close()
}

// forward passes each finished append on, in order, until raft's consumer
// is known to stop reading: after a future it stops on (see
// endsConsumer), when the pipeline is closed, or when the node stops.
// Then it closes the inner pipeline, which makes a blocked AppendEntries
// return ErrPipelineShutdown; raft then falls back to plain replication.
func (g *guardedPipeline) forward(done func(raft.AppendFuture)) {
	defer g.inner.Close()
	in := g.inner.Consumer()
	for {
		var a sent
		select {
		case a = <-g.sent:
		case <-g.quit:
			return
		}
		f := g.answer(a, in)
		if f == nil {
			return
		}
		// An append answered by its early send's success needs no
		// telling: that reply already recorded how far the follower's
		// log matches (sendahead.go), and a second record of it took
		// the early sends' lock again for every append.
		if done != nil && f.Error() == nil && !(a.early != nil && f.Response().Success) {
			done(f)
		}
		select {
		case g.out <- f:
		case <-g.quit:
			return
		}
		if endsConsumer(f) {
			return
		}
	}
}

// answer waits for a's answer: the inner pipeline's next future, or its
// early send's reply; nil if the pipeline quits first.
func (g *guardedPipeline) answer(a sent, in <-chan raft.AppendFuture) raft.AppendFuture {
	if a.early == nil {
		select {
		case f := <-in:
			return f
		case <-g.quit:
			return nil
		}
	}
	select {
	case <-a.early.done:
	case <-g.quit:
		return nil
	}
	// A newer term in the reply reaches raft, which steps down.
	a.resp.Term, a.resp.Success = max(a.req.Term, a.early.replyTerm), a.early.ok
	a.resp.LastLog = a.req.Entries[len(a.req.Entries)-1].Index
	return &answered{a}
}

// answered is an append answered by its early send.
type answered struct{ a sent }

func (f *answered) Error() error                          { return nil }
func (f *answered) Start() time.Time                      { return f.a.start }
func (f *answered) Request() *raft.AppendEntriesRequest   { return f.a.req }
func (f *answered) Response() *raft.AppendEntriesResponse { return f.a.resp }

// endsConsumer reports whether raft's pipeline consumer returns after f
// (replication.go's pipelineDecode): a newer term or an unsuccessful
// append, which includes a failed decode (its response stays zero).
func endsConsumer(f raft.AppendFuture) bool {
	if f.Error() != nil {
		return true
	}
	resp, req := f.Response(), f.Request()
	return resp == nil || req == nil || !resp.Success || resp.Term > req.Term
}

// unpipelined is the network transport without AppendEntries pipelining:
// one batch (up to MaxAppendEntries entries) per round trip per follower.
type unpipelined struct{ observed }

// AppendEntriesPipeline tells raft to replicate without a pipeline.
func (unpipelined) AppendEntriesPipeline(raft.ServerID, raft.ServerAddress) (raft.AppendPipeline, error) {
	return nil, raft.ErrPipelineReplicationNotSupported
}

package raftstore

import (
	"sync"

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
		t.ahead.acked(id, addr, req, resp)
	}
	return err
}

// AppendEntriesPipeline wraps the transport's pipeline in a guard.
func (t pipelined) AppendEntriesPipeline(id raft.ServerID, addr raft.ServerAddress) (raft.AppendPipeline, error) {
	p, err := t.NetworkTransport.AppendEntriesPipeline(id, addr)
	if err != nil {
		return nil, err
	}
	return guard(p, t.stop, func(f raft.AppendFuture) { t.ahead.acked(id, addr, f.Request(), f.Response()) }), nil
}

// guard wraps p and starts its forwarder, which ends with p. done, if
// not nil, sees each successful future first.
func guard(p raft.AppendPipeline, stop <-chan struct{}, done func(raft.AppendFuture)) *guardedPipeline {
	g := &guardedPipeline{inner: p, out: make(chan raft.AppendFuture), closed: make(chan struct{})}
	go g.forward(stop, done)
	return g
}

// guardedPipeline hands the inner pipeline's finished futures on to raft
// and closes the inner pipeline once raft stops reading them.
type guardedPipeline struct {
	inner  raft.AppendPipeline
	out    chan raft.AppendFuture
	closed chan struct{}
	once   sync.Once
}

func (g *guardedPipeline) AppendEntries(req *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	return g.inner.AppendEntries(req, resp)
}

func (g *guardedPipeline) Consumer() <-chan raft.AppendFuture { return g.out }

func (g *guardedPipeline) Close() error {
	g.once.Do(func() { close(g.closed) })
	return g.inner.Close()
}

// forward passes each finished future on until raft's consumer is known to
// stop reading: after a future it stops on (see endsConsumer), when the
// pipeline is closed, or when the node stops. In the first and last case
// it closes the inner pipeline, which makes a blocked AppendEntries return
// ErrPipelineShutdown; raft then falls back to plain replication.
func (g *guardedPipeline) forward(stop <-chan struct{}, done func(raft.AppendFuture)) {
	in := g.inner.Consumer()
	for {
		select {
		case f := <-in:
			last := endsConsumer(f)
			if !last && done != nil {
				done(f)
			}
			select {
			case g.out <- f:
			case <-g.closed:
				return
			case <-stop:
				_ = g.inner.Close()
				return
			}
			if last {
				_ = g.inner.Close()
				return
			}
		case <-g.closed:
			return
		case <-stop:
			_ = g.inner.Close()
			return
		}
	}
}

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

package raftstore

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// stuckPipeline behaves as hashicorp/raft's network pipeline once its
// in-flight channel is full: AppendEntries blocks until Close.
type stuckPipeline struct {
	done chan raft.AppendFuture
	shut chan struct{}
	once sync.Once
}

func newStuckPipeline() *stuckPipeline {
	return &stuckPipeline{done: make(chan raft.AppendFuture, 1), shut: make(chan struct{})}
}

func (p *stuckPipeline) AppendEntries(*raft.AppendEntriesRequest, *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	<-p.shut
	return nil, raft.ErrPipelineShutdown
}
func (p *stuckPipeline) Consumer() <-chan raft.AppendFuture { return p.done }
func (p *stuckPipeline) Close() error                       { p.once.Do(func() { close(p.shut) }); return nil }

type doneFuture struct {
	req  *raft.AppendEntriesRequest
	resp *raft.AppendEntriesResponse
	err  error
}

func (f doneFuture) Error() error                          { return f.err }
func (f doneFuture) Start() time.Time                      { return time.Time{} }
func (f doneFuture) Request() *raft.AppendEntriesRequest   { return f.req }
func (f doneFuture) Response() *raft.AppendEntriesResponse { return f.resp }
func future(term uint64, ok bool, err error) raft.AppendFuture {
	return doneFuture{req: &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{}, Term: 3}, resp: &raft.AppendEntriesResponse{Term: term, Success: ok}, err: err}
}

// appendReturns reports whether AppendEntries on g returns within a while.
func appendReturns(t *testing.T, g *guardedPipeline, within time.Duration) bool {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		_, err := g.AppendEntries(&raft.AppendEntriesRequest{}, &raft.AppendEntriesResponse{})
		errc <- err
	}()
	select {
	case err := <-errc:
		if !errors.Is(err, raft.ErrPipelineShutdown) {
			t.Errorf("AppendEntries: %v, want ErrPipelineShutdown", err)
		}
		return true
	case <-time.After(within):
		return false
	}
}

// A response that ends raft's consumer closes the pipeline, so a send
// blocked for room returns and replication (and Shutdown) can go on.
func TestGuardedPipelineClosesAfterConsumerEnds(t *testing.T) {
	for name, last := range map[string]raft.AppendFuture{
		"rejected":     future(3, false, nil),
		"newer term":   future(4, true, nil),
		"decode error": future(0, false, errors.New("connection reset")),
	} {
		t.Run(name, func(t *testing.T) {
			p := newStuckPipeline()
			g := guard(p, make(chan struct{}), nil)
			defer g.Close()
			// A successful append keeps the pipeline open.
			p.done <- future(3, true, nil)
			<-g.Consumer()
			if appendReturns(t, g, 50*time.Millisecond) {
				t.Fatal("the pipeline was closed after a successful append")
			}
			p.done <- last
			if got := <-g.Consumer(); got != last {
				t.Fatalf("consumer got %v, want the final future", got)
			}
			if !appendReturns(t, g, 10*time.Second) {
				t.Fatal("AppendEntries still blocked after the response that ends the consumer")
			}
		})
	}
}

// The node stopping closes the pipeline even when raft's consumer is gone.
func TestGuardedPipelineClosesOnStop(t *testing.T) {
	p := newStuckPipeline()
	stop := make(chan struct{})
	g := guard(p, stop, nil)
	defer g.Close()
	p.done <- future(3, true, nil) // nobody reads it
	close(stop)
	if !appendReturns(t, g, 10*time.Second) {
		t.Fatal("AppendEntries still blocked after the node stopped")
	}
}

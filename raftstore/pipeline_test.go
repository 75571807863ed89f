package raftstore

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// stuckPipeline behaves as hashicorp/raft's network pipeline once its
// in-flight channel is full: AppendEntries blocks until Close, but for
// the first free ones.
type stuckPipeline struct {
	done chan raft.AppendFuture
	shut chan struct{}
	once sync.Once
	free atomic.Int32
	// onAppend, if set, is called by every AppendEntries.
	onAppend func()
}

func newStuckPipeline() *stuckPipeline {
	return &stuckPipeline{done: make(chan raft.AppendFuture, 1), shut: make(chan struct{})}
}

func (p *stuckPipeline) AppendEntries(*raft.AppendEntriesRequest, *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	if p.onAppend != nil {
		p.onAppend()
	}
	if p.free.Add(-1) >= 0 {
		return nil, nil
	}
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
			p.free.Store(1)
			g := guard(p, make(chan struct{}), nil)
			defer g.Close()
			// A successful append keeps the pipeline open.
			if _, err := g.AppendEntries(&raft.AppendEntriesRequest{}, &raft.AppendEntriesResponse{}); err != nil {
				t.Fatal(err)
			}
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

// An append the follower was sent ahead of is answered by the early send
// (sendahead.go), in the order raft made its appends: successful if the
// early send was, rejected if not, which closes the pipeline.
func TestGuardedPipelineAnswersFromEarlySend(t *testing.T) {
	entries := func(from, to uint64) *raft.AppendEntriesRequest {
		req := &raft.AppendEntriesRequest{Term: 3, PrevLogEntry: from - 1}
		for i := from; i <= to; i++ {
			req.Entries = append(req.Entries, &raft.Log{Index: i, Term: 3})
		}
		return req
	}
	for _, ok := range []bool{true, false} {
		t.Run(fmt.Sprintf("early send ok=%v", ok), func(t *testing.T) {
			p := newStuckPipeline()
			p.free.Store(1)
			seen := make(chan *raft.AppendEntriesRequest, 2)
			g := guard(p, make(chan struct{}), func(f raft.AppendFuture) { seen <- f.Request() })
			defer g.Close()
			early := &earlySend{term: 3, first: 4, last: 5, done: make(chan struct{})}
			a, b := entries(4, 5), entries(6, 6)
			g.covering = func(req *raft.AppendEntriesRequest) *earlySend {
				if req == a {
					return early
				}
				return nil
			}
			// b may reach the follower only after a, which went on the
			// early send's connection.
			p.onAppend = func() {
				select {
				case <-early.done:
				default:
					t.Error("entries 6- sent before the early send of 4-5 ended")
				}
			}
			if _, err := g.AppendEntries(a, &raft.AppendEntriesResponse{}); err != nil {
				t.Fatal(err)
			}
			bSent := make(chan error, 1)
			go func() {
				_, err := g.AppendEntries(b, &raft.AppendEntriesResponse{})
				bSent <- err
			}()
			early.ok, early.replyTerm = ok, 3
			if !ok {
				early.replyTerm = 4 // turned down for a newer term
			}
			close(early.done)
			if err := <-bSent; err != nil {
				t.Fatal(err)
			}
			p.done <- doneFuture{req: b, resp: &raft.AppendEntriesResponse{Term: 3, Success: true}}
			first := <-g.Consumer()
			if first.Request() != a {
				t.Fatalf("first answer is for entries from %d, want the early-sent 4-5", first.Request().Entries[0].Index)
			}
			if r := first.Response(); first.Error() != nil || r.Success != ok || r.Term != early.replyTerm || r.LastLog != 5 {
				t.Fatalf("answer %+v (error %v), want success %v in the follower's term %d up to 5", r, first.Error(), ok, early.replyTerm)
			}
			// done, which the early sends' bookkeeping is, hears of a
			// rejection (it forgets the follower's log), not of a success
			// the early send's own reply recorded.
			// done sees a future before raft does, so what it heard of
			// a is in seen by now (b's may come later).
			heard := false
			select {
			case r := <-seen:
				heard = r == a
			default:
			}
			if heard == ok {
				t.Errorf("done heard of the early-answered append: %v, want %v", heard, !ok)
			}
			if !ok {
				// raft stops reading after a rejection: the pipeline is
				// closed, and raft replicates without it.
				if !appendReturns(t, g, 10*time.Second) {
					t.Fatal("AppendEntries still blocked after a rejected early send")
				}
				return
			}
			if second := <-g.Consumer(); second.Request() != b {
				t.Fatal("second answer is not the inner pipeline's")
			}
		})
	}
}

// Every answered append reaches done, a rejected one too: the early sends
// (sendahead.go) forget how far the follower's log matches when it turns
// an append down. One that failed to reach the follower does not.
func TestGuardedPipelineReportsRejections(t *testing.T) {
	for name, tc := range map[string]struct {
		f    raft.AppendFuture
		seen bool
	}{
		"accepted":     {future(3, true, nil), true},
		"rejected":     {future(3, false, nil), true},
		"newer term":   {future(4, false, nil), true},
		"decode error": {future(0, false, errors.New("connection reset")), false},
	} {
		t.Run(name, func(t *testing.T) {
			p := newStuckPipeline()
			p.free.Store(1)
			seen := make(chan raft.AppendFuture, 1)
			g := guard(p, make(chan struct{}), func(f raft.AppendFuture) { seen <- f })
			defer g.Close()
			if _, err := g.AppendEntries(&raft.AppendEntriesRequest{}, &raft.AppendEntriesResponse{}); err != nil {
				t.Fatal(err)
			}
			p.done <- tc.f
			if got := <-g.Consumer(); got != tc.f {
				t.Fatal("consumer got another future")
			}
			select {
			case f := <-seen:
				if !tc.seen || f != tc.f {
					t.Fatalf("done saw %v, want it to see nothing", f)
				}
			default:
				if tc.seen {
					t.Fatal("done did not see the answered append")
				}
			}
		})
	}
}

package serviceproxy

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Apply replaces the proxy's table with the rules for svcs, in one
// transaction: a connection never sees half a ruleset.
func Apply(ctx context.Context, svcs []Service) error {
	return apply(ctx, Ruleset(svcs))
}

// Remove deletes the proxy's table; none is no error.
func Remove(ctx context.Context) error {
	return apply(ctx, fmt.Sprintf("table ip %s {}\ndelete table ip %s\n", Table, Table))
}

// DefaultFullSyncPeriod is a Proxy's FullSyncPeriod when it has none: a
// little under the agent's minute between resyncs, so that each resync
// of an otherwise quiet node writes the table whole and puts back what
// someone else changed.
const DefaultFullSyncPeriod = 50 * time.Second

// Proxy keeps the proxy's table in step with the Services as they
// change, sending nft only what changed since its last Sync, in one
// transaction: at 1,000 Services an endpoint's change costs tens of
// milliseconds where writing the table whole costs nearly half a second.
//
// It writes the table whole, as Apply does, when it does not know what
// the table holds: at its first Sync, after a failed one, after Reset,
// and at the first Sync once FullSyncPeriod has passed since the last
// whole write. The last repairs what someone else changed in the table
// that updates still apply to cleanly (an element or a rule removed);
// an update nft refuses (the table or a chain deleted) is followed at
// once, in the same Sync, by a whole write. A whole write forgets the
// clients ClientIP affinity remembered; an update keeps them for the
// endpoints that stay.
//
// The zero Proxy is ready; its methods may be called concurrently.
type Proxy struct {
	// FullSyncPeriod is how long after writing the table whole Sync
	// only updates it; zero (or less) is DefaultFullSyncPeriod.
	FullSyncPeriod time.Duration

	mu      sync.Mutex
	written *tableState // what the table holds; nil: not known
	fullAt  time.Time   // when it was last written whole

	// run (nft) and now are pulled out for tests.
	run func(ctx context.Context, script string) error
	now func() time.Time
}

// Sync makes the proxy's table hold the rules for svcs (as Ruleset
// writes them), in one transaction.
func (p *Proxy) Sync(ctx context.Context, svcs []Service) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	run, now := p.run, p.now
	if run == nil {
		run = apply
	}
	if now == nil {
		now = time.Now
	}
	period := p.FullSyncPeriod
	if period <= 0 {
		period = DefaultFullSyncPeriod
	}
	want := build(svcs, p.written)
	t := now()
	if p.written != nil && t.Sub(p.fullAt) < period {
		script := diff(p.written, want)
		if script == "" {
			return nil
		}
		if err := run(ctx, script); err == nil {
			p.written = want
			return nil
		}
		// nft refused the update as a whole, so the table is not what
		// was written: someone changed it, or nft was stopped, in which
		// case the update may have been made. Only a whole write is
		// sure.
	}
	p.written = nil
	if err := run(ctx, want.full()); err != nil {
		return err
	}
	p.written, p.fullAt = want, t
	return nil
}

// Reset makes the next Sync write the table whole.
func (p *Proxy) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.written = nil
}

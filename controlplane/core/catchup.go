package core

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"
)

// A server that starts holds the state of its last snapshot, and hashicorp/raft
// applies the log entries after it only once a leader has told it what is
// committed. Until then its store may still hold a token that was deleted,
// lack one that was created, or miss objects: authenticating, authorizing,
// admitting or reading against it would answer from the past (a deleted
// token was accepted for seconds after a restart of every server). So the
// API answers nothing that depends on the store until the store has applied
// a read index obtained after the server started; /readyz says why
// meanwhile, and every other request gets 503 with Retry-After.

// AwaitCatchUp opens the API once the store has applied a read index that
// this server obtained after it started, retrying until it gets there or
// ctx ends.
func (c *Core) AwaitCatchUp(ctx context.Context) {
	start := time.Now()
	var idx uint64
	caught := c.retry(ctx, "not caught up with the cluster yet", slog.LevelDebug, 50*time.Millisecond, time.Second, func() error {
		// ReadIndex retries across elections by itself; the bound only
		// keeps one attempt from waiting for ever on a lost leader.
		rctx, cancel := context.WithTimeout(ctx, ReadIndexTimeout)
		var err error
		idx, err = c.node.ReadIndex(rctx)
		cancel()
		if err != nil {
			return err
		}
		// No bound on applying: a long log tail takes as long as it
		// takes, and a new read index would only move the goal.
		return c.node.WaitApplied(ctx, idx)
	})
	if caught {
		if c.cfg.OnCaughtUp != nil {
			c.cfg.OnCaughtUp()
		}
		close(c.caughtUp)
		c.log.Info("caught up with the cluster: serving the API", "applied_index", idx, "after", time.Since(start).Round(time.Millisecond))
	}
}

// WaitCaughtUp returns once the API serves, or with ctx's error.
func (c *Core) WaitCaughtUp(ctx context.Context) error {
	select {
	case <-c.caughtUp:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s: %w", c.CatchingUp(), ctx.Err())
	}
}

// CatchingUp is the reason this server does not serve yet, or "" once it
// does.
func (c *Core) CatchingUp() string {
	select {
	case <-c.caughtUp:
		return ""
	default:
	}
	why := ""
	if c.node.Leader().ID == "" {
		why = ", and the cluster has no raft leader it can reach (an election is under way, or fewer than a quorum of servers are up)"
	}
	return "this server started recently and has not yet applied the cluster's latest state (applied index " +
		strconv.FormatUint(c.node.AppliedIndex(), 10) + ")" + why + "; it answers once it has caught up"
}

// ReadIndexTimeout bounds one wait for the leader's read index when the
// caller has no deadline of its own: catching up here, consistent reads in
// the transports.
const ReadIndexTimeout = 10 * time.Second

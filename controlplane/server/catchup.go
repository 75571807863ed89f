package server

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

// awaitCatchUp opens the API once the store has applied a read index that
// this server obtained after it started, retrying until it gets there or
// ctx ends.
func (s *Server) awaitCatchUp(ctx context.Context) {
	start := time.Now()
	var idx uint64
	caught := s.retry(ctx, "not caught up with the cluster yet", slog.LevelDebug, 50*time.Millisecond, time.Second, func() error {
		// ReadIndex retries across elections by itself; the bound only
		// keeps one attempt from waiting for ever on a lost leader.
		rctx, cancel := context.WithTimeout(ctx, consistentReadTimeout)
		var err error
		idx, err = s.node.ReadIndex(rctx)
		cancel()
		if err != nil {
			return err
		}
		// No bound on applying: a long log tail takes as long as it
		// takes, and a new read index would only move the goal.
		return s.node.WaitApplied(ctx, idx)
	})
	if caught {
		close(s.caughtUpCh)
		s.log.Info("caught up with the cluster: serving the API", "applied_index", idx, "after", time.Since(start).Round(time.Millisecond))
	}
}

// waitCaughtUp returns once the API serves, or with ctx's error.
func (s *Server) waitCaughtUp(ctx context.Context) error {
	select {
	case <-s.caughtUpCh:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s: %w", s.catchingUp(), ctx.Err())
	}
}

// catchingUp is the reason this server does not serve yet, or "" once it
// does.
func (s *Server) catchingUp() string {
	select {
	case <-s.caughtUpCh:
		return ""
	default:
	}
	why := ""
	if s.node.Leader().ID == "" {
		why = ", and the cluster has no raft leader it can reach (an election is under way, or fewer than a quorum of servers are up)"
	}
	return "this server started recently and has not yet applied the cluster's latest state (applied index " +
		strconv.FormatUint(s.node.AppliedIndex(), 10) + ")" + why + "; it answers once it has caught up"
}

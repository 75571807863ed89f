package raftstore

import (
	"errors"
	"fmt"
)

// Sentinel errors. Callers match them with errors.Is; the wrapped message
// carries the detail (the leader's address, why a change was refused).
var (
	// ErrNotLeader is returned by leader-only operations on a follower. The
	// error is a *NotLeaderError naming the current leader when one is known.
	ErrNotLeader = errors.New("raftstore: not the leader")
	// ErrNoLeader means the cluster has no leader right now (an election is
	// under way or quorum is lost); retry later.
	ErrNoLeader = errors.New("raftstore: no leader")
	// ErrQuorum means a membership change was refused because it would leave
	// the voters without a healthy quorum (SPEC CPL-1).
	ErrQuorum = errors.New("raftstore: change would break quorum")
	// ErrClosed is returned by every operation after Close.
	ErrClosed = errors.New("raftstore: node closed")
	// ErrUnknownOutcome means a command reached the log but leadership was
	// lost (or the caller gave up) before it was known to be committed: it may
	// or may not take effect. Callers must not report it as a clean failure.
	ErrUnknownOutcome = errors.New("raftstore: outcome unknown")
	// ErrUnknownServer names a server ID that is not in the configuration.
	ErrUnknownServer = errors.New("raftstore: unknown server")
	// ErrCorrupt means a stored log entry or snapshot header could not be
	// decoded.
	ErrCorrupt = errors.New("raftstore: corrupt data")
	// ErrInvalidConfig is wrapped by every Config validation error.
	ErrInvalidConfig = errors.New("raftstore: invalid config")
)

// NotLeaderError is the error returned by leader-only operations on a
// follower; it unwraps to ErrNotLeader and carries the leader it knows of,
// so an HTTP layer can forward or redirect without another lookup.
type NotLeaderError struct {
	Leader LeaderInfo
}

func (e *NotLeaderError) Error() string {
	if e.Leader.ID == "" {
		return ErrNotLeader.Error()
	}
	s := fmt.Sprintf("%s: the leader is %q at %s", ErrNotLeader.Error(), e.Leader.ID, e.Leader.RaftAddr)
	if e.Leader.APIAddr != "" {
		s += " (API " + e.Leader.APIAddr + ")"
	}
	return s
}

// Unwrap lets errors.Is(err, ErrNotLeader) match.
func (e *NotLeaderError) Unwrap() error { return ErrNotLeader }

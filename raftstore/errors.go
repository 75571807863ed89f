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
	// ErrDataDirInUse means another process (a second `outpost dev` on the
	// same directory, say) holds the lock on the data directory's raft.db.
	ErrDataDirInUse = errors.New("raftstore: data directory in use")
	// ErrForeignCA means a server presented a certificate that the cluster
	// CA did not sign: it belongs to another cluster, or was started with
	// another cluster secret.
	ErrForeignCA = errors.New("raftstore: certificate from another cluster CA")
)

// foreignCAError is ErrForeignCA for one address. The TLS error alone
// ("x509: certificate signed by unknown authority") does not point at the
// usual cause, a --cluster-secret that differs between servers.
type foreignCAError struct {
	addr string
	err  error
}

func (e *foreignCAError) Error() string {
	return "the server at " + e.addr + " has a certificate from a different cluster CA: is --cluster-secret the same on every server? (" + e.err.Error() + ")"
}

// Is makes errors.Is(err, ErrForeignCA) true.
func (e *foreignCAError) Is(target error) bool { return target == ErrForeignCA }

func (e *foreignCAError) Unwrap() error { return e.err }

// dataDirInUseError is ErrDataDirInUse with the directory, worded for the
// person who started the second process: bbolt's own error is a bare
// "timeout".
type dataDirInUseError struct{ dir string }

func (e *dataDirInUseError) Error() string {
	return "data directory " + e.dir + " is in use by another outpost process (raft.db is locked)"
}

// Is makes errors.Is(err, ErrDataDirInUse) true.
func (e *dataDirInUseError) Is(target error) bool { return target == ErrDataDirInUse }

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

// Package plant holds the bugs the linearizability tests must catch.
//
// A checker that has never failed proves little: issue 9 found that the
// original one passed with a new leader skipping its read barrier, with an
// unknown-outcome write reported as 503, and with a leader serving reads
// without confirming that it still leads. Each such bug is planted here by
// name, behind the outpost_plant build tag; testing/e2e builds a binary with
// the tag, switches one bug on through the OUTPOST_PLANT environment
// variable, and requires the checker to reject the history.
//
// Without the tag On is a constant false and every planted branch is dead
// code the compiler removes: release builds cannot switch a bug on.
package plant

// The bugs that can be planted.
const (
	// StaleRead serves a consistent (quorum) read from the local store
	// without asking the leader for a read index.
	StaleRead = "stale-read"
	// IgnorePrecondition applies an update whatever resourceVersion it
	// was conditioned on.
	IgnorePrecondition = "ignore-precondition"
	// LostWrite acknowledges some creates without storing them.
	LostWrite = "lost-write"
	// SkipReadBarrier lets a new leader hand out read indexes before it has
	// committed an entry of its own term, and check writes' preconditions
	// before its store holds what the last leader committed (the core's
	// write gate).
	SkipReadBarrier = "skip-read-barrier"
	// UnknownAs503 reports a write whose outcome is unknown as 503 (not
	// applied) instead of 504.
	UnknownAs503 = "unknown-as-503"
	// NoLeaderCheck hands out the leader's commit index as a read index
	// without confirming with a quorum that it still leads.
	NoLeaderCheck = "no-leader-check"
)

// All lists every bug that can be planted.
var All = []string{StaleRead, IgnorePrecondition, LostWrite, SkipReadBarrier, UnknownAs503, NoLeaderCheck}

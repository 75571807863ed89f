package raftstore

import (
	"fmt"
	"slices"
	"strings"
)

// ChangeOp is a kind of membership change.
type ChangeOp string

// The membership changes CheckChange judges.
const (
	ChangeAddNonVoter ChangeOp = "add-nonvoter"
	ChangePromote     ChangeOp = "promote"
	ChangeDemote      ChangeOp = "demote"
	ChangeRemove      ChangeOp = "remove"
)

// Change is one membership change on the server with the given ID.
type Change struct {
	Op ChangeOp
	ID string
}

// Member is one server of a configuration as the quorum rule sees it.
type Member struct {
	ID      string
	Voter   bool
	Healthy bool // reachable (its status RPC answered)
}

func quorumOf(voters int) int { return voters/2 + 1 }

// DecideChange is the quorum rule (SPEC CPL-1) as a pure function of the
// current members, their health and the change. It refuses, with an error
// wrapping ErrQuorum that says why, any change after which the healthy
// voters would not form a quorum
//
//   - of the new voter set (else the cluster stops making progress), or
//   - of the current voter set (else the change cannot be committed safely
//     and fault tolerance drops below what the current configuration
//     needs; this is what refuses going from 2 voters to 1, and removing a
//     healthy voter while another is down).
//
// Each change is checked against the configuration the previous change
// produced, so removing several voters one after another is caught at the
// first step that breaks the rule. Promoting an unreachable server is also
// refused. Adding a non-voter and changes that leave the voters unchanged
// always pass.
func DecideChange(members []Member, ch Change) error {
	var target *Member
	for i := range members {
		if members[i].ID == ch.ID {
			target = &members[i]
		}
	}
	var after []Member
	switch ch.Op {
	case ChangeAddNonVoter:
		return nil
	case ChangeRemove, ChangeDemote:
		if target == nil || !target.Voter {
			return nil
		}
		for _, m := range members {
			if m.Voter && m.ID != ch.ID {
				after = append(after, m)
			}
		}
	case ChangePromote:
		if target == nil {
			return fmt.Errorf("refusing to promote %q: %w", ch.ID, ErrUnknownServer)
		}
		if target.Voter {
			return nil
		}
		if !target.Healthy {
			return fmt.Errorf("%w: refusing to promote %q: it is unreachable, and an unreachable voter raises the quorum without helping to meet it", ErrQuorum, ch.ID)
		}
		for _, m := range members {
			if m.Voter || m.ID == ch.ID {
				after = append(after, m)
			}
		}
	default:
		return fmt.Errorf("%w: unknown change %q", ErrQuorum, ch.Op)
	}

	before := 0
	var down []string
	for _, m := range members {
		if m.Voter {
			before++
			if !m.Healthy {
				down = append(down, fmt.Sprintf("%q", m.ID))
			}
		}
	}
	healthyAfter := 0
	for _, m := range after {
		if m.Healthy {
			healthyAfter++
		}
	}
	slices.Sort(down)
	what := fmt.Sprintf("refusing to %s %q", verb(ch.Op), ch.ID)
	now := voters(before) + ", all reachable"
	switch {
	case before == 1 && len(down) == 0:
		now = "1 voter, reachable"
	case len(down) > 0:
		now = fmt.Sprintf("%s, %d unreachable (%s)", voters(before), len(down), strings.Join(down, ", "))
	}
	if len(after) == 0 {
		return fmt.Errorf("%w: %s: %s; it would leave no voters", ErrQuorum, what, now)
	}
	if need := quorumOf(len(after)); healthyAfter < need {
		return fmt.Errorf("%w: %s: %s; afterwards %d of %s would be healthy, a quorum needs %d",
			ErrQuorum, what, now, healthyAfter, voters(len(after)), need)
	}
	if need := quorumOf(before); healthyAfter < need {
		return fmt.Errorf("%w: %s: %s; afterwards %s would remain, fewer than the %d the current configuration needs for a quorum",
			ErrQuorum, what, now, healthyVoters(healthyAfter), need)
	}
	return nil
}

// voters says "1 voter" or "n voters".
func voters(n int) string {
	if n == 1 {
		return "1 voter"
	}
	return fmt.Sprintf("%d voters", n)
}

// healthyVoters says "1 healthy voter" or "n healthy voters".
func healthyVoters(n int) string {
	if n == 1 {
		return "1 healthy voter"
	}
	return fmt.Sprintf("%d healthy voters", n)
}

func verb(op ChangeOp) string {
	switch op {
	case ChangeRemove:
		return "remove voter"
	case ChangeDemote:
		return "demote voter"
	case ChangePromote:
		return "promote"
	default:
		return string(op)
	}
}

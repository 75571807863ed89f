package raftstore

import (
	"errors"
	"strings"
	"testing"
)

func TestDecideChange(t *testing.T) {
	v := func(id string, healthy bool) Member { return Member{ID: id, Voter: true, Healthy: healthy} }
	nv := func(id string, healthy bool) Member { return Member{ID: id, Healthy: healthy} }
	three := []Member{v("s1", true), v("s2", true), v("s3", true)}
	threeOneDown := []Member{v("s1", true), v("s2", true), v("s3", false)}
	tests := []struct {
		name    string
		members []Member
		change  Change
		refuse  string // "" = allowed; else a substring of the refusal
	}{
		{"remove one of three healthy", three, Change{ChangeRemove, "s3"}, ""},
		{"demote one of three healthy", three, Change{ChangeDemote, "s2"}, ""},
		{"remove one of two (second removal in a row)", []Member{v("s1", true), v("s2", true)}, Change{ChangeRemove, "s2"},
			`refusing to remove voter "s2": 2 voters, all reachable; afterwards 1 healthy voter would remain, fewer than the 2`},
		{"remove healthy with one down", threeOneDown, Change{ChangeRemove, "s2"},
			`refusing to remove voter "s2": 3 voters, 1 unreachable ("s3"); afterwards 1 of 2 voters would be healthy, a quorum needs 2`},
		{"demote healthy with one down", threeOneDown, Change{ChangeDemote, "s1"}, `refusing to demote voter "s1"`},
		{"remove the unreachable voter", threeOneDown, Change{ChangeRemove, "s3"}, ""},
		{"remove the only voter", []Member{v("s1", true)}, Change{ChangeRemove, "s1"}, `"s1": 1 voter, reachable; it would leave no voters`},
		{"remove one of two, the other down", []Member{v("s1", true), v("s2", false)}, Change{ChangeRemove, "s1"},
			`2 voters, 1 unreachable ("s2"); afterwards 0 of 1 voter would be healthy, a quorum needs 1`},
		{"demote one of two, the other down", []Member{v("s1", false), v("s2", true)}, Change{ChangeDemote, "s1"},
			`2 voters, 1 unreachable ("s1"); afterwards 1 healthy voter would remain, fewer than the 2`},
		{"five voters one down remove healthy", []Member{v("a", true), v("b", true), v("c", true), v("d", true), v("e", false)},
			Change{ChangeRemove, "a"}, ""},
		{"five voters two down remove healthy", []Member{v("a", true), v("b", true), v("c", true), v("d", false), v("e", false)},
			Change{ChangeRemove, "a"}, `2 unreachable ("d", "e"); afterwards 2 of 4 voters would be healthy, a quorum needs 3`},
		{"four voters one down remove healthy", []Member{v("a", true), v("b", true), v("c", true), v("d", false)},
			Change{ChangeRemove, "a"}, "fewer than the 3 the current configuration needs"},
		{"remove a non-voter", append([]Member{nv("s4", false)}, three...), Change{ChangeRemove, "s4"}, ""},
		{"remove an unknown server", three, Change{ChangeRemove, "zz"}, ""},
		{"demote a non-voter", append([]Member{nv("s4", true)}, threeOneDown...), Change{ChangeDemote, "s4"}, ""},
		{"add a non-voter to a degraded cluster", []Member{v("s1", true), v("s2", false), v("s3", false)}, Change{ChangeAddNonVoter, "s4"}, ""},
		{"promote a healthy non-voter", append(threeOneDown, nv("s4", true)), Change{ChangePromote, "s4"}, ""},
		{"promote into a single-voter cluster", []Member{v("s1", true), nv("s2", true)}, Change{ChangePromote, "s2"}, ""},
		{"promote an unreachable non-voter", append(three, nv("s4", false)), Change{ChangePromote, "s4"}, "it is unreachable"},
		{"promote with quorum already lost", []Member{v("s1", true), v("s2", false), v("s3", false), nv("s4", true)},
			Change{ChangePromote, "s4"}, "afterwards 2 of 4 voters would be healthy, a quorum needs 3"},
		{"promote an existing voter", three, Change{ChangePromote, "s1"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := DecideChange(tt.members, tt.change)
			if tt.refuse == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrQuorum) {
				t.Fatalf("got %v, want ErrQuorum", err)
			}
			if !strings.Contains(err.Error(), tt.refuse) {
				t.Fatalf("refusal %q does not say %q", err, tt.refuse)
			}
		})
	}
	if err := DecideChange(three, Change{ChangePromote, "nope"}); !errors.Is(err, ErrUnknownServer) || errors.Is(err, ErrQuorum) {
		t.Errorf("promote unknown: %v, want ErrUnknownServer only", err)
	}
	if err := DecideChange(three, Change{"explode", "s1"}); err == nil {
		t.Error("unknown op accepted")
	}
}

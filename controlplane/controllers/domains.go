package controllers

import (
	"cmp"
	"slices"
)

// Failure domains of the control plane (SPEC CPL-2): members are spread
// evenly over the domains; with fewer domains than members the domains
// are reused in alphabetical order of name (3 members over a and b: a, b,
// a); with no domains every member is in one ("").

// domainTargets is how many members each domain should hold.
func domainTargets(replicas int, domains []string) map[string]int {
	ds := slices.Clone(domains)
	slices.Sort(ds)
	ds = slices.Compact(ds)
	if len(ds) == 0 {
		ds = []string{""}
	}
	out := make(map[string]int, len(ds))
	for _, d := range ds {
		out[d] = 0
	}
	for i := range replicas {
		out[ds[i%len(ds)]]++
	}
	return out
}

// placement is the next change that brings the control plane toward its
// balance: add a member in domain Add (when Grow), and, once there are
// more members than replicas, remove member Remove. At most one of each
// at a time, the add first: the quorum guard removes a member only after
// its replacement joined.
type placement struct {
	Grow   bool
	Add    string
	Remove string
}

// nextPlacement looks at members (member ID → its domain) and says what
// to do next, if anything.
func nextPlacement(members map[string]string, replicas int, domains []string) placement {
	target := domainTargets(replicas, domains)
	count := map[string]int{}
	for _, d := range members {
		count[d]++
	}
	// under and over are the domains' distances from their targets; a
	// domain not in the list is over by all it holds.
	under := func() (string, int) {
		best, most := "", 0
		for _, d := range sortedKeys(target) {
			if n := target[d] - count[d]; n > most {
				best, most = d, n
			}
		}
		return best, most
	}
	if len(members) < replicas {
		if d, n := under(); n > 0 {
			return placement{Grow: true, Add: d}
		}
		return placement{}
	}
	// The domain most over its target gives up a member: the last of it
	// by ID, so the choice is stable.
	overDomain, most := "", 0
	for _, d := range sortedKeys(count) {
		if n := count[d] - target[d]; n > most {
			overDomain, most = d, n
		}
	}
	if most == 0 {
		return placement{}
	}
	var victims []string
	for id, d := range members {
		if d == overDomain {
			victims = append(victims, id)
		}
	}
	slices.Sort(victims)
	victim := victims[len(victims)-1]
	if len(members) > replicas {
		return placement{Remove: victim} // the replacement joined already
	}
	if d, n := under(); n > 0 {
		return placement{Grow: true, Add: d}
	}
	return placement{}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, cmp.Compare)
	return keys
}

// DomainTargets is domainTargets for tests outside the package: how many
// members each domain should hold.
func DomainTargets(replicas int, domains []string) map[string]int {
	return domainTargets(replicas, domains)
}

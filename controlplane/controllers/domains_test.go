package controllers

import (
	"maps"
	"testing"
)

// CPL-2's balance: 3 or 5 members over 0, 1, 2, 3 or 5 domains, reused
// in alphabetical order when fewer than members.
func TestDomainTargets(t *testing.T) {
	for _, tt := range []struct {
		replicas int
		domains  []string
		want     map[string]int
	}{
		{3, nil, map[string]int{"": 3}},
		{3, []string{"a"}, map[string]int{"a": 3}},
		{3, []string{"b", "a"}, map[string]int{"a": 2, "b": 1}},
		{3, []string{"c", "a", "b"}, map[string]int{"a": 1, "b": 1, "c": 1}},
		{3, []string{"e", "d", "c", "b", "a"}, map[string]int{"a": 1, "b": 1, "c": 1, "d": 0, "e": 0}},
		{5, []string{"a"}, map[string]int{"a": 5}},
		{5, []string{"b", "a"}, map[string]int{"a": 3, "b": 2}},
		{5, []string{"a", "b", "c"}, map[string]int{"a": 2, "b": 2, "c": 1}},
		{5, []string{"a", "b", "c", "d", "e"}, map[string]int{"a": 1, "b": 1, "c": 1, "d": 1, "e": 1}},
		{3, []string{"a", "a", "b"}, map[string]int{"a": 2, "b": 1}},
	} {
		if got := domainTargets(tt.replicas, tt.domains); !maps.Equal(got, tt.want) {
			t.Errorf("%d over %v: %v, want %v", tt.replicas, tt.domains, got, tt.want)
		}
	}
}

// The next step toward the balance: a lost member is replaced in the
// domain short of its target; a move (domains changed) adds first, and
// removes from the most crowded domain only once the addition joined,
// one member at a time.
func TestNextPlacement(t *testing.T) {
	abc := []string{"a", "b", "c"}
	for _, tt := range []struct {
		name     string
		members  map[string]string
		replicas int
		domains  []string
		want     placement
	}{
		{"balanced", map[string]string{"s1": "a", "s2": "b", "s3": "c"}, 3, abc, placement{}},
		{"one lost in b", map[string]string{"s1": "a", "s3": "c"}, 3, abc, placement{Grow: true, Add: "b"}},
		{"two lost", map[string]string{"s1": "a"}, 3, abc, placement{Grow: true, Add: "b"}},
		{"5 over 3, one lost in a", map[string]string{"s2": "a", "s3": "b", "s4": "b", "s5": "c"}, 5, abc, placement{Grow: true, Add: "a"}},
		{"no domains", map[string]string{"s1": "", "s2": ""}, 3, nil, placement{Grow: true, Add: ""}},
		{"domains changed: a and b to c and d, grow first", map[string]string{"s1": "a", "s2": "a", "s3": "b"}, 3, []string{"c", "d"}, placement{Grow: true, Add: "c"}},
		{"domains changed, the addition joined: remove from a", map[string]string{"s1": "a", "s2": "a", "s3": "b", "s4": "c"}, 3, []string{"c", "d"}, placement{Remove: "s2"}},
		{"crowded domain", map[string]string{"s1": "a", "s2": "a", "s3": "a"}, 3, abc, placement{Grow: true, Add: "b"}},
		{"crowded, replacement in b joined", map[string]string{"s1": "a", "s2": "a", "s3": "a", "s4": "b"}, 3, abc, placement{Remove: "s3"}},
		{"one domain, balanced", map[string]string{"s1": "a", "s2": "a", "s3": "a"}, 3, []string{"a"}, placement{}},
	} {
		if got := nextPlacement(tt.members, tt.replicas, tt.domains); got != tt.want {
			t.Errorf("%s: %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

package policy

import (
	"errors"
	"math"
	"slices"
)

// Sentinel errors of the package.
var (
	// ErrInvalid wraps every refusal of a policy; the message lists each
	// problem by field path.
	ErrInvalid = errors.New("invalid scheduler policy")
)

// Kind and versions of a policy file.
const (
	Kind    = "Policy"
	Version = "v1"
)

// MaxWeight bounds a priority's weight so that the weighted sum of every
// priority's 0–10 score cannot overflow.
const MaxWeight = math.MaxInt32

// DefaultHardPodAffinitySymmetricWeight is the weight a pod's required
// affinity term gives, in InterPodAffinityPriority, to the nodes of the
// pods it selects when the new pod is one of them (Kubernetes' default).
const DefaultHardPodAffinitySymmetricWeight = 1

// Policy is a scheduler policy (SPEC SCH-2), as in seed 000 14.2.4.
type Policy struct {
	Kind       string      `json:"kind"`
	APIVersion string      `json:"apiVersion,omitempty"`
	Predicates []Predicate `json:"predicates"`
	Priorities []Priority  `json:"priorities"`
	// HardPodAffinitySymmetricWeight (0–100; nil means 1) scores the nodes
	// of pods whose required affinity selects the new pod.
	HardPodAffinitySymmetricWeight *int32 `json:"hardPodAffinitySymmetricWeight,omitempty"`
	// AlwaysCheckAllPredicates makes the scheduler run every predicate on
	// every node instead of stopping at the first failure, so that a
	// "why not" message counts every reason.
	AlwaysCheckAllPredicates bool `json:"alwaysCheckAllPredicates,omitempty"`
}

// Predicate is one filter of a policy.
type Predicate struct {
	Name     string             `json:"name"`
	Argument *PredicateArgument `json:"argument,omitempty"`
}

// PredicateArgument configures a configurable predicate; exactly one
// field is set.
type PredicateArgument struct {
	ServiceAffinity *ServiceAffinity `json:"serviceAffinity,omitempty"`
	LabelsPresence  *LabelsPresence  `json:"labelsPresence,omitempty"`
}

// ServiceAffinity: later pods of a service go only to nodes with the same
// values of Labels as the node of the service's first pod (SPEC SCH-4).
type ServiceAffinity struct {
	Labels []string `json:"labels"`
}

// LabelsPresence: the node must have every label (Presence) or none of
// them (!Presence), whatever the values.
type LabelsPresence struct {
	Labels   []string `json:"labels"`
	Presence bool     `json:"presence"`
}

// Priority is one score of a policy, with its weight.
type Priority struct {
	Name     string            `json:"name"`
	Weight   int64             `json:"weight"`
	Argument *PriorityArgument `json:"argument,omitempty"`
}

// PriorityArgument configures a configurable priority; exactly one field
// is set.
type PriorityArgument struct {
	ServiceAntiAffinity *ServiceAntiAffinity `json:"serviceAntiAffinity,omitempty"`
	LabelPreference     *LabelPreference     `json:"labelPreference,omitempty"`
}

// ServiceAntiAffinity spreads a service's pods over the groups of nodes
// that share a value of Label (SPEC SCH-7).
type ServiceAntiAffinity struct {
	Label string `json:"label"`
}

// LabelPreference prefers nodes that have Label (Presence) or lack it.
type LabelPreference struct {
	Label    string `json:"label"`
	Presence bool   `json:"presence"`
}

// Type is the predicate's type: its argument's name when it has one, else
// its canonical name (aliases resolved).
func (p *Predicate) Type() string {
	if a := p.Argument; a != nil {
		switch {
		case a.ServiceAffinity != nil:
			return TypeServiceAffinity
		case a.LabelsPresence != nil:
			return TypeLabelsPresence
		}
	}
	if c, ok := predicateAliases[p.Name]; ok {
		return c
	}
	return p.Name
}

// Type is the priority's type: its argument's name when it has one, else
// its name.
func (p *Priority) Type() string {
	if a := p.Argument; a != nil {
		switch {
		case a.ServiceAntiAffinity != nil:
			return TypeServiceAntiAffinity
		case a.LabelPreference != nil:
			return TypeLabelPreference
		}
	}
	return p.Name
}

// SymmetricWeight is HardPodAffinitySymmetricWeight with its default.
func (p *Policy) SymmetricWeight() int64 {
	if p.HardPodAffinitySymmetricWeight == nil {
		return DefaultHardPodAffinitySymmetricWeight
	}
	return int64(*p.HardPodAffinitySymmetricWeight)
}

// Check is one predicate as the scheduler runs it: composite predicates
// expanded, aliases resolved, duplicates dropped, in run order.
type Check struct {
	// Name is what a failure is reported as: the name in the policy, or
	// the part's name for a composite predicate.
	Name string
	// Type is the predicate type (see Predicate.Type).
	Type     string
	Argument *PredicateArgument
	Rank     int
}

// Checks returns the predicates of a valid policy as the scheduler runs
// them: CheckNodeUnschedulable always (a cordoned node must stay empty
// whatever the policy), GeneralPredicates replaced by its four parts, a
// static predicate listed twice (under an alias or inside
// GeneralPredicates) kept once, the cloud-only ones left out, sorted by
// rank, ties in policy order.
func Checks(p *Policy) []Check {
	seen := map[string]bool{}
	var out []Check
	add := func(name, typ string, arg *PredicateArgument) {
		info, ok := PredicateInfo(typ)
		if !ok || info.NoOp {
			return
		}
		if arg == nil {
			if seen[typ] {
				return
			}
			seen[typ] = true
		}
		out = append(out, Check{Name: name, Type: typ, Argument: arg, Rank: info.Rank})
	}
	add(CheckNodeUnschedulable, CheckNodeUnschedulable, nil)
	for i := range p.Predicates {
		pr := &p.Predicates[i]
		typ := pr.Type()
		if info, ok := PredicateInfo(typ); ok && len(info.Expands) > 0 {
			for _, part := range info.Expands {
				add(part, part, nil)
			}
			continue
		}
		add(pr.Name, typ, pr.Argument)
	}
	slices.SortStableFunc(out, func(a, b Check) int { return a.Rank - b.Rank })
	return out
}

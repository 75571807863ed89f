package policy

import (
	"fmt"
	"strings"
)

// Warnings lists what a valid policy does that its author may not expect.
func Warnings(p *Policy) []string {
	var w []string
	hasPriority := map[string]bool{}
	for i := range p.Priorities {
		hasPriority[p.Priorities[i].Type()] = true
	}
	for i := range p.Predicates {
		pr := &p.Predicates[i]
		info, ok := PredicateInfo(pr.Type())
		if !ok || !info.NoOp {
			continue
		}
		switch info.Type {
		case CheckNodeLabelPresence, CheckServiceAffinity:
			w = append(w, fmt.Sprintf("predicate %s checks nothing without an argument (%s)", pr.Name, configurableNames[info.Type]))
		default:
			w = append(w, fmt.Sprintf("predicate %s is accepted but filters nothing: outpost has no cloud volumes (SPEC SCH-5)", pr.Name))
		}
	}
	if len(p.Predicates) == 0 {
		w = append(w, "no predicates: any node fits any pod (only cordoned nodes are refused)")
	}
	if len(p.Priorities) == 0 {
		w = append(w, "no priorities: every node that fits ties, and one is picked at random")
	}
	if hasPriority[BalancedResourceAllocation] && !hasPriority[LeastRequestedPriority] {
		w = append(w, "BalancedResourceAllocation without LeastRequestedPriority: the OpenShift manual says to use them together")
	}
	if hasPriority[LeastRequestedPriority] && hasPriority[MostRequestedPriority] {
		w = append(w, "LeastRequestedPriority and MostRequestedPriority pull in opposite directions")
	}
	return w
}

// Describe says what a valid policy enables, for `outpost adm scheduler
// policy check FILE`: the predicates in the order they run, with what each
// refuses, then the priorities with their weights, then the warnings.
func Describe(p *Policy) string {
	var b strings.Builder
	checks := Checks(p)
	fmt.Fprintf(&b, "Predicates (%d, in the order they run; a node must pass all):\n", len(checks))
	width := 0
	for _, c := range checks {
		width = max(width, len(c.Name))
	}
	for i := range p.Priorities {
		width = max(width, len(p.Priorities[i].Name))
	}
	for _, c := range checks {
		info, _ := PredicateInfo(c.Type)
		fmt.Fprintf(&b, "  %-*s  %s\n", width, c.Name, describeCheck(c, info))
	}
	var noops []string
	for i := range p.Predicates {
		if info, ok := PredicateInfo(p.Predicates[i].Type()); ok && info.NoOp {
			noops = append(noops, p.Predicates[i].Name)
		}
	}
	if len(noops) > 0 {
		fmt.Fprintf(&b, "  (accepted, filtering nothing: %s)\n", strings.Join(noops, ", "))
	}
	fmt.Fprintf(&b, "Priorities (%d; each scores a node 0-10, times its weight, summed; the highest total wins, ties at random):\n", len(p.Priorities))
	for i := range p.Priorities {
		pr := &p.Priorities[i]
		info, _ := PriorityInfo(pr.Type())
		summary := ""
		if info != nil {
			summary = info.Summary
		}
		switch a := pr.Argument; {
		case a != nil && a.ServiceAntiAffinity != nil:
			summary = fmt.Sprintf("serviceAntiAffinity on %q: %s", a.ServiceAntiAffinity.Label, summary)
		case a != nil && a.LabelPreference != nil:
			summary = fmt.Sprintf("labelPreference %q, presence %v: %s", a.LabelPreference.Label, a.LabelPreference.Presence, summary)
		}
		fmt.Fprintf(&b, "  %-*s  weight %-5d  %s\n", width, pr.Name, pr.Weight, summary)
	}
	if w := p.SymmetricWeight(); w != DefaultHardPodAffinitySymmetricWeight {
		fmt.Fprintf(&b, "hardPodAffinitySymmetricWeight: %d\n", w)
	}
	if p.AlwaysCheckAllPredicates {
		b.WriteString("alwaysCheckAllPredicates: every predicate runs on every node, so a node may count under several reasons\n")
	}
	if ws := Warnings(p); len(ws) > 0 {
		b.WriteString("Warnings:\n")
		for _, w := range ws {
			b.WriteString("  " + w + "\n")
		}
	}
	return b.String()
}

func describeCheck(c Check, info *Info) string {
	if info == nil {
		return ""
	}
	a := c.Argument
	switch {
	case a != nil && a.ServiceAffinity != nil:
		return fmt.Sprintf("serviceAffinity on %s: %s", strings.Join(a.ServiceAffinity.Labels, ", "), info.Summary)
	case a != nil && a.LabelsPresence != nil:
		return fmt.Sprintf("labelsPresence %s, presence %v: %s", strings.Join(a.LabelsPresence.Labels, ", "), a.LabelsPresence.Presence, info.Summary)
	}
	return info.Summary
}

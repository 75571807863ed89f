package policy

// Default is the default policy of seed 000 14.2.4 without the cloud-only
// predicates (SPEC SCH-2, SCH-5). Each call returns a new copy.
func Default() *Policy {
	return &Policy{
		Kind:       Kind,
		APIVersion: Version,
		Predicates: []Predicate{
			{Name: NoVolumeZoneConflict},
			{Name: MatchInterPodAffinity},
			{Name: NoDiskConflict},
			{Name: GeneralPredicates},
			{Name: PodToleratesNodeTaints},
			{Name: CheckNodeMemoryPressure},
			{Name: CheckNodeDiskPressure},
			{Name: "Region", Argument: &PredicateArgument{ServiceAffinity: &ServiceAffinity{Labels: []string{"region"}}}},
		},
		Priorities: []Priority{
			{Name: SelectorSpreadPriority, Weight: 1},
			{Name: InterPodAffinityPriority, Weight: 1},
			{Name: LeastRequestedPriority, Weight: 1},
			{Name: BalancedResourceAllocation, Weight: 1},
			{Name: NodePreferAvoidPodsPriority, Weight: 10000},
			{Name: NodeAffinityPriority, Weight: 1},
			{Name: TaintTolerationPriority, Weight: 1},
			{Name: "Zone", Weight: 2, Argument: &PriorityArgument{ServiceAntiAffinity: &ServiceAntiAffinity{Label: "zone"}}},
		},
	}
}

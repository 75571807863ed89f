package cli

import "slices"

// categories are kubectl's names for groups of resource types, which get,
// describe and delete take where they take a type. "all" is the
// workloads of a namespace, as kubectl's category of that name (which
// also holds jobs, cron jobs and stateful sets, kinds outpost does not
// serve).
var categories = map[string][]string{
	"all": {"pods", "services", "daemonsets", "deployments", "replicasets"},
}

// expandCategories replaces every category in a list of type names by
// its types, keeping the order given; a type named twice is kept once by
// the callers (parseTargets).
func expandCategories(types []string) []string {
	out := make([]string, 0, len(types))
	for _, t := range types {
		if kinds, ok := categories[t]; ok {
			out = append(out, kinds...)
			continue
		}
		out = append(out, t)
	}
	return slices.Clip(out)
}

package store

import "github.com/outpost-edge/outpost/controlplane/api"

// exactField returns the value that sel requires field to equal, if it
// requires one, so that List and Watch can start from an index instead of
// looking at every object.
func exactField(sel api.FieldSelector, field string) (string, bool) {
	for _, r := range sel.Requirements() {
		if r.Field == field && (r.Operator == api.OpEquals || r.Operator == "==") {
			return r.Value, true
		}
	}
	return "", false
}

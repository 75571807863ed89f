package admission

import (
	"fmt"
	"slices"
	"strings"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// label is one key=value term of a node selector string.
type label struct{ key, value string }

// parseNodeSelector reads the "k=v,k2=v2" form of the node-selector
// annotation and of the PodNodeSelector configuration. Blanks around terms
// are ignored; an empty (or blank) string is no selector. Only equality
// terms are allowed: a pod's nodeSelector is a plain map, so "!=", "in"
// or a bare key cannot be merged into it. A key given twice must have the
// same value both times.
func parseNodeSelector(s string) ([]label, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	out := make([]label, 0, strings.Count(s, ",")+1)
	for term := range strings.SplitSeq(s, ",") {
		term = strings.TrimSpace(term)
		if term == "" {
			return nil, fmt.Errorf("empty term in %q: terms are key=value separated by single commas", s)
		}
		k, v, ok := strings.Cut(term, "=")
		if !ok || strings.HasPrefix(v, "=") || strings.HasSuffix(k, "!") {
			return nil, fmt.Errorf("term %q is not key=value", term)
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if msgs := api.IsQualifiedName(k); len(msgs) > 0 {
			return nil, fmt.Errorf("label key %q: %s", k, strings.Join(msgs, "; "))
		}
		if msgs := api.IsValidLabelValue(v); len(msgs) > 0 {
			return nil, fmt.Errorf("label value %q of %q: %s", v, k, strings.Join(msgs, "; "))
		}
		if i := slices.IndexFunc(out, func(l label) bool { return l.key == k }); i >= 0 {
			if out[i].value != v {
				return nil, fmt.Errorf("label key %q given twice, as %q and %q", k, out[i].value, v)
			}
			continue
		}
		out = append(out, label{k, v})
	}
	return out, nil
}

// labelMap turns parsed terms into a map; nil for none.
func labelMap(ls []label) map[string]string {
	if len(ls) == 0 {
		return nil
	}
	m := make(map[string]string, len(ls))
	for _, l := range ls {
		m[l.key] = l.value
	}
	return m
}

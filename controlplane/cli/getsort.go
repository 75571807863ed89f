package cli

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// sortKey is what a --sort-by path reaches in one object: its first
// value, or nothing.
type sortKey struct {
	v     any
	found bool
}

// sortKeyOf evaluates path on one decoded object.
func sortKeyOf(path *jpPath, doc any) sortKey {
	vals := path.eval(doc, doc)
	if len(vals) == 0 || vals[0] == nil {
		return sortKey{}
	}
	return sortKey{v: vals[0], found: true}
}

// compareSortKeys orders as kubectl's --sort-by: objects without the
// field first, numbers by value, strings lexically; values of different
// types by type (numbers, strings, booleans, the rest), then by text.
func compareSortKeys(a, b sortKey) int {
	switch {
	case !a.found || !b.found:
		return cmp.Compare(boolRank(a.found), boolRank(b.found))
	}
	if c, ok := compareValues(a.v, b.v); ok {
		return c
	}
	if c := cmp.Compare(typeRank(a.v), typeRank(b.v)); c != 0 {
		return c
	}
	return strings.Compare(formatValue(a.v), formatValue(b.v))
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

func typeRank(v any) int {
	switch v.(type) {
	case json.Number:
		return 0
	case string:
		return 1
	case bool:
		return 2
	}
	return 3
}

// sortOrder returns the indexes of keys in --sort-by order (stable, so
// equal keys keep the server's order) and whether any key was found.
func sortOrder(keys []sortKey) ([]int, bool) {
	idx := make([]int, len(keys))
	found := false
	for i := range idx {
		idx[i] = i
		found = found || keys[i].found
	}
	slices.SortStableFunc(idx, func(a, b int) int { return compareSortKeys(keys[a], keys[b]) })
	return idx, found
}

func permute[T any](s []T, idx []int) {
	out := make([]T, len(s))
	for i, j := range idx {
		out[i] = s[j]
	}
	copy(s, out)
}

// sortRaws sorts raw objects by path. found is false when the path
// reached nothing in any of them (a misspelt path, most likely).
func sortRaws(path *jpPath, raws []json.RawMessage) (found bool, err error) {
	keys := make([]sortKey, len(raws))
	for i, raw := range raws {
		doc, err := decodeDocument(raw)
		if err != nil {
			return false, err
		}
		keys[i] = sortKeyOf(path, doc)
	}
	idx, found := sortOrder(keys)
	permute(raws, idx)
	return found, nil
}

// sortObjects sorts decoded objects by path, as sortRaws.
func sortObjects(path *jpPath, objs []api.Object) error {
	keys := make([]sortKey, len(objs))
	for i, obj := range objs {
		b, err := json.Marshal(obj)
		if err != nil {
			return fmt.Errorf("encode for --sort-by: %w", err)
		}
		doc, err := decodeDocument(b)
		if err != nil {
			return err
		}
		keys[i] = sortKeyOf(path, doc)
	}
	idx, _ := sortOrder(keys)
	permute(objs, idx)
	return nil
}

// sortFetched sorts each type's objects by --sort-by, and refuses a path
// that reaches nothing in any object, as kubectl does.
func sortFetched(g *getOptions, results []fetched) error {
	if g.sortPath == nil {
		return nil
	}
	anyFound, total := false, 0
	for _, f := range results {
		found, err := sortRaws(g.sortPath, f.raws)
		if err != nil {
			return err
		}
		anyFound = anyFound || found
		total += len(f.raws)
	}
	if total > 0 && !anyFound {
		return fmt.Errorf("couldn't find any field with path %q in the list of objects", g.sortBy)
	}
	return nil
}

package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"reflect"
	"slices"

	"github.com/spf13/cobra"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
)

// LastAppliedAnnotation holds the manifest apply last wrote, so that the
// next apply can tell a field the user removed (delete it) from one the
// server or a controller added (keep it).
const LastAppliedAnnotation = "outpost.io/last-applied-configuration"

// applyAttempts bounds the read-merge-write loop when other writers keep
// changing the object between our read and our write.
const applyAttempts = 5

// Results of apply for one object.
const (
	resultCreated    = "created"
	resultConfigured = "configured"
	resultUnchanged  = "unchanged"
)

func newApplyCommand(o *options) *cobra.Command {
	var ff fileFlags
	cmd := &cobra.Command{
		Use:   "apply -f FILE|DIR|-",
		Short: "Create or update objects from manifests, idempotently",
		Long: "apply creates the objects of the manifests that do not exist and brings the others in line\n" +
			"with the manifest: labels, annotations, spec and the other fields the manifest sets; status and\n" +
			"fields set by the server are kept. Objects already as the manifest says are not written.",
		Example: `  outpost apply -f web.yaml
  outpost apply -f manifests/ -R
  cat web.yaml | outpost apply -f -`,
		Args: exactArgs(0, "no arguments; name the manifests with -f"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runManifests(cmd, o, ff, "apply", func(ctx context.Context, cl *client.Client, m *manifest) (string, error) {
				res, err := applyManifest(ctx, cl, m, o.namespace)
				if err != nil {
					return "", fmt.Errorf("error when applying %s from %q: %w", m.ref(), m.source, err)
				}
				return m.ref() + " " + res, nil
			})
		},
	}
	addFileFlags(cmd, &ff, "the manifests to apply")
	return cmd
}

func addFileFlags(cmd *cobra.Command, ff *fileFlags, what string) {
	cmd.Flags().StringArrayVarP(&ff.files, "filename", "f", nil, what+": files, directories, or - for stdin (repeatable)")
	cmd.Flags().BoolVarP(&ff.recursive, "recursive", "R", false, "descend into subdirectories of directories given with -f")
}

// runManifests is the body of the -f verbs: it reads the manifests, runs
// each on every one read and prints the line each returns, and goes on
// past a bad file or a failed object so that one mistake does not hide
// the others; any failure makes the exit status non-zero.
func runManifests(cmd *cobra.Command, o *options, ff fileFlags, verb string, each func(ctx context.Context, cl *client.Client, m *manifest) (string, error)) error {
	if len(ff.files) == 0 {
		return usagef("must specify one of -f")
	}
	ms, errs, err := readObjects(ff, cmd.InOrStdin(), verb)
	if err != nil {
		return err
	}
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	for _, err := range errs {
		fmt.Fprintln(stderr, FormatError(err))
	}
	failed := len(errs) > 0
	if len(ms) == 0 {
		return errReported
	}
	cl, err := o.client(cmd)
	if err != nil {
		return err
	}
	for i := range ms {
		line, err := each(cmd.Context(), cl, &ms[i])
		if err != nil {
			fmt.Fprintln(stderr, FormatError(err))
			failed = true
			continue
		}
		fmt.Fprintln(stdout, line)
	}
	if failed {
		return errReported
	}
	return nil
}

// applyManifest creates m's object or updates it to match m, retrying when
// another writer got in between our read and our write.
func applyManifest(ctx context.Context, cl *client.Client, m *manifest, flagNS string) (string, error) {
	if m.name == "" {
		return "", fmt.Errorf("apply needs metadata.name (metadata.generateName is only for create)")
	}
	ns, err := namespaceFor(m, flagNS, cl.Namespace())
	if err != nil {
		return "", err
	}
	last, err := lastApplied(m.obj)
	if err != nil {
		return "", err
	}
	keptOfManifest := deepCopy(m.obj).(map[string]any)
	api.DropUnstored(m.r, keptOfManifest)
	path := client.PathFor(m.r, ns, m.name, "")
	for range applyAttempts {
		data, _, err := cl.Do(ctx, http.MethodGet, path, url.Values{"consistent": {"true"}}, nil)
		if api.IsNotFound(err) {
			body, err := json.Marshal(forCreate(m.obj, ns, last))
			if err != nil {
				return "", fmt.Errorf("encode %s: %w", m.ref(), err)
			}
			_, _, err = cl.Do(ctx, http.MethodPost, client.PathFor(m.r, ns, "", ""), nil, body)
			if api.IsAlreadyExists(err) {
				continue // created by someone else since our read: update it
			}
			if err != nil {
				return "", err
			}
			return resultCreated, nil
		}
		if err != nil {
			return "", err
		}
		stored, err := decodeJSONMap(data)
		if err != nil {
			return "", err
		}
		// Unchanged is judged on what the server stores of the manifest
		// (the annotation records no more either); the write sends the
		// manifest whole, so that the server warns of what it drops.
		if reflect.DeepEqual(mergeApply(stored, keptOfManifest, last), stored) {
			return resultUnchanged, nil
		}
		body, err := json.Marshal(mergeApply(stored, m.obj, last))
		if err != nil {
			return "", fmt.Errorf("encode %s: %w", m.ref(), err)
		}
		_, _, err = cl.Do(ctx, http.MethodPut, path, nil, body)
		if api.IsConflict(err) {
			continue
		}
		if err != nil {
			return "", err
		}
		return resultConfigured, nil
	}
	return "", fmt.Errorf("%s kept changing while being applied; gave up after %d attempts", m.ref(), applyAttempts)
}

// lastApplied is the annotation value apply records for a manifest: the
// manifest without status, with only the metadata the user manages, and
// without the Kubernetes-only fields the server accepts but does not
// store (README, "Kubernetes manifests"), so that what is recorded is
// what is stored. Map keys are sorted by encoding/json, so equal
// manifests give equal text.
func lastApplied(obj map[string]any) (string, error) {
	la := make(map[string]any, len(obj))
	for k, v := range obj {
		if k != "status" && k != "metadata" {
			la[k] = deepCopy(v) // DropUnstored changes it
		}
	}
	kind, _ := obj["kind"].(string)
	api.DropUnstored(api.ResourceForKind(kind), la)
	md, _ := obj["metadata"].(map[string]any)
	lmd := map[string]any{}
	for _, k := range []string{"name", "namespace", "labels"} {
		if v, ok := md[k]; ok {
			lmd[k] = v
		}
	}
	if ann, ok := md["annotations"].(map[string]any); ok {
		ann = maps.Clone(ann)
		delete(ann, LastAppliedAnnotation)
		if len(ann) > 0 {
			lmd["annotations"] = ann
		}
	}
	la["metadata"] = lmd
	b, err := json.Marshal(la)
	if err != nil {
		return "", fmt.Errorf("encode %s: %w", LastAppliedAnnotation, err)
	}
	return string(b), nil
}

// forCreate is the body that creates a manifest's object: the manifest
// with its namespace and the last-applied annotation.
func forCreate(obj map[string]any, ns, last string) map[string]any {
	out := maps.Clone(obj)
	md, _ := obj["metadata"].(map[string]any)
	md = maps.Clone(md)
	if md == nil {
		md = map[string]any{}
	}
	if ns != "" {
		md["namespace"] = ns
	}
	ann, _ := md["annotations"].(map[string]any)
	ann = maps.Clone(ann)
	if ann == nil {
		ann = map[string]any{}
	}
	ann[LastAppliedAnnotation] = last
	md["annotations"] = ann
	out["metadata"] = md
	return out
}

// mergeApply computes the object apply writes, a three-way merge of the
// live object, the manifest and the manifest of the previous apply (read
// from live's annotation):
//   - every field the manifest sets gets the manifest's value, whatever
//     the live object holds, so that apply undoes changes made on the
//     server since (edit, label, a controller's write);
//   - a field the previous apply set that the manifest no longer has is
//     removed;
//   - a field neither sets (status, uid, resourceVersion, values the
//     server defaulted, fields admission or controllers added) is kept.
//
// lastJSON is this apply's manifest as recorded in the annotation. The
// result equals live exactly when there is nothing to write.
func mergeApply(live, manifest map[string]any, lastJSON string) map[string]any {
	prev, hasPrev := previousApplied(live)
	out := deepCopy(live).(map[string]any)
	for k, want := range manifest {
		switch k {
		case "apiVersion", "kind", "metadata", "status":
			continue
		}
		pv, pok := lookup(prev, hasPrev, k)
		lv, lok := out[k]
		setOrDelete(out, k)(mergeValue(lv, lok, want, pv, pok, true))
	}
	if hasPrev {
		for k := range prev {
			switch k {
			case "apiVersion", "kind", "metadata", "status":
				continue
			}
			if _, ok := manifest[k]; !ok {
				delete(out, k)
			}
		}
	}
	md, _ := out["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		out["metadata"] = md
	}
	wantMD, _ := manifest["metadata"].(map[string]any)
	prevMD, _ := prev["metadata"].(map[string]any)
	for _, k := range []string{"labels", "annotations"} {
		want, wok := wantMD[k]
		pv, pok := lookup(prevMD, hasPrev && prevMD != nil, k)
		lv, lok := md[k]
		switch {
		case wok:
			// The server never drops a label or an annotation, so one
			// missing from the live object was removed by someone and
			// comes back.
			setOrDelete(md, k)(mergeValue(lv, lok, want, pv, pok, false))
		case pok:
			// Removed from the manifest: drop the keys apply had set.
			if lm, ok := lv.(map[string]any); ok {
				pm, _ := pv.(map[string]any)
				for pk := range pm {
					delete(lm, pk)
				}
			}
		}
	}
	// A copy: the map may be the manifest's own, merged in as it was.
	ann, _ := md["annotations"].(map[string]any)
	ann = maps.Clone(ann)
	if ann == nil {
		ann = map[string]any{}
	}
	ann[LastAppliedAnnotation] = lastJSON
	md["annotations"] = ann
	if l, ok := md["labels"].(map[string]any); ok && len(l) == 0 {
		delete(md, "labels")
	}
	return out
}

// previousApplied reads the last-applied annotation of a live object.
func previousApplied(live map[string]any) (map[string]any, bool) {
	md, _ := live["metadata"].(map[string]any)
	ann, _ := md["annotations"].(map[string]any)
	s, ok := ann[LastAppliedAnnotation].(string)
	if !ok {
		return nil, false
	}
	prev, err := decodeJSONMap([]byte(s))
	if err != nil {
		return nil, false // unreadable: behave as if there were none
	}
	return prev, true
}

func lookup(m map[string]any, ok bool, k string) (any, bool) {
	if !ok || m == nil {
		return nil, false
	}
	v, found := m[k]
	return v, found
}

func setOrDelete(m map[string]any, k string) func(any, bool) {
	return func(v any, ok bool) {
		if ok {
			m[k] = v
		} else {
			delete(m, k)
		}
	}
}

// mergeValue merges one value of the manifest (want) into the live one
// (live, when lok), knowing what the previous apply set there (prev, when
// pok). It returns the value to write and whether the field is to be
// there at all:
//   - null in the manifest removes the field;
//   - a field missing from the live object is set, unless (with
//     dropTolerated) the previous apply set the same value and the server
//     dropped it, as it drops false, 0 and "" of fields it leaves out when
//     empty: writing it again would change nothing but make every apply a
//     write. The cost is that such a field, deleted on the server, is not
//     restored until its value in the manifest changes;
//   - two objects merge key by key, deleting the keys the previous apply
//     set and the manifest no longer has, keeping the others;
//   - lists: see mergeList;
//   - a scalar gets the manifest's value; one that only differs in how
//     it is spelled (1 and "1", as quantities are stored) is left alone.
func mergeValue(live any, lok bool, want, prev any, pok, dropTolerated bool) (any, bool) {
	if want == nil {
		return nil, false
	}
	if !lok {
		if dropTolerated && pok && reflect.DeepEqual(want, prev) {
			return nil, false
		}
		return want, true
	}
	switch w := want.(type) {
	case map[string]any:
		l, ok := live.(map[string]any)
		if !ok {
			return want, true
		}
		p, _ := prev.(map[string]any)
		if !pok {
			p = nil
		}
		out := make(map[string]any, len(l)+len(w))
		maps.Copy(out, l)
		for k, wv := range w {
			pv, pk := lookup(p, p != nil, k)
			lv, lk := l[k]
			setOrDelete(out, k)(mergeValue(lv, lk, wv, pv, pk, dropTolerated))
		}
		for k := range p {
			if _, ok := w[k]; !ok {
				delete(out, k)
			}
		}
		return out, true
	case []any:
		l, ok := live.([]any)
		if !ok {
			return want, true
		}
		p, _ := prev.([]any)
		if !pok {
			p = nil
		}
		return mergeList(l, w, p, dropTolerated), true
	}
	if sameScalar(live, want) {
		return live, true
	}
	return want, true
}

// mergeList merges a list of the manifest into the live one. The
// manifest's list replaces the live list, with its length and order, but
// elements are merged with their live counterparts so that what the
// server defaulted inside them (a container's imagePullPolicy, a port's
// protocol) survives and does not make every apply a write:
//   - when every element of the manifest's list is an object with a
//     distinct "name" (containers, env, volumes), elements pair by name;
//   - otherwise, when both lists have the same length, by position.
//
// A live element the manifest's list does not have is dropped.
func mergeList(live, want, prev []any, dropTolerated bool) []any {
	if names, ok := elementNames(want); ok {
		liveByName := elementsByName(live)
		prevByName := elementsByName(prev)
		out := make([]any, len(want))
		for i, we := range want {
			le, lok := liveByName[names[i]]
			if !lok {
				out[i] = we
				continue
			}
			pe, pok := prevByName[names[i]]
			v, _ := mergeValue(le, true, we, pe, pok, dropTolerated)
			out[i] = v
		}
		return out
	}
	if len(live) != len(want) {
		return want
	}
	usePrev := len(prev) == len(want)
	out := make([]any, len(want))
	for i, we := range want {
		var pe any
		if usePrev {
			pe = prev[i]
		}
		v, ok := mergeValue(live[i], true, we, pe, usePrev, dropTolerated)
		if !ok {
			return want // a null element: nothing to merge into
		}
		out[i] = v
	}
	return out
}

// elementNames returns the "name" of every element of list when all are
// objects with distinct string names, and reports whether they are.
func elementNames(list []any) ([]string, bool) {
	if len(list) == 0 {
		return nil, false
	}
	names := make([]string, len(list))
	for i, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			return nil, false
		}
		n, ok := m["name"].(string)
		if !ok || n == "" || slices.Contains(names[:i], n) {
			return nil, false
		}
		names[i] = n
	}
	return names, true
}

// elementsByName indexes the named objects of a list; the first of a
// name wins.
func elementsByName(list []any) map[string]any {
	out := make(map[string]any, len(list))
	for _, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			continue
		}
		if n, ok := m["name"].(string); ok {
			if _, dup := out[n]; !dup {
				out[n] = m
			}
		}
	}
	return out
}

// sameScalar reports whether two decoded JSON scalars are the same value,
// allowing for spelling: a number and a string of the same text (the
// server stores the quantity 1 as "1"), or two spellings of one number.
func sameScalar(a, b any) bool {
	switch x := a.(type) {
	case string:
		switch y := b.(type) {
		case string:
			return x == y
		case json.Number:
			return x == y.String()
		}
	case json.Number:
		switch y := b.(type) {
		case string:
			return x.String() == y
		case json.Number:
			if x == y {
				return true
			}
			fx, errx := x.Float64()
			fy, erry := y.Float64()
			return errx == nil && erry == nil && fx == fy
		}
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	}
	return false
}

// deepCopy copies decoded JSON so that merging never changes the stored
// object it is compared with.
func deepCopy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = deepCopy(e)
		}
		return out
	}
	return v
}

package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"reflect"

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
			if len(ff.files) == 0 {
				return usagef("must specify one of -f")
			}
			cl, err := o.client(cmd)
			if err != nil {
				return err
			}
			ms, errs := readManifests(ff, cmd.InOrStdin())
			stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
			for _, err := range errs {
				fmt.Fprintln(stderr, FormatError(err))
			}
			failed := len(errs) > 0
			for i := range ms {
				m := &ms[i]
				res, err := applyManifest(cmd.Context(), cl, m, o.namespace)
				if err != nil {
					fmt.Fprintln(stderr, FormatError(fmt.Errorf("error when applying %s from %q: %w", m.ref(), m.source, err)))
					failed = true
					continue
				}
				fmt.Fprintf(stdout, "%s %s\n", m.ref(), res)
			}
			if failed {
				return errReported
			}
			return nil
		},
	}
	addFileFlags(cmd, &ff, "the manifests to apply")
	return cmd
}

func addFileFlags(cmd *cobra.Command, ff *fileFlags, what string) {
	cmd.Flags().StringArrayVarP(&ff.files, "filename", "f", nil, what+": files, directories, or - for stdin (repeatable)")
	cmd.Flags().BoolVarP(&ff.recursive, "recursive", "R", false, "descend into subdirectories of directories given with -f")
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
		desired := mergeApply(stored, m.obj, last)
		if reflect.DeepEqual(desired, stored) {
			return resultUnchanged, nil
		}
		body, err := json.Marshal(desired)
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
// manifest without status and with only the metadata the user manages.
// Map keys are sorted by encoding/json, so equal manifests give equal text.
func lastApplied(obj map[string]any) (string, error) {
	la := make(map[string]any, len(obj))
	for k, v := range obj {
		if k != "status" && k != "metadata" {
			la[k] = v
		}
	}
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

// mergeApply computes the object apply writes: the stored object with the
// manifest's fields laid over it. The server's fields (status, uid,
// resourceVersion, ...) are kept, and so is anything the manifest does
// not set and did not set last time, such as values the server defaulted
// or an admission plugin added. lastJSON is the manifest of this apply as
// recorded in the annotation; the previous one is read from stored.
func mergeApply(stored, manifest map[string]any, lastJSON string) map[string]any {
	prev, hasPrev := previousApplied(stored)
	out := deepCopy(stored).(map[string]any)
	for k, want := range manifest {
		switch k {
		case "apiVersion", "kind", "metadata", "status":
			continue
		}
		pv, pok := lookup(prev, hasPrev, k)
		sv, sok := out[k]
		setOrDelete(out, k)(mergeValue(sv, sok, want, pv, pok))
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
		sv, sok := md[k]
		switch {
		case wok:
			setOrDelete(md, k)(mergeValue(sv, sok, want, pv, pok))
		case pok:
			// Removed from the manifest: drop the keys apply had set.
			if sm, ok := sv.(map[string]any); ok {
				pm, _ := pv.(map[string]any)
				for pk := range pm {
					delete(sm, pk)
				}
			}
		}
	}
	ann, _ := md["annotations"].(map[string]any)
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

// previousApplied reads the last-applied annotation of a stored object.
func previousApplied(stored map[string]any) (map[string]any, bool) {
	md, _ := stored["metadata"].(map[string]any)
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

// mergeValue merges one value of the manifest (want) into the stored one,
// knowing what the previous apply set there (prev, when pok):
//   - want unchanged since the previous apply: keep what is stored, which
//     may hold defaults, or nothing if the server drops the field;
//   - both objects: merge key by key, deleting the keys the previous apply
//     set and the manifest no longer has;
//   - both lists of the same length: merge element by element, so that
//     defaults inside list elements (containers, ports) survive;
//   - otherwise the manifest's value wins; null removes the field.
func mergeValue(stored any, sok bool, want any, prev any, pok bool) (any, bool) {
	if want == nil {
		return nil, false
	}
	if pok && reflect.DeepEqual(want, prev) {
		if !sok {
			return nil, false
		}
		return stored, true
	}
	if !sok {
		return want, true
	}
	switch w := want.(type) {
	case map[string]any:
		s, ok := stored.(map[string]any)
		if !ok {
			return want, true
		}
		p, _ := prev.(map[string]any)
		if !pok {
			p = nil
		}
		out := make(map[string]any, len(s)+len(w))
		maps.Copy(out, s)
		for k, wv := range w {
			pv, pk := lookup(p, p != nil, k)
			sv, sk := s[k]
			setOrDelete(out, k)(mergeValue(sv, sk, wv, pv, pk))
		}
		for k := range p {
			if _, ok := w[k]; !ok {
				delete(out, k)
			}
		}
		return out, true
	case []any:
		s, ok := stored.([]any)
		if !ok || len(s) != len(w) {
			return want, true
		}
		p, _ := prev.([]any)
		usePrev := pok && len(p) == len(w)
		out := make([]any, len(w))
		for i := range w {
			var pv any
			if usePrev {
				pv = p[i]
			}
			v, ok := mergeValue(s[i], true, w[i], pv, usePrev)
			if !ok {
				return want, true // a null element: nothing to merge into
			}
			out[i] = v
		}
		return out, true
	}
	return want, true
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

package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// errBadPatch is a patch that is not of its type's form or does not
// apply to the object.
var errBadPatch = errors.New("invalid patch")

// newPatchCommand is kubectl's patch. outpost's API has no PATCH verb (the
// server answers 405), so the patch is applied here, to the object as
// read, and written back with its resourceVersion as a precondition:
// a write in between makes the server answer Conflict, and the patch is
// applied again to the newer object (updateRaw). The result is what the
// server would compute, without a new verb on every server of a cluster
// being upgraded one by one.
func newPatchCommand(o *options) *cobra.Command {
	var (
		patch, patchFile, typ string
	)
	cmd := &cobra.Command{
		Use:   "patch (TYPE NAME | TYPE/NAME) -p PATCH [--type strategic|merge|json]",
		Short: "Change fields of an object with a merge patch or a JSON patch",
		Long: "patch changes one object. --type merge is a JSON merge patch (RFC 7386): objects merge,\n" +
			"null removes a field, anything else replaces it, lists as a whole. --type json is a JSON\n" +
			"patch (RFC 6902): a list of add, remove, replace, move, copy and test operations.\n" +
			"--type strategic (the default, as in kubectl) is a merge patch in which lists of objects\n" +
			"that all have a name (containers, env, volumes, ...) merge by name, and an element\n" +
			"{\"name\": N, \"$patch\": \"delete\"} removes N; other strategic directives are refused.\n" +
			"The patch may be JSON or YAML. A patch that sets metadata.resourceVersion is a\n" +
			"precondition: it fails with Conflict unless the object still has that version.",
		Example: `  outpost patch deployment web -p '{"spec":{"replicas":3}}'
  outpost patch node edge-1 --type merge -p '{"metadata":{"labels":{"zone":null}}}'
  outpost patch deploy/web --type json -p '[{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"web:2"}]'
  outpost patch deploy/web -p '{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"web:2"}]}}}}'`,
		Args: minArgs(1, "the object to patch, e.g. `outpost patch deployment web -p PATCH`"),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, name, err := oneObject(args, "patch")
			if err != nil {
				return err
			}
			doc, err := readPatch(patch, patchFile)
			if err != nil {
				return err
			}
			apply, err := patcherFor(typ, doc)
			if err != nil {
				return err
			}
			cl, err := o.client(cmd)
			if err != nil {
				return err
			}
			ns := ""
			if r.Namespaced {
				ns = cl.Namespace()
			}
			_, wrote, err := updateRaw(cmd.Context(), cl, r, ns, name, func(obj map[string]any) (bool, error) {
				before, err := json.Marshal(obj)
				if err != nil {
					return false, fmt.Errorf("encode %s: %w", refName(r, name), err)
				}
				rv := nestedMap(obj, "metadata")["resourceVersion"]
				patched, err := apply(obj)
				if err != nil {
					return false, err
				}
				pm, ok := patched.(map[string]any)
				if !ok {
					return false, fmt.Errorf("%w: the patched %s is not an object", errBadPatch, refName(r, name))
				}
				switch want := nestedMap(pm, "metadata")["resourceVersion"]; {
				case want == nil && rv != nil:
					// Removed by the patch: the write stays conditional.
					childMap(pm, "metadata")["resourceVersion"] = rv
				case want != rv:
					return false, api.NewConflict(r, name, "the object has been modified; please apply your changes to the latest version and try again")
				}
				after, err := json.Marshal(pm)
				if err != nil {
					return false, fmt.Errorf("encode %s: %w", refName(r, name), err)
				}
				if bytes.Equal(before, after) {
					return false, nil
				}
				// updateRaw writes obj: make it the patched object (a
				// merge patch changed obj itself; a JSON patch may have
				// replaced it).
				pm = maps.Clone(pm)
				clear(obj)
				maps.Copy(obj, pm)
				return true, nil
			})
			if err != nil {
				return err
			}
			if wrote {
				fmt.Fprintf(cmd.OutOrStdout(), "%s patched\n", refName(r, name))
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "%s patched (no change)\n", refName(r, name))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&patch, "patch", "p", "", "the patch, JSON or YAML")
	f.StringVar(&patchFile, "patch-file", "", "a file holding the patch")
	f.StringVar(&typ, "type", "strategic", "the kind of patch: strategic, merge (RFC 7386) or json (RFC 6902)")
	return cmd
}

// readPatch returns the patch of -p or --patch-file as decoded JSON
// (YAML is read as its JSON).
func readPatch(patch, file string) (any, error) {
	switch {
	case patch != "" && file != "":
		return nil, usagef("give the patch with -p or --patch-file, not both")
	case file != "":
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("read the patch: %w", err)
		}
		patch = string(data)
	case patch == "":
		return nil, usagef("a patch is required: -p PATCH or --patch-file FILE")
	}
	data, err := yaml.YAMLToJSON([]byte(patch))
	if err != nil {
		return nil, fmt.Errorf("%w: not JSON or YAML: %w", errBadPatch, err)
	}
	return decodeDocument(data)
}

// patcherFor checks doc is a patch of typ and returns what applies it.
func patcherFor(typ string, doc any) (func(obj any) (any, error), error) {
	switch typ {
	case "merge", "strategic":
		if _, ok := doc.(map[string]any); !ok {
			return nil, fmt.Errorf("%w: a %s patch is a JSON object", errBadPatch, typ)
		}
		strategic := typ == "strategic"
		if strategic {
			if err := checkStrategic(doc, ""); err != nil {
				return nil, err
			}
		}
		return func(obj any) (any, error) { return mergePatch(obj, doc, strategic), nil }, nil
	case "json":
		ops, err := parseJSONPatch(doc)
		if err != nil {
			return nil, err
		}
		return func(obj any) (any, error) { return applyJSONPatch(obj, ops) }, nil
	}
	return nil, usagef("--type must be strategic, merge or json, not %q", typ)
}

// checkStrategic refuses the strategic merge patch directives this
// client does not apply, rather than storing them as fields: all but
// "$patch": "delete" in an element of a list.
func checkStrategic(v any, path string) error {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			if strings.HasPrefix(k, "$") && !(k == "$patch" && e == "delete" && strings.HasSuffix(path, "[]")) {
				return fmt.Errorf("%w: the strategic merge directive %s at %s is not supported; use --type json", errBadPatch, k, strings.TrimPrefix(path+"."+k, "."))
			}
			if err := checkStrategic(e, path+"."+k); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range t {
			if err := checkStrategic(e, path+"[]"); err != nil {
				return err
			}
		}
	}
	return nil
}

// mergePatch applies patch to target as RFC 7386 says, returning the
// result (target's maps are changed in place). strategic: lists of
// named objects merge by name (see namedList).
func mergePatch(target, patch any, strategic bool) any {
	switch p := patch.(type) {
	case map[string]any:
		t, ok := target.(map[string]any)
		if !ok {
			t = map[string]any{}
		}
		for k, v := range p {
			if v == nil {
				delete(t, k)
				continue
			}
			t[k] = mergePatch(t[k], v, strategic)
		}
		return t
	case []any:
		if strategic {
			if tl, ok := target.([]any); ok && namedList(tl) && namedList(p) {
				return mergeByName(tl, p)
			}
		}
		// Lists are replaced; a strategic patch's delete markers have
		// nothing to delete in a list being replaced.
		out := make([]any, 0, len(p))
		for _, e := range p {
			if m, ok := e.(map[string]any); ok && m["$patch"] == "delete" {
				continue
			}
			out = append(out, mergePatch(nil, e, strategic))
		}
		return out
	}
	return patch
}

// namedList reports whether every element of l is an object with a
// string name: the lists a strategic merge patch merges by name.
func namedList(l []any) bool {
	for _, e := range l {
		m, ok := e.(map[string]any)
		if !ok {
			return false
		}
		if _, ok := m["name"].(string); !ok {
			return false
		}
	}
	return len(l) > 0
}

// mergeByName merges each element of patch into target's element of the
// same name (or appends it), keeping target's order; an element with
// "$patch": "delete" removes its name.
func mergeByName(target, patch []any) []any {
	for _, pe := range patch {
		pm := pe.(map[string]any)
		name := pm["name"]
		i := -1
		for j, te := range target {
			if te.(map[string]any)["name"] == name {
				i = j
				break
			}
		}
		if pm["$patch"] == "delete" {
			if i >= 0 {
				target = append(target[:i], target[i+1:]...)
			}
			continue
		}
		if i >= 0 {
			target[i] = mergePatch(target[i], pm, true)
		} else {
			target = append(target, mergePatch(nil, pm, true))
		}
	}
	return target
}

// jsonPatchOp is one operation of an RFC 6902 patch.
type jsonPatchOp struct {
	op, path, from string
	value          any
	hasValue       bool
}

// parseJSONPatch checks doc is an RFC 6902 patch, listing every problem.
func parseJSONPatch(doc any) ([]jsonPatchOp, error) {
	list, ok := doc.([]any)
	if !ok {
		return nil, fmt.Errorf("%w: a json patch is a list of operations", errBadPatch)
	}
	var ops []jsonPatchOp
	var problems []string
	for i, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			problems = append(problems, fmt.Sprintf("[%d]: not an object", i))
			continue
		}
		var op jsonPatchOp
		op.op, _ = m["op"].(string)
		op.path, ok = m["path"].(string)
		if !ok {
			problems = append(problems, fmt.Sprintf("[%d].path: required", i))
		}
		op.value, op.hasValue = m["value"]
		op.from, _ = m["from"].(string)
		switch op.op {
		case "add", "replace", "test":
			if !op.hasValue {
				problems = append(problems, fmt.Sprintf("[%d].value: required by %s", i, op.op))
			}
		case "move", "copy":
			if _, ok := m["from"].(string); !ok {
				problems = append(problems, fmt.Sprintf("[%d].from: required by %s", i, op.op))
			}
		case "remove":
		default:
			problems = append(problems, fmt.Sprintf("[%d].op: must be add, remove, replace, move, copy or test, not %q", i, op.op))
		}
		ops = append(ops, op)
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%w: %s", errBadPatch, strings.Join(problems, "; "))
	}
	return ops, nil
}

// applyJSONPatch applies ops in order; any failing operation fails the
// whole patch, as RFC 6902 section 5 says.
func applyJSONPatch(doc any, ops []jsonPatchOp) (any, error) {
	var err error
	for i, op := range ops {
		switch op.op {
		case "add":
			doc, err = pointerAdd(doc, op.path, deepCopy(op.value))
		case "remove":
			doc, _, err = pointerRemove(doc, op.path)
		case "replace":
			if doc, _, err = pointerRemove(doc, op.path); err == nil {
				doc, err = pointerAdd(doc, op.path, deepCopy(op.value))
			}
		case "move":
			var v any
			if strings.HasPrefix(op.path+"/", op.from+"/") && op.path != op.from {
				err = fmt.Errorf("cannot move %s into itself", op.from)
			} else if doc, v, err = pointerRemove(doc, op.from); err == nil {
				doc, err = pointerAdd(doc, op.path, v)
			}
		case "copy":
			var v any
			if v, err = pointerGet(doc, op.from); err == nil {
				doc, err = pointerAdd(doc, op.path, deepCopy(v))
			}
		case "test":
			var v any
			if v, err = pointerGet(doc, op.path); err == nil && !jsonEqual(v, op.value) {
				err = fmt.Errorf("test failed: %s is not the value given", op.path)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("%w: operation %d (%s %s): %w", errBadPatch, i, op.op, op.path, err)
		}
	}
	return doc, nil
}

// splitPointer splits an RFC 6901 pointer into its unescaped tokens.
func splitPointer(p string) ([]string, error) {
	if p == "" {
		return nil, nil
	}
	if !strings.HasPrefix(p, "/") {
		return nil, fmt.Errorf("the path %q does not start with /", p)
	}
	toks := strings.Split(p[1:], "/")
	for i, t := range toks {
		toks[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return toks, nil
}

// listIndex reads a token as an index of a list of n elements; end
// allows n itself (and "-") for add.
func listIndex(tok string, n int, end bool) (int, error) {
	if tok == "-" && end {
		return n, nil
	}
	i, err := strconv.Atoi(tok)
	if err != nil || i < 0 || (tok != "0" && strings.HasPrefix(tok, "0")) || i > n || (i == n && !end) {
		return 0, fmt.Errorf("index %q is out of range", tok)
	}
	return i, nil
}

func pointerGet(doc any, path string) (any, error) {
	toks, err := splitPointer(path)
	if err != nil {
		return nil, err
	}
	cur := doc
	for _, t := range toks {
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[t]
			if !ok {
				return nil, fmt.Errorf("%s does not exist", path)
			}
			cur = v
		case []any:
			i, err := listIndex(t, len(c), false)
			if err != nil {
				return nil, err
			}
			cur = c[i]
		default:
			return nil, fmt.Errorf("%s does not exist", path)
		}
	}
	return cur, nil
}

// pointerParent splits path into its parent's value and the last token.
func pointerParent(doc any, path string) (any, string, error) {
	toks, err := splitPointer(path)
	if err != nil {
		return nil, "", err
	}
	if len(toks) == 0 {
		return nil, "", nil
	}
	parentPath := path[:strings.LastIndexByte(path, '/')]
	parent, err := pointerGet(doc, parentPath)
	return parent, toks[len(toks)-1], err
}

// pointerAdd adds v at path (into a list: before the index, or at its
// end for "-") and returns the new document.
func pointerAdd(doc any, path string, v any) (any, error) {
	return pointerSet(doc, path, v, true)
}

// pointerSet sets the value at path; insert: into a list, as add does,
// else replacing an element. A list that grows or shrinks is a new
// slice, so its parent is set again.
func pointerSet(doc any, path string, v any, insert bool) (any, error) {
	if path == "" {
		return v, nil
	}
	parent, last, err := pointerParent(doc, path)
	if err != nil {
		return nil, err
	}
	switch p := parent.(type) {
	case map[string]any:
		p[last] = v
		return doc, nil
	case []any:
		i, err := listIndex(last, len(p), insert)
		if err != nil {
			return nil, err
		}
		if !insert {
			p[i] = v
			return doc, nil
		}
		grown := make([]any, 0, len(p)+1)
		grown = append(append(append(grown, p[:i]...), v), p[i:]...)
		return pointerSet(doc, path[:strings.LastIndexByte(path, '/')], grown, false)
	}
	return nil, fmt.Errorf("the parent of %s is not an object or a list", path)
}

// pointerRemove removes the value at path, returning the new document
// and the value.
func pointerRemove(doc any, path string) (any, any, error) {
	if path == "" {
		return nil, nil, errors.New("cannot remove the whole object")
	}
	parent, last, err := pointerParent(doc, path)
	if err != nil {
		return nil, nil, err
	}
	switch p := parent.(type) {
	case map[string]any:
		v, ok := p[last]
		if !ok {
			return nil, nil, fmt.Errorf("%s does not exist", path)
		}
		delete(p, last)
		return doc, v, nil
	case []any:
		i, err := listIndex(last, len(p), false)
		if err != nil {
			return nil, nil, err
		}
		v := p[i]
		shrunk := append(append(make([]any, 0, len(p)-1), p[:i]...), p[i+1:]...)
		doc, err = pointerSet(doc, path[:strings.LastIndexByte(path, '/')], shrunk, false)
		return doc, v, err
	}
	return nil, nil, fmt.Errorf("the parent of %s is not an object or a list", path)
}

// jsonEqual compares decoded JSON values, numbers by value (1 and 1.0
// are equal, as RFC 6902's test says).
func jsonEqual(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !jsonEqual(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !jsonEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case json.Number:
		y, ok := b.(json.Number)
		return ok && sameScalar(x, y)
	}
	return a == b
}

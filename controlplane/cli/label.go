package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
)

// metaKind is what label and annotate differ in.
type metaKind struct {
	verb  string // "label"
	field string // "labels", under metadata
	noun  string // "label"
	past  string // "labeled"
	undo  string // "unlabeled": only removals happened
}

var (
	labelKind      = metaKind{verb: "label", field: "labels", noun: "label", past: "labeled", undo: "unlabeled"}
	annotationKind = metaKind{verb: "annotate", field: "annotations", noun: "annotation", past: "annotated", undo: "unannotated"}
)

// metaChange is the parsed update: keys to set and keys to remove.
type metaChange struct {
	set    map[string]string
	order  []string // set keys in command-line order, for messages
	remove []string
}

func newLabelCommand(o *options, k metaKind) *cobra.Command {
	var (
		overwrite bool
		selector  string
		all       bool
	)
	cmd := &cobra.Command{
		Use:   k.verb + " TYPE NAME... KEY=VALUE... KEY-... | TYPE -l SELECTOR|--all KEY=VALUE...",
		Short: fmt.Sprintf("Add, change or remove %ss of objects", k.noun),
		Example: fmt.Sprintf(`  outpost %[1]s node edge-1 zone=a
  outpost %[1]s pod/web-1 zone=b --overwrite
  outpost %[1]s pod web-1 zone-
  outpost %[1]s pods -l app=web tier=front
  outpost %[1]s nodes --all rack-`, k.verb),
		Args: minArgs(2, fmt.Sprintf("a resource, a name (or -l/--all) and at least one %s update", k.noun)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if selector != "" && all {
				return usagef("--all and --selector cannot be given together")
			}
			targets, change, err := parseMetaArgs(args, k, selector != "" || all)
			if err != nil {
				return err
			}
			cl, err := o.client(cmd)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
			failed := false
			for _, t := range targets {
				names := t.names
				if len(names) == 0 {
					ns := ""
					if t.r.Namespaced {
						ns = cl.Namespace()
					}
					if names, err = listNames(ctx, cl, t.r, ns, selector); err != nil {
						return err
					}
					if len(names) == 0 {
						fmt.Fprintln(stderr, noResourcesMessage([]fetched{{r: t.r}}, false, ns))
					}
				}
				for _, name := range names {
					changed, err := updateMeta(ctx, cl, t.r, name, k, change, overwrite, stderr)
					if err != nil {
						fmt.Fprintln(stderr, FormatError(err))
						failed = true
						continue
					}
					switch {
					case !changed:
						fmt.Fprintf(stdout, "%s not %s\n", refName(t.r, name), k.past)
					case len(change.order) == 0:
						fmt.Fprintf(stdout, "%s %s\n", refName(t.r, name), k.undo)
					default:
						fmt.Fprintf(stdout, "%s %s\n", refName(t.r, name), k.past)
					}
				}
			}
			if failed {
				return errReported
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&overwrite, "overwrite", false, fmt.Sprintf("allow changing the value of an existing %s", k.noun))
	f.StringVarP(&selector, "selector", "l", "", fmt.Sprintf("%s the objects matching this label selector, in the namespace", k.verb))
	f.BoolVar(&all, "all", false, fmt.Sprintf("%s every object of the type in the namespace", k.verb))
	return cmd
}

// listNames lists the names of r's objects in ns matching a label
// selector ("" for all of them).
func listNames(ctx context.Context, cl *client.Client, r *api.Resource, ns, selector string) ([]string, error) {
	objs, _, err := cl.List(ctx, r, ns, client.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(objs))
	for _, obj := range objs {
		names = append(names, obj.GetObjectMeta().Name)
	}
	return names, nil
}

// isMetaOp reports whether a label/annotate argument is an update
// (KEY=VALUE or KEY-) rather than a name.
func isMetaOp(a string) bool {
	return strings.Contains(a, "=") || strings.HasSuffix(a, "-")
}

// parseMetaArgs reads `TYPE NAME... updates...` or `TYPE/NAME...
// updates...`; with bySelector (-l or --all), `TYPE updates...`.
func parseMetaArgs(args []string, k metaKind, bySelector bool) ([]target, metaChange, error) {
	split := len(args)
	for i, a := range args {
		if i > 0 && isMetaOp(a) {
			split = i
			break
		}
	}
	objArgs, ops := args[:split], args[split:]
	for _, a := range ops {
		if !isMetaOp(a) {
			return nil, metaChange{}, usagef("all resources must be specified before %s changes: %s", k.noun, a)
		}
	}
	if len(ops) == 0 {
		return nil, metaChange{}, usagef("at least one %s update is required", k.noun)
	}
	targets, err := parseTargets(objArgs)
	if err != nil {
		return nil, metaChange{}, err
	}
	for _, t := range targets {
		switch {
		case bySelector && len(t.names) > 0:
			return nil, metaChange{}, usagef("names cannot be combined with -l or --all")
		case !bySelector && len(t.names) == 0:
			return nil, metaChange{}, usagef("one or more resources must be specified as <resource> <name> or <resource>/<name>, or with -l SELECTOR or --all")
		}
	}
	ch := metaChange{set: map[string]string{}}
	for _, a := range ops {
		if key, val, ok := strings.Cut(a, "="); ok {
			if key == "" {
				return nil, metaChange{}, usagef("invalid %s spec: %q: the key is empty", k.noun, a)
			}
			if _, dup := ch.set[key]; !dup {
				ch.order = append(ch.order, key)
			}
			ch.set[key] = val
			continue
		}
		key := strings.TrimSuffix(a, "-")
		if key == "" {
			return nil, metaChange{}, usagef("invalid %s spec: %q: the key is empty", k.noun, a)
		}
		ch.remove = append(ch.remove, key)
	}
	for _, key := range ch.remove {
		if _, ok := ch.set[key]; ok {
			return nil, metaChange{}, usagef("can not both modify and remove the %s %q in the same command", k.noun, key)
		}
	}
	return targets, ch, nil
}

// applyMetaChange updates m (labels or annotations) in place. It refuses
// to change an existing value without overwrite, before changing anything;
// it returns whether m changed and the keys to remove that were absent.
func applyMetaChange(m map[string]any, ch metaChange, overwrite bool, k metaKind) (changed bool, missing []string, err error) {
	if !overwrite {
		for _, key := range ch.order {
			if cur, ok := m[key]; ok && cur != ch.set[key] {
				return false, nil, fmt.Errorf("'%s' already has a value (%v), and --overwrite is false", key, cur)
			}
		}
	}
	for _, key := range ch.order {
		if cur, ok := m[key]; !ok || cur != ch.set[key] {
			m[key] = ch.set[key]
			changed = true
		}
	}
	for _, key := range ch.remove {
		if _, ok := m[key]; !ok {
			missing = append(missing, key)
			continue
		}
		delete(m, key)
		changed = true
	}
	return changed, missing, nil
}

// updateMeta reads the object raw, changes its labels or annotations and
// writes it back with the resourceVersion it read, retrying on conflicts.
// Working on raw JSON keeps fields this build does not know.
func updateMeta(ctx context.Context, cl *client.Client, r *api.Resource, name string, k metaKind, ch metaChange, overwrite bool, stderr io.Writer) (bool, error) {
	path := client.PathFor(r, cl.Namespace(), name, "")
	if !r.Namespaced {
		path = client.PathFor(r, "", name, "")
	}
	for range applyAttempts {
		data, _, err := cl.Do(ctx, http.MethodGet, path, url.Values{"consistent": {"true"}}, nil)
		if err != nil {
			return false, err
		}
		obj, err := decodeJSONMap(data)
		if err != nil {
			return false, err
		}
		md, _ := obj["metadata"].(map[string]any)
		if md == nil {
			md = map[string]any{}
			obj["metadata"] = md
		}
		m, _ := md[k.field].(map[string]any)
		if m == nil {
			m = map[string]any{}
		}
		changed, missing, err := applyMetaChange(m, ch, overwrite, k)
		if err != nil {
			return false, err
		}
		for _, key := range slices.Compact(missing) {
			fmt.Fprintf(stderr, "%s %q not found.\n", k.noun, key)
		}
		if !changed {
			return false, nil
		}
		if len(m) == 0 {
			delete(md, k.field)
		} else {
			md[k.field] = m
		}
		body, err := json.Marshal(obj)
		if err != nil {
			return false, fmt.Errorf("encode %s: %w", refName(r, name), err)
		}
		_, _, err = cl.Do(ctx, http.MethodPut, path, nil, body)
		if api.IsConflict(err) {
			continue
		}
		if err != nil {
			return false, err
		}
		return true, nil
	}
	return false, fmt.Errorf("%s kept changing; gave up after %d attempts", refName(r, name), applyAttempts)
}

package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
)

var nodeResource = api.ResourceForKind("Node")

// taintOp is one taint argument: a taint to add (or change), or one to
// remove. A removal without an effect removes the key with every effect.
type taintOp struct {
	taint  api.Taint
	remove bool
}

// ref is the taint as kubectl names it in messages: "key:Effect", or
// "key" for a removal of every effect.
func (op taintOp) ref() string {
	if op.taint.Effect == "" {
		return op.taint.Key
	}
	return op.taint.Key + ":" + op.taint.Effect
}

// The verbs of taint's result lines.
const (
	taintedVerb   = "tainted"
	untaintedVerb = "untainted"
	modifiedVerb  = "modified"
)

const taintLong = `taint adds, changes and removes taints of nodes. A node repels the pods that do
not tolerate its taints: NoSchedule keeps new pods off, PreferNoSchedule makes the scheduler
avoid the node, NoExecute keeps new pods off and evicts the pods already running there that
do not tolerate it (after their tolerationSeconds, when they give one).

  KEY=VALUE:EFFECT   add a taint (KEY:EFFECT for one without a value)
  KEY:EFFECT-        remove the taint with that key and effect
  KEY-               remove every taint with that key

A key is up to 253 characters: letters, digits, '-', '.' and '_', starting with a letter
or digit, with an optional DNS-subdomain prefix and '/' (example.com/gpu). A value is up
to 63 such characters. The effect is NoSchedule, PreferNoSchedule or NoExecute. Every
argument is checked before any node is changed.

Changing the value of a taint a node already has (same key and effect) needs --overwrite.
Removing a taint a node does not have is an error for that node.`

// newTaintCommand builds `taint`; it is added both under `adm` (as in
// oc) and at the top level (as in kubectl), so it is built twice.
func newTaintCommand(o *options) *cobra.Command {
	var (
		overwrite bool
		selector  string
		all       bool
	)
	cmd := &cobra.Command{
		Use:   "taint nodes NODE... KEY=VALUE:EFFECT... | KEY:EFFECT... | KEY:EFFECT-... | KEY-...",
		Short: "Add, change or remove taints of nodes",
		Long:  taintLong,
		Example: `  # Keep pods that do not tolerate dedicated=db off edge-1
  outpost adm taint nodes edge-1 dedicated=db:NoSchedule

  # Change the value of an existing taint
  outpost adm taint nodes edge-1 dedicated=cache:NoSchedule --overwrite

  # Remove the NoSchedule taint with key dedicated, then every taint with key gpu
  outpost adm taint nodes edge-1 dedicated:NoSchedule-
  outpost adm taint nodes edge-1 gpu-

  # Taint every node of zone a, or every node
  outpost adm taint nodes -l topology.kubernetes.io/zone=a maintenance:PreferNoSchedule
  outpost taint nodes --all example.com/rollout=v2:NoExecute`,
		Args: minArgs(2, "nodes, one or more node names (or -l/--all) and at least one taint"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if selector != "" && all {
				return usagef("--all and --selector cannot be given together")
			}
			names, ops, err := parseTaintArgs(args, selector != "" || all)
			if err != nil {
				return err
			}
			cl, err := o.client(cmd)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
			if names == nil {
				if names, err = listNames(ctx, cl, nodeResource, "", selector); err != nil {
					return err
				}
				if len(names) == 0 {
					fmt.Fprintln(stderr, "No resources found")
					return nil
				}
			}
			failed := false
			for _, name := range names {
				verb, err := taintNode(ctx, cl, name, ops, overwrite)
				if err != nil {
					fmt.Fprintln(stderr, FormatError(err))
					failed = true
					continue
				}
				if verb == "" {
					verb = "not " + taintedVerb
				}
				fmt.Fprintf(stdout, "%s %s\n", refName(nodeResource, name), verb)
			}
			if failed {
				return errReported
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&overwrite, "overwrite", false, "allow changing the value of a taint the node already has (same key and effect)")
	f.StringVarP(&selector, "selector", "l", "", "taint the nodes matching this label selector")
	f.BoolVar(&all, "all", false, "taint every node")
	return cmd
}

// isTaintOp reports whether a taint argument is a taint rather than a
// node name: node names have no ':' or '=' and do not end in '-'.
func isTaintOp(a string) bool {
	return strings.ContainsAny(a, ":=") || strings.HasSuffix(a, "-")
}

// taintFormat says what a taint argument is.
const taintFormat = "want KEY=VALUE:EFFECT or KEY:EFFECT to add, KEY:EFFECT- or KEY- to remove"

// parseTaintArgs reads `nodes NAME... ops...`, `node/NAME... ops...` or,
// with bySelector, `nodes ops...`. It checks every taint before
// returning, so that nothing is changed when any is wrong; names is nil
// when the nodes come from a selector.
func parseTaintArgs(args []string, bySelector bool) (names []string, ops []taintOp, err error) {
	split := len(args)
	for i, a := range args {
		if i > 0 && isTaintOp(a) {
			split = i
			break
		}
	}
	objArgs, specs := args[:split], args[split:]
	for _, a := range specs {
		if !isTaintOp(a) {
			return nil, nil, usagef("all nodes must be specified before the taints: %s", a)
		}
	}
	if len(specs) == 0 {
		// Nothing looks like a taint. The last argument was meant as one
		// unless it is the only node named (`nodes NAME`) or a node/NAME:
		// `nodes n1 foo` is a malformed taint, not two nodes.
		last := args[len(args)-1]
		slashLast := strings.Contains(last, "/")
		if bySelector || (len(args) > 2 && !slashLast) || (strings.Contains(args[0], "/") && !slashLast) {
			return nil, nil, fmt.Errorf("%w %q: %s", errInvalidTaint, last, taintFormat)
		}
		return nil, nil, usagef("at least one taint update is required: %s", taintFormat)
	}
	targets, err := parseTargets(objArgs)
	if err != nil {
		return nil, nil, err
	}
	for _, t := range targets {
		if t.r != nodeResource {
			return nil, nil, usagef("only nodes can be tainted, not %s", t.r.Plural)
		}
		names = append(names, t.names...)
	}
	switch {
	case bySelector && len(names) > 0:
		return nil, nil, usagef("node names cannot be combined with -l or --all")
	case !bySelector && len(names) == 0:
		return nil, nil, usagef("one or more nodes must be specified as `nodes NAME...` or `node/NAME`, or with -l SELECTOR or --all")
	}
	ops, err = parseTaintSpecs(specs)
	return names, ops, err
}

// parseTaintSpecs parses and checks every taint argument against SPEC
// TNT-1 (the API's own rules, so the CLI and the server refuse the same
// taints), then refuses commands that contradict themselves. Every
// problem is reported, each naming the rule it breaks.
func parseTaintSpecs(specs []string) ([]taintOp, error) {
	var (
		ops  []taintOp
		errs []error
	)
	for _, s := range specs {
		op, err := parseTaintSpec(s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ops = append(ops, op)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	for i, a := range ops {
		for _, b := range ops[:i] {
			switch {
			case !a.remove && !b.remove && a.taint.Key == b.taint.Key && a.taint.Effect == b.taint.Effect:
				return nil, usagef("taint %q is given more than once", a.ref())
			case a.remove != b.remove && a.taint.Key == b.taint.Key &&
				(a.taint.Effect == b.taint.Effect || a.remove && a.taint.Effect == "" || b.remove && b.taint.Effect == ""):
				return nil, usagef("taint %q cannot be both added and removed in the same command", a.ref())
			}
		}
	}
	return ops, nil
}

// parseTaintSpec reads KEY=VALUE:EFFECT, KEY:EFFECT, KEY:EFFECT- or KEY-.
// A removal may carry a value (KEY=VALUE:EFFECT-), which is ignored: taints
// are removed by key and effect.
func parseTaintSpec(s string) (taintOp, error) {
	var op taintOp
	body := s
	if strings.HasSuffix(s, "-") {
		op.remove = true
		body = strings.TrimSuffix(s, "-")
	}
	keyValue := body
	if i := strings.LastIndexByte(body, ':'); i >= 0 {
		keyValue, op.taint.Effect = body[:i], body[i+1:]
		if op.remove && op.taint.Effect == "" {
			return op, fmt.Errorf("%w %q: effect: Required value: after ':' comes the effect of the taint to remove", errInvalidTaint, s)
		}
	}
	op.taint.Key, op.taint.Value, _ = strings.Cut(keyValue, "=")
	check := op.taint
	if op.remove && check.Effect == "" {
		// Removing by key alone is allowed; only the key is checked.
		check.Effect = api.TaintEffectNoSchedule
	}
	if fes := api.ValidateTaint(check, nil); len(fes) > 0 {
		msgs := make([]string, len(fes))
		for i, fe := range fes {
			msgs[i] = fe.Error()
		}
		return op, fmt.Errorf("%w %q: %s", errInvalidTaint, s, strings.Join(msgs, "; "))
	}
	return op, nil
}

// taintNode applies ops to one node with a conditional update and returns
// the verb of its result line ("" when nothing changed).
func taintNode(ctx context.Context, cl *client.Client, name string, ops []taintOp, overwrite bool) (string, error) {
	var verb string
	_, _, err := updateRaw(ctx, cl, nodeResource, "", name, func(obj map[string]any) (bool, error) {
		spec := childMap(obj, "spec")
		list, _ := spec["taints"].([]any)
		out, v, err := applyTaintOps(list, ops, overwrite, name)
		verb = v
		if err != nil || v == "" {
			return false, err
		}
		if len(out) == 0 {
			delete(spec, "taints")
		} else {
			spec["taints"] = out
		}
		return true, nil
	})
	return verb, err
}

// taintField reads a string field of a raw taint.
func taintField(t any, k string) string {
	m, _ := t.(map[string]any)
	s, _ := m[k].(string)
	return s
}

// applyTaintOps computes a node's new taint list (raw, so fields this build
// does not know survive). Removals go first, then additions. It refuses,
// before anything is changed, to remove a taint that is not there or to
// change a value without overwrite. The verb is "tainted" when taints were
// only added, "untainted" when only removed, "modified" when both or when
// a value changed, "" when the list stays as it was.
func applyTaintOps(list []any, ops []taintOp, overwrite bool, node string) ([]any, string, error) {
	out := make([]any, 0, len(list)+len(ops))
	out = append(out, list...)
	removed, added, changed := false, false, false
	for _, op := range ops {
		if !op.remove {
			continue
		}
		kept := out[:0]
		found := false
		for _, t := range out {
			if taintField(t, "key") == op.taint.Key && (op.taint.Effect == "" || taintField(t, "effect") == op.taint.Effect) {
				found = true
				continue
			}
			kept = append(kept, t)
		}
		if !found {
			return nil, "", fmt.Errorf("taint %q not found", op.ref())
		}
		out, removed = kept, true
	}
	for _, op := range ops {
		if op.remove {
			continue
		}
		entry := map[string]any{"key": op.taint.Key, "effect": op.taint.Effect}
		if op.taint.Value != "" {
			entry["value"] = op.taint.Value
		}
		i := -1
		for j, t := range out {
			if taintField(t, "key") == op.taint.Key && taintField(t, "effect") == op.taint.Effect {
				i = j
				break
			}
		}
		switch {
		case i < 0:
			out = append(out, entry)
			added = true
		case taintField(out[i], "value") == op.taint.Value:
			// Already there as asked.
		case !overwrite:
			return nil, "", fmt.Errorf("node %s already has taint %q with value %q, and --overwrite is false",
				node, op.ref(), taintField(out[i], "value"))
		default:
			out[i] = entry
			changed = true
		}
	}
	switch {
	case changed || added && removed:
		return out, modifiedVerb, nil
	case added:
		return out, taintedVerb, nil
	case removed:
		return out, untaintedVerb, nil
	}
	return list, "", nil
}

// newCordonCommand builds `cordon` (cordon true) or `uncordon`. Like
// taint it is added under `adm` and at the top level.
func newCordonCommand(o *options, cordon bool) *cobra.Command {
	verb, done, want := "uncordon", "uncordoned", "Mark nodes schedulable again"
	if cordon {
		verb, done, want = "cordon", "cordoned", "Mark nodes unschedulable: no new pods are placed on them"
	}
	var selector string
	cmd := &cobra.Command{
		Use:   verb + " NODE... | -l SELECTOR",
		Short: want,
		Long: want + " (spec.unschedulable).\n" +
			"Pods already running on a cordoned node stay; new pods go elsewhere until it is uncordoned.",
		Example: fmt.Sprintf(`  outpost adm %[1]s edge-1
  outpost adm %[1]s edge-1 edge-2
  outpost adm %[1]s -l topology.kubernetes.io/zone=a
  outpost %[1]s node/edge-1`, verb),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 && selector == "" {
				return usagef("expected one or more node names, or -l SELECTOR")
			}
			if len(args) > 0 && selector != "" {
				return usagef("node names cannot be combined with -l")
			}
			names := make([]string, 0, len(args))
			for _, a := range args {
				name := a
				if typ, n, ok := strings.Cut(a, "/"); ok {
					if r, err := resourceFor(typ); err != nil || r != nodeResource || n == "" {
						return usagef("only nodes can be %s, not %q", done, a)
					}
					name = n
				}
				names = append(names, name)
			}
			cl, err := o.client(cmd)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
			if selector != "" {
				if names, err = listNames(ctx, cl, nodeResource, "", selector); err != nil {
					return err
				}
				if len(names) == 0 {
					fmt.Fprintln(stderr, "No resources found")
					return nil
				}
			}
			failed := false
			for _, name := range names {
				_, wrote, err := updateRaw(ctx, cl, nodeResource, "", name, func(obj map[string]any) (bool, error) {
					spec := childMap(obj, "spec")
					if cur, _ := spec["unschedulable"].(bool); cur == cordon {
						return false, nil
					}
					if cordon {
						spec["unschedulable"] = true
					} else {
						delete(spec, "unschedulable")
					}
					return true, nil
				})
				if err != nil {
					fmt.Fprintln(stderr, FormatError(err))
					failed = true
					continue
				}
				if wrote {
					fmt.Fprintf(stdout, "%s %s\n", refName(nodeResource, name), done)
				} else {
					fmt.Fprintf(stdout, "%s already %s\n", refName(nodeResource, name), done)
				}
			}
			if failed {
				return errReported
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&selector, "selector", "l", "", verb+" the nodes matching this label selector")
	return cmd
}

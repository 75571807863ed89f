package cli

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
)

// Shell completion (issue 15 item 5). Cobra's `completion` command writes
// the bash, zsh and fish scripts; they call the hidden `__complete`
// command, which runs the functions below with the command line parsed so
// far. Kinds come from the API's resource table; object names come from
// the server named by the flags already on the line (--server, --token,
// --config, -n), else the config file, as the command itself would use.
//
// A completion must never get in the way of typing: every request is
// bounded by completionTimeout, and a failure (no server, refused, slow)
// offers nothing rather than printing an error into the user's prompt.

// completionTimeout bounds the requests of one completion: long enough
// for a site across a slow link, short enough that a dead server costs
// the user one short pause per TAB.
var completionTimeout = 2 * time.Second

// argCompleter builds the completion of a command's arguments.
type argCompleter func(o *options) cobra.CompletionFunc

// argCompletions maps command paths (without "outpost ") to the
// completion of their arguments. A path that names no command is simply
// unused, so verbs added later need only a line here.
var argCompletions = map[string]argCompleter{
	"get":             withCategories(completeTargets(nil)),
	"describe":        withCategories(completeTargets(nil)),
	"delete":          withCategories(completeTargets(nil)),
	"explain":         completeExplain,
	"edit":            completeTargets(nil),
	"label":           completeTargets(nil),
	"annotate":        completeTargets(nil),
	"scale":           completeTargets(scalable),
	"rollout status":  completeTargets(rollable),
	"rollout undo":    completeTargets(isDeployment),
	"rollout history": completeTargets(isDeployment),
	"rollout restart": completeTargets(rollable),
	"rollout pause":   completeTargets(isDeployment),
	"rollout resume":  completeTargets(isDeployment),
	"wait":            completeTargets(nil),
	"logs":            completeFirst(podResource),
	"exec":            completeFirst(podResource),
	"port-forward":    completeFirst(podResource),
	"drain":           completeFirst(nodeResource),
	"adm drain":       completeFirst(nodeResource),
	"cordon":          completeEvery(nodeResource),
	"uncordon":        completeEvery(nodeResource),
	"adm cordon":      completeEvery(nodeResource),
	"adm uncordon":    completeEvery(nodeResource),
	"taint":           completeTaint,
	"adm taint":       completeTaint,
	"top nodes":       completeEvery(nodeResource),
	"top pods":        completeFirst(podResource),
	"set image":       completeTargets(nil),
}

// flagCompletions maps command paths to their flags' completions; "" is
// the root, whose persistent flags every command has.
var flagCompletions = map[string]map[string]argCompleter{
	"":             {"namespace": completeNames(namespaceResource)},
	"logs":         {"container": completeContainers},
	"exec":         {"container": completeContainers},
	"image import": {"node": completeNames(nodeResource)},
	"get":          {"output": completeWords(getOutputs, nil)},
	"wait":         {"for": completeWords(waitFors, waitConditions)},
}

// getOutputs are get's -o formats; those ending in "=" take a template
// or file after them.
var getOutputs = []string{"json", "yaml", "wide", "name", "jsonpath=", "custom-columns=", "jsonpath-file=", "custom-columns-file="}

// waitFors are the forms of wait --for, and waitConditions the condition
// types of the kinds outpost serves, offered after "condition=".
var (
	waitFors       = []string{"condition=", "delete", "jsonpath="}
	waitConditions = []string{"Available", "ContainersReady", "Initialized", "PodScheduled", "Progressing", "Ready"}
)

var namespaceResource = api.ResourceForKind("Namespace")

// refuseUnknownShells adds cobra's `completion` command to root now (it
// would add it as root runs, writing to the same output) and makes it fail
// on a shell it has no script for: it printed its help and exited 0 for
// `completion tcsh`, which an install script takes for a script written.
// Without a shell it fails too, as kubectl's does.
func refuseUnknownShells(root *cobra.Command) {
	root.InitDefaultCompletionCmd()
	var comp *cobra.Command
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			comp = c
		}
	}
	if comp == nil || comp.Runnable() {
		return
	}
	var shells []string
	for _, c := range comp.Commands() {
		if c.IsAvailableCommand() {
			shells = append(shells, c.Name())
		}
	}
	list := strings.Join(shells, ", ")
	if n := len(shells); n > 1 {
		list = strings.Join(shells[:n-1], ", ") + " or " + shells[n-1]
	}
	comp.Args = cobra.ArbitraryArgs
	comp.RunE = func(_ *cobra.Command, args []string) error {
		if len(args) == 0 {
			return usagef("no shell given: use %s, e.g. `outpost completion bash`", list)
		}
		return usagef("unsupported shell %q: use %s", args[0], list)
	}
}

// registerCompletions attaches the completions above to root's commands.
// A command that already completes its arguments keeps its own.
func registerCompletions(root *cobra.Command, o *options) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		path := strings.TrimPrefix(strings.TrimPrefix(c.CommandPath(), root.Name()), " ")
		if fn, ok := argCompletions[path]; ok && c.ValidArgsFunction == nil {
			c.ValidArgsFunction = fn(o)
		}
		for flag, fn := range flagCompletions[path] {
			if c.Flag(flag) != nil {
				// The only error is a second registration, which keeps
				// the first.
				_ = c.RegisterFlagCompletionFunc(flag, fn(o))
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

func rollable(r *api.Resource) bool { return r.Kind == "Deployment" || r.Kind == "DaemonSet" }

func isDeployment(r *api.Resource) bool { return r.Kind == "Deployment" }

// noFiles is the directive of every completion here: an object name is
// never a file, so the shell must not fall back to file names.
const noFiles = cobra.ShellCompDirectiveNoFileComp

// completeTargets completes the arguments of get-like verbs, `TYPE[,TYPE]
// [NAME...]` or `TYPE/NAME...`, restricted to the kinds kinds accepts
// (nil: every kind).
func completeTargets(kinds func(*api.Resource) bool) argCompleter {
	return func(o *options) cobra.CompletionFunc {
		return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			slashForm := len(args) > 0 && strings.Contains(args[0], "/")
			if len(args) == 0 || slashForm {
				if typ, prefix, ok := strings.Cut(toComplete, "/"); ok {
					r := api.ResourceForName(typ)
					if r == nil || (kinds != nil && !kinds(r)) {
						return nil, noFiles
					}
					names := o.objectNames(cmd, r, prefix, usedNames(args, typ))
					for i := range names {
						names[i] = typ + "/" + names[i]
					}
					return names, noFiles
				}
			}
			switch {
			case slashForm:
				// More TYPE/NAME arguments: the kind first, the name on
				// the next TAB.
				out := kindCompletions(kinds, "", toComplete)
				for i := range out {
					k, desc, _ := strings.Cut(out[i], "\t")
					out[i] = k + "/\t" + desc
				}
				return out, noFiles | cobra.ShellCompDirectiveNoSpace
			case len(args) == 0:
				before := ""
				if i := strings.LastIndexByte(toComplete, ','); i >= 0 {
					before, toComplete = toComplete[:i+1], toComplete[i+1:]
				}
				return kindCompletions(kinds, before, toComplete), noFiles
			}
			if strings.Contains(args[0], ",") {
				return nil, noFiles // names of which kind?
			}
			r := api.ResourceForName(args[0])
			if r == nil || (kinds != nil && !kinds(r)) {
				return nil, noFiles
			}
			return o.objectNames(cmd, r, toComplete, args[1:]), noFiles
		}
	}
}

// withCategories adds kubectl's categories ("all") to the kinds a
// get-like verb offers for its first argument, in a comma list too.
func withCategories(inner argCompleter) argCompleter {
	return func(o *options) cobra.CompletionFunc {
		fn := inner(o)
		return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			out, directive := fn(cmd, args, toComplete)
			if len(args) > 0 || strings.Contains(toComplete, "/") {
				return out, directive
			}
			before, word := "", toComplete
			if i := strings.LastIndexByte(toComplete, ','); i >= 0 {
				before, word = toComplete[:i+1], toComplete[i+1:]
			}
			for _, c := range slices.Sorted(maps.Keys(categories)) {
				if strings.HasPrefix(c, word) {
					out = append(out, cobra.CompletionWithDesc(before+c, "category: "+strings.Join(categories[c], ", ")))
				}
			}
			return out, directive
		}
	}
}

// completeExplain completes explain's TYPE[.FIELD...]: the kinds, then
// after a dot the fields of what the path names so far, from the schema
// explain prints. A field is offered without a trailing space, as a
// further ".field" may follow.
func completeExplain(*options) cobra.CompletionFunc {
	return func(_ *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, noFiles
		}
		typ, rest, dotted := strings.Cut(toComplete, ".")
		if !dotted {
			return kindCompletions(nil, "", toComplete), noFiles
		}
		r := api.ResourceForName(typ)
		if r == nil {
			return nil, noFiles
		}
		t := reflect.TypeOf(r.New()).Elem()
		walked := strings.Split(rest, ".")
		last := walked[len(walked)-1]
		walked = walked[:len(walked)-1]
		for _, name := range walked {
			next, err := schemaField(t, name)
			if err != nil || next == nil {
				return nil, noFiles
			}
			t = next
		}
		prefix := strings.Join(append([]string{typ}, walked...), ".") + "."
		var out []cobra.Completion
		for _, f := range explainable(t) {
			if strings.HasPrefix(f.Name, last) {
				out = append(out, prefix+f.Name)
			}
		}
		return out, noFiles | cobra.ShellCompDirectiveNoSpace
	}
}

// completeWords completes a flag from a fixed list of words; after a
// word that ends in "=" (condition=), from that word followed by each of
// after. When every candidate ends in "=" no space is added, as a value
// follows.
func completeWords(words, after []string) argCompleter {
	return func(*options) cobra.CompletionFunc {
		return func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			var out []cobra.Completion
			for _, w := range words {
				if strings.HasPrefix(w, toComplete) {
					out = append(out, w)
				}
				if v, ok := strings.CutPrefix(toComplete, w); ok && strings.HasSuffix(w, "=") {
					for _, a := range after {
						if strings.HasPrefix(a, v) {
							out = append(out, w+a)
						}
					}
				}
			}
			directive := noFiles
			if len(out) > 0 && !slices.ContainsFunc(out, func(c string) bool { return !strings.HasSuffix(c, "=") }) {
				directive |= cobra.ShellCompDirectiveNoSpace
			}
			return out, directive
		}
	}
}

// usedNames is the names of kind typ already on a TYPE/NAME line, not to
// be offered again.
func usedNames(args []string, typ string) []string {
	var out []string
	for _, a := range args {
		if t, n, ok := strings.Cut(a, "/"); ok && t == typ {
			out = append(out, n)
		}
	}
	return out
}

// kindCompletions lists the kinds kinds accepts whose plural or short
// names start with prefix, each described, and with before (what precedes
// the word in a comma list) in front.
func kindCompletions(kinds func(*api.Resource) bool, before, prefix string) []cobra.Completion {
	var out []cobra.Completion
	for _, r := range api.Resources {
		if kinds != nil && !kinds(r) {
			continue
		}
		if strings.HasPrefix(r.Plural, prefix) {
			out = append(out, cobra.CompletionWithDesc(before+r.Plural, r.Kind))
		}
		for _, s := range r.ShortNames {
			if strings.HasPrefix(s, prefix) {
				out = append(out, cobra.CompletionWithDesc(before+s, "short for "+r.Plural))
			}
		}
	}
	return out
}

// completeFirst completes the first argument with the names of r's
// objects and nothing after it (a command, a count).
func completeFirst(r *api.Resource) argCompleter {
	return func(o *options) cobra.CompletionFunc {
		return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, noFiles
			}
			return o.objectNames(cmd, r, toComplete, nil), noFiles
		}
	}
}

// completeEvery completes every argument with the names of r's objects
// not already given.
func completeEvery(r *api.Resource) argCompleter {
	return func(o *options) cobra.CompletionFunc {
		return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			return o.objectNames(cmd, r, toComplete, args), noFiles
		}
	}
}

// completeNames completes a flag's value with the names of r's objects;
// in a comma-separated list (--node a,b) the last one, leaving out those
// before it.
func completeNames(r *api.Resource) argCompleter {
	return func(o *options) cobra.CompletionFunc {
		return func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			before, last := "", toComplete
			if i := strings.LastIndexByte(toComplete, ','); i >= 0 {
				before, last = toComplete[:i+1], toComplete[i+1:]
			}
			names := o.objectNames(cmd, r, last, strings.Split(before, ","))
			for i := range names {
				names[i] = before + names[i]
			}
			return names, noFiles
		}
	}
}

// completeTaint completes `taint nodes NODE...`: the word "nodes", then
// node names (the taints that follow are the user's to write).
func completeTaint(o *options) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) == 0 {
			return kindCompletions(func(r *api.Resource) bool { return r == nodeResource }, "", toComplete), noFiles
		}
		if api.ResourceForName(args[0]) != nodeResource || strings.ContainsAny(toComplete, "=:") {
			return nil, noFiles
		}
		return o.objectNames(cmd, nodeResource, toComplete, args[1:]), noFiles
	}
}

// completeContainers completes -c with the containers of the pod named
// by the first argument.
func completeContainers(o *options) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) == 0 {
			return nil, noFiles
		}
		ctx, cancel, cl, err := o.completionClient(cmd)
		if err != nil {
			return nil, noFiles
		}
		defer cancel()
		pod, err := podTarget(ctx, cl, args[0], io.Discard)
		if err != nil {
			return nil, noFiles
		}
		data, _, err := cl.Do(ctx, http.MethodGet, client.PathFor(podResource, cl.Namespace(), pod, ""), nil, nil)
		if err != nil {
			return nil, noFiles
		}
		var p struct {
			Spec struct {
				InitContainers []struct{ Name string } `json:"initContainers"`
				Containers     []struct{ Name string } `json:"containers"`
			} `json:"spec"`
		}
		if json.Unmarshal(data, &p) != nil {
			return nil, noFiles
		}
		var out []cobra.Completion
		for _, c := range append(p.Spec.Containers, p.Spec.InitContainers...) {
			if strings.HasPrefix(c.Name, toComplete) {
				out = append(out, c.Name)
			}
		}
		return out, noFiles
	}
}

// completionClient is a client for one completion, built as the command
// would build its own but with short timeouts and without a warning
// handler: nothing may be printed into the user's prompt.
func (o *options) completionClient(cmd *cobra.Command) (context.Context, context.CancelFunc, *client.Client, error) {
	cfg, err := client.LoadConfig(o.configPath)
	if err != nil {
		return nil, nil, nil, err
	}
	cfg = o.applyFlags(cfg)
	if cfg.Timeout <= 0 || cfg.Timeout > completionTimeout {
		cfg.Timeout = completionTimeout
	}
	cl, err := client.New(cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	// The command being completed was found, not run: it may have no
	// context of its own.
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, completionTimeout)
	return ctx, cancel, cl, nil
}

// objectNames lists the names of r's objects (in the namespace of the
// line, for a namespaced kind) that start with prefix, but those in skip.
// Any failure gives none.
func (o *options) objectNames(cmd *cobra.Command, r *api.Resource, prefix string, skip []string) []cobra.Completion {
	ctx, cancel, cl, err := o.completionClient(cmd)
	if err != nil {
		return nil
	}
	defer cancel()
	ns := ""
	if r.Namespaced {
		ns = cl.Namespace()
	}
	data, _, err := cl.Do(ctx, http.MethodGet, client.PathFor(r, ns, "", ""), nil, nil)
	if err != nil {
		return nil
	}
	var l struct {
		Items []struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		} `json:"items"`
	}
	if json.Unmarshal(data, &l) != nil {
		return nil
	}
	var out []cobra.Completion
	for _, it := range l.Items {
		n := it.Metadata.Name
		if strings.HasPrefix(n, prefix) && !slices.Contains(skip, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
)

var eventResource = api.ResourceForKind("Event")

// eventFilter is what `events` shows: the events of one object (r nil:
// of any), of the types asked for (none: all).
type eventFilter struct {
	r     *api.Resource
	ns    string // the object's namespace, for a namespaced r
	name  string
	types map[string]bool // "Warning", "Normal"
}

// fieldSelector narrows the server's listing to the object's events.
func (f eventFilter) fieldSelector() string {
	if f.r == nil {
		return ""
	}
	sel := "involvedObject.name=" + f.name + ",involvedObject.kind=" + f.r.Kind
	if f.r.Namespaced {
		sel += ",involvedObject.namespace=" + f.ns
	}
	return sel
}

// keep checks an event here too, in case a server ignores part of the
// field selector (or cannot select, see listEvents).
func (f eventFilter) keep(e *api.Event) bool {
	if len(f.types) > 0 && !f.types[e.Type] {
		return false
	}
	if f.r == nil {
		return true
	}
	o := e.InvolvedObject
	return o.Name == f.name && (o.Kind == "" || o.Kind == f.r.Kind) &&
		(!f.r.Namespaced || o.Namespace == "" || o.Namespace == f.ns)
}

// listEvents lists the events in ns ("" for all) that f keeps, oldest
// first, and the list's version. A server that cannot select events by
// involvedObject gets a plain list, filtered here.
func listEvents(ctx context.Context, cl *client.Client, ns string, f eventFilter) ([]api.Object, string, error) {
	objs, rv, err := cl.List(ctx, eventResource, ns, client.ListOptions{FieldSelector: f.fieldSelector()})
	if api.ReasonOf(err) == api.ReasonBadRequest && f.fieldSelector() != "" {
		objs, rv, err = cl.List(ctx, eventResource, ns, client.ListOptions{})
	}
	kept := objs[:0]
	for _, obj := range objs {
		if f.keep(obj.(*api.Event)) {
			kept = append(kept, obj)
		}
	}
	sortEvents(kept)
	return kept, rv, err
}

func newEventsCommand(o *options) *cobra.Command {
	var (
		all    bool
		forObj string
		types  []string
		watch  bool
		output string
	)
	cmd := &cobra.Command{
		Use:   "events [-n NS|-A] [--for TYPE/NAME] [--types Warning,Normal] [-w]",
		Short: "List events, oldest first",
		Long: "events lists the events of a namespace (-A: of all), oldest first by when they last\n" +
			"happened, as kubectl events does; --for keeps those of one object, --types those of\n" +
			"the types given. -w prints new events and repeats as they come.",
		Example: `  outpost events
  outpost events -A --types Warning
  outpost events --for pod/web-1 -w`,
		Args: exactArgs(0, "no arguments; name an object with --for TYPE/NAME"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var f eventFilter
			var problems []string
			for _, t := range types {
				switch strings.ToLower(t) {
				case "normal":
					t = "Normal"
				case "warning":
					t = "Warning"
				default:
					problems = append(problems, fmt.Sprintf("--types: %q is not Normal or Warning", t))
					continue
				}
				if f.types == nil {
					f.types = map[string]bool{}
				}
				f.types[t] = true
			}
			if forObj != "" {
				typ, name, ok := strings.Cut(forObj, "/")
				if !ok || typ == "" || name == "" {
					problems = append(problems, fmt.Sprintf("--for: want TYPE/NAME, e.g. pod/web, not %q", forObj))
				} else if r, err := resourceFor(typ); err != nil {
					problems = append(problems, "--for: "+err.Error())
				} else {
					f.r, f.name = r, name
				}
			}
			switch output {
			case "", outputJSON, outputYAML:
			default:
				problems = append(problems, fmt.Sprintf("--output must be json or yaml, not %q", output))
			}
			if output != "" && watch {
				problems = append(problems, "--output cannot be given with --watch")
			}
			if len(problems) > 0 {
				return usagef("%s", strings.Join(problems, "; "))
			}
			cl, err := o.client(cmd)
			if err != nil {
				return err
			}
			ns := ""
			if !all {
				ns = cl.Namespace()
			}
			f.ns = cl.Namespace()
			p := printOptions{withNamespace: all}
			tbl := newTableFor(eventResource, p)
			stdout := cmd.OutOrStdout()
			if watch {
				return watchEvents(cmd.Context(), o, cl, ns, f, tbl, p, stdout)
			}
			objs, _, err := listEvents(cmd.Context(), cl, ns, f)
			if err != nil {
				return err
			}
			if output != "" {
				return printEventList(stdout, output, objs)
			}
			if len(objs) == 0 {
				if all {
					fmt.Fprintln(cmd.ErrOrStderr(), "No events found.")
				} else {
					fmt.Fprintf(cmd.ErrOrStderr(), "No events found in %s namespace.\n", ns)
				}
				return nil
			}
			p.now = o.now()
			return tbl.print(stdout, rowsFor(eventResource, objs, p))
		},
	}
	fl := cmd.Flags()
	fl.BoolVarP(&all, "all-namespaces", "A", false, "the events of every namespace")
	fl.StringVar(&forObj, "for", "", "only the events of this object, TYPE/NAME (e.g. pod/web-1)")
	fl.StringSliceVar(&types, "types", nil, "only events of these types: Normal, Warning (comma-separated)")
	fl.BoolVarP(&watch, "watch", "w", false, "after listing, print new events as they come")
	fl.StringVarP(&output, "output", "o", "", "print the events as a json or yaml List")
	return cmd
}

// printEventList prints objs as one List document.
func printEventList(w io.Writer, format string, objs []api.Object) error {
	items := make([]json.RawMessage, 0, len(objs))
	for _, obj := range objs {
		data, err := json.Marshal(obj)
		if err != nil {
			return fmt.Errorf("encode event: %w", err)
		}
		items = append(items, withTypeMeta(eventResource, data))
	}
	doc, err := listDocument(items)
	if err != nil {
		return fmt.Errorf("encode list: %w", err)
	}
	return printRaw(w, format, doc)
}

// watchEvents prints the events f keeps, then each new one or new
// version of one (a repeat that counts up) as it comes, until ctx ends.
// Every version is printed once, also across the lists ListWatch makes
// again after its watch fell out of the server's window. A first list
// that fails ends the command with its error.
func watchEvents(ctx context.Context, o *options, cl *client.Client, ns string, f eventFilter, tbl *table, p printOptions, w io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu      sync.Mutex
		printed = map[string]bool{} // uid or namespace/name, "@", resourceVersion
		listed  bool
		failure error
	)
	print := func(objs []api.Object) {
		var fresh []api.Object
		for _, obj := range objs {
			e := obj.(*api.Event)
			id := e.UID
			if id == "" {
				id = e.Namespace + "/" + e.Name
			}
			id += "@" + e.ResourceVersion
			if f.keep(e) && !printed[id] {
				printed[id] = true
				fresh = append(fresh, obj)
			}
		}
		sortEvents(fresh)
		p.now = o.now()
		if err := tbl.print(w, rowsFor(eventResource, fresh, p)); err != nil && failure == nil {
			failure = err
			cancel()
		}
	}
	cl.ListWatch(ctx, eventResource, ns, client.ListOptions{FieldSelector: f.fieldSelector()}, client.ListWatchHandler{
		Reset: func(objs []api.Object) {
			mu.Lock()
			defer mu.Unlock()
			listed = true
			print(objs)
		},
		Event: func(typ string, obj api.Object) {
			if typ == client.EventDeleted {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			print([]api.Object{obj})
		},
		Error: func(op string, err error) {
			mu.Lock()
			defer mu.Unlock()
			if !listed && failure == nil {
				failure = err
				cancel()
			}
		},
	})
	mu.Lock()
	defer mu.Unlock()
	return failure
}

package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
)

type getOptions struct {
	allNamespaces bool
	selector      string
	fieldSelector string
	output        string
	watch         bool
	showLabels    bool
	noHeaders     bool
	sortBy        string
	sortPath      *jpPath // sortBy parsed; nil when not sorting
}

func newGetCommand(o *options) *cobra.Command {
	g := &getOptions{}
	cmd := &cobra.Command{
		Use:   "get TYPE[,TYPE...] [NAME...] | TYPE/NAME...",
		Short: "Display one or many objects",
		Example: `  outpost get pods
  outpost get pods -A -o wide
  outpost get nodes -l topology.kubernetes.io/zone=a --show-labels
  outpost get deploy/web -o yaml
  outpost get pods,services
  outpost get pods -w
  outpost get pods --sort-by=.metadata.creationTimestamp
  outpost get pods --sort-by='.status.containerStatuses[0].restartCount' --no-headers
  outpost get pods -o jsonpath='{.items[*].metadata.name}'
  outpost get pods -o jsonpath='{range .items[*]}{.metadata.name}{"\t"}{.status.podIP}{"\n"}{end}'
  outpost get pods -o custom-columns='NAME:.metadata.name,NODE:.spec.nodeName,IMAGE:.spec.containers[*].image'`,
		Args: minArgs(1, "a resource type, e.g. `outpost get pods`"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runGet(cmd.Context(), o, g, cmd, args)
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&g.allNamespaces, "all-namespaces", "A", false, "list across all namespaces")
	f.StringVarP(&g.selector, "selector", "l", "", "label selector, e.g. app=web,tier!=db")
	f.StringVar(&g.fieldSelector, "field-selector", "", "field selector, e.g. spec.nodeName=n1")
	f.StringVarP(&g.output, "output", "o", "", "output format: json, yaml, wide, name, jsonpath=TEMPLATE, jsonpath-file=FILE, custom-columns=NAME:PATH,... or custom-columns-file=FILE")
	f.BoolVarP(&g.watch, "watch", "w", false, "after listing, print changes as they happen")
	f.BoolVar(&g.showLabels, "show-labels", false, "add a LABELS column")
	f.BoolVar(&g.noHeaders, "no-headers", false, "print no header line (tables, wide and custom-columns)")
	f.StringVar(&g.sortBy, "sort-by", "", "sort lists by the value at this JSONPath, e.g. .metadata.creationTimestamp or '{.status.containerStatuses[0].restartCount}'")
	addRawFlag(cmd, o)
	return cmd
}

// fetched is what get read of one resource type, kept raw for -o json and
// -o yaml so that fields this build does not know are printed too.
type fetched struct {
	r    *api.Resource
	raws []json.RawMessage
}

func runGet(ctx context.Context, o *options, g *getOptions, cmd *cobra.Command, args []string) error {
	targets, err := parseTargets(args)
	if err != nil {
		return err
	}
	if err := checkOutput(g.output); err != nil {
		return err
	}
	if g.sortBy != "" {
		p, err := parseJSONPathExpr(relaxedPath(g.sortBy))
		if err != nil {
			return usagef("--sort-by: %v", err)
		}
		g.sortPath = p
	}
	named := false
	for _, t := range targets {
		named = named || len(t.names) > 0
	}
	if named && (g.selector != "" || g.fieldSelector != "") {
		return usagef("names cannot be given together with a selector")
	}
	if named && g.allNamespaces {
		return usagef("an object cannot be retrieved by name across all namespaces")
	}
	if g.watch && (len(targets) != 1 || len(targets[0].names) > 1) {
		return usagef("--watch takes a single resource type and at most one name")
	}
	cl, err := o.client(cmd)
	if err != nil {
		return err
	}
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	if g.watch {
		return watchGet(ctx, o, g, cl, targets[0], stdout)
	}

	var results []fetched
	failed := false
	for _, t := range targets {
		ns := ""
		if t.r.Namespaced && !g.allNamespaces {
			ns = cl.Namespace()
		}
		f := fetched{r: t.r}
		if len(t.names) == 0 {
			q := url.Values{}
			if g.selector != "" {
				q.Set("labelSelector", g.selector)
			}
			if g.fieldSelector != "" {
				q.Set("fieldSelector", g.fieldSelector)
			}
			data, _, err := cl.Do(ctx, http.MethodGet, client.PathFor(t.r, ns, "", ""), q, nil)
			if err != nil {
				return err
			}
			var l struct {
				Items []json.RawMessage `json:"items"`
			}
			if err := json.Unmarshal(data, &l); err != nil {
				return fmt.Errorf("%w: %s list: %w", errBadJSON, t.r.Plural, err)
			}
			for _, it := range l.Items {
				f.raws = append(f.raws, withTypeMeta(t.r, it))
			}
		}
		for _, name := range t.names {
			data, _, err := cl.Do(ctx, http.MethodGet, client.PathFor(t.r, ns, name, ""), url.Values{"consistent": {"true"}}, nil)
			if err != nil {
				fmt.Fprintln(stderr, FormatError(err))
				failed = true
				continue
			}
			f.raws = append(f.raws, withTypeMeta(t.r, data))
		}
		results = append(results, f)
	}
	single := len(targets) == 1 && len(targets[0].names) == 1
	if err := printFetched(o, g, results, named, single, stdout, stderr, cl.Namespace()); err != nil {
		return err
	}
	if failed {
		return errReported
	}
	return nil
}

// printFetched writes what get read in the format -o asks for.
// A single named object prints as itself, anything else as a List.
func printFetched(o *options, g *getOptions, results []fetched, named, single bool, stdout, stderr io.Writer, ns string) error {
	total := 0
	for _, f := range results {
		total += len(f.raws)
	}
	if err := sortFetched(g, results); err != nil {
		return err
	}
	switch {
	case g.output == outputJSON || g.output == outputYAML || isTemplateOutput(g.output) && (total > 0 || !strings.HasPrefix(g.output, outputCustomColumns)):
		if single && total == 1 {
			return g.printDoc(stdout, results[0].raws[0])
		}
		if single {
			return nil // the one object asked for failed, and said so: no empty List, as kubectl
		}
		var items []json.RawMessage
		for _, f := range results {
			items = append(items, f.raws...)
		}
		if g.sortPath != nil && len(results) > 1 {
			if _, err := sortRaws(g.sortPath, items); err != nil {
				return err
			}
		}
		doc, err := listDocument(items)
		if err != nil {
			return fmt.Errorf("encode list: %w", err)
		}
		return g.printDoc(stdout, doc)
	case g.output == outputName:
		for _, f := range results {
			for _, raw := range f.raws {
				var m struct {
					Metadata api.ObjectMeta `json:"metadata"`
				}
				if err := json.Unmarshal(raw, &m); err != nil {
					return fmt.Errorf("%w: %w", errBadJSON, err)
				}
				fmt.Fprintln(stdout, refName(f.r, m.Metadata.Name))
			}
		}
		return nil
	}
	if total == 0 {
		if !named {
			fmt.Fprintln(stderr, noResourcesMessage(results, g.allNamespaces, ns))
		}
		return nil
	}
	p := printOptions{
		wide:          g.output == outputWide,
		showLabels:    g.showLabels,
		withNamespace: g.allNamespaces,
		withKind:      len(results) > 1,
		now:           o.now(),
	}
	first := true
	for _, f := range results {
		if len(f.raws) == 0 {
			continue
		}
		objs := make([]api.Object, 0, len(f.raws))
		for _, raw := range f.raws {
			obj, err := client.DecodeObject(f.r, raw)
			if err != nil {
				return err
			}
			objs = append(objs, obj)
		}
		if f.r.Kind == "Event" && g.sortPath == nil {
			sortEvents(objs)
		}
		if !first {
			fmt.Fprintln(stdout)
		}
		first = false
		tbl := newTableFor(f.r, p)
		if g.noHeaders {
			tbl.omitHeader()
		}
		if err := tbl.print(stdout, rowsFor(f.r, objs, p)); err != nil {
			return err
		}
	}
	return nil
}

// printDoc prints one document (an object or a List) in -o's format,
// without custom-columns' header under --no-headers.
func (g *getOptions) printDoc(w io.Writer, doc []byte) error {
	if !isTemplateOutput(g.output) {
		return printRaw(w, g.output, doc)
	}
	p, err := g.templatePrinter()
	if err != nil {
		return err
	}
	return p.printDoc(w, doc)
}

// templatePrinter is templatePrinter(g.output) with --no-headers applied.
func (g *getOptions) templatePrinter() (docPrinter, error) {
	p, err := templatePrinter(g.output)
	if err != nil {
		return nil, err
	}
	if cc, ok := p.(*customColumnsPrinter); ok && g.noHeaders {
		cc.tbl.omitHeader()
	}
	return p, nil
}

// noResourcesMessage is kubectl's line for an empty listing.
func noResourcesMessage(results []fetched, all bool, ns string) string {
	for _, f := range results {
		if f.r.Namespaced && !all {
			return fmt.Sprintf("No resources found in %s namespace.", ns)
		}
	}
	return "No resources found"
}

// watchGet lists, prints, then prints every change until ctx ends. A
// watch that falls out of the server's window lists again and goes on.
func watchGet(ctx context.Context, o *options, g *getOptions, cl *client.Client, t target, w io.Writer) error {
	ns := ""
	if t.r.Namespaced && !g.allNamespaces {
		ns = cl.Namespace()
	}
	opts := client.ListOptions{LabelSelector: g.selector, FieldSelector: g.fieldSelector}
	if len(t.names) == 1 {
		opts.FieldSelector = "metadata.name=" + t.names[0]
	}
	p := printOptions{
		wide:          g.output == outputWide,
		showLabels:    g.showLabels,
		withNamespace: g.allNamespaces,
	}
	tbl := newTableFor(t.r, p)
	if g.noHeaders {
		tbl.omitHeader()
	}
	printed := 0
	var tp docPrinter
	if isTemplateOutput(g.output) {
		var err error
		if tp, err = g.templatePrinter(); err != nil {
			return err
		}
	}
	emit := func(objs []api.Object) error {
		switch {
		case tp != nil:
			for _, obj := range objs {
				doc, err := json.Marshal(obj)
				if err != nil {
					return fmt.Errorf("encode %s: %w", t.r.Kind, err)
				}
				if err := tp.printDoc(w, withTypeMeta(t.r, doc)); err != nil {
					return err
				}
			}
			return nil
		case g.output == outputJSON || g.output == outputYAML:
			for _, obj := range objs {
				doc, err := json.Marshal(obj)
				if err != nil {
					return fmt.Errorf("encode %s: %w", t.r.Kind, err)
				}
				if g.output == outputYAML && printed > 0 {
					fmt.Fprintln(w, "---")
				}
				if err := printRaw(w, g.output, doc); err != nil {
					return err
				}
				printed++
			}
			return nil
		case g.output == outputName:
			for _, obj := range objs {
				fmt.Fprintln(w, refName(t.r, obj.GetObjectMeta().Name))
			}
			return nil
		}
		p.now = o.now()
		return tbl.print(w, rowsFor(t.r, objs, p))
	}
	list := func() (string, error) {
		objs, rv, err := cl.List(ctx, t.r, ns, opts)
		if err != nil {
			return "", err
		}
		if g.sortPath != nil {
			// As kubectl: the first listing is sorted, changes print as
			// they come.
			if err := sortObjects(g.sortPath, objs); err != nil {
				return "", err
			}
		}
		if len(objs) > 0 {
			if err := emit(objs); err != nil {
				return "", err
			}
		}
		return rv, nil
	}
	rv, err := list()
	if err != nil {
		return err
	}
	// relist picks the watch up again after the server's window moved
	// past it; objects are not printed again.
	relist := func() error {
		_, newRV, err := cl.List(ctx, t.r, ns, opts)
		if err == nil {
			rv = newRV
		}
		return err
	}
	for ctx.Err() == nil {
		ch, err := cl.Watch(ctx, t.r, ns, opts, rv)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if api.IsGone(err) {
				if err := relist(); err != nil {
					return err
				}
				continue
			}
			return err
		}
		for ev := range ch {
			switch ev.Type {
			case client.EventError:
				if !api.IsGone(ev.Err) {
					return ev.Err
				}
				if err := relist(); err != nil {
					return err
				}
			case client.EventBookmark:
				rv = ev.Object.GetObjectMeta().ResourceVersion
			default:
				rv = ev.Object.GetObjectMeta().ResourceVersion
				if err := emit([]api.Object{ev.Object}); err != nil {
					return err
				}
			}
		}
		// The server ended the stream (its watch timeout, a restart):
		// reconnect after a pause so a failing server is not hammered.
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	return nil
}

package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
)

// maxArgs is cobra's MaximumNArgs with an error Execute recognises as a
// usage mistake.
func maxArgs(n int, what string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) > n {
			return usagef("expected %s", what)
		}
		return nil
	}
}

var (
	// errNoMetrics is a node or pod without metrics yet (its agent read
	// it only once, or does not answer).
	errNoMetrics = errors.New("metrics not available yet")
	// errMetricsAPI is a server that does not serve metrics.k8s.io.
	errMetricsAPI = errors.New("metrics API not available")
)

// topOptions are the flags of top nodes and top pods.
type topOptions struct {
	selector      string
	sortBy        string
	noHeaders     bool
	allNamespaces bool
	containers    bool
}

func newTopCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "top",
		Short: "Show the CPU and memory use of nodes and pods",
		Long: "top shows what nodes and pods use now, as `kubectl top` does: CPU averaged over the\n" +
			"last few seconds and the memory working set, from the agents' cgroup readings (the\n" +
			"metrics.k8s.io API every server serves). An agent reads every 10 s and a CPU rate\n" +
			"needs two readings, so a pod that just started has no figures for a few seconds.",
		Example: `  outpost top nodes
  outpost top pods -A --sort-by cpu`,
	}
	cmd.AddCommand(newTopNodesCommand(o), newTopPodsCommand(o))
	return cmd
}

func (t *topOptions) flags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVarP(&t.selector, "selector", "l", "", "label selector (e.g. app=web)")
	f.StringVar(&t.sortBy, "sort-by", "", "sort by cpu or memory (highest first)")
	f.BoolVar(&t.noHeaders, "no-headers", false, "print no header line")
}

func (t *topOptions) check() error {
	if t.sortBy != "" && t.sortBy != "cpu" && t.sortBy != "memory" {
		return usagef("--sort-by must be cpu or memory, not %q", t.sortBy)
	}
	return nil
}

func (t *topOptions) query() url.Values {
	if t.selector == "" {
		return nil
	}
	return url.Values{"labelSelector": {t.selector}}
}

// fetchMetrics reads path of the metrics API into out; a server without
// the API says so as kubectl does.
func fetchMetrics(ctx context.Context, cl *client.Client, path string, q url.Values, out any) error {
	b, _, err := cl.Do(ctx, "GET", "/apis/"+api.MetricsAPIVersion+path, q, nil)
	if err != nil {
		// A 404 naming no object is a path the server does not serve.
		if se, ok := errors.AsType[*api.StatusError](err); ok && api.IsNotFound(err) && se.Status.Details == nil {
			return errMetricsAPI
		}
		return err
	}
	if err := api.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%w: %w", errBadJSON, err)
	}
	return nil
}

// millicores and mebibytes are how kubectl top prints usage.
func millicores(q api.Quantity) string { return strconv.FormatInt(q.MilliValue(), 10) + "m" }
func mebibytes(q api.Quantity) string  { return strconv.FormatInt(q.Value()/(1<<20), 10) + "Mi" }

// percent is use over allocatable, as a whole percentage.
func percent(use, of int64) string {
	if of <= 0 {
		return "<unknown>"
	}
	return strconv.FormatInt(use*100/of, 10) + "%"
}

func newTopNodesCommand(o *options) *cobra.Command {
	var t topOptions
	cmd := &cobra.Command{
		Use:     "nodes [NAME]",
		Aliases: []string{"node", "no"},
		Short:   "Show the CPU and memory use of nodes",
		Long: "top nodes prints each node's CPU (cores, in thousandths) and memory use, and both as a\n" +
			"share of what the node offers pods (allocatable). A node that is not Ready, or whose\n" +
			"agent does not answer, shows <unknown>.",
		Example: `  outpost top nodes
  outpost top nodes edge-1
  outpost top nodes -l topology.kubernetes.io/zone=shop --sort-by cpu`,
		Args: maxArgs(1, "at most one node name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := t.check(); err != nil {
				return err
			}
			cl, err := o.client(cmd)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			var nodes []*api.Node
			var metrics []api.NodeMetrics
			if len(args) == 1 {
				obj, err := cl.Get(ctx, nodeResource, "", args[0], client.GetOptions{})
				if err != nil {
					return err
				}
				n, _ := obj.(*api.Node)
				var m api.NodeMetrics
				if err := fetchMetrics(ctx, cl, "/nodes/"+url.PathEscape(args[0]), nil, &m); err != nil {
					if api.IsNotFound(err) {
						return errNoMetrics
					}
					return err
				}
				nodes, metrics = []*api.Node{n}, []api.NodeMetrics{m}
			} else {
				objs, _, err := cl.List(ctx, nodeResource, "", client.ListOptions{LabelSelector: t.selector})
				if err != nil {
					return err
				}
				for _, obj := range objs {
					if n, ok := obj.(*api.Node); ok {
						nodes = append(nodes, n)
					}
				}
				var l api.NodeMetricsList
				if err := fetchMetrics(ctx, cl, "/nodes", t.query(), &l); err != nil {
					return err
				}
				metrics = l.Items
				if len(nodes) == 0 {
					fmt.Fprintln(cmd.ErrOrStderr(), "No resources found")
					return nil
				}
			}
			return printTopNodes(cmd, t, nodes, metrics)
		},
	}
	t.flags(cmd)
	return cmd
}

func printTopNodes(cmd *cobra.Command, t topOptions, nodes []*api.Node, metrics []api.NodeMetrics) error {
	byName := map[string]api.NodeMetrics{}
	for _, m := range metrics {
		byName[m.Name] = m
	}
	type row struct {
		name     string
		cpu, mem int64 // thousandths of a core, bytes
		known    bool
		alloc    api.ResourceList
	}
	var rows, unknown []row
	for _, n := range nodes {
		m, ok := byName[n.Name]
		if !ok {
			unknown = append(unknown, row{name: n.Name})
			continue
		}
		rows = append(rows, row{name: n.Name, cpu: m.Usage[api.ResourceCPU].MilliValue(), mem: m.Usage[api.ResourceMemory].Value(), known: true, alloc: n.Status.Allocatable})
	}
	sortTop(rows, t.sortBy, func(r row) (string, int64, int64) { return r.name, r.cpu, r.mem })
	tb := newTable([]string{"NAME", "CPU(cores)", "CPU%", "MEMORY(bytes)", "MEMORY%"})
	var out [][]string
	for _, r := range append(rows, unknown...) {
		if !r.known {
			// kubectl lists nodes without metrics last, unknown.
			out = append(out, []string{r.name, "<unknown>", "<unknown>", "<unknown>", "<unknown>"})
			continue
		}
		out = append(out, []string{r.name,
			strconv.FormatInt(r.cpu, 10) + "m", percent(r.cpu, r.alloc[api.ResourceCPU].MilliValue()),
			strconv.FormatInt(r.mem/(1<<20), 10) + "Mi", percent(r.mem, r.alloc[api.ResourceMemory].Value())})
	}
	if t.noHeaders {
		tb.headed = true
	}
	return tb.print(cmd.OutOrStdout(), out)
}

// sortTop orders rows by name, or by cpu or memory, highest first.
func sortTop[R any](rows []R, by string, key func(R) (string, int64, int64)) {
	slices.SortStableFunc(rows, func(a, b R) int {
		an, ac, am := key(a)
		bn, bc, bm := key(b)
		switch by {
		case "cpu":
			return cmp.Or(cmp.Compare(bc, ac), cmp.Compare(an, bn))
		case "memory":
			return cmp.Or(cmp.Compare(bm, am), cmp.Compare(an, bn))
		}
		return cmp.Compare(an, bn)
	})
}

func newTopPodsCommand(o *options) *cobra.Command {
	var t topOptions
	cmd := &cobra.Command{
		Use:     "pods [NAME]",
		Aliases: []string{"pod", "po"},
		Short:   "Show the CPU and memory use of pods",
		Long: "top pods prints each pod's CPU (cores, in thousandths) and memory use: the sums of its\n" +
			"running containers (--containers: each container). A pod shows once its containers\n" +
			"were read twice by its node's agent.",
		Example: `  outpost top pods
  outpost top pods -A --sort-by memory
  outpost top pods web-6d4b9-x2x7q --containers
  outpost top pods -l app=web -n shop`,
		Args: maxArgs(1, "at most one pod name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := t.check(); err != nil {
				return err
			}
			if t.allNamespaces && len(args) == 1 {
				return usagef("a pod name cannot be given with --all-namespaces")
			}
			cl, err := o.client(cmd)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			ns := cl.Namespace()
			var items []api.PodMetrics
			switch {
			case len(args) == 1:
				var m api.PodMetrics
				err := fetchMetrics(ctx, cl, "/namespaces/"+url.PathEscape(ns)+"/pods/"+url.PathEscape(args[0]), nil, &m)
				if api.IsNotFound(err) {
					// Say whether the pod exists at all, and how old it is.
					obj, gerr := cl.Get(ctx, podResource, ns, args[0], client.GetOptions{})
					if gerr != nil {
						return gerr
					}
					return fmt.Errorf("%w for pod %s/%s, age: %s", errNoMetrics, ns, args[0], age(o.now(), obj.GetObjectMeta().CreationTimestamp))
				}
				if err != nil {
					return err
				}
				items = []api.PodMetrics{m}
			default:
				path := "/namespaces/" + url.PathEscape(ns) + "/pods"
				if t.allNamespaces {
					path = "/pods"
				}
				var l api.PodMetricsList
				if err := fetchMetrics(ctx, cl, path, t.query(), &l); err != nil {
					return err
				}
				items = l.Items
			}
			if len(items) == 0 {
				if t.allNamespaces {
					fmt.Fprintln(cmd.ErrOrStderr(), "No resources found")
				} else {
					fmt.Fprintf(cmd.ErrOrStderr(), "No resources found in %s namespace.\n", ns)
				}
				return nil
			}
			return printTopPods(cmd, t, items)
		},
	}
	t.flags(cmd)
	f := cmd.Flags()
	f.BoolVarP(&t.allNamespaces, "all-namespaces", "A", false, "show pods of every namespace")
	f.BoolVar(&t.containers, "containers", false, "show each container of the pods")
	return cmd
}

func printTopPods(cmd *cobra.Command, t topOptions, items []api.PodMetrics) error {
	type row struct {
		ns, pod, container string
		cpu, mem           int64
	}
	var rows []row
	for _, m := range items {
		var sum row
		sum.ns, sum.pod = m.Namespace, m.Name
		for _, c := range m.Containers {
			cpu, mem := c.Usage[api.ResourceCPU].MilliValue(), c.Usage[api.ResourceMemory].Value()
			if t.containers {
				rows = append(rows, row{ns: m.Namespace, pod: m.Name, container: c.Name, cpu: cpu, mem: mem})
			}
			sum.cpu += cpu
			sum.mem += mem
		}
		if !t.containers {
			rows = append(rows, sum)
		}
	}
	sortTop(rows, t.sortBy, func(r row) (string, int64, int64) { return r.ns + "/" + r.pod + "/" + r.container, r.cpu, r.mem })
	var header []string
	if t.allNamespaces {
		header = append(header, "NAMESPACE")
	}
	if t.containers {
		header = append(header, "POD", "NAME")
	} else {
		header = append(header, "NAME")
	}
	header = append(header, "CPU(cores)", "MEMORY(bytes)")
	var out [][]string
	for _, r := range rows {
		var cells []string
		if t.allNamespaces {
			cells = append(cells, r.ns)
		}
		cells = append(cells, r.pod)
		if t.containers {
			cells = append(cells, r.container)
		}
		out = append(out, append(cells, strconv.FormatInt(r.cpu, 10)+"m", strconv.FormatInt(r.mem/(1<<20), 10)+"Mi"))
	}
	tb := newTable(header)
	if t.noHeaders {
		tb.headed = true
	}
	return tb.print(cmd.OutOrStdout(), out)
}

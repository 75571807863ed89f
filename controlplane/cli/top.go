package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/outpost-edge/outpost/agent/sim"
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
	// errNoMetricsYet is a pod without metrics yet: its containers
	// started within metricsSettle (kubectl's words).
	errNoMetricsYet = errors.New("metrics not available yet")
	// errNoMetrics is a pod without metrics that waiting will not bring:
	// the error says why.
	errNoMetrics = errors.New("metrics not available")
	// errMetricsAPI is a server that does not serve metrics.k8s.io.
	errMetricsAPI = errors.New("metrics API not available")
)

// metricsSettle is how long after its containers start a pod may have
// no metrics and get them by waiting: the agent reads every 10 s, a CPU
// rate needs two readings, and the server keeps a node's summary 5 s.
const metricsSettle = 30 * time.Second

// noMetrics is why a pod or node has no metrics.
type noMetrics int

const (
	metricsMissing    noMetrics = iota // the agent did not answer, or has no readings
	metricsSoon                        // containers started within metricsSettle
	metricsFinished                    // the pod has finished
	metricsUnassigned                  // the pod is not scheduled
	metricsNoNode                      // its node is not registered
	metricsSimulated                   // a simulated node: no agent to ask
	metricsNoEndpoint                  // a node without an agent endpoint
	metricsNotReady                    // a node whose agent does not report
)

// phrases of each cause: for one pod ("its node X ..."; %s is the node),
// for several ("N ..."; the nodes follow), and for a node (`top node`).
var noMetricsPhrases = map[noMetrics]struct{ pod, pods, node string }{
	metricsMissing: {"the agent of its node %s did not answer, or has no readings of its containers",
		"on nodes whose agents did not answer, or have no readings of their containers", "its agent did not answer"},
	metricsSoon:       {"", "started less than " + metricsSettle.String() + " ago: the first figures come after the agent's second reading", ""},
	metricsFinished:   {"it has finished", "finished", ""},
	metricsUnassigned: {"it is not scheduled to a node", "not scheduled to a node", ""},
	metricsNoNode:     {"its node %s is not registered", "on nodes that are not registered", ""},
	metricsSimulated: {"its node %s has no agent endpoint (simulated by outpost sim agents)",
		"on simulated nodes (outpost sim agents), which have no agent endpoint", "it has no agent endpoint (simulated by outpost sim agents)"},
	metricsNoEndpoint: {"its node %s has no agent endpoint", "on nodes without an agent endpoint", "it has no agent endpoint"},
	metricsNotReady:   {"its node %s is not Ready", "on nodes that are not Ready", "it is not Ready"},
}

// nodeNoMetrics says why node n can have no metrics whatever one waits
// (metricsMissing when its agent may answer): a simulated node (outpost
// sim agents) or any without an agent endpoint has no agent to ask, one
// not Ready has none that reports.
func nodeNoMetrics(n *api.Node) noMetrics {
	switch {
	case strings.HasPrefix(n.Status.NodeInfo.ContainerRuntimeVersion, sim.SimMarker):
		return metricsSimulated
	case n.Status.DaemonEndpoints.KubeletEndpoint.Port <= 0:
		return metricsNoEndpoint
	case !api.ReadyIn(n.Status.Conditions):
		return metricsNotReady
	}
	return metricsMissing
}

// podStarted is when the pod's newest running container started (its
// creation when none runs).
func podStarted(p *api.Pod) time.Time {
	var t time.Time
	if p.CreationTimestamp != nil {
		t = p.CreationTimestamp.Time
	}
	for _, cs := range p.Status.ContainerStatuses {
		if r := cs.State.Running; r != nil && r.StartedAt != nil && r.StartedAt.After(t) {
			t = r.StartedAt.Time
		}
	}
	return t
}

// podNoMetrics says why pod p has no metrics, given the nodes by name.
func podNoMetrics(now time.Time, p *api.Pod, nodes map[string]*api.Node) noMetrics {
	switch {
	case api.IsPodPhaseTerminal(p.Status.Phase):
		return metricsFinished
	case p.Spec.NodeName == "":
		return metricsUnassigned
	}
	n, ok := nodes[p.Spec.NodeName]
	if !ok {
		return metricsNoNode
	}
	if why := nodeNoMetrics(n); why != metricsMissing {
		return why
	}
	if now.Sub(podStarted(p)) < metricsSettle {
		return metricsSoon
	}
	return metricsMissing
}

// whyNoPodMetrics is the error of `top pod NAME` when the API has no
// metrics for it: kubectl's "not available yet" while waiting may help,
// else why not.
func whyNoPodMetrics(ctx context.Context, cl *client.Client, now time.Time, ns, name string) error {
	obj, err := cl.Get(ctx, podResource, ns, name, client.GetOptions{})
	if err != nil {
		return err
	}
	p, ok := obj.(*api.Pod)
	if !ok {
		return fmt.Errorf("%w for pod %s/%s", errNoMetrics, ns, name)
	}
	nodes := map[string]*api.Node{}
	if p.Spec.NodeName != "" {
		n, err := getNode(ctx, cl, p.Spec.NodeName)
		if err != nil && !api.IsNotFound(err) {
			return err
		}
		if n != nil {
			nodes[n.Name] = n
		}
	}
	ago := age(now, p.CreationTimestamp)
	why := podNoMetrics(now, p, nodes)
	if why == metricsSoon {
		return fmt.Errorf("%w for pod %s/%s, age: %s", errNoMetricsYet, ns, name, ago)
	}
	reason := noMetricsPhrases[why].pod
	if strings.Contains(reason, "%s") {
		reason = fmt.Sprintf(reason, p.Spec.NodeName)
	}
	return fmt.Errorf("%w for pod %s/%s, age: %s: %s", errNoMetrics, ns, name, ago, reason)
}

// whyNoPodsMetrics is the error of `top pods` when the API has metrics
// for none of the pods, or nil when there are no pods: how many there
// are, and why they have none, counted by cause.
func whyNoPodsMetrics(ctx context.Context, cl *client.Client, now time.Time, ns, selector string) error {
	objs, _, err := cl.List(ctx, podResource, ns, client.ListOptions{LabelSelector: selector})
	if err != nil || len(objs) == 0 {
		return err
	}
	nodes := map[string]*api.Node{}
	list, _, err := cl.List(ctx, nodeResource, "", client.ListOptions{})
	if err != nil {
		return err
	}
	for _, o := range list {
		if n, ok := o.(*api.Node); ok {
			nodes[n.Name] = n
		}
	}
	count := map[noMetrics]int{}
	on := map[noMetrics][]string{}
	for _, o := range objs {
		p, ok := o.(*api.Pod)
		if !ok {
			continue
		}
		why := podNoMetrics(now, p, nodes)
		count[why]++
		if n := p.Spec.NodeName; n != "" && why != metricsSoon && why != metricsFinished && !slices.Contains(on[why], n) {
			on[why] = append(on[why], n)
		}
	}
	var parts []string
	for _, why := range slices.Sorted(maps.Keys(count)) {
		part := strconv.Itoa(count[why]) + " " + noMetricsPhrases[why].pods
		if names := on[why]; len(names) > 0 {
			slices.Sort(names)
			if len(names) > 3 {
				names = append(names[:3:3], fmt.Sprintf("and %d more", len(names)-3))
			}
			part += " (" + strings.Join(names, ", ") + ")"
		}
		parts = append(parts, part)
	}
	where := "in namespace " + ns
	if ns == "" {
		where = "in all namespaces"
	}
	sentinel := errNoMetrics
	if len(count) == 1 && count[metricsSoon] > 0 {
		sentinel = errNoMetricsYet
	}
	pods := strconv.Itoa(len(objs)) + " pods"
	if len(objs) == 1 {
		pods = "pod"
	}
	return fmt.Errorf("%w for the %s %s: %s", sentinel, pods, where, strings.Join(parts, "; "))
}

// getNode reads node name.
func getNode(ctx context.Context, cl *client.Client, name string) (*api.Node, error) {
	obj, err := cl.Get(ctx, nodeResource, "", name, client.GetOptions{})
	if err != nil {
		return nil, err
	}
	n, ok := obj.(*api.Node)
	if !ok {
		return nil, fmt.Errorf("node %s: %w: got %T", name, errBadJSON, obj)
	}
	return n, nil
}

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
				n, err := getNode(ctx, cl, args[0])
				if err != nil {
					return err
				}
				nodes = []*api.Node{n}
				var m api.NodeMetrics
				switch err := fetchMetrics(ctx, cl, "/nodes/"+url.PathEscape(args[0]), nil, &m); {
				case err == nil:
					metrics = []api.NodeMetrics{m}
				case api.IsNotFound(err):
					// <unknown>, as the list shows it, and why.
					fmt.Fprintf(cmd.ErrOrStderr(), "no metrics for node %s: %s\n", n.Name, noMetricsPhrases[nodeNoMetrics(n)].node)
				default:
					return err
				}
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
					// Say whether the pod exists at all, how old it is,
					// and why it has none.
					return whyNoPodMetrics(ctx, cl, o.now(), ns, args[0])
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
				// Pods without metrics are an error, as kubectl's
				// "metrics not available yet", saying why.
				in := ns
				if t.allNamespaces {
					in = ""
				}
				if err := whyNoPodsMetrics(ctx, cl, o.now(), in, t.selector); err != nil {
					return err
				}
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

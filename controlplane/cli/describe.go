package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
	"github.com/outpost-edge/outpost/controlplane/scheduler"
)

func newDescribeCommand(o *options) *cobra.Command {
	var (
		selector      string
		allNamespaces bool
	)
	cmd := &cobra.Command{
		Use:   "describe TYPE [NAME...] | TYPE/NAME...",
		Short: "Show objects in detail, with their events",
		Long: "describe shows the named objects, or without names every object of the type in the\n" +
			"namespace (matching -l SELECTOR if given; across namespaces with -A).",
		Example: `  outpost describe pod web-1
  outpost describe node/edge-3
  outpost describe pods -n shop
  outpost describe pods -l app=web`,
		Args: minArgs(1, "a resource type, e.g. `outpost describe pods` or `outpost describe pod web-1`"),
		RunE: func(cmd *cobra.Command, args []string) error {
			targets, err := parseTargets(args)
			if err != nil {
				return err
			}
			for _, t := range targets {
				if len(t.names) > 0 && (selector != "" || allNamespaces) {
					return usagef("names cannot be combined with -l or -A")
				}
			}
			cl, err := o.client(cmd)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			out, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
			failed, first := false, true
			show := func(r *api.Resource, obj api.Object) error {
				if !first {
					fmt.Fprintln(out)
				}
				first = false
				d := &describer{ctx: ctx, cl: cl, now: o.now(), stderr: stderr}
				return d.describe(out, r, obj)
			}
			for _, t := range targets {
				if len(t.names) == 0 {
					ns := ""
					if t.r.Namespaced && !allNamespaces {
						ns = cl.Namespace()
					}
					objs, _, err := cl.List(ctx, t.r, ns, client.ListOptions{LabelSelector: selector})
					if err != nil {
						return err
					}
					if len(objs) == 0 {
						fmt.Fprintln(stderr, noResourcesMessage([]fetched{{r: t.r}}, allNamespaces, ns))
					}
					for _, obj := range objs {
						if err := show(t.r, obj); err != nil {
							return err
						}
					}
					continue
				}
				for _, name := range t.names {
					obj, err := cl.Get(ctx, t.r, "", name, client.GetOptions{Consistent: true})
					if err != nil {
						fmt.Fprintln(stderr, FormatError(err))
						failed = true
						continue
					}
					if err := show(t.r, obj); err != nil {
						return err
					}
				}
			}
			if failed {
				return errReported
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&selector, "selector", "l", "", "describe the objects matching this label selector")
	cmd.Flags().BoolVarP(&allNamespaces, "all-namespaces", "A", false, "without names: describe the objects of every namespace")
	return cmd
}

// shownAnnotations are the annotations describe prints: all but apply's
// record of the last manifest, a JSON copy of the object that would bury
// the rest (kubectl leaves its own out too).
func shownAnnotations(m map[string]string) map[string]string {
	if _, ok := m[LastAppliedAnnotation]; !ok {
		return m
	}
	out := maps.Clone(m)
	delete(out, LastAppliedAnnotation)
	return out
}

// describer renders one object as kubectl's describe does: "Key: value"
// lines aligned per block, nested sections indented by two spaces, the
// object's events last.
type describer struct {
	ctx    context.Context
	cl     *client.Client
	now    time.Time
	stderr io.Writer
	tw     *tabwriter.Writer
}

// line writes "key:\tvalue" at an indent level.
func (d *describer) line(level int, key string, value string) {
	fmt.Fprintf(d.tw, "%s%s:\t%s\n", strings.Repeat("  ", level), key, value)
}

// section writes a header line with no value cell. Having no cell, it
// ends the alignment block above it, as kubectl's sections do.
func (d *describer) section(level int, key string) {
	fmt.Fprintf(d.tw, "%s%s:\n", strings.Repeat("  ", level), key)
}

// row writes tab-separated cells at an indent level: a continuation of
// the value column ("", value) or a single-cell line.
func (d *describer) row(level int, cells ...string) {
	fmt.Fprintf(d.tw, "%s%s\n", strings.Repeat("  ", level), strings.Join(cells, "\t"))
}

// table writes a small table aligned on its own, not with the key/value
// lines around it: its lines carry no tabs for the outer writer.
func (d *describer) table(level int, rows [][]string) {
	var widths []int
	for _, r := range rows {
		for i, c := range r {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], len(c))
		}
	}
	indent := strings.Repeat("  ", level)
	for _, r := range rows {
		var b strings.Builder
		b.WriteString(indent)
		for i, c := range r {
			b.WriteString(c)
			if i < len(r)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-len(c)+2))
			}
		}
		fmt.Fprintln(d.tw, strings.TrimRight(b.String(), " "))
	}
}

// mapLines writes a map as "k=v" lines: the first after key, the rest
// under it, or <none>.
func (d *describer) mapLines(level int, key string, m map[string]string, sep string) {
	if len(m) == 0 {
		d.line(level, key, none)
		return
	}
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if i == 0 {
			d.line(level, key, k+sep+m[k])
			continue
		}
		d.row(level, "", k+sep+m[k])
	}
}

func (d *describer) describe(w io.Writer, r *api.Resource, obj api.Object) error {
	d.tw = tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	m := obj.GetObjectMeta()
	d.line(0, "Name", m.Name)
	if r.Namespaced {
		d.line(0, "Namespace", m.Namespace)
	}
	switch o := obj.(type) {
	case *api.Pod:
		d.pod(o)
	case *api.Node:
		d.node(o)
	case *api.Deployment:
		d.meta(m)
		d.line(0, "Selector", selectorString(o.Spec.Selector))
		st := o.Status
		d.line(0, "Replicas", fmt.Sprintf("%d desired | %d updated | %d total | %d available | %d unavailable",
			replicas(o.Spec.Replicas), st.UpdatedReplicas, st.Replicas, st.AvailableReplicas, st.UnavailableReplicas))
		strategy := o.Spec.Strategy.Type
		if strategy == "" {
			strategy = api.RollingUpdateDeploymentStrategyType
		}
		d.line(0, "StrategyType", strategy)
		d.line(0, "MinReadySeconds", strconv.Itoa(int(o.Spec.MinReadySeconds)))
		if ru := o.Spec.Strategy.RollingUpdate; ru != nil {
			d.line(0, "RollingUpdateStrategy", fmt.Sprintf("%s max unavailable, %s max surge", intOrNone(ru.MaxUnavailable), intOrNone(ru.MaxSurge)))
		}
		d.template(&o.Spec.Template)
		if len(o.Status.Conditions) > 0 {
			d.section(0, "Conditions")
			rows := [][]string{{"Type", "Status", "Reason"}, {"----", "------", "------"}}
			for _, c := range o.Status.Conditions {
				rows = append(rows, []string{c.Type, c.Status, orNone(c.Reason)})
			}
			d.table(1, rows)
		}
		d.deploymentReplicaSets(o)
	case *api.ReplicaSet:
		d.meta(m)
		d.line(0, "Selector", selectorString(o.Spec.Selector))
		d.controlledBy(m)
		d.line(0, "Replicas", fmt.Sprintf("%d current / %d desired", o.Status.Replicas, replicas(o.Spec.Replicas)))
		d.line(0, "Pods Status", fmt.Sprintf("%d Ready / %d Available", o.Status.ReadyReplicas, o.Status.AvailableReplicas))
		d.template(&o.Spec.Template)
	case *api.DaemonSet:
		d.meta(m)
		d.line(0, "Selector", selectorString(o.Spec.Selector))
		d.line(0, "Node-Selector", labelsString(o.Spec.Template.Spec.NodeSelector))
		st := o.Status
		d.line(0, "Desired Number of Nodes Scheduled", strconv.Itoa(int(st.DesiredNumberScheduled)))
		d.line(0, "Current Number of Nodes Scheduled", strconv.Itoa(int(st.CurrentNumberScheduled)))
		d.line(0, "Number of Nodes Scheduled with Up-to-date Pods", strconv.Itoa(int(st.UpdatedNumberScheduled)))
		d.line(0, "Number of Nodes Scheduled with Available Pods", strconv.Itoa(int(st.NumberAvailable)))
		d.line(0, "Number of Nodes Misscheduled", strconv.Itoa(int(st.NumberMisscheduled)))
		d.template(&o.Spec.Template)
	case *api.Service:
		d.meta(m)
		d.line(0, "Selector", labelsString(o.Spec.Selector))
		typ := o.Spec.Type
		if typ == "" {
			typ = "ClusterIP"
		}
		d.line(0, "Type", typ)
		d.line(0, "IP", orNone(o.Spec.ClusterIP))
		if len(o.Spec.Ports) == 0 {
			d.line(0, "Port", none)
		}
		for _, p := range o.Spec.Ports {
			proto := p.Protocol
			if proto == "" {
				proto = "TCP"
			}
			d.line(0, "Port", fmt.Sprintf("%s  %d/%s", orNone(p.Name), p.Port, proto))
			if !p.TargetPort.IsZero() {
				d.line(0, "TargetPort", p.TargetPort.String()+"/"+proto)
			}
			if p.NodePort != 0 {
				d.line(0, "NodePort", fmt.Sprintf("%s  %d/%s", orNone(p.Name), p.NodePort, proto))
			}
		}
	case *api.Namespace:
		d.meta(m)
		phase := o.Status.Phase
		if phase == "" {
			phase = api.NamespaceActive
		}
		d.line(0, "Status", phase)
	case *api.Token:
		d.meta(m)
		d.line(0, "Role", o.Spec.Role)
		d.line(0, "Node", orNone(o.Spec.NodeName))
		d.line(0, "Namespaces", orNone(strings.Join(o.Spec.Namespaces, ",")))
		exp := "<never>"
		if o.Spec.Expires != nil && !o.Spec.Expires.IsZero() {
			exp = o.Spec.Expires.UTC().Format(time.RFC3339)
		}
		d.line(0, "Expires", exp)
		d.line(0, "Description", orNone(o.Spec.Description))
	case *api.Machine:
		d.machine(o)
	case *api.MachineConfigPool:
		d.machineConfigPool(o)
	case *api.ClusterVersion:
		d.clusterVersion(o)
	case *api.Event:
		d.meta(m)
		ref := o.InvolvedObject
		d.line(0, "Involved Object", fmt.Sprintf("%s/%s", strings.ToLower(ref.Kind), ref.Name))
		d.line(0, "Type", o.Type)
		d.line(0, "Reason", o.Reason)
		d.line(0, "Message", o.Message)
		d.line(0, "Source", eventSource(o))
		d.line(0, "Count", strconv.Itoa(int(o.Count)))
		d.line(0, "Last Seen", age(d.now, eventTime(o)))
	default:
		d.meta(m)
	}
	if r.Kind != "Event" && r.Kind != "Token" {
		d.events(r, m)
	}
	return d.tw.Flush()
}

// meta writes the metadata most kinds share.
func (d *describer) meta(m *api.ObjectMeta) {
	d.mapLines(0, "Labels", m.Labels, "=")
	d.mapLines(0, "Annotations", shownAnnotations(m.Annotations), ": ")
	d.line(0, "CreationTimestamp", timestamp(m.CreationTimestamp))
}

func (d *describer) controlledBy(m *api.ObjectMeta) {
	for _, ref := range m.OwnerReferences {
		if ref.Controller != nil && *ref.Controller {
			d.line(0, "Controlled By", ref.Kind+"/"+ref.Name)
			return
		}
	}
}

func timestamp(t *api.Time) string {
	if t == nil || t.IsZero() {
		return "<unknown>"
	}
	return t.UTC().Format(time.RFC1123Z)
}

func intOrNone(v *api.IntOrString) string {
	if v == nil {
		return none
	}
	return v.String()
}

func (d *describer) pod(p *api.Pod) {
	prio := "0"
	if p.Spec.Priority != nil {
		prio = strconv.Itoa(int(*p.Spec.Priority))
	}
	d.line(0, "Priority", prio)
	if p.Spec.PriorityClassName != "" {
		d.line(0, "Priority Class Name", p.Spec.PriorityClassName)
	}
	node := none
	if p.Spec.NodeName != "" {
		node = p.Spec.NodeName
		if p.Status.HostIP != "" {
			node += "/" + p.Status.HostIP
		}
	}
	d.line(0, "Node", node)
	if p.Status.StartTime != nil {
		d.line(0, "Start Time", timestamp(p.Status.StartTime))
	}
	d.mapLines(0, "Labels", p.Labels, "=")
	d.mapLines(0, "Annotations", shownAnnotations(p.Annotations), ": ")
	status := p.Status.Phase
	if dt := p.DeletionTimestamp; dt != nil {
		// The deletionTimestamp of a graceful delete is when the grace
		// period ends.
		if left := dt.Sub(d.now); left > 0 {
			status = "Terminating (grace period ends in " + humanAge(left) + ")"
		} else {
			status = "Terminating (grace period ended " + humanAge(-left) + " ago)"
		}
	}
	d.line(0, "Status", orNone(status))
	if g := p.DeletionGracePeriodSeconds; g != nil {
		d.line(0, "Termination Grace Period", strconv.FormatInt(*g, 10)+"s")
	}
	if p.Status.Reason != "" {
		d.line(0, "Reason", p.Status.Reason)
	}
	if p.Status.Message != "" {
		d.line(0, "Message", p.Status.Message)
	}
	d.line(0, "IP", orNone(p.Status.PodIP))
	d.controlledBy(&p.ObjectMeta)
	if len(p.Spec.InitContainers) > 0 {
		d.section(0, "Init Containers")
		d.containers(p.Spec.InitContainers, p.Status.InitContainerStatuses, false)
	}
	d.section(0, "Containers")
	d.containers(p.Spec.Containers, p.Status.ContainerStatuses, false)
	d.podConditions(p.Status.Conditions)
	if len(p.Spec.Volumes) > 0 {
		d.section(0, "Volumes")
		for _, v := range p.Spec.Volumes {
			d.section(1, v.Name)
			switch {
			case v.HostPath != nil:
				d.line(2, "Type", "HostPath (bare host directory volume)")
				d.line(2, "Path", v.HostPath.Path)
			case v.EmptyDir != nil:
				d.line(2, "Type", "EmptyDir (a temporary directory that shares a pod's lifetime)")
			case v.PersistentVolumeClaim != nil:
				d.line(2, "Type", "PersistentVolumeClaim (a reference to a PersistentVolumeClaim in the same namespace)")
				d.line(2, "ClaimName", v.PersistentVolumeClaim.ClaimName)
			}
		}
	} else {
		d.line(0, "Volumes", none)
	}
	qos := p.Status.QOSClass
	if qos == "" {
		qos = qosClass(&p.Spec)
	}
	d.line(0, "QoS Class", qos)
	d.mapLines(0, "Node-Selectors", p.Spec.NodeSelector, "=")
	d.tolerations(p.Spec.Tolerations)
}

// podConditions writes the pod's conditions as kubectl does (Type and
// Status), with Reason and Message columns when a condition has them: a
// pod the scheduler could not place says why there (PodScheduled False
// Unschedulable, "0/5 nodes are available: ...", SPEC SCH-13).
func (d *describer) podConditions(cs []api.PodCondition) {
	if len(cs) == 0 {
		return
	}
	detail := false
	for _, c := range cs {
		detail = detail || c.Reason != "" || c.Message != ""
	}
	d.section(0, "Conditions")
	rows := [][]string{{"Type", "Status"}}
	if detail {
		rows[0] = append(rows[0], "Reason", "Message")
	}
	for _, c := range cs {
		row := []string{c.Type, c.Status}
		if detail {
			row = append(row, orNone(c.Reason), strings.TrimSpace(c.Message))
		}
		rows = append(rows, row)
	}
	d.table(1, rows)
}

// containers writes each container with its state from statuses. A
// pod's container names are indented by two spaces, a template's by three
// (inTemplate), as kubectl prints them; their fields by four either way.
func (d *describer) containers(cs []api.Container, statuses []api.ContainerStatus, inTemplate bool) {
	for _, c := range cs {
		if inTemplate {
			fmt.Fprintf(d.tw, "   %s:\n", c.Name)
		} else {
			d.section(1, c.Name)
		}
		var st *api.ContainerStatus
		for i := range statuses {
			if statuses[i].Name == c.Name {
				st = &statuses[i]
			}
		}
		if st != nil && st.ContainerID != "" {
			d.line(2, "Container ID", st.ContainerID)
		}
		d.line(2, "Image", c.Image)
		if st != nil && st.ImageID != "" {
			d.line(2, "Image ID", st.ImageID)
		}
		if len(c.Ports) == 0 {
			d.line(2, "Port", none)
			d.line(2, "Host Port", none)
		}
		for _, p := range c.Ports {
			proto := p.Protocol
			if proto == "" {
				proto = "TCP"
			}
			d.line(2, "Port", fmt.Sprintf("%d/%s", p.ContainerPort, proto))
			d.line(2, "Host Port", fmt.Sprintf("%d/%s", p.HostPort, proto))
		}
		if len(c.Command) > 0 {
			d.section(2, "Command")
			for _, a := range c.Command {
				d.row(3, a)
			}
		}
		if len(c.Args) > 0 {
			d.section(2, "Args")
			for _, a := range c.Args {
				d.row(3, a)
			}
		}
		if st != nil {
			d.state(2, "State", st.State)
			if st.LastState.Running != nil || st.LastState.Waiting != nil || st.LastState.Terminated != nil {
				d.state(2, "Last State", st.LastState)
			}
			d.line(2, "Ready", strconv.FormatBool(st.Ready))
			d.line(2, "Restart Count", strconv.Itoa(int(st.RestartCount)))
		}
		d.resources(2, "Limits", c.Resources.Limits)
		d.resources(2, "Requests", c.Resources.Requests)
		if len(c.Env) == 0 {
			d.line(2, "Environment", none)
		} else {
			d.section(2, "Environment")
			for _, e := range c.Env {
				d.line(3, e.Name, e.Value)
			}
		}
		if len(c.VolumeMounts) == 0 {
			d.line(2, "Mounts", none)
		} else {
			d.section(2, "Mounts")
			for _, vm := range c.VolumeMounts {
				mode := "rw"
				if vm.ReadOnly {
					mode = "ro"
				}
				d.row(3, fmt.Sprintf("%s from %s (%s)", vm.MountPath, vm.Name, mode))
			}
		}
	}
}

func (d *describer) state(level int, key string, s api.ContainerState) {
	switch {
	case s.Running != nil:
		d.line(level, key, "Running")
		d.line(level+1, "Started", timestamp(s.Running.StartedAt))
	case s.Waiting != nil:
		d.line(level, key, "Waiting")
		if s.Waiting.Reason != "" {
			d.line(level+1, "Reason", s.Waiting.Reason)
		}
		if s.Waiting.Message != "" {
			d.line(level+1, "Message", s.Waiting.Message)
		}
	case s.Terminated != nil:
		t := s.Terminated
		d.line(level, key, "Terminated")
		if t.Reason != "" {
			d.line(level+1, "Reason", t.Reason)
		}
		if t.Message != "" {
			d.line(level+1, "Message", t.Message)
		}
		d.line(level+1, "Exit Code", strconv.Itoa(int(t.ExitCode)))
		if t.Signal != 0 {
			d.line(level+1, "Signal", strconv.Itoa(int(t.Signal)))
		}
		d.line(level+1, "Started", timestamp(t.StartedAt))
		d.line(level+1, "Finished", timestamp(t.FinishedAt))
	default:
		d.line(level, key, "Waiting")
	}
}

func (d *describer) resources(level int, key string, rl api.ResourceList) {
	if len(rl) == 0 {
		return
	}
	d.section(level, key)
	for _, k := range slices.Sorted(maps.Keys(rl)) {
		q := rl[k]
		d.line(level+1, k, q.String())
	}
}

func (d *describer) tolerations(ts []api.Toleration) {
	if len(ts) == 0 {
		d.line(0, "Tolerations", none)
		return
	}
	for i, t := range ts {
		s := t.Key
		if t.Value != "" {
			s += "=" + t.Value
		}
		if t.Effect != "" {
			s += ":" + t.Effect
		}
		if t.Operator == api.TolerationOpExists && t.Value == "" {
			if t.Key == "" {
				s = "op=Exists"
			} else {
				s += " op=Exists"
			}
		}
		if t.TolerationSeconds != nil {
			s += fmt.Sprintf(" for %ds", *t.TolerationSeconds)
		}
		if i == 0 {
			d.line(0, "Tolerations", s)
		} else {
			d.row(0, "", s)
		}
	}
}

func (d *describer) template(t *api.PodTemplateSpec) {
	d.section(0, "Pod Template")
	d.mapLines(1, "Labels", t.Labels, "=")
	if len(t.Annotations) > 0 {
		d.mapLines(1, "Annotations", shownAnnotations(t.Annotations), ": ")
	}
	if len(t.Spec.InitContainers) > 0 {
		d.section(1, "Init Containers")
		d.containers(t.Spec.InitContainers, nil, true)
	}
	d.section(1, "Containers")
	d.containers(t.Spec.Containers, nil, true)
	d.mapLines(1, "Node-Selectors", t.Spec.NodeSelector, "=")
}

// deploymentReplicaSets writes kubectl's OldReplicaSets and NewReplicaSet
// lines: the new one runs the deployment's template, the old ones are the
// others that still have replicas, each as "name (status/spec replicas
// created)".
func (d *describer) deploymentReplicaSets(dep *api.Deployment) {
	h, err := history(d.ctx, d.cl, dep.Namespace, dep.UID)
	if err != nil {
		fmt.Fprintf(d.stderr, "Warning: cannot list the replica sets of deployment/%s: %v\n", dep.Name, err)
		return
	}
	want, err := templateKey(&dep.Spec.Template)
	if err != nil {
		fmt.Fprintf(d.stderr, "Warning: deployment/%s: %v\n", dep.Name, err)
		return
	}
	var newRS *api.ReplicaSet
	// Newest first, so that of two replica sets with the same template
	// (which the controller does not make) the newer is the new one.
	for _, rv := range slices.Backward(h) {
		t := rv.rs.Spec.Template
		t.Labels = withoutKey(t.Labels, templateHashLabel)
		if key, err := templateKey(&t); err == nil && key == want {
			newRS = rv.rs
			break
		}
	}
	if newRS == nil {
		// The controller has not made it yet; the deployment's revision
		// names the one it last rolled out.
		for _, rv := range h {
			if rev := dep.Annotations[revisionAnnotation]; rev != "" && rv.rs.Annotations[revisionAnnotation] == rev {
				newRS = rv.rs
			}
		}
	}
	var old []string
	for _, rv := range h {
		if rv.rs != newRS && replicas(rv.rs.Spec.Replicas) > 0 {
			old = append(old, replicaSetSummary(rv.rs))
		}
	}
	d.line(0, "OldReplicaSets", orNone(strings.Join(old, ", ")))
	if newRS == nil {
		d.line(0, "NewReplicaSet", none)
		return
	}
	d.line(0, "NewReplicaSet", replicaSetSummary(newRS))
}

func replicaSetSummary(rs *api.ReplicaSet) string {
	return fmt.Sprintf("%s (%d/%d replicas created)", rs.Name, rs.Status.Replicas, replicas(rs.Spec.Replicas))
}

// templateKey is a pod template's JSON, to tell whether two are the same.
func templateKey(t *api.PodTemplateSpec) (string, error) {
	b, err := json.Marshal(t)
	if err != nil {
		return "", fmt.Errorf("encode pod template: %w", err)
	}
	return string(b), nil
}

func (d *describer) node(n *api.Node) {
	d.line(0, "Roles", nodeRoles(n))
	d.mapLines(0, "Labels", n.Labels, "=")
	d.mapLines(0, "Annotations", shownAnnotations(n.Annotations), ": ")
	d.line(0, "CreationTimestamp", timestamp(n.CreationTimestamp))
	if len(n.Spec.Taints) == 0 {
		d.line(0, "Taints", none)
	}
	for i, t := range n.Spec.Taints {
		s := t.Key
		if t.Value != "" {
			s += "=" + t.Value
		}
		s += ":" + t.Effect
		if i == 0 {
			d.line(0, "Taints", s)
		} else {
			d.row(0, "", s)
		}
	}
	d.line(0, "Unschedulable", strconv.FormatBool(n.Spec.Unschedulable))
	d.line(0, "Zone", d.zoneState(n))
	if want, ok := n.Annotations[api.AnnotationDesiredConfig]; ok {
		d.section(0, "Machine Config")
		d.line(1, "State", orNone(n.Annotations[api.AnnotationMCState]))
		if r := n.Annotations[api.AnnotationMCReason]; r != "" {
			d.line(1, "Reason", r)
		}
		d.line(1, "Current", orNone(n.Annotations[api.AnnotationCurrentConfig]))
		d.line(1, "Desired", want)
	}
	d.section(0, "Conditions")
	rows := [][]string{
		{"Type", "Status", "LastHeartbeatTime", "LastTransitionTime", "Reason", "Message"},
		{"----", "------", "-----------------", "------------------", "------", "-------"},
	}
	for _, c := range n.Status.Conditions {
		rows = append(rows, []string{c.Type, c.Status, timestamp(c.LastHeartbeatTime), timestamp(c.LastTransitionTime), c.Reason, c.Message})
	}
	d.table(1, rows)
	d.section(0, "Addresses")
	for _, a := range n.Status.Addresses {
		d.line(1, a.Type, a.Address)
	}
	d.resources(0, "Capacity", n.Status.Capacity)
	d.resources(0, "Allocatable", n.Status.Allocatable)
	info := n.Status.NodeInfo
	d.section(0, "System Info")
	d.line(1, "Machine ID", info.MachineID)
	d.line(1, "System UUID", info.SystemUUID)
	d.line(1, "Boot ID", info.BootID)
	d.line(1, "Kernel Version", info.KernelVersion)
	d.line(1, "OS Image", info.OSImage)
	d.line(1, "Operating System", info.OperatingSystem)
	d.line(1, "Architecture", info.Architecture)
	d.line(1, "Container Runtime Version", info.ContainerRuntimeVersion)
	d.line(1, "Kubelet Version", info.KubeletVersion)
	if n.Spec.PodCIDR != "" {
		d.line(0, "PodCIDR", n.Spec.PodCIDR)
	}
	if len(n.Spec.PodCIDRs) > 0 {
		d.line(0, "PodCIDRs", strings.Join(n.Spec.PodCIDRs, ","))
	}
	d.nodePods(n)
}

// machine shows a machine as `oc describe machine` does the parts outpost
// has: phase, node, provider, hooks and conditions (MCH-1..4).
func (d *describer) machine(m *api.Machine) {
	d.meta(&m.ObjectMeta)
	d.line(0, "Phase", orNone(m.Status.Phase))
	node := ""
	if m.Status.NodeRef != nil {
		node = m.Status.NodeRef.Name
	}
	d.line(0, "Node", orNone(node))
	d.line(0, "Provider ID", orNone(m.Spec.ProviderID))
	if dt := m.DeletionTimestamp; dt != nil {
		d.line(0, "Deleting Since", timestamp(dt))
	}
	d.section(0, "Lifecycle Hooks")
	for _, point := range []struct {
		name  string
		hooks []api.LifecycleHook
	}{{"Pre Drain", m.Spec.LifecycleHooks.PreDrain}, {"Pre Terminate", m.Spec.LifecycleHooks.PreTerminate}} {
		if len(point.hooks) == 0 {
			d.line(1, point.name, none)
			continue
		}
		for i, h := range point.hooks {
			if i == 0 {
				d.line(1, point.name, h.Name+" (owner "+h.Owner+")")
			} else {
				d.row(1, "", h.Name+" (owner "+h.Owner+")")
			}
		}
	}
	if len(m.Status.Conditions) == 0 {
		d.line(0, "Conditions", none)
		return
	}
	d.section(0, "Conditions")
	rows := [][]string{{"Type", "Status", "LastTransitionTime", "Reason", "Message"}, {"----", "------", "------------------", "------", "-------"}}
	for _, c := range m.Status.Conditions {
		rows = append(rows, []string{c.Type, c.Status, timestamp(c.LastTransitionTime), c.Reason, c.Message})
	}
	d.table(1, rows)
}

// machineConfigPool shows a pool as `oc describe mcp` does the parts
// that matter: what it selects, its target and counts, its conditions,
// and each of its nodes with its update state (UPD-9).
// conditionTable prints conditions given as rows of type, status, last
// transition, reason and message.
func (d *describer) conditionTable(rows [][]string) {
	if len(rows) == 0 {
		return
	}
	d.section(0, "Conditions")
	d.table(1, append([][]string{{"Type", "Status", "LastTransitionTime", "Reason", "Message"}, {"----", "------", "------------------", "------", "-------"}}, rows...))
}

func (d *describer) clusterVersion(cv *api.ClusterVersion) {
	d.meta(&cv.ObjectMeta)
	d.line(0, "Cluster ID", orNone(cv.Spec.ClusterID))
	d.line(0, "Upstream", orNone(cv.Spec.Upstream))
	d.line(0, "Channel", orNone(cv.Spec.Channel))
	desired := "<none>"
	if u := cv.Spec.DesiredUpdate; u != nil {
		desired = strings.TrimSpace(u.Version + " " + u.Image)
		if len(u.AcceptRisks) > 0 {
			desired += " (accepted risks: " + strings.Join(u.AcceptRisks, ", ") + ")"
		}
	}
	d.line(0, "Desired Update", desired)
	keys := "<none>"
	if k, err := api.ParseTrustedKeys([]byte(cv.Spec.TrustedKeys)); err == nil {
		keys = strconv.Itoa(len(k))
	}
	d.line(0, "Trusted Keys", keys)
	st := cv.Status
	d.line(0, "Desired", orNone(strings.TrimSpace(st.Desired.Version+" "+st.Desired.Image)))
	var conds [][]string
	for _, c := range st.Conditions {
		conds = append(conds, []string{c.Type, c.Status, timestamp(c.LastTransitionTime), c.Reason, c.Message})
	}
	d.conditionTable(conds)
	if len(st.History) > 0 {
		d.section(0, "History")
		rows := [][]string{{"State", "Started", "Completed", "Version", "Verified", "Image"}, {"-----", "-------", "---------", "-------", "--------", "-----"}}
		for _, h := range st.History {
			rows = append(rows, []string{h.State, timestamp(&h.StartedTime), timestamp(h.CompletionTime), h.Version, strconv.FormatBool(h.Verified), orNone(h.Image)})
		}
		d.table(1, rows)
	}
	d.section(0, "Available Updates")
	if len(st.AvailableUpdates)+len(st.ConditionalUpdates) == 0 {
		d.line(1, "<none>", "")
	}
	rows := [][]string{{"Version", "Recommended", "Image"}, {"-------", "-----------", "-----"}}
	for _, r := range st.AvailableUpdates {
		rows = append(rows, []string{r.Version, "True", r.Image})
	}
	for _, cu := range st.ConditionalUpdates {
		rec := "Unknown"
		if len(cu.Conditions) > 0 {
			rec = cu.Conditions[0].Status
			if rec != api.ConditionTrue {
				rec += " (" + cu.Conditions[0].Reason + ")"
			}
		}
		rows = append(rows, []string{cu.Release.Version, rec, cu.Release.Image})
	}
	if len(rows) > 2 {
		d.table(1, rows)
	}
}

func (d *describer) machineConfigPool(p *api.MachineConfigPool) {
	d.meta(&p.ObjectMeta)
	d.line(0, "Machine Config Selector", selectorString(p.Spec.MachineConfigSelector))
	d.line(0, "Node Selector", selectorString(p.Spec.NodeSelector))
	maxU := "1"
	if p.Spec.MaxUnavailable != nil {
		maxU = p.Spec.MaxUnavailable.String()
	}
	d.line(0, "Max Unavailable", maxU)
	d.line(0, "Paused", strconv.FormatBool(p.Spec.Paused))
	d.line(0, "Target Config", orNone(p.Spec.Configuration.Name))
	var sources []string
	for _, s := range p.Spec.Configuration.Source {
		sources = append(sources, s.Name)
	}
	d.line(0, "Rendered From", orNone(strings.Join(sources, ", ")))
	d.line(0, "Current Config", orNone(p.Status.Configuration.Name))
	st := p.Status
	d.line(0, "Machines", fmt.Sprintf("%d total, %d updated, %d ready, %d unavailable, %d degraded",
		st.MachineCount, st.UpdatedMachineCount, st.ReadyMachineCount, st.UnavailableMachineCount, st.DegradedMachineCount))
	var holders []string
	for _, h := range api.FleetLockHolders(p) {
		holders = append(holders, h.ID+" (for "+age(d.now, &h.Since)+")")
	}
	d.line(0, "FleetLock Holders", orNone(strings.Join(holders, ", ")))
	var conds [][]string
	for _, c := range st.Conditions {
		conds = append(conds, []string{c.Type, c.Status, timestamp(c.LastTransitionTime), c.Reason, c.Message})
	}
	d.conditionTable(conds)
	sel, err := api.SelectorFromLabelSelector(p.Spec.NodeSelector)
	if p.Spec.NodeSelector == nil || err != nil {
		return
	}
	nodes, _, err := d.cl.List(d.ctx, api.ResourceForKind("Node"), "", client.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		fmt.Fprintf(d.stderr, "warning: listing the pool's nodes: %v\n", err)
		return
	}
	// The pool's own nodes: a node a custom pool takes is not worker's.
	var pools []*api.MachineConfigPool
	if objs, _, err := d.cl.List(d.ctx, api.ResourceForKind("MachineConfigPool"), "", client.ListOptions{}); err == nil {
		for _, o := range objs {
			pools = append(pools, o.(*api.MachineConfigPool))
		}
	}
	d.section(0, "Nodes")
	rows := [][]string{{"Name", "State", "Current", "Desired", "Unschedulable", "Reason"}, {"----", "-----", "-------", "-------", "-------------", "------"}}
	for _, o := range nodes {
		n := o.(*api.Node)
		if len(pools) > 0 && api.PoolOf(n, pools) != p.Name {
			continue
		}
		a := n.Annotations
		rows = append(rows, []string{n.Name, orNone(a[api.AnnotationMCState]), orNone(a[api.AnnotationCurrentConfig]), orNone(a[api.AnnotationDesiredConfig]),
			strconv.FormatBool(n.Spec.Unschedulable), a[api.AnnotationMCReason]})
	}
	d.table(1, rows)
}

// zoneState is n's zone and its state as the leader counts it (TNT-8):
// how many of its nodes are ready and how fast its nodes may be tainted
// for eviction.
func (d *describer) zoneState(n *api.Node) string {
	zone := scheduler.ZoneOf(n.Labels)
	name := zone
	if name == "" {
		name = none
	}
	l, err := d.cl.Zones(d.ctx)
	if err != nil {
		return name + " (state unknown: " + err.Error() + ")"
	}
	for _, z := range l.Items {
		if z.Name != zone {
			continue
		}
		s := fmt.Sprintf("%s (%s: %d of %d nodes ready", name, z.State, z.Ready, z.Nodes)
		switch {
		case l.MasterDisruption:
			s += "; every zone is in FullDisruption: the control plane takes itself for cut off and evicts nothing"
		case z.EvictionRate == 0:
			s += "; no node is tainted for eviction in this state"
		default:
			s += fmt.Sprintf("; nodes tainted for eviction at most %s/s", strconv.FormatFloat(z.EvictionRate, 'g', -1, 64))
		}
		return s + ")"
	}
	return name + " (not counted: no node of it reports a Ready condition)"
}

// nodePods lists the pods bound to n that have not finished, with their
// requests and limits and the totals against allocatable.
func (d *describer) nodePods(n *api.Node) {
	r := api.ResourceForKind("Pod")
	objs, _, err := d.cl.List(d.ctx, r, "", client.ListOptions{FieldSelector: "spec.nodeName=" + n.Name})
	if err != nil {
		d.line(0, "Non-terminated Pods", "<unable to list: "+err.Error()+">")
		return
	}
	var pods []*api.Pod
	for _, obj := range objs {
		p := obj.(*api.Pod)
		if p.Spec.NodeName != n.Name || api.IsPodPhaseTerminal(p.Status.Phase) {
			continue
		}
		pods = append(pods, p)
	}
	d.line(0, "Non-terminated Pods", fmt.Sprintf("(%d in total)", len(pods)))
	rows := [][]string{
		{"Namespace", "Name", "CPU Requests", "CPU Limits", "Memory Requests", "Memory Limits", "Age"},
		{"---------", "----", "------------", "----------", "---------------", "-------------", "---"},
	}
	var reqCPU, limCPU, reqMem, limMem int64
	for _, p := range pods {
		rc, lc, rm, lm := podTotals(p)
		reqCPU, limCPU, reqMem, limMem = reqCPU+rc, limCPU+lc, reqMem+rm, limMem+lm
		alloc := n.Status.Allocatable
		rows = append(rows, []string{p.Namespace, p.Name,
			shareText(cpuString(rc), rc, alloc[api.ResourceCPU].MilliValue()),
			shareText(cpuString(lc), lc, alloc[api.ResourceCPU].MilliValue()),
			shareText(memString(rm), rm, alloc[api.ResourceMemory].MilliValue()),
			shareText(memString(lm), lm, alloc[api.ResourceMemory].MilliValue()),
			age(d.now, p.CreationTimestamp)})
	}
	d.table(1, rows)
	alloc := n.Status.Allocatable
	d.section(0, "Allocated resources")
	d.table(1, [][]string{
		{"Resource", "Requests", "Limits"},
		{"--------", "--------", "------"},
		{"cpu", shareText(cpuString(reqCPU), reqCPU, alloc[api.ResourceCPU].MilliValue()),
			shareText(cpuString(limCPU), limCPU, alloc[api.ResourceCPU].MilliValue())},
		{"memory", shareText(memString(reqMem), reqMem, alloc[api.ResourceMemory].MilliValue()),
			shareText(memString(limMem), limMem, alloc[api.ResourceMemory].MilliValue())},
	})
}

// podTotals sums a pod's container requests and limits in thousandths.
func podTotals(p *api.Pod) (reqCPU, limCPU, reqMem, limMem int64) {
	for _, c := range p.Spec.Containers {
		reqCPU += c.Resources.Requests[api.ResourceCPU].MilliValue()
		limCPU += c.Resources.Limits[api.ResourceCPU].MilliValue()
		reqMem += c.Resources.Requests[api.ResourceMemory].MilliValue()
		limMem += c.Resources.Limits[api.ResourceMemory].MilliValue()
	}
	return
}

// shareText is "250m (12%)": an amount and its part of what is
// allocatable.
func shareText(amount string, milli, allocMilli int64) string {
	if allocMilli <= 0 {
		return amount + " (0%)"
	}
	return fmt.Sprintf("%s (%d%%)", amount, milli*100/allocMilli)
}

// cpuString writes thousandths of a CPU as "250m" or "2".
func cpuString(milli int64) string { return api.NewMilliQuantity(milli).String() }

// memString writes thousandths of a byte in the largest binary unit that
// divides it exactly: "128Mi", "1Gi", "1500".
func memString(milli int64) string {
	b := milli / 1000
	if b == 0 {
		return "0"
	}
	for _, u := range []struct {
		suffix string
		size   int64
	}{{"Ti", 1 << 40}, {"Gi", 1 << 30}, {"Mi", 1 << 20}, {"Ki", 1 << 10}} {
		if b%u.size == 0 {
			return strconv.FormatInt(b/u.size, 10) + u.suffix
		}
	}
	return strconv.FormatInt(b, 10)
}

func eventSource(e *api.Event) string {
	s := e.Source.Component
	if e.Source.Host != "" {
		if s != "" {
			s += ", "
		}
		s += e.Source.Host
	}
	return s
}

// events lists the events about the object, oldest first. Events of
// cluster-scoped objects may live in any namespace.
func (d *describer) events(r *api.Resource, m *api.ObjectMeta) {
	ns := ""
	if r.Namespaced {
		ns = m.Namespace
	}
	evs, _, err := listEvents(d.ctx, d.cl, ns, eventFilter{r: r, ns: m.Namespace, name: m.Name})
	if err != nil {
		fmt.Fprintf(d.stderr, "Warning: cannot list the events of %s/%s: %v\n", r.Singular, m.Name, err)
	}
	if len(evs) == 0 {
		d.line(0, "Events", none)
		return
	}
	d.section(0, "Events")
	rows := [][]string{{"Type", "Reason", "Age", "From", "Message"}, {"----", "------", "----", "----", "-------"}}
	for _, obj := range evs {
		e := obj.(*api.Event)
		rows = append(rows, []string{e.Type, e.Reason, eventAge(d.now, e), eventSource(e), strings.TrimSpace(e.Message)})
	}
	d.table(1, rows)
}

// qosClass is the pod's quality-of-service class, for pods whose status
// does not carry it.
func qosClass(spec *api.PodSpec) string { return api.QOSClassOf(spec) }

package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/outpost-edge/outpost/controlplane/api"
)

const none = "<none>"

// humanAge renders a duration the way kubectl's AGE column does: the two
// largest units while they are small, one unit once it is large.
func humanAge(d time.Duration) string {
	if d < -time.Second {
		return "<invalid>"
	}
	if d < 0 {
		d = 0
	}
	sec := int64(d / time.Second)
	min := sec / 60
	hour := min / 60
	day := hour / 24
	year := day / 365
	switch {
	case sec < 120:
		return fmt.Sprintf("%ds", sec)
	case min < 10:
		if s := sec % 60; s != 0 {
			return fmt.Sprintf("%dm%ds", min, s)
		}
		return fmt.Sprintf("%dm", min)
	case min < 180:
		return fmt.Sprintf("%dm", min)
	case hour < 8:
		if m := min % 60; m != 0 {
			return fmt.Sprintf("%dh%dm", hour, m)
		}
		return fmt.Sprintf("%dh", hour)
	case hour < 48:
		return fmt.Sprintf("%dh", hour)
	case hour < 24*8:
		if h := hour % 24; h != 0 {
			return fmt.Sprintf("%dd%dh", day, h)
		}
		return fmt.Sprintf("%dd", day)
	case year < 2:
		return fmt.Sprintf("%dd", day)
	case year < 8:
		if dd := day % 365; dd != 0 {
			return fmt.Sprintf("%dy%dd", year, dd)
		}
		return fmt.Sprintf("%dy", year)
	default:
		return fmt.Sprintf("%dy", year)
	}
}

// age is the time since t, or "<unknown>" when the time is not set.
func age(now time.Time, t *api.Time) string {
	if t == nil || t.IsZero() {
		return "<unknown>"
	}
	return humanAge(now.Sub(t.Time))
}

// printOptions say which columns a table has.
type printOptions struct {
	wide          bool
	showLabels    bool
	withNamespace bool // -A: a NAMESPACE column first
	withKind      bool // several types: names as "pod/x"
	now           time.Time
}

// table is a header and rows; widths grow as rows are printed, so that a
// watch keeps its columns aligned with what was printed before.
type table struct {
	header []string
	widths []int
	headed bool
}

func newTable(header []string) *table {
	return &table{header: header, widths: make([]int, len(header))}
}

// omitHeader makes print leave the header out (--no-headers); the
// columns are then as wide as the rows need.
func (t *table) omitHeader() { t.headed = true }

// print writes the header (the first time) and rows, padding columns to
// the widest cell seen so far with three spaces between columns.
func (t *table) print(w io.Writer, rows [][]string) error {
	measure := func(row []string) {
		for i, c := range row {
			if i < len(t.widths) && len(c) > t.widths[i] {
				t.widths[i] = len(c)
			}
		}
	}
	if !t.headed {
		measure(t.header)
	}
	for _, r := range rows {
		measure(r)
	}
	var b bytes.Buffer
	line := func(row []string) {
		for i, c := range row {
			b.WriteString(c)
			if i == len(row)-1 {
				break
			}
			b.WriteString(strings.Repeat(" ", t.widths[i]-len(c)+3))
		}
		b.WriteByte('\n')
	}
	if !t.headed {
		line(t.header)
		t.headed = true
	}
	for _, r := range rows {
		line(r)
	}
	_, err := w.Write(b.Bytes())
	return err
}

// columns is how one kind prints as a table row.
type columns struct {
	header []string
	wide   []string // extra columns for -o wide
	row    func(obj api.Object, now time.Time, wide bool) []string
}

// tableColumns returns the columns of r; kinds without their own have
// NAME and AGE.
func tableColumns(r *api.Resource) columns {
	switch r.Kind {
	case "Pod":
		return columns{
			header: []string{"NAME", "READY", "STATUS", "RESTARTS", "AGE"},
			wide:   []string{"IP", "NODE", "NOMINATED NODE"},
			row:    podRow,
		}
	case "Node":
		return columns{
			header: []string{"NAME", "STATUS", "ROLES", "AGE", "VERSION"},
			wide:   []string{"INTERNAL-IP", "OS-IMAGE", "KERNEL-VERSION", "CONTAINER-RUNTIME"},
			row:    nodeRow,
		}
	case "Namespace":
		return columns{header: []string{"NAME", "STATUS", "AGE"}, row: namespaceRow}
	case "Deployment":
		return columns{
			header: []string{"NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"},
			wide:   []string{"CONTAINERS", "IMAGES", "SELECTOR"},
			row:    deploymentRow,
		}
	case "ReplicaSet":
		return columns{
			header: []string{"NAME", "DESIRED", "CURRENT", "READY", "AGE"},
			wide:   []string{"CONTAINERS", "IMAGES", "SELECTOR"},
			row:    replicaSetRow,
		}
	case "DaemonSet":
		return columns{
			header: []string{"NAME", "DESIRED", "CURRENT", "READY", "UP-TO-DATE", "AVAILABLE", "NODE SELECTOR", "AGE"},
			wide:   []string{"CONTAINERS", "IMAGES", "SELECTOR"},
			row:    daemonSetRow,
		}
	case "Service":
		return columns{
			header: []string{"NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"},
			wide:   []string{"SELECTOR"},
			row:    serviceRow,
		}
	case "Event":
		return columns{header: []string{"LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"}, wide: []string{"SOURCE", "FIRST SEEN", "COUNT", "NAME"}, row: eventRow}
	case "Token":
		return columns{header: []string{"NAME", "ROLE", "NODE", "NAMESPACES", "EXPIRES"}, row: tokenRow}
	case "PodDisruptionBudget":
		return columns{header: []string{"NAME", "MIN AVAILABLE", "MAX UNAVAILABLE", "ALLOWED DISRUPTIONS", "AGE"}, row: func(obj api.Object, now time.Time, _ bool) []string {
			b := obj.(*api.PodDisruptionBudget)
			minA, maxU := "N/A", "N/A"
			if b.Spec.MinAvailable != nil {
				minA = b.Spec.MinAvailable.String()
			}
			if b.Spec.MaxUnavailable != nil {
				maxU = b.Spec.MaxUnavailable.String()
			}
			return []string{b.Name, minA, maxU, strconv.Itoa(int(b.Status.DisruptionsAllowed)), age(now, b.CreationTimestamp)}
		}}
	case "Machine":
		return columns{header: []string{"NAME", "PHASE", "NODE", "ROLE", "DOMAIN", "AGE"}, row: func(obj api.Object, now time.Time, _ bool) []string {
			m := obj.(*api.Machine)
			node := ""
			if m.Status.NodeRef != nil {
				node = m.Status.NodeRef.Name
			}
			return []string{m.Name, orNone(m.Status.Phase), orNone(node), orNone(m.Labels["machine.openshift.io/cluster-api-machine-role"]),
				orNone(m.Labels["machine.openshift.io/zone"]), age(now, m.CreationTimestamp)}
		}}
	case "MachineSet":
		return columns{header: []string{"NAME", "DESIRED", "CURRENT", "READY", "AVAILABLE", "AGE"}, row: func(obj api.Object, now time.Time, _ bool) []string {
			ms := obj.(*api.MachineSet)
			want := int32(1)
			if ms.Spec.Replicas != nil {
				want = *ms.Spec.Replicas
			}
			return []string{ms.Name, strconv.Itoa(int(want)), strconv.Itoa(int(ms.Status.Replicas)), strconv.Itoa(int(ms.Status.ReadyReplicas)),
				strconv.Itoa(int(ms.Status.AvailableReplicas)), age(now, ms.CreationTimestamp)}
		}}
	case "ControlPlaneMachineSet":
		return columns{header: []string{"NAME", "DESIRED", "CURRENT", "READY", "UPDATED", "UNAVAILABLE", "STATE", "AGE"}, row: func(obj api.Object, now time.Time, _ bool) []string {
			c := obj.(*api.ControlPlaneMachineSet)
			want := "3"
			if c.Spec.Replicas != nil {
				want = strconv.Itoa(int(*c.Spec.Replicas))
			}
			state := c.Spec.State
			if state == "" {
				state = api.ControlPlaneInactive
			}
			return []string{c.Name, want, strconv.Itoa(int(c.Status.Replicas)), strconv.Itoa(int(c.Status.ReadyReplicas)),
				strconv.Itoa(int(c.Status.UpdatedReplicas)), strconv.Itoa(int(c.Status.UnavailableReplicas)), state, age(now, c.CreationTimestamp)}
		}}
	case "MachineHealthCheck":
		return columns{header: []string{"NAME", "MAXUNHEALTHY", "EXPECTEDMACHINES", "CURRENTHEALTHY", "AGE"}, row: func(obj api.Object, now time.Time, _ bool) []string {
			h := obj.(*api.MachineHealthCheck)
			maxU := "100%"
			if h.Spec.MaxUnhealthy != nil {
				maxU = h.Spec.MaxUnhealthy.String()
			}
			count := func(p *int32) string {
				if p == nil {
					return ""
				}
				return strconv.Itoa(int(*p))
			}
			return []string{h.Name, maxU, count(h.Status.ExpectedMachines), count(h.Status.CurrentHealthy), age(now, h.CreationTimestamp)}
		}}
	case "MachineConfig":
		return columns{header: []string{"NAME", "GENERATEDBYCONTROLLER", "IGNITIONVERSION", "AGE"}, row: func(obj api.Object, now time.Time, _ bool) []string {
			mc := obj.(*api.MachineConfig)
			return []string{mc.Name, mc.Annotations["machineconfiguration.openshift.io/generated-by-controller-version"],
				mc.Spec.Config.Ignition.Version, age(now, mc.CreationTimestamp)}
		}}
	case "MachineConfigPool":
		// The seed's columns, exactly (UPD-9).
		return columns{header: []string{"NAME", "CONFIG", "UPDATED", "UPDATING", "DEGRADED", "MACHINECOUNT", "READYMACHINECOUNT", "UPDATEDMACHINECOUNT", "DEGRADEDMACHINECOUNT", "AGE"},
			row: func(obj api.Object, now time.Time, _ bool) []string {
				p := obj.(*api.MachineConfigPool)
				cond := func(typ string) string {
					for _, c := range p.Status.Conditions {
						if c.Type == typ {
							return c.Status
						}
					}
					return ""
				}
				st := p.Status
				n := func(v int32) string { return strconv.Itoa(int(v)) }
				return []string{p.Name, st.Configuration.Name, cond(api.PoolUpdated), cond(api.PoolUpdating), cond(api.PoolDegraded),
					n(st.MachineCount), n(st.ReadyMachineCount), n(st.UpdatedMachineCount), n(st.DegradedMachineCount), age(now, p.CreationTimestamp)}
			}}
	case "ClusterVersion":
		// oc's columns: SINCE is when Progressing last changed.
		return columns{header: []string{"NAME", "VERSION", "AVAILABLE", "PROGRESSING", "SINCE", "STATUS"}, row: func(obj api.Object, now time.Time, _ bool) []string {
			cv := obj.(*api.ClusterVersion)
			cond := func(typ string) api.MachineCondition {
				for _, c := range cv.Status.Conditions {
					if c.Type == typ {
						return c
					}
				}
				return api.MachineCondition{}
			}
			version := ""
			for _, h := range cv.Status.History {
				if h.State == api.UpdateCompleted {
					version = h.Version
					break
				}
			}
			prog := cond(api.CVProgressing)
			status := prog.Message
			if ra := cond(api.CVReleaseAccepted); ra.Status == api.ConditionFalse && cv.Spec.DesiredUpdate != nil {
				target := cv.Spec.DesiredUpdate.Version
				if target == "" {
					target = cv.Spec.DesiredUpdate.Image
				}
				status = fmt.Sprintf("Cannot update to %s: %s", target, ra.Reason)
			}
			return []string{cv.Name, version, cond(api.CVAvailable).Status, prog.Status, age(now, prog.LastTransitionTime), status}
		}}
	case "ClusterOperator":
		// oc's columns: SINCE is when Available last changed.
		return columns{header: []string{"NAME", "VERSION", "AVAILABLE", "PROGRESSING", "DEGRADED", "SINCE", "MESSAGE"}, row: func(obj api.Object, now time.Time, _ bool) []string {
			co := obj.(*api.ClusterOperator)
			conds := map[string]api.MachineCondition{}
			for _, c := range co.Status.Conditions {
				conds[c.Type] = c
			}
			version := ""
			for _, v := range co.Status.Versions {
				if v.Name == "operator" {
					version = v.Version
				}
			}
			msg := conds[api.OperatorDegraded].Message
			if msg == "" {
				msg = conds[api.OperatorProgressing].Message
			}
			avail := conds[api.OperatorAvailable]
			return []string{co.Name, version, avail.Status, conds[api.OperatorProgressing].Status, conds[api.OperatorDegraded].Status, age(now, avail.LastTransitionTime), msg}
		}}
	case "EndpointSlice":
		// kubectl's columns: the ports, and the first three addresses.
		return columns{header: []string{"NAME", "ADDRESSTYPE", "PORTS", "ENDPOINTS", "AGE"}, row: func(obj api.Object, now time.Time, _ bool) []string {
			es := obj.(*api.EndpointSlice)
			var ports []string
			for _, p := range es.Ports {
				if p.Port != nil {
					ports = append(ports, strconv.Itoa(int(*p.Port)))
				}
			}
			var addrs []string
			for _, e := range es.Endpoints {
				addrs = append(addrs, e.Addresses...)
			}
			eps := "<unset>"
			if len(addrs) > 0 {
				eps = strings.Join(addrs[:min(3, len(addrs))], ",")
				if len(addrs) > 3 {
					eps += fmt.Sprintf(" + %d more...", len(addrs)-3)
				}
			}
			portList := "<unset>"
			if len(ports) > 0 {
				portList = strings.Join(ports, ",")
			}
			return []string{es.Name, es.AddressType, portList, eps, age(now, es.CreationTimestamp)}
		}}
	case "SchedulerPolicy":
		return columns{header: []string{"NAME", "SOURCE", "AGE"}, row: func(obj api.Object, now time.Time, _ bool) []string {
			sp := obj.(*api.SchedulerPolicy)
			return []string{sp.Name, orNone(sp.Spec.Source), age(now, sp.CreationTimestamp)}
		}}
	}
	return columns{header: []string{"NAME", "AGE"}, row: func(obj api.Object, now time.Time, _ bool) []string {
		m := obj.GetObjectMeta()
		return []string{m.Name, age(now, m.CreationTimestamp)}
	}}
}

// newTableFor builds the table of r with the columns p asks for.
func newTableFor(r *api.Resource, p printOptions) *table {
	c := tableColumns(r)
	h := slices.Clone(c.header)
	if p.wide {
		h = append(h, c.wide...)
	}
	if p.withNamespace && r.Namespaced {
		h = append([]string{"NAMESPACE"}, h...)
	}
	if p.showLabels {
		h = append(h, "LABELS")
	}
	return newTable(h)
}

// rowsFor renders objs of r as rows matching newTableFor(r, p).
func rowsFor(r *api.Resource, objs []api.Object, p printOptions) [][]string {
	c := tableColumns(r)
	rows := make([][]string, 0, len(objs))
	for _, obj := range objs {
		row := c.row(obj, p.now, p.wide)
		m := obj.GetObjectMeta()
		if p.withKind && r.Kind != "Event" {
			row[0] = refName(r, row[0])
		}
		if p.withNamespace && r.Namespaced {
			row = append([]string{m.Namespace}, row...)
		}
		if p.showLabels {
			row = append(row, labelsString(m.Labels))
		}
		rows = append(rows, row)
	}
	return rows
}

// labelsString is "a=b,c=d" in key order, or "<none>".
func labelsString(l map[string]string) string {
	if len(l) == 0 {
		return none
	}
	return api.FormatLabels(l)
}

func orNone(s string) string {
	if s == "" {
		return none
	}
	return s
}

func podRow(obj api.Object, now time.Time, wide bool) []string {
	p := obj.(*api.Pod)
	ready := 0
	var restarts int32
	var lastRestart *api.Time
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Ready {
			ready++
		}
		restarts += cs.RestartCount
		if t := cs.LastState.Terminated; t != nil && t.FinishedAt != nil && (lastRestart == nil || t.FinishedAt.After(lastRestart.Time)) {
			lastRestart = t.FinishedAt
		}
	}
	rs := strconv.Itoa(int(restarts))
	if restarts > 0 && lastRestart != nil {
		rs += " (" + age(now, lastRestart) + " ago)"
	}
	row := []string{
		p.Name,
		fmt.Sprintf("%d/%d", ready, len(p.Spec.Containers)),
		podStatus(p),
		rs,
		age(now, p.CreationTimestamp),
	}
	if wide {
		row = append(row, orNone(p.Status.PodIP), orNone(p.Spec.NodeName), orNone(p.Status.NominatedNodeName))
	}
	return row
}

// podStatus is the one word kubectl shows for a pod: the phase, refined by
// what its init containers and containers are doing.
func podStatus(p *api.Pod) string {
	reason := p.Status.Phase
	if p.Status.Reason != "" {
		reason = p.Status.Reason
	}
	if reason == "" {
		reason = api.PodPending
	}
	initializing := false
	for i, cs := range p.Status.InitContainerStatuses {
		switch s := cs.State; {
		case s.Terminated != nil && s.Terminated.ExitCode == 0:
			continue
		case s.Terminated != nil:
			switch {
			case s.Terminated.Reason != "":
				reason = "Init:" + s.Terminated.Reason
			case s.Terminated.Signal != 0:
				reason = fmt.Sprintf("Init:Signal:%d", s.Terminated.Signal)
			default:
				reason = fmt.Sprintf("Init:ExitCode:%d", s.Terminated.ExitCode)
			}
		case s.Waiting != nil && s.Waiting.Reason != "" && s.Waiting.Reason != "PodInitializing":
			reason = "Init:" + s.Waiting.Reason
		default:
			reason = fmt.Sprintf("Init:%d/%d", i, len(p.Spec.InitContainers))
		}
		initializing = true
		break
	}
	if !initializing {
		running := false
		for i := len(p.Status.ContainerStatuses) - 1; i >= 0; i-- {
			s := p.Status.ContainerStatuses[i].State
			switch {
			case s.Waiting != nil && s.Waiting.Reason != "":
				reason = s.Waiting.Reason
			case s.Terminated != nil && s.Terminated.Reason != "":
				reason = s.Terminated.Reason
			case s.Terminated != nil && s.Terminated.Signal != 0:
				reason = fmt.Sprintf("Signal:%d", s.Terminated.Signal)
			case s.Terminated != nil:
				reason = fmt.Sprintf("ExitCode:%d", s.Terminated.ExitCode)
			case s.Running != nil:
				running = true
			}
		}
		// A pod whose containers all run again after a restart is Running,
		// whatever an earlier container said.
		if reason == "Completed" && running {
			reason = api.PodRunning
		}
	}
	if p.DeletionTimestamp != nil {
		reason = "Terminating"
	}
	return reason
}

func nodeRow(obj api.Object, now time.Time, wide bool) []string {
	n := obj.(*api.Node)
	row := []string{n.Name, nodeStatus(n), nodeRoles(n), age(now, n.CreationTimestamp), orNone(n.Status.NodeInfo.KubeletVersion)}
	if wide {
		ip := ""
		for _, a := range n.Status.Addresses {
			if a.Type == "InternalIP" {
				ip = a.Address
				break
			}
		}
		info := n.Status.NodeInfo
		row = append(row, orNone(ip), orNone(info.OSImage), orNone(info.KernelVersion), orNone(info.ContainerRuntimeVersion))
	}
	return row
}

// nodeStatus is Ready, NotReady (Ready False, or Unknown: the control
// plane lost the node) or Unknown (no Ready condition at all), as kubectl
// prints it, with ",SchedulingDisabled" for a cordoned node.
func nodeStatus(n *api.Node) string {
	s := "Unknown"
	for _, c := range n.Status.Conditions {
		if c.Type != api.NodeReady {
			continue
		}
		s = "NotReady"
		if c.Status == api.ConditionTrue {
			s = "Ready"
		}
	}
	if n.Spec.Unschedulable {
		s += ",SchedulingDisabled"
	}
	return s
}

// nodeRoles reads the node-role.kubernetes.io/ROLE labels.
func nodeRoles(n *api.Node) string {
	var roles []string
	for k, v := range n.Labels {
		switch {
		case strings.HasPrefix(k, "node-role.kubernetes.io/"):
			if r := strings.TrimPrefix(k, "node-role.kubernetes.io/"); r != "" {
				roles = append(roles, r)
			}
		case k == "kubernetes.io/role" && v != "":
			roles = append(roles, v)
		}
	}
	if len(roles) == 0 {
		return none
	}
	slices.Sort(roles)
	return strings.Join(slices.Compact(roles), ",")
}

func namespaceRow(obj api.Object, now time.Time, _ bool) []string {
	ns := obj.(*api.Namespace)
	phase := ns.Status.Phase
	if phase == "" {
		phase = api.NamespaceActive
	}
	return []string{ns.Name, phase, age(now, ns.CreationTimestamp)}
}

func replicas(p *int32) int32 {
	if p == nil {
		return 1
	}
	return *p
}

// templateColumns are the CONTAINERS, IMAGES and SELECTOR wide columns.
func templateColumns(t *api.PodTemplateSpec, sel *api.LabelSelector) []string {
	var names, images []string
	for _, c := range t.Spec.Containers {
		names = append(names, c.Name)
		images = append(images, c.Image)
	}
	return []string{orNone(strings.Join(names, ",")), orNone(strings.Join(images, ",")), selectorString(sel)}
}

// selectorString renders a label selector in the text form of -l.
func selectorString(sel *api.LabelSelector) string {
	if sel == nil {
		return none
	}
	parts := []string{}
	for _, k := range slices.Sorted(maps.Keys(sel.MatchLabels)) {
		parts = append(parts, k+"="+sel.MatchLabels[k])
	}
	for _, e := range sel.MatchExpressions {
		switch e.Operator {
		case api.OpIn:
			parts = append(parts, e.Key+" in ("+strings.Join(e.Values, ",")+")")
		case api.OpNotIn:
			parts = append(parts, e.Key+" notin ("+strings.Join(e.Values, ",")+")")
		case api.OpExists:
			parts = append(parts, e.Key)
		case api.OpDoesNotExist:
			parts = append(parts, "!"+e.Key)
		default:
			parts = append(parts, e.Key+" "+e.Operator+" ("+strings.Join(e.Values, ",")+")")
		}
	}
	if len(parts) == 0 {
		return none
	}
	return strings.Join(parts, ",")
}

func deploymentRow(obj api.Object, now time.Time, wide bool) []string {
	d := obj.(*api.Deployment)
	row := []string{
		d.Name,
		fmt.Sprintf("%d/%d", d.Status.ReadyReplicas, replicas(d.Spec.Replicas)),
		strconv.Itoa(int(d.Status.UpdatedReplicas)),
		strconv.Itoa(int(d.Status.AvailableReplicas)),
		age(now, d.CreationTimestamp),
	}
	if wide {
		row = append(row, templateColumns(&d.Spec.Template, d.Spec.Selector)...)
	}
	return row
}

func replicaSetRow(obj api.Object, now time.Time, wide bool) []string {
	rs := obj.(*api.ReplicaSet)
	row := []string{
		rs.Name,
		strconv.Itoa(int(replicas(rs.Spec.Replicas))),
		strconv.Itoa(int(rs.Status.Replicas)),
		strconv.Itoa(int(rs.Status.ReadyReplicas)),
		age(now, rs.CreationTimestamp),
	}
	if wide {
		row = append(row, templateColumns(&rs.Spec.Template, rs.Spec.Selector)...)
	}
	return row
}

func daemonSetRow(obj api.Object, now time.Time, wide bool) []string {
	ds := obj.(*api.DaemonSet)
	st := ds.Status
	row := []string{
		ds.Name,
		strconv.Itoa(int(st.DesiredNumberScheduled)),
		strconv.Itoa(int(st.CurrentNumberScheduled)),
		strconv.Itoa(int(st.NumberReady)),
		strconv.Itoa(int(st.UpdatedNumberScheduled)),
		strconv.Itoa(int(st.NumberAvailable)),
		labelsString(ds.Spec.Template.Spec.NodeSelector),
		age(now, ds.CreationTimestamp),
	}
	if wide {
		row = append(row, templateColumns(&ds.Spec.Template, ds.Spec.Selector)...)
	}
	return row
}

func serviceRow(obj api.Object, now time.Time, wide bool) []string {
	s := obj.(*api.Service)
	typ := s.Spec.Type
	if typ == "" {
		typ = "ClusterIP"
	}
	row := []string{s.Name, typ, orNone(s.Spec.ClusterIP), serviceExternalIP(s), servicePorts(s.Spec.Ports), age(now, s.CreationTimestamp)}
	if wide {
		row = append(row, labelsString(s.Spec.Selector))
	}
	return row
}

// serviceExternalIP is kubectl's EXTERNAL-IP: the name an ExternalName
// service points at, <pending> for a LoadBalancer (no load balancer
// ever gives one an address here), <none> otherwise.
func serviceExternalIP(s *api.Service) string {
	switch s.Spec.Type {
	case api.ServiceTypeExternalName:
		return orNone(s.Spec.ExternalName)
	case api.ServiceTypeLoadBalancer:
		return "<pending>"
	}
	return none
}

// servicePorts is "80/TCP,443:30443/TCP".
func servicePorts(ports []api.ServicePort) string {
	if len(ports) == 0 {
		return none
	}
	parts := make([]string, 0, len(ports))
	for _, p := range ports {
		proto := p.Protocol
		if proto == "" {
			proto = "TCP"
		}
		if p.NodePort != 0 {
			parts = append(parts, fmt.Sprintf("%d:%d/%s", p.Port, p.NodePort, proto))
		} else {
			parts = append(parts, fmt.Sprintf("%d/%s", p.Port, proto))
		}
	}
	return strings.Join(parts, ",")
}

// eventTime is when an event last happened, for LAST SEEN and ordering.
func eventTime(e *api.Event) *api.Time {
	switch {
	case e.LastTimestamp != nil && !e.LastTimestamp.IsZero():
		return e.LastTimestamp
	case e.FirstTimestamp != nil && !e.FirstTimestamp.IsZero():
		return e.FirstTimestamp
	}
	return e.CreationTimestamp
}

// eventAge is when an event last happened and, for a repeated one, how
// often over how long: "2m (x5 over 10m)", as kubectl's LAST SEEN and
// describe's Age say it.
func eventAge(now time.Time, e *api.Event) string {
	a := age(now, eventTime(e))
	if e.Count > 1 && e.FirstTimestamp != nil && !e.FirstTimestamp.IsZero() {
		a = fmt.Sprintf("%s (x%d over %s)", a, e.Count, age(now, e.FirstTimestamp))
	}
	return a
}

func eventRow(obj api.Object, now time.Time, wide bool) []string {
	e := obj.(*api.Event)
	o := strings.ToLower(e.InvolvedObject.Kind) + "/" + e.InvolvedObject.Name
	row := []string{eventAge(now, e), e.Type, e.Reason, o, strings.TrimSpace(e.Message)}
	if wide {
		first := e.FirstTimestamp
		if first == nil || first.IsZero() {
			first = eventTime(e)
		}
		row = append(row, orNone(eventSource(e)), age(now, first), strconv.Itoa(int(max(e.Count, 1))), e.Name)
	}
	return row
}

func tokenRow(obj api.Object, _ time.Time, _ bool) []string {
	t := obj.(*api.Token)
	exp := "<never>"
	if t.Spec.Expires != nil && !t.Spec.Expires.IsZero() {
		exp = t.Spec.Expires.UTC().Format(time.RFC3339)
	}
	return []string{t.Name, t.Spec.Role, orNone(t.Spec.NodeName), orNone(strings.Join(t.Spec.Namespaces, ",")), exp}
}

// sortEvents orders events by when they last happened, oldest first, so
// the newest is at the bottom of the terminal.
func sortEvents(objs []api.Object) {
	slices.SortStableFunc(objs, func(a, b api.Object) int {
		ta, tb := eventTime(a.(*api.Event)), eventTime(b.(*api.Event))
		switch {
		case ta == nil && tb == nil:
			return 0
		case ta == nil:
			return -1
		case tb == nil:
			return 1
		}
		return ta.Compare(tb.Time)
	})
}

// Output formats of -o.
const (
	outputTable = ""
	outputWide  = "wide"
	outputName  = "name"
	outputJSON  = "json"
	outputYAML  = "yaml"
)

func checkOutput(o string) error {
	switch o {
	case outputTable, outputWide, outputName, outputJSON, outputYAML:
		return nil
	}
	if isTemplateOutput(o) {
		_, err := templatePrinter(o)
		return err
	}
	return usagef("unable to match a printer suitable for the output format %q, allowed formats are: %s", o, allowedOutputs)
}

// printRaw writes one JSON document (an object or a List) as -o json
// (indented), -o yaml or a template format (jsonpath=, custom-columns=)
// asks.
func printRaw(w io.Writer, format string, doc []byte) error {
	if isTemplateOutput(format) {
		p, err := templatePrinter(format)
		if err != nil {
			return err
		}
		return p.printDoc(w, doc)
	}
	switch format {
	case outputYAML:
		y, err := yaml.JSONToYAML(doc)
		if err != nil {
			return fmt.Errorf("convert reply to YAML: %w", err)
		}
		_, err = w.Write(y)
		return err
	default:
		var b bytes.Buffer
		if err := json.Indent(&b, doc, "", "    "); err != nil {
			return fmt.Errorf("%w: %w", errBadJSON, err)
		}
		b.WriteByte('\n')
		_, err := w.Write(b.Bytes())
		return err
	}
}

// listDocument wraps raw items as kubectl's `{"kind":"List"}`.
func listDocument(items []json.RawMessage) ([]byte, error) {
	if items == nil {
		items = []json.RawMessage{}
	}
	doc := struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Items      []json.RawMessage `json:"items"`
		Metadata   map[string]string `json:"metadata"`
	}{APIVersion: "v1", Kind: "List", Items: items, Metadata: map[string]string{"resourceVersion": ""}}
	return json.Marshal(doc)
}

// withTypeMeta makes sure a raw item names its kind and apiVersion (list
// items often do not), without re-encoding the rest of it.
func withTypeMeta(r *api.Resource, item json.RawMessage) json.RawMessage {
	var tm api.TypeMeta
	if json.Unmarshal(item, &tm) == nil && tm.Kind != "" && tm.APIVersion != "" {
		return item
	}
	trimmed := bytes.TrimSpace(item)
	if len(trimmed) < 2 || trimmed[0] != '{' {
		return item
	}
	var b bytes.Buffer
	b.Grow(len(trimmed) + 48)
	fmt.Fprintf(&b, `{"apiVersion":%q,"kind":%q`, r.APIVersion(), r.Kind)
	rest := bytes.TrimSpace(trimmed[1:])
	if rest[0] != '}' {
		b.WriteByte(',')
	}
	b.Write(rest)
	if tm.Kind != "" || tm.APIVersion != "" {
		// One of the two was present: fall back to a decode, which keeps
		// the last occurrence of a key.
		var m map[string]json.RawMessage
		if json.Unmarshal(item, &m) == nil {
			m["kind"], _ = json.Marshal(r.Kind)
			m["apiVersion"], _ = json.Marshal(r.APIVersion())
			if out, err := json.Marshal(m); err == nil {
				return out
			}
		}
	}
	return b.Bytes()
}

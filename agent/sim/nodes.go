package sim

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"strconv"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/version"
)

// Well-known labels a real agent sets on its Node.
const (
	LabelHostname = "kubernetes.io/hostname"
	LabelOS       = "kubernetes.io/os"
	LabelArch     = "kubernetes.io/arch"
)

// minNumberWidth is the fewest digits of a stamped copy's number:
// "worker-0001" sorts the same as a string and as a number up to 9999.
const minNumberWidth = 4

// LoadNodes reads the Node manifests of a YAML or JSON stream ("---"
// separated documents, or a v1 List). Any other kind is refused, naming
// the document. The warnings are those of strict decoding (Kubernetes
// fields outpost ignores).
func LoadNodes(data []byte) ([]*api.Node, api.Warnings, error) {
	objs, warns, err := api.DecodeYAMLOrJSON(data)
	if err != nil {
		return nil, nil, err
	}
	nodes := make([]*api.Node, 0, len(objs))
	var all api.Warnings
	for i, obj := range objs {
		n, ok := obj.(*api.Node)
		if !ok {
			return nil, nil, fmt.Errorf("object %d: kind %q: %w", i+1, obj.GetTypeMeta().Kind, ErrNotNode)
		}
		if n.Name == "" {
			return nil, nil, fmt.Errorf("object %d: metadata.name: Required value: %w", i+1, ErrBadNode)
		}
		nodes = append(nodes, n)
		for _, w := range warns[i] {
			all = append(all, fmt.Sprintf("node %q: %s", n.Name, w))
		}
	}
	if len(nodes) == 0 {
		return nil, nil, ErrNoNodes
	}
	return nodes, all, nil
}

// ReadNodesFile is LoadNodes on a file.
func ReadNodesFile(path string) ([]*api.Node, api.Warnings, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("read nodes file: %w", err)
	}
	nodes, warns, err := LoadNodes(data)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return nodes, warns, nil
}

// CopyName is the name of copy i (from 1) of template name when count
// copies are stamped out: name-0001 ... name-NNNN, numbers zero-padded to
// at least four digits and to the digits of count.
func CopyName(name string, i, count int) string {
	width := max(minNumberWidth, len(strconv.Itoa(count)))
	s := strconv.Itoa(i)
	for len(s) < width {
		s = "0" + s
	}
	return name + "-" + s
}

// Expand returns the names and templates of the nodes to simulate: every
// template as it is when count is 0, else count numbered copies of each
// (CopyName). Names must be unique and valid node names.
func Expand(templates []*api.Node, count int) ([]string, []*api.Node, error) {
	if count < 0 {
		return nil, nil, fmt.Errorf("count %d: %w", count, ErrBadCount)
	}
	n := len(templates)
	if count > 0 {
		n *= count
	}
	names := make([]string, 0, n)
	tmpl := make([]*api.Node, 0, n)
	seen := make(map[string]bool, n)
	for _, t := range templates {
		if count == 0 {
			names = append(names, t.Name)
			tmpl = append(tmpl, t)
			continue
		}
		for i := 1; i <= count; i++ {
			names = append(names, CopyName(t.Name, i, count))
			tmpl = append(tmpl, t)
		}
	}
	for i, name := range names {
		if seen[name] {
			return nil, nil, fmt.Errorf("node %q: %w", name, ErrDuplicateNode)
		}
		seen[name] = true
		if msgs := api.IsDNS1123Subdomain(name); len(msgs) > 0 {
			return nil, nil, fmt.Errorf("node %q (from %q): metadata.name: Invalid value: %s: %w", name, tmpl[i].Name, msgs[0], ErrBadNode)
		}
	}
	return names, tmpl, nil
}

// nodeNet is the fake addressing of the index-th simulated node: its
// InternalIP and the range its pods' IPs come from.
type nodeNet struct {
	hostIP string
	pods   netip.Prefix
}

// netFor numbers nodes into fake ranges: node i is 172.16.0.0/12 + i and
// its pods get 10.(i/256).(i%256).0/24. Past 65,536 nodes the pod ranges
// repeat; no packet ever uses them.
func netFor(i int) nodeNet {
	host := netip.AddrFrom4([4]byte{172, byte(16 + (i>>16)&15), byte(i >> 8), byte(i)})
	pods := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 0}), 24)
	return nodeNet{hostIP: host.String(), pods: pods}
}

// podIP returns the n-th address of the range (n from 0), skipping the
// network and broadcast addresses and wrapping at the end.
func podIP(p netip.Prefix, n uint32) string {
	if !p.Addr().Is4() {
		return ""
	}
	bits := min(32-p.Bits(), 16)
	size := uint32(1) << bits
	if size < 4 {
		return p.Addr().String()
	}
	off := 1 + n%(size-2)
	b := p.Masked().Addr().As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v += off
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}).String()
}

// defaultCapacity is scheduler_perf's node template: 4 CPU, 32Gi, 110 pods.
func defaultCapacity() api.ResourceList {
	return api.ResourceList{
		api.ResourceCPU:    api.NewQuantity(4),
		api.ResourceMemory: api.NewQuantity(32 << 30),
		api.ResourcePods:   api.NewQuantity(110),
	}
}

// defaultConditions are those of a healthy node, in the order kubelets
// report them; a template's conditions replace them by type.
func defaultConditions() []api.NodeCondition {
	return []api.NodeCondition{
		{Type: api.NodeMemoryPressure, Status: api.ConditionFalse, Reason: "KubeletHasSufficientMemory", Message: "simulated node has sufficient memory available"},
		{Type: api.NodeDiskPressure, Status: api.ConditionFalse, Reason: "KubeletHasNoDiskPressure", Message: "simulated node has no disk pressure"},
		{Type: api.NodePIDPressure, Status: api.ConditionFalse, Reason: "KubeletHasSufficientPID", Message: "simulated node has sufficient PID available"},
		{Type: api.NodeReady, Status: api.ConditionTrue, Reason: "KubeletReady", Message: "simulated agent is posting ready status"},
	}
}

// SimMarker is the container runtime a simulated node reports in
// status.nodeInfo, so that tools can tell simulated nodes from real ones.
const SimMarker = "outpost-sim://"

// buildNode is the Node the agent of name registers: the template's
// labels, annotations, taints and status, the well-known labels, defaults
// for what the template leaves out, and fake addresses. The template is
// not changed. ownRange says whether the template's spec.podCIDR is this
// node's own (a template used once) rather than shared by copies; without
// one the control plane gives the node its range, as it does a real
// agent's (SPEC NET-2).
func buildNode(tmpl *api.Node, name string, nn nodeNet, ownRange bool) *api.Node {
	n := &api.Node{
		TypeMeta: api.TypeMeta{Kind: "Node", APIVersion: "v1"},
		ObjectMeta: api.ObjectMeta{
			Name:        name,
			Labels:      make(map[string]string, len(tmpl.Labels)+3),
			Annotations: maps.Clone(tmpl.Annotations),
		},
		Spec: api.NodeSpec{
			Unschedulable: tmpl.Spec.Unschedulable,
			Taints:        slices.Clone(tmpl.Spec.Taints),
			ProviderID:    "sim://" + name,
		},
	}
	if ownRange && tmpl.Spec.PodCIDR != "" {
		n.Spec.PodCIDR = tmpl.Spec.PodCIDR
	}
	n.Labels[LabelOS] = "linux"
	n.Labels[LabelArch] = runtime.GOARCH
	maps.Copy(n.Labels, tmpl.Labels)
	n.Labels[LabelHostname] = name
	delete(n.Annotations, SilencedAnnotation) // silence is an API call, not a template property

	st := &n.Status
	st.Capacity = maps.Clone(tmpl.Status.Capacity)
	st.Allocatable = maps.Clone(tmpl.Status.Allocatable)
	if len(st.Capacity) == 0 {
		st.Capacity = maps.Clone(st.Allocatable)
	}
	if st.Capacity == nil {
		st.Capacity = api.ResourceList{}
	}
	for k, v := range defaultCapacity() {
		if _, ok := st.Capacity[k]; !ok {
			st.Capacity[k] = v
		}
	}
	if st.Allocatable == nil {
		st.Allocatable = api.ResourceList{}
	}
	for k, v := range st.Capacity {
		if _, ok := st.Allocatable[k]; !ok {
			st.Allocatable[k] = v
		}
	}
	st.Conditions = defaultConditions()
	for _, c := range tmpl.Status.Conditions {
		if i := slices.IndexFunc(st.Conditions, func(d api.NodeCondition) bool { return d.Type == c.Type }); i >= 0 {
			st.Conditions[i] = c
		} else {
			st.Conditions = append(st.Conditions, c)
		}
	}
	st.Addresses = []api.NodeAddress{{Type: "InternalIP", Address: nn.hostIP}, {Type: "Hostname", Address: name}}
	if ownRange && len(tmpl.Status.Addresses) > 0 {
		st.Addresses = slices.Clone(tmpl.Status.Addresses)
	}
	st.Images = slices.Clone(tmpl.Status.Images)
	sum := sha256.Sum256([]byte(name))
	id := hex.EncodeToString(sum[:16])
	st.NodeInfo = tmpl.Status.NodeInfo
	st.NodeInfo.MachineID = id
	st.NodeInfo.SystemUUID = id[:8] + "-" + id[8:12] + "-" + id[12:16] + "-" + id[16:20] + "-" + id[20:]
	st.NodeInfo.ContainerRuntimeVersion = SimMarker + version.Version
	st.NodeInfo.KubeletVersion = "outpost-sim/" + version.Version
	if st.NodeInfo.OSImage == "" {
		st.NodeInfo.OSImage = "outpost simulated node"
	}
	if st.NodeInfo.KernelVersion == "" {
		st.NodeInfo.KernelVersion = "sim"
	}
	st.NodeInfo.OperatingSystem = n.Labels[LabelOS]
	st.NodeInfo.Architecture = n.Labels[LabelArch]
	return n
}

// IsSimulated reports whether n was registered by a simulated agent.
func IsSimulated(n *api.Node) bool {
	v := n.Status.NodeInfo.ContainerRuntimeVersion
	return len(v) >= len(SimMarker) && v[:len(SimMarker)] == SimMarker
}

// validateNode checks a built node as the server will, so that a bad file
// fails before anything is written, with the field path and the rule.
func validateNode(n *api.Node) error {
	api.SetDefaults(n)
	if errs := api.Validate(n); len(errs) > 0 {
		return api.NewInvalid("Node", n.Name, errs)
	}
	return nil
}

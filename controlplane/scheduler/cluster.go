package scheduler

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// Well-known labels the scheduler reads.
const (
	LabelHostname         = "kubernetes.io/hostname"
	LabelZone             = "topology.kubernetes.io/zone"
	LabelRegion           = "topology.kubernetes.io/region"
	LabelZoneBeta         = "failure-domain.beta.kubernetes.io/zone"
	LabelRegionBeta       = "failure-domain.beta.kubernetes.io/region"
	AnnotationPreferAvoid = "scheduler.alpha.kubernetes.io/preferAvoidPods"
	TaintUnschedulable    = "node.kubernetes.io/unschedulable"
	conditionOutOfDisk    = "OutOfDisk"
)

// Cluster is the scheduler's view of the nodes, the pods placed on them
// and the services: per node the sums a predicate needs (requested
// resources, host ports, devices, images, taints, conditions), and
// cluster-wide indexes (pods by namespace and label, by controller, pods
// with affinity terms, nodes by image).
//
// It is kept up to date incrementally by its owner (informer events, and
// Assume/Forget for the scheduler's own bindings) and read by Schedule.
// It is not safe for concurrent use: one goroutine owns it and applies
// events between scheduling cycles, so that a cycle sees one consistent
// state without copying it (see DESIGN.md). The API objects it is given
// are kept, not copied, and never changed.
type Cluster struct {
	nodes      map[string]*NodeInfo
	nodeList   []*NodeInfo // nodes that exist (not ghosts), any order
	order      []*NodeInfo // the scan order: zones interleaved
	orderDirty bool
	numPods    int
	namespaces map[string]*nsPods
	byCtrl     map[string]*podList
	services   map[string]map[string]*serviceInfo
	imageNodes map[string]int
	// labelKeys counts the nodes that have each label key, so that a
	// score that depends only on a label's presence can tell at once
	// when every node (or none) has it.
	labelKeys map[string]int
	// flagCount counts the nodes with each flag, so that a cycle can skip
	// a predicate no node can fail.
	flagCount [numFlags]int
	// Views (views.go): pod groups by signature and by namespace, term
	// groups by signature and by kind, and the generation of node labels
	// they were counted at.
	groups     map[string]*podGroup
	groupsByNS map[string][]*podGroup
	useClock   uint64
	termIndex  map[string]*termGroup
	termGroups [4][]*termGroup
	labelsGen  uint64
}

// Node flags: what a node has that some predicate or priority rejects or
// scores, counted cluster-wide.
const (
	flagCordoned = iota
	flagBadCondition
	flagMemoryPressure
	flagDiskPressure
	flagPIDPressure
	flagNoScheduleTaint
	flagNoExecuteTaint
	flagPreferNoScheduleTaint
	flagPreferAvoid
	numFlags
)

// NewCluster returns an empty cluster.
func NewCluster() *Cluster {
	return &Cluster{
		nodes:      map[string]*NodeInfo{},
		namespaces: map[string]*nsPods{},
		byCtrl:     map[string]*podList{},
		services:   map[string]map[string]*serviceInfo{},
		imageNodes: map[string]int{},
		labelKeys:  map[string]int{},
		groups:     map[string]*podGroup{},
		groupsByNS: map[string][]*podGroup{},
		termIndex:  map[string]*termGroup{},
		labelsGen:  1,
	}
}

// NodeInfo is one node with the pods placed on it and their sums.
type NodeInfo struct {
	node *api.Node // nil for a ghost: pods point at a node not seen yet
	name string
	// labels are the node's, plus kubernetes.io/hostname when missing,
	// which every agent sets; nodes created by hand then behave the same.
	labels      map[string]string
	hostname    string // labels[LabelHostname], read often
	zone        string
	alloc       Resources
	allowedPods int64
	requested   Resources
	nonZeroCPU  int64
	nonZeroMem  int64
	pods        podList
	ports       map[hostPort]int32
	anyIPPorts  map[protoPort]int32
	devices     map[string]deviceCount
	images      map[string]int64
	avoid       []avoidEntry
	avoidRaw    string
	pos         int // index in Cluster.nodeList
	cond        nodeConditions
	flags       uint16
}

// deviceCount counts a device's users on a node.
type deviceCount struct{ readers, writers int32 }

// avoidEntry is one controller a node asks the scheduler to keep away.
type avoidEntry struct{ kind, uid string }

// nodeConditions are the node's flags the predicates read.
type nodeConditions struct {
	unschedulable      bool
	notReady           bool
	networkUnavailable bool
	outOfDisk          bool
	memoryPressure     bool
	diskPressure       bool
	pidPressure        bool
}

// label returns the node's value of a label.
func (n *NodeInfo) label(key string) (string, bool) {
	if key == LabelHostname {
		return n.hostname, n.node != nil
	}
	v, ok := n.labels[key]
	return v, ok
}

// Name returns the node's name.
func (n *NodeInfo) Name() string { return n.name }

// Node returns the node object.
func (n *NodeInfo) Node() *api.Node { return n.node }

// NumPods returns the number of pods placed on the node.
func (n *NodeInfo) NumPods() int { return len(n.pods.items) }

// Requested returns the sum of the requests of the pods on the node.
func (n *NodeInfo) Requested() Resources { return n.requested }

// Allocatable returns what the node offers to pods.
func (n *NodeInfo) Allocatable() (r Resources, pods int64) { return n.alloc, n.allowedPods }

// serviceInfo is a service with its selector parsed.
type serviceInfo struct {
	svc    *api.Service
	sel    api.Selector
	selStr string
}

// nsPods indexes the placed pods of one namespace by name and label.
// Keyed by name within its namespace, a pod costs its map 24 bytes,
// where a cluster-wide map by namespace and name cost 40 (issue 16).
type nsPods struct {
	all     podList
	byName  map[string]*PodInfo
	byLabel map[string]map[string]*podList
}

// podFor returns the placed pod namespace/name, or nil.
func (c *Cluster) podFor(namespace, name string) *PodInfo {
	if ns := c.namespaces[namespace]; ns != nil {
		return ns.byName[name]
	}
	return nil
}

// podList is a set of pods with O(1) removal: each pod remembers its
// position in every list it is in. Every pod is in its node's list and
// its namespace's, so those positions are fields of the pod (at says
// which); its positions in the other lists are its slots.
type podList struct {
	items []*PodInfo
	at    listAt
}

// listAt says where a pod keeps its position in a podList.
type listAt uint8

const (
	atSlots listAt = iota // in PodInfo.slots (the zero value)
	atNode                // in PodInfo.nodeIdx: NodeInfo.pods
	atNS                  // in PodInfo.nsIdx: nsPods.all
)

// slot is a pod's position in one list.
type slot struct {
	list *podList
	idx  int
}

func (l *podList) add(p *PodInfo) {
	switch l.at {
	case atNode:
		p.nodeIdx = int32(len(l.items))
	case atNS:
		p.nsIdx = int32(len(l.items))
	default:
		p.slots = append(p.slots, slot{l, len(l.items)})
	}
	l.items = append(l.items, p)
}

// removeAt removes p from l, where its position is a field of p (the
// node's and the namespace's lists).
func (l *podList) removeAt(p *PodInfo) {
	idx := int(p.nsIdx)
	if l.at == atNode {
		idx = int(p.nodeIdx)
	}
	l.remove(idx)
}

func (l *podList) remove(idx int) {
	last := len(l.items) - 1
	if idx != last {
		moved := l.items[last]
		l.items[idx] = moved
		switch l.at {
		case atNode:
			moved.nodeIdx = int32(idx)
		case atNS:
			moved.nsIdx = int32(idx)
		default:
			for i := range moved.slots {
				if moved.slots[i].list == l {
					moved.slots[i].idx = idx
					break
				}
			}
		}
	}
	l.items[last] = nil
	l.items = l.items[:last]
}

// NumNodes returns the number of nodes.
func (c *Cluster) NumNodes() int { return len(c.nodeList) }

// NumPods returns the number of placed pods.
func (c *Cluster) NumPods() int { return c.numPods }

// Node returns a node's info, or nil.
func (c *Cluster) Node(name string) *NodeInfo {
	if n := c.nodes[name]; n != nil && n.node != nil {
		return n
	}
	return nil
}

// SetNode adds a node or replaces it with a newer version. Heartbeats
// replace nodes often, so the work done is proportional to what changed.
func (c *Cluster) SetNode(node *api.Node) {
	n := c.nodes[node.Name]
	if n == nil {
		n = &NodeInfo{name: node.Name, pods: podList{at: atNode}}
		c.nodes[node.Name] = n
	}
	old := n.node
	if old == nil {
		n.pos = len(c.nodeList)
		c.nodeList = append(c.nodeList, n)
		c.orderDirty = true
		if len(n.pods.items) > 0 {
			c.labelsGen++ // pods that waited for their node now have labels
		}
	}
	n.node = node
	if old == nil || !maps.Equal(old.Labels, node.Labels) {
		if old != nil && len(n.pods.items) > 0 {
			c.labelsGen++
		}
		c.countLabelKeys(n.labels, -1)
		n.labels = node.Labels
		if _, ok := node.Labels[LabelHostname]; !ok {
			n.labels = maps.Clone(node.Labels)
			if n.labels == nil {
				n.labels = map[string]string{}
			}
			n.labels[LabelHostname] = node.Name
		}
		n.hostname = n.labels[LabelHostname]
		c.countLabelKeys(n.labels, 1)
		if z := zoneKey(n.labels); z != n.zone || old == nil {
			n.zone = z
			c.orderDirty = true
		}
	}
	alloc := node.Status.Allocatable
	if alloc == nil {
		alloc = node.Status.Capacity
	}
	n.alloc, n.allowedPods = fromList(alloc)
	n.cond = nodeConditions{unschedulable: node.Spec.Unschedulable}
	for _, cd := range node.Status.Conditions {
		isTrue := cd.Status == api.ConditionTrue
		switch cd.Type {
		case api.NodeReady:
			n.cond.notReady = !isTrue
		case api.NodeNetworkUnavailable:
			n.cond.networkUnavailable = isTrue
		case conditionOutOfDisk:
			n.cond.outOfDisk = isTrue
		case api.NodeMemoryPressure:
			n.cond.memoryPressure = isTrue
		case api.NodeDiskPressure:
			n.cond.diskPressure = isTrue
		case api.NodePIDPressure:
			n.cond.pidPressure = isTrue
		}
	}
	if old == nil || !sameImages(old.Status.Images, node.Status.Images) {
		for img := range n.images {
			c.imageNodes[img]--
			if c.imageNodes[img] <= 0 {
				delete(c.imageNodes, img)
			}
		}
		n.images = nil
		if len(node.Status.Images) > 0 {
			n.images = make(map[string]int64, len(node.Status.Images))
			for _, im := range node.Status.Images {
				for _, name := range im.Names {
					n.images[normalizeImage(name)] = im.SizeBytes
				}
			}
			for img := range n.images {
				c.imageNodes[img]++
			}
		}
	}
	if raw := node.Annotations[AnnotationPreferAvoid]; raw != n.avoidRaw || old == nil {
		n.avoidRaw = raw
		n.avoid = parsePreferAvoid(raw)
	}
	c.setFlags(n, nodeFlags(n))
}

// nodeFlags computes a node's flags.
func nodeFlags(n *NodeInfo) uint16 {
	var f uint16
	set := func(bit int, on bool) {
		if on {
			f |= 1 << bit
		}
	}
	cd := &n.cond
	set(flagCordoned, cd.unschedulable)
	set(flagBadCondition, cd.unschedulable || cd.notReady || cd.networkUnavailable || cd.outOfDisk)
	set(flagMemoryPressure, cd.memoryPressure)
	set(flagDiskPressure, cd.diskPressure)
	set(flagPIDPressure, cd.pidPressure)
	for _, t := range n.node.Spec.Taints {
		switch t.Effect {
		case api.TaintEffectNoSchedule:
			set(flagNoScheduleTaint, true)
		case api.TaintEffectNoExecute:
			set(flagNoScheduleTaint, true)
			set(flagNoExecuteTaint, true)
		case api.TaintEffectPreferNoSchedule:
			set(flagPreferNoScheduleTaint, true)
		}
	}
	set(flagPreferAvoid, len(n.avoid) > 0)
	return f
}

// setFlags replaces a node's flags and keeps the counts.
func (c *Cluster) setFlags(n *NodeInfo, f uint16) {
	for bit := range numFlags {
		was, is := n.flags&(1<<bit) != 0, f&(1<<bit) != 0
		switch {
		case was && !is:
			c.flagCount[bit]--
		case is && !was:
			c.flagCount[bit]++
		}
	}
	n.flags = f
}

// anyNode reports whether some node has the flag.
func (c *Cluster) anyNode(flag int) bool { return c.flagCount[flag] > 0 }

// sameImages reports whether two image lists hold the same names and
// sizes in the same order.
func sameImages(a, b []api.ContainerImage) bool {
	return slices.EqualFunc(a, b, func(x, y api.ContainerImage) bool {
		return x.SizeBytes == y.SizeBytes && slices.Equal(x.Names, y.Names)
	})
}

// parsePreferAvoid reads the preferAvoidPods annotation; a malformed one
// avoids nothing (the annotation is advice, not a constraint).
func parsePreferAvoid(raw string) []avoidEntry {
	if raw == "" {
		return nil
	}
	var doc struct {
		PreferAvoidPods []struct {
			PodSignature struct {
				PodController *api.OwnerReference `json:"podController"`
			} `json:"podSignature"`
		} `json:"preferAvoidPods"`
	}
	if json.Unmarshal([]byte(raw), &doc) != nil {
		return nil
	}
	var out []avoidEntry
	for _, e := range doc.PreferAvoidPods {
		if pc := e.PodSignature.PodController; pc != nil {
			out = append(out, avoidEntry{kind: pc.Kind, uid: pc.UID})
		}
	}
	return out
}

// ZoneOf is the zone a node's labels name for zone-aware eviction (SPEC
// TNT-8): today's label if set, else the beta one, else "".
func ZoneOf(labels map[string]string) string {
	for _, l := range []string{LabelZone, LabelZoneBeta} {
		if z, ok := labels[l]; ok {
			return z
		}
	}
	return ""
}

// zoneKey is the region and zone of a node, "" when it has neither, for
// SelectorSpreadPriority and the scan order.
func zoneKey(labels map[string]string) string {
	region, zone := labels[LabelRegion], labels[LabelZone]
	if region == "" {
		region = labels[LabelRegionBeta]
	}
	if zone == "" {
		zone = labels[LabelZoneBeta]
	}
	if region == "" && zone == "" {
		return ""
	}
	return region + ":\x00:" + zone
}

// countLabelKeys adds d to the count of every key of labels.
func (c *Cluster) countLabelKeys(labels map[string]string, d int) {
	for k := range labels {
		if c.labelKeys[k] += d; c.labelKeys[k] <= 0 {
			delete(c.labelKeys, k)
		}
	}
}

// nodesWithLabel is how many nodes have the label key.
func (c *Cluster) nodesWithLabel(key string) int {
	if key == LabelHostname {
		return len(c.nodeList) // every node has it, given or implied
	}
	return c.labelKeys[key]
}

// RemoveNode removes a node. Pods still bound to it stay counted until
// they are removed, under a ghost entry the scheduler never picks.
func (c *Cluster) RemoveNode(name string) {
	n := c.nodes[name]
	if n == nil || n.node == nil {
		return
	}
	last := len(c.nodeList) - 1
	c.nodeList[n.pos] = c.nodeList[last]
	c.nodeList[n.pos].pos = n.pos
	c.nodeList[last] = nil
	c.nodeList = c.nodeList[:last]
	for img := range n.images {
		c.imageNodes[img]--
		if c.imageNodes[img] <= 0 {
			delete(c.imageNodes, img)
		}
	}
	c.setFlags(n, 0)
	c.countLabelKeys(n.labels, -1)
	n.node, n.images, n.labels, n.zone = nil, nil, nil, ""
	c.orderDirty = true
	if len(n.pods.items) > 0 {
		c.labelsGen++
	}
	if len(n.pods.items) == 0 {
		delete(c.nodes, name)
	}
}

// scanOrder returns the nodes in the order a cycle scans them: zones
// interleaved (one node of each zone in turn), so that a bounded scan
// still sees every zone. It is rebuilt only when nodes come, go or change
// zone.
func (c *Cluster) scanOrder() []*NodeInfo {
	if !c.orderDirty {
		return c.order
	}
	c.orderDirty = false
	byZone := map[string][]*NodeInfo{}
	for _, n := range c.nodeList {
		byZone[n.zone] = append(byZone[n.zone], n)
	}
	zones := slices.Sorted(maps.Keys(byZone))
	for _, z := range zones {
		slices.SortFunc(byZone[z], func(a, b *NodeInfo) int { return cmp.Compare(a.name, b.name) })
	}
	c.order = c.order[:0]
	for i := 0; len(c.order) < len(c.nodeList); i++ {
		for _, z := range zones {
			if l := byZone[z]; i < len(l) {
				c.order = append(c.order, l[i])
			}
		}
	}
	return c.order
}

// SetPod adds a pod or replaces it with a newer version. Only pods bound
// to a node and not finished count: others are removed. A pod with an
// affinity selector that does not parse is counted without it, and the
// error (ErrInvalidPod) says so.
func (c *Cluster) SetPod(pod *api.Pod) error {
	if old := c.podFor(pod.Namespace, pod.Name); old != nil {
		if old.pod == pod {
			return nil
		}
		c.removePod(old)
	}
	if pod.Spec.NodeName == "" || api.IsPodPhaseTerminal(pod.Status.Phase) {
		return nil
	}
	pi, err := newPodInfo(pod)
	c.addPod(pi)
	if err != nil {
		return fmt.Errorf("%w: %s: %w (counted without those terms)", ErrInvalidPod, podName(pod), err)
	}
	return nil
}

// RefreshPod points the counted pod at pod, a newer version that differs
// in nothing the cluster derives from it (the caller checked: same UID,
// node, generation and labels; a status update, say). Nothing is derived
// again; the older version is let go, so that the scheduler does not keep
// every pod's version of its binding alive beside the store's (at 150,000
// pods that was a second copy of each on the leader).
func (c *Cluster) RefreshPod(pod *api.Pod) {
	if pi := c.podFor(pod.Namespace, pod.Name); pi != nil && pi.pod.UID == pod.UID {
		pi.pod = pod
	}
}

// RemovePod removes a pod.
func (c *Cluster) RemovePod(namespace, name string) {
	if pi := c.podFor(namespace, name); pi != nil {
		c.removePod(pi)
	}
}

// Assume records that the scheduler bound pod to node before the store
// says so, so that the next cycle counts it; it changes a copy, not pod.
// Forget (or the informer's own version of the pod) replaces it.
func (c *Cluster) Assume(pod *api.Pod, node string) error {
	cp := *pod
	cp.Spec.NodeName = node
	return c.SetPod(&cp)
}

// Forget removes a pod the scheduler assumed, when its binding failed.
func (c *Cluster) Forget(pod *api.Pod) { c.RemovePod(pod.Namespace, pod.Name) }

func (c *Cluster) addPod(pi *PodInfo) {
	n := c.nodes[pi.pod.Spec.NodeName]
	if n == nil {
		n = &NodeInfo{name: pi.pod.Spec.NodeName, pods: podList{at: atNode}}
		c.nodes[n.name] = n
	}
	pi.node = n
	ns := c.namespaces[pi.pod.Namespace]
	if ns == nil {
		ns = &nsPods{all: podList{at: atNS}, byName: map[string]*PodInfo{}, byLabel: map[string]map[string]*podList{}}
		c.namespaces[pi.pod.Namespace] = ns
	}
	ns.byName[pi.pod.Name] = pi
	c.numPods++
	// One slot per list the pod joins but its node's and namespace's,
	// allocated once at its size.
	nslots := len(pi.pod.Labels) + pi.numTerms()
	if pi.controller != "" {
		nslots++
	}
	pi.slots = make([]slot, 0, nslots)
	n.pods.add(pi)
	req := pi.requests()
	n.requested.add(&req, 1)
	n.nonZeroCPU += pi.nonZeroCPU
	n.nonZeroMem += pi.nonZeroMem
	for _, hp := range pi.ports {
		if n.ports == nil {
			n.ports, n.anyIPPorts = map[hostPort]int32{}, map[protoPort]int32{}
		}
		n.ports[hp]++
		n.anyIPPorts[protoPort{hp.protocol, hp.port}]++
	}
	for _, d := range pi.devices {
		if n.devices == nil {
			n.devices = map[string]deviceCount{}
		}
		dc := n.devices[d.path]
		if d.readOnly {
			dc.readers++
		} else {
			dc.writers++
		}
		n.devices[d.path] = dc
	}
	ns.all.add(pi)
	for k, v := range pi.pod.Labels {
		vals := ns.byLabel[k]
		if vals == nil {
			vals = map[string]*podList{}
			ns.byLabel[k] = vals
		}
		l := vals[v]
		if l == nil {
			l = &podList{}
			vals[v] = l
		}
		l.add(pi)
	}
	if pi.controller != "" {
		l := c.byCtrl[pi.controller]
		if l == nil {
			l = &podList{}
			c.byCtrl[pi.controller] = l
		}
		l.add(pi)
	}
	c.addTerms(pi)
	c.updateGroups(pi, 1)
}

func (c *Cluster) removePod(pi *PodInfo) {
	n := pi.node
	c.updateGroups(pi, -1)
	c.removeTerms(pi)
	ns := c.namespaces[pi.pod.Namespace]
	delete(ns.byName, pi.pod.Name)
	c.numPods--
	req := pi.requests()
	n.requested.add(&req, -1)
	n.nonZeroCPU -= pi.nonZeroCPU
	n.nonZeroMem -= pi.nonZeroMem
	for _, hp := range pi.ports {
		if n.ports[hp]--; n.ports[hp] <= 0 {
			delete(n.ports, hp)
		}
		pp := protoPort{hp.protocol, hp.port}
		if n.anyIPPorts[pp]--; n.anyIPPorts[pp] <= 0 {
			delete(n.anyIPPorts, pp)
		}
	}
	for _, d := range pi.devices {
		dc := n.devices[d.path]
		if d.readOnly {
			dc.readers--
		} else {
			dc.writers--
		}
		if dc.readers <= 0 && dc.writers <= 0 {
			delete(n.devices, d.path)
		} else {
			n.devices[d.path] = dc
		}
	}
	n.pods.removeAt(pi)
	ns.all.removeAt(pi)
	// Remove from the lists last to first: removing moves other pods'
	// slots, never this pod's.
	for len(pi.slots) > 0 {
		s := pi.slots[len(pi.slots)-1]
		pi.slots = pi.slots[:len(pi.slots)-1]
		s.list.remove(s.idx)
	}
	c.dropEmptyTermGroups(pi)
	for k, v := range pi.pod.Labels {
		if vals := ns.byLabel[k]; vals != nil {
			if l := vals[v]; l != nil && len(l.items) == 0 {
				delete(vals, v)
				if len(vals) == 0 {
					delete(ns.byLabel, k)
				}
			}
		}
	}
	if len(ns.all.items) == 0 {
		delete(c.namespaces, pi.pod.Namespace)
	}
	if pi.controller != "" {
		if l := c.byCtrl[pi.controller]; l != nil && len(l.items) == 0 {
			delete(c.byCtrl, pi.controller)
		}
	}
	if n.node == nil && len(n.pods.items) == 0 {
		delete(c.nodes, n.name)
	}
	pi.node = nil
}

// SetService adds or replaces a service. A service without a selector
// selects no pods.
func (c *Cluster) SetService(svc *api.Service) {
	m := c.services[svc.Namespace]
	if m == nil {
		m = map[string]*serviceInfo{}
		c.services[svc.Namespace] = m
	}
	var sel api.Selector = api.Nothing()
	if len(svc.Spec.Selector) > 0 {
		sel = api.SelectorFromSet(svc.Spec.Selector)
	}
	m[svc.Name] = &serviceInfo{svc: svc, sel: sel, selStr: selectorKey(sel)}
}

// RemoveService removes a service.
func (c *Cluster) RemoveService(namespace, name string) {
	if m := c.services[namespace]; m != nil {
		delete(m, name)
		if len(m) == 0 {
			delete(c.services, namespace)
		}
	}
}

// servicesOf returns the services that select pod, sorted by name, so
// that "the first service" is the same in every cycle.
func (c *Cluster) servicesOf(pod *api.Pod) []*serviceInfo {
	var out []*serviceInfo
	for _, s := range c.services[pod.Namespace] {
		if s.sel.Matches(pod.Labels) {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b *serviceInfo) int { return cmp.Compare(a.svc.Name, b.svc.Name) })
	return out
}

// eachMatchingPod calls fn for every placed pod in the namespaces that sel
// selects. It starts from the smallest posting list of an equality or set
// requirement, so that a selector for a small group does not scan a large
// namespace.
func (c *Cluster) eachMatchingPod(namespaces []string, sel api.Selector, fn func(*PodInfo)) {
	for _, nsName := range namespaces {
		ns := c.namespaces[nsName]
		if ns == nil {
			continue
		}
		if sel.Empty() {
			for _, p := range ns.all.items {
				fn(p)
			}
			continue
		}
		reqs := sel.Requirements()
		if len(reqs) == 0 {
			continue // Nothing
		}
		best, bestN := -1, len(ns.all.items)
		for i, r := range reqs {
			if r.Operator != api.OpEquals && r.Operator != api.OpIn {
				continue
			}
			n := 0
			for _, v := range r.Values {
				if l := ns.byLabel[r.Key][v]; l != nil {
					n += len(l.items)
				}
			}
			if n < bestN || best < 0 && n <= bestN {
				best, bestN = i, n
			}
		}
		if best < 0 {
			for _, p := range ns.all.items {
				if sel.Matches(p.pod.Labels) {
					fn(p)
				}
			}
			continue
		}
		r := reqs[best]
		for _, v := range r.Values {
			if l := ns.byLabel[r.Key][v]; l != nil {
				for _, p := range l.items {
					if sel.Matches(p.pod.Labels) {
						fn(p)
					}
				}
			}
		}
	}
}

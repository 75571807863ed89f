package scheduler

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// State is what one scheduling cycle knows beyond the Cluster: the pod
// being placed with its derived data, and what plugins compute once per
// cycle and share (the pod's services, the pod group of its first
// service, ...), so that nothing is computed once per node. Each plugin
// also has a slot for its own per-cycle data, reused from cycle to cycle.
type State struct {
	c   *Cluster
	pod *api.Pod
	pi  *PodInfo
	req Resources // pi.requests()

	servicesDone bool
	services     []*serviceInfo
	svcGroupDone bool
	svcGroup     *podGroup
	imagesDone   bool
	images       []string
	nsOnly       []string

	slots []any

	filters  []filterEntry
	feasible []*NodeInfo
	rejected []int
	totals   []int64
	raw      []int64
}

// reset prepares the state for a cycle placing pod.
func (st *State) reset(c *Cluster, pod *api.Pod) error {
	pi, err := newPodInfo(pod)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrInvalidPod, podName(pod), err)
	}
	st.c, st.pod, st.pi, st.req = c, pod, pi, pi.requests()
	st.servicesDone, st.services = false, st.services[:0]
	st.svcGroupDone, st.svcGroup = false, nil
	st.imagesDone, st.images = false, st.images[:0]
	st.nsOnly = append(st.nsOnly[:0], pod.Namespace)
	return nil
}

// clear drops the cycle's references so that objects can be collected.
func (st *State) clear() {
	st.c, st.pod, st.pi, st.svcGroup, st.req = nil, nil, nil, nil, Resources{}
	clear(st.services)
	clear(st.feasible[:cap(st.feasible)])
}

// Pod returns the pod being placed.
func (st *State) Pod() *api.Pod { return st.pod }

// podServices returns the services that select the pod, sorted by name.
func (st *State) podServices() []*serviceInfo {
	if !st.servicesDone {
		st.servicesDone = true
		st.services = append(st.services[:0], st.c.servicesOf(st.pod)...)
	}
	return st.services
}

// firstServiceGroup returns the pod group of the pod's first service
// (Kubernetes' service affinity and anti-affinity read only the first),
// or nil when no service selects the pod.
func (st *State) firstServiceGroup() *podGroup {
	if !st.svcGroupDone {
		st.svcGroupDone = true
		if svcs := st.podServices(); len(svcs) > 0 {
			s := svcs[0]
			st.svcGroup = st.c.group(groupSig(st.nsOnly, []string{s.selStr}, ""), st.nsOnly, []api.Selector{s.sel}, "")
		}
	}
	return st.svcGroup
}

// termGroupOf returns the pod group of the pods an affinity term of the
// pod selects.
func (st *State) termGroupOf(t *affinityTerm) *podGroup {
	ns := t.namespaces
	if len(ns) > 1 {
		ns = slices.Sorted(slices.Values(ns))
		ns = slices.Compact(ns)
	}
	return st.c.group(groupSig(ns, []string{selectorKey(t.sel)}, ""), ns, []api.Selector{t.sel}, "")
}

// podImages returns the pod's container images, normalized, once each.
func (st *State) podImages() []string {
	if !st.imagesDone {
		st.imagesDone = true
		for i := range st.pod.Spec.Containers {
			img := normalizeImage(st.pod.Spec.Containers[i].Image)
			if !slices.Contains(st.images, img) {
				st.images = append(st.images, img)
			}
		}
	}
	return st.images
}

// slotOf returns the plugin's per-cycle data, making it on first use.
func slotOf[T any](st *State, id int) *T {
	if d, ok := st.slots[id].(*T); ok {
		return d
	}
	d := new(T)
	st.slots[id] = d
	return d
}

// olderFirst orders pods by creation, then name: "the first pod" of a
// group is the oldest.
func olderFirst(a, b *PodInfo) int {
	var ta, tb int64
	if t := a.pod.CreationTimestamp; t != nil {
		ta = t.Unix()
	}
	if t := b.pod.CreationTimestamp; t != nil {
		tb = t.Unix()
	}
	if c := cmp.Compare(ta, tb); c != 0 {
		return c
	}
	return cmp.Compare(a.pod.Name, b.pod.Name)
}

// Plugin interfaces. Filters are the predicates, scorers the priorities
// (SPEC SCH-1). Each prepares once per cycle, computing what it shares
// across nodes, and says whether it has anything to do: a predicate no
// node can fail for this pod, or a priority that gives every node the
// same score, is skipped for the cycle, which is what keeps a cycle over
// hundreds of nodes cheap.
type (
	filterPlugin interface {
		// prepare reports whether the predicate may reject some node.
		prepare(st *State) bool
		// filter reports whether the pod fits the node.
		filter(st *State, n *NodeInfo) bool
	}
	scorePlugin interface {
		// prepare returns same, the 0–10 score of every node, when they
		// all score alike (varies false).
		prepare(st *State, nodes []*NodeInfo) (same int64, varies bool)
		// score writes each node's score: 0–10, or raw values that
		// normalize maps to 0–10.
		score(st *State, nodes []*NodeInfo, out []int64)
	}
	normalizePlugin interface {
		normalize(out []int64)
	}
)

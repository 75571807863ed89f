package scheduler

import (
	"fmt"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/scheduler/policy"
	"github.com/outpost-edge/outpost/controlplane/scheduler/taints"
)

// newScorer builds the priority a policy entry names.
func newScorer(pr *policy.Priority, p *policy.Policy, slot int) (scorePlugin, error) {
	switch pr.Type() {
	case policy.LeastRequestedPriority:
		return leastRequested{}, nil
	case policy.MostRequestedPriority:
		return mostRequested{}, nil
	case policy.BalancedResourceAllocation:
		return balancedAllocation{}, nil
	case policy.SelectorSpreadPriority:
		return &selectorSpread{slot: slot, controllers: true}, nil
	case policy.ServiceSpreadingPriority:
		return &selectorSpread{slot: slot}, nil
	case policy.InterPodAffinityPriority:
		return &interPodAffinityPriority{slot: slot, symmetric: p.SymmetricWeight()}, nil
	case policy.NodeAffinityPriority:
		return nodeAffinityPriority{}, nil
	case policy.TaintTolerationPriority:
		return &taintTolerationPriority{slot: slot}, nil
	case policy.ImageLocalityPriority:
		return imageLocality{}, nil
	case policy.NodePreferAvoidPodsPriority:
		return nodePreferAvoidPods{}, nil
	case policy.EqualPriority:
		return equalPriority{}, nil
	case policy.TypeServiceAntiAffinity:
		return &serviceAntiAffinity{label: pr.Argument.ServiceAntiAffinity.Label, slot: slot}, nil
	case policy.TypeLabelPreference:
		a := pr.Argument.LabelPreference
		return labelPreference{label: a.Label, presence: a.Presence}, nil
	}
	return nil, fmt.Errorf("%w: priority %s has no implementation", policy.ErrInvalid, pr.Type())
}

// requestedShares returns the node's CPU and memory requests with the
// pod's added (non-zero defaults, as the scoring functions count) and its
// allocatable CPU and memory.
func requestedShares(pi *PodInfo, n *NodeInfo) (cpu, cpuCap, mem, memCap int64) {
	return n.nonZeroCPU + pi.nonZeroCPU, n.alloc.MilliCPU, n.nonZeroMem + pi.nonZeroMem, n.alloc.Memory
}

// varying is the prepare of priorities that always score node by node.
type varying struct{}

func (varying) prepare(*State, []*NodeInfo) (int64, bool) { return 0, true }

// leastRequested (SPEC SCH-6): the mean over CPU and memory of
// (allocatable - requested) * 10 / allocatable.
type leastRequested struct{ varying }

func (leastRequested) score(st *State, nodes []*NodeInfo, out []int64) {
	for i, n := range nodes {
		cpu, cpuCap, mem, memCap := requestedShares(st.pi, n)
		out[i] = (unusedScore(cpu, cpuCap) + unusedScore(mem, memCap)) / 2
	}
}

func unusedScore(requested, capacity int64) int64 {
	if capacity <= 0 || requested > capacity {
		return 0
	}
	return (capacity - requested) * MaxScore / capacity
}

// mostRequested (SPEC SCH-6): the mean over CPU and memory of
// requested * 10 / allocatable.
type mostRequested struct{ varying }

func (mostRequested) score(st *State, nodes []*NodeInfo, out []int64) {
	for i, n := range nodes {
		cpu, cpuCap, mem, memCap := requestedShares(st.pi, n)
		out[i] = (usedScore(cpu, cpuCap) + usedScore(mem, memCap)) / 2
	}
}

func usedScore(requested, capacity int64) int64 {
	if capacity <= 0 || requested > capacity {
		return 0
	}
	return requested * MaxScore / capacity
}

// balancedAllocation (SPEC SCH-6): 10 * (1 - |cpu share - memory share|),
// 0 when either share reaches the whole node.
type balancedAllocation struct{ varying }

func (balancedAllocation) score(st *State, nodes []*NodeInfo, out []int64) {
	for i, n := range nodes {
		out[i] = balancedScore(requestedShares(st.pi, n))
	}
}

func balancedScore(cpu, cpuCap, mem, memCap int64) int64 {
	if cpuCap <= 0 || memCap <= 0 {
		return 0
	}
	cf, mf := float64(cpu)/float64(cpuCap), float64(mem)/float64(memCap)
	if cf >= 1 || mf >= 1 {
		return 0
	}
	diff := cf - mf
	if diff < 0 {
		diff = -diff
	}
	return int64((1 - diff) * MaxScore)
}

// nodeAffinityPriority (SPEC SCH-10): the sum of the weights of the
// preferred node affinity terms the node matches, scaled so that the best
// node scores 10.
type nodeAffinityPriority struct{}

func preferredTerms(pod *api.Pod) []api.PreferredSchedulingTerm {
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil {
		return a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution
	}
	return nil
}

func (nodeAffinityPriority) prepare(st *State, _ []*NodeInfo) (int64, bool) {
	return 0, len(preferredTerms(st.pod)) > 0
}

func (nodeAffinityPriority) score(st *State, nodes []*NodeInfo, out []int64) {
	terms := preferredTerms(st.pod)
	for i, n := range nodes {
		var sum int64
		for _, t := range terms {
			if t.Weight == 0 {
				continue
			}
			if ok, err := api.NodeSelectorTermMatches(t.Preference, n.labels, n.name); ok && err == nil {
				sum += int64(t.Weight)
			}
		}
		out[i] = sum
	}
}

func (nodeAffinityPriority) normalize(scores []int64) { scaleToMax(scores, false) }

// scaleToMax maps scores to 0–10 by the largest; reverse gives the
// largest 0 and zero 10. All zero: 0 (10 when reversed).
func scaleToMax(scores []int64, reverse bool) {
	var hi int64
	for _, s := range scores {
		hi = max(hi, s)
	}
	for i, s := range scores {
		v := int64(0)
		if hi > 0 {
			v = MaxScore * s / hi
		}
		if reverse {
			v = MaxScore - v
		}
		scores[i] = v
	}
}

// taintTolerationPriority (SPEC SCH-6): fewer untolerated
// PreferNoSchedule taints is better; only tolerations that could match
// such a taint count.
type taintTolerationPriority struct{ slot int }

type taintTolerationData struct{ tols []api.Toleration }

func (p *taintTolerationPriority) prepare(st *State, _ []*NodeInfo) (int64, bool) {
	if !st.c.anyNode(flagPreferNoScheduleTaint) {
		return MaxScore, false
	}
	d := slotOf[taintTolerationData](st, p.slot)
	d.tols = d.tols[:0]
	for _, t := range st.pod.Spec.Tolerations {
		if t.Effect == "" || t.Effect == api.TaintEffectPreferNoSchedule {
			d.tols = append(d.tols, t)
		}
	}
	return 0, true
}

func (p *taintTolerationPriority) score(st *State, nodes []*NodeInfo, out []int64) {
	tols := slotOf[taintTolerationData](st, p.slot).tols
	for i, n := range nodes {
		out[i] = 0
		if n.flags&(1<<flagPreferNoScheduleTaint) != 0 {
			out[i] = int64(taints.CountUntoleratedPreferNoSchedule(n.node.Spec.Taints, tols))
		}
	}
}

func (p *taintTolerationPriority) normalize(scores []int64) { scaleToMax(scores, true) }

// Image sizes between which ImageLocalityPriority scales its score:
// smaller images are cheap to pull anyway; a node holding this much per
// container scores 10.
const (
	minImageSize = 23 * 1024 * 1024
	maxImageSize = 1000 * 1024 * 1024
)

// imageLocality (SPEC SCH-6): the sizes of the pod's images the node
// already holds, each scaled by the share of nodes that hold it (an image
// every node has says nothing about this one), mapped to 0–10 between
// 23 MiB and 1000 MiB per container.
type imageLocality struct{}

func (imageLocality) prepare(st *State, _ []*NodeInfo) (int64, bool) {
	for _, img := range st.podImages() {
		if st.c.imageNodes[img] > 0 {
			return 0, true
		}
	}
	return 0, false
}

func (imageLocality) score(st *State, nodes []*NodeInfo, out []int64) {
	all := float64(len(st.c.nodeList))
	hi := float64(maxImageSize) * float64(max(len(st.pod.Spec.Containers), 1))
	for i, n := range nodes {
		var sum float64
		for _, img := range st.podImages() {
			if size, ok := n.images[img]; ok {
				sum += float64(size) * float64(st.c.imageNodes[img]) / all
			}
		}
		switch {
		case sum < minImageSize:
			out[i] = 0
		case sum >= hi:
			out[i] = MaxScore
		default:
			out[i] = int64(MaxScore * (sum - minImageSize) / (hi - minImageSize))
		}
	}
}

// nodePreferAvoidPods (SPEC SCH-6, weight 10000 by default): 0 on a node
// whose scheduler.alpha.kubernetes.io/preferAvoidPods annotation names the
// ReplicationController or ReplicaSet that controls the pod, else 10.
// Pods of other controllers, or of none, are not affected.
type nodePreferAvoidPods struct{}

func (nodePreferAvoidPods) prepare(st *State, _ []*NodeInfo) (int64, bool) {
	_, kind := controllerOf(st.pod)
	affected := kind == "ReplicationController" || kind == "ReplicaSet"
	return MaxScore, affected && st.c.anyNode(flagPreferAvoid)
}

func (nodePreferAvoidPods) score(st *State, nodes []*NodeInfo, out []int64) {
	uid, kind := controllerOf(st.pod)
	for i, n := range nodes {
		out[i] = MaxScore
		for _, a := range n.avoid {
			if a.kind == kind && a.uid == uid {
				out[i] = 0
				break
			}
		}
	}
}

// equalPriority (SPEC SCH-6) gives every node 1.
type equalPriority struct{}

func (equalPriority) prepare(*State, []*NodeInfo) (int64, bool) { return 1, false }

func (equalPriority) score(_ *State, nodes []*NodeInfo, out []int64) {
	for i := range nodes {
		out[i] = 1
	}
}

// labelPreference (SPEC SCH-7): 10 when the node has the label
// (presence) or lacks it (!presence), else 0.
type labelPreference struct {
	varying
	label    string
	presence bool
}

func (p labelPreference) score(_ *State, nodes []*NodeInfo, out []int64) {
	for i, n := range nodes {
		out[i] = 0
		if _, ok := n.labels[p.label]; ok == p.presence {
			out[i] = MaxScore
		}
	}
}

package scheduler

import (
	"fmt"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/scheduler/policy"
	"github.com/outpost-edge/outpost/controlplane/scheduler/taints"
)

// newFilter builds the predicate a policy check names.
func newFilter(c policy.Check, slot int) (filterPlugin, error) {
	switch c.Type {
	case policy.CheckNodeUnschedulable:
		return checkNodeUnschedulable{}, nil
	case policy.CheckNodeCondition:
		return checkNodeCondition{}, nil
	case policy.HostName:
		return hostName{}, nil
	case policy.PodFitsHostPorts:
		return podFitsHostPorts{}, nil
	case policy.MatchNodeSelector:
		return matchNodeSelector{}, nil
	case policy.PodFitsResources:
		return podFitsResources{}, nil
	case policy.NoDiskConflict:
		return noDiskConflict{}, nil
	case policy.PodToleratesNodeTaints:
		return podToleratesNodeTaints{effects: taints.IsNoScheduleOrNoExecute, flag: flagNoScheduleTaint}, nil
	case policy.PodToleratesNodeNoExecuteTaints:
		return podToleratesNodeTaints{effects: taints.IsNoExecute, flag: flagNoExecuteTaint}, nil
	case policy.TypeLabelsPresence:
		a := c.Argument.LabelsPresence
		return labelsPresence{labels: a.Labels, presence: a.Presence}, nil
	case policy.TypeServiceAffinity:
		return &serviceAffinity{labels: c.Argument.ServiceAffinity.Labels, slot: slot}, nil
	case policy.CheckVolumeBinding:
		return checkVolumeBinding{}, nil
	case policy.NoVolumeZoneConflict:
		return noVolumeZoneConflict{}, nil
	case policy.CheckNodeMemoryPressure:
		return checkNodeMemoryPressure{}, nil
	case policy.CheckNodeDiskPressure:
		return flagPredicate{flagDiskPressure}, nil
	case policy.CheckNodePIDPressure:
		return flagPredicate{flagPIDPressure}, nil
	case policy.MatchInterPodAffinity:
		return &matchInterPodAffinity{slot: slot}, nil
	}
	return nil, fmt.Errorf("%w: predicate %s has no implementation", policy.ErrInvalid, c.Type)
}

// checkNodeUnschedulable keeps pods off cordoned nodes. It is always on,
// whatever the policy: cordoning must work. A pod that tolerates the
// unschedulable taint (daemon set pods, ADM-4) may still go there.
type checkNodeUnschedulable struct{}

var unschedulableTaint = api.Taint{Key: TaintUnschedulable, Effect: api.TaintEffectNoSchedule}

func (checkNodeUnschedulable) prepare(st *State) bool {
	return st.c.anyNode(flagCordoned) && !taints.TolerationsTolerateTaint(st.pod.Spec.Tolerations, &unschedulableTaint)
}

func (checkNodeUnschedulable) filter(_ *State, n *NodeInfo) bool { return !n.cond.unschedulable }

// checkNodeCondition refuses nodes that are not Ready, whose network is
// unavailable, that are out of disk, or that are cordoned. A node that
// reports no Ready condition at all (made by hand, never heard from) is
// not refused for it, as in Kubernetes.
type checkNodeCondition struct{}

func (checkNodeCondition) prepare(st *State) bool { return st.c.anyNode(flagBadCondition) }

func (checkNodeCondition) filter(_ *State, n *NodeInfo) bool {
	return n.flags&(1<<flagBadCondition) == 0
}

// flagPredicate refuses the nodes with a flag: CheckNodeDiskPressure and
// CheckNodePIDPressure keep every pod off nodes under that pressure.
type flagPredicate struct{ flag int }

func (p flagPredicate) prepare(st *State) bool { return st.c.anyNode(p.flag) }

func (p flagPredicate) filter(_ *State, n *NodeInfo) bool { return n.flags&(1<<p.flag) == 0 }

// checkNodeMemoryPressure keeps BestEffort pods (no CPU or memory request
// or limit) off nodes under memory pressure.
type checkNodeMemoryPressure struct{}

func (checkNodeMemoryPressure) prepare(st *State) bool {
	return st.c.anyNode(flagMemoryPressure) && isBestEffort(&st.pod.Spec)
}

func (checkNodeMemoryPressure) filter(_ *State, n *NodeInfo) bool { return !n.cond.memoryPressure }

// hostName: a pod that names a node fits only that node.
type hostName struct{}

func (hostName) prepare(st *State) bool { return st.pod.Spec.NodeName != "" }

func (hostName) filter(st *State, n *NodeInfo) bool { return st.pod.Spec.NodeName == n.name }

// podFitsHostPorts: a host port conflicts with the same port and protocol
// on the same address, or on any address when either side binds all.
type podFitsHostPorts struct{}

func (podFitsHostPorts) prepare(st *State) bool { return len(st.pi.ports) > 0 }

func (podFitsHostPorts) filter(st *State, n *NodeInfo) bool { return portsFree(st.pi.ports, n) }

func portsFree(ports []hostPort, n *NodeInfo) bool {
	if len(n.ports) == 0 {
		return true
	}
	for _, hp := range ports {
		if hp.ip == wildcardIP {
			if n.anyIPPorts[protoPort{hp.protocol, hp.port}] > 0 {
				return false
			}
			continue
		}
		if n.ports[hp] > 0 || n.ports[hostPort{wildcardIP, hp.protocol, hp.port}] > 0 {
			return false
		}
	}
	return true
}

// matchNodeSelector: every nodeSelector pair is a label of the node, and
// the required node affinity (terms ORed, expressions ANDed) matches it
// (SPEC SCH-9, SCH-10).
type matchNodeSelector struct{}

func (matchNodeSelector) prepare(st *State) bool {
	a := st.pod.Spec.Affinity
	return len(st.pod.Spec.NodeSelector) > 0 || a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil
}

func (matchNodeSelector) filter(st *State, n *NodeInfo) bool { return nodeSelectorMatches(st.pod, n) }

func nodeSelectorMatches(pod *api.Pod, n *NodeInfo) bool {
	for k, v := range pod.Spec.NodeSelector {
		if got, ok := n.labels[k]; !ok || got != v {
			return false
		}
	}
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil {
		if req := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution; req != nil {
			ok, err := api.NodeSelectorMatches(req, n.labels, n.name)
			return ok && err == nil
		}
	}
	return true
}

// podFitsResources compares requests, not use, with allocatable: the pod
// count, CPU, memory, ephemeral storage and every extended resource the
// pod asks for. A resource the node does not list has none to offer.
type podFitsResources struct{}

func (podFitsResources) prepare(*State) bool { return true }

func (podFitsResources) filter(st *State, n *NodeInfo) bool { return resourcesFit(&st.req, n) }

func resourcesFit(req *Resources, n *NodeInfo) bool {
	if int64(len(n.pods.items))+1 > n.allowedPods {
		return false
	}
	if req.MilliCPU > 0 && n.requested.MilliCPU+req.MilliCPU > n.alloc.MilliCPU {
		return false
	}
	if req.Memory > 0 && n.requested.Memory+req.Memory > n.alloc.Memory {
		return false
	}
	if req.EphemeralStorage > 0 && n.requested.EphemeralStorage+req.EphemeralStorage > n.alloc.EphemeralStorage {
		return false
	}
	for _, s := range req.Scalar {
		if s.Milli > 0 && n.requested.scalar(s.Name)+s.Milli > n.alloc.scalar(s.Name) {
			return false
		}
	}
	return true
}

// noDiskConflict: a block device of the host (hostPath type BlockDevice)
// may be mounted by several pods of a node only if all of them mount it
// read-only. Host directories and files are shared freely, as Kubernetes
// shares them: daemon sets commonly mount the same ones read-write.
type noDiskConflict struct{}

func (noDiskConflict) prepare(st *State) bool { return len(st.pi.devices) > 0 }

func (noDiskConflict) filter(st *State, n *NodeInfo) bool {
	for _, d := range st.pi.devices {
		dc, ok := n.devices[d.path]
		if !ok {
			continue
		}
		if dc.writers > 0 || !d.readOnly {
			return false
		}
	}
	return true
}

// podToleratesNodeTaints refuses nodes with a taint the pod does not
// tolerate, among the effects selected (SPEC TNT-3).
type podToleratesNodeTaints struct {
	effects func(*api.Taint) bool
	flag    int
}

func (p podToleratesNodeTaints) prepare(st *State) bool { return st.c.anyNode(p.flag) }

func (p podToleratesNodeTaints) filter(st *State, n *NodeInfo) bool {
	if n.flags&(1<<p.flag) == 0 {
		return true
	}
	_, found := taints.FindMatchingUntoleratedTaint(n.node.Spec.Taints, st.pod.Spec.Tolerations, p.effects)
	return !found
}

// labelsPresence (SPEC SCH-4): with presence, the node must have every
// label; without, none of them; values do not matter.
type labelsPresence struct {
	labels   []string
	presence bool
}

func (labelsPresence) prepare(*State) bool { return true }

func (p labelsPresence) filter(_ *State, n *NodeInfo) bool {
	for _, l := range p.labels {
		if _, ok := n.labels[l]; ok != p.presence {
			return false
		}
	}
	return true
}

// serviceAffinity (SPEC SCH-4): for each configured label, the value
// comes from the pod's nodeSelector if it sets that label, else from the
// node of the oldest placed pod of the pod's first service; a node fits
// when it has every value found. The first pod of a service, with no such
// pod to follow, lands anywhere.
type serviceAffinity struct {
	labels []string
	slot   int
}

type serviceAffinityData struct {
	want map[string]string
}

func (p *serviceAffinity) prepare(st *State) bool {
	d := slotOf[serviceAffinityData](st, p.slot)
	if d.want == nil {
		d.want = map[string]string{}
	}
	clear(d.want)
	for _, l := range p.labels {
		if v, ok := st.pod.Spec.NodeSelector[l]; ok {
			d.want[l] = v
		}
	}
	if len(d.want) < len(p.labels) {
		if g := st.firstServiceGroup(); g != nil && g.oldest != nil {
			for _, l := range p.labels {
				if _, set := d.want[l]; set {
					continue
				}
				if v, ok := labelValue(g.oldest.node, l); ok {
					d.want[l] = v
				}
			}
		}
	}
	return len(d.want) > 0
}

func (p *serviceAffinity) filter(st *State, n *NodeInfo) bool {
	for l, v := range slotOf[serviceAffinityData](st, p.slot).want {
		if got, ok := n.labels[l]; !ok || got != v {
			return false
		}
	}
	return true
}

// checkVolumeBinding: outpost has no PersistentVolume objects yet, so a
// pod with a persistentVolumeClaim volume cannot have it bound anywhere
// and fits no node; a pod without claims fits every node. Local
// persistent volumes will make this check the volume's node affinity.
type checkVolumeBinding struct{}

func (checkVolumeBinding) prepare(st *State) bool { return len(st.pi.claims) > 0 }

func (checkVolumeBinding) filter(*State, *NodeInfo) bool { return false }

// noVolumeZoneConflict compares the zone labels of a pod's bound
// persistent volumes with the node's. Without PersistentVolume objects
// there is nothing to compare, so every node passes (CheckVolumeBinding
// is the one that refuses claims it cannot bind).
type noVolumeZoneConflict struct{}

func (noVolumeZoneConflict) prepare(*State) bool { return false }

func (noVolumeZoneConflict) filter(*State, *NodeInfo) bool { return true }

package policy

import "strings"

// Predicate names, as seed 000 writes them. A failing predicate reports
// the name it has in the policy, so these are also the reasons in
// "0/5 nodes are available: ..." messages.
const (
	PodFitsResources                = "PodFitsResources"
	PodFitsHostPorts                = "PodFitsHostPorts"
	HostName                        = "HostName"
	MatchNodeSelector               = "MatchNodeSelector"
	GeneralPredicates               = "GeneralPredicates"
	PodToleratesNodeTaints          = "PodToleratesNodeTaints"
	PodToleratesNodeNoExecuteTaints = "PodToleratesNodeNoExecuteTaints"
	CheckNodeMemoryPressure         = "CheckNodeMemoryPressure"
	CheckNodeDiskPressure           = "CheckNodeDiskPressure"
	CheckNodePIDPressure            = "CheckNodePIDPressure"
	CheckNodeCondition              = "CheckNodeCondition"
	CheckNodeUnschedulable          = "CheckNodeUnschedulable"
	MatchInterPodAffinity           = "MatchInterPodAffinity"
	NoDiskConflict                  = "NoDiskConflict"
	CheckVolumeBinding              = "CheckVolumeBinding"
	NoVolumeZoneConflict            = "NoVolumeZoneConflict"
	CheckNodeLabelPresence          = "CheckNodeLabelPresence"
	CheckServiceAffinity            = "checkServiceAffinity"
	MaxEBSVolumeCount               = "MaxEBSVolumeCount"
	MaxGCEPDVolumeCount             = "MaxGCEPDVolumeCount"
	MaxAzureDiskVolumeCount         = "MaxAzureDiskVolumeCount"
)

// Priority names, as seed 000 writes them.
const (
	LeastRequestedPriority      = "LeastRequestedPriority"
	MostRequestedPriority       = "MostRequestedPriority"
	BalancedResourceAllocation  = "BalancedResourceAllocation"
	SelectorSpreadPriority      = "SelectorSpreadPriority"
	ServiceSpreadingPriority    = "ServiceSpreadingPriority"
	InterPodAffinityPriority    = "InterPodAffinityPriority"
	NodeAffinityPriority        = "NodeAffinityPriority"
	TaintTolerationPriority     = "TaintTolerationPriority"
	ImageLocalityPriority       = "ImageLocalityPriority"
	NodePreferAvoidPodsPriority = "NodePreferAvoidPodsPriority"
	EqualPriority               = "EqualPriority"
)

// Types of the configurable predicates and priorities: the argument that
// selects them. Their names are chosen by the policy's author.
const (
	TypeServiceAffinity     = "serviceAffinity"
	TypeLabelsPresence      = "labelsPresence"
	TypeServiceAntiAffinity = "serviceAntiAffinity"
	TypeLabelPreference     = "labelPreference"
)

// Info describes one predicate or priority type.
type Info struct {
	// Type is the canonical name of a static one, or the argument name of
	// a configurable one.
	Type string
	// Rank orders predicates: cheaper and more decisive ones run first.
	Rank int
	// Expands lists what a composite predicate stands for.
	Expands []string
	// NoOp marks predicates that are accepted and filter nothing: the
	// cloud-only ones (SPEC SCH-5), and the configurable ones named
	// without their argument.
	NoOp bool
	// Summary says what it does, for Describe.
	Summary string
}

// predicateInfo holds every predicate type, static and configurable. The
// ranks follow Kubernetes' fixed predicate order, which is also roughly
// cheapest first: node flags, then per-pod lookups, then scans of the
// pods on the node, then inter-pod affinity last.
var predicateInfo = map[string]*Info{
	CheckNodeCondition:              {Rank: 10, Summary: "nodes that are not Ready, whose network is unavailable, or that are cordoned (spec.unschedulable) are refused"},
	CheckNodeUnschedulable:          {Rank: 11, Summary: "cordoned nodes (spec.unschedulable) are refused unless the pod tolerates node.kubernetes.io/unschedulable:NoSchedule; always on"},
	GeneralPredicates:               {Rank: 20, Expands: []string{HostName, PodFitsHostPorts, MatchNodeSelector, PodFitsResources}, Summary: "PodFitsResources, PodFitsHostPorts, HostName and MatchNodeSelector together"},
	HostName:                        {Rank: 21, Summary: "a pod that names a node (spec.nodeName) fits only that node"},
	PodFitsHostPorts:                {Rank: 22, Summary: "the pod's host ports must be free on the node"},
	MatchNodeSelector:               {Rank: 23, Summary: "spec.nodeSelector and required node affinity must both match the node's labels"},
	PodFitsResources:                {Rank: 24, Summary: "requested (not used) CPU, memory, ephemeral storage, extended resources and the pod count must fit the node's allocatable"},
	NoDiskConflict:                  {Rank: 30, Summary: "a host path may be used by several pods of a node only if all of them mount it read-only"},
	PodToleratesNodeTaints:          {Rank: 40, Summary: "every NoSchedule and NoExecute taint of the node must be tolerated"},
	PodToleratesNodeNoExecuteTaints: {Rank: 41, Summary: "every NoExecute taint of the node must be tolerated"},
	CheckNodeLabelPresence:          {Rank: 50, NoOp: true, Summary: "without an argument: checks nothing (give it labelsPresence)"},
	TypeLabelsPresence:              {Rank: 50, Summary: "labels must all be present (presence: true) or all absent (presence: false) on the node, whatever their values"},
	CheckServiceAffinity:            {Rank: 51, NoOp: true, Summary: "without an argument: checks nothing (give it serviceAffinity)"},
	TypeServiceAffinity:             {Rank: 51, Summary: "later pods of a service only on nodes with the same values of the labels as the node of its first pod (or as the pod's nodeSelector)"},
	MaxEBSVolumeCount:               {Rank: 60, NoOp: true, Summary: "cloud-only (AWS EBS): accepted, filters nothing"},
	MaxGCEPDVolumeCount:             {Rank: 61, NoOp: true, Summary: "cloud-only (GCE PD): accepted, filters nothing"},
	MaxAzureDiskVolumeCount:         {Rank: 62, NoOp: true, Summary: "cloud-only (Azure Disk): accepted, filters nothing"},
	CheckVolumeBinding:              {Rank: 70, Summary: "a pod with persistentVolumeClaim volumes needs them bound to volumes the node can reach; pods without claims pass"},
	NoVolumeZoneConflict:            {Rank: 71, Summary: "the zones of the pod's persistent volumes must match the node's; pods without claims pass"},
	CheckNodeMemoryPressure:         {Rank: 80, Summary: "BestEffort pods are kept off nodes under memory pressure"},
	CheckNodePIDPressure:            {Rank: 81, Summary: "pods are kept off nodes under PID pressure"},
	CheckNodeDiskPressure:           {Rank: 82, Summary: "pods are kept off nodes under disk pressure"},
	MatchInterPodAffinity:           {Rank: 90, Summary: "required pod affinity and anti-affinity of the pod, and the required anti-affinity of the pods already placed, must hold"},
}

// priorityInfo holds every priority type.
var priorityInfo = map[string]*Info{
	LeastRequestedPriority:      {Summary: "prefers nodes with the smallest share of CPU and memory requested"},
	MostRequestedPriority:       {Summary: "prefers nodes with the largest share of CPU and memory requested"},
	BalancedResourceAllocation:  {Summary: "prefers nodes whose requested CPU and memory shares are close to each other"},
	SelectorSpreadPriority:      {Summary: "spreads the pods of a service or controller over nodes and zones"},
	ServiceSpreadingPriority:    {Summary: "spreads the pods of a service over nodes and zones"},
	InterPodAffinityPriority:    {Summary: "sums the weights of the preferred pod affinity (+) and anti-affinity (-) terms a node satisfies"},
	NodeAffinityPriority:        {Summary: "sums the weights of the preferred node affinity terms a node matches"},
	TaintTolerationPriority:     {Summary: "prefers nodes with fewer untolerated PreferNoSchedule taints"},
	ImageLocalityPriority:       {Summary: "prefers nodes that already hold the pod's images"},
	NodePreferAvoidPodsPriority: {Summary: "avoids nodes whose scheduler.alpha.kubernetes.io/preferAvoidPods annotation names the pod's ReplicationController or ReplicaSet"},
	EqualPriority:               {Summary: "gives every node 1 (for tests)"},
	TypeServiceAntiAffinity:     {Summary: "spreads a service's pods evenly over the groups of nodes sharing a value of the label; nodes without it score 0"},
	TypeLabelPreference:         {Summary: "prefers nodes that have (presence: true) or lack (presence: false) the label"},
}

// predicateAliases are older spellings Kubernetes and OpenShift accepted;
// the seed's own sample policy uses PodFitsPorts.
var predicateAliases = map[string]string{
	"PodFitsPorts":         PodFitsHostPorts,
	"CheckServiceAffinity": CheckServiceAffinity,
}

// configurableNames are static names that may carry their own type's
// argument: the seed lists them as predicates by these names.
var configurableNames = map[string]string{
	CheckNodeLabelPresence: TypeLabelsPresence,
	CheckServiceAffinity:   TypeServiceAffinity,
}

func init() {
	for k, v := range predicateInfo {
		v.Type = k
	}
	for k, v := range priorityInfo {
		v.Type = k
	}
}

// PredicateInfo returns what is known about a predicate type or name
// (aliases resolved).
func PredicateInfo(name string) (*Info, bool) {
	return lookupInfo(name, predicateInfo, predicateAliases)
}

// PriorityInfo returns what is known about a priority type.
func PriorityInfo(name string) (*Info, bool) {
	i, ok := priorityInfo[name]
	return i, ok
}

// lookupInfo returns known's entry for name, or for the name it is an
// alias of.
func lookupInfo(name string, known map[string]*Info, aliases map[string]string) (*Info, bool) {
	if c, ok := aliases[name]; ok {
		name = c
	}
	i, ok := known[name]
	return i, ok
}

// isConfigurableType reports whether t is the type of a configurable
// predicate or priority, which a policy may not name directly.
func isConfigurableType(t string) bool {
	switch t {
	case TypeServiceAffinity, TypeLabelsPresence, TypeServiceAntiAffinity, TypeLabelPreference:
		return true
	}
	return false
}

// suggest returns a known name (or alias) that differs from name only in
// case, for "did you mean" hints.
func suggest(name string, known map[string]*Info, aliases map[string]string) string {
	for k := range known {
		if !isConfigurableType(k) && strings.EqualFold(k, name) {
			return k
		}
	}
	for k := range aliases {
		if strings.EqualFold(k, name) {
			return k
		}
	}
	return ""
}

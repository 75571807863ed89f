package api

// Pod is one or more containers scheduled together onto a node.
type Pod struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata"`
	Spec       PodSpec   `json:"spec,omitzero"`
	Status     PodStatus `json:"status,omitzero"`
}

// PodSpec is what the pod asks for.
type PodSpec struct {
	Containers                    []Container       `json:"containers"`
	InitContainers                []Container       `json:"initContainers,omitempty"`
	Volumes                       []Volume          `json:"volumes,omitempty"`
	RestartPolicy                 string            `json:"restartPolicy,omitempty"`
	TerminationGracePeriodSeconds *int64            `json:"terminationGracePeriodSeconds,omitempty"`
	NodeSelector                  map[string]string `json:"nodeSelector,omitempty"`
	NodeName                      string            `json:"nodeName,omitempty"`
	SchedulerName                 string            `json:"schedulerName,omitempty"`
	Affinity                      *Affinity         `json:"affinity,omitempty"`
	Tolerations                   []Toleration      `json:"tolerations,omitempty"`
	HostNetwork                   bool              `json:"hostNetwork,omitempty"`
	Priority                      *int32            `json:"priority,omitempty"`
	PriorityClassName             string            `json:"priorityClassName,omitempty"`
	// DNSPolicy is where the pod's resolv.conf comes from (SPEC NET-4):
	// one of the DNSPolicy* values, ClusterFirst when empty.
	DNSPolicy string        `json:"dnsPolicy,omitempty"`
	DNSConfig *PodDNSConfig `json:"dnsConfig,omitempty"`
}

// DNS policies, as Kubernetes names them.
const (
	// DNSClusterFirst: the cluster's resolver, with the pod's namespace
	// first in the search path; a hostNetwork pod gets DNSDefault.
	DNSClusterFirst = "ClusterFirst"
	// DNSClusterFirstWithHostNet is ClusterFirst for hostNetwork pods too.
	DNSClusterFirstWithHostNet = "ClusterFirstWithHostNet"
	// DNSDefault: the node's resolv.conf.
	DNSDefault = "Default"
	// DNSNone: only what dnsConfig says.
	DNSNone = "None"
)

// PodDNSConfig is added to the resolv.conf the pod's DNS policy gives it
// (or is all of it, with DNSNone).
type PodDNSConfig struct {
	Nameservers []string             `json:"nameservers,omitempty"`
	Searches    []string             `json:"searches,omitempty"`
	Options     []PodDNSConfigOption `json:"options,omitempty"`
}

// PodDNSConfigOption is one resolv.conf option, such as ndots:2.
type PodDNSConfigOption struct {
	Name  string  `json:"name"`
	Value *string `json:"value,omitempty"`
}

// Restart policies.
const (
	RestartPolicyAlways    = "Always"
	RestartPolicyOnFailure = "OnFailure"
	RestartPolicyNever     = "Never"
)

// DefaultSchedulerName is the scheduler a pod gets when it names none.
const DefaultSchedulerName = "default-scheduler"

// Container is one process tree of a pod.
type Container struct {
	Name            string               `json:"name"`
	Image           string               `json:"image,omitempty"`
	Command         []string             `json:"command,omitempty"`
	Args            []string             `json:"args,omitempty"`
	WorkingDir      string               `json:"workingDir,omitempty"`
	Ports           []ContainerPort      `json:"ports,omitempty"`
	Env             []EnvVar             `json:"env,omitempty"`
	Resources       ResourceRequirements `json:"resources,omitzero"`
	VolumeMounts    []VolumeMount        `json:"volumeMounts,omitempty"`
	ImagePullPolicy string               `json:"imagePullPolicy,omitempty"`
}

// Image pull policies.
const (
	PullAlways       = "Always"
	PullIfNotPresent = "IfNotPresent"
	PullNever        = "Never"
)

// ContainerPort is a port the container listens on; with host networking
// it is a host port too.
type ContainerPort struct {
	Name          string `json:"name,omitempty"`
	HostPort      int32  `json:"hostPort,omitempty"`
	ContainerPort int32  `json:"containerPort"`
	Protocol      string `json:"protocol,omitempty"`
	HostIP        string `json:"hostIP,omitempty"`
}

// EnvVar is one environment variable of a container.
type EnvVar struct {
	Name  string `json:"name"`
	Value string `json:"value,omitempty"`
}

// ResourceRequirements are what a container requests (for scheduling) and
// its limits (cgroups).
type ResourceRequirements struct {
	Limits   ResourceList `json:"limits,omitempty"`
	Requests ResourceList `json:"requests,omitempty"`
}

// VolumeMount places a pod volume into a container.
type VolumeMount struct {
	Name      string `json:"name"`
	MountPath string `json:"mountPath"`
	ReadOnly  bool   `json:"readOnly,omitempty"`
	SubPath   string `json:"subPath,omitempty"`
}

// Volume is storage a pod's containers can mount.
type Volume struct {
	Name                  string                             `json:"name"`
	HostPath              *HostPathVolumeSource              `json:"hostPath,omitempty"`
	EmptyDir              *EmptyDirVolumeSource              `json:"emptyDir,omitempty"`
	PersistentVolumeClaim *PersistentVolumeClaimVolumeSource `json:"persistentVolumeClaim,omitempty"`
	// UnsupportedSources names the Kubernetes volume sources the body gave
	// ("configMap", "nfs"...) that the decoder dropped with a warning;
	// validation refuses a volume left with no source of its own, naming
	// them. Never stored or sent.
	UnsupportedSources []string `json:"-"`
}

// HostPathVolumeSource mounts a path of the host.
type HostPathVolumeSource struct {
	Path string `json:"path"`
	Type string `json:"type,omitempty"`
}

// EmptyDirVolumeSource is scratch space that lives as long as the pod.
type EmptyDirVolumeSource struct {
	Medium    string    `json:"medium,omitempty"`
	SizeLimit *Quantity `json:"sizeLimit,omitempty"`
}

// PersistentVolumeClaimVolumeSource refers to a claim (local volumes, SCH-3).
type PersistentVolumeClaimVolumeSource struct {
	ClaimName string `json:"claimName"`
	ReadOnly  bool   `json:"readOnly,omitempty"`
}

// Toleration lets a pod ignore taints it matches (SPEC TNT-2).
type Toleration struct {
	Key               string `json:"key,omitempty"`
	Operator          string `json:"operator,omitempty"`
	Value             string `json:"value,omitempty"`
	Effect            string `json:"effect,omitempty"`
	TolerationSeconds *int64 `json:"tolerationSeconds,omitempty"`
}

// Toleration operators.
const (
	TolerationOpEqual  = "Equal"
	TolerationOpExists = "Exists"
)

// Affinity groups node affinity and pod (anti-)affinity (SPEC SCH-10, SCH-11).
type Affinity struct {
	NodeAffinity    *NodeAffinity    `json:"nodeAffinity,omitempty"`
	PodAffinity     *PodAffinity     `json:"podAffinity,omitempty"`
	PodAntiAffinity *PodAntiAffinity `json:"podAntiAffinity,omitempty"`
}

// NodeAffinity constrains and ranks nodes by their labels.
type NodeAffinity struct {
	RequiredDuringSchedulingIgnoredDuringExecution  *NodeSelector             `json:"requiredDuringSchedulingIgnoredDuringExecution,omitempty"`
	PreferredDuringSchedulingIgnoredDuringExecution []PreferredSchedulingTerm `json:"preferredDuringSchedulingIgnoredDuringExecution,omitempty"`
}

// NodeSelector's terms are ORed.
type NodeSelector struct {
	NodeSelectorTerms []NodeSelectorTerm `json:"nodeSelectorTerms"`
}

// NodeSelectorTerm's expressions are ANDed.
type NodeSelectorTerm struct {
	MatchExpressions []NodeSelectorRequirement `json:"matchExpressions,omitempty"`
	MatchFields      []NodeSelectorRequirement `json:"matchFields,omitempty"`
}

// NodeSelectorRequirement is key, operator (In, NotIn, Exists,
// DoesNotExist, Gt, Lt) and values.
type NodeSelectorRequirement struct {
	Key      string   `json:"key"`
	Operator string   `json:"operator"`
	Values   []string `json:"values,omitempty"`
}

// Selector operators.
const (
	OpIn           = "In"
	OpNotIn        = "NotIn"
	OpExists       = "Exists"
	OpDoesNotExist = "DoesNotExist"
	OpGt           = "Gt"
	OpLt           = "Lt"
)

// PreferredSchedulingTerm is a weighted node preference (weight 1–100).
type PreferredSchedulingTerm struct {
	Weight     int32            `json:"weight"`
	Preference NodeSelectorTerm `json:"preference"`
}

// PodAffinity attracts a pod to the topology domains of other pods.
type PodAffinity struct {
	RequiredDuringSchedulingIgnoredDuringExecution  []PodAffinityTerm         `json:"requiredDuringSchedulingIgnoredDuringExecution,omitempty"`
	PreferredDuringSchedulingIgnoredDuringExecution []WeightedPodAffinityTerm `json:"preferredDuringSchedulingIgnoredDuringExecution,omitempty"`
}

// PodAntiAffinity repels a pod from the topology domains of other pods.
type PodAntiAffinity struct {
	RequiredDuringSchedulingIgnoredDuringExecution  []PodAffinityTerm         `json:"requiredDuringSchedulingIgnoredDuringExecution,omitempty"`
	PreferredDuringSchedulingIgnoredDuringExecution []WeightedPodAffinityTerm `json:"preferredDuringSchedulingIgnoredDuringExecution,omitempty"`
}

// PodAffinityTerm selects pods (in namespaces) and a topology key.
type PodAffinityTerm struct {
	LabelSelector *LabelSelector `json:"labelSelector,omitempty"`
	Namespaces    []string       `json:"namespaces,omitempty"`
	TopologyKey   string         `json:"topologyKey"`
}

// WeightedPodAffinityTerm is a preferred term with weight 1–100.
type WeightedPodAffinityTerm struct {
	Weight          int32           `json:"weight"`
	PodAffinityTerm PodAffinityTerm `json:"podAffinityTerm"`
}

// LabelSelector is matchLabels ANDed with matchExpressions.
type LabelSelector struct {
	MatchLabels      map[string]string          `json:"matchLabels,omitempty"`
	MatchExpressions []LabelSelectorRequirement `json:"matchExpressions,omitempty"`
}

// LabelSelectorRequirement is key, operator (In, NotIn, Exists,
// DoesNotExist) and values.
type LabelSelectorRequirement struct {
	Key      string   `json:"key"`
	Operator string   `json:"operator"`
	Values   []string `json:"values,omitempty"`
}

// PodStatus is what the scheduler and the agent report about a pod.
type PodStatus struct {
	Phase             string         `json:"phase,omitempty"`
	Conditions        []PodCondition `json:"conditions,omitempty"`
	Message           string         `json:"message,omitempty"`
	Reason            string         `json:"reason,omitempty"`
	NominatedNodeName string         `json:"nominatedNodeName,omitempty"`
	HostIP            string         `json:"hostIP,omitempty"`
	PodIP             string         `json:"podIP,omitempty"`
	// PodIPs are the pod's addresses, the first PodIP (SPEC NET-1).
	PodIPs                []PodIPEntry      `json:"podIPs,omitempty"`
	StartTime             *Time             `json:"startTime,omitempty"`
	InitContainerStatuses []ContainerStatus `json:"initContainerStatuses,omitempty"`
	ContainerStatuses     []ContainerStatus `json:"containerStatuses,omitempty"`
	QOSClass              string            `json:"qosClass,omitempty"`
}

// PodIPEntry is one of a pod's addresses.
type PodIPEntry struct {
	IP string `json:"ip"`
}

// Pod phases.
const (
	PodPending   = "Pending"
	PodRunning   = "Running"
	PodSucceeded = "Succeeded"
	PodFailed    = "Failed"
	PodUnknown   = "Unknown"
)

// IsPodPhaseTerminal reports whether phase is one a pod never leaves:
// Succeeded or Failed (evicted, say). Its controller replaces it, and
// nothing it holds counts any more.
func IsPodPhaseTerminal(phase string) bool { return phase == PodSucceeded || phase == PodFailed }

// PodCondition is one aspect of a pod's progress (PodScheduled, Ready, ...).
type PodCondition struct {
	Type               string `json:"type"`
	Status             string `json:"status"`
	LastProbeTime      *Time  `json:"lastProbeTime,omitempty"`
	LastTransitionTime *Time  `json:"lastTransitionTime,omitempty"`
	Reason             string `json:"reason,omitempty"`
	Message            string `json:"message,omitempty"`
}

// Pod condition types.
const (
	PodScheduled    = "PodScheduled"
	PodReady        = "Ready"
	PodInitialized  = "Initialized"
	ContainersReady = "ContainersReady"
	// PodDisruptionTarget says the pod is about to go, and why (an
	// eviction); Kubernetes' condition.
	PodDisruptionTarget = "DisruptionTarget"
)

// ContainerStatus reports one container.
type ContainerStatus struct {
	Name         string         `json:"name"`
	State        ContainerState `json:"state,omitzero"`
	LastState    ContainerState `json:"lastState,omitzero"`
	Ready        bool           `json:"ready"`
	RestartCount int32          `json:"restartCount"`
	Image        string         `json:"image"`
	ImageID      string         `json:"imageID"`
	ContainerID  string         `json:"containerID,omitempty"`
	Started      *bool          `json:"started,omitempty"`
}

// ContainerState is exactly one of waiting, running or terminated.
type ContainerState struct {
	Waiting    *ContainerStateWaiting    `json:"waiting,omitempty"`
	Running    *ContainerStateRunning    `json:"running,omitempty"`
	Terminated *ContainerStateTerminated `json:"terminated,omitempty"`
}

// ContainerStateWaiting says why a container is not running yet.
type ContainerStateWaiting struct {
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// ContainerStateRunning says since when a container runs.
type ContainerStateRunning struct {
	StartedAt *Time `json:"startedAt,omitempty"`
}

// ContainerStateTerminated says how a container ended.
type ContainerStateTerminated struct {
	ExitCode    int32  `json:"exitCode"`
	Signal      int32  `json:"signal,omitempty"`
	Reason      string `json:"reason,omitempty"`
	Message     string `json:"message,omitempty"`
	StartedAt   *Time  `json:"startedAt,omitempty"`
	FinishedAt  *Time  `json:"finishedAt,omitempty"`
	ContainerID string `json:"containerID,omitempty"`
}

// Binding assigns a pod to a node: the body of POST .../pods/NAME/binding.
type Binding struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata"`
	Target     ObjectReference `json:"target"`
}

// PodSpecOf returns the pod spec obj holds, its own (a Pod's) or its pod
// template's (a workload's), and the spec's field path; nil for kinds that
// hold none.
func PodSpecOf(obj Object) (spec *PodSpec, path string) {
	switch o := obj.(type) {
	case *Pod:
		return &o.Spec, "spec"
	case *ReplicaSet:
		return &o.Spec.Template.Spec, "spec.template.spec"
	case *Deployment:
		return &o.Spec.Template.Spec, "spec.template.spec"
	case *DaemonSet:
		return &o.Spec.Template.Spec, "spec.template.spec"
	}
	return nil, ""
}

// QOSClassOf is a pod's quality-of-service class by Kubernetes' rule:
// BestEffort without any request or limit, Guaranteed when every
// container limits CPU and memory with requests equal to the limits (or
// unset), else Burstable.
func QOSClassOf(spec *PodSpec) string {
	anySet, guaranteed := false, true
	for _, cs := range [][]Container{spec.InitContainers, spec.Containers} {
		for _, c := range cs {
			req, lim := c.Resources.Requests, c.Resources.Limits
			if len(req) > 0 || len(lim) > 0 {
				anySet = true
			}
			for _, r := range []string{"cpu", "memory"} {
				l, ok := lim[r]
				if !ok {
					guaranteed = false
					continue
				}
				if q, ok := req[r]; ok && q.MilliValue() != l.MilliValue() {
					guaranteed = false
				}
			}
		}
	}
	switch {
	case !anySet:
		return "BestEffort"
	case guaranteed:
		return "Guaranteed"
	}
	return "Burstable"
}

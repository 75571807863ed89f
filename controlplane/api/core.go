package api

// Namespace groups namespaced objects; deleting one deletes what it holds.
type Namespace struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata"`
	Spec       NamespaceSpec   `json:"spec,omitzero"`
	Status     NamespaceStatus `json:"status,omitzero"`
}

// NamespaceSpec lists the finalizers that must run before the namespace goes.
type NamespaceSpec struct {
	Finalizers []string `json:"finalizers,omitempty"`
}

// NamespaceStatus says whether the namespace is Active or Terminating.
type NamespaceStatus struct {
	Phase string `json:"phase,omitempty"`
}

// Namespace phases.
const (
	NamespaceActive      = "Active"
	NamespaceTerminating = "Terminating"
)

// Node is a host that runs pods.
type Node struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata"`
	Spec       NodeSpec   `json:"spec,omitzero"`
	Status     NodeStatus `json:"status,omitzero"`
}

// ReadyIn reports whether conds say the node is Ready (its Ready
// condition True; no condition is not Ready).
func ReadyIn(conds []NodeCondition) bool {
	for _, c := range conds {
		if c.Type == NodeReady {
			return c.Status == ConditionTrue
		}
	}
	return false
}

// NodeSpec holds what the administrator sets on a node.
type NodeSpec struct {
	Unschedulable bool    `json:"unschedulable,omitempty"`
	Taints        []Taint `json:"taints,omitempty"`
	// PodCIDR is the range the node's pods take addresses from, given by
	// the control plane from the cluster CIDR (SPEC NET-2); PodCIDRs
	// holds the same as a list, as Kubernetes' dual-stack field.
	PodCIDR    string   `json:"podCIDR,omitempty"`
	PodCIDRs   []string `json:"podCIDRs,omitempty"`
	ProviderID string   `json:"providerID,omitempty"`
}

// Taint repels pods that do not tolerate it (SPEC TNT-1).
type Taint struct {
	Key       string `json:"key"`
	Value     string `json:"value,omitempty"`
	Effect    string `json:"effect"`
	TimeAdded *Time  `json:"timeAdded,omitempty"`
}

// Taint effects.
const (
	TaintEffectNoSchedule       = "NoSchedule"
	TaintEffectPreferNoSchedule = "PreferNoSchedule"
	TaintEffectNoExecute        = "NoExecute"
)

// NodeStatus is what the agent reports about its host.
type NodeStatus struct {
	Capacity    ResourceList     `json:"capacity,omitempty"`
	Allocatable ResourceList     `json:"allocatable,omitempty"`
	Phase       string           `json:"phase,omitempty"`
	Conditions  []NodeCondition  `json:"conditions,omitempty"`
	Addresses   []NodeAddress    `json:"addresses,omitempty"`
	NodeInfo    NodeSystemInfo   `json:"nodeInfo,omitzero"`
	Images      []ContainerImage `json:"images,omitempty"`
	// DaemonEndpoints says where the node's agent serves logs, exec and
	// image import to the control plane.
	DaemonEndpoints NodeDaemonEndpoints `json:"daemonEndpoints,omitzero"`
}

// NodeDaemonEndpoints are the ports of the daemons on a node.
type NodeDaemonEndpoints struct {
	// KubeletEndpoint is the agent's port (Kubernetes' name for it).
	KubeletEndpoint DaemonEndpoint `json:"kubeletEndpoint,omitzero"`
}

// DaemonEndpoint is one daemon's port. The JSON key is "Port", as in
// Kubernetes.
type DaemonEndpoint struct {
	Port int32 `json:"Port"`
}

// NodeCondition is one reported aspect of a node's health (SPEC TNT-5).
type NodeCondition struct {
	Type               string `json:"type"`
	Status             string `json:"status"`
	LastHeartbeatTime  *Time  `json:"lastHeartbeatTime,omitempty"`
	LastTransitionTime *Time  `json:"lastTransitionTime,omitempty"`
	Reason             string `json:"reason,omitempty"`
	Message            string `json:"message,omitempty"`
}

// Node condition types.
const (
	NodeReady              = "Ready"
	NodeMemoryPressure     = "MemoryPressure"
	NodeDiskPressure       = "DiskPressure"
	NodePIDPressure        = "PIDPressure"
	NodeNetworkUnavailable = "NetworkUnavailable"
)

// Condition statuses.
const (
	ConditionTrue    = "True"
	ConditionFalse   = "False"
	ConditionUnknown = "Unknown"
)

// NodeAddress is one way to reach a node.
type NodeAddress struct {
	Type    string `json:"type"`
	Address string `json:"address"`
}

// NodeSystemInfo describes the host's software.
type NodeSystemInfo struct {
	MachineID               string `json:"machineID,omitempty"`
	SystemUUID              string `json:"systemUUID,omitempty"`
	BootID                  string `json:"bootID,omitempty"`
	KernelVersion           string `json:"kernelVersion,omitempty"`
	OSImage                 string `json:"osImage,omitempty"`
	ContainerRuntimeVersion string `json:"containerRuntimeVersion,omitempty"`
	KubeletVersion          string `json:"kubeletVersion,omitempty"`
	KubeProxyVersion        string `json:"kubeProxyVersion,omitempty"`
	OperatingSystem         string `json:"operatingSystem,omitempty"`
	Architecture            string `json:"architecture,omitempty"`
}

// ContainerImage is an image held on a node (for ImageLocalityPriority).
type ContainerImage struct {
	Names     []string `json:"names"`
	SizeBytes int64    `json:"sizeBytes,omitempty"`
}

// Event records something that happened to an object (SCH-13 reasons and
// the agent's reports). Events are kept for a bounded time.
type Event struct {
	TypeMeta       `json:",inline"`
	ObjectMeta     `json:"metadata"`
	InvolvedObject ObjectReference `json:"involvedObject"`
	Reason         string          `json:"reason,omitempty"`
	Message        string          `json:"message,omitempty"`
	Source         EventSource     `json:"source,omitzero"`
	FirstTimestamp *Time           `json:"firstTimestamp,omitempty"`
	LastTimestamp  *Time           `json:"lastTimestamp,omitempty"`
	Count          int32           `json:"count,omitempty"`
	Type           string          `json:"type,omitempty"`
}

// ObjectReference names another object.
type ObjectReference struct {
	Kind            string `json:"kind,omitempty"`
	Namespace       string `json:"namespace,omitempty"`
	Name            string `json:"name,omitempty"`
	UID             string `json:"uid,omitempty"`
	APIVersion      string `json:"apiVersion,omitempty"`
	ResourceVersion string `json:"resourceVersion,omitempty"`
	FieldPath       string `json:"fieldPath,omitempty"`
}

// EventSource names the component that reported an event.
type EventSource struct {
	Component string `json:"component,omitempty"`
	Host      string `json:"host,omitempty"`
}

// Event types.
const (
	EventTypeNormal  = "Normal"
	EventTypeWarning = "Warning"
)

// Service is a named label selector over pods; the scheduler's service
// predicates and priorities read it (SPEC SCH-4, SCH-7).
type Service struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata"`
	Spec       ServiceSpec   `json:"spec,omitzero"`
	Status     ServiceStatus `json:"status,omitzero"`
}

// ServiceSpec selects the pods of a service.
type ServiceSpec struct {
	Selector  map[string]string `json:"selector,omitempty"`
	Ports     []ServicePort     `json:"ports,omitempty"`
	Type      string            `json:"type,omitempty"`
	ClusterIP string            `json:"clusterIP,omitempty"`
	// ExternalName is the name an ExternalName Service is a CNAME of
	// in the cluster's DNS.
	ExternalName string `json:"externalName,omitempty"`
	// SessionAffinity ClientIP sends a client's connections to the
	// endpoint it reached last, until it was idle for
	// SessionAffinityConfig.ClientIP.TimeoutSeconds (default 10800).
	SessionAffinity       string                 `json:"sessionAffinity,omitempty"`
	SessionAffinityConfig *SessionAffinityConfig `json:"sessionAffinityConfig,omitempty"`
}

// Session affinities.
const (
	ServiceAffinityNone     = "None"
	ServiceAffinityClientIP = "ClientIP"
)

// SessionAffinityConfig configures ClientIP affinity.
type SessionAffinityConfig struct {
	ClientIP *ClientIPConfig `json:"clientIP,omitempty"`
}

// ClientIPConfig is how long a client stays with its endpoint.
type ClientIPConfig struct {
	TimeoutSeconds *int32 `json:"timeoutSeconds,omitempty"`
}

// ServicePort is a port a service exposes.
type ServicePort struct {
	Name       string      `json:"name,omitempty"`
	Protocol   string      `json:"protocol,omitempty"`
	Port       int32       `json:"port"`
	TargetPort IntOrString `json:"targetPort,omitzero"`
	NodePort   int32       `json:"nodePort,omitempty"`
}

// ServiceStatus is empty for now; it exists so that manifests with a status
// stanza load.
type ServiceStatus struct{}

package api

import (
	"maps"
	"strings"
)

// Defaults that Kubernetes applies and outpost keeps.
const (
	DefaultTerminationGracePeriodSeconds int64 = 30
	DefaultRevisionHistoryLimit          int32 = 10
	DefaultProgressDeadlineSeconds       int32 = 600
	DefaultMaxSurge                            = "25%"
	DefaultMaxUnavailable                      = "25%"
)

// Protocols of ports.
const (
	ProtocolTCP  = "TCP"
	ProtocolUDP  = "UDP"
	ProtocolSCTP = "SCTP"
)

// Service types.
const (
	ServiceTypeClusterIP    = "ClusterIP"
	ServiceTypeNodePort     = "NodePort"
	ServiceTypeLoadBalancer = "LoadBalancer"
	ServiceTypeExternalName = "ExternalName"
)

// Daemon set update strategy types.
const (
	OnDeleteDaemonSetStrategyType      = "OnDelete"
	RollingUpdateDaemonSetStrategyType = "RollingUpdate"
)

// SetDefaults fills in what a user may leave out, as Kubernetes does, so
// that validation and the controllers see complete objects. It runs on
// every create and update before validation; it only fills empty fields,
// so running it twice changes nothing.
func SetDefaults(obj Object) {
	switch o := obj.(type) {
	case *Pod:
		SetDefaultsPodSpec(&o.Spec)
		if o.Status.Phase == "" {
			o.Status.Phase = PodPending
		}
	case *Namespace:
		if o.Status.Phase == "" {
			o.Status.Phase = NamespaceActive
		}
	case *Node:
		// A node that reports no allocatable offers its whole capacity.
		if o.Status.Allocatable == nil && o.Status.Capacity != nil {
			o.Status.Allocatable = maps.Clone(o.Status.Capacity)
		}
		// The two forms of the pod CIDR say the same: either given
		// fills the other.
		if o.Spec.PodCIDR == "" && len(o.Spec.PodCIDRs) > 0 {
			o.Spec.PodCIDR = o.Spec.PodCIDRs[0]
		}
		if o.Spec.PodCIDR != "" && len(o.Spec.PodCIDRs) == 0 {
			o.Spec.PodCIDRs = []string{o.Spec.PodCIDR}
		}
	case *Service:
		setDefaultsService(&o.Spec)
	case *EndpointSlice:
		for i := range o.Ports {
			if o.Ports[i].Protocol == "" {
				o.Ports[i].Protocol = ProtocolTCP
			}
		}
	case *ReplicaSet:
		if o.Spec.Replicas == nil {
			o.Spec.Replicas = ptrTo(int32(1))
		}
		SetDefaultsPodSpec(&o.Spec.Template.Spec)
	case *Deployment:
		setDefaultsDeployment(&o.Spec)
	case *DaemonSet:
		setDefaultsDaemonSet(&o.Spec)
	case *Event:
		if o.Type == "" {
			o.Type = EventTypeNormal
		}
	}
}

// SetDefaultsPodSpec defaults a pod's spec, or a template's.
func SetDefaultsPodSpec(s *PodSpec) {
	if s.RestartPolicy == "" {
		s.RestartPolicy = RestartPolicyAlways
	}
	if s.SchedulerName == "" {
		s.SchedulerName = DefaultSchedulerName
	}
	if s.DNSPolicy == "" {
		s.DNSPolicy = DNSClusterFirst
	}
	if s.TerminationGracePeriodSeconds == nil {
		s.TerminationGracePeriodSeconds = ptrTo(DefaultTerminationGracePeriodSeconds)
	}
	for i := range s.InitContainers {
		setDefaultsContainer(&s.InitContainers[i], s.HostNetwork)
	}
	for i := range s.Containers {
		setDefaultsContainer(&s.Containers[i], s.HostNetwork)
	}
	for i := range s.Tolerations {
		// An empty operator means Equal (SPEC TNT-2); writing it out makes
		// the stored object say so. An empty key only makes sense with
		// Exists, which validation then demands.
		if s.Tolerations[i].Operator == "" {
			s.Tolerations[i].Operator = TolerationOpEqual
		}
	}
}

func setDefaultsContainer(c *Container, hostNetwork bool) {
	if c.ImagePullPolicy == "" {
		if tag := imageTag(c.Image); tag == "" || tag == "latest" {
			c.ImagePullPolicy = PullAlways
		} else {
			c.ImagePullPolicy = PullIfNotPresent
		}
	}
	for i := range c.Ports {
		p := &c.Ports[i]
		if p.Protocol == "" {
			p.Protocol = ProtocolTCP
		}
		// On the host's network the container's port is the host's port.
		if hostNetwork && p.HostPort == 0 {
			p.HostPort = p.ContainerPort
		}
	}
	// Limits without requests request the limit, so that the scheduler
	// reserves what the container may use.
	// The map is replaced, not changed: it may be shared with the template
	// the pod was made from.
	var req ResourceList
	for name, q := range c.Resources.Limits {
		if _, ok := c.Resources.Requests[name]; ok {
			continue
		}
		if req == nil {
			req = make(ResourceList, len(c.Resources.Requests)+len(c.Resources.Limits))
			maps.Copy(req, c.Resources.Requests)
		}
		req[name] = q
	}
	if req != nil {
		c.Resources.Requests = req
	}
}

// imageTag returns the tag of an image reference, "" when it has none. A
// digest (@sha256:...) counts as a tag: the image cannot change under it.
func imageTag(image string) string {
	if i := strings.IndexByte(image, '@'); i >= 0 {
		return image[i+1:]
	}
	// The tag follows the last ':' after the last '/'; a ':' before it is
	// a registry port.
	slash := strings.LastIndexByte(image, '/')
	if i := strings.LastIndexByte(image, ':'); i > slash {
		return image[i+1:]
	}
	return ""
}

func setDefaultsService(s *ServiceSpec) {
	if s.Type == "" {
		s.Type = ServiceTypeClusterIP
	}
	if s.SessionAffinity == "" {
		s.SessionAffinity = ServiceAffinityNone
	}
	if s.SessionAffinity == ServiceAffinityClientIP {
		if s.SessionAffinityConfig == nil {
			s.SessionAffinityConfig = &SessionAffinityConfig{}
		}
		if s.SessionAffinityConfig.ClientIP == nil {
			s.SessionAffinityConfig.ClientIP = &ClientIPConfig{}
		}
		if s.SessionAffinityConfig.ClientIP.TimeoutSeconds == nil {
			s.SessionAffinityConfig.ClientIP.TimeoutSeconds = ptrTo(int32(10800))
		}
	}
	for i := range s.Ports {
		p := &s.Ports[i]
		if p.Protocol == "" {
			p.Protocol = ProtocolTCP
		}
		if p.TargetPort.IsZero() {
			p.TargetPort = FromInt(p.Port)
		}
	}
}

func setDefaultsDeployment(s *DeploymentSpec) {
	if s.Replicas == nil {
		s.Replicas = ptrTo(int32(1))
	}
	if s.Strategy.Type == "" {
		s.Strategy.Type = RollingUpdateDeploymentStrategyType
	}
	if s.Strategy.Type == RollingUpdateDeploymentStrategyType {
		if s.Strategy.RollingUpdate == nil {
			s.Strategy.RollingUpdate = &RollingUpdateDeployment{}
		}
		ru := s.Strategy.RollingUpdate
		if ru.MaxUnavailable == nil {
			ru.MaxUnavailable = ptrTo(FromString(DefaultMaxUnavailable))
		}
		if ru.MaxSurge == nil {
			ru.MaxSurge = ptrTo(FromString(DefaultMaxSurge))
		}
	}
	if s.RevisionHistoryLimit == nil {
		s.RevisionHistoryLimit = ptrTo(DefaultRevisionHistoryLimit)
	}
	if s.ProgressDeadlineSeconds == nil {
		s.ProgressDeadlineSeconds = ptrTo(DefaultProgressDeadlineSeconds)
	}
	SetDefaultsPodSpec(&s.Template.Spec)
}

func setDefaultsDaemonSet(s *DaemonSetSpec) {
	if s.UpdateStrategy.Type == "" {
		s.UpdateStrategy.Type = RollingUpdateDaemonSetStrategyType
	}
	if s.UpdateStrategy.Type == RollingUpdateDaemonSetStrategyType {
		if s.UpdateStrategy.RollingUpdate == nil {
			s.UpdateStrategy.RollingUpdate = &RollingUpdateDaemonSet{}
		}
		ru := s.UpdateStrategy.RollingUpdate
		if ru.MaxUnavailable == nil {
			ru.MaxUnavailable = ptrTo(FromInt(1))
		}
		if ru.MaxSurge == nil {
			ru.MaxSurge = ptrTo(FromInt(0))
		}
	}
	if s.RevisionHistoryLimit == nil {
		s.RevisionHistoryLimit = ptrTo(DefaultRevisionHistoryLimit)
	}
	SetDefaultsPodSpec(&s.Template.Spec)
}

func ptrTo[T any](v T) *T { return &v }

package api

import (
	"fmt"
	"net/netip"
	"path"
	"slices"
	"strings"
)

var (
	restartPolicies = []string{RestartPolicyAlways, RestartPolicyOnFailure, RestartPolicyNever}
	pullPolicies    = []string{PullAlways, PullIfNotPresent, PullNever}
	hostPathTypes   = []string{"", "DirectoryOrCreate", "Directory", "FileOrCreate", "File", "Socket", "CharDevice", "BlockDevice"}
	nodeSelectorOps = []string{OpIn, OpNotIn, OpExists, OpDoesNotExist, OpGt, OpLt}
	podPhases       = []string{PodPending, PodRunning, PodSucceeded, PodFailed, PodUnknown}
	dnsPolicies     = []string{DNSClusterFirst, DNSClusterFirstWithHostNet, DNSDefault, DNSNone}
)

// resolv.conf's limits, as the kubelet enforces them: glibc reads three
// nameservers; 32 search domains in 2,048 bytes.
const (
	maxDNSNameservers  = 3
	maxDNSSearches     = 32
	maxDNSSearchLength = 2048
)

// ValidatePodSpec checks a pod's spec, or a template's, at path p
// ("spec" or "spec.template.spec").
func ValidatePodSpec(s *PodSpec, p *Path) ErrorList {
	var errs ErrorList
	volumes, vErrs := validateVolumes(s.Volumes, p.Child("volumes"))
	errs = append(errs, vErrs...)

	if len(s.Containers) == 0 {
		errs = append(errs, Required(p.Child("containers"), ""))
	}
	names := make(map[string]bool, len(s.Containers)+len(s.InitContainers))
	hostPorts := make(map[string]bool)
	for i := range s.InitContainers {
		errs = append(errs, validateContainer(&s.InitContainers[i], p.Child("initContainers").Index(i), s.HostNetwork, names, volumes, nil)...)
	}
	for i := range s.Containers {
		errs = append(errs, validateContainer(&s.Containers[i], p.Child("containers").Index(i), s.HostNetwork, names, volumes, hostPorts)...)
	}

	switch {
	case s.RestartPolicy == "":
		errs = append(errs, Required(p.Child("restartPolicy"), ""))
	case !slices.Contains(restartPolicies, s.RestartPolicy):
		errs = append(errs, NotSupported(p.Child("restartPolicy"), s.RestartPolicy, restartPolicies))
	}
	if g := s.TerminationGracePeriodSeconds; g != nil {
		errs = append(errs, validateNonnegative(p.Child("terminationGracePeriodSeconds"), *g)...)
	}
	errs = append(errs, ValidateLabels(s.NodeSelector, p.Child("nodeSelector"))...)
	if s.NodeName != "" {
		errs = append(errs, invalidMsgs(p.Child("nodeName"), s.NodeName, IsDNS1123Subdomain(s.NodeName))...)
	}
	if s.SchedulerName != "" {
		errs = append(errs, invalidMsgs(p.Child("schedulerName"), s.SchedulerName, IsDNS1123Subdomain(s.SchedulerName))...)
	}
	if s.PriorityClassName != "" {
		errs = append(errs, invalidMsgs(p.Child("priorityClassName"), s.PriorityClassName, IsDNS1123Subdomain(s.PriorityClassName))...)
	}
	if s.Affinity != nil {
		errs = append(errs, validateAffinity(s.Affinity, p.Child("affinity"))...)
	}
	for i, t := range s.Tolerations {
		errs = append(errs, ValidateToleration(t, p.Child("tolerations").Index(i))...)
	}
	errs = append(errs, validateDNS(s, p)...)
	return errs
}

// validateDNS checks the pod's DNS policy and config as resolv.conf
// can hold them.
func validateDNS(s *PodSpec, p *Path) ErrorList {
	var errs ErrorList
	if s.DNSPolicy != "" && !slices.Contains(dnsPolicies, s.DNSPolicy) {
		errs = append(errs, NotSupported(p.Child("dnsPolicy"), s.DNSPolicy, dnsPolicies))
	}
	c, cp := s.DNSConfig, p.Child("dnsConfig")
	if s.DNSPolicy == DNSNone && (c == nil || len(c.Nameservers) == 0) {
		errs = append(errs, Required(cp.Child("nameservers"), "must provide at least one DNS nameserver when `dnsPolicy` is None"))
	}
	if c == nil {
		return errs
	}
	if len(c.Nameservers) > maxDNSNameservers {
		errs = append(errs, Invalid(cp.Child("nameservers"), c.Nameservers, fmt.Sprintf("must not have more than %d nameservers", maxDNSNameservers)))
	}
	for i, ns := range c.Nameservers {
		if _, err := netip.ParseAddr(ns); err != nil {
			errs = append(errs, Invalid(cp.Child("nameservers").Index(i), ns, "must be a valid IP address"))
		}
	}
	if len(c.Searches) > maxDNSSearches {
		errs = append(errs, Invalid(cp.Child("searches"), c.Searches, fmt.Sprintf("must not have more than %d search paths", maxDNSSearches)))
	}
	if n := len(strings.Join(c.Searches, " ")); n > maxDNSSearchLength {
		errs = append(errs, Invalid(cp.Child("searches"), c.Searches, fmt.Sprintf("must not have more than %d characters (including spaces) in the search list", maxDNSSearchLength)))
	}
	for i, d := range c.Searches {
		// A trailing dot (fully qualified) is allowed, as Kubernetes
		// allows it.
		errs = append(errs, invalidMsgs(cp.Child("searches").Index(i), d, IsDNS1123Subdomain(strings.TrimSuffix(d, ".")))...)
	}
	for i, o := range c.Options {
		if o.Name == "" {
			errs = append(errs, Required(cp.Child("options").Index(i).Child("name"), ""))
		}
	}
	return errs
}

// validateVolumes checks names and sources and returns the set of names.
func validateVolumes(vols []Volume, p *Path) (map[string]bool, ErrorList) {
	if len(vols) == 0 {
		return nil, nil // read only: a nil map has no names
	}
	var errs ErrorList
	names := make(map[string]bool, len(vols))
	for i := range vols {
		v := &vols[i]
		vp := p.Index(i)
		errs = append(errs, validateName(vp.Child("name"), v.Name, IsDNS1123Label)...)
		if v.Name != "" {
			if names[v.Name] {
				errs = append(errs, Duplicate(vp.Child("name"), v.Name))
			}
			names[v.Name] = true
		}
		n := 0
		if v.HostPath != nil {
			n++
			if v.HostPath.Path == "" {
				errs = append(errs, Required(vp.Child("hostPath", "path"), ""))
			}
			if !slices.Contains(hostPathTypes, v.HostPath.Type) {
				errs = append(errs, NotSupported(vp.Child("hostPath", "type"), v.HostPath.Type, hostPathTypes[1:]))
			}
		}
		if v.EmptyDir != nil {
			if n++; n > 1 {
				errs = append(errs, Forbidden(vp.Child("emptyDir"), "may not specify more than 1 volume type"))
			}
			switch m := v.EmptyDir.Medium; {
			case m == "", m == "Memory", m == "HugePages", strings.HasPrefix(m, "HugePages-"):
			default:
				errs = append(errs, NotSupported(vp.Child("emptyDir", "medium"), m, []string{"", "Memory", "HugePages"}))
			}
			if sl := v.EmptyDir.SizeLimit; sl != nil && sl.MilliValue() < 0 {
				errs = append(errs, Invalid(vp.Child("emptyDir", "sizeLimit"), sl.String(), "must be greater than or equal to 0"))
			}
		}
		if v.PersistentVolumeClaim != nil {
			if n++; n > 1 {
				errs = append(errs, Forbidden(vp.Child("persistentVolumeClaim"), "may not specify more than 1 volume type"))
			}
			if v.PersistentVolumeClaim.ClaimName == "" {
				errs = append(errs, Required(vp.Child("persistentVolumeClaim", "claimName"), ""))
			}
		}
		switch {
		case n == 0 && len(v.UnsupportedSources) > 0:
			// The body gave a source, one outpost dropped with a warning:
			// "Required" would read as if it gave none.
			errs = append(errs, &FieldError{Type: FieldValueNotSupported, Field: vp.String(), BadValue: v.UnsupportedSources[0],
				Detail: "outpost supports hostPath, emptyDir and persistentVolumeClaim volumes"})
		case n == 0:
			errs = append(errs, Required(vp, "must specify a volume type: outpost supports hostPath, emptyDir and persistentVolumeClaim"))
		}
	}
	return names, errs
}

// validateContainer checks one container; names collects container names
// across init and regular containers, hostPorts the host ports of regular
// containers (nil for init containers, which run one at a time).
func validateContainer(c *Container, p *Path, hostNetwork bool, names, volumes, hostPorts map[string]bool) ErrorList {
	var errs ErrorList
	errs = append(errs, validateName(p.Child("name"), c.Name, IsDNS1123Label)...)
	if c.Name != "" {
		if names[c.Name] {
			errs = append(errs, Duplicate(p.Child("name"), c.Name))
		}
		names[c.Name] = true
	}
	switch {
	case c.Image == "":
		errs = append(errs, Required(p.Child("image"), ""))
	case strings.TrimSpace(c.Image) != c.Image:
		errs = append(errs, Invalid(p.Child("image"), c.Image, "must not have leading or trailing whitespace"))
	}
	switch {
	case c.ImagePullPolicy == "":
		errs = append(errs, Required(p.Child("imagePullPolicy"), ""))
	case !slices.Contains(pullPolicies, c.ImagePullPolicy):
		errs = append(errs, NotSupported(p.Child("imagePullPolicy"), c.ImagePullPolicy, pullPolicies))
	}

	portNames := make(map[string]bool, len(c.Ports))
	for i, port := range c.Ports {
		pp := p.Child("ports").Index(i)
		if port.Name != "" {
			errs = append(errs, invalidMsgs(pp.Child("name"), port.Name, IsPortName(port.Name))...)
			if portNames[port.Name] {
				errs = append(errs, Duplicate(pp.Child("name"), port.Name))
			}
			portNames[port.Name] = true
		}
		if !isValidPort(port.ContainerPort) {
			errs = append(errs, Invalid(pp.Child("containerPort"), int64(port.ContainerPort), portRangeMsg))
		}
		if port.HostPort != 0 && !isValidPort(port.HostPort) {
			errs = append(errs, Invalid(pp.Child("hostPort"), int64(port.HostPort), portRangeMsg))
		}
		if hostNetwork && port.HostPort != port.ContainerPort {
			errs = append(errs, Invalid(pp.Child("hostPort"), int64(port.HostPort), "must match `containerPort` when `hostNetwork` is true"))
		}
		errs = append(errs, validateProtocol(port.Protocol, pp.Child("protocol"))...)
		if port.HostIP != "" && !isIP(port.HostIP) {
			errs = append(errs, Invalid(pp.Child("hostIP"), port.HostIP, "must be a valid IP address"))
		}
		if hostPorts != nil && port.HostPort != 0 {
			key := fmt.Sprintf("%s/%d/%s", port.HostIP, port.HostPort, port.Protocol)
			if hostPorts[key] {
				errs = append(errs, Duplicate(pp.Child("hostPort"), fmt.Sprintf("%d/%s", port.HostPort, port.Protocol)))
			}
			hostPorts[key] = true
		}
	}

	for i, e := range c.Env {
		ep := p.Child("env").Index(i)
		if e.Name == "" {
			errs = append(errs, Required(ep.Child("name"), ""))
		} else {
			errs = append(errs, invalidMsgs(ep.Child("name"), e.Name, IsEnvVarName(e.Name))...)
		}
	}

	errs = append(errs, validateResources(&c.Resources, p.Child("resources"))...)

	mountPaths := make(map[string]bool, len(c.VolumeMounts))
	for i, m := range c.VolumeMounts {
		mp := p.Child("volumeMounts").Index(i)
		switch {
		case m.Name == "":
			errs = append(errs, Required(mp.Child("name"), ""))
		case !volumes[m.Name]:
			errs = append(errs, NotFound(mp.Child("name"), m.Name))
		}
		if m.MountPath == "" {
			errs = append(errs, Required(mp.Child("mountPath"), ""))
		} else {
			if mountPaths[m.MountPath] {
				errs = append(errs, Invalid(mp.Child("mountPath"), m.MountPath, "must be unique"))
			}
			mountPaths[m.MountPath] = true
		}
		if sp := m.SubPath; sp != "" {
			if path.IsAbs(sp) {
				errs = append(errs, Invalid(mp.Child("subPath"), sp, "must be a relative path"))
			}
			if slices.Contains(strings.Split(sp, "/"), "..") {
				errs = append(errs, Invalid(mp.Child("subPath"), sp, "must not contain '..'"))
			}
		}
	}
	return errs
}

// validateResources checks resource names, that no amount is negative and
// that no request exceeds its limit.
func validateResources(r *ResourceRequirements, p *Path) ErrorList {
	errs := validateResourceList(r.Limits, p.Child("limits"))
	errs = append(errs, validateResourceList(r.Requests, p.Child("requests"))...)
	for _, name := range sortedResourceNames(r.Requests) {
		req := r.Requests[name]
		if lim, ok := r.Limits[name]; ok && req.MilliValue() > lim.MilliValue() {
			errs = append(errs, Invalid(p.Child("requests").Key(name), req.String(),
				fmt.Sprintf("must be less than or equal to %s limit of %s", name, lim.String())))
		}
	}
	return errs
}

func validateAffinity(a *Affinity, p *Path) ErrorList {
	var errs ErrorList
	if na := a.NodeAffinity; na != nil {
		np := p.Child("nodeAffinity")
		if req := na.RequiredDuringSchedulingIgnoredDuringExecution; req != nil {
			rp := np.Child("requiredDuringSchedulingIgnoredDuringExecution")
			if len(req.NodeSelectorTerms) == 0 {
				errs = append(errs, Required(rp.Child("nodeSelectorTerms"), "must have at least one node selector term"))
			}
			for i := range req.NodeSelectorTerms {
				errs = append(errs, validateNodeSelectorTerm(&req.NodeSelectorTerms[i], rp.Child("nodeSelectorTerms").Index(i))...)
			}
		}
		for i := range na.PreferredDuringSchedulingIgnoredDuringExecution {
			t := &na.PreferredDuringSchedulingIgnoredDuringExecution[i]
			tp := np.Child("preferredDuringSchedulingIgnoredDuringExecution").Index(i)
			errs = append(errs, validateWeight(t.Weight, tp.Child("weight"))...)
			errs = append(errs, validateNodeSelectorTerm(&t.Preference, tp.Child("preference"))...)
		}
	}
	if pa := a.PodAffinity; pa != nil {
		errs = append(errs, validatePodAffinityTerms(pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution, p.Child("podAffinity"))...)
	}
	if pa := a.PodAntiAffinity; pa != nil {
		errs = append(errs, validatePodAffinityTerms(pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution, p.Child("podAntiAffinity"))...)
	}
	return errs
}

func validateWeight(w int32, p *Path) ErrorList {
	if w < 1 || w > 100 {
		return ErrorList{Invalid(p, int64(w), "must be in the range 1-100")}
	}
	return nil
}

func validateNodeSelectorTerm(t *NodeSelectorTerm, p *Path) ErrorList {
	var errs ErrorList
	for i := range t.MatchExpressions {
		e := &t.MatchExpressions[i]
		ep := p.Child("matchExpressions").Index(i)
		errs = append(errs, invalidMsgs(ep.Child("key"), e.Key, IsQualifiedName(e.Key))...)
		errs = append(errs, validateNodeSelectorRequirement(e, ep)...)
	}
	for i := range t.MatchFields {
		f := &t.MatchFields[i]
		fp := p.Child("matchFields").Index(i)
		if f.Key != "metadata.name" {
			errs = append(errs, NotSupported(fp.Child("key"), f.Key, []string{"metadata.name"}))
		}
		switch f.Operator {
		case OpIn, OpNotIn:
			if len(f.Values) != 1 {
				errs = append(errs, Required(fp.Child("values"), "must be only one value when `operator` is 'In' or 'NotIn' for node field selector"))
			}
		default:
			errs = append(errs, NotSupported(fp.Child("operator"), f.Operator, []string{OpIn, OpNotIn}))
		}
	}
	return errs
}

func validateNodeSelectorRequirement(e *NodeSelectorRequirement, p *Path) ErrorList {
	var errs ErrorList
	switch e.Operator {
	case OpIn, OpNotIn:
		if len(e.Values) == 0 {
			errs = append(errs, Required(p.Child("values"), "must be specified when `operator` is 'In' or 'NotIn'"))
		}
	case OpExists, OpDoesNotExist:
		if len(e.Values) > 0 {
			errs = append(errs, Forbidden(p.Child("values"), "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
		}
	case OpGt, OpLt:
		if len(e.Values) != 1 {
			errs = append(errs, Required(p.Child("values"), "must be specified single value when `operator` is 'Lt' or 'Gt'"))
		} else if _, ok := parseInt64(e.Values[0]); !ok {
			errs = append(errs, Invalid(p.Child("values").Index(0), e.Values[0], "must be an integer when `operator` is 'Lt' or 'Gt'"))
		}
		return errs
	default:
		return append(errs, NotSupported(p.Child("operator"), e.Operator, nodeSelectorOps))
	}
	for i, v := range e.Values {
		errs = append(errs, invalidMsgs(p.Child("values").Index(i), v, IsValidLabelValue(v))...)
	}
	return errs
}

func validatePodAffinityTerms(req []PodAffinityTerm, pref []WeightedPodAffinityTerm, p *Path) ErrorList {
	var errs ErrorList
	for i := range req {
		errs = append(errs, validatePodAffinityTerm(&req[i], p.Child("requiredDuringSchedulingIgnoredDuringExecution").Index(i))...)
	}
	for i := range pref {
		tp := p.Child("preferredDuringSchedulingIgnoredDuringExecution").Index(i)
		errs = append(errs, validateWeight(pref[i].Weight, tp.Child("weight"))...)
		errs = append(errs, validatePodAffinityTerm(&pref[i].PodAffinityTerm, tp.Child("podAffinityTerm"))...)
	}
	return errs
}

func validatePodAffinityTerm(t *PodAffinityTerm, p *Path) ErrorList {
	errs := ValidateLabelSelector(t.LabelSelector, p.Child("labelSelector"))
	for i, ns := range t.Namespaces {
		errs = append(errs, validateName(p.Child("namespaces").Index(i), ns, IsDNS1123Label)...)
	}
	if t.TopologyKey == "" {
		errs = append(errs, Required(p.Child("topologyKey"), "can not be empty"))
	} else {
		errs = append(errs, invalidMsgs(p.Child("topologyKey"), t.TopologyKey, IsQualifiedName(t.TopologyKey))...)
	}
	return errs
}

func validatePodStatus(s *PodStatus, p *Path) ErrorList {
	var errs ErrorList
	if s.Phase != "" && !slices.Contains(podPhases, s.Phase) {
		errs = append(errs, NotSupported(p.Child("phase"), s.Phase, podPhases))
	}
	for i, c := range s.Conditions {
		errs = append(errs, validateCondition(c.Type, c.Status, p.Child("conditions").Index(i))...)
	}
	if s.PodIP != "" && !isIP(s.PodIP) {
		errs = append(errs, Invalid(p.Child("podIP"), s.PodIP, "must be a valid IP address"))
	}
	for i, ip := range s.PodIPs {
		if !isIP(ip.IP) {
			errs = append(errs, Invalid(p.Child("podIPs").Index(i).Child("ip"), ip.IP, "must be a valid IP address"))
		}
	}
	if len(s.PodIPs) > 0 && s.PodIPs[0].IP != s.PodIP {
		errs = append(errs, Invalid(p.Child("podIPs").Index(0).Child("ip"), s.PodIPs[0].IP, "must match status.podIP"))
	}
	if s.HostIP != "" && !isIP(s.HostIP) {
		errs = append(errs, Invalid(p.Child("hostIP"), s.HostIP, "must be a valid IP address"))
	}
	return errs
}

// validatePodSpecUpdate enforces that a pod's spec does not change, except
// the images of its containers and additions to its tolerations, as in
// Kubernetes; spec.nodeName is set only by binding the pod.
func validatePodSpecUpdate(s, old *PodSpec, p *Path) ErrorList {
	var errs ErrorList
	if s.NodeName != old.NodeName {
		errs = append(errs, Forbidden(p.Child("nodeName"), "may only be set by binding the pod to a node (POST .../pods/NAME/binding)"))
	}
	for _, ot := range old.Tolerations {
		if !slices.ContainsFunc(s.Tolerations, func(t Toleration) bool { return SemanticEqual(t, ot) }) {
			errs = append(errs, Forbidden(p.Child("tolerations"), "existing tolerations may not be changed or removed; new ones may be added"))
			break
		}
	}
	// Compare what remains once the mutable fields are taken from old.
	cmp := *s
	cmp.NodeName = old.NodeName
	cmp.Tolerations = old.Tolerations
	cmp.Containers = withImagesOf(s.Containers, old.Containers)
	cmp.InitContainers = withImagesOf(s.InitContainers, old.InitContainers)
	if !SemanticEqual(&cmp, old) {
		errs = append(errs, Forbidden(p, "pod updates may not change fields other than `spec.containers[*].image`, `spec.initContainers[*].image` and `spec.tolerations` (additions only)"))
	}
	return errs
}

// withImagesOf copies cs with the images of old, where old has a container
// at the same index.
func withImagesOf(cs, old []Container) []Container {
	if len(cs) == 0 {
		return cs
	}
	out := slices.Clone(cs)
	for i := range out {
		if i < len(old) {
			out[i].Image = old[i].Image
		}
	}
	return out
}

// isCIDR reports whether s is an IP prefix such as 10.0.0.0/24.
func isCIDR(s string) bool {
	_, err := netip.ParsePrefix(s)
	return err == nil
}

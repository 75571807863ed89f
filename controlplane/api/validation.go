package api

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// Limits checked by validation.
const (
	// TotalAnnotationSizeLimit bounds the keys and values of an object's
	// annotations together, as Kubernetes does.
	TotalAnnotationSizeLimit = 256 * 1024
)

// Validate checks a new object, after SetDefaults, and returns every
// problem by field path; an empty list means the object may be stored.
func Validate(obj Object) ErrorList {
	r := ResourceOf(obj)
	meta := obj.GetObjectMeta()
	var errs ErrorList
	switch o := obj.(type) {
	case *Namespace:
		errs = validateObjectMeta(meta, r, IsDNS1123Label)
		errs = append(errs, validateNamespace(o)...)
	case *Node:
		errs = validateObjectMeta(meta, r, IsDNS1123Subdomain)
		errs = append(errs, validateNode(o)...)
	case *Pod:
		errs = validateObjectMeta(meta, r, IsDNS1123Subdomain)
		errs = append(errs, ValidatePodSpec(&o.Spec, specPath)...)
		errs = append(errs, validatePodStatus(&o.Status, statusPath)...)
	case *Event:
		errs = validateObjectMeta(meta, r, IsDNS1123Subdomain)
		errs = append(errs, validateEvent(o)...)
	case *Service:
		errs = validateObjectMeta(meta, r, IsDNS1123Label)
		errs = append(errs, validateService(o)...)
	case *EndpointSlice:
		errs = validateObjectMeta(meta, r, IsDNS1123Subdomain)
		errs = append(errs, validateEndpointSlice(o)...)
	case *ReplicaSet:
		errs = validateObjectMeta(meta, r, IsDNS1123Subdomain)
		errs = append(errs, validateReplicaSet(o)...)
	case *Deployment:
		errs = validateObjectMeta(meta, r, IsDNS1123Subdomain)
		errs = append(errs, validateDeployment(o)...)
	case *DaemonSet:
		errs = validateObjectMeta(meta, r, IsDNS1123Subdomain)
		errs = append(errs, validateDaemonSet(o)...)
	case *Token:
		errs = validateObjectMeta(meta, r, IsDNS1123Subdomain)
		errs = append(errs, validateToken(o)...)
	case *SchedulerPolicy:
		errs = validateObjectMeta(meta, r, IsDNS1123Subdomain)
		errs = append(errs, validateSchedulerPolicy(o)...)
	case *PodDisruptionBudget:
		errs = validateObjectMeta(meta, r, IsDNS1123Subdomain)
		errs = append(errs, validatePodDisruptionBudget(o)...)
	case *Machine:
		errs = validateObjectMeta(meta, r, IsDNS1123Subdomain)
		errs = append(errs, validateMachine(o)...)
	case *MachineSet:
		errs = validateObjectMeta(meta, r, IsDNS1123Subdomain)
		errs = append(errs, validateMachineSet(o)...)
	case *ControlPlaneMachineSet:
		errs = validateObjectMeta(meta, r, IsDNS1123Subdomain)
		errs = append(errs, validateControlPlaneMachineSet(o)...)
	case *MachineHealthCheck:
		errs = validateObjectMeta(meta, r, IsDNS1123Subdomain)
		errs = append(errs, validateMachineHealthCheck(o)...)
	case *MachineConfig:
		errs = validateObjectMeta(meta, r, IsDNS1123Subdomain)
		errs = append(errs, validateMachineConfig(o)...)
	case *MachineConfigPool:
		errs = validateObjectMeta(meta, r, IsDNS1123Subdomain)
		errs = append(errs, validateMachineConfigPool(o)...)
	case *MachineConfiguration:
		errs = validateObjectMeta(meta, r, IsDNS1123Subdomain)
		errs = append(errs, validateMachineConfiguration(o)...)
	case *ClusterVersion:
		errs = validateObjectMeta(meta, r, IsDNS1123Subdomain)
		errs = append(errs, validateClusterVersion(o)...)
	case *ClusterOperator:
		errs = validateObjectMeta(meta, r, IsDNS1123Subdomain)
	case *Binding:
		errs = validateObjectMeta(meta, &Resource{Kind: "Binding", Namespaced: true}, IsDNS1123Subdomain)
		if o.Target.Name == "" {
			errs = append(errs, Required(Root("target").Child("name"), ""))
		}
	default:
		errs = append(errs, Invalid(Root("kind"), fmt.Sprintf("%T", obj), "not a kind outpost serves"))
	}
	return errs
}

// CheckValid is Validate (old nil) or ValidateUpdate as the error a
// writer returns: 422 Invalid listing every problem by field path.
func CheckValid(obj, old Object) error {
	var errs ErrorList
	if old == nil {
		errs = Validate(obj)
	} else {
		errs = ValidateUpdate(obj, old)
	}
	if len(errs) > 0 {
		return NewInvalid(ResourceOf(obj).Kind, obj.GetObjectMeta().Name, errs)
	}
	return nil
}

// ValidateUpdate checks obj as a replacement for old: obj must be valid
// (Validate), and the fields that may not change must not. An empty uid
// or creationTimestamp in obj means "unchanged" (the store keeps the old
// one).
func ValidateUpdate(obj, old Object) ErrorList {
	if reflect.TypeOf(obj) != reflect.TypeOf(old) {
		return ErrorList{Invalid(Root("kind"), obj.GetTypeMeta().Kind, "may not change the kind of an object")}
	}
	errs := validateObjectMetaUpdate(obj.GetObjectMeta(), old.GetObjectMeta(), Root("metadata"))
	errs = append(errs, Validate(obj)...)
	switch o := obj.(type) {
	case *Pod:
		errs = append(errs, validatePodSpecUpdate(&o.Spec, &old.(*Pod).Spec, Root("spec"))...)
	case *Service:
		oc, nc := old.(*Service).Spec.ClusterIP, o.Spec.ClusterIP
		if oc != "" && nc != oc {
			errs = append(errs, Invalid(Root("spec").Child("clusterIP"), nc, "field is immutable"))
		}
	case *EndpointSlice:
		if ot := old.(*EndpointSlice).AddressType; o.AddressType != ot {
			errs = append(errs, Invalid(Root("addressType"), o.AddressType, "field is immutable"))
		}
	case *ReplicaSet:
		errs = append(errs, validateSelectorUpdate(o.Spec.Selector, old.(*ReplicaSet).Spec.Selector)...)
	case *Deployment:
		errs = append(errs, validateSelectorUpdate(o.Spec.Selector, old.(*Deployment).Spec.Selector)...)
	case *DaemonSet:
		errs = append(errs, validateSelectorUpdate(o.Spec.Selector, old.(*DaemonSet).Spec.Selector)...)
	}
	return errs
}

func validateSelectorUpdate(sel, old *LabelSelector) ErrorList {
	if SemanticEqual(sel, old) {
		return nil
	}
	s := "<nil>"
	if sel != nil {
		s = labelSelectorString(sel)
	}
	return ErrorList{Invalid(Root("spec").Child("selector"), s, "field is immutable")}
}

// labelSelectorString renders a LabelSelector for messages.
func labelSelectorString(ls *LabelSelector) string {
	sel, err := SelectorFromLabelSelector(ls)
	if err != nil {
		return fmt.Sprintf("%v", *ls)
	}
	return sel.String()
}

// invalidMsgs turns the messages of an Is* check into field errors.
func invalidMsgs(p *Path, v string, msgs []string) ErrorList {
	var errs ErrorList
	for _, m := range msgs {
		errs = append(errs, Invalid(p, v, m))
	}
	return errs
}

// validateName checks a required name with check.
func validateName(p *Path, v string, check func(string) []string) ErrorList {
	if v == "" {
		return ErrorList{Required(p, "")}
	}
	return invalidMsgs(p, v, check(v))
}

func validateNonnegative(p *Path, v int64) ErrorList {
	if v < 0 {
		return ErrorList{Invalid(p, v, "must be greater than or equal to 0")}
	}
	return nil
}

// Paths that validating every object starts from, built once: a Path never
// changes once made, so they are shared, and checking a valid object does
// not allocate them for each create (issue 16 item 1).
var (
	specPath            = Root("spec")
	statusPath          = Root("status")
	metaPath            = Root("metadata")
	metaName            = metaPath.Child("name")
	metaGenerateName    = metaPath.Child("generateName")
	metaNamespace       = metaPath.Child("namespace")
	metaGeneration      = metaPath.Child("generation")
	metaLabels          = metaPath.Child("labels")
	metaAnnotations     = metaPath.Child("annotations")
	metaFinalizers      = metaPath.Child("finalizers")
	metaOwnerReferences = metaPath.Child("ownerReferences")
)

// validateObjectMeta checks metadata: name (with nameCheck) or
// generateName, namespace by the kind's scope, labels, annotations,
// finalizers and owner references.
func validateObjectMeta(m *ObjectMeta, r *Resource, nameCheck func(string) []string) ErrorList {
	var errs ErrorList
	switch {
	case m.Name != "":
		errs = append(errs, invalidMsgs(metaName, m.Name, nameCheck(m.Name))...)
	case m.GenerateName != "":
		// The server appends a random suffix; what is given must be a valid
		// beginning of a name.
		prefix := strings.TrimRight(m.GenerateName, "-") + "a"
		errs = append(errs, invalidMsgs(metaGenerateName, m.GenerateName, nameCheck(prefix))...)
	default:
		errs = append(errs, Required(metaName, "name or generateName is required"))
	}
	if r != nil && r.Namespaced {
		errs = append(errs, validateName(metaNamespace, m.Namespace, IsDNS1123Label)...)
	} else if m.Namespace != "" {
		errs = append(errs, Forbidden(metaNamespace, "not allowed on this type"))
	}
	errs = append(errs, validateNonnegative(metaGeneration, m.Generation)...)
	errs = append(errs, ValidateLabels(m.Labels, metaLabels)...)
	errs = append(errs, validateAnnotations(m.Annotations, metaAnnotations)...)
	for i, f := range m.Finalizers {
		fp := metaFinalizers.Index(i)
		errs = append(errs, invalidMsgs(fp, f, IsQualifiedName(f))...)
		if slices.Contains(m.Finalizers[:i], f) {
			errs = append(errs, Duplicate(fp, f))
		}
	}
	controllers := 0
	for i, o := range m.OwnerReferences {
		op := metaOwnerReferences.Index(i)
		if o.APIVersion == "" {
			errs = append(errs, Required(op.Child("apiVersion"), "version must not be empty"))
		}
		if o.Kind == "" {
			errs = append(errs, Required(op.Child("kind"), "kind must not be empty"))
		}
		if o.Name == "" {
			errs = append(errs, Required(op.Child("name"), "name must not be empty"))
		}
		if o.UID == "" {
			errs = append(errs, Required(op.Child("uid"), "uid must not be empty"))
		}
		if o.Controller != nil && *o.Controller {
			controllers++
		}
	}
	if controllers > 1 {
		errs = append(errs, Invalid(metaOwnerReferences, fmt.Sprintf("%d controllers", controllers), "Only one reference can have Controller set to true"))
	}
	return errs
}

func validateObjectMetaUpdate(m, old *ObjectMeta, p *Path) ErrorList {
	var errs ErrorList
	if m.Name != old.Name {
		errs = append(errs, Invalid(p.Child("name"), m.Name, "field is immutable"))
	}
	if m.Namespace != old.Namespace {
		errs = append(errs, Invalid(p.Child("namespace"), m.Namespace, "field is immutable"))
	}
	if m.UID != "" && m.UID != old.UID {
		errs = append(errs, Invalid(p.Child("uid"), m.UID, "field is immutable"))
	}
	if m.CreationTimestamp != nil && (old.CreationTimestamp == nil || !m.CreationTimestamp.Equal(old.CreationTimestamp.Time)) {
		errs = append(errs, Invalid(p.Child("creationTimestamp"), m.CreationTimestamp.UTC().Format("2006-01-02T15:04:05Z"), "field is immutable"))
	}
	return errs
}

// ValidateLabels checks label keys (qualified names) and values.
func ValidateLabels(labels map[string]string, p *Path) ErrorList {
	var errs ErrorList
	for _, k := range sortedKeys(labels) {
		errs = append(errs, invalidMsgs(p, k, IsQualifiedName(k))...)
		errs = append(errs, invalidMsgs(p, labels[k], IsValidLabelValue(labels[k]))...)
	}
	return errs
}

func validateAnnotations(a map[string]string, p *Path) ErrorList {
	var errs ErrorList
	total := 0
	for _, k := range sortedKeys(a) {
		errs = append(errs, invalidMsgs(p, k, IsQualifiedName(strings.ToLower(k)))...)
		total += len(k) + len(a[k])
	}
	if total > TotalAnnotationSizeLimit {
		errs = append(errs, TooLong(p, TotalAnnotationSizeLimit))
	}
	return errs
}

func sortedKeys(m map[string]string) []string {
	if len(m) == 0 {
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// ValidateLabelSelector checks the API form of a label selector.
func ValidateLabelSelector(ls *LabelSelector, p *Path) ErrorList {
	if ls == nil {
		return nil
	}
	errs := ValidateLabels(ls.MatchLabels, p.Child("matchLabels"))
	for i, e := range ls.MatchExpressions {
		ep := p.Child("matchExpressions").Index(i)
		errs = append(errs, invalidMsgs(ep.Child("key"), e.Key, IsQualifiedName(e.Key))...)
		switch e.Operator {
		case OpIn, OpNotIn:
			if len(e.Values) == 0 {
				errs = append(errs, Required(ep.Child("values"), "must be specified when `operator` is 'In' or 'NotIn'"))
			}
		case OpExists, OpDoesNotExist:
			if len(e.Values) > 0 {
				errs = append(errs, Forbidden(ep.Child("values"), "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
			}
		default:
			errs = append(errs, NotSupported(ep.Child("operator"), e.Operator, []string{OpIn, OpNotIn, OpExists, OpDoesNotExist}))
		}
		for j, v := range e.Values {
			errs = append(errs, invalidMsgs(ep.Child("values").Index(j), v, IsValidLabelValue(v))...)
		}
	}
	return errs
}

// ValidateTaint checks a node taint against SPEC TNT-1.
func ValidateTaint(t Taint, p *Path) ErrorList {
	var errs ErrorList
	if t.Key == "" {
		errs = append(errs, Required(p.Child("key"), "a taint key must be non-empty"))
	} else {
		errs = append(errs, invalidMsgs(p.Child("key"), t.Key, IsTaintKey(t.Key))...)
	}
	errs = append(errs, invalidMsgs(p.Child("value"), t.Value, IsTaintValue(t.Value))...)
	switch t.Effect {
	case TaintEffectNoSchedule, TaintEffectPreferNoSchedule, TaintEffectNoExecute:
	case "":
		errs = append(errs, Required(p.Child("effect"), "a taint effect must be one of NoSchedule, PreferNoSchedule, NoExecute"))
	default:
		errs = append(errs, NotSupported(p.Child("effect"), t.Effect, taintEffects))
	}
	return errs
}

var taintEffects = []string{TaintEffectNoSchedule, TaintEffectPreferNoSchedule, TaintEffectNoExecute}

// ValidateToleration checks a pod toleration (SPEC TNT-1, TNT-2). An empty
// operator counts as Equal.
func ValidateToleration(t Toleration, p *Path) ErrorList {
	var errs ErrorList
	if t.Key != "" {
		errs = append(errs, invalidMsgs(p.Child("key"), t.Key, IsTaintKey(t.Key))...)
	}
	switch t.Operator {
	case TolerationOpExists:
		if t.Value != "" {
			errs = append(errs, Invalid(p.Child("value"), t.Value, "value must be empty when `operator` is 'Exists'"))
		}
	case TolerationOpEqual, "":
		if t.Key == "" {
			errs = append(errs, Invalid(p.Child("operator"), t.Operator, "operator must be Exists when `key` is empty, which means \"match all values and all keys\""))
		}
		errs = append(errs, invalidMsgs(p.Child("value"), t.Value, IsTaintValue(t.Value))...)
	default:
		errs = append(errs, NotSupported(p.Child("operator"), t.Operator, []string{TolerationOpEqual, TolerationOpExists}))
	}
	switch t.Effect {
	case "", TaintEffectNoSchedule, TaintEffectPreferNoSchedule, TaintEffectNoExecute:
	default:
		errs = append(errs, NotSupported(p.Child("effect"), t.Effect, taintEffects))
	}
	if t.TolerationSeconds != nil && t.Effect != TaintEffectNoExecute {
		errs = append(errs, Invalid(p.Child("effect"), t.Effect, "effect must be 'NoExecute' when `tolerationSeconds` is set"))
	}
	return errs
}

func validateNamespace(ns *Namespace) ErrorList {
	var errs ErrorList
	for i, f := range ns.Spec.Finalizers {
		errs = append(errs, invalidMsgs(Root("spec").Child("finalizers").Index(i), f, IsQualifiedName(f))...)
	}
	switch ns.Status.Phase {
	case "", NamespaceActive, NamespaceTerminating:
	default:
		errs = append(errs, NotSupported(Root("status").Child("phase"), ns.Status.Phase, []string{NamespaceActive, NamespaceTerminating}))
	}
	return errs
}

func validateNode(n *Node) ErrorList {
	var errs ErrorList
	sp := Root("spec")
	type keyEffect struct{ key, effect string }
	seen := make(map[keyEffect]bool, len(n.Spec.Taints))
	for i, t := range n.Spec.Taints {
		tp := sp.Child("taints").Index(i)
		errs = append(errs, ValidateTaint(t, tp)...)
		ke := keyEffect{t.Key, t.Effect}
		if seen[ke] {
			errs = append(errs, &FieldError{Type: FieldValueDuplicate, Field: tp.String(), BadValue: t.Key + ":" + t.Effect,
				Detail: "taints must be unique by key and effect pair"})
		}
		seen[ke] = true
	}
	if c := n.Spec.PodCIDR; c != "" && !isCIDR(c) {
		errs = append(errs, Invalid(sp.Child("podCIDR"), c, "must be a valid CIDR (e.g. 10.244.1.0/24)"))
	}
	for i, c := range n.Spec.PodCIDRs {
		if !isCIDR(c) {
			errs = append(errs, Invalid(sp.Child("podCIDRs").Index(i), c, "must be a valid CIDR (e.g. 10.244.1.0/24)"))
		}
	}
	if len(n.Spec.PodCIDRs) > 1 {
		errs = append(errs, Invalid(sp.Child("podCIDRs"), n.Spec.PodCIDRs, "may hold one CIDR (outpost has no dual-stack pod network yet)"))
	}
	if len(n.Spec.PodCIDRs) > 0 && n.Spec.PodCIDR != "" && n.Spec.PodCIDRs[0] != n.Spec.PodCIDR {
		errs = append(errs, Invalid(sp.Child("podCIDRs").Index(0), n.Spec.PodCIDRs[0], "must match spec.podCIDR"))
	}
	st := Root("status")
	errs = append(errs, validateResourceList(n.Status.Capacity, st.Child("capacity"))...)
	errs = append(errs, validateResourceList(n.Status.Allocatable, st.Child("allocatable"))...)
	for i, a := range n.Status.Addresses {
		if a.Type == "" {
			errs = append(errs, Required(st.Child("addresses").Index(i).Child("type"), ""))
		}
	}
	for i, c := range n.Status.Conditions {
		errs = append(errs, validateCondition(c.Type, c.Status, st.Child("conditions").Index(i))...)
	}
	if p := n.Status.DaemonEndpoints.KubeletEndpoint.Port; p < 0 || p > 65535 {
		errs = append(errs, Invalid(st.Child("daemonEndpoints", "kubeletEndpoint", "Port"), p, "must be between 0 and 65535"))
	}
	return errs
}

func validateCondition(typ, status string, p *Path) ErrorList {
	var errs ErrorList
	if typ == "" {
		errs = append(errs, Required(p.Child("type"), ""))
	}
	switch status {
	case ConditionTrue, ConditionFalse, ConditionUnknown:
	default:
		errs = append(errs, NotSupported(p.Child("status"), status, []string{ConditionTrue, ConditionFalse, ConditionUnknown}))
	}
	return errs
}

// validateResourceList checks resource names and that no amount is
// negative.
func validateResourceList(rl ResourceList, p *Path) ErrorList {
	var errs ErrorList
	for _, name := range sortedResourceNames(rl) {
		rp := p.Key(name)
		errs = append(errs, invalidMsgs(rp, name, IsQualifiedName(name))...)
		if q := rl[name]; q.MilliValue() < 0 {
			errs = append(errs, Invalid(rp, q.String(), "must be greater than or equal to 0"))
		}
	}
	return errs
}

func sortedResourceNames(rl ResourceList) []string {
	if len(rl) == 0 {
		return nil
	}
	names := make([]string, 0, len(rl))
	for k := range rl {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

func validateEvent(e *Event) ErrorList {
	var errs ErrorList
	io := Root("involvedObject")
	if e.InvolvedObject.Kind == "" {
		errs = append(errs, Required(io.Child("kind"), ""))
	}
	if e.InvolvedObject.Name == "" {
		errs = append(errs, Required(io.Child("name"), ""))
	}
	switch e.Type {
	case EventTypeNormal, EventTypeWarning:
	default:
		errs = append(errs, NotSupported(Root("type"), e.Type, []string{EventTypeNormal, EventTypeWarning}))
	}
	if e.Count < 0 {
		errs = append(errs, Invalid(Root("count"), int64(e.Count), "must be greater than or equal to 0"))
	}
	return errs
}

func validateService(s *Service) ErrorList {
	sp := Root("spec")
	errs := ValidateLabels(s.Spec.Selector, sp.Child("selector"))
	switch s.Spec.Type {
	case ServiceTypeClusterIP, ServiceTypeNodePort, ServiceTypeLoadBalancer, ServiceTypeExternalName:
	default:
		errs = append(errs, NotSupported(sp.Child("type"), s.Spec.Type,
			[]string{ServiceTypeClusterIP, ServiceTypeNodePort, ServiceTypeLoadBalancer, ServiceTypeExternalName}))
	}
	switch s.Spec.SessionAffinity {
	case "", ServiceAffinityNone:
		if s.Spec.SessionAffinityConfig != nil && s.Spec.SessionAffinityConfig.ClientIP != nil {
			errs = append(errs, Forbidden(sp.Child("sessionAffinityConfig"), "must not be set when `sessionAffinity` is None"))
		}
	case ServiceAffinityClientIP:
		if c := s.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
			if t := *c.ClientIP.TimeoutSeconds; t < 1 || t > 86400 {
				errs = append(errs, Invalid(sp.Child("sessionAffinityConfig", "clientIP", "timeoutSeconds"), int64(t), "must be greater than 0 and less than 86400"))
			}
		}
	default:
		errs = append(errs, NotSupported(sp.Child("sessionAffinity"), s.Spec.SessionAffinity, []string{ServiceAffinityNone, ServiceAffinityClientIP}))
	}
	if ip := s.Spec.ClusterIP; ip != "" && ip != "None" && !isIP(ip) {
		errs = append(errs, Invalid(sp.Child("clusterIP"), ip, "must be empty, 'None', or a valid IP address"))
	}
	switch n := s.Spec.ExternalName; {
	case s.Spec.Type == ServiceTypeExternalName && n == "":
		errs = append(errs, Required(sp.Child("externalName"), ""))
	case s.Spec.Type == ServiceTypeExternalName:
		errs = append(errs, invalidMsgs(sp.Child("externalName"), n, IsDNS1123Subdomain(strings.TrimSuffix(n, ".")))...)
	case n != "":
		errs = append(errs, Forbidden(sp.Child("externalName"), "may only be set when `type` is 'ExternalName'"))
	}
	if len(s.Spec.Ports) == 0 && s.Spec.ClusterIP != "None" && s.Spec.Type != ServiceTypeExternalName {
		errs = append(errs, Required(sp.Child("ports"), ""))
	}
	names := make(map[string]bool, len(s.Spec.Ports))
	for i, port := range s.Spec.Ports {
		pp := sp.Child("ports").Index(i)
		if port.Name == "" {
			if len(s.Spec.Ports) > 1 {
				errs = append(errs, Required(pp.Child("name"), "must be specified when there is more than one port"))
			}
		} else {
			errs = append(errs, invalidMsgs(pp.Child("name"), port.Name, IsDNS1123Label(port.Name))...)
			if names[port.Name] {
				errs = append(errs, Duplicate(pp.Child("name"), port.Name))
			}
			names[port.Name] = true
		}
		if !isValidPort(port.Port) {
			errs = append(errs, Invalid(pp.Child("port"), int64(port.Port), portRangeMsg))
		}
		errs = append(errs, validateProtocol(port.Protocol, pp.Child("protocol"))...)
		errs = append(errs, validatePortNumOrName(port.TargetPort, pp.Child("targetPort"))...)
		if port.NodePort != 0 && !isValidPort(port.NodePort) {
			errs = append(errs, Invalid(pp.Child("nodePort"), int64(port.NodePort), portRangeMsg))
		}
	}
	return errs
}

const portRangeMsg = "must be between 1 and 65535, inclusive"

func validateProtocol(proto string, p *Path) ErrorList {
	switch proto {
	case ProtocolTCP, ProtocolUDP, ProtocolSCTP:
		return nil
	case "":
		return ErrorList{Required(p, "")}
	}
	return ErrorList{NotSupported(p, proto, []string{ProtocolTCP, ProtocolUDP, ProtocolSCTP})}
}

func validatePortNumOrName(v IntOrString, p *Path) ErrorList {
	if v.IsString {
		return invalidMsgs(p, v.StrVal, IsPortName(v.StrVal))
	}
	if !isValidPort(v.IntVal) {
		return ErrorList{Invalid(p, int64(v.IntVal), portRangeMsg)}
	}
	return nil
}

// validateWorkload checks what replica sets, deployments and daemon sets
// share: the selector, the template and that the one matches the other.
func validateWorkload(sel *LabelSelector, tmpl *PodTemplateSpec, kind string) ErrorList {
	sp := Root("spec")
	var errs ErrorList
	switch {
	case sel == nil:
		errs = append(errs, Required(sp.Child("selector"), ""))
	case len(sel.MatchLabels)+len(sel.MatchExpressions) == 0:
		errs = append(errs, Invalid(sp.Child("selector"), "", "empty selector is invalid for "+kind))
	default:
		errs = append(errs, ValidateLabelSelector(sel, sp.Child("selector"))...)
	}
	tp := sp.Child("template")
	errs = append(errs, ValidateLabels(tmpl.Labels, tp.Child("metadata", "labels"))...)
	errs = append(errs, validateAnnotations(tmpl.Annotations, tp.Child("metadata", "annotations"))...)
	if sel != nil && len(sel.MatchLabels)+len(sel.MatchExpressions) > 0 {
		if s, err := SelectorFromLabelSelector(sel); err == nil && !s.Matches(tmpl.Labels) {
			errs = append(errs, Invalid(tp.Child("metadata", "labels"), FormatLabels(tmpl.Labels), "`selector` does not match template `labels`"))
		}
	}
	errs = append(errs, ValidatePodSpec(&tmpl.Spec, tp.Child("spec"))...)
	if rp := tmpl.Spec.RestartPolicy; rp != "" && rp != RestartPolicyAlways {
		errs = append(errs, NotSupported(tp.Child("spec", "restartPolicy"), rp, []string{RestartPolicyAlways}))
	}
	return errs
}

func validateReplicas(r *int32, p *Path) ErrorList {
	if r != nil && *r < 0 {
		return ErrorList{Invalid(p, int64(*r), "must be greater than or equal to 0")}
	}
	return nil
}

func validateReplicaSet(rs *ReplicaSet) ErrorList {
	sp := Root("spec")
	errs := validateReplicas(rs.Spec.Replicas, sp.Child("replicas"))
	errs = append(errs, validateNonnegative(sp.Child("minReadySeconds"), int64(rs.Spec.MinReadySeconds))...)
	return append(errs, validateWorkload(rs.Spec.Selector, &rs.Spec.Template, "replicaset")...)
}

func validateDeployment(d *Deployment) ErrorList {
	sp := Root("spec")
	errs := validateReplicas(d.Spec.Replicas, sp.Child("replicas"))
	errs = append(errs, validateNonnegative(sp.Child("minReadySeconds"), int64(d.Spec.MinReadySeconds))...)
	if l := d.Spec.RevisionHistoryLimit; l != nil {
		errs = append(errs, validateNonnegative(sp.Child("revisionHistoryLimit"), int64(*l))...)
	}
	if pd := d.Spec.ProgressDeadlineSeconds; pd != nil {
		if *pd <= d.Spec.MinReadySeconds {
			errs = append(errs, Invalid(sp.Child("progressDeadlineSeconds"), int64(*pd), "must be greater than minReadySeconds"))
		}
	}
	stp := sp.Child("strategy")
	switch d.Spec.Strategy.Type {
	case RecreateDeploymentStrategyType:
		if d.Spec.Strategy.RollingUpdate != nil {
			errs = append(errs, Forbidden(stp.Child("rollingUpdate"), "may not be specified when strategy `type` is 'Recreate'"))
		}
	case RollingUpdateDeploymentStrategyType:
		if ru := d.Spec.Strategy.RollingUpdate; ru != nil {
			errs = append(errs, validateRollingUpdate(ru.MaxUnavailable, ru.MaxSurge, stp.Child("rollingUpdate"))...)
		}
	default:
		errs = append(errs, NotSupported(stp.Child("type"), d.Spec.Strategy.Type, []string{RecreateDeploymentStrategyType, RollingUpdateDeploymentStrategyType}))
	}
	return append(errs, validateWorkload(d.Spec.Selector, &d.Spec.Template, "deployment")...)
}

func validateDaemonSet(ds *DaemonSet) ErrorList {
	sp := Root("spec")
	errs := validateNonnegative(sp.Child("minReadySeconds"), int64(ds.Spec.MinReadySeconds))
	if l := ds.Spec.RevisionHistoryLimit; l != nil {
		errs = append(errs, validateNonnegative(sp.Child("revisionHistoryLimit"), int64(*l))...)
	}
	up := sp.Child("updateStrategy")
	switch ds.Spec.UpdateStrategy.Type {
	case OnDeleteDaemonSetStrategyType:
	case RollingUpdateDaemonSetStrategyType:
		if ru := ds.Spec.UpdateStrategy.RollingUpdate; ru != nil {
			errs = append(errs, validateRollingUpdate(ru.MaxUnavailable, ru.MaxSurge, up.Child("rollingUpdate"))...)
		}
	default:
		errs = append(errs, NotSupported(up.Child("type"), ds.Spec.UpdateStrategy.Type, []string{OnDeleteDaemonSetStrategyType, RollingUpdateDaemonSetStrategyType}))
	}
	return append(errs, validateWorkload(ds.Spec.Selector, &ds.Spec.Template, "daemonset")...)
}

// validateRollingUpdate checks maxUnavailable and maxSurge: each a
// non-negative count or a percentage, maxUnavailable at most 100%, not both
// zero (the rollout could never move).
func validateRollingUpdate(maxUnavailable, maxSurge *IntOrString, p *Path) ErrorList {
	var errs ErrorList
	mu, muErrs := validateIntOrPercent(maxUnavailable, p.Child("maxUnavailable"))
	ms, msErrs := validateIntOrPercent(maxSurge, p.Child("maxSurge"))
	errs = append(errs, muErrs...)
	errs = append(errs, msErrs...)
	if maxUnavailable != nil && maxUnavailable.IsString && len(muErrs) == 0 && mu > 100 {
		errs = append(errs, Invalid(p.Child("maxUnavailable"), maxUnavailable.StrVal, "must not be greater than 100%"))
	}
	if len(muErrs)+len(msErrs) == 0 && mu == 0 && ms == 0 {
		v := "0"
		if maxUnavailable != nil {
			v = maxUnavailable.String()
		}
		errs = append(errs, Invalid(p.Child("maxUnavailable"), v, "may not be 0 when `maxSurge` is 0"))
	}
	return errs
}

// validateIntOrPercent returns the number (of pods or percent) of v.
func validateIntOrPercent(v *IntOrString, p *Path) (int64, ErrorList) {
	if v == nil {
		return 0, nil
	}
	if !v.IsString {
		if v.IntVal < 0 {
			return 0, ErrorList{Invalid(p, int64(v.IntVal), "must be greater than or equal to 0")}
		}
		return int64(v.IntVal), nil
	}
	num, ok := strings.CutSuffix(v.StrVal, "%")
	n, err := strconv.ParseInt(num, 10, 32)
	if !ok || err != nil || num == "" || num[0] == '+' || num[0] == '-' && n == 0 {
		return 0, ErrorList{Invalid(p, v.StrVal, "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%', or '93%')")}
	}
	if n < 0 {
		return 0, ErrorList{Invalid(p, v.StrVal, "must be greater than or equal to 0")}
	}
	return n, nil
}

// validateSchedulerPolicy checks the envelope; the server's admission
// parses spec.policy itself (package policy depends on this one).
func validateSchedulerPolicy(p *SchedulerPolicy) ErrorList {
	sp := Root("spec")
	var errs ErrorList
	switch n := len(p.Spec.Policy); {
	case n == 0:
		errs = append(errs, Required(sp.Child("policy"), "a kind: Policy document"))
	case n > MaxSchedulerPolicyBytes:
		errs = append(errs, TooLong(sp.Child("policy"), MaxSchedulerPolicyBytes))
	}
	return errs
}

func validateToken(t *Token) ErrorList {
	sp := Root("spec")
	var errs ErrorList
	roles := []string{RoleClusterAdmin, RoleNode, RoleDeveloper, RoleServer, RoleFleetLock}
	switch {
	case t.Spec.Role == "":
		errs = append(errs, Required(sp.Child("role"), ""))
	case !slices.Contains(roles, t.Spec.Role):
		errs = append(errs, NotSupported(sp.Child("role"), t.Spec.Role, roles))
	}
	if h := t.Spec.SecretHash; h == "" {
		errs = append(errs, Required(sp.Child("secretHash"), ""))
	} else if !isHexSHA256(h) {
		errs = append(errs, Invalid(sp.Child("secretHash"), h, "must be 64 lower case hexadecimal characters (a SHA-256)"))
	}
	for i, ns := range t.Spec.Namespaces {
		errs = append(errs, validateName(sp.Child("namespaces").Index(i), ns, IsDNS1123Label)...)
	}
	if len(t.Spec.Namespaces) > 0 && t.Spec.Role != RoleDeveloper {
		errs = append(errs, Forbidden(sp.Child("namespaces"), "only developer tokens are limited to namespaces"))
	}
	if t.Spec.NodeName != "" {
		errs = append(errs, invalidMsgs(sp.Child("nodeName"), t.Spec.NodeName, IsDNS1123Subdomain(t.Spec.NodeName))...)
		if t.Spec.Role != RoleNode {
			errs = append(errs, Forbidden(sp.Child("nodeName"), "only node tokens are bound to a node"))
		}
	}
	return errs
}

// isHexSHA256 reports whether s is a SHA-256 in lower case hex, the one
// spelling, so that equal hashes are equal strings.
func isHexSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

package api

import (
	"slices"
	"strings"
)

// Resource describes one kind the API serves: where it lives in the URL
// space and how to make an empty one. The store, the server, the decoder and
// the CLI all read this one table, so a new kind is added here once.
type Resource struct {
	Group      string   // "" for the core group, "apps" for the apps group
	Version    string   // "v1"
	Kind       string   // "Pod"
	Plural     string   // "pods": the URL segment and the store's bucket
	Singular   string   // "pod"
	ShortNames []string // "po"
	Namespaced bool
	// HasStatus reports whether status is a subresource: writes to the main
	// resource keep the stored status, writes to /status keep the spec.
	HasStatus bool
	New       func() Object
}

// APIVersion is "v1" for the core group and "group/version" otherwise.
func (r *Resource) APIVersion() string {
	if r.Group == "" {
		return r.Version
	}
	return r.Group + "/" + r.Version
}

// Resources is every kind outpost serves, in a fixed order.
var Resources = []*Resource{
	{Version: "v1", Kind: "Namespace", Plural: "namespaces", Singular: "namespace", ShortNames: []string{"ns"}, HasStatus: true, New: func() Object { return &Namespace{} }},
	{Version: "v1", Kind: "Node", Plural: "nodes", Singular: "node", ShortNames: []string{"no"}, HasStatus: true, New: func() Object { return &Node{} }},
	{Version: "v1", Kind: "Pod", Plural: "pods", Singular: "pod", ShortNames: []string{"po"}, Namespaced: true, HasStatus: true, New: func() Object { return &Pod{} }},
	{Version: "v1", Kind: "Event", Plural: "events", Singular: "event", ShortNames: []string{"ev"}, Namespaced: true, New: func() Object { return &Event{} }},
	{Version: "v1", Kind: "Service", Plural: "services", Singular: "service", ShortNames: []string{"svc"}, Namespaced: true, HasStatus: true, New: func() Object { return &Service{} }},
	{Group: "apps", Version: "v1", Kind: "ReplicaSet", Plural: "replicasets", Singular: "replicaset", ShortNames: []string{"rs"}, Namespaced: true, HasStatus: true, New: func() Object { return &ReplicaSet{} }},
	{Group: "apps", Version: "v1", Kind: "Deployment", Plural: "deployments", Singular: "deployment", ShortNames: []string{"deploy"}, Namespaced: true, HasStatus: true, New: func() Object { return &Deployment{} }},
	{Group: "apps", Version: "v1", Kind: "DaemonSet", Plural: "daemonsets", Singular: "daemonset", ShortNames: []string{"ds"}, Namespaced: true, HasStatus: true, New: func() Object { return &DaemonSet{} }},
	{Group: "outpost.io", Version: "v1", Kind: "Token", Plural: "tokens", Singular: "token", New: func() Object { return &Token{} }},
	{Group: "outpost.io", Version: "v1", Kind: "SchedulerPolicy", Plural: "schedulerpolicies", Singular: "schedulerpolicy", New: func() Object { return &SchedulerPolicy{} }},
	{Group: "policy", Version: "v1", Kind: "PodDisruptionBudget", Plural: "poddisruptionbudgets", Singular: "poddisruptionbudget", ShortNames: []string{"pdb"}, Namespaced: true, HasStatus: true, New: func() Object { return &PodDisruptionBudget{} }},
	{Group: "machine.openshift.io", Version: "v1beta1", Kind: "Machine", Plural: "machines", Singular: "machine", ShortNames: []string{"ma"}, HasStatus: true, New: func() Object { return &Machine{} }},
	{Group: "machine.openshift.io", Version: "v1beta1", Kind: "MachineSet", Plural: "machinesets", Singular: "machineset", ShortNames: []string{"ms"}, HasStatus: true, New: func() Object { return &MachineSet{} }},
	{Group: "machine.openshift.io", Version: "v1beta1", Kind: "ControlPlaneMachineSet", Plural: "controlplanemachinesets", Singular: "controlplanemachineset", ShortNames: []string{"cpms"}, HasStatus: true, New: func() Object { return &ControlPlaneMachineSet{} }},
	{Group: "machine.openshift.io", Version: "v1beta1", Kind: "MachineHealthCheck", Plural: "machinehealthchecks", Singular: "machinehealthcheck", ShortNames: []string{"mhc"}, HasStatus: true, New: func() Object { return &MachineHealthCheck{} }},
	{Group: "machineconfiguration.openshift.io", Version: "v1", Kind: "MachineConfig", Plural: "machineconfigs", Singular: "machineconfig", ShortNames: []string{"mc"}, New: func() Object { return &MachineConfig{} }},
	{Group: "machineconfiguration.openshift.io", Version: "v1", Kind: "MachineConfigPool", Plural: "machineconfigpools", Singular: "machineconfigpool", ShortNames: []string{"mcp"}, HasStatus: true, New: func() Object { return &MachineConfigPool{} }},
	{Group: "operator.openshift.io", Version: "v1", Kind: "MachineConfiguration", Plural: "machineconfigurations", Singular: "machineconfiguration", New: func() Object { return &MachineConfiguration{} }},
	{Group: "config.openshift.io", Version: "v1", Kind: "ClusterVersion", Plural: "clusterversions", Singular: "clusterversion", HasStatus: true, New: func() Object { return &ClusterVersion{} }},
	{Group: "config.openshift.io", Version: "v1", Kind: "ClusterOperator", Plural: "clusteroperators", Singular: "clusteroperator", ShortNames: []string{"co"}, HasStatus: true, New: func() Object { return &ClusterOperator{} }},
	{Group: "discovery.k8s.io", Version: "v1", Kind: "EndpointSlice", Plural: "endpointslices", Singular: "endpointslice", Namespaced: true, New: func() Object { return &EndpointSlice{} }},
}

// ResourceForKind finds a resource by kind ("Pod").
func ResourceForKind(kind string) *Resource {
	for _, r := range Resources {
		if r.Kind == kind {
			return r
		}
	}
	return nil
}

// ResourceForPlural finds a resource by its URL segment ("pods").
func ResourceForPlural(plural string) *Resource {
	for _, r := range Resources {
		if r.Plural == plural {
			return r
		}
	}
	return nil
}

// ResourceForName finds a resource by any name a user might type: plural,
// singular, short name or kind, case-insensitively, with an optional
// ".group" suffix ("deployments.apps").
func ResourceForName(name string) *Resource {
	name = strings.ToLower(name)
	group := ""
	if i := strings.IndexByte(name, '.'); i >= 0 {
		name, group = name[:i], name[i+1:]
	}
	for _, r := range Resources {
		if group != "" && !strings.HasPrefix(r.Group, group) {
			continue
		}
		if name == r.Plural || name == r.Singular || name == strings.ToLower(r.Kind) || slices.Contains(r.ShortNames, name) {
			return r
		}
	}
	return nil
}

// ResourceOf returns the resource of an object's Go type.
func ResourceOf(obj Object) *Resource {
	switch obj.(type) {
	case *Namespace:
		return Resources[0]
	case *Node:
		return Resources[1]
	case *Pod:
		return Resources[2]
	case *Event:
		return Resources[3]
	case *Service:
		return Resources[4]
	case *ReplicaSet:
		return Resources[5]
	case *Deployment:
		return Resources[6]
	case *DaemonSet:
		return Resources[7]
	case *Token:
		return Resources[8]
	case *SchedulerPolicy:
		return Resources[9]
	case *PodDisruptionBudget:
		return Resources[10]
	case *Machine:
		return Resources[11]
	case *MachineSet:
		return Resources[12]
	case *ControlPlaneMachineSet:
		return Resources[13]
	case *MachineHealthCheck:
		return Resources[14]
	case *MachineConfig:
		return Resources[15]
	case *MachineConfigPool:
		return Resources[16]
	case *MachineConfiguration:
		return Resources[17]
	case *ClusterVersion:
		return Resources[18]
	case *ClusterOperator:
		return Resources[19]
	case *EndpointSlice:
		return Resources[20]
	}
	return nil
}

// List is the envelope of a list reply: kind "PodList" and so on, with the
// items as the server encoded them.
type List[T any] struct {
	TypeMeta `json:",inline"`
	ListMeta `json:"metadata"`
	Items    []T `json:"items"`
}

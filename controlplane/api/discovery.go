package api

import (
	"fmt"
	"net/netip"
	"strings"
)

// EndpointSlice lists the addresses behind a Service (discovery.k8s.io/v1;
// SPEC NET-3), as Kubernetes' does: the endpoint slice controller writes
// one or more per Service with a selector, from its pods, and every
// agent's service proxy reads them. A slice made by anyone else (for a
// Service without a selector) is left alone.
type EndpointSlice struct {
	TypeMeta    `json:",inline"`
	ObjectMeta  `json:"metadata"`
	AddressType string         `json:"addressType"`
	Endpoints   []Endpoint     `json:"endpoints"`
	Ports       []EndpointPort `json:"ports,omitempty"`
}

// AnnotationClusterCIDR on a Node is the cluster's pod range
// (--cluster-cidr), written with the node's pod CIDR: the node's agent
// masquerades its pods' traffic only when it leaves the range, so that
// pods reach pods on other nodes with their own addresses.
const AnnotationClusterCIDR = "networking.outpost.io/cluster-cidr"

// AnnotationClusterDNS on a Node is the address of the cluster's DNS
// resolver (SPEC NET-4), which the control plane writes so that agents
// need no flag for it: each answers on it for its own pods.
const AnnotationClusterDNS = "networking.outpost.io/cluster-dns"

// Address types of a slice.
const (
	AddressTypeIPv4 = "IPv4"
	AddressTypeIPv6 = "IPv6"
	AddressTypeFQDN = "FQDN"
)

// Labels of slices.
const (
	// LabelServiceName names the Service a slice belongs to.
	LabelServiceName = "kubernetes.io/service-name"
	// LabelManagedBy names who writes a slice.
	LabelManagedBy = "endpointslice.kubernetes.io/managed-by"
	// EndpointSliceController is the endpoint slice controller's value of
	// LabelManagedBy, as Kubernetes' own.
	EndpointSliceController = "endpointslice-controller.k8s.io"
)

// MaxEndpointsPerSlice is how many endpoints one slice holds at most (the
// API's limit is 1000; Kubernetes' controller fills 100).
const (
	MaxEndpointsPerSlice        = 1000
	EndpointsPerControllerSlice = 100
)

// Endpoint is one pod (or address) behind the Service.
type Endpoint struct {
	Addresses  []string           `json:"addresses"`
	Conditions EndpointConditions `json:"conditions,omitzero"`
	Hostname   string             `json:"hostname,omitempty"`
	TargetRef  *ObjectReference   `json:"targetRef,omitempty"`
	NodeName   string             `json:"nodeName,omitempty"`
	Zone       string             `json:"zone,omitempty"`
}

// EndpointConditions say whether traffic should go to an endpoint: ready
// (serving and not terminating) for new connections; serving while it
// terminates, for proxies that fall back to terminating endpoints.
type EndpointConditions struct {
	Ready       *bool `json:"ready,omitempty"`
	Serving     *bool `json:"serving,omitempty"`
	Terminating *bool `json:"terminating,omitempty"`
}

// EndpointPort is a port every endpoint of the slice serves on.
type EndpointPort struct {
	Name        string `json:"name,omitempty"`
	Protocol    string `json:"protocol,omitempty"`
	Port        *int32 `json:"port,omitempty"`
	AppProtocol string `json:"appProtocol,omitempty"`
}

func validateEndpointSlice(s *EndpointSlice) ErrorList {
	var errs ErrorList
	switch s.AddressType {
	case AddressTypeIPv4, AddressTypeIPv6, AddressTypeFQDN:
	case "":
		errs = append(errs, Required(Root("addressType"), ""))
	default:
		errs = append(errs, NotSupported(Root("addressType"), s.AddressType, []string{AddressTypeIPv4, AddressTypeIPv6, AddressTypeFQDN}))
	}
	ep := Root("endpoints")
	if len(s.Endpoints) > MaxEndpointsPerSlice {
		errs = append(errs, Invalid(ep, len(s.Endpoints), fmt.Sprintf("may hold at most %d endpoints", MaxEndpointsPerSlice)))
	}
	for i, e := range s.Endpoints {
		p := ep.Index(i)
		if len(e.Addresses) == 0 || len(e.Addresses) > 100 {
			errs = append(errs, Invalid(p.Child("addresses"), len(e.Addresses), "must hold 1 to 100 addresses"))
		}
		for j, a := range e.Addresses {
			if msg := badAddress(s.AddressType, a); msg != "" {
				errs = append(errs, Invalid(p.Child("addresses").Index(j), a, msg))
			}
		}
		if e.Hostname != "" {
			errs = append(errs, invalidMsgs(p.Child("hostname"), e.Hostname, IsDNS1123Label(e.Hostname))...)
		}
		if e.NodeName != "" {
			errs = append(errs, invalidMsgs(p.Child("nodeName"), e.NodeName, IsDNS1123Subdomain(e.NodeName))...)
		}
	}
	pp := Root("ports")
	if len(s.Ports) > 100 {
		errs = append(errs, Invalid(pp, len(s.Ports), "may hold at most 100 ports"))
	}
	names := map[string]bool{}
	for i, port := range s.Ports {
		p := pp.Index(i)
		if port.Name != "" {
			errs = append(errs, invalidMsgs(p.Child("name"), port.Name, IsDNS1123Label(port.Name))...)
		}
		if names[port.Name] {
			errs = append(errs, Duplicate(p.Child("name"), port.Name))
		}
		names[port.Name] = true
		if port.Port != nil && !isValidPort(*port.Port) {
			errs = append(errs, Invalid(p.Child("port"), int64(*port.Port), portRangeMsg))
		}
		if port.Protocol != "" {
			errs = append(errs, validateProtocol(port.Protocol, p.Child("protocol"))...)
		}
	}
	return errs
}

// badAddress says what is wrong with a as an address of type typ, or "".
func badAddress(typ, a string) string {
	switch typ {
	case AddressTypeIPv4, AddressTypeIPv6:
		ip, err := netip.ParseAddr(a)
		if err != nil || ip.Is4() != (typ == AddressTypeIPv4) || ip.Is4In6() {
			return "must be a valid " + typ + " address"
		}
	case AddressTypeFQDN:
		if msgs := IsDNS1123Subdomain(a); len(msgs) > 0 {
			return "must be a fully qualified domain name: " + strings.Join(msgs, "; ")
		}
	}
	return ""
}

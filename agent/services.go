package agent

import (
	"context"
	"net/netip"
	"time"

	"github.com/outpost-edge/outpost/agent/serviceproxy"
	"github.com/outpost-edge/outpost/controlplane/api"
)

var (
	servicesResource       = api.ResourceForKind("Service")
	endpointSlicesResource = api.ResourceForKind("EndpointSlice")
)

// proxyResync is how often the rules are written again when nothing
// changed: rules someone removed come back within it.
const proxyResync = time.Minute

// proxyServices keeps this node's service proxy rules (SPEC NET-3) from
// watches of the Services and EndpointSlices until ctx ends. The rules
// stay when the agent stops, so Services keep working through an agent
// restart, as they do through kube-proxy's.
func (a *Agent) proxyServices(ctx context.Context) {
	var svcs, eps watchedSet
	rep := &syncReport{a: a, what: "service proxy rules", reason: "ServiceProxyFailed"}
	wake, run := resync(ctx, proxyResync, func() {
		svcObjs, svcsListed := svcs.snapshot()
		epObjs, epsListed := eps.snapshot()
		// Until both are listed, a partial view would drop Services
		// that work.
		if !svcsListed || !epsListed {
			return
		}
		byKey := map[string]*api.Service{}
		for _, o := range svcObjs {
			if s, ok := o.(*api.Service); ok {
				byKey[s.Namespace+"/"+s.Name] = s
			}
		}
		slices := map[string]*api.EndpointSlice{}
		for _, o := range epObjs {
			if es, ok := o.(*api.EndpointSlice); ok {
				slices[es.Namespace+"/"+es.Name] = es
			}
		}
		model := proxyModel(byKey, slices)
		rep.result(serviceproxy.Apply(ctx, model), "services", len(model))
	})
	go svcs.follow(ctx, a.cl, servicesResource, nil, wake)
	go eps.follow(ctx, a.cl, endpointSlicesResource, nil, wake)
	run()
}

// proxyModel is what the proxy is to do for svcs, with the endpoints of
// eps: a Service's ready endpoints, or, with none ready, those still
// serving while they terminate (kube-proxy's fallback).
func proxyModel(svcs map[string]*api.Service, eps map[string]*api.EndpointSlice) []serviceproxy.Service {
	bySvc := map[string][]*api.EndpointSlice{}
	for _, es := range eps {
		if name := es.Labels[api.LabelServiceName]; name != "" {
			bySvc[es.Namespace+"/"+name] = append(bySvc[es.Namespace+"/"+name], es)
		}
	}
	var out []serviceproxy.Service
	for key, s := range svcs {
		ip, err := netip.ParseAddr(s.Spec.ClusterIP)
		if err != nil || s.Spec.Type == api.ServiceTypeExternalName {
			continue
		}
		ms := serviceproxy.Service{Namespace: s.Namespace, Name: s.Name, ClusterIP: ip}
		if s.Spec.SessionAffinity == api.ServiceAffinityClientIP {
			secs := int32(10800)
			if c := s.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
				secs = *c.ClientIP.TimeoutSeconds
			}
			ms.AffinityTimeout = time.Duration(secs) * time.Second
		}
		for _, sp := range s.Spec.Ports {
			proto := sp.Protocol
			if proto == "" {
				proto = api.ProtocolTCP
			}
			p := serviceproxy.Port{Name: sp.Name, Protocol: proto, Port: uint16(sp.Port), NodePort: uint16(sp.NodePort)}
			var ready, serving []serviceproxy.Endpoint
			for _, es := range bySvc[key] {
				for _, ep := range es.Ports {
					epProto := ep.Protocol
					if epProto == "" {
						epProto = api.ProtocolTCP
					}
					if ep.Name != sp.Name || epProto != proto || ep.Port == nil {
						continue
					}
					for _, e := range es.Endpoints {
						if len(e.Addresses) == 0 {
							continue
						}
						addr, err := netip.ParseAddr(e.Addresses[0])
						if err != nil || !addr.Is4() {
							continue
						}
						target := serviceproxy.Endpoint{Addr: addr, Port: uint16(*ep.Port)}
						switch c := e.Conditions; {
						case c.Ready == nil || *c.Ready:
							ready = append(ready, target)
						case c.Serving != nil && *c.Serving && c.Terminating != nil && *c.Terminating:
							serving = append(serving, target)
						}
					}
				}
			}
			p.Endpoints = ready
			if len(ready) == 0 {
				p.Endpoints = serving
			}
			ms.Ports = append(ms.Ports, p)
		}
		out = append(out, ms)
	}
	return out
}

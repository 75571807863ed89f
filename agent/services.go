package agent

import (
	"context"
	"net/netip"
	"sync"
	"time"

	"github.com/outpost-edge/outpost/agent/serviceproxy"
	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
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
	var mu sync.Mutex
	svcs := map[string]*api.Service{}
	eps := map[string]*api.EndpointSlice{}
	listed := map[string]bool{}
	poke := make(chan struct{}, 1)
	wake := func() {
		select {
		case poke <- struct{}{}:
		default:
		}
	}
	follow := func(r *api.Resource, into func(api.Object) (string, bool)) {
		a.cl.ListWatch(ctx, r, "", client.ListOptions{}, client.ListWatchHandler{
			Reset: func(objs []api.Object) {
				mu.Lock()
				if r == servicesResource {
					clear(svcs)
				} else {
					clear(eps)
				}
				for _, o := range objs {
					into(o)
				}
				listed[r.Plural] = true
				mu.Unlock()
				wake()
			},
			Event: func(typ string, obj api.Object) {
				mu.Lock()
				key, _ := into(obj)
				if typ == client.EventDeleted {
					if r == servicesResource {
						delete(svcs, key)
					} else {
						delete(eps, key)
					}
				}
				mu.Unlock()
				wake()
			},
		})
	}
	go follow(servicesResource, func(o api.Object) (string, bool) {
		s, ok := o.(*api.Service)
		if !ok {
			return "", false
		}
		k := s.Namespace + "/" + s.Name
		svcs[k] = s
		return k, true
	})
	go follow(endpointSlicesResource, func(o api.Object) (string, bool) {
		es, ok := o.(*api.EndpointSlice)
		if !ok {
			return "", false
		}
		k := es.Namespace + "/" + es.Name
		eps[k] = es
		return k, true
	})
	t := time.NewTicker(proxyResync)
	defer t.Stop()
	rep := &syncReport{a: a, what: "service proxy rules", reason: "ServiceProxyFailed"}
	for {
		select {
		case <-ctx.Done():
			return
		case <-poke:
		case <-t.C:
		}
		mu.Lock()
		// Until both are listed, a partial view would drop Services
		// that work.
		ready := listed[servicesResource.Plural] && listed[endpointSlicesResource.Plural]
		var model []serviceproxy.Service
		if ready {
			model = proxyModel(svcs, eps)
		}
		mu.Unlock()
		if !ready {
			continue
		}
		rep.result(serviceproxy.Apply(ctx, model), "services", len(model))
	}
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

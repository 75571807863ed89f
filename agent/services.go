package agent

import (
	"context"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/outpost-edge/outpost/agent/clusterdns"
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

// dnsResync is how often the resolver's records are built again when
// nothing changed (cheap: no system call).
const dnsResync = time.Minute

// followServices keeps what this node makes of the cluster's Services
// from one watch each of Services and EndpointSlices, until ctx ends:
// the service proxy's rules (SPEC NET-3) and the resolver's records (SPEC
// NET-4), each on its own loop so that a slow nft run never holds back
// an answer. The rules stay when the agent stops, so Services keep
// working through an agent restart, as they do through kube-proxy's.
func (a *Agent) followServices(ctx context.Context) {
	var svcs, eps watchedSet
	// view is the Services and slices by namespace/name; false until
	// both are listed, since a partial view would drop Services that
	// work.
	view := func() (map[string]*api.Service, map[string]*api.EndpointSlice, bool) {
		svcObjs, svcsListed := svcs.snapshot()
		epObjs, epsListed := eps.snapshot()
		if !svcsListed || !epsListed {
			return nil, nil, false
		}
		byKey := map[string]*api.Service{}
		for _, o := range svcObjs {
			if s, ok := o.(*api.Service); ok {
				byKey[s.Namespace+"/"+s.Name] = s
			}
		}
		slicesByKey := map[string]*api.EndpointSlice{}
		for _, o := range epObjs {
			if es, ok := o.(*api.EndpointSlice); ok {
				slicesByKey[es.Namespace+"/"+es.Name] = es
			}
		}
		return byKey, slicesByKey, true
	}
	var wakes, runs []func()
	if a.cfg.ServiceProxy {
		rep := &syncReport{a: a, what: "service proxy rules", reason: "ServiceProxyFailed"}
		// The proxy sends nft only what changed since it last wrote,
		// and the whole table now and then.
		proxy := &serviceproxy.Proxy{}
		wake, run := resync(ctx, proxyResync, func() {
			if s, es, ok := view(); ok {
				model := proxyModel(s, es)
				rep.result(proxy.Sync(ctx, model), "services", len(model))
			}
		})
		wakes, runs = append(wakes, wake), append(runs, run)
	}
	if a.dns != nil {
		wake, run := resync(ctx, dnsResync, func() {
			if s, es, ok := view(); ok {
				a.dns.SetRecords(clusterdns.Build(a.cfg.ClusterDomain, slices.Collect(maps.Values(s)), slices.Collect(maps.Values(es))))
			}
		})
		wakes, runs = append(wakes, wake), append(runs, run)
	}
	wakeAll := func() {
		for _, w := range wakes {
			w()
		}
	}
	go svcs.follow(ctx, a.cl, servicesResource, nil, wakeAll)
	go eps.follow(ctx, a.cl, endpointSlicesResource, nil, wakeAll)
	var wg sync.WaitGroup
	for _, run := range runs {
		wg.Go(run)
	}
	wg.Wait()
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

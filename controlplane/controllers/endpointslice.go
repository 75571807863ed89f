package controllers

import (
	"cmp"
	"context"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/controller"
	"github.com/outpost-edge/outpost/controlplane/scheduler"
)

// endpointSlices keeps, for every Service with a selector, EndpointSlices
// listing the pods it selects (SPEC NET-3), as Kubernetes' endpoint slice
// controller does: one endpoint per pod with an address, ready when the
// pod is Ready and not terminating, serving when Ready, terminating while
// it is deleted; the ports are the Service's with each target port
// resolved in the pod (a named port may differ between pods, so pods are
// grouped by what their ports resolve to, a slice per group and address
// family, EndpointsPerControllerSlice endpoints each). Slices carry the
// Service as controller owner, so they go with it; those of a Service that
// lost its selector are deleted. Slices made by others are not touched.
type endpointSlices struct {
	*loop
	s     *shared
	track *tracker
}

var (
	servicesRes       = api.ResourceForKind("Service")
	endpointSlicesRes = api.ResourceForKind("EndpointSlice")
)

func newEndpointSlices(s *shared) *endpointSlices {
	c := &endpointSlices{s: s, track: newTracker()}
	c.loop = newLoop(s, "endpointslice", c.sync)
	return c
}

func (c *endpointSlices) onService(ev controller.Event) {
	c.q.Add(controller.KeyOf(ev.Object))
}

// onSlice queues the Service of a slice this controller manages that
// someone else changed or deleted.
func (c *endpointSlices) onSlice(ev controller.Event) {
	m := ev.Object.GetObjectMeta()
	if svc := m.Labels[api.LabelServiceName]; svc != "" && m.Labels[api.LabelManagedBy] == api.EndpointSliceController {
		c.q.Add(controller.Key(m.Namespace, svc))
	}
}

// onPod queues the Services of the pod's namespace that select it,
// before or after the change.
func (c *endpointSlices) onPod(ev controller.Event) {
	p, ok := ev.Object.(*api.Pod)
	if !ok {
		return
	}
	var old map[string]string
	if ev.Old != nil {
		old = ev.Old.GetObjectMeta().Labels
	}
	for _, obj := range c.s.svcInf.List() {
		svc := obj.(*api.Service)
		if svc.Namespace != p.Namespace || len(svc.Spec.Selector) == 0 {
			continue
		}
		if selects(svc.Spec.Selector, p.Labels) || old != nil && selects(svc.Spec.Selector, old) {
			c.q.Add(controller.KeyOf(svc))
		}
	}
}

// onNode queues every Service when a node's zone changes (endpoints
// carry it for topology-aware proxies).
func (c *endpointSlices) onNode(ev controller.Event) {
	if ev.Type != api.Modified || ev.Old == nil || ev.Old.GetObjectMeta().Labels[scheduler.LabelZone] == ev.Object.GetObjectMeta().Labels[scheduler.LabelZone] {
		return
	}
	for _, obj := range c.s.svcInf.List() {
		c.q.Add(controller.KeyOf(obj))
	}
}

// selects reports whether a Service's selector matches labels.
func selects(sel, labels map[string]string) bool {
	for k, v := range sel {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

func (c *endpointSlices) sync(ctx context.Context, key string) (time.Duration, error) {
	ns, name, err := splitKey(key)
	if err != nil {
		return 0, nil
	}
	if !c.track.caughtUp(key) {
		return cacheLagRetry, nil
	}
	var have []*api.EndpointSlice
	for _, obj := range c.s.epsInf.List() {
		es := obj.(*api.EndpointSlice)
		if es.Namespace == ns && es.Labels[api.LabelServiceName] == name && es.Labels[api.LabelManagedBy] == api.EndpointSliceController {
			have = append(have, es)
		}
	}
	slices.SortFunc(have, func(a, b *api.EndpointSlice) int { return strings.Compare(a.Name, b.Name) })
	// A Service gone, or without a selector, has none of this
	// controller's slices.
	var want []*api.EndpointSlice
	if obj, ok := c.s.svcInf.Get(ns, name); ok {
		if svc := obj.(*api.Service); len(svc.Spec.Selector) > 0 && svc.Spec.Type != api.ServiceTypeExternalName {
			want = c.desired(svc)
		}
	} else {
		c.track.forget(key)
	}
	// A wanted slice goes to the one there that holds its group (see
	// matchSlices), else to a new one; those left over are deleted.
	match, used := matchSlices(have, want)
	for wi, w := range want {
		if match[wi] < 0 {
			if err := c.write(ctx, key, w, false); err != nil {
				return 0, err
			}
			continue
		}
		if sameSlice(have[match[wi]], w) {
			continue
		}
		cp, err := controller.Copy(have[match[wi]])
		if err != nil {
			return 0, err
		}
		upd := cp.(*api.EndpointSlice)
		upd.Labels, upd.OwnerReferences = w.Labels, w.OwnerReferences
		upd.Endpoints, upd.Ports = w.Endpoints, w.Ports
		if err := c.write(ctx, key, upd, true); err != nil {
			return 0, err
		}
	}
	for i, es := range have {
		if used[i] {
			continue
		}
		if err := c.s.client.Delete(ctx, endpointSlicesRes, ns, es.Name, api.DeleteOptions{}); err != nil && !api.IsNotFound(err) {
			return 0, fmt.Errorf("endpoint slice %s/%s: %w", ns, es.Name, err)
		}
	}
	return 0, nil
}

// write creates or (update) updates a slice and tracks the write.
func (c *endpointSlices) write(ctx context.Context, key string, es *api.EndpointSlice, update bool) error {
	var out api.Object
	var err error
	if update {
		out, err = c.s.client.Update(ctx, es)
	} else {
		out, err = c.s.client.Create(ctx, es)
	}
	if err != nil {
		return fmt.Errorf("endpoint slice of %s: %w", key, err)
	}
	c.track.wrote(key, c.s.epsInf, out)
	return nil
}

// desired is the slices svc should have: at least one, empty when no pod
// is selected, so that readers tell "no endpoints" from "not done yet".
func (c *endpointSlices) desired(svc *api.Service) []*api.EndpointSlice {
	type group struct {
		family string
		ports  []api.EndpointPort
		eps    []api.Endpoint
	}
	groups := map[string]*group{}
	for _, obj := range c.s.pods.inNamespace(svc.Namespace) {
		p := obj.(*api.Pod)
		if !selects(svc.Spec.Selector, p.Labels) || podFinished(p) || p.Spec.NodeName == "" {
			continue
		}
		ip, err := netip.ParseAddr(p.Status.PodIP)
		if err != nil {
			continue // no address yet
		}
		family := api.AddressTypeIPv4
		if !ip.Is4() {
			family = api.AddressTypeIPv6
		}
		ports, ok := resolvePorts(svc, p)
		if !ok {
			continue
		}
		k := family + "|" + portsKey(ports)
		g := groups[k]
		if g == nil {
			g = &group{family: family, ports: ports}
			groups[k] = g
		}
		ready := podReady(p)
		terminating := p.DeletionTimestamp != nil
		e := api.Endpoint{
			Addresses:  []string{ip.String()},
			Conditions: api.EndpointConditions{Ready: ptr(ready && !terminating), Serving: ptr(ready), Terminating: ptr(terminating)},
			TargetRef:  &api.ObjectReference{Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.UID},
			NodeName:   p.Spec.NodeName,
		}
		if n, ok := c.s.nodeInf.Get("", p.Spec.NodeName); ok {
			e.Zone = n.GetObjectMeta().Labels[scheduler.LabelZone]
		}
		g.eps = append(g.eps, e)
	}
	keys := make([]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var out []*api.EndpointSlice
	mk := func(family string, ports []api.EndpointPort, eps []api.Endpoint) {
		out = append(out, &api.EndpointSlice{
			TypeMeta: api.TypeMeta{Kind: "EndpointSlice", APIVersion: endpointSlicesRes.APIVersion()},
			ObjectMeta: api.ObjectMeta{Namespace: svc.Namespace, GenerateName: svc.Name + "-",
				Labels:          map[string]string{api.LabelServiceName: svc.Name, api.LabelManagedBy: api.EndpointSliceController},
				OwnerReferences: []api.OwnerReference{newControllerRef(svc)}},
			AddressType: family, Endpoints: eps, Ports: ports,
		})
	}
	for _, k := range keys {
		g := groups[k]
		slices.SortFunc(g.eps, func(a, b api.Endpoint) int { return strings.Compare(a.TargetRef.Name, b.TargetRef.Name) })
		for chunk := range slices.Chunk(g.eps, api.EndpointsPerControllerSlice) {
			mk(g.family, g.ports, chunk)
		}
	}
	if len(out) == 0 {
		ports, _ := resolvePorts(svc, nil)
		mk(api.AddressTypeIPv4, ports, []api.Endpoint{})
	}
	return out
}

// resolvePorts is svc's ports as the endpoints of pod p serve them: a
// named target port is looked up among p's container ports (a pod
// without it does not serve the Service); nil p leaves named ports out.
func resolvePorts(svc *api.Service, p *api.Pod) ([]api.EndpointPort, bool) {
	out := make([]api.EndpointPort, 0, len(svc.Spec.Ports))
	for _, sp := range svc.Spec.Ports {
		proto := cmp.Or(sp.Protocol, api.ProtocolTCP)
		port := sp.Port
		switch tp := sp.TargetPort; {
		case tp.IsString:
			port = 0
			if p != nil {
				for _, ctr := range p.Spec.Containers {
					for _, cp := range ctr.Ports {
						if cp.Name == tp.StrVal && cmp.Or(cp.Protocol, api.ProtocolTCP) == proto {
							port = cp.ContainerPort
						}
					}
				}
			}
			if port == 0 {
				if p != nil {
					return nil, false
				}
				continue
			}
		case tp.IntVal != 0:
			port = tp.IntVal
		}
		out = append(out, api.EndpointPort{Name: sp.Name, Protocol: proto, Port: ptr(port)})
	}
	return out, true
}

func portsKey(ports []api.EndpointPort) string {
	var b strings.Builder
	for _, p := range ports {
		b.WriteString(p.Name + "/" + p.Protocol + "/" + strconv.Itoa(int(*p.Port)) + ",")
	}
	return b.String()
}

// matchSlices is, for each slice wanted, the index of the slice there it
// is written to (-1: a new one), and which of those there are kept. A
// wanted slice keeps one that already says the same, else takes one of its address type (a type cannot
// change) serving the same ports, else any of its type; each time the
// first unused in name order. Names are generated, so their order says
// nothing of what a slice holds: matched by position alone, a sync with
// nothing changed would trade two groups' slices (two writes, and between
// them one group listed twice and the other not at all). This way such a
// sync writes nothing, a change of one pod rewrites one slice, and
// families do not trade slices.
func matchSlices(have, want []*api.EndpointSlice) (match []int, used []bool) {
	match, used = make([]int, len(want)), make([]bool, len(have))
	for i := range match {
		match[i] = -1
	}
	fits := []func(h, w *api.EndpointSlice) bool{
		sameSlice,
		func(h, w *api.EndpointSlice) bool {
			return h.AddressType == w.AddressType && sameList(h.Ports, w.Ports, len(h.Ports), len(w.Ports))
		},
		func(h, w *api.EndpointSlice) bool { return h.AddressType == w.AddressType },
	}
	for _, fit := range fits {
		for wi, w := range want {
			if match[wi] >= 0 {
				continue
			}
			for hi, h := range have {
				if !used[hi] && fit(h, w) {
					match[wi], used[hi] = hi, true
					break
				}
			}
		}
	}
	return match, used
}

// sameSlice reports whether have already says what want does.
func sameSlice(have, want *api.EndpointSlice) bool {
	return have.AddressType == want.AddressType &&
		sameList(have.Endpoints, want.Endpoints, len(have.Endpoints), len(want.Endpoints)) &&
		sameList(have.Ports, want.Ports, len(have.Ports), len(want.Ports)) &&
		have.Labels[api.LabelServiceName] == want.Labels[api.LabelServiceName] &&
		len(have.OwnerReferences) == 1 && have.OwnerReferences[0].UID == want.OwnerReferences[0].UID
}

// sameList reports whether lists a and b, of lengths n and m, are equal;
// an empty list and none are the same (the stored form drops empty ones).
func sameList(a, b any, n, m int) bool { return n == 0 && m == 0 || reflect.DeepEqual(a, b) }

func ptr[T any](v T) *T { return &v }

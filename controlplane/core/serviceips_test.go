package core

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// svc is a Service with a port for each node port given (0: none asked
// for), or one port without.
func svc(name, typ, ip string, nodePorts ...int32) *api.Service {
	s := &api.Service{TypeMeta: api.TypeMeta{Kind: "Service", APIVersion: "v1"}, ObjectMeta: api.ObjectMeta{Namespace: NamespaceDefault, Name: name},
		Spec: api.ServiceSpec{Type: typ, ClusterIP: ip, Selector: map[string]string{"app": name}}}
	for i, np := range nodePorts {
		s.Spec.Ports = append(s.Spec.Ports, api.ServicePort{Name: fmt.Sprintf("p%d", i), Port: 80 + int32(i), NodePort: np})
	}
	if len(s.Spec.Ports) == 0 {
		s.Spec.Ports = []api.ServicePort{{Port: 80}}
	}
	return s
}

// Services' addresses (SPEC NET-3): the lowest free cluster IP of the
// service CIDR and node port of the range are given when left out; one
// asked for must be in range and free, else the create is refused naming
// the field; an update keeps them; LoadBalancer is refused saying what to
// use; twenty creates at once never share an address, nor take the
// cluster DNS resolver's.
func TestServiceAddresses(t *testing.T) {
	c := startCore(t, nil, func(cfg *Config) {
		cfg.Network = Network{ServiceCIDR: netip.MustParsePrefix("10.43.0.0/24"), NodePorts: [2]int32{30000, 30010}}
	})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	waitBootstrapped(t, ctx, c)
	create := func(s *api.Service) (*api.Service, error) {
		res, err := c.Create(ctx, ControlPlane, s)
		if err != nil {
			return nil, err
		}
		obj, _, err := c.Get(servicesResource, NamespaceDefault, s.Name)
		if err != nil {
			t.Fatal(err)
		}
		if res == nil {
			t.Fatal("no result")
		}
		return obj.(*api.Service), nil
	}
	a, err := create(svc("a", "", ""))
	if err != nil || a.Spec.ClusterIP != "10.43.0.1" {
		t.Fatalf("a: %v %+v, want 10.43.0.1", err, a)
	}
	b, err := create(svc("b", api.ServiceTypeNodePort, "", 0, 0))
	if err != nil || b.Spec.ClusterIP != "10.43.0.2" || b.Spec.Ports[0].NodePort != 30000 || b.Spec.Ports[1].NodePort != 30001 {
		t.Fatalf("b: %v %+v, want 10.43.0.2 and node ports 30000, 30001", err, b)
	}
	refused := func(s *api.Service, field, msg string) {
		t.Helper()
		_, err := create(s)
		if !api.IsInvalid(err) || !strings.Contains(err.Error(), field) || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: %v, want refused naming %s (%s)", s.Name, err, field, msg)
		}
	}
	refused(svc("c", "", "10.43.0.1"), "spec.clusterIP", "already allocated (to service default/a)")
	refused(svc("dns", "", "10.43.0.10"), "spec.clusterIP", "reserved for the cluster's DNS resolver")
	refused(svc("d", "", "10.99.0.1"), "spec.clusterIP", "not in the service CIDR 10.43.0.0/24")
	refused(svc("e", api.ServiceTypeNodePort, "", 30001), "spec.ports[0].nodePort", "already allocated")
	refused(svc("f", api.ServiceTypeNodePort, "", 40000), "spec.ports[0].nodePort", "valid range. The range of valid ports is 30000-30010")
	refused(svc("g", api.ServiceTypeClusterIP, "", 30005), "spec.ports[0].nodePort", "may not be used when `type` is 'ClusterIP'")
	refused(svc("h", api.ServiceTypeLoadBalancer, ""), "spec.type", "no load balancer yet")
	if h, err := create(svc("headless", "", "None")); err != nil || h.Spec.ClusterIP != "None" {
		t.Errorf("headless: %v %+v", err, h)
	}
	// An update that leaves the node ports out keeps them (the cluster
	// IP it must name, as Kubernetes' PUT).
	upd := svc("b", api.ServiceTypeNodePort, "10.43.0.2", 0, 0)
	if _, err := c.Update(ctx, ControlPlane, servicesResource, NamespaceDefault, "b", false, upd, func() (api.Object, error) { return svc("b", api.ServiceTypeNodePort, "10.43.0.2", 0, 0), nil }); err != nil {
		t.Fatal(err)
	}
	obj, _, _ := c.Get(servicesResource, NamespaceDefault, "b")
	if s := obj.(*api.Service); s.Spec.ClusterIP != "10.43.0.2" || s.Spec.Ports[0].NodePort != 30000 {
		t.Errorf("b after an update without them: %+v", s.Spec)
	}
	// Concurrent creates: every one a different address.
	var wg sync.WaitGroup
	ips := make([]string, 20)
	for i := range ips {
		wg.Go(func() {
			s, err := create(svc("many-"+string(rune('a'+i)), "", ""))
			if err != nil {
				t.Error(err)
				return
			}
			ips[i] = s.Spec.ClusterIP
		})
	}
	wg.Wait()
	// 10.43.0.10 is the cluster DNS resolver's (SPEC NET-4): never given.
	seen := map[string]bool{"10.43.0.1": true, "10.43.0.2": true, "10.43.0.10": true}
	for _, ip := range ips {
		if seen[ip] {
			t.Errorf("cluster IP %s given twice: %v", ip, ips)
		}
		seen[ip] = true
	}
}

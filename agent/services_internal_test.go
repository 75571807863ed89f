package agent

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/agent/serviceproxy"
	"github.com/outpost-edge/outpost/controlplane/api"
)

// The proxy's model of a node's Services (SPEC NET-3): a port's ready
// endpoints by port name and protocol; with none ready, those serving
// while they terminate; headless and ExternalName Services left out;
// ClientIP affinity with its timeout.
func TestProxyModel(t *testing.T) {
	yes, no := true, false
	p := func(v int32) *int32 { return &v }
	ep := func(addr string, ready, serving, terminating *bool) api.Endpoint {
		return api.Endpoint{Addresses: []string{addr}, Conditions: api.EndpointConditions{Ready: ready, Serving: serving, Terminating: terminating}}
	}
	svc := func(name, ip string) *api.Service {
		return &api.Service{ObjectMeta: api.ObjectMeta{Namespace: "default", Name: name}, Spec: api.ServiceSpec{ClusterIP: ip,
			Ports: []api.ServicePort{{Name: "http", Protocol: "TCP", Port: 80, NodePort: 30080}, {Name: "dns", Protocol: "UDP", Port: 53}}}}
	}
	sticky := svc("sticky", "10.43.0.2")
	sticky.Spec.SessionAffinity = api.ServiceAffinityClientIP
	sticky.Spec.SessionAffinityConfig = &api.SessionAffinityConfig{ClientIP: &api.ClientIPConfig{TimeoutSeconds: p(60)}}
	ext := svc("ext", "")
	ext.Spec.Type = api.ServiceTypeExternalName
	svcs := map[string]*api.Service{
		"default/web": svc("web", "10.43.0.1"), "default/sticky": sticky,
		"default/headless": svc("headless", "None"), "default/ext": ext,
	}
	slice := func(svc string, ports []api.EndpointPort, eps ...api.Endpoint) *api.EndpointSlice {
		return &api.EndpointSlice{ObjectMeta: api.ObjectMeta{Namespace: "default", Name: svc + "-x", Labels: map[string]string{api.LabelServiceName: svc}},
			AddressType: api.AddressTypeIPv4, Ports: ports, Endpoints: eps}
	}
	ports := []api.EndpointPort{{Name: "http", Protocol: "TCP", Port: p(8080)}, {Name: "dns", Protocol: "UDP", Port: p(5353)}}
	eps := map[string]*api.EndpointSlice{
		"default/web-x":    slice("web", ports, ep("10.42.0.5", &yes, &yes, &no), ep("10.42.0.6", &no, &yes, &yes), ep("10.42.0.7", &no, &no, &no)),
		"default/sticky-x": slice("sticky", ports[:1], ep("10.42.0.8", &no, &yes, &yes)),
	}
	got := map[string]serviceproxy.Service{}
	for _, s := range proxyModel(svcs, eps) {
		got[s.Name] = s
	}
	if len(got) != 2 {
		t.Fatalf("services %v, want web and sticky only", got)
	}
	web := got["web"]
	if len(web.Ports) != 2 || fmt.Sprint(web.Ports[0].Endpoints) != "[{10.42.0.5 8080}]" || web.Ports[0].NodePort != 30080 || fmt.Sprint(web.Ports[1].Endpoints) != "[{10.42.0.5 5353}]" {
		t.Errorf("web: %+v, want 10.42.0.5 only (ready), on 8080/TCP and 5353/UDP", web.Ports)
	}
	st := got["sticky"]
	if st.AffinityTimeout != time.Minute || st.ClusterIP != netip.MustParseAddr("10.43.0.2") || fmt.Sprint(st.Ports[0].Endpoints) != "[{10.42.0.8 8080}]" || len(st.Ports[1].Endpoints) != 0 {
		t.Errorf("sticky: %+v, want affinity 1m, the terminating but serving endpoint, no dns endpoints", st)
	}
}

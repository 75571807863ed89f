package api

import (
	"reflect"
	"testing"
)

func TestSetDefaultsPod(t *testing.T) {
	p := &Pod{Spec: PodSpec{
		Containers: []Container{
			{Name: "latest", Image: "nginx:latest", Ports: []ContainerPort{{ContainerPort: 80}}},
			{Name: "untagged", Image: "registry.local:5000/nginx"},
			{Name: "tagged", Image: "registry.local:5000/nginx:1.25"},
			{Name: "digest", Image: "nginx@sha256:0123"},
			{Name: "limits", Image: "x:1", Resources: ResourceRequirements{
				Limits:   ResourceList{"cpu": MustParseQuantity("1"), "memory": MustParseQuantity("1Gi")},
				Requests: ResourceList{"cpu": MustParseQuantity("100m")},
			}},
		},
		InitContainers: []Container{{Name: "init", Image: "busybox"}},
		Tolerations:    []Toleration{{Key: "k", Value: "v"}, {Operator: TolerationOpExists}},
	}}
	SetDefaults(p)
	s := p.Spec
	if s.RestartPolicy != RestartPolicyAlways || s.SchedulerName != DefaultSchedulerName ||
		s.TerminationGracePeriodSeconds == nil || *s.TerminationGracePeriodSeconds != 30 {
		t.Errorf("pod spec defaults: %+v", s)
	}
	if p.Status.Phase != PodPending {
		t.Errorf("phase %q, want Pending", p.Status.Phase)
	}
	for i, want := range []string{PullAlways, PullAlways, PullIfNotPresent, PullIfNotPresent, PullIfNotPresent} {
		if got := s.Containers[i].ImagePullPolicy; got != want {
			t.Errorf("container %s: imagePullPolicy %q, want %q", s.Containers[i].Name, got, want)
		}
	}
	if s.InitContainers[0].ImagePullPolicy != PullAlways {
		t.Errorf("init container not defaulted: %+v", s.InitContainers[0])
	}
	if s.Containers[0].Ports[0].Protocol != ProtocolTCP || s.Containers[0].Ports[0].HostPort != 0 {
		t.Errorf("port %+v, want TCP and no host port", s.Containers[0].Ports[0])
	}
	req := s.Containers[4].Resources.Requests
	if req["cpu"].MilliValue() != 100 || req["memory"].Value() != 1<<30 {
		t.Errorf("requests %v: want the cpu request kept and the memory limit copied", req)
	}
	if s.Tolerations[0].Operator != TolerationOpEqual || s.Tolerations[1].Operator != TolerationOpExists {
		t.Errorf("tolerations %+v", s.Tolerations)
	}
	// Defaulting twice changes nothing.
	before := *p
	before.Spec.Containers = append([]Container(nil), p.Spec.Containers...)
	SetDefaults(p)
	if !reflect.DeepEqual(before.Spec, p.Spec) {
		t.Errorf("second SetDefaults changed the pod")
	}
}

func TestSetDefaultsHostNetworkPorts(t *testing.T) {
	p := &Pod{Spec: PodSpec{HostNetwork: true, Containers: []Container{{Name: "a", Image: "x", Ports: []ContainerPort{{ContainerPort: 53, Protocol: ProtocolUDP}}}}}}
	SetDefaults(p)
	if got := p.Spec.Containers[0].Ports[0]; got.HostPort != 53 || got.Protocol != ProtocolUDP {
		t.Errorf("port %+v, want hostPort 53/UDP", got)
	}
}

func TestSetDefaultsSharedRequestsNotChanged(t *testing.T) {
	// Controllers copy templates shallowly; defaulting must not write
	// into the template's maps.
	tmpl := ResourceList{"cpu": MustParseQuantity("1")}
	p := &Pod{Spec: PodSpec{Containers: []Container{{Name: "a", Image: "x", Resources: ResourceRequirements{
		Limits: ResourceList{"memory": MustParseQuantity("1Gi")}, Requests: tmpl}}}}}
	SetDefaults(p)
	if len(tmpl) != 1 {
		t.Errorf("the shared requests map was changed: %v", tmpl)
	}
	if len(p.Spec.Containers[0].Resources.Requests) != 2 {
		t.Errorf("requests %v", p.Spec.Containers[0].Resources.Requests)
	}
}

func TestSetDefaultsWorkloads(t *testing.T) {
	d := &Deployment{}
	SetDefaults(d)
	ru := d.Spec.Strategy.RollingUpdate
	if *d.Spec.Replicas != 1 || d.Spec.Strategy.Type != RollingUpdateDeploymentStrategyType || ru == nil ||
		*ru.MaxSurge != FromString("25%") || *ru.MaxUnavailable != FromString("25%") ||
		*d.Spec.RevisionHistoryLimit != 10 || *d.Spec.ProgressDeadlineSeconds != 600 ||
		d.Spec.Template.Spec.RestartPolicy != RestartPolicyAlways {
		t.Errorf("deployment defaults: %+v", d.Spec)
	}
	rec := &Deployment{Spec: DeploymentSpec{Strategy: DeploymentStrategy{Type: RecreateDeploymentStrategyType}}}
	SetDefaults(rec)
	if rec.Spec.Strategy.RollingUpdate != nil {
		t.Errorf("Recreate got a rollingUpdate: %+v", rec.Spec.Strategy)
	}
	rs := &ReplicaSet{}
	SetDefaults(rs)
	if *rs.Spec.Replicas != 1 || rs.Spec.Template.Spec.SchedulerName != DefaultSchedulerName {
		t.Errorf("replicaset defaults: %+v", rs.Spec)
	}
	ds := &DaemonSet{}
	SetDefaults(ds)
	dru := ds.Spec.UpdateStrategy.RollingUpdate
	if ds.Spec.UpdateStrategy.Type != RollingUpdateDaemonSetStrategyType || dru == nil || *dru.MaxUnavailable != FromInt(1) ||
		ds.Spec.Template.Spec.RestartPolicy != RestartPolicyAlways {
		t.Errorf("daemonset defaults: %+v", ds.Spec)
	}
	three := int32(3)
	keep := &Deployment{Spec: DeploymentSpec{Replicas: &three}}
	SetDefaults(keep)
	if *keep.Spec.Replicas != 3 {
		t.Errorf("replicas %d, want the given 3", *keep.Spec.Replicas)
	}
}

func TestSetDefaultsOthers(t *testing.T) {
	ns := &Namespace{}
	SetDefaults(ns)
	if ns.Status.Phase != NamespaceActive {
		t.Errorf("namespace phase %q", ns.Status.Phase)
	}
	svc := &Service{Spec: ServiceSpec{Ports: []ServicePort{{Port: 80}, {Port: 443, TargetPort: FromString("https")}}}}
	SetDefaults(svc)
	if svc.Spec.Type != ServiceTypeClusterIP || svc.Spec.Ports[0].Protocol != ProtocolTCP ||
		svc.Spec.Ports[0].TargetPort != FromInt(80) || svc.Spec.Ports[1].TargetPort != FromString("https") {
		t.Errorf("service defaults: %+v", svc.Spec)
	}
	ev := &Event{}
	SetDefaults(ev)
	if ev.Type != EventTypeNormal {
		t.Errorf("event type %q", ev.Type)
	}
	warn := &Event{Type: EventTypeWarning}
	SetDefaults(warn)
	if warn.Type != EventTypeWarning {
		t.Errorf("event type %q, want Warning kept", warn.Type)
	}
	n := &Node{Status: NodeStatus{Capacity: ResourceList{"cpu": MustParseQuantity("4")}}}
	SetDefaults(n)
	if n.Status.Allocatable["cpu"].MilliValue() != 4000 {
		t.Errorf("allocatable %v, want the capacity", n.Status.Allocatable)
	}
}

package api

import (
	"errors"
	"strings"
	"testing"
)

func TestParseFieldSelector(t *testing.T) {
	pods := ResourceForKind("Pod")
	pod := &Pod{ObjectMeta: ObjectMeta{Name: "web", Namespace: "default"},
		Spec:   PodSpec{NodeName: "node1", SchedulerName: DefaultSchedulerName, RestartPolicy: RestartPolicyAlways},
		Status: PodStatus{Phase: PodRunning}}
	tests := []struct {
		in      string
		matches bool
		str     string
	}{
		{"", true, ""},
		{"spec.nodeName=node1", true, "spec.nodeName=node1"},
		{"spec.nodeName==node1", true, "spec.nodeName=node1"},
		{"spec.nodeName=", false, "spec.nodeName="},
		{"spec.nodeName!=", true, "spec.nodeName!="},
		{"spec.nodeName!=node1", false, "spec.nodeName!=node1"},
		{"status.phase=Running,metadata.namespace=default", true, "status.phase=Running,metadata.namespace=default"},
		{"status.phase=Running,metadata.name=api", false, "status.phase=Running,metadata.name=api"},
		{"spec.schedulerName=default-scheduler,spec.restartPolicy=Always", true, "spec.schedulerName=default-scheduler,spec.restartPolicy=Always"},
		{`metadata.name=a\,b`, false, `metadata.name=a\,b`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			fs, err := ParseFieldSelector(pods, tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if got := fs.Matches(pod); got != tt.matches {
				t.Errorf("Matches = %v, want %v", got, tt.matches)
			}
			if fs.String() != tt.str {
				t.Errorf("String() = %q, want %q", fs.String(), tt.str)
			}
			if fs.Empty() != (tt.in == "") {
				t.Errorf("Empty() = %v", fs.Empty())
			}
			again, err := ParseFieldSelector(pods, fs.String())
			if err != nil || again.String() != fs.String() {
				t.Errorf("String() does not parse back: %v", err)
			}
		})
	}
	fs, _ := ParseFieldSelector(pods, `metadata.name=a\,b\=c`)
	if r := fs.Requirements(); len(r) != 1 || r[0] != (FieldRequirement{Field: "metadata.name", Operator: OpEquals, Value: "a,b=c"}) {
		t.Errorf("requirements %+v", r)
	}
}

func TestFieldSelectorKinds(t *testing.T) {
	ev := &Event{ObjectMeta: ObjectMeta{Name: "e", Namespace: "default"}, Reason: "Scheduled", Type: EventTypeNormal,
		InvolvedObject: ObjectReference{Kind: "Pod", Name: "web", Namespace: "default", UID: "u1"}, Source: EventSource{Component: "default-scheduler"}}
	node := &Node{ObjectMeta: ObjectMeta{Name: "n1"}, Spec: NodeSpec{Unschedulable: true}}
	tests := []struct {
		kind string
		obj  Object
		sel  string
		want bool
	}{
		{"Event", ev, "involvedObject.kind=Pod,involvedObject.name=web,involvedObject.namespace=default,involvedObject.uid=u1", true},
		{"Event", ev, "reason=Scheduled,type=Normal,source=default-scheduler", true},
		{"Event", ev, "type=Warning", false},
		{"Node", node, "spec.unschedulable=true", true},
		{"Node", node, "spec.unschedulable=false", false},
		{"Node", node, "metadata.name=n1", true},
		{"Namespace", &Namespace{Status: NamespaceStatus{Phase: NamespaceActive}}, "status.phase=Active", true},
		{"Deployment", &Deployment{ObjectMeta: ObjectMeta{Name: "d", Namespace: "x"}}, "metadata.namespace=x,metadata.name=d", true},
	}
	for _, tt := range tests {
		t.Run(tt.kind+" "+tt.sel, func(t *testing.T) {
			fs, err := ParseFieldSelector(ResourceForKind(tt.kind), tt.sel)
			if err != nil {
				t.Fatal(err)
			}
			if got := fs.Matches(tt.obj); got != tt.want {
				t.Errorf("Matches = %v, want %v", got, tt.want)
			}
		})
	}
	if v, ok := FieldValue(ev, "involvedObject.name"); !ok || v != "web" {
		t.Errorf("FieldValue = %q, %v", v, ok)
	}
	if _, ok := FieldValue(node, "status.phase"); ok {
		t.Errorf("FieldValue reported a field nodes do not have")
	}
}

func TestParseFieldSelectorErrors(t *testing.T) {
	tests := []struct {
		kind, in, want string
	}{
		{"Pod", "spec.nodename=x", `field label not supported for pods: "spec.nodename" (supported: metadata.name, metadata.namespace, spec.nodeName,`},
		{"Node", "spec.nodeName=x", `field label not supported for nodes: "spec.nodeName" (supported: metadata.name, metadata.namespace, spec.unschedulable)`},
		{"Pod", "spec.nodeName", "has no operator"},
		{"Pod", "=x", "expected a field name"},
		{"Pod", "spec.nodeName=a,", "expected a requirement after ','"},
		{"Pod", "spec.nodeName=a,,metadata.name=b", "has no operator"},
		{"Pod", `spec.nodeName=a\x`, "invalid escape sequence"},
		{"Pod", "spec.nodeName=a=b", "must be escaped"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			_, err := ParseFieldSelector(ResourceForKind(tt.kind), tt.in)
			if !errors.Is(err, ErrFieldSelector) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want ErrFieldSelector containing %q", err, tt.want)
			}
		})
	}
}

package admission

import (
	"testing"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/auth"
)

func constraintsChain(blacklist ...string) []Interface {
	return New(Config{PodNodeConstraints: &PodNodeConstraintsConfig{NodeSelectorLabelBlacklist: blacklist},
		DefaultTolerationSeconds: DefaultTolerationSecondsConfig{Disable: true}}, Deps{})
}

func TestPodNodeConstraintsPods(t *testing.T) {
	chain := constraintsChain("kubernetes.io/hostname", "region")
	tests := []struct {
		name    string
		id      *auth.Identity
		sel     map[string]string
		refused []string // parts of the refusal; nil if admitted
	}{
		{"developer, no selector", developer, nil, nil},
		{"developer, allowed label", developer, map[string]string{"superregion": "us"}, nil},
		{"developer, hostname", developer, map[string]string{"kubernetes.io/hostname": "n1"},
			[]string{`pods "web" is forbidden: node selector label(s) [kubernetes.io/hostname] may only be set by users with the pods/binding permission (user "token:dev" in namespace "ns1")`}},
		{"developer, two blacklisted", developer, map[string]string{"region": "us-east", "kubernetes.io/hostname": "n1", "superregion": "us"},
			[]string{"[kubernetes.io/hostname region]"}},
		{"anonymous, hostname", nil, map[string]string{"kubernetes.io/hostname": "n1"}, []string{`user "system:anonymous"`}},
		{"admin, hostname", admin, map[string]string{"kubernetes.io/hostname": "n1", "region": "us-east"}, nil},
		{"server, region", server, map[string]string{"region": "us-east"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := admit(t, chain, OpCreate, tt.id, pod("ns1", "web", tt.sel), nil)
			if tt.refused == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			wantForbidden(t, err, tt.refused...)
		})
	}
}

// TestPodNodeConstraintsCan: the permission asked is create pods/binding
// in the pod's namespace, through Deps.Can when given.
func TestPodNodeConstraintsCan(t *testing.T) {
	var asked auth.Request
	chain := New(Config{PodNodeConstraints: &PodNodeConstraintsConfig{NodeSelectorLabelBlacklist: []string{"region"}}},
		Deps{Can: func(_ *auth.Identity, req auth.Request) bool { asked = req; return true }})
	if err := admit(t, chain, OpCreate, developer, pod("ns1", "web", map[string]string{"region": "a"}), nil); err != nil {
		t.Fatalf("refused although Can allowed: %v", err)
	}
	want := auth.Request{Verb: auth.VerbCreate, Resource: "pods", Subresource: auth.SubresourceBinding, Namespace: "ns1", Name: "web"}
	if asked != want {
		t.Errorf("asked %+v, want %+v", asked, want)
	}
}

func TestPodNodeConstraintsTemplates(t *testing.T) {
	chain := constraintsChain("kubernetes.io/hostname")
	pinned := map[string]string{"kubernetes.io/hostname": "n1", "app": "web"}
	meta := api.ObjectMeta{Namespace: "ns1", Name: "web"}
	tests := []struct {
		name    string
		op      string
		id      *auth.Identity
		obj     api.Object
		old     api.Object
		refused bool
	}{
		{"deployment create by developer", OpCreate, developer,
			&api.Deployment{ObjectMeta: meta, Spec: api.DeploymentSpec{Template: template(pinned)}}, nil, true},
		{"replicaset create by developer", OpCreate, developer,
			&api.ReplicaSet{ObjectMeta: meta, Spec: api.ReplicaSetSpec{Template: template(pinned)}}, nil, true},
		{"daemonset create by developer", OpCreate, developer,
			&api.DaemonSet{ObjectMeta: meta, Spec: api.DaemonSetSpec{Template: template(pinned)}}, nil, true},
		{"deployment create by admin", OpCreate, admin,
			&api.Deployment{ObjectMeta: meta, Spec: api.DeploymentSpec{Template: template(pinned)}}, nil, false},
		{"developer keeps the admin's label (scaling)", OpUpdate, developer,
			&api.Deployment{ObjectMeta: meta, Spec: api.DeploymentSpec{Template: template(pinned)}},
			&api.Deployment{ObjectMeta: meta, Spec: api.DeploymentSpec{Template: template(map[string]string{"kubernetes.io/hostname": "n1"})}}, false},
		{"developer changes the admin's label", OpUpdate, developer,
			&api.Deployment{ObjectMeta: meta, Spec: api.DeploymentSpec{Template: template(map[string]string{"kubernetes.io/hostname": "n2"})}},
			&api.Deployment{ObjectMeta: meta, Spec: api.DeploymentSpec{Template: template(pinned)}}, true},
		{"developer adds the label on update", OpUpdate, developer,
			&api.DaemonSet{ObjectMeta: meta, Spec: api.DaemonSetSpec{Template: template(pinned)}},
			&api.DaemonSet{ObjectMeta: meta, Spec: api.DaemonSetSpec{Template: template(nil)}}, true},
		{"status update is not judged", OpUpdateStatus, developer,
			&api.Deployment{ObjectMeta: meta, Spec: api.DeploymentSpec{Template: template(pinned)}}, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := admit(t, chain, tt.op, tt.id, tt.obj, tt.old)
			if !tt.refused {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			wantForbidden(t, err, "node selector label(s) [kubernetes.io/hostname] in spec.template.spec.nodeSelector", "pods/binding")
		})
	}
}

func TestPodNodeConstraintsScope(t *testing.T) {
	a := constraintsChain("region")[0].(Scope)
	for _, tt := range []struct {
		op   string
		kind string
		want bool
	}{
		{OpCreate, "Pod", true}, {OpUpdate, "Pod", false}, {OpBind, "Pod", false}, {OpDelete, "Pod", false},
		{OpCreate, "Deployment", true}, {OpUpdate, "ReplicaSet", true}, {OpUpdate, "DaemonSet", true},
		{OpUpdateStatus, "Deployment", false}, {OpCreate, "Service", false}, {OpUpdate, "Node", false},
	} {
		if got := a.Applies(tt.op, developer, api.ResourceForKind(tt.kind)); got != tt.want {
			t.Errorf("Applies(%s, %s) = %v, want %v", tt.op, tt.kind, got, tt.want)
		}
	}
	if len(constraintsChain()) != 0 {
		t.Error("an empty blacklist still adds a PodNodeConstraints step")
	}
}

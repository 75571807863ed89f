package admission

import (
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/auth"
)

// namespaces is a Deps.Namespace backed by a map.
func namespaces(annotations map[string]map[string]string) func(string) (*api.Namespace, error) {
	return func(name string) (*api.Namespace, error) {
		a, ok := annotations[name]
		if !ok {
			return nil, api.NewNotFound(api.ResourceForKind("Namespace"), name)
		}
		return &api.Namespace{ObjectMeta: api.ObjectMeta{Name: name, Annotations: a}}, nil
	}
}

func TestPodNodeSelector(t *testing.T) {
	cfg, err := ParseConfig(readTestdata(t, "seed-14.4.4-configuration.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ns := namespaces(map[string]map[string]string{
		"ns1":      {AnnotationNodeSelector: "env=test,infra=fedora"}, // the seed's project
		"plain":    nil,
		"exempt":   {AnnotationNodeSelector: ""},
		"bad":      {AnnotationNodeSelector: "env=test,infra"},
		"spaced":   {AnnotationNodeSelector: " env = test "},
		"otherann": {"other": "x"},
	})
	chain := New(cfg, Deps{Namespace: ns})
	tests := []struct {
		name    string
		ns      string
		sel     map[string]string
		want    map[string]string // the pod's nodeSelector after admission
		refused []string
	}{
		// 14.4.4: the project's labels are merged into the pod's.
		{"seed merge", "ns1", map[string]string{"env": "test", "os": "fedora"},
			map[string]string{"env": "test", "infra": "fedora", "os": "fedora"}, nil},
		// 14.4.4: env: production conflicts with the project's env=test.
		{"seed conflict", "ns1", map[string]string{"env": "production", "infra": "fedora", "os": "fedora"}, nil,
			[]string{`pods "p" is forbidden: pod node label selector conflicts with its namespace node label selector`, "[env=production]", `namespace "ns1"`, "[env=test]"}},
		{"whitelist refuses a label", "ns1", map[string]string{"disk": "ssd"}, nil,
			[]string{"pod node label selector labels conflict with its namespace whitelist", "[disk=ssd]", `namespace "ns1"`}},
		{"whitelist refuses a value", "ns1", map[string]string{"region": "east"}, nil,
			[]string{"labels conflict with its namespace whitelist", "[region=east]"}},
		{"whitelist admits its labels", "ns1", map[string]string{"region": "west"},
			map[string]string{"env": "test", "infra": "fedora", "region": "west"}, nil},
		{"cluster default merged", "plain", nil, map[string]string{"k3": "v3"}, nil},
		{"cluster default kept with the pod's", "otherann", map[string]string{"a": "b"}, map[string]string{"a": "b", "k3": "v3"}, nil},
		{"cluster default conflict", "plain", map[string]string{"k3": "other"}, nil,
			[]string{"conflicts with its namespace node label selector", "[k3=other]", "clusterDefaultNodeSelector", "[k3=v3]"}},
		{"empty annotation overrides the cluster default", "exempt", map[string]string{"k3": "other"}, map[string]string{"k3": "other"}, nil},
		{"empty annotation, no selector", "exempt", nil, nil, nil},
		{"spaces in the annotation", "spaced", nil, map[string]string{"env": "test"}, nil},
		{"bad annotation", "bad", nil, nil,
			[]string{`namespace "bad" has an invalid scheduler.alpha.kubernetes.io/node-selector annotation "env=test,infra"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := pod(tt.ns, "p", maps.Clone(tt.sel))
			orig := p.Spec.NodeSelector
			err := admit(t, chain, OpCreate, developer, p, nil)
			if tt.refused != nil {
				wantForbidden(t, err, tt.refused...)
				return
			}
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !maps.Equal(p.Spec.NodeSelector, tt.want) {
				t.Errorf("nodeSelector %v, want %v", p.Spec.NodeSelector, tt.want)
			}
			if !maps.Equal(orig, tt.sel) {
				t.Errorf("the request's own map was changed to %v", orig)
			}
		})
	}
}

// TestPodNodeSelectorAllUsers: the namespace's selector binds admins and
// the server's controllers too; it is about where the namespace's pods
// run, not who creates them.
func TestPodNodeSelectorAllUsers(t *testing.T) {
	chain := New(Config{PodNodeSelector: &PodNodeSelectorConfig{}}, Deps{Namespace: namespaces(map[string]map[string]string{
		"ns1": {AnnotationNodeSelector: "env=test"},
	})})
	for _, who := range []*auth.Identity{admin, server} {
		p := pod("ns1", "a", map[string]string{"x": "y"})
		if err := admit(t, chain, OpCreate, who, p, nil); err != nil {
			t.Fatalf("%s: %v", who.Name, err)
		}
		if want := map[string]string{"env": "test", "x": "y"}; !maps.Equal(p.Spec.NodeSelector, want) {
			t.Errorf("%s: nodeSelector %v, want %v", who.Name, p.Spec.NodeSelector, want)
		}
		wantForbidden(t, admit(t, chain, OpCreate, who, pod("ns1", "c", map[string]string{"env": "prod"}), nil),
			"conflicts with its namespace node label selector")
	}
}

func TestPodNodeSelectorNamespaceLookup(t *testing.T) {
	cfg := Config{PodNodeSelector: &PodNodeSelectorConfig{ClusterDefaultNodeSelector: map[string]string{"k": "v"}}}

	// No lookup, or a namespace the lookup does not have: the cluster
	// default.
	for _, look := range []func(string) (*api.Namespace, error){nil, func(string) (*api.Namespace, error) { return nil, nil }} {
		p := pod("ns1", "p", nil)
		if err := admit(t, New(cfg, Deps{Namespace: look}), OpCreate, developer, p, nil); err != nil {
			t.Fatal(err)
		}
		if p.Spec.NodeSelector["k"] != "v" {
			t.Errorf("nodeSelector %v, want the cluster default", p.Spec.NodeSelector)
		}
	}

	// A missing namespace is its 404; a broken lookup a 500 that says
	// what failed.
	err := admit(t, New(cfg, Deps{Namespace: namespaces(nil)}), OpCreate, developer, pod("gone", "p", nil), nil)
	if !api.IsNotFound(err) {
		t.Errorf("missing namespace: %v, want NotFound", err)
	}
	boom := errors.New("disk on fire")
	err = admit(t, New(cfg, Deps{Namespace: func(string) (*api.Namespace, error) { return nil, boom }}), OpCreate, developer, pod("ns1", "p", nil), nil)
	var se *api.StatusError
	if !errors.As(err, &se) || se.Code() != 500 || !strings.Contains(se.Error(), "disk on fire") {
		t.Errorf("broken lookup: %v, want a 500 naming the cause", err)
	}
}

func TestPodNodeSelectorScope(t *testing.T) {
	a := New(Config{PodNodeSelector: &PodNodeSelectorConfig{}}, Deps{})[0].(Scope)
	for _, tt := range []struct {
		op   string
		kind string
		want bool
	}{
		{OpCreate, "Pod", true}, {OpUpdate, "Pod", false}, {OpBind, "Pod", false}, {OpUpdateStatus, "Pod", false},
		{OpDelete, "Pod", false}, {OpCreate, "Deployment", false}, {OpCreate, "Namespace", false},
	} {
		if got := a.Applies(tt.op, developer, api.ResourceForKind(tt.kind)); got != tt.want {
			t.Errorf("Applies(%s, %s) = %v, want %v", tt.op, tt.kind, got, tt.want)
		}
	}
}

// TestChainOrder: PodNodeConstraints judges what the user wrote, before
// PodNodeSelector merges in the administrator's labels, so a namespace
// pinned to a blacklisted label does not lock its developers out.
func TestChainOrder(t *testing.T) {
	cfg := Config{
		PodNodeConstraints: &PodNodeConstraintsConfig{NodeSelectorLabelBlacklist: []string{"kubernetes.io/hostname"}},
		PodNodeSelector:    &PodNodeSelectorConfig{},
	}
	chain := New(cfg, Deps{Namespace: namespaces(map[string]map[string]string{"ns1": {AnnotationNodeSelector: "kubernetes.io/hostname=n1"}})})
	if len(chain) != 3 {
		t.Fatalf("%d steps, want 3", len(chain))
	}
	if _, last := chain[2].(*defaultTolerationSeconds); !last {
		t.Fatalf("the last step is %T, want DefaultTolerationSeconds", chain[2])
	}
	p := pod("ns1", "p", nil)
	if err := admit(t, chain, OpCreate, developer, p, nil); err != nil {
		t.Fatalf("refused: %v", err)
	}
	if p.Spec.NodeSelector["kubernetes.io/hostname"] != "n1" {
		t.Errorf("nodeSelector %v, want the namespace's hostname merged", p.Spec.NodeSelector)
	}
	wantForbidden(t, admit(t, chain, OpCreate, developer, pod("ns1", "q", map[string]string{"kubernetes.io/hostname": "n1"}), nil),
		"node selector label(s) [kubernetes.io/hostname]")
}

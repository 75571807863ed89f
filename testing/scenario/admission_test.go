package scenario

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/outpost-edge/outpost/controlplane/admission"
	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/auth"
	"github.com/outpost-edge/outpost/controlplane/client"
	"github.com/outpost-edge/outpost/controlplane/server"
)

// ADM-1 and ADM-2 as a server configured from the seed's master-config
// text: the project's node selector is merged into its pods (which then
// land only on matching nodes), a conflicting pod is refused, and a
// developer may not use a blacklisted label.
func TestProjectNodeSelectorAndBlacklist(t *testing.T) {
	cfg, err := admission.ParseConfig([]byte(`
admissionConfig:
  pluginConfig:
    PodNodeConstraints:
      configuration:
        apiversion: v1
        kind: PodNodeConstraintsConfig
        nodeSelectorLabelBlacklist:
        - kubernetes.io/hostname
    PodNodeSelector:
      configuration:
        podNodeSelectorPluginConfig:
          clusterDefaultNodeSelector: "region=west"
`))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, 1, func(c *server.Config) { c.AdmissionConfig = cfg })
	e.node("east-0", map[string]string{"region": "east"})
	e.node("west-0", map[string]string{"region": "west"})
	e.create(&api.Namespace{ObjectMeta: api.ObjectMeta{Name: "team",
		Annotations: map[string]string{admission.AnnotationNodeSelector: "region=east"}}})

	p := newPod("app", nil)
	p.Namespace = "team"
	e.create(p)
	var got *api.Pod
	e.waitFor("team/app bound", func() bool {
		obj, err := e.cl.Get(e.ctx, podsR, "team", "app", client.GetOptions{})
		if err != nil {
			return false
		}
		got = obj.(*api.Pod)
		return bound(got)
	}, nil)
	if got.Spec.NodeName != "east-0" || got.Spec.NodeSelector["region"] != "east" {
		t.Fatalf("pod on %s with nodeSelector %v; want east-0 and region=east merged in", got.Spec.NodeName, got.Spec.NodeSelector)
	}
	// The default namespace has no annotation: the cluster default holds.
	e.create(newPod("dflt", nil))
	if n := e.waitPod("dflt", "bound", bound).Spec.NodeName; n != "west-0" {
		t.Fatalf("default-namespace pod on %s; want west-0 (clusterDefaultNodeSelector)", n)
	}

	bad := newPod("conflict", nil)
	bad.Namespace = "team"
	bad.Spec.NodeSelector = map[string]string{"region": "west"}
	_, _, err = e.cl.Create(e.ctx, bad)
	if se, ok := errors.AsType[*api.StatusError](err); !ok || se.Code() != http.StatusForbidden || !strings.Contains(se.Error(), "conflicts with its namespace node label selector") {
		t.Fatalf("conflicting pod: %v; want 403 naming the conflict", err)
	}

	// A developer of team may not pin a pod to a host by label.
	id, secret := auth.NewToken()
	if _, err := e.cl.CreateToken(e.ctx, &api.Token{ObjectMeta: api.ObjectMeta{Name: id},
		Spec: api.TokenSpec{Role: api.RoleDeveloper, Namespaces: []string{"team"}, SecretHash: auth.HashSecret(secret)}}); err != nil {
		t.Fatal(err)
	}
	dcfg := e.c.ClientConfig(e.c.Leader())
	dcfg.Token = id + "." + secret
	dev, err := client.New(dcfg)
	if err != nil {
		t.Fatal(err)
	}
	pinned := newPod("pinned", nil)
	pinned.Namespace = "team"
	pinned.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": "east-0"}
	_, _, err = dev.Create(e.ctx, pinned)
	if se, ok := errors.AsType[*api.StatusError](err); !ok || se.Code() != http.StatusForbidden || !strings.Contains(se.Error(), "kubernetes.io/hostname") {
		t.Fatalf("developer pinning by hostname: %v; want 403 naming the label", err)
	}
	// The admin may.
	pinned.ResourceVersion = ""
	if _, _, err := e.cl.Create(e.ctx, pinned); err != nil {
		t.Fatalf("admin pinning by hostname: %v", err)
	}
}

package admission

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/auth"
)

var (
	developer = &auth.Identity{Name: "token:dev", Role: api.RoleDeveloper, Namespaces: []string{"ns1", "ns2"}}
	admin     = &auth.Identity{Name: "token:admin", Role: api.RoleClusterAdmin}
	server    = &auth.Identity{Name: "system:server:s1", Role: api.RoleServer}
)

// admit runs the chain as the server does: in order, each step asked
// Applies first, up to the first refusal.
func admit(t *testing.T, chain []Interface, op string, id *auth.Identity, obj, old api.Object) error {
	t.Helper()
	r := obj
	if r == nil {
		r = old
	}
	res := api.ResourceOf(r)
	for _, a := range chain {
		if sc, ok := a.(Scope); ok && !sc.Applies(op, id, res) {
			continue
		}
		if err := a.Admit(context.Background(), op, id, obj, old); err != nil {
			return err
		}
	}
	return nil
}

func pod(ns, name string, sel map[string]string) *api.Pod {
	return &api.Pod{
		ObjectMeta: api.ObjectMeta{Namespace: ns, Name: name},
		Spec:       api.PodSpec{NodeSelector: sel, Containers: []api.Container{{Name: "c", Image: "i"}}},
	}
}

func template(sel map[string]string) api.PodTemplateSpec {
	return api.PodTemplateSpec{Spec: api.PodSpec{NodeSelector: sel, Containers: []api.Container{{Name: "c", Image: "i"}}}}
}

// wantForbidden checks that err is a 403 whose message holds every part.
func wantForbidden(t *testing.T, err error, parts ...string) {
	t.Helper()
	se, ok := err.(*api.StatusError)
	if !ok {
		t.Fatalf("err = %v (%T), want a 403 *api.StatusError", err, err)
	}
	if se.Code() != http.StatusForbidden || se.Status.Reason != api.ReasonForbidden {
		t.Errorf("code %d reason %s, want 403 Forbidden: %s", se.Code(), se.Status.Reason, se.Error())
	}
	for _, p := range parts {
		if !strings.Contains(se.Error(), p) {
			t.Errorf("message %q lacks %q", se.Error(), p)
		}
	}
}

package server

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// SCH-2: a reload reads the policy files again; a bad file is refused
// with its reason and the scheduler keeps its last good policy; a good
// one replaces it. Only admins may reload.
func TestSchedulerPolicyReloadKeepsLastGood(t *testing.T) {
	file := filepath.Join(t.TempDir(), "policy.yaml")
	write := func(text string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`kind: Policy
apiVersion: v1
predicates:
- name: PodFitsResources
priorities:
- name: LeastRequestedPriority
  weight: 1
`)
	cfg := testConfig(t)
	cfg.Schedulers = map[string]string{api.DefaultSchedulerName: file, "second": ""}
	cfg.DisableControllers = true
	s := startServer(t, cfg)
	c := admin(t, s)

	list := decode[SchedulerList](t, c.must(http.StatusOK, "GET", "/apis/outpost.io/v1/schedulers", nil))
	if len(list.Items) != 2 || list.Items[0].Name != api.DefaultSchedulerName || list.Items[1].Name != "second" {
		t.Fatalf("schedulers: %+v", list.Items)
	}
	if p := list.Items[0].Policy; !strings.Contains(p, "PodFitsResources") || strings.Contains(p, "MostRequestedPriority") {
		t.Fatalf("default-scheduler policy:\n%s", p)
	}

	write("kind: Policy\npredicates:\n- name: NoSuchPredicate\n")
	r := c.do("POST", "/apis/outpost.io/v1/schedulers/reload", nil)
	if r.code != http.StatusUnprocessableEntity || !strings.Contains(r.status().Message, "NoSuchPredicate") || !strings.Contains(r.status().Message, "keeps its last good policy") {
		t.Fatalf("reload of a bad file: %d %s", r.code, r.body)
	}
	list = decode[SchedulerList](t, c.must(http.StatusOK, "GET", "/apis/outpost.io/v1/schedulers", nil))
	if d := list.Items[0]; !strings.Contains(d.Policy, "PodFitsResources") || !strings.Contains(d.ReloadError, "NoSuchPredicate") {
		t.Fatalf("after a bad reload: %+v", d)
	}

	write(`{"kind":"Policy","apiVersion":"v1","predicates":[{"name":"PodFitsResources"}],"priorities":[{"name":"MostRequestedPriority","weight":1}]}`)
	if err := s.ReloadSchedulers(); err != nil {
		t.Fatalf("reload of a good file: %v", err)
	}
	list = decode[SchedulerList](t, c.must(http.StatusOK, "GET", "/apis/outpost.io/v1/schedulers", nil))
	if d := list.Items[0]; !strings.Contains(d.Policy, "MostRequestedPriority") || d.ReloadError != "" {
		t.Fatalf("after a good reload: %+v", d)
	}

	dev := addToken(t, c, api.TokenSpec{Role: api.RoleDeveloper, Namespaces: []string{"default"}})
	if r := c.as(dev).do("POST", "/apis/outpost.io/v1/schedulers/reload", nil); r.code != http.StatusForbidden {
		t.Fatalf("developer reload: %d %s", r.code, r.body)
	}
}

// A server refuses to start on a policy file it cannot read.
func TestSchedulerPolicyBadAtStart(t *testing.T) {
	file := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(file, []byte(`{"kind":"Policy","priorities":[{"name":"LeastRequestedPriority","weight":0}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t)
	cfg.Schedulers = map[string]string{api.DefaultSchedulerName: file}
	_, err := Start(t.Context(), cfg)
	if err == nil || !strings.Contains(err.Error(), "weight") {
		t.Fatalf("Start with a bad policy: %v", err)
	}
}

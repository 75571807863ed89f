package scenario

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
)

// The kubectl habits of issue 15 item 6 against a real server and its
// controllers: what the CLI writes passes the API's strict decoding and
// validation, and the controllers act on it.
func TestKubectlHabits(t *testing.T) {
	e := newEnv(t, 1, nil)
	e.node("n1", nil)

	// api-resources reads the server's own discovery documents.
	out, stderr, code := e.outpost("api-resources")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	// Every stored kind, and metrics.k8s.io's nodes and pods.
	if code != 0 || len(lines) != len(api.Resources)+1+2 ||
		!slices.ContainsFunc(lines, func(l string) bool {
			return strings.Join(strings.Fields(l), " ") == "deployments deploy apps/v1 true Deployment"
		}) {
		t.Fatalf("api-resources: code %d\n%s%s", code, out, stderr)
	}

	// create deployment, then set image and rollout restart: each is a
	// new template, which the deployment controller rolls out as a new
	// revision.
	if out, stderr, code := e.outpost("create", "deployment", "web", "--image=registry.local/web:1", "--replicas=2"); code != 0 || out != "deployment.apps/web created\n" {
		t.Fatalf("create deployment: code %d, %q %q", code, out, stderr)
	}
	revisions := func(n int) {
		t.Helper()
		e.waitFor("web's revision "+strconv.Itoa(n), func() bool {
			out, _, _ := e.outpost("get", "all", "-o", "name")
			return strings.Count(out, "replicaset.apps/web-") == n && strings.Contains(out, "deployment.apps/web\n") && strings.Contains(out, "pod/web-")
		}, nil)
	}
	revisions(1)
	if out, stderr, code := e.outpost("set", "image", "deploy/web", "web=registry.local/web:2"); code != 0 || out != "deployment.apps/web image updated\n" {
		t.Fatalf("set image: code %d, %q %q", code, out, stderr)
	}
	revisions(2)
	if out, stderr, code := e.outpost("rollout", "restart", "deployment/web"); code != 0 || out != "deployment.apps/web restarted\n" {
		t.Fatalf("rollout restart: code %d, %q %q", code, out, stderr)
	}
	revisions(3)
	obj, err := e.cl.Get(e.ctx, deploymentsR, "default", "web", client.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d := obj.(*api.Deployment)
	if d.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"] == "" || d.Spec.Template.Spec.Containers[0].Image != "registry.local/web:2" {
		t.Fatalf("deployment template after set image and restart: %+v", d.Spec.Template)
	}

	// run: a pod with the restart policy and command asked for.
	if out, stderr, code := e.outpost("run", "once", "--image=registry.local/busybox", "--restart=Never", "--command", "--", "echo", "hi"); code != 0 || out != "pod/once created\n" {
		t.Fatalf("run: code %d, %q %q", code, out, stderr)
	}
	p := e.waitPod("once", "created", func(*api.Pod) bool { return true })
	if p.Spec.RestartPolicy != "Never" || !slices.Equal(p.Spec.Containers[0].Command, []string{"echo", "hi"}) || p.Labels["run"] != "once" {
		t.Fatalf("run made %+v", p)
	}

	// diff: a manifest of create's dry run differs while absent, not
	// once applied (whatever the server defaulted), again once changed.
	manifest, stderr, code := e.outpost("create", "deployment", "api", "--image=registry.local/api:1", "--replicas=0", "--dry-run=client", "-o", "yaml")
	if code != 0 {
		t.Fatalf("create --dry-run: code %d, %s", code, stderr)
	}
	file := filepath.Join(t.TempDir(), "api.yaml")
	write := func(s string) {
		if err := os.WriteFile(file, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(manifest)
	if out, stderr, code := e.outpost("diff", "-f", file); code != 1 || !strings.Contains(out, "+kind: Deployment\n") {
		t.Fatalf("diff of an absent deployment: code %d\n%s%s", code, out, stderr)
	}
	if _, stderr, code := e.outpost("apply", "-f", file); code != 0 {
		t.Fatalf("apply: %s", stderr)
	}
	if out, stderr, code := e.outpost("diff", "-f", file); code != 0 || out != "" {
		t.Fatalf("diff after apply: code %d\n%s%s", code, out, stderr)
	}
	write(strings.Replace(manifest, "replicas: 0", "replicas: 1", 1))
	if out, stderr, code := e.outpost("diff", "-f", file); code != 1 || !strings.Contains(out, "\n-  replicas: 0\n+  replicas: 1\n") {
		t.Fatalf("diff of a change: code %d\n%s%s", code, out, stderr)
	}

	// wait: the controller reports the applied deployment available.
	if out, stderr, code := e.outpost("wait", "--for=condition=Available", "deployment/api", "--timeout=30s"); code != 0 || out != "deployment.apps/api condition met\n" {
		t.Fatalf("wait: code %d, %q %q", code, out, stderr)
	}
	// No agent runs the pod, so only a forced delete removes it.
	if _, _, code := e.outpost("delete", "pod", "once", "--force", "--wait=false"); code != 0 {
		t.Fatal("delete pod once")
	}
	if out, stderr, code := e.outpost("wait", "--for=delete", "pod/once", "--timeout=30s"); code != 0 || out != "pod/once deleted\n" {
		t.Fatalf("wait --for=delete: code %d, %q %q", code, out, stderr)
	}
}

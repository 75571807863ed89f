package cli

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// Tests of the kubectl habits of issue 15 item 6: get all, api-resources,
// rollout restart, set image, create deployment, run and wait (explain
// and diff have their own files).

var svcR = api.ResourceForKind("Service")

func TestGetAll(t *testing.T) {
	f := newFakeAPI(t)
	seedPods(f)
	f.put(svcR, `{"metadata":{"name":"web","namespace":"default"},"spec":{"type":"ClusterIP","clusterIP":"10.96.0.10","ports":[{"port":80,"protocol":"TCP"}]}}`)
	f.put(deployR, `{"metadata":{"name":"web","namespace":"default"},"spec":{"replicas":1,"selector":{}}}`)
	f.put(rsR, `{"metadata":{"name":"web-1a","namespace":"default"},"spec":{"replicas":1,"selector":{}}}`)
	f.put(nodeR, `{"metadata":{"name":"n1"}}`)
	f.put(tokenR, `{"metadata":{"name":"t1"}}`)

	expect(t, "get all -o name", f.run("get", "all", "-o", "name"), 0,
		"pod/db-0\npod/web-1\nservice/web\ndeployment.apps/web\nreplicaset.apps/web-1a\n", "")
	res := f.run("get", "all")
	if res.code != 0 || !strings.HasPrefix(res.stdout, "NAME        READY") ||
		!strings.Contains(res.stdout, "\npod/web-1   1/1") || !strings.Contains(res.stdout, "\nservice/web   ClusterIP") ||
		!strings.Contains(res.stdout, "\ndeployment.apps/web   ") || !strings.Contains(res.stdout, "\nreplicaset.apps/web-1a   ") ||
		strings.Contains(res.stdout, "node") || strings.Contains(res.stdout, "token") {
		t.Errorf("get all: code %d\n%s%s\nwant a table per workload type with kind/name, no nodes or tokens", res.code, res.stdout, res.stderr)
	}
	// Every type of the category was listed in the namespace, daemon sets
	// too.
	for _, p := range []string{"/api/v1/namespaces/default/pods?", "/api/v1/namespaces/default/services?",
		"/apis/apps/v1/namespaces/default/daemonsets?", "/apis/apps/v1/namespaces/default/deployments?", "/apis/apps/v1/namespaces/default/replicasets?"} {
		if !f.sawRequest("GET " + p) {
			t.Errorf("get all did not list %s", p)
		}
	}
	expect(t, "get all empty", f.run("get", "all", "-n", "void"), 0, "", "No resources found in void namespace.\n")
	expect(t, "get all,nodes", f.run("get", "all,nodes", "-n", "team", "-o", "name"), 0, "pod/other\nnode/n1\n", "")
	expect(t, "all is not a type of TYPE/NAME", f.run("get", "all/x"), 1, "", "error: the server doesn't have a resource type \"all\"\n")
}

// withDiscovery makes f serve the discovery documents of the Resource
// table as the API server does (/api/v1, /apis, /apis/GROUP/VERSION),
// with one subresource to show it is left out.
func withDiscovery(f *fakeAPI) {
	type res struct {
		Name       string   `json:"name"`
		Namespaced bool     `json:"namespaced"`
		Kind       string   `json:"kind"`
		Verbs      []string `json:"verbs"`
		ShortNames []string `json:"shortNames,omitempty"`
	}
	lists := map[string][]res{}
	var groups []map[string]any
	for _, r := range api.Resources {
		path := "/apis/" + r.APIVersion()
		if r.Group == "" {
			path = "/api/v1"
		} else if _, ok := lists[path]; !ok {
			gv := map[string]string{"groupVersion": r.APIVersion(), "version": r.Version}
			groups = append(groups, map[string]any{"name": r.Group, "versions": []any{gv}, "preferredVersion": gv})
		}
		lists[path] = append(lists[path], res{Name: r.Plural, Namespaced: r.Namespaced, Kind: r.Kind, Verbs: []string{"create", "delete", "get", "list", "update", "watch"}, ShortNames: r.ShortNames})
		if r.HasStatus {
			lists[path] = append(lists[path], res{Name: r.Plural + "/status", Namespaced: r.Namespaced, Kind: r.Kind, Verbs: []string{"get", "update"}})
		}
	}
	f.route(func(p string) bool { _, ok := lists[p]; return ok || p == "/apis" }, func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/apis" {
			writeJSON(w, 200, map[string]any{"kind": "APIGroupList", "groups": groups})
			return
		}
		writeJSON(w, 200, map[string]any{"kind": "APIResourceList", "resources": lists[req.URL.Path]})
	})
}

func TestAPIResources(t *testing.T) {
	f := newFakeAPI(t)
	withDiscovery(f)
	res := f.run("api-resources")
	lines := strings.Split(strings.TrimSuffix(res.stdout, "\n"), "\n")
	if res.code != 0 || len(lines) != len(api.Resources)+1 {
		t.Fatalf("api-resources: code %d, %d lines, want %d:\n%s%s", res.code, len(lines), len(api.Resources)+1, res.stdout, res.stderr)
	}
	fields := func(l string) string { return strings.Join(strings.Fields(l), " ") }
	if got := fields(lines[0]); got != "NAME SHORTNAMES APIVERSION NAMESPACED KIND" {
		t.Errorf("header %q", got)
	}
	for _, want := range []string{"pods po v1 true Pod", "nodes no v1 false Node", "deployments deploy apps/v1 true Deployment",
		"poddisruptionbudgets pdb policy/v1 true PodDisruptionBudget", "tokens outpost.io/v1 false Token"} {
		if !slices.ContainsFunc(lines, func(l string) bool { return fields(l) == want }) {
			t.Errorf("no line %q in\n%s", want, res.stdout)
		}
	}
	if strings.Contains(res.stdout, "/status") {
		t.Errorf("subresources listed:\n%s", res.stdout)
	}
	// Columns line up: APIVERSION starts at the same offset on every line.
	col := strings.Index(lines[0], "APIVERSION")
	if i := strings.Index(lines[1], "v1"); i != col {
		t.Errorf("APIVERSION column at %d, header at %d:\n%s", i, col, res.stdout)
	}

	expect(t, "cluster-scoped apps", f.run("api-resources", "--namespaced=false", "--api-group=apps"), 0, "NAME   SHORTNAMES   APIVERSION   NAMESPACED   KIND\n", "")
	expect(t, "apps -o name", f.run("api-resources", "--api-group=apps", "-o", "name"), 0, "replicasets.apps\ndeployments.apps\ndaemonsets.apps\n", "")
	expect(t, "core namespaced sorted", f.run("api-resources", "--api-group=", "--namespaced=true", "--sort-by=name", "--no-headers", "-o", "wide"), 0,
		"events     ev    v1   true   Event     [create delete get list update watch]\n"+
			"pods       po    v1   true   Pod       [create delete get list update watch]\n"+
			"services   svc   v1   true   Service   [create delete get list update watch]\n", "")
	// --namespaced is a bool as kubectl's (issue 15 review item 8).
	res = f.run("api-resources", "--namespaced", "--no-headers", "-o", "name")
	if res.code != 0 || !strings.Contains(res.stdout, "pods\n") || strings.Contains(res.stdout, "nodes\n") {
		t.Errorf("--namespaced alone: code %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	res = f.run("api-resources", "--namespaced=false", "-o", "name")
	if res.code != 0 || strings.Contains(res.stdout, "pods\n") || !strings.Contains(res.stdout, "nodes\n") {
		t.Errorf("--namespaced=false: code %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if res = f.run("api-resources", "--help"); !strings.Contains(res.stdout, "      --namespaced ") || strings.Contains(res.stdout, `(default "true")`) {
		t.Errorf("help shows --namespaced as a string flag:\n%s", res.stdout)
	}
	expect(t, "bad -o", f.run("api-resources", "-o", "yaml"), 1, "",
		"error: --output \"yaml\" is not supported by api-resources: use wide or name\nSee 'outpost api-resources --help' for usage.\n")
}

// route makes f answer the requests whose path match accepts with h,
// recording them as f records its own; others go to f as before.
func (f *fakeAPI) route(match func(path string) bool, h http.HandlerFunc) {
	next := f.srv.Config.Handler
	f.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !match(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		f.mu.Lock()
		f.requests = append(f.requests, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery)
		f.mu.Unlock()
		h(w, r)
	})
}

// expectNoWrites is expect for a run that must write nothing.
func (f *fakeAPI) expectNoWrites(t *testing.T, what string, args []string, code int, stdout, stderr string) {
	t.Helper()
	writes := f.writeCount()
	expect(t, what, f.run(args...), code, stdout, stderr)
	if f.writeCount() != writes {
		t.Errorf("%s wrote", what)
	}
}

func TestRolloutRestart(t *testing.T) {
	f := newFakeAPI(t)
	f.put(deployR, `{"metadata":{"name":"web","namespace":"default"},"spec":{"replicas":2,"selector":{},"template":{"metadata":{"labels":{"app":"web"},"annotations":{"keep":"me"}},"spec":{"containers":[{"name":"web","image":"web:1"}]}}}}`)
	f.put(dsR, `{"metadata":{"name":"agent","namespace":"default"},"spec":{"selector":{},"template":{"spec":{"containers":[{"name":"a","image":"a:1"}]}}}}`)
	f.put(deployR, `{"metadata":{"name":"held","namespace":"default"},"spec":{"paused":true,"selector":{},"template":{}}}`)

	expect(t, "restart", f.run("rollout", "restart", "deployment/web", "ds/agent"), 0,
		"deployment.apps/web restarted\ndaemonset.apps/agent restarted\n", "")
	want := testNow.UTC().Format("2006-01-02T15:04:05Z07:00")
	ann := nestedMap(f.get(deployR, "default", "web"), "spec", "template", "metadata", "annotations")
	if ann[restartedAtAnnotation] != want || ann["keep"] != "me" {
		t.Errorf("deployment template annotations %v, want %s=%s and the others kept", ann, restartedAtAnnotation, want)
	}
	if got := nestedMap(f.get(dsR, "default", "agent"), "spec", "template", "metadata", "annotations")[restartedAtAnnotation]; got != want {
		t.Errorf("daemon set restartedAt %v, want %s", got, want)
	}
	f.expectNoWrites(t, "paused", []string{"rollout", "restart", "deployment/held"}, 1, "",
		"error: deployment.apps/held: can't restart paused deployment (run rollout resume first)\n")
	expect(t, "pods", f.run("rollout", "restart", "pod/x"), 1, "",
		"error: rollout restart is not available for pods\nSee 'outpost rollout restart --help' for usage.\n")
	expect(t, "missing", f.run("rollout", "restart", "deploy", "nope"), 1, "",
		"Error from server (NotFound): deployments.apps \"nope\" not found\n")
}

func TestSetImage(t *testing.T) {
	f := newFakeAPI(t)
	f.put(deployR, `{"metadata":{"name":"web","namespace":"default","labels":{"app":"web"}},"spec":{"selector":{},"template":{"spec":{"initContainers":[{"name":"init","image":"init:1"}],"containers":[{"name":"web","image":"web:1"},{"name":"proxy","image":"proxy:1"}]}}}}`)
	f.put(podR, `{"metadata":{"name":"debug","namespace":"default"},"spec":{"containers":[{"name":"main","image":"busybox:1"}]}}`)
	images := func(obj map[string]any, path ...string) string {
		var out []string
		for _, list := range []string{"initContainers", "containers"} {
			cs, _ := nestedMap(obj, path...)[list].([]any)
			for _, c := range cs {
				m := c.(map[string]any)
				out = append(out, m["name"].(string)+"="+m["image"].(string))
			}
		}
		return strings.Join(out, " ")
	}

	expect(t, "two containers", f.run("set", "image", "deployment/web", "web=web:2", "init=init:2"), 0, "deployment.apps/web image updated\n", "")
	if got := images(f.get(deployR, "default", "web"), "spec", "template", "spec"); got != "init=init:2 web=web:2 proxy=proxy:1" {
		t.Errorf("images %s", got)
	}
	f.expectNoWrites(t, "same image", []string{"set", "image", "deploy", "web", "web=web:2"}, 0, "deployment.apps/web image unchanged\n", "")
	expect(t, "star by selector", f.run("set", "image", "deployments", "-l", "app=web", "*=all:3"), 0, "deployment.apps/web image updated\n", "")
	if got := images(f.get(deployR, "default", "web"), "spec", "template", "spec"); got != "init=all:3 web=all:3 proxy=all:3" {
		t.Errorf("images after *= %s", got)
	}
	expect(t, "pod", f.run("set", "image", "pod/debug", "main=busybox:2"), 0, "pod/debug image updated\n", "")
	if got := images(f.get(podR, "default", "debug"), "spec"); got != "main=busybox:2" {
		t.Errorf("pod images %s", got)
	}
	f.expectNoWrites(t, "unknown container", []string{"set", "image", "deployment/web", "web=x:1", "nope=x:1", "gone=x:1"}, 1, "",
		"error: deployment.apps/web: unable to find container named \"nope\", \"gone\"\n")
	// The server's error as it is, naming the object once (issue 15
	// review item 9).
	f.expectNoWrites(t, "missing", []string{"set", "image", "deploy/nosuch", "web=x"}, 1, "",
		"Error from server (NotFound): deployments.apps \"nosuch\" not found\n")
	expect(t, "no pairs", f.run("set", "image", "deployment/web"), 1, "",
		"error: expected an object and at least one CONTAINER=IMAGE, e.g. `outpost set image deployment/web web=web:1.2`\nSee 'outpost set image --help' for usage.\n")
	expect(t, "services", f.run("set", "image", "svc/web", "a=b"), 1, "",
		"error: set image is not available for services: it changes pods, deployments, daemon sets and replica sets\nSee 'outpost set image --help' for usage.\n")
	expect(t, "unknown set subcommand", f.run("set", "env", "deployment/web"), 1, "",
		"error: unknown command \"env\" for \"outpost set\"\nSee 'outpost set --help' for usage.\n")
}

func TestCreateDeployment(t *testing.T) {
	f := newFakeAPI(t)
	expect(t, "create", f.run("create", "deployment", "web", "--image=registry.local:5000/team/web-app:1.2", "--replicas=3", "--port=8080", "-n", "shop"), 0,
		"deployment.apps/web created\n", "")
	d := f.get(deployR, "shop", "web")
	if d == nil {
		t.Fatal("no deployment created")
	}
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": nestedMap(d, "metadata", "labels")}, "spec": d["spec"]})
	want := `{"metadata":{"labels":{"app":"web"}},"spec":{"replicas":3,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"image":"registry.local:5000/team/web-app:1.2","name":"web-app","ports":[{"containerPort":8080}]}]}}}}`
	if string(b) != want {
		t.Errorf("created\n%s\nwant\n%s", b, want)
	}
	writes := f.writeCount()
	expect(t, "dry run", f.run("create", "deploy", "api", "--image=api:1", "--image=busybox@sha256:abc", "--dry-run=client", "-o", "yaml"), 0, `apiVersion: apps/v1
kind: Deployment
metadata:
  labels:
    app: api
  name: api
spec:
  replicas: 1
  selector:
    matchLabels:
      app: api
  template:
    metadata:
      labels:
        app: api
    spec:
      containers:
      - image: api:1
        name: api
      - image: busybox@sha256:abc
        name: busybox
`, "")
	expect(t, "dry run plain", f.run("create", "deployment", "api", "--image=api:1", "--dry-run"), 0, "deployment.apps/api created (dry run)\n", "")
	if f.writeCount() != writes {
		t.Error("--dry-run=client wrote")
	}
	expect(t, "exists", f.run("create", "deployment", "web", "--image=x", "-n", "shop"), 1, "",
		"Error from server (AlreadyExists): deployments.apps \"web\" already exists\n")
	expect(t, "no image", f.run("create", "deployment", "web"), 1, "",
		"error: --image is required: the image of the deployment's container\nSee 'outpost create deployment --help' for usage.\n")
	expect(t, "server dry run", f.run("create", "deployment", "x", "--image=x", "--dry-run=server"), 1, "",
		"error: --dry-run=server is not supported: outpost's API has no server-side dry run; use --dry-run=client\nSee 'outpost create deployment --help' for usage.\n")
	res := f.run("create", "deployment", "json", "--image=x:1", "-o", "json")
	if res.code != 0 || !strings.Contains(res.stdout, `"uid": "uid-json"`) || !strings.Contains(res.stdout, `"kind": "Deployment"`) {
		t.Errorf("create -o json prints the stored object: code %d\n%s%s", res.code, res.stdout, res.stderr)
	}
}

func TestContainerNameFor(t *testing.T) {
	for img, want := range map[string]string{
		"nginx": "nginx", "nginx:1.27": "nginx", "registry.local:5000/team/Web_App:1": "web-app",
		"busybox@sha256:0123": "busybox", "ghcr.io/x/y.z:latest": "y-z", ":": "app",
	} {
		if got := containerNameFor(img); got != want {
			t.Errorf("containerNameFor(%q) = %q, want %q", img, got, want)
		}
	}
}

func TestRun(t *testing.T) {
	f := newFakeAPI(t)
	expect(t, "run", f.run("run", "web", "--image=web:1", "--port=80", "--env=MODE=test", "--env=EMPTY=", "--labels=app=web,tier=front", "--", "--verbose", "-x"), 0,
		"pod/web created\n", "")
	p := f.get(podR, "default", "web")
	b, _ := json.Marshal(map[string]any{"labels": nestedMap(p, "metadata", "labels"), "containers": nestedMap(p, "spec")["containers"], "restartPolicy": nestedMap(p, "spec")["restartPolicy"]})
	want := `{"containers":[{"args":["--verbose","-x"],"env":[{"name":"MODE","value":"test"},{"name":"EMPTY","value":""}],"image":"web:1","imagePullPolicy":"IfNotPresent","name":"web","ports":[{"containerPort":80}]}],"labels":{"app":"web","tier":"front"},"restartPolicy":"Always"}`
	if string(b) != want {
		t.Errorf("pod\n%s\nwant\n%s", b, want)
	}
	expect(t, "command, Never, dry run", f.run("run", "once", "--image=busybox", "--restart=Never", "--command", "--dry-run=client", "-o", "json", "-n", "team", "--", "sh", "-c", "echo hi"), 0, `{
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "labels": {
            "run": "once"
        },
        "name": "once",
        "namespace": "team"
    },
    "spec": {
        "containers": [
            {
                "command": [
                    "sh",
                    "-c",
                    "echo hi"
                ],
                "image": "busybox",
                "name": "once"
            }
        ],
        "restartPolicy": "Never"
    }
}
`, "")
	if f.get(podR, "team", "once") != nil {
		t.Error("run --dry-run=client created the pod")
	}
	expect(t, "-it", f.run("run", "sh", "--image=busybox", "-it", "--rm"), 1, "",
		"error: outpost run does not attach to the pod (no -i, -t, --attach or --rm): run it, then follow it with `outpost logs -f POD`\nSee 'outpost run --help' for usage.\n")
	expect(t, "bad restart", f.run("run", "x", "--image=x", "--restart=Sometimes"), 1, "",
		"error: invalid --restart \"Sometimes\": use Always, OnFailure or Never\nSee 'outpost run --help' for usage.\n")
	expect(t, "args without --", f.run("run", "x", "--image=x", "echo"), 1, "",
		"error: expected one NAME, then -- before the container's arguments\nSee 'outpost run --help' for usage.\n")
	expect(t, "bad env", f.run("run", "x", "--image=x", "--env=NOVALUE"), 1, "",
		"error: invalid --env \"NOVALUE\": use NAME=VALUE\nSee 'outpost run --help' for usage.\n")
}

func TestWait(t *testing.T) {
	f := newFakeAPI(t)
	close(f.watchHold) // watches end after their first batch; wait watches again
	ready := `{"metadata":{"name":"web","namespace":"default","labels":{"app":"web"}},"spec":{"containers":[{"name":"c"}]},"status":{"conditions":[{"type":"Ready","status":"True"}]}}`
	notReady := `{"metadata":{"name":"db","namespace":"default","labels":{"app":"db"}},"spec":{"containers":[{"name":"c"}]},"status":{"conditions":[{"type":"Ready","status":"False"}]}}`
	f.put(podR, ready)
	f.put(podR, notReady)
	f.put(deployR, `{"metadata":{"name":"web","namespace":"default"},"spec":{"selector":{}},"status":{"conditions":[{"type":"Available","status":"True"}]}}`)

	expect(t, "ready", f.run("wait", "--for=condition=Ready", "pod/web"), 0, "pod/web condition met\n", "")
	expect(t, "case and value", f.run("wait", "--for=condition=ready=false", "pods", "db"), 0, "pod/db condition met\n", "")
	expect(t, "deployment", f.run("wait", "--for=condition=Available", "deploy/web"), 0, "deployment.apps/web condition met\n", "")
	expect(t, "times out", f.run("wait", "--for=condition=Ready", "pod/db", "--timeout=300ms"), 1, "",
		"error: timed out waiting for the condition on pods/db\n")
	expect(t, "timeout 0 checks once", f.run("wait", "--for=condition=Ready", "pod/db", "--timeout=0"), 1, "",
		"error: timed out waiting for the condition on pods/db\n")
	// Every object is waited for, within one deadline.
	expect(t, "several, one times out", f.run("wait", "--for=condition=Ready", "pod/web", "pod/db", "pod/nope", "--timeout=300ms"), 1, "pod/web condition met\n",
		"error: timed out waiting for the condition on pods/db\nerror: timed out waiting for the condition on pods/nope\n")

	// The condition comes true while wait watches.
	f.beforeWatch = func() {
		f.beforeWatch = nil
		f.put(podR, strings.Replace(notReady, `"status":"False"`, `"status":"True"`, 1))
	}
	expect(t, "becomes ready", f.run("wait", "--for=condition=Ready", "pods", "-l", "app=db", "--timeout=10s"), 0, "pod/db condition met\n", "")

	// Deletion: gone at once, or while waiting.
	expect(t, "already gone", f.run("wait", "--for=delete", "pod/nope"), 0, "pod/nope deleted\n", "")
	f.beforeWatch = func() {
		f.beforeWatch = nil
		f.mu.Lock()
		delete(f.objs, key(podR, "default", "web"))
		f.mu.Unlock()
	}
	expect(t, "deleted while waiting", f.run("wait", "--for=delete", "pod/web", "--timeout=10s"), 0, "pod/web deleted\n", "")

	expect(t, "missing", f.run("wait", "--for=condition=Ready", "pod/nope"), 1, "", "Error from server (NotFound): pods \"nope\" not found\n")
	expect(t, "no match", f.run("wait", "--for=condition=Ready", "pods", "-l", "app=none"), 1, "",
		"No resources found in default namespace.\nerror: no matching resources found\n")
	expect(t, "no --for", f.run("wait", "pod/db"), 1, "", "error: --for is required: condition=NAME[=VALUE], jsonpath='{PATH}'[=VALUE], create or delete\nSee 'outpost wait --help' for usage.\n")

	// --for=jsonpath as kubectl's: a value to print as, or any value.
	f.put(podR, `{"metadata":{"name":"job","namespace":"default"},"spec":{"containers":[{"name":"c"}]},"status":{"phase":"Running","containerStatuses":[{"name":"c","restartCount":2}]}}`)
	expect(t, "jsonpath value", f.run("wait", "--for=jsonpath={.status.phase}=Running", "pod/job"), 0, "pod/job condition met\n", "")
	expect(t, "jsonpath bare", f.run("wait", "--for=jsonpath=.status.containerStatuses[0].restartCount=2", "pod/job"), 0, "pod/job condition met\n", "")
	expect(t, "jsonpath exists", f.run("wait", "--for=jsonpath={.status.phase}", "pod/job"), 0, "pod/job condition met\n", "")
	expect(t, "jsonpath other value", f.run("wait", "--for=jsonpath={.status.phase}=Succeeded", "pod/job", "--timeout=0"), 1, "",
		"error: timed out waiting for the condition on pods/job\n")
	expect(t, "jsonpath absent", f.run("wait", "--for=jsonpath={.status.podIP}", "pod/job", "--timeout=0"), 1, "",
		"error: timed out waiting for the condition on pods/job\n")
	f.beforeWatch = func() {
		f.beforeWatch = nil
		f.put(podR, strings.Replace(notReady, `"status":{`, `"status":{"phase":"Succeeded",`, 1))
	}
	expect(t, "jsonpath while watching", f.run("wait", "--for=jsonpath={.status.phase}=Succeeded", "pod/db", "--timeout=10s"), 0, "pod/db condition met\n", "")
	expect(t, "jsonpath bad", f.run("wait", "--for=jsonpath={.status.phase", "pod/job"), 1, "",
		"error: --for=jsonpath={.status.phase: unclosed action (no closing })\nSee 'outpost wait --help' for usage.\n")
	expect(t, "jsonpath junk after", f.run("wait", "--for=jsonpath={.status.phase}Running", "pod/job"), 1, "",
		"error: --for=jsonpath={.status.phase}Running: want '{PATH}' or '{PATH}=VALUE'\nSee 'outpost wait --help' for usage.\n")
}

// TestWaitWatchHeld waits on watches the server keeps open, as the real
// server's are, until the deadline passes or the object is deleted.
// Before the fix a timeout panicked (the watch's error was lost and a nil
// object judged) and a deletion printed a JSON error (issue 15 review 1).
func TestWaitWatchHeld(t *testing.T) {
	f := newFakeAPI(t) // watchHold stays open: watches end only with the client
	f.put(podR, `{"metadata":{"name":"once","namespace":"default"},"spec":{"containers":[{"name":"c"}]},"status":{"phase":"Succeeded","conditions":[{"type":"Ready","status":"False"}]}}`)
	f.put(deployR, `{"metadata":{"name":"web","namespace":"default"},"spec":{"selector":{}},"status":{"conditions":[{"type":"Available","status":"False"}]}}`)
	timedOut := func(what string) string { return "error: timed out waiting for the condition on " + what + "\n" }
	expect(t, "jsonpath pod", f.run("wait", "--for=jsonpath={.status.phase}=Pending", "pod/once", "--timeout=150ms"), 1, "", timedOut("pods/once"))
	expect(t, "jsonpath deployment", f.run("wait", "--for=jsonpath={.status.readyReplicas}", "deploy/web", "--timeout=150ms"), 1, "", timedOut("deployments/web"))
	expect(t, "condition pod", f.run("wait", "--for=condition=Ready", "pod/once", "--timeout=150ms"), 1, "", timedOut("pods/once"))
	expect(t, "condition deployment", f.run("wait", "--for=condition=Available", "deploy/web", "--timeout=150ms"), 1, "", timedOut("deployments/web"))

	// Deleted while wait watches: the server's DELETED event.
	f.put(podR, `{"metadata":{"name":"victim","namespace":"default"},"spec":{"containers":[{"name":"c"}]},"status":{"conditions":[{"type":"Ready","status":"True"}]}}`)
	victim := f.get(podR, "default", "victim")
	f.beforeWatch = func() {
		f.beforeWatch = nil
		f.mu.Lock()
		delete(f.objs, key(podR, "default", "victim"))
		f.watchEvents = []map[string]any{{"type": "DELETED", "object": victim}}
		f.mu.Unlock()
	}
	expect(t, "deleted event", f.run("wait", "--for=condition=Ready=False", "pod/victim", "--timeout=10s"), 1, "",
		"error: pod/victim was deleted while waiting for its condition\n")

	// Deleted while no watch was open: the watch ends, and the object read
	// again is gone.
	f.put(podR, `{"metadata":{"name":"victim","namespace":"default"},"spec":{"containers":[{"name":"c"}]},"status":{"conditions":[{"type":"Ready","status":"True"}]}}`)
	f.beforeWatch = func() {
		f.beforeWatch = nil
		f.mu.Lock()
		delete(f.objs, key(podR, "default", "victim"))
		close(f.watchHold)
		f.mu.Unlock()
	}
	expect(t, "gone when read again", f.run("wait", "--for=condition=Ready=False", "pod/victim", "--timeout=10s"), 1, "",
		"error: pod/victim was deleted while waiting for its condition\n")
}

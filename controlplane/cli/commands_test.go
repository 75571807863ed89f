package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/auth"
	"github.com/outpost-edge/outpost/controlplane/client"
	"github.com/outpost-edge/outpost/testing/syncbuf"
)

var (
	podR    = api.ResourceForKind("Pod")
	nodeR   = api.ResourceForKind("Node")
	deployR = api.ResourceForKind("Deployment")
	tokenR  = api.ResourceForKind("Token")
	eventR  = api.ResourceForKind("Event")
)

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func expect(t *testing.T, what string, res result, code int, stdout, stderr string) {
	t.Helper()
	if res.code != code || res.stdout != stdout || res.stderr != stderr {
		t.Errorf("%s:\n code %d, want %d\n stdout %q\n   want %q\n stderr %q\n   want %q", what, res.code, code, res.stdout, stdout, res.stderr, stderr)
	}
}

const webManifest = `apiVersion: v1
kind: Namespace
metadata:
  name: shop
---
# the web pod
apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: shop
  labels:
    app: web
spec:
  containers:
  - name: web
    image: nginx:1.27
    ports:
    - containerPort: 80
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
  namespace: shop
spec:
  replicas: 2
  selector:
    matchLabels: {app: api}
  template:
    metadata:
      labels: {app: api}
    spec:
      containers:
      - name: api
        image: api:1
`

func TestApplyIsIdempotent(t *testing.T) {
	f := newFakeAPI(t)
	dir := t.TempDir()
	file := writeFile(t, dir, "web.yaml", webManifest)

	expect(t, "first apply", f.run("apply", "-f", file), 0,
		"namespace/shop created\npod/web created\ndeployment.apps/api created\n", "")
	if f.writeCount() != 3 {
		t.Fatalf("first apply wrote %d times, want 3", f.writeCount())
	}
	pod := f.get(podR, "shop", "web")
	ann := pod["metadata"].(map[string]any)["annotations"].(map[string]any)
	if _, ok := ann[LastAppliedAnnotation]; !ok {
		t.Error("created object lacks the last-applied annotation")
	}

	// The fake server defaulted the pod and added a toleration; applying
	// the same manifest must still see nothing to do and write nothing.
	expect(t, "second apply", f.run("apply", "-f", file), 0,
		"namespace/shop unchanged\npod/web unchanged\ndeployment.apps/api unchanged\n", "")
	if f.writeCount() != 3 {
		t.Errorf("an unchanged apply wrote %d times", f.writeCount()-3)
	}

	// A controller labels the pod and the agent reports status; then the
	// user changes the image and drops the app label.
	stored := f.get(podR, "shop", "web")
	f.mu.Lock()
	stored["metadata"].(map[string]any)["labels"].(map[string]any)["pod-template-hash"] = "abc"
	stored["status"] = map[string]any{"phase": "Running", "podIP": "10.1.0.9"}
	f.mu.Unlock()
	changed := strings.Replace(strings.Replace(webManifest, "nginx:1.27", "nginx:1.28", 1), "  labels:\n    app: web\n", "", 1)
	writeFile(t, dir, "web.yaml", changed)
	expect(t, "apply of a change", f.run("apply", "-f", file), 0,
		"namespace/shop unchanged\npod/web configured\ndeployment.apps/api unchanged\n", "")
	pod = f.get(podR, "shop", "web")
	spec := pod["spec"].(map[string]any)
	if img := spec["containers"].([]any)[0].(map[string]any)["image"]; img != "nginx:1.28" {
		t.Errorf("image %v after apply, want nginx:1.28", img)
	}
	if _, ok := spec["tolerations"]; !ok {
		t.Error("apply removed the toleration admission added")
	}
	labels := pod["metadata"].(map[string]any)["labels"].(map[string]any)
	if _, ok := labels["app"]; ok || labels["pod-template-hash"] != "abc" {
		t.Errorf("labels after apply %v: want app removed and the controller's label kept", labels)
	}
	if pod["status"].(map[string]any)["podIP"] != "10.1.0.9" {
		t.Error("apply changed the status")
	}
	if !f.sawRequest("GET /api/v1/namespaces/shop/pods/web?consistent=true") {
		t.Error("apply did not read the object with consistent=true")
	}
}

func TestApplyRetriesConflicts(t *testing.T) {
	f := newFakeAPI(t)
	dir := t.TempDir()
	file := writeFile(t, dir, "p.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: a}]}\n")
	expect(t, "create", f.run("apply", "-f", file), 0, "pod/p created\n", "")
	writeFile(t, dir, "p.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: b}]}\n")
	f.mu.Lock()
	f.conflicts = 2
	f.mu.Unlock()
	expect(t, "apply racing other writers", f.run("apply", "-f", file), 0, "pod/p configured\n", "")
	if img := f.get(podR, "default", "p")["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["image"]; img != "b" {
		t.Errorf("image %v, want b", img)
	}
}

func TestApplyReportsEveryFailure(t *testing.T) {
	f := newFakeAPI(t)
	dir := t.TempDir()
	writeFile(t, dir, "a/1.yaml", "apiVersion: v1\nkind: Gadget\nmetadata: {name: g}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: ok}\n")
	writeFile(t, dir, "a/2.json", `{"apiVersion":"apps/v2","kind":"Deployment","metadata":{"name":"d"}}`)
	writeFile(t, dir, "a/sub/3.yaml", "apiVersion: v1\nkind: Namespace\nmetadata: {name: deep}\n")
	writeFile(t, dir, "a/notes.txt", "not a manifest")
	writeFile(t, dir, "b.yaml", "apiVersion: v1\nkind: Namespace\nmetadata: {name: x, namespace: y}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: other}\nspec: {containers: [{name: c}]}\n")

	res := f.run("apply", "-f", filepath.Join(dir, "a"), "-f", filepath.Join(dir, "b.yaml"), "-n", "mine")
	if res.code != 1 {
		t.Errorf("exit code %d, want 1", res.code)
	}
	if res.stdout != "namespace/ok created\nnamespace/x created\n" {
		t.Errorf("stdout %q: the valid documents should still be applied, the subdirectory skipped without -R", res.stdout)
	}
	for _, want := range []string{
		`error: error validating "` + filepath.Join(dir, "a/1.yaml") + `": no matches for kind "Gadget" in version "v1"`,
		`no matches for kind "Deployment" in version "apps/v2"`,
		`error: error when applying pod/p from "` + filepath.Join(dir, "b.yaml") + `": the namespace from the provided object "other" does not match the namespace "mine"`,
	} {
		if !strings.Contains(res.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, res.stderr)
		}
	}

	res = f.run("apply", "-R", "-f", filepath.Join(dir, "a"))
	if !strings.Contains(res.stdout, "namespace/deep created") {
		t.Errorf("-R did not descend: %q", res.stdout)
	}
}

func TestApplyFromStdinAndServerErrors(t *testing.T) {
	f := newFakeAPI(t)
	f.warnings = []string{"spec.foo: accepted but not acted on by outpost"}
	res := runCLI(t, context.Background(), "apiVersion: v1\nkind: Namespace\nmetadata: {name: s}\n", "--server", f.srv.URL, "--insecure", "apply", "-f", "-")
	expect(t, "apply -f -", res, 0, "namespace/s created\n", "Warning: spec.foo: accepted but not acted on by outpost\n")

	res = runCLI(t, context.Background(), "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n", "--server", f.srv.URL, "--insecure", "create", "-f", "-")
	expect(t, "create -f -", res, 0, "pod/p created\n", "Warning: spec.foo: accepted but not acted on by outpost\n")
}

func TestCreate(t *testing.T) {
	f := newFakeAPI(t)
	dir := t.TempDir()
	file := writeFile(t, dir, "p.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: a}]}\n---\napiVersion: v1\nkind: Pod\nmetadata: {generateName: job-}\nspec: {containers: [{name: c, image: a}]}\n")
	expect(t, "create", f.run("create", "-f", file), 0, "pod/p created\npod/job-abcde created\n", "")
	if ann := f.get(podR, "default", "p")["metadata"].(map[string]any)["annotations"]; ann != nil {
		t.Errorf("create added annotations %v; only apply records the last-applied manifest", ann)
	}
	res := f.run("create", "-f", file)
	if res.code != 1 || !strings.Contains(res.stderr, `Error from server (AlreadyExists): error when creating "`+file+`": pods "p" already exists`) {
		t.Errorf("second create: %+v", res)
	}
	expect(t, "create namespace", f.run("create", "namespace", "edge"), 0, "namespace/edge created\n", "")
	expect(t, "create ns again", f.run("create", "ns", "edge"), 1, "", "Error from server (AlreadyExists): namespaces \"edge\" already exists\n")
	expect(t, "create without -f", f.run("create"), 1, "", "error: must specify one of -f\nSee 'outpost create --help' for usage.\n")
}

func seedPods(f *fakeAPI) {
	f.put(podR, `{"metadata":{"name":"web-1","namespace":"default","labels":{"app":"web"}},"spec":{"nodeName":"n1","containers":[{"name":"c"}]},"status":{"phase":"Running","containerStatuses":[{"name":"c","ready":true,"restartCount":0}]}}`)
	f.put(podR, `{"metadata":{"name":"db-0","namespace":"default","labels":{"app":"db"}},"spec":{"containers":[{"name":"c"}]},"status":{"phase":"Pending"},"futureField":{"x":1}}`)
	f.put(podR, `{"metadata":{"name":"other","namespace":"team"},"spec":{"containers":[{"name":"c"}]},"status":{"phase":"Running"}}`)
}

func TestGet(t *testing.T) {
	f := newFakeAPI(t)
	seedPods(f)
	f.put(nodeR, `{"metadata":{"name":"n1"},"status":{"conditions":[{"type":"Ready","status":"True"}]}}`)

	expect(t, "get pods", f.run("get", "pods"), 0,
		"NAME    READY   STATUS    RESTARTS   AGE\ndb-0    0/1     Pending   0          120m\nweb-1   1/1     Running   0          120m\n", "")
	expect(t, "get pods -A", f.run("get", "po", "-A"), 0,
		"NAMESPACE   NAME    READY   STATUS    RESTARTS   AGE\ndefault     db-0    0/1     Pending   0          120m\ndefault     web-1   1/1     Running   0          120m\nteam        other   0/1     Running   0          120m\n", "")
	expect(t, "get -l", f.run("get", "pods", "-l", "app=web", "-o", "name"), 0, "pod/web-1\n", "")
	if !f.sawRequest("GET /api/v1/namespaces/default/pods?labelSelector=app%3Dweb") {
		t.Error("-l was not sent as labelSelector")
	}
	expect(t, "get -n", f.run("get", "pods", "-n", "team", "-o", "name"), 0, "pod/other\n", "")
	expect(t, "get empty", f.run("get", "pods", "-n", "void"), 0, "", "No resources found in void namespace.\n")
	expect(t, "get nodes empty selector", f.run("get", "nodes", "-l", "x=y"), 0, "", "No resources found\n")
	expect(t, "get two types", f.run("get", "pods,nodes", "-n", "team"), 0,
		"NAME        READY   STATUS    RESTARTS   AGE\npod/other   0/1     Running   0          120m\n\nNAME      STATUS   ROLES    AGE    VERSION\nnode/n1   Ready    <none>   120m   <none>\n", "")

	res := f.run("get", "pod", "db-0", "-o", "json")
	var obj map[string]any
	if err := json.Unmarshal([]byte(res.stdout), &obj); err != nil || res.code != 0 {
		t.Fatalf("get -o json: %v %+v", err, res)
	}
	if obj["kind"] != "Pod" || obj["apiVersion"] != "v1" || obj["futureField"] == nil {
		t.Errorf("get -o json lost kind or an unknown field: %v", obj)
	}
	if !strings.HasPrefix(res.stdout, "{\n    \"apiVersion\": \"v1\",\n    \"kind\": \"Pod\",") {
		t.Errorf("get -o json is not indented JSON: %q", res.stdout)
	}
	if !f.sawRequest("GET /api/v1/namespaces/default/pods/db-0?consistent=true") {
		t.Error("single get did not ask for a consistent read")
	}

	res = f.run("get", "pods", "-o", "yaml")
	if !strings.HasPrefix(res.stdout, "apiVersion: v1\nitems:\n- apiVersion: v1\n  futureField:\n    x: 1\n  kind: Pod\n") || !strings.Contains(res.stdout, "\nkind: List\n") {
		t.Errorf("get -o yaml of a list:\n%s", res.stdout)
	}

	res = f.run("get", "pod/web-1", "pod/missing", "-o", "name")
	expect(t, "get with a missing name", res, 1, "pod/web-1\n", "Error from server (NotFound): pods \"missing\" not found\n")
	// One object asked for and missing: the error only, no empty List.
	expect(t, "get -o yaml of a missing object", f.run("get", "pod/missing", "-o", "yaml"), 1, "", "Error from server (NotFound): pods \"missing\" not found\n")

	// Machines (MCH-1), cluster objects with OpenShift's labels.
	f.put(api.ResourceForKind("Machine"), `{"metadata":{"name":"edge-1","labels":{"machine.openshift.io/cluster-api-machine-role":"master","machine.openshift.io/zone":"zone-a"}},
		"spec":{"providerID":"outpost://edge-1"},"status":{"phase":"Running","nodeRef":{"kind":"Node","name":"edge-1"}}}`)
	f.put(api.ResourceForKind("Machine"), `{"metadata":{"name":"spare"},"status":{"phase":"Provisioned"}}`)
	expect(t, "get machines", f.run("get", "machines"), 0,
		"NAME     PHASE         NODE     ROLE     DOMAIN   AGE\nedge-1   Running       edge-1   master   zone-a   120m\nspare    Provisioned   <none>   <none>   <none>   120m\n", "")

	f.put(api.ResourceForKind("MachineSet"), `{"metadata":{"name":"edge"},"spec":{"replicas":3,"selector":{"matchLabels":{"pool":"edge"}}},"status":{"replicas":2,"readyReplicas":2,"availableReplicas":2}}`)
	expect(t, "get machinesets", f.run("get", "machinesets"), 0,
		"NAME   DESIRED   CURRENT   READY   AVAILABLE   AGE\nedge   3         2         2       2           120m\n", "")
	f.put(api.ResourceForKind("ControlPlaneMachineSet"), `{"metadata":{"name":"cluster"},"spec":{"replicas":3,"state":"Active"},"status":{"replicas":3,"readyReplicas":3,"updatedReplicas":2,"unavailableReplicas":0}}`)
	expect(t, "get controlplanemachineset", f.run("get", "controlplanemachineset"), 0,
		"NAME      DESIRED   CURRENT   READY   UPDATED   UNAVAILABLE   STATE    AGE\ncluster   3         3         3       2         0             Active   120m\n", "")
	f.put(api.ResourceForKind("MachineHealthCheck"), `{"metadata":{"name":"workers"},"spec":{"selector":{"matchLabels":{"a":"b"}},"maxUnhealthy":1},"status":{"expectedMachines":3,"currentHealthy":2,"remediationsAllowed":0}}`)
	expect(t, "get mhc", f.run("get", "mhc"), 0,
		"NAME      MAXUNHEALTHY   EXPECTEDMACHINES   CURRENTHEALTHY   AGE\nworkers   1              3                  2                120m\n", "")
	f.put(api.ResourceForKind("Machine"), `{"metadata":{"name":"edge-2"},"spec":{"providerID":"outpost://edge-2",
		"lifecycleHooks":{"preDrain":[{"name":"MigrateImportantApp","owner":"my-app-migration-controller"}],"preTerminate":[{"name":"BackupFileSystem","owner":"my-backup-controller"},{"name":"WaitForStorageDetach","owner":"my-custom-storage-detach-controller"}]}},
		"status":{"phase":"Deleting","nodeRef":{"kind":"Node","name":"edge-2"},"conditions":[{"type":"Drainable","status":"False","reason":"HookPresent","message":"waiting for preDrain hooks"}]}}`)
	res = f.run("describe", "machine", "edge-2")
	for _, want := range []string{
		"Phase:              Deleting\n", "Node:               edge-2\n", "Provider ID:        outpost://edge-2\n",
		"Lifecycle Hooks:\n  Pre Drain:      MigrateImportantApp (owner my-app-migration-controller)\n",
		"  Pre Terminate:  BackupFileSystem (owner my-backup-controller)\n                  WaitForStorageDetach (owner my-custom-storage-detach-controller)\n",
		"Drainable  False", "HookPresent",
	} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("describe machine lacks %q:\n%s", want, res.stdout)
		}
	}

	// Machine config pools print the seed's columns exactly (UPD-9).
	f.put(api.ResourceForKind("MachineConfigPool"), `{"metadata":{"name":"worker"},"spec":{"nodeSelector":{"matchLabels":{"node-role.kubernetes.io/worker":""}},"configuration":{"name":"rendered-worker-new"}},
		"status":{"configuration":{"name":"rendered-worker-1d871ac76e1951d32b2fe92369879826"},"machineCount":2,"readyMachineCount":1,"updatedMachineCount":1,"degradedMachineCount":0,
		"conditions":[{"type":"Updated","status":"False"},{"type":"Updating","status":"True"},{"type":"Degraded","status":"False"}]}}`)
	expect(t, "get mcp", f.run("get", "mcp"), 0,
		"NAME     CONFIG                                             UPDATED   UPDATING   DEGRADED   MACHINECOUNT   READYMACHINECOUNT   UPDATEDMACHINECOUNT   DEGRADEDMACHINECOUNT   AGE\n"+
			"worker   rendered-worker-1d871ac76e1951d32b2fe92369879826   False     True       False      2              1                   1                     0                      120m\n", "")
	f.put(api.ResourceForKind("MachineConfig"), `{"metadata":{"name":"99-worker-ssh"},"spec":{"config":{"ignition":{"version":"3.2.0"}}}}`)
	expect(t, "get mc", f.run("get", "mc"), 0,
		"NAME            GENERATEDBYCONTROLLER   IGNITIONVERSION   AGE\n99-worker-ssh                           3.2.0             120m\n", "")
	// A node an infra pool takes is not listed under worker (the MCO's
	// rule for a custom pool and worker).
	f.put(api.ResourceForKind("MachineConfigPool"), `{"metadata":{"name":"infra"},"spec":{"nodeSelector":{"matchLabels":{"node-role.kubernetes.io/infra":""}}}}`)
	f.put(nodeR, `{"metadata":{"name":"w-1","labels":{"node-role.kubernetes.io/worker":""},"annotations":{"machineconfiguration.openshift.io/state":"Working"}}}`)
	f.put(nodeR, `{"metadata":{"name":"i-1","labels":{"node-role.kubernetes.io/worker":"","node-role.kubernetes.io/infra":""}}}`)
	res = f.run("describe", "mcp", "worker")
	for _, want := range []string{"Target Config:", "rendered-worker-new", "Node Selector:", "node-role.kubernetes.io/worker=", "Updating  True", "w-1", "Working"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("describe mcp lacks %q:\n%s", want, res.stdout)
		}
	}
	if strings.Contains(res.stdout, "i-1") {
		t.Errorf("describe mcp worker lists i-1, the infra pool's node:\n%s", res.stdout)
	}

	expect(t, "bad type", f.run("get", "gadgets"), 1, "", "error: the server doesn't have a resource type \"gadgets\"\n")
	expect(t, "bad output", f.run("get", "pods", "-o", "toml"), 1, "",
		"error: unable to match a printer suitable for the output format \"toml\", allowed formats are: custom-columns,custom-columns-file,json,jsonpath,jsonpath-file,name,wide,yaml\nSee 'outpost get --help' for usage.\n")
	expect(t, "no type", f.run("get"), 1, "", "error: expected a resource type, e.g. `outpost get pods`\nSee 'outpost get --help' for usage.\n")
	expect(t, "unknown flag", f.run("get", "pods", "--colour"), 1, "", "error: unknown flag: --colour\nSee 'outpost get --help' for usage.\n")
}

// watchRun is a CLI run that goes on until its context ends (get -w).
type watchRun struct {
	out, errb syncbuf.Buffer
	done      chan int
	cancel    context.CancelFunc
	ended     bool
	code      int
}

// startWatch runs the CLI against f with args in the background.
func startWatch(t *testing.T, f *fakeAPI, args ...string) *watchRun {
	t.Helper()
	t.Setenv(client.EnvConfig, filepath.Join(t.TempDir(), "none"))
	root := newRootCommand(&options{now: func() time.Time { return testNow }})
	w := &watchRun{done: make(chan int, 1)}
	root.SetOut(&w.out)
	root.SetErr(&w.errb)
	root.SetArgs(append([]string{"--server", f.srv.URL, "--insecure"}, args...))
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	go func() { w.done <- Execute(ctx, root) }()
	// The fake server cannot close while the watch is open.
	t.Cleanup(func() { w.stop() })
	return w
}

// waitFor waits up to 10 s for the run to have printed want; it reports
// whether it has (false too when the run ended before).
func (w *watchRun) waitFor(want string) bool {
	deadline := time.Now().Add(10 * time.Second)
	for w.out.String() != want && time.Now().Before(deadline) && !w.ended {
		select {
		case w.code = <-w.done:
			w.ended = true
		case <-time.After(5 * time.Millisecond):
		}
	}
	return w.out.String() == want
}

// stop ends the run as the user's ^C would and returns its exit code.
func (w *watchRun) stop() int {
	w.cancel()
	if !w.ended {
		w.code = <-w.done
		w.ended = true
	}
	return w.code
}

func TestGetWatch(t *testing.T) {
	f := newFakeAPI(t)
	seedPods(f)
	w := startWatch(t, f, "get", "pods", "-w", "-l", "app=web")

	// The list prints the row, then the watch's event prints it again.
	want := "NAME    READY   STATUS    RESTARTS   AGE\nweb-1   1/1     Running   0          120m\nweb-1   1/1     Running   0          120m\n"
	if !w.waitFor(want) {
		t.Fatalf("get -w printed %q (ended %v, exit %d), want %q; stderr %q", w.out.String(), w.ended, w.code, want, w.errb.String())
	}
	if !f.sawRequest("GET /api/v1/namespaces/default/pods?labelSelector=app%3Dweb&resourceVersion=3&watch=true") {
		t.Error("the watch did not start at the list's resourceVersion with the selector")
	}
	if code := w.stop(); code != 0 {
		t.Errorf("get -w ended by the user exited %d; stderr %q", code, w.errb.String())
	}
}

func TestDelete(t *testing.T) {
	f := newFakeAPI(t)
	seedPods(f)
	f.put(deployR, `{"metadata":{"name":"api","namespace":"default"},"spec":{"selector":{}}}`)
	expect(t, "delete by name", f.run("delete", "pod", "web-1", "missing"), 1,
		"pod \"web-1\" deleted\n", "Error from server (NotFound): pods \"missing\" not found\n")
	expect(t, "ignore not found", f.run("delete", "pod/missing", "--ignore-not-found"), 0, "", "")
	expect(t, "deployment", f.run("delete", "deploy/api"), 0, "deployment.apps \"api\" deleted\n", "")
	expect(t, "no name", f.run("delete", "pods"), 1, "",
		"error: resource(s) were provided, but no name was specified; use -l SELECTOR or --all to delete several\nSee 'outpost delete --help' for usage.\n")
	expect(t, "by selector", f.run("delete", "pods", "-l", "app=db"), 0, "pod \"db-0\" deleted\n", "")
	f.put(podR, `{"metadata":{"name":"x","namespace":"team"},"spec":{}}`)
	expect(t, "all", f.run("delete", "pods", "--all", "-n", "team"), 0, "pod \"other\" deleted\npod \"x\" deleted\n", "")
	expect(t, "all when empty", f.run("delete", "pods", "--all", "-n", "team"), 0, "", "No resources found in team namespace.\n")

	dir := t.TempDir()
	f.put(podR, `{"metadata":{"name":"p","namespace":"default"},"spec":{}}`)
	file := writeFile(t, dir, "p.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: q}\n")
	expect(t, "delete -f", f.run("delete", "-f", file), 1, "pod \"p\" deleted\n", "Error from server (NotFound): pods \"q\" not found\n")
}

func TestLabelAndAnnotate(t *testing.T) {
	f := newFakeAPI(t)
	f.put(nodeR, `{"metadata":{"name":"n1","labels":{"zone":"a"}},"status":{"capacity":{"cpu":"4"}},"spec":{"futureSpec":true}}`)

	expect(t, "add", f.run("label", "node", "n1", "rack=r1"), 0, "node/n1 labeled\n", "")
	expect(t, "no overwrite", f.run("label", "node/n1", "zone=b"), 1, "", "error: 'zone' already has a value (a), and --overwrite is false\n")
	expect(t, "same value", f.run("label", "node/n1", "zone=a"), 0, "node/n1 not labeled\n", "")
	expect(t, "overwrite and remove", f.run("label", "node", "n1", "zone=b", "rack-", "nope-", "--overwrite"), 0, "node/n1 labeled\n", "label \"nope\" not found.\n")
	n := f.get(nodeR, "", "n1")
	labels := n["metadata"].(map[string]any)["labels"].(map[string]any)
	if len(labels) != 1 || labels["zone"] != "b" {
		t.Errorf("labels %v, want only zone=b", labels)
	}
	if n["spec"].(map[string]any)["futureSpec"] != true || n["status"] == nil {
		t.Errorf("label lost fields of the object: %v", n)
	}
	expect(t, "remove last", f.run("label", "node", "n1", "zone-"), 0, "node/n1 unlabeled\n", "")
	if _, ok := f.get(nodeR, "", "n1")["metadata"].(map[string]any)["labels"]; ok {
		t.Error("an empty labels map was left behind")
	}

	expect(t, "annotate", f.run("annotate", "node", "n1", "note=drained for repair, back=monday"), 0, "node/n1 annotated\n", "")
	ann := f.get(nodeR, "", "n1")["metadata"].(map[string]any)["annotations"].(map[string]any)
	if ann["note"] != "drained for repair, back=monday" {
		t.Errorf("annotations %v", ann)
	}
	expect(t, "annotate no overwrite", f.run("annotate", "node", "n1", "note=x"), 1, "",
		"error: 'note' already has a value (drained for repair, back=monday), and --overwrite is false\n")
	expect(t, "missing object", f.run("label", "node", "n9", "a=b"), 1, "", "Error from server (NotFound): nodes \"n9\" not found\n")
}

func TestDescribe(t *testing.T) {
	f := newFakeAPI(t)
	f.put(podR, `{"metadata":{"name":"web-1","namespace":"default","labels":{"app":"web"},"creationTimestamp":"2026-01-01T01:00:00Z"},
		"spec":{"nodeName":"n1","nodeSelector":{"zone":"a"},"containers":[{"name":"web","image":"nginx:1.27","ports":[{"containerPort":80}],
		"resources":{"limits":{"cpu":"500m","memory":"128Mi"},"requests":{"cpu":"250m"}}}],
		"tolerations":[{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}]},
		"status":{"phase":"Pending","conditions":[{"type":"PodScheduled","status":"False"}],"qosClass":"Burstable"}}`)
	f.put(eventR, `{"metadata":{"name":"e1","namespace":"default"},"involvedObject":{"kind":"Pod","name":"web-1","namespace":"default"},
		"type":"Warning","reason":"FailedScheduling","message":"0/3 nodes are available: MatchNodeSelector (3).","source":{"component":"default-scheduler"},
		"count":4,"firstTimestamp":"2026-01-01T01:00:00Z","lastTimestamp":"2026-01-01T01:59:30Z"}`)
	f.put(eventR, `{"metadata":{"name":"e2","namespace":"default"},"involvedObject":{"kind":"Pod","name":"other","namespace":"default"},"reason":"NotMine"}`)
	res := f.run("describe", "pod", "web-1")
	if res.code != 0 {
		t.Fatalf("describe: %+v", res)
	}
	for _, want := range []string{
		"Name:         web-1\n",
		"Namespace:    default\n",
		"Node:         n1\n",
		"Labels:       app=web\n",
		"Status:       Pending\n",
		"Containers:\n  web:\n",
		"    Image:      nginx:1.27\n",
		"    Port:       80/TCP\n",
		"    Limits:\n      cpu:     500m\n      memory:  128Mi\n",
		"    Requests:\n      cpu:        250m\n",
		"Conditions:\n  Type          Status\n  PodScheduled  False\n",
		"QoS Class:       Burstable\n",
		"Node-Selectors:  zone=a\n",
		"Tolerations:     node.kubernetes.io/not-ready:NoExecute op=Exists for 300s\n",
		"Events:\n  Type     Reason            Age                From               Message\n",
		"  Warning  FailedScheduling  30s (x4 over 60m)  default-scheduler  0/3 nodes are available: MatchNodeSelector (3).\n",
	} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("describe lacks %q:\n%s", want, res.stdout)
		}
	}
	if strings.Contains(res.stdout, "NotMine") {
		t.Error("describe shows an event of another object")
	}
	if !f.sawRequest("GET /api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3Dweb-1%2CinvolvedObject.kind%3DPod%2CinvolvedObject.namespace%3Ddefault") {
		t.Error("events were not asked for with the involvedObject field selector")
	}

	f.put(nodeR, `{"metadata":{"name":"n1","labels":{"node-role.kubernetes.io/worker":""}},
		"spec":{"unschedulable":true,"taints":[{"key":"node.kubernetes.io/unreachable","effect":"NoExecute"},{"key":"dedicated","value":"db","effect":"NoSchedule"}]},
		"status":{"allocatable":{"cpu":"2","memory":"1Gi"},"addresses":[{"type":"InternalIP","address":"10.0.0.5"}],
		"conditions":[{"type":"Ready","status":"Unknown","reason":"NodeStatusUnknown"}],"nodeInfo":{"kernelVersion":"6.1"}}}`)
	res = f.run("describe", "node/n1")
	for _, want := range []string{
		"Roles:              worker\n",
		"Taints:             node.kubernetes.io/unreachable:NoExecute\n                    dedicated=db:NoSchedule\n",
		"Unschedulable:      true\n",
		"Zone:               <none> (state unknown: ",
		"  Ready  Unknown",
		"Addresses:\n  InternalIP:  10.0.0.5\n",
		"Non-terminated Pods:          (1 in total)\n",
		"  default    web-1  250m (12%)    500m (25%)  0 (0%)           128Mi (12%)    60m\n",
		"  cpu       250m (12%)  500m (25%)\n",
		"  Kernel Version:             6.1\n",
		"Events:  <none>\n",
	} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("describe node lacks %q:\n%s", want, res.stdout)
		}
	}
	// The zone's state as the leader counts it (TNT-8).
	f.put(nodeR, `{"metadata":{"name":"n2","labels":{"topology.kubernetes.io/zone":"a"}},"status":{"conditions":[{"type":"Ready","status":"Unknown"}]}}`)
	f.mu.Lock()
	f.zones = &api.ZoneList{Items: []api.ZoneStatus{{Name: "", State: api.ZoneNormal, Nodes: 1, Ready: 1, EvictionRate: 0.1}, {Name: "a", State: api.ZonePartialDisruption, Nodes: 60, Ready: 20, EvictionRate: 0.01, Evictions: 2}}}
	f.mu.Unlock()
	if res := f.run("describe", "node", "n2"); !strings.Contains(res.stdout, "Zone:               a (PartialDisruption: 20 of 60 nodes ready; nodes tainted for eviction at most 0.01/s)\n") {
		t.Errorf("describe node lacks the zone's state:\n%s", res.stdout)
	}
	f.mu.Lock()
	f.zones.MasterDisruption = true
	f.mu.Unlock()
	if res := f.run("describe", "node", "n2"); !strings.Contains(res.stdout, "Zone:               a (PartialDisruption: 20 of 60 nodes ready; every zone is in FullDisruption") {
		t.Errorf("describe node in master disruption:\n%s", res.stdout)
	}
	expect(t, "describe missing", f.run("describe", "pod", "nope"), 1, "", "Error from server (NotFound): pods \"nope\" not found\n")
	// Without a name, describe shows every pod of the namespace.
	if res := f.run("describe", "pods"); res.code != 0 || !strings.HasPrefix(res.stdout, "Name:         web-1\n") {
		t.Errorf("describe without name: %+v", res)
	}
}

func TestEdit(t *testing.T) {
	f := newFakeAPI(t)
	f.put(deployR, `{"metadata":{"name":"web","namespace":"default"},"spec":{"replicas":1,"selector":{},"futureField":"kept"}}`)
	dir := t.TempDir()
	editor := writeFile(t, dir, "editor.sh", "#!/bin/sh\nsed -i 's/replicas: 1/replicas: 3/' \"$1\"\n")
	os.Chmod(editor, 0o755)
	t.Setenv("OUTPOST_EDITOR", editor)
	expect(t, "edit", f.run("edit", "deploy", "web"), 0, "deployment.apps/web edited\n", "")
	spec := f.get(deployR, "default", "web")["spec"].(map[string]any)
	if spec["replicas"] != json.Number("3") || spec["futureField"] != "kept" {
		t.Errorf("spec after edit %v", spec)
	}

	// Nothing changed: no write.
	writes := f.writeCount()
	t.Setenv("OUTPOST_EDITOR", "true")
	expect(t, "edit unchanged", f.run("edit", "deploy/web"), 0, "Edit cancelled, no changes made.\n", "")
	if f.writeCount() != writes {
		t.Error("an unchanged edit wrote")
	}

	// The server refuses: the file is kept and named.
	f.mu.Lock()
	f.conflicts = 1
	f.mu.Unlock()
	t.Setenv("OUTPOST_EDITOR", editor)
	writeFile(t, dir, "editor.sh", "#!/bin/sh\nsed -i 's/replicas: 3/replicas: 4/' \"$1\"\n")
	res := f.run("edit", "deploy", "web")
	m := regexp.MustCompile(`A copy of your changes has been stored to "([^"]+)"`).FindStringSubmatch(res.stderr)
	if res.code != 1 || m == nil || !strings.Contains(res.stderr, "Error from server (Conflict)") {
		t.Fatalf("edit refused by the server: %+v", res)
	}
	kept, err := os.ReadFile(m[1])
	if err != nil || !strings.Contains(string(kept), "replicas: 4") {
		t.Errorf("kept file %s: %v %q", m[1], err, kept)
	}
	os.Remove(m[1])
}

func TestAdmToken(t *testing.T) {
	f := newFakeAPI(t)
	res := f.run("adm", "token", "create", "--role", "developer", "--namespace", "a", "--namespace", "b", "--ttl", "1h", "--description", "ci")
	if res.code != 0 {
		t.Fatalf("token create: %+v", res)
	}
	m := regexp.MustCompile(`^([a-z0-9]{6})\.([a-z0-9]{16})\n$`).FindStringSubmatch(res.stdout)
	if m == nil {
		t.Fatalf("token create printed %q, want <id>.<secret>", res.stdout)
	}
	stored := f.get(tokenR, "", m[1])
	if stored == nil {
		t.Fatalf("no token %s stored", m[1])
	}
	spec := stored["spec"].(map[string]any)
	if spec["secretHash"] != auth.HashSecret(m[2]) || spec["role"] != "developer" || spec["description"] != "ci" ||
		spec["expires"] != "2026-01-01T03:00:00Z" || len(spec["namespaces"].([]any)) != 2 {
		t.Errorf("stored token spec %v", spec)
	}
	b, _ := json.Marshal(stored)
	if strings.Contains(string(b), m[2]) {
		t.Error("the secret reached the server")
	}
	expect(t, "token list", f.run("adm", "token", "list"), 0,
		"NAME     ROLE        NODE     NAMESPACES   EXPIRES\n"+m[1]+"   developer   <none>   a,b          2026-01-01T03:00:00Z\n", "")
	expect(t, "token delete", f.run("adm", "token", "delete", m[1]), 0, "token \""+m[1]+"\" deleted\n", "")
	// A join token without a CA in the client's configuration cannot
	// carry the CA's pin: the bare token, and a warning that says what
	// the agent then needs.
	join := f.run("adm", "token", "create", "--role", "node")
	if join.code != 0 || !regexp.MustCompile(`^[a-z0-9]{6}\.[a-z0-9]{16}\n$`).MatchString(join.stdout) ||
		!strings.Contains(join.stderr, "--ca-cert") {
		t.Errorf("join token without a CA: %+v", join)
	}
	expect(t, "bad role", f.run("adm", "token", "create", "--role", "root"), 1, "",
		"error: --role \"root\" is not one of cluster-admin, node, developer, fleetlock\nSee 'outpost adm token create --help' for usage.\n")
}

func TestAdmRaft(t *testing.T) {
	f := newFakeAPI(t)
	f.peers = []client.RaftPeer{
		{ID: "s1", Address: "10.0.0.1:7000", Suffrage: "Voter", Leader: true, LastIndex: 99, Reachable: true},
		{ID: "s3", Address: "10.0.0.3:7000", Suffrage: "Nonvoter", LastIndex: 10},
	}
	f.put(api.ResourceForKind("Machine"), `{"metadata":{"name":"s1","labels":{"machine.openshift.io/zone":"zone-a"}}}`)
	expect(t, "list-peers", f.run("adm", "raft", "list-peers"), 0,
		"ID   ADDRESS         SUFFRAGE   LEADER   LAST-INDEX   REACHABLE   MACHINE   DOMAIN\n"+
			"s1   10.0.0.1:7000   Voter      true     99           true        s1        zone-a\n"+
			"s3   10.0.0.3:7000   Nonvoter   false    10           false       <none>    <none>\n", "")
	expect(t, "promote refused", f.run("adm", "raft", "promote", "s3"), 1, "",
		"Error from server (BadRequest): refusing to promote s3: it has not caught up with the leader (index 10 of 99)\n")
	expect(t, "demote", f.run("adm", "raft", "demote", "s1"), 0, "peer \"s1\" demoted\n", "")
	expect(t, "remove", f.run("adm", "raft", "remove-peer", "s2"), 0, "peer \"s2\" removed\n", "")
	if !f.sawRequest("DELETE /apis/outpost.io/v1/raft/peers/s2") {
		t.Error("remove-peer did not DELETE the peer")
	}
}

func TestVersion(t *testing.T) {
	f := newFakeAPI(t)
	expect(t, "version", f.run("version"), 0, "Client Version: dev\nServer Version: v-test\n", "")
}

func TestConfigPrecedence(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "config")
	if err := client.WriteConfig(cfgPath, client.Config{Server: "https://file:6443", Token: "file.tok", Namespace: "filens"}); err != nil {
		t.Fatal(err)
	}
	build := func(flags ...string) *client.Client {
		t.Helper()
		o := &options{now: time.Now}
		root := newRootCommand(o)
		var cmd *cobra.Command
		for _, c := range root.Commands() {
			if c.Name() == "version" {
				cmd = c
			}
		}
		if err := root.PersistentFlags().Parse(flags); err != nil {
			t.Fatal(err)
		}
		cl, err := o.client(cmd)
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	t.Setenv(client.EnvConfig, cfgPath)
	t.Setenv(client.EnvServer, "")
	t.Setenv(client.EnvToken, "")
	if cl := build(); cl.Server() != "https://file:6443" || cl.Namespace() != "filens" {
		t.Errorf("file only: %s %s", cl.Server(), cl.Namespace())
	}
	t.Setenv(client.EnvServer, "https://env:6443")
	if cl := build(); cl.Server() != "https://env:6443" {
		t.Errorf("env over file: %s", cl.Server())
	}
	if cl := build("--server", "https://flag:6443", "-n", "flagns"); cl.Server() != "https://flag:6443" || cl.Namespace() != "flagns" {
		t.Errorf("flags over env: %s %s", cl.Server(), cl.Namespace())
	}
	other := filepath.Join(dir, "other")
	client.WriteConfig(other, client.Config{Server: "https://other:6443"})
	t.Setenv(client.EnvServer, "")
	if cl := build("--config", other); cl.Server() != "https://other:6443" {
		t.Errorf("--config: %s", cl.Server())
	}
}

func TestNoServerConfigured(t *testing.T) {
	res := runCLI(t, context.Background(), "", "get", "pods")
	if res.code != 1 || !strings.HasPrefix(res.stderr, "error: no server configured: run `outpost dev`") || !strings.Contains(res.stderr, "--server and --token") {
		t.Errorf("without a configuration: %+v", res)
	}
	res = runCLI(t, context.Background(), "", "--config", filepath.Join(t.TempDir(), "nope"), "get", "pods")
	if res.code != 1 || !strings.Contains(res.stderr, "no client configuration") {
		t.Errorf("with a missing --config: %+v", res)
	}
	// $OUTPOST_CONFIG names the file as --config does: say it is missing.
	missing := filepath.Join(t.TempDir(), "nonexistent")
	res = runCLIEnv(t, map[string]string{client.EnvConfig: missing}, "get", "pods")
	if want := "error: no client configuration: " + missing + " (named by $OUTPOST_CONFIG) does not exist\n"; res.code != 1 || res.stderr != want {
		t.Errorf("with $OUTPOST_CONFIG naming a missing file: %+v, want stderr %q", res, want)
	}
	res = runCLI(t, context.Background(), "", "--server", "http://127.0.0.1:1", "get", "pods")
	if res.code != 1 || !strings.Contains(res.stderr, "without --insecure") {
		t.Errorf("plain http without --insecure: %+v", res)
	}
	res = runCLI(t, context.Background(), "", "frobnicate")
	if res.code != 1 || !strings.HasPrefix(res.stderr, "error: unknown command \"frobnicate\" for \"outpost\"") || !strings.HasSuffix(res.stderr, "See 'outpost --help' for usage.\n") {
		t.Errorf("unknown command: %+v", res)
	}
}

// TestApplyUndoesServerSideChanges is kubectl's three-way merge seen from
// the command line: after an edit on the server, applying the same file
// again brings back the manifest's values and keeps what the server and
// controllers set.
func TestApplyUndoesServerSideChanges(t *testing.T) {
	f := newFakeAPI(t)
	file := writeFile(t, t.TempDir(), "d.yaml", `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web}
spec:
  replicas: 3
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: nginx:1.27
`)
	expect(t, "create", f.run("apply", "-f", file), 0, "deployment.apps/web created\n", "")

	// Someone edits the live object; the server defaults a field inside
	// the container and a controller writes status.
	f.mu.Lock()
	live := f.objs[key(deployR, "default", "web")]
	spec := live["spec"].(map[string]any)
	spec["replicas"] = json.Number("5")
	c := spec["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
	c["image"] = "nginx:edited"
	c["imagePullPolicy"] = "IfNotPresent"
	delete(live["metadata"].(map[string]any)["labels"].(map[string]any), "app")
	live["status"] = map[string]any{"readyReplicas": json.Number("5")}
	f.mu.Unlock()

	expect(t, "apply after an edit", f.run("apply", "-f", file), 0, "deployment.apps/web configured\n", "")
	live = f.get(deployR, "default", "web")
	spec = live["spec"].(map[string]any)
	c = spec["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
	if spec["replicas"] != json.Number("3") || c["image"] != "nginx:1.27" {
		t.Errorf("after apply: replicas %v image %v, want the manifest's 3 and nginx:1.27", spec["replicas"], c["image"])
	}
	if c["imagePullPolicy"] != "IfNotPresent" || live["status"] == nil {
		t.Errorf("apply dropped a server default or the status: %v %v", c, live["status"])
	}
	if live["metadata"].(map[string]any)["labels"].(map[string]any)["app"] != "web" {
		t.Error("a label of the manifest removed on the server was not put back")
	}
	writes := f.writeCount()
	expect(t, "apply again", f.run("apply", "-f", file), 0, "deployment.apps/web unchanged\n", "")
	if f.writeCount() != writes {
		t.Error("an unchanged apply wrote")
	}
}

func TestDeleteFileNamespacesLast(t *testing.T) {
	f := newFakeAPI(t)
	file := writeFile(t, t.TempDir(), "multi.yaml", webManifest+`---
apiVersion: v1
kind: Pod
metadata: {name: ghost, namespace: shop}
---
apiVersion: v1
kind: Pod
metadata: {name: stray, namespace: elsewhere}
`)
	f.put(api.ResourceForKind("Namespace"), `{"metadata":{"name":"shop"}}`)
	f.put(podR, `{"metadata":{"name":"web","namespace":"shop"},"spec":{}}`)
	f.put(deployR, `{"metadata":{"name":"api","namespace":"shop"},"spec":{"selector":{}}}`)
	// The namespace is deleted after the objects in it (the fake server,
	// like the namespace controller, deletes a namespace's objects with
	// it); "ghost", already gone from a namespace being deleted, counts
	// as deleted; "stray", missing elsewhere, is still an error.
	expect(t, "delete -f", f.run("delete", "-f", file), 1,
		"pod \"web\" deleted\ndeployment.apps \"api\" deleted\npod \"ghost\" deleted\nnamespace \"shop\" deleted\n",
		"Error from server (NotFound): pods \"stray\" not found\n")
}

func TestManifestErrorsAreClientSide(t *testing.T) {
	dir := t.TempDir()
	garbage := writeFile(t, dir, "garbage.yaml", "apiVersion: v1\nkind: [Pod\n")
	text := writeFile(t, dir, "text.yaml", "hello world\n")
	dup := writeFile(t, dir, "dup.yaml", "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: dup\n  name: dup2\n")
	empty := writeFile(t, dir, "empty.yaml", "# nothing here yet\n---\n\n")
	// No server is reachable at port 1: a file's error must not be
	// reported as coming from the server, nor need one.
	run := func(args ...string) result {
		return runCLI(t, context.Background(), "", append([]string{"--server", "https://127.0.0.1:1"}, args...)...)
	}
	tests := []struct {
		args   []string
		stderr string
	}{
		{[]string{"apply", "-f", garbage}, "error: error parsing " + garbage + ": YAML document 1 (from line 1): "},
		{[]string{"apply", "-f", text}, "error: error parsing " + text + `: YAML document 1 is the text "hello world", not a Kubernetes object (it has no apiVersion or kind)` + "\n"},
		{[]string{"create", "-f", dup}, "error: error parsing " + dup + `: YAML document 2 (from line 5): yaml: unmarshal errors: line 9: key "name" already set in map` + "\n"},
		{[]string{"apply", "-f", empty}, "error: no objects passed to apply\n"},
		{[]string{"create", "-f", empty}, "error: no objects passed to create\n"},
		{[]string{"delete", "-f", empty}, "error: no objects passed to delete\n"},
	}
	for _, tt := range tests {
		res := run(tt.args...)
		if res.code != 1 || res.stdout != "" || !strings.HasPrefix(res.stderr, tt.stderr) || strings.Contains(res.stderr, "from server") {
			t.Errorf("%v: code %d stdout %q\nstderr %q\n  want %q", tt.args, res.code, res.stdout, res.stderr, tt.stderr)
		}
	}
}

func TestAdmTokenNamespaces(t *testing.T) {
	f := newFakeAPI(t)
	f.put(api.ResourceForKind("Namespace"), `{"metadata":{"name":"team-a"}}`)
	tokenRE := regexp.MustCompile(`^([a-z0-9]{6})\.[a-z0-9]{16}\n$`)
	tests := []struct {
		args   []string
		want   []any
		stderr string
	}{
		{[]string{"--role", "developer", "-n", "team-a"}, []any{"team-a"}, ""},
		{[]string{"-n", "team-a", "--role", "developer", "--namespaces", "team-b,team-a"}, []any{"team-a", "team-b"},
			"Warning: namespace \"team-b\" does not exist; the token will be valid in it once it is created\n"},
	}
	for _, tt := range tests {
		res := f.run(append([]string{"adm", "token", "create"}, tt.args...)...)
		m := tokenRE.FindStringSubmatch(res.stdout)
		if res.code != 0 || m == nil || res.stderr != tt.stderr {
			t.Errorf("%v: %+v; want a token and stderr %q", tt.args, res, tt.stderr)
			continue
		}
		if got := f.get(tokenR, "", m[1])["spec"].(map[string]any)["namespaces"]; !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%v: token namespaces %v, want %v", tt.args, got, tt.want)
		}
	}
}

// runCLIEnv is runCLI with environment variables set after its own.
func runCLIEnv(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	t.Setenv(client.EnvConfig, "")
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv(client.EnvServer, "")
	t.Setenv(client.EnvToken, "")
	for k, v := range env {
		t.Setenv(k, v)
	}
	root := newRootCommand(&options{now: func() time.Time { return testNow }})
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs(args)
	code := Execute(context.Background(), root)
	return result{out.String(), errb.String(), code}
}

func TestLabelUnlabeledAndSelectors(t *testing.T) {
	f := newFakeAPI(t)
	seedPods(f)
	expect(t, "only removals", f.run("label", "pod", "web-1", "app-"), 0, "pod/web-1 unlabeled\n", "")
	expect(t, "nothing to remove", f.run("label", "pod", "web-1", "app-"), 0, "pod/web-1 not labeled\n", "label \"app\" not found.\n")
	expect(t, "annotate", f.run("annotate", "pod", "web-1", "a=1", "b=2"), 0, "pod/web-1 annotated\n", "")
	expect(t, "unannotate", f.run("annotate", "pod", "web-1", "a-"), 0, "pod/web-1 unannotated\n", "")
	expect(t, "mixed", f.run("annotate", "pod", "web-1", "b-", "c=3"), 0, "pod/web-1 annotated\n", "")

	expect(t, "label -l", f.run("label", "pods", "-l", "app=db", "tier=data"), 0, "pod/db-0 labeled\n", "")
	if got := f.get(podR, "default", "db-0")["metadata"].(map[string]any)["labels"]; !reflect.DeepEqual(got, map[string]any{"app": "db", "tier": "data"}) {
		t.Errorf("labels after label -l: %v", got)
	}
	if !f.sawRequest("GET /api/v1/namespaces/default/pods?labelSelector=app%3Ddb") {
		t.Error("label -l did not list with the selector")
	}
	expect(t, "annotate --all", f.run("annotate", "pods", "--all", "owner=me"), 0, "pod/db-0 annotated\npod/web-1 annotated\n", "")
	if f.get(podR, "team", "other")["metadata"].(map[string]any)["annotations"] != nil {
		t.Error("annotate --all reached another namespace")
	}
	expect(t, "label -l no match", f.run("label", "pods", "-l", "app=none", "x=y"), 0, "", "No resources found in default namespace.\n")
	expect(t, "names and -l", f.run("label", "pods", "web-1", "-l", "app=web", "x=y"), 1, "",
		"error: names cannot be combined with -l or --all\nSee 'outpost label --help' for usage.\n")
}

func TestDescribeAllAndLastApplied(t *testing.T) {
	f := newFakeAPI(t)
	seedPods(f)
	f.put(podR, `{"metadata":{"name":"second","namespace":"team","annotations":{"note":"hi","`+LastAppliedAnnotation+`":"{\"apiVersion\":\"v1\"}"}},"spec":{"containers":[{"name":"c"}]}}`)
	res := f.run("describe", "pods", "-n", "team")
	if res.code != 0 || strings.Count(res.stdout, "Name:         ") != 2 ||
		!strings.Contains(res.stdout, "Name:         other\n") || !strings.Contains(res.stdout, "Name:         second\n") {
		t.Errorf("describe pods -n team should show both pods of team:\n%+v", res)
	}
	if !strings.Contains(res.stdout, "Annotations:  note: hi\n") || strings.Contains(res.stdout, LastAppliedAnnotation) {
		t.Errorf("describe should show the annotations but the last-applied one:\n%s", res.stdout)
	}
	res = f.run("describe", "pods", "-l", "app=db")
	if res.code != 0 || strings.Count(res.stdout, "Name:         ") != 1 || !strings.Contains(res.stdout, "Name:         db-0\n") {
		t.Errorf("describe pods -l app=db:\n%+v", res)
	}
	expect(t, "describe none", f.run("describe", "pods", "-n", "void"), 0, "", "No resources found in void namespace.\n")
}

func TestEditRefusesDuplicateKeys(t *testing.T) {
	f := newFakeAPI(t)
	f.put(deployR, `{"metadata":{"name":"web","namespace":"default"},"spec":{"replicas":1,"selector":{}}}`)
	editor := writeFile(t, t.TempDir(), "editor.sh", "#!/bin/sh\necho 'kind: Deployment' >> \"$1\"\n")
	os.Chmod(editor, 0o755)
	t.Setenv("OUTPOST_EDITOR", editor)
	writes := f.writeCount()
	res := f.run("edit", "deploy", "web")
	if res.code != 1 || !strings.Contains(res.stderr, `key "kind" already set in map`) || !strings.Contains(res.stderr, "A copy of your changes has been stored to") {
		t.Errorf("edit with a key given twice: %+v", res)
	}
	if f.writeCount() != writes {
		t.Error("an edit with a key given twice was saved")
	}
	if m := regexp.MustCompile(`stored to "([^"]+)"`).FindStringSubmatch(res.stderr); m != nil {
		os.Remove(m[1])
	}
}

// A subcommand that does not exist under a group is an error with exit 1,
// naming it (and the near miss), not the group's help with exit 0 that a
// script takes for success (issue 9 item 10).
func TestUnknownSubcommandFails(t *testing.T) {
	r := runCLI(t, context.Background(), "", "adm", "evacuate", "node-1")
	if r.code != 1 || !strings.Contains(r.stderr, `unknown command "evacuate" for "outpost adm"`) {
		t.Fatalf("adm evacuate: exit %d, stderr %q", r.code, r.stderr)
	}
	r = runCLI(t, context.Background(), "", "adm", "tokn", "list")
	if r.code != 1 || !strings.Contains(r.stderr, "did you mean token?") {
		t.Fatalf("adm tokn: exit %d, stderr %q", r.code, r.stderr)
	}
	r = runCLI(t, context.Background(), "", "adm")
	if r.code != 0 || !strings.Contains(r.stdout, "Available Commands") {
		t.Fatalf("adm alone: exit %d, stdout %q", r.code, r.stdout)
	}
}

// A cluster-scoped object's manifest naming a namespace (as OpenShift's
// documents do for MachineConfiguration) applies without it, as with
// kubectl and a Kubernetes API server.
func TestApplyClusterScopedDropsNamespace(t *testing.T) {
	f := newFakeAPI(t)
	file := writeFile(t, t.TempDir(), "mc.yaml", `apiVersion: operator.openshift.io/v1
kind: MachineConfiguration
metadata:
  name: cluster
  namespace: openshift-machine-config-operator
spec:
  nodeDisruptionPolicy:
    files:
    - path: /etc/chrony.conf
      actions:
      - type: Restart
        restart:
          serviceName: chronyd.service
`)
	expect(t, "apply", f.run("apply", "-f", file), 0, "machineconfiguration.operator.openshift.io/cluster created\n", "")
	obj := f.get(api.ResourceForKind("MachineConfiguration"), "", "cluster")
	if ns, ok := obj["metadata"].(map[string]any)["namespace"]; ok {
		t.Errorf("stored with namespace %v", ns)
	}
}

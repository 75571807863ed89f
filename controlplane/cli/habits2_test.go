package cli

import (
	"encoding/json"
	"runtime"
	"testing"
)

// Tests of the kubectl habits of issue 15's review, item 6: version
// --client, get --raw and wait --for=create (patch and create service
// are in patch_test.go, events in events_test.go).

func TestVersionClient(t *testing.T) {
	f := newFakeAPI(t)
	expect(t, "client only", f.run("version", "--client"), 0, "Client Version: dev\n", "")
	if f.sawRequest("GET /version") {
		t.Error("version --client asked the server")
	}
	// No server configured at all: --client still works.
	expect(t, "no server", runCLI(t, t.Context(), "", "version", "--client"), 0, "Client Version: dev\n", "")
	res := f.run("version", "-o", "json")
	var doc map[string]map[string]string
	if err := json.Unmarshal([]byte(res.stdout), &doc); err != nil || res.code != 0 {
		t.Fatalf("version -o json: %v, code %d\n%s%s", err, res.code, res.stdout, res.stderr)
	}
	if doc["clientVersion"]["gitVersion"] != "dev" || doc["serverVersion"]["gitVersion"] != "v-test" || doc["clientVersion"]["goVersion"] != runtime.Version() {
		t.Errorf("version -o json: %v", doc)
	}
	expect(t, "yaml, client", f.run("version", "--client", "-o", "yaml"), 0,
		"clientVersion:\n  gitVersion: dev\n  goVersion: "+runtime.Version()+"\n  platform: "+runtime.GOOS+"/"+runtime.GOARCH+"\n", "")
	expect(t, "bad output", f.run("version", "-o", "wide"), 1, "",
		"error: --output must be json or yaml, not \"wide\"\nSee 'outpost version --help' for usage.\n")
}

func TestGetRaw(t *testing.T) {
	f := newFakeAPI(t)
	f.put(deployR, `{"metadata":{"name":"web","namespace":"default"},"spec":{"selector":{}}}`)
	res := f.run("get", "--raw", "/apis/apps/v1/namespaces/default/deployments/web")
	if res.code != 0 || res.stdout != jsonLine(t, f.get(deployR, "default", "web")) {
		t.Errorf("get --raw: code %d\n%q\n%s", res.code, res.stdout, res.stderr)
	}
	expect(t, "version", f.run("get", "--raw", "/version"), 0, "{\"version\":\"v-test\"}\n", "")
	f.run("get", "--raw", "/api/v1/namespaces/default/pods?labelSelector=app%3Dweb")
	if !f.sawRequest("GET /api/v1/namespaces/default/pods?labelSelector=app%3Dweb") {
		t.Error("get --raw did not pass the query on")
	}
	expect(t, "not found", f.run("get", "--raw", "/nothing"), 1, "",
		"Error from server (NotFound): the server could not find the requested resource\n")
	expect(t, "with args", f.run("get", "pods", "--raw", "/version"), 1, "",
		"error: arguments may not be passed when --raw is specified\nSee 'outpost get --help' for usage.\n")
	expect(t, "not a path", f.run("get", "--raw", "https://evil/version"), 1, "",
		"error: --raw must be a path starting with /, e.g. /api/v1/namespaces, not \"https://evil/version\"\nSee 'outpost get --help' for usage.\n")
	// get without --raw is unchanged.
	expect(t, "no type", f.run("get"), 1, "", "error: expected a resource type, e.g. `outpost get pods`\nSee 'outpost get --help' for usage.\n")
}

// jsonLine is obj as the fake server encodes it.
func jsonLine(t *testing.T, obj map[string]any) string {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return string(b) + "\n"
}

func TestWaitForCreate(t *testing.T) {
	f := newFakeAPI(t) // watches stay open, as the real server's
	f.put(podR, `{"metadata":{"name":"web","namespace":"default"},"spec":{"containers":[{"name":"c"}]}}`)
	expect(t, "exists", f.run("wait", "--for=create", "pod/web"), 0, "pod/web condition met\n", "")
	expect(t, "check once", f.run("wait", "--for=create", "pod/db", "--timeout=0"), 1, "",
		"error: timed out waiting for the condition on pods/db\n")
	expect(t, "times out", f.run("wait", "--for=create", "deploy/api", "--timeout=150ms"), 1, "",
		"error: timed out waiting for the condition on deployments/api\n")
	// Created while wait watches.
	f.beforeWatch = func() {
		f.beforeWatch = nil
		f.put(deployR, `{"metadata":{"name":"api","namespace":"default"},"spec":{"selector":{}}}`)
	}
	expect(t, "created", f.run("wait", "--for=create", "deployment", "api", "--timeout=10s"), 0, "deployment.apps/api condition met\n", "")
	if !f.sawRequest("GET /apis/apps/v1/namespaces/default/deployments?fieldSelector=metadata.name%3Dapi") {
		t.Error("wait --for=create did not watch the name")
	}
}

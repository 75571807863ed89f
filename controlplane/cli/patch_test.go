package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
)

// specJSON is an object's spec as compact JSON, keys sorted.
func specJSON(t *testing.T, obj map[string]any) string {
	t.Helper()
	b, err := json.Marshal(obj["spec"])
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestPatchMerge(t *testing.T) {
	f := newFakeAPI(t)
	f.put(deployR, `{"metadata":{"name":"web","namespace":"default","labels":{"app":"web","old":"x"}},"spec":{"replicas":1,"selector":{},"futureField":"kept"}}`)
	expect(t, "merge", f.run("patch", "deployment", "web", "--type", "merge", "-p", `{"spec":{"replicas":3},"metadata":{"labels":{"old":null}}}`), 0,
		"deployment.apps/web patched\n", "")
	d := f.get(deployR, "default", "web")
	if got := specJSON(t, d); got != `{"futureField":"kept","replicas":3,"selector":{}}` {
		t.Errorf("spec after merge patch: %s", got)
	}
	if l := nestedMap(d, "metadata", "labels"); len(l) != 1 || l["app"] != "web" {
		t.Errorf("labels after null: %v", l)
	}
	writes := f.writeCount()
	expect(t, "no change", f.run("patch", "deploy/web", "--type=merge", "-p", "spec:\n  replicas: 3\n"), 0,
		"deployment.apps/web patched (no change)\n", "")
	if f.writeCount() != writes {
		t.Error("a patch that changes nothing wrote")
	}
	// Someone else writes between the read and the write: the patch is
	// applied again to the newer object.
	f.mu.Lock()
	f.conflicts = 2
	f.mu.Unlock()
	expect(t, "conflict retried", f.run("patch", "deploy", "web", "--type", "merge", "-p", `{"spec":{"replicas":4}}`), 0,
		"deployment.apps/web patched\n", "")
	if got := specJSON(t, f.get(deployR, "default", "web")); !strings.Contains(got, `"replicas":4`) {
		t.Errorf("after retries: %s", got)
	}
	// A resourceVersion in the patch is a precondition.
	expect(t, "stale resourceVersion", f.run("patch", "deploy", "web", "--type", "merge", "-p", `{"metadata":{"resourceVersion":"1"},"spec":{"replicas":5}}`), 1, "",
		"Error from server (Conflict): Operation cannot be fulfilled on deployments.apps \"web\": the object has been modified; please apply your changes to the latest version and try again\n")
	expect(t, "missing", f.run("patch", "deploy", "nope", "-p", `{}`), 1, "",
		"Error from server (NotFound): deployments.apps \"nope\" not found\n")
	expect(t, "no patch", f.run("patch", "deploy", "web"), 1, "",
		"error: a patch is required: -p PATCH or --patch-file FILE\nSee 'outpost patch --help' for usage.\n")
	expect(t, "bad type", f.run("patch", "deploy", "web", "--type", "apply", "-p", "{}"), 1, "",
		"error: --type must be strategic, merge or json, not \"apply\"\nSee 'outpost patch --help' for usage.\n")
	expect(t, "two objects", f.run("patch", "deploy", "web", "api", "-p", "{}"), 1, "",
		"error: patch takes exactly one object: give TYPE NAME or TYPE/NAME\nSee 'outpost patch --help' for usage.\n")
	expect(t, "merge of a list", f.run("patch", "deploy", "web", "--type", "merge", "-p", `[1]`), 1, "",
		"error: invalid patch: a merge patch is a JSON object\n")
}

func TestPatchJSON(t *testing.T) {
	f := newFakeAPI(t)
	f.put(deployR, `{"metadata":{"name":"web","namespace":"default"},"spec":{"replicas":1,"selector":{},"template":{"spec":{"containers":[{"name":"web","image":"web:1"}]}}}}`)
	expect(t, "json", f.run("patch", "deploy/web", "--type", "json", "-p", `[
		{"op":"test","path":"/spec/replicas","value":1.0},
		{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"web:2"},
		{"op":"add","path":"/spec/template/spec/containers/-","value":{"name":"side","image":"side:1"}},
		{"op":"copy","from":"/spec/replicas","path":"/spec/minReadySeconds"},
		{"op":"move","from":"/spec/minReadySeconds","path":"/spec/a~1b"},
		{"op":"remove","path":"/spec/selector"}]`), 0, "deployment.apps/web patched\n", "")
	want := `{"a/b":1,"replicas":1,"template":{"spec":{"containers":[{"image":"web:2","name":"web"},{"image":"side:1","name":"side"}]}}}`
	if got := specJSON(t, f.get(deployR, "default", "web")); got != want {
		t.Errorf("spec\n%s\nwant\n%s", got, want)
	}
	writes := f.writeCount()
	expect(t, "test fails", f.run("patch", "deploy/web", "--type", "json", "-p", `[{"op":"test","path":"/spec/replicas","value":2},{"op":"remove","path":"/spec/replicas"}]`), 1, "",
		"error: invalid patch: operation 0 (test /spec/replicas): test failed: /spec/replicas is not the value given\n")
	expect(t, "missing path", f.run("patch", "deploy/web", "--type", "json", "-p", `[{"op":"remove","path":"/spec/nothing"}]`), 1, "",
		"error: invalid patch: operation 0 (remove /spec/nothing): /spec/nothing does not exist\n")
	expect(t, "out of range", f.run("patch", "deploy/web", "--type", "json", "-p", `[{"op":"add","path":"/spec/template/spec/containers/5","value":{}}]`), 1, "",
		"error: invalid patch: operation 0 (add /spec/template/spec/containers/5): index \"5\" is out of range\n")
	expect(t, "every problem", f.run("patch", "deploy/web", "--type", "json", "-p", `[{"op":"add","path":"/x"},{"op":"jump","path":"/y"},{"op":"move","path":"/z"},3]`), 1, "",
		"error: invalid patch: [0].value: required by add; [1].op: must be add, remove, replace, move, copy or test, not \"jump\"; [2].from: required by move; [3]: not an object\n")
	if f.writeCount() != writes {
		t.Error("a failed patch wrote")
	}
}

func TestPatchStrategic(t *testing.T) {
	f := newFakeAPI(t)
	f.put(deployR, `{"metadata":{"name":"web","namespace":"default"},"spec":{"selector":{},"template":{"spec":{"containers":[
		{"name":"web","image":"web:1","env":[{"name":"A","value":"1"},{"name":"B","value":"2"}]},{"name":"side","image":"side:1"}]}}}}`)
	// The default type, as kubectl's: containers merge by name.
	expect(t, "strategic", f.run("patch", "deployment", "web", "-p", `{"spec":{"template":{"spec":{"containers":[
		{"name":"web","image":"web:2","env":[{"name":"B","$patch":"delete"},{"name":"C","value":"3"}]},{"name":"new","image":"new:1"}]}}}}`), 0,
		"deployment.apps/web patched\n", "")
	want := `{"selector":{},"template":{"spec":{"containers":[{"env":[{"name":"A","value":"1"},{"name":"C","value":"3"}],"image":"web:2","name":"web"},{"image":"side:1","name":"side"},{"image":"new:1","name":"new"}]}}}`
	if got := specJSON(t, f.get(deployR, "default", "web")); got != want {
		t.Errorf("spec\n%s\nwant\n%s", got, want)
	}
	// The same patch as a merge patch replaces the list.
	expect(t, "merge replaces lists", f.run("patch", "deployment", "web", "--type=merge", "-p", `{"spec":{"template":{"spec":{"containers":[{"name":"only","image":"o:1"}]}}}}`), 0,
		"deployment.apps/web patched\n", "")
	if got := specJSON(t, f.get(deployR, "default", "web")); !strings.Contains(got, `"containers":[{"image":"o:1","name":"only"}]`) {
		t.Errorf("merge patch of a list: %s", got)
	}
	expect(t, "directive", f.run("patch", "deployment", "web", "-p", `{"spec":{"$retainKeys":["a"]}}`), 1, "",
		"error: invalid patch: the strategic merge directive $retainKeys at spec.$retainKeys is not supported; use --type json\n")
}

func TestCreateService(t *testing.T) {
	f := newFakeAPI(t)
	expect(t, "clusterip", f.run("create", "service", "clusterip", "web", "--tcp=80:8080", "--tcp=443:https"), 0, "service/web created\n", "")
	want := `{"ports":[{"name":"80-8080","port":80,"protocol":"TCP","targetPort":8080},{"name":"443-https","port":443,"protocol":"TCP","targetPort":"https"}],"selector":{"app":"web"},"type":"ClusterIP"}`
	if got := specJSON(t, f.get(svcR, "default", "web")); got != want {
		t.Errorf("spec\n%s\nwant\n%s", got, want)
	}
	expect(t, "nodeport", f.run("create", "svc", "nodeport", "np", "--tcp=80", "--node-port=30080", "-o", "name"), 0, "service/np\n", "")
	if got := specJSON(t, f.get(svcR, "default", "np")); got != `{"ports":[{"name":"80-80","nodePort":30080,"port":80,"protocol":"TCP","targetPort":80}],"selector":{"app":"np"},"type":"NodePort"}` {
		t.Errorf("nodeport spec %s", got)
	}
	expect(t, "headless", f.run("create", "service", "clusterip", "db", "--clusterip=None", "--dry-run=client", "-o", "json"), 0, `{
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {
        "labels": {
            "app": "db"
        },
        "name": "db"
    },
    "spec": {
        "clusterIP": "None",
        "selector": {
            "app": "db"
        },
        "type": "ClusterIP"
    }
}
`, "")
	expect(t, "externalname", f.run("create", "service", "externalname", "mail", "--external-name=mail.example.com"), 0, "service/mail created\n", "")
	if got := specJSON(t, f.get(svcR, "default", "mail")); got != `{"externalName":"mail.example.com","type":"ExternalName"}` {
		t.Errorf("externalname spec %s", got)
	}
	expect(t, "every problem", f.run("create", "service", "nodeport", "x", "--tcp=0:1", "--tcp=80:", "--node-port=70000"), 1, "",
		"error: invalid --tcp \"0:1\": the port must be a number between 1 and 65535, \"80:\": the target port is empty; --node-port must be between 1 and 65535; --node-port needs exactly one --tcp port\nSee 'outpost create service nodeport --help' for usage.\n")
	expect(t, "no port", f.run("create", "service", "clusterip", "x"), 1, "",
		"error: at least one --tcp=PORT[:TARGET] is required\nSee 'outpost create service clusterip --help' for usage.\n")
	expect(t, "exists", f.run("create", "service", "clusterip", "web", "--tcp=80"), 1, "",
		"Error from server (AlreadyExists): services \"web\" already exists\n")
	expect(t, "namespace exists", f.run("create", "namespace", "default"), 0, "namespace/default created\n", "")
	expect(t, "namespace again", f.run("create", "namespace", "default"), 1, "",
		"Error from server (AlreadyExists): namespaces \"default\" already exists\n")
}

// TestCreateServiceValid checks the services create service builds pass
// the server's validation (port names, target ports, headless).
func TestCreateServiceValid(t *testing.T) {
	f := newFakeAPI(t)
	for _, args := range [][]string{
		{"clusterip", "a", "--tcp=80:8080", "--tcp=443:https"},
		{"clusterip", "b", "--clusterip=None"},
		{"nodeport", "c", "--tcp=80", "--node-port=30080"},
		{"loadbalancer", "d", "--tcp=53:5353"},
		{"externalname", "e", "--external-name=mail.example.com"},
	} {
		res := f.run(append([]string{"create", "service"}, append(args, "--dry-run=client", "-o", "json", "-n", "default")...)...)
		obj, err := client.DecodeObject(svcR, []byte(res.stdout))
		if err != nil || res.code != 0 {
			t.Fatalf("%v: %v, code %d %s", args, err, res.code, res.stderr)
		}
		if errs := api.Validate(obj); len(errs) > 0 {
			t.Errorf("%v: invalid: %v", args, errs)
		}
	}
}

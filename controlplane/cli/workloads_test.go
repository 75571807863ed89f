package cli

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/outpost-edge/outpost/controlplane/api"
)

var (
	rsR = api.ResourceForKind("ReplicaSet")
	dsR = api.ResourceForKind("DaemonSet")
)

func TestScale(t *testing.T) {
	f := newFakeAPI(t)
	f.put(deployR, `{"metadata":{"name":"web","namespace":"default"},"spec":{"replicas":2,"selector":{},"futureField":"kept"}}`)
	f.put(rsR, `{"metadata":{"name":"web-1","namespace":"shop","labels":{"app":"web"}},"spec":{"selector":{}}}`)
	f.put(rsR, `{"metadata":{"name":"web-2","namespace":"shop","labels":{"app":"web"}},"spec":{"replicas":4,"selector":{}}}`)
	replicasOf := func(r *api.Resource, ns, name string) any {
		return f.get(r, ns, name)["spec"].(map[string]any)["replicas"]
	}

	expect(t, "scale", f.run("scale", "deployment/web", "--replicas=3"), 0, "deployment.apps/web scaled\n", "")
	if got := replicasOf(deployR, "default", "web"); got != json.Number("3") {
		t.Errorf("replicas %v after scale, want 3", got)
	}
	if f.get(deployR, "default", "web")["spec"].(map[string]any)["futureField"] != "kept" {
		t.Error("scale lost a field this build does not know")
	}
	writes := f.writeCount()
	expect(t, "precondition fails", f.run("scale", "deploy", "web", "--replicas=5", "--current-replicas=2"), 1, "",
		"error: precondition failed: expected replicas to be 2, was 3\n")
	if f.writeCount() != writes || replicasOf(deployR, "default", "web") != json.Number("3") {
		t.Error("a failed --current-replicas precondition still wrote")
	}
	expect(t, "precondition holds", f.run("scale", "--current-replicas=3", "--replicas=5", "deployment", "web"), 0, "deployment.apps/web scaled\n", "")
	writes = f.writeCount()
	expect(t, "same count", f.run("scale", "deployment/web", "--replicas=5"), 0, "deployment.apps/web scaled\n", "")
	if f.writeCount() != writes {
		t.Error("scaling to the current count wrote")
	}
	f.mu.Lock()
	f.conflicts = 2
	f.mu.Unlock()
	expect(t, "conflicts retried", f.run("scale", "deployment/web", "--replicas=0"), 0, "deployment.apps/web scaled\n", "")
	if got := replicasOf(deployR, "default", "web"); got != json.Number("0") {
		t.Errorf("replicas %v after scale to 0", got)
	}

	// A replica set without spec.replicas has the default 1.
	expect(t, "rs default replicas", f.run("scale", "rs", "web-1", "--current-replicas=1", "--replicas=2", "-n", "shop"), 0, "replicaset.apps/web-1 scaled\n", "")
	expect(t, "rs by selector", f.run("scale", "replicasets", "-l", "app=web", "--replicas=1", "-n", "shop"), 0,
		"replicaset.apps/web-1 scaled\nreplicaset.apps/web-2 scaled\n", "")
	if replicasOf(rsR, "shop", "web-1") != json.Number("1") || replicasOf(rsR, "shop", "web-2") != json.Number("1") {
		t.Error("scale -l did not scale both replica sets")
	}
	expect(t, "missing", f.run("scale", "deployment/nope", "--replicas=1"), 1, "", "Error from server (NotFound): deployments.apps \"nope\" not found\n")
	expect(t, "no --replicas", f.run("scale", "deployment/web"), 1, "",
		"error: --replicas=COUNT is required, and COUNT must be 0 or more\nSee 'outpost scale --help' for usage.\n")
	expect(t, "pods", f.run("scale", "pod/x", "--replicas=1"), 1, "",
		"error: pods cannot be scaled: only deployments and replicasets have replicas\nSee 'outpost scale --help' for usage.\n")
}

func TestRolloutStatusMessages(t *testing.T) {
	tests := []struct {
		what, obj string
		code      int
		stdout    string
		stderr    string
	}{
		{"not observed", `{"metadata":{"name":"web","generation":3},"spec":{"replicas":3},"status":{"observedGeneration":2}}`, 0,
			"Waiting for deployment spec update to be observed...\n", ""},
		{"updating", `{"metadata":{"name":"web","generation":2},"spec":{"replicas":3},"status":{"observedGeneration":2,"replicas":4,"updatedReplicas":1}}`, 0,
			"Waiting for deployment \"web\" rollout to finish: 1 out of 3 new replicas have been updated...\n", ""},
		{"old pending", `{"metadata":{"name":"web","generation":2},"spec":{"replicas":3},"status":{"observedGeneration":2,"replicas":5,"updatedReplicas":3}}`, 0,
			"Waiting for deployment \"web\" rollout to finish: 2 old replicas are pending termination...\n", ""},
		{"availability", `{"metadata":{"name":"web","generation":2},"spec":{"replicas":3},"status":{"observedGeneration":2,"replicas":3,"updatedReplicas":3,"availableReplicas":1}}`, 0,
			"Waiting for deployment \"web\" rollout to finish: 1 of 3 updated replicas are available...\n", ""},
		{"done", `{"metadata":{"name":"web","generation":2},"spec":{"replicas":3},"status":{"observedGeneration":2,"replicas":3,"updatedReplicas":3,"availableReplicas":3}}`, 0,
			"deployment \"web\" successfully rolled out\n", ""},
		{"deadline", `{"metadata":{"name":"web","generation":2},"spec":{"replicas":3},"status":{"observedGeneration":2,"replicas":3,"updatedReplicas":1,
			"conditions":[{"type":"Progressing","status":"False","reason":"ProgressDeadlineExceeded"}]}}`, 1,
			"", "error: deployment \"web\" exceeded its progress deadline\n"},
	}
	for _, tt := range tests {
		f := newFakeAPI(t)
		m, _ := decodeJSONMap([]byte(tt.obj))
		m["metadata"].(map[string]any)["namespace"] = "default"
		b, _ := json.Marshal(m)
		f.put(deployR, string(b))
		expect(t, tt.what, f.run("rollout", "status", "deployment/web", "--watch=false"), tt.code, tt.stdout, tt.stderr)
	}

	f := newFakeAPI(t)
	f.put(dsR, `{"metadata":{"name":"agent","namespace":"default","generation":1},"spec":{"selector":{}},
		"status":{"observedGeneration":1,"desiredNumberScheduled":4,"updatedNumberScheduled":4,"numberAvailable":2}}`)
	expect(t, "daemon set", f.run("rollout", "status", "ds", "agent", "--watch=false"), 0,
		"Waiting for daemon set \"agent\" rollout to finish: 2 of 4 updated pods are available...\n", "")
	f.put(dsR, `{"metadata":{"name":"ondelete","namespace":"default"},"spec":{"selector":{},"updateStrategy":{"type":"OnDelete"}}}`)
	res := f.run("rollout", "status", "daemonset/ondelete")
	if res.code != 1 || !strings.Contains(res.stderr, "rollout status is not available for daemon set \"ondelete\"") {
		t.Errorf("OnDelete daemon set: %+v", res)
	}
	expect(t, "replica set", f.run("rollout", "status", "rs/x"), 1, "",
		"error: rollout status is not available for replicasets\nSee 'outpost rollout status --help' for usage.\n")
}

// TestRolloutStatusWatches follows a rollout through the watch until it
// is done, and gives up when --timeout passes.
func TestRolloutStatusWatches(t *testing.T) {
	f := newFakeAPI(t)
	f.put(deployR, `{"metadata":{"name":"web","namespace":"default","generation":2},"spec":{"replicas":3},
		"status":{"observedGeneration":2,"replicas":3,"updatedReplicas":3,"availableReplicas":1}}`)
	f.beforeWatch = func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.objs[key(deployR, "default", "web")]["status"].(map[string]any)["availableReplicas"] = json.Number("3")
	}
	expect(t, "watch", f.run("rollout", "status", "deployment/web"), 0,
		"Waiting for deployment \"web\" rollout to finish: 1 of 3 updated replicas are available...\n"+
			"deployment \"web\" successfully rolled out\n", "")
	if !f.sawRequest("GET /apis/apps/v1/namespaces/default/deployments?fieldSelector=metadata.name%3Dweb&resourceVersion=1&watch=true") {
		t.Errorf("the watch did not start from the object's resourceVersion: %v", f.requests)
	}

	// The controller gives up while status follows: exit 1 with kubectl's
	// message (issue 15 item 7).
	f = newFakeAPI(t)
	f.put(deployR, `{"metadata":{"name":"web","namespace":"default","generation":2},"spec":{"replicas":3},
		"status":{"observedGeneration":2,"replicas":3,"updatedReplicas":1}}`)
	f.beforeWatch = func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.objs[key(deployR, "default", "web")]["status"].(map[string]any)["conditions"] = []any{
			map[string]any{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}}
	}
	expect(t, "deadline while watching", f.run("rollout", "status", "deployment/web"), 1,
		"Waiting for deployment \"web\" rollout to finish: 1 out of 3 new replicas have been updated...\n",
		"error: deployment \"web\" exceeded its progress deadline\n")

	f = newFakeAPI(t)
	f.put(deployR, `{"metadata":{"name":"web","namespace":"default","generation":2},"spec":{"replicas":3},"status":{"observedGeneration":1}}`)
	expect(t, "timeout", f.run("rollout", "status", "deployment/web", "--timeout=200ms"), 1,
		"Waiting for deployment spec update to be observed...\n", "error: timed out waiting for the condition\n")
}

// rolloutFixture is a deployment at revision 3 with three ReplicaSets of
// its own and one of another deployment with a higher revision, which
// undo must not mistake for part of web's history.
func rolloutFixture(f *fakeAPI) {
	f.put(deployR, `{"metadata":{"name":"web","namespace":"default","uid":"uid-web"},"spec":{"replicas":2,"selector":{"matchLabels":{"app":"web"}},
		"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"web","image":"web:3"}]}}}}`)
	rs := func(name, uid, rev, image, cause string) {
		ann := `"` + revisionAnnotation + `":"` + rev + `"`
		if cause != "" {
			ann += `,"` + changeCauseAnnotation + `":"` + cause + `"`
		}
		f.put(rsR, `{"metadata":{"name":"`+name+`","namespace":"default","annotations":{`+ann+`},
			"ownerReferences":[{"apiVersion":"apps/v1","kind":"Deployment","name":"x","uid":"`+uid+`","controller":true}]},
			"spec":{"replicas":0,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web","pod-template-hash":"h`+rev+`"}},
			"spec":{"containers":[{"name":"web","image":"`+image+`","futureField":"kept"}]}}}}`)
	}
	rs("web-h1", "uid-web", "1", "web:1", "first")
	rs("web-h3", "uid-web", "3", "web:3", "")
	rs("web-h2", "uid-web", "2", "web:2", "")
	rs("other-h9", "uid-other", "9", "other:9", "")
}

// deployTemplate returns the stored deployment's template labels and
// first container.
func deployTemplate(f *fakeAPI) (map[string]any, map[string]any) {
	tmpl := f.get(deployR, "default", "web")["spec"].(map[string]any)["template"].(map[string]any)
	labels := tmpl["metadata"].(map[string]any)["labels"].(map[string]any)
	c := tmpl["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
	return labels, c
}

func TestRolloutUndo(t *testing.T) {
	f := newFakeAPI(t)
	rolloutFixture(f)
	f.mu.Lock()
	f.conflicts = 1
	f.mu.Unlock()
	expect(t, "undo", f.run("rollout", "undo", "deployment/web"), 0, "deployment.apps/web rolled back\n", "")
	labels, c := deployTemplate(f)
	if c["image"] != "web:2" || c["futureField"] != "kept" {
		t.Errorf("after undo the container is %v, want revision 2's, whole", c)
	}
	if _, ok := labels[templateHashLabel]; ok || labels["app"] != "web" {
		t.Errorf("after undo the template labels are %v, want app=web without the hash label", labels)
	}
	if f.get(rsR, "default", "web-h2")["spec"].(map[string]any)["template"].(map[string]any)["metadata"].(map[string]any)["labels"].(map[string]any)[templateHashLabel] != "h2" {
		t.Error("undo changed the ReplicaSet it copied from")
	}

	expect(t, "undo to the current template", f.run("rollout", "undo", "deploy", "web", "--to-revision=2"), 0,
		"deployment.apps/web skipped rollback (current template already matches revision 2)\n", "")
	expect(t, "undo to a revision", f.run("rollout", "undo", "deployment/web", "--to-revision=1"), 0, "deployment.apps/web rolled back\n", "")
	if _, c := deployTemplate(f); c["image"] != "web:1" {
		t.Errorf("after undo --to-revision=1 the image is %v", c["image"])
	}
	writes := f.writeCount()
	expect(t, "unknown revision", f.run("rollout", "undo", "deployment/web", "--to-revision=9"), 1, "",
		"error: unable to find the specified revision 9 in the history of deployment \"web\"\n")
	if f.writeCount() != writes {
		t.Error("a refused undo wrote")
	}

	f = newFakeAPI(t)
	f.put(deployR, `{"metadata":{"name":"solo","namespace":"default","uid":"uid-solo"},"spec":{"selector":{},"template":{}}}`)
	f.put(rsR, `{"metadata":{"name":"solo-h1","namespace":"default","annotations":{"`+revisionAnnotation+`":"1"},
		"ownerReferences":[{"kind":"Deployment","name":"solo","uid":"uid-solo","controller":true}]},"spec":{"selector":{},"template":{}}}`)
	expect(t, "no earlier revision", f.run("rollout", "undo", "deployment/solo"), 1, "",
		"error: no rollout history found for deployment \"solo\": there is no earlier revision to go back to\n")
	f.put(deployR, `{"metadata":{"name":"paused","namespace":"default","uid":"uid-p"},"spec":{"paused":true,"selector":{},"template":{}}}`)
	res := f.run("rollout", "undo", "deployment/paused")
	if res.code != 1 || !strings.HasPrefix(res.stderr, "error: cannot roll back a paused deployment") {
		t.Errorf("undo of a paused deployment: %+v", res)
	}
	// The daemon set controller keeps no ControllerRevisions: the
	// refusal says so, for undo and history alike.
	for _, verb := range []string{"undo", "history"} {
		res := f.run("rollout", verb, "ds/agent")
		if res.code != 1 || !strings.HasPrefix(res.stderr, "error: rollout "+verb+" is not available for daemonsets: outpost's daemon set controller keeps no ControllerRevisions") {
			t.Errorf("%s of a daemon set: %+v", verb, res)
		}
	}
}

func TestRolloutPauseResume(t *testing.T) {
	f := newFakeAPI(t)
	f.put(deployR, `{"metadata":{"name":"web","namespace":"default"},"spec":{"replicas":2,"selector":{},"template":{}}}`)
	f.put(deployR, `{"metadata":{"name":"api","namespace":"default"},"spec":{"replicas":1,"selector":{},"template":{}}}`)
	f.put(dsR, `{"metadata":{"name":"agent","namespace":"default"},"spec":{"selector":{},"template":{}}}`)
	paused := func(name string) any { return f.get(deployR, "default", name)["spec"].(map[string]any)["paused"] }

	expect(t, "pause", f.run("rollout", "pause", "deployment/web", "deploy/api"), 0,
		"deployment.apps/web paused\ndeployment.apps/api paused\n", "")
	if paused("web") != true || paused("api") != true {
		t.Fatalf("after pause spec.paused is %v, %v", paused("web"), paused("api"))
	}
	f.expectNoWrites(t, "pause twice", []string{"rollout", "pause", "deployment/web"}, 1, "",
		"error: deployments.apps \"web\" is already paused\n")
	expect(t, "resume", f.run("rollout", "resume", "deploy", "web"), 0, "deployment.apps/web resumed\n", "")
	if p := paused("web"); p != nil {
		t.Errorf("after resume spec.paused is %v, want it gone", p)
	}
	f.expectNoWrites(t, "resume twice", []string{"rollout", "resume", "deployment/web"}, 1, "",
		"error: deployments.apps \"web\" is not paused\n")
	expect(t, "resume by selector", f.run("rollout", "resume", "deploy", "--all"), 1, "deployment.apps/api resumed\n",
		"error: deployments.apps \"web\" is not paused\n")
	expect(t, "pause a daemon set", f.run("rollout", "pause", "ds/agent"), 1, "",
		"error: rollout pause is not available for daemonsets: only deployments can be paused\nSee 'outpost rollout pause --help' for usage.\n")
}

func TestRolloutHistory(t *testing.T) {
	f := newFakeAPI(t)
	rolloutFixture(f)
	expect(t, "history", f.run("rollout", "history", "deployment/web"), 0,
		"deployment.apps/web\nREVISION   CHANGE-CAUSE\n1          first\n2          <none>\n3          <none>\n", "")
	res := f.run("rollout", "history", "deployment/web", "--revision=2")
	if res.code != 0 || !strings.HasPrefix(res.stdout, "deployment.apps/web with revision #2\nPod Template:\n  Labels:  app=web\n") ||
		!strings.Contains(res.stdout, "    Image:         web:2\n") {
		t.Errorf("history --revision=2: %+v", res)
	}
	f.put(deployR, `{"metadata":{"name":"new","namespace":"default","uid":"uid-new"},"spec":{"selector":{},"template":{}}}`)
	expect(t, "empty history", f.run("rollout", "history", "deploy/new"), 0, "No rollout history found.\n", "")
}

// The fields the README says are accepted with a warning and not stored
// are not recorded in the last-applied annotation either: what is
// recorded is what is stored (issue 15 item 7); applying again changes
// nothing.
func TestLastAppliedOmitsUnstoredFields(t *testing.T) {
	f := newFakeAPI(t)
	file := writeFile(t, t.TempDir(), "web.yaml", `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: default
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      serviceAccountName: web
      securityContext: {runAsNonRoot: true}
      containers:
      - name: web
        image: nginx:1.27
        securityContext: {readOnlyRootFilesystem: true}
        livenessProbe: {httpGet: {path: /, port: 80}}
`)
	expect(t, "apply", f.run("apply", "-f", file), 0, "deployment.apps/web created\n", "")
	d := f.get(deployR, "default", "web")
	la := d["metadata"].(map[string]any)["annotations"].(map[string]any)[LastAppliedAnnotation].(string)
	for _, gone := range []string{"serviceAccountName", "securityContext", "livenessProbe"} {
		if strings.Contains(la, gone) {
			t.Errorf("last-applied keeps %s, which is not stored: %s", gone, la)
		}
	}
	if !strings.Contains(la, `"image":"nginx:1.27"`) || !strings.Contains(la, `"replicas":2`) {
		t.Errorf("last-applied lost what is stored: %s", la)
	}
	expect(t, "apply again", f.run("apply", "-f", file), 0, "deployment.apps/web unchanged\n", "")
}

// describe deployment names its new and old replica sets as kubectl does,
// shows the template's annotations, and indents container names under
// "Containers:" by three spaces (rollout history --revision too).
func TestDescribeDeploymentReplicaSets(t *testing.T) {
	f := newFakeAPI(t)
	rolloutFixture(f)
	// Revision 2 still has pods (a rollout under way); revision 3 runs
	// the deployment's template.
	f.put(rsR, `{"metadata":{"name":"web-h2","namespace":"default","annotations":{"`+revisionAnnotation+`":"2"},
		"ownerReferences":[{"kind":"Deployment","name":"web","uid":"uid-web","controller":true}]},
		"spec":{"replicas":1,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web","pod-template-hash":"h2"}},
		"spec":{"containers":[{"name":"web","image":"web:2"}]}}},"status":{"replicas":1}}`)
	f.put(rsR, `{"metadata":{"name":"web-h3","namespace":"default","annotations":{"`+revisionAnnotation+`":"3"},
		"ownerReferences":[{"kind":"Deployment","name":"web","uid":"uid-web","controller":true}]},
		"spec":{"replicas":2,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web","pod-template-hash":"h3"}},
		"spec":{"containers":[{"name":"web","image":"web:3"}]}}},"status":{"replicas":1}}`)
	res := f.run("describe", "deployment", "web")
	for _, want := range []string{
		`\nOldReplicaSets: +web-h2 \(1/1 replicas created\)\n`,
		`\nNewReplicaSet: +web-h3 \(1/2 replicas created\)\n`,
		`\n  Containers:\n   web:\n    Image:`,
	} {
		if res.code != 0 || !regexp.MustCompile(want).MatchString(res.stdout) {
			t.Errorf("describe deployment: want %q in\n%s%s", want, res.stdout, res.stderr)
		}
	}

	// A restarted deployment: the template carries restartedAt; no
	// replica set runs that template yet, the deployment's revision
	// annotation names the new one.
	f.put(deployR, `{"metadata":{"name":"web","namespace":"default","uid":"uid-web","annotations":{"`+revisionAnnotation+`":"3"}},"spec":{"replicas":2,"selector":{"matchLabels":{"app":"web"}},
		"template":{"metadata":{"labels":{"app":"web"},"annotations":{"kubectl.kubernetes.io/restartedAt":"2026-01-01T01:00:00Z"}},"spec":{"containers":[{"name":"web","image":"web:3"}]}}}}`)
	res = f.run("describe", "deploy/web")
	for _, want := range []string{
		`\nPod Template:\n  Labels:       app=web\n  Annotations:  kubectl.kubernetes.io/restartedAt: 2026-01-01T01:00:00Z\n  Containers:\n   web:\n`,
		`\nOldReplicaSets: +web-h2 \(1/1 replicas created\)\n`,
		`\nNewReplicaSet: +web-h3 \(1/2 replicas created\)\n`,
	} {
		if res.code != 0 || !regexp.MustCompile(want).MatchString(res.stdout) {
			t.Errorf("describe restarted deployment: want %q in\n%s%s", want, res.stdout, res.stderr)
		}
	}

	f.put(deployR, `{"metadata":{"name":"new","namespace":"default","uid":"uid-new"},"spec":{"selector":{},"template":{}}}`)
	res = f.run("describe", "deploy/new")
	if res.code != 0 || !regexp.MustCompile(`\nOldReplicaSets: +<none>\nNewReplicaSet: +<none>\n`).MatchString(res.stdout) {
		t.Errorf("describe deployment without replica sets:\n%s%s", res.stdout, res.stderr)
	}

	res = f.run("rollout", "history", "deployment/web", "--revision=2")
	if res.code != 0 || !strings.Contains(res.stdout, "\n  Containers:\n   web:\n    Image:         web:2\n") {
		t.Errorf("history --revision=2:\n%s%s", res.stdout, res.stderr)
	}
}

package cli

import (
	"bytes"
	"strings"
	"testing"
)

func TestDiff(t *testing.T) {
	f := newFakeAPI(t)
	dir := t.TempDir()
	const pod = `apiVersion: v1
kind: Pod
metadata:
  name: web
  labels: {app: web}
spec:
  containers:
  - name: web
    image: web:1
`
	file := writeFile(t, dir, "web.yaml", pod)

	res := f.run("diff", "-f", file)
	if res.code != 1 || res.stderr != "" ||
		!strings.HasPrefix(res.stdout, "diff -u -N LIVE/v1.Pod.default.web MERGED/v1.Pod.default.web\n--- LIVE/v1.Pod.default.web\n+++ MERGED/v1.Pod.default.web\n@@ -0,0 +1,") ||
		!strings.Contains(res.stdout, "\n+  - image: web:1\n") || strings.Contains(res.stdout, "\n- ") {
		t.Errorf("diff of an absent object: code %d\n%s%s\nwant it all added, exit 1", res.code, res.stdout, res.stderr)
	}
	if f.writeCount() != 0 {
		t.Error("diff wrote")
	}

	expect(t, "apply", f.run("apply", "-f", file), 0, "pod/web created\n", "")
	// The server defaulted fields and added a toleration and a status:
	// none of that is a difference.
	expect(t, "no difference", f.run("diff", "-f", file), 0, "", "")

	writeFile(t, dir, "web.yaml", strings.Replace(pod, "web:1", "web:2", 1))
	res = f.run("diff", "-f", file)
	if res.code != 1 || res.stderr != "" ||
		!strings.Contains(res.stdout, "\n-  - image: web:1\n+  - image: web:2\n     imagePullPolicy: IfNotPresent\n") {
		t.Errorf("diff of a changed image: code %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if strings.Contains(res.stdout, "tolerations") {
		t.Errorf("the diff shows unchanged lines far from the change:\n%s", res.stdout)
	}
	writes := f.writeCount()
	expect(t, "apply the change", f.run("apply", "-f", file), 0, "pod/web configured\n", "")
	expect(t, "applied", f.run("diff", "-f", file), 0, "", "")
	if f.writeCount() != writes+1 {
		t.Error("diff wrote")
	}

	bad := writeFile(t, dir, "bad.yaml", "kind: Pod\n")
	expect(t, "error", f.run("diff", "-f", bad, "-f", file), 2, "", "error: error validating \""+bad+"\": apiVersion not set\n")
	expect(t, "no -f", f.run("diff"), 2, "", "error: must specify one of -f\n")
}

func TestUnifiedDiff(t *testing.T) {
	lines := func(s string) []string {
		if s == "" {
			return nil
		}
		return splitLines(s)
	}
	for _, tc := range []struct{ what, a, b, want string }{
		{"one change", "a\nb\nc\nd\ne\nf\ng\nh\n", "a\nb\nc\nd\nE\nf\ng\nh\n",
			"@@ -2,7 +2,7 @@\n b\n c\n d\n-e\n+E\n f\n g\n h\n"},
		{"two hunks", "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n", "x\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\ny\n",
			"@@ -1,4 +1,4 @@\n-1\n+x\n 2\n 3\n 4\n@@ -9,4 +9,4 @@\n 9\n 10\n 11\n-12\n+y\n"},
		{"close changes share a hunk", "1\n2\n3\n4\n5\n6\n7\n", "x\n2\n3\n4\n5\n6\ny\n",
			"@@ -1,7 +1,7 @@\n-1\n+x\n 2\n 3\n 4\n 5\n 6\n-7\n+y\n"},
		{"added", "", "a\nb\n", "@@ -0,0 +1,2 @@\n+a\n+b\n"},
		{"removed one line", "a\nb\nc\n", "a\nc\n", "@@ -1,3 +1,2 @@\n a\n-b\n c\n"},
		{"one line each", "a\n", "b\n", "@@ -1 +1 @@\n-a\n+b\n"},
		{"no newline", "a\nb", "a\nc", "@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file\n"},
		{"same", "a\nb\n", "a\nb\n", ""},
	} {
		var b bytes.Buffer
		unifiedDiff(&b, lines(tc.a), lines(tc.b), 3)
		if b.String() != tc.want {
			t.Errorf("%s:\n%s\nwant\n%s", tc.what, b.String(), tc.want)
		}
	}
}

// TestDiffAsApplyStores: diff judges a manifest as apply's write is
// judged, by the server's strict decoder, and compares what the server
// would store of it (issue 15 review item 2).
func TestDiffAsApplyStores(t *testing.T) {
	f := newFakeAPI(t)
	dir := t.TempDir()
	const deploy = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: web, image: "web:1", securityContext: {runAsNonRoot: true}}
`
	typo := writeFile(t, dir, "typo.yaml", strings.Replace(deploy, "replicas: 2", "replicaz: 2", 1))
	expect(t, "unknown field", f.run("diff", "-f", typo), 2, "",
		`Error from server (Invalid): deployment.apps/web from "`+typo+`": Deployment "web" is invalid: spec.replicaz: unknown field: did you mean "replicas"?`+"\n")

	file := writeFile(t, dir, "web.yaml", deploy)
	warning := "Warning: spec.template.spec.containers[0].securityContext: accepted but not acted on by outpost\n"
	res := f.run("diff", "-f", file)
	if res.code != 1 || res.stderr != warning || !strings.Contains(res.stdout, "\n+  replicas: 2\n") || strings.Contains(res.stdout, "securityContext") {
		t.Errorf("diff of a new deployment: code %d\n%s%s\nwant it without securityContext, exit 1, the warning", res.code, res.stdout, res.stderr)
	}
	expect(t, "apply", f.run("apply", "-f", file), 0, "deployment.apps/web created\n", "")
	expect(t, "no difference", f.run("diff", "-f", file), 0, "", warning)
}

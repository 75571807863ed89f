package cli

import (
	"strings"
	"testing"
)

// seedSortPods stores pods whose names, restart counts and creation
// times are in three different orders, and one pod without a status.
func seedSortPods(f *fakeAPI) {
	f.put(podR, `{"metadata":{"name":"a","namespace":"default","creationTimestamp":"2026-01-01T01:00:00Z","labels":{"app":"web","tier":"front"}},"spec":{"containers":[{"name":"c","image":"web:1"},{"name":"d","image":"log:2"}]},"status":{"phase":"Running","containerStatuses":[{"name":"c","ready":true,"restartCount":10}]}}`)
	f.put(podR, `{"metadata":{"name":"b","namespace":"default","creationTimestamp":"2026-01-01T00:30:00Z"},"spec":{"containers":[{"name":"c"}]},"status":{"phase":"Running","containerStatuses":[{"name":"c","ready":true,"restartCount":9}]}}`)
	f.put(podR, `{"metadata":{"name":"c","namespace":"default","creationTimestamp":"2026-01-01T01:30:00Z"},"spec":{"containers":[{"name":"c"}]},"status":{"phase":"Pending"}}`)
}

func TestGetSortByAndNoHeaders(t *testing.T) {
	f := newFakeAPI(t)
	seedSortPods(f)

	// Numbers sort as numbers (9 before 10), a pod without the field
	// comes first.
	expect(t, "sort by restarts", f.run("get", "pods", "--sort-by=.status.containerStatuses[0].restartCount", "-o", "name"), 0,
		"pod/c\npod/b\npod/a\n", "")
	expect(t, "sort by creation, {} form", f.run("get", "pods", "--sort-by={.metadata.creationTimestamp}", "-o", "name"), 0,
		"pod/b\npod/a\npod/c\n", "")
	expect(t, "sort without leading dot", f.run("get", "pods", "--sort-by", "status.phase", "-o", "name"), 0,
		"pod/c\npod/a\npod/b\n", "")
	expect(t, "table sorted, no headers", f.run("get", "pods", "--sort-by=.metadata.creationTimestamp", "--no-headers"), 0,
		"b   1/1   Running   9    90m\na   1/2   Running   10   60m\nc   0/1   Pending   0    30m\n", "")
	res := f.run("get", "pods", "-o", "wide", "--no-headers", "--sort-by=.metadata.creationTimestamp")
	if res.code != 0 || strings.Contains(res.stdout, "NAME") || !strings.HasPrefix(res.stdout, "b ") || strings.Count(res.stdout, "\n") != 3 {
		t.Errorf("wide --no-headers: code %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	expect(t, "custom-columns sorted", f.run("get", "pods", "-o", "custom-columns=NAME:.metadata.name,RESTARTS:.status.containerStatuses[0].restartCount", "--sort-by=.status.containerStatuses[0].restartCount"), 0,
		"NAME   RESTARTS\nc      <none>\nb      9\na      10\n", "")
	expect(t, "custom-columns no headers", f.run("get", "pods", "-o", "custom-columns=NAME:.metadata.name", "--no-headers", "--sort-by=.metadata.creationTimestamp"), 0,
		"b\na\nc\n", "")
	expect(t, "jsonpath sorted", f.run("get", "pods", "-o", "jsonpath={.items[*].metadata.name}", "--sort-by=.metadata.creationTimestamp"), 0,
		"b a c", "")

	expect(t, "sort by a field no object has", f.run("get", "pods", "--sort-by=.metadata.nmae"), 1,
		"", "error: couldn't find any field with path \".metadata.nmae\" in the list of objects\n")
	res = f.run("get", "pods", "--sort-by=.metadata[")
	if res.code != 1 || !strings.Contains(res.stderr, "--sort-by") {
		t.Errorf("bad --sort-by: code %d, stderr %q", res.code, res.stderr)
	}
}

// TestCustomColumnsMapsAsKubectl: custom-columns prints maps and lists in
// kubectl's (Go's) notation, -o jsonpath keeps JSON.
func TestCustomColumnsMapsAsKubectl(t *testing.T) {
	f := newFakeAPI(t)
	seedSortPods(f)
	expect(t, "custom-columns map and list", f.run("get", "pod", "a", "-o", "custom-columns=LABELS:.metadata.labels,IMAGES:.spec.containers[*].image,C:.spec.containers[1]"), 0,
		"LABELS                    IMAGES        C\nmap[app:web tier:front]   web:1,log:2   map[image:log:2 name:d]\n", "")
	expect(t, "jsonpath map stays JSON", f.run("get", "pod", "a", "-o", "jsonpath={.metadata.labels}"), 0,
		`{"app":"web","tier":"front"}`, "")
	expect(t, "custom-columns list", f.run("get", "pod", "a", "-o", "custom-columns=NAMES:.spec.containers[*].name,ALL:.spec.containers"), 0,
		"NAMES   ALL\nc,d     [map[image:web:1 name:c] map[image:log:2 name:d]]\n", "")
}

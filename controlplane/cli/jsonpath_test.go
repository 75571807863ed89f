package cli

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// A document in the shape `get nodes -o json` prints.
const nodeList = `{"apiVersion":"v1","kind":"List","items":[
 {"kind":"Node","metadata":{"name":"n1","labels":{"app.kubernetes.io/name":"edge","zone":"a"}},
  "status":{"capacity":{"cpu":"4","pods":110},"conditions":[{"type":"MemoryPressure","status":"False"},{"type":"Ready","status":"True"}],
   "addresses":[{"type":"InternalIP","address":"10.0.0.1"},{"type":"Hostname","address":"n1"}]}},
 {"kind":"Node","metadata":{"name":"n2","labels":{"zone":"b"}},
  "status":{"capacity":{"cpu":"2","pods":20},"conditions":[{"type":"Ready","status":"False"}],"addresses":[{"type":"InternalIP","address":"10.0.0.2"}]}}
]}`

func TestJSONPathTemplates(t *testing.T) {
	for _, tc := range []struct{ tmpl, want string }{
		{`{.kind}`, "List"},
		{`{$.kind}`, "List"},
		{`{.items[*].metadata.name}`, "n1 n2"},
		{`{.items[0].metadata.name}`, "n1"},
		{`{.items[-1].metadata.name}`, "n2"},
		{`{.items[5].metadata.name}`, ""}, // out of range: nothing, as a missing key
		{`{.items[0:1].metadata.name}`, "n1"},
		{`{.items[*].metadata.nosuch}`, ""},
		{`names: {.items[*].metadata.name}!`, "names: n1 n2!"},
		{`{range .items[*]}{.metadata.name}{"\t"}{.status.capacity.cpu}{"\n"}{end}`, "n1\t4\nn2\t2\n"},
		{`{range .items}{.metadata.name}{','}{end}`, "n1,n2,"},
		{`{range .items[*]}{.metadata.name}:{range .status.addresses[*]}{.type}={.address} {end};{end}`,
			"n1:InternalIP=10.0.0.1 Hostname=n1 ;n2:InternalIP=10.0.0.2 ;"},
		{`{.items[*].status.conditions[?(@.type=="Ready")].status}`, "True False"},
		{`{.items[?(@.status.capacity.pods > 100)].metadata.name}`, "n1"},
		{`{.items[?(@.status.capacity.pods<=20)].metadata.name}`, "n2"},
		{`{.items[?(@.metadata.labels.zone != 'a')].metadata.name}`, "n2"},
		{`{.items[?(@.metadata.labels.app\.kubernetes\.io/name)].metadata.name}`, "n1"},
		{`{.items[0].metadata.labels['app.kubernetes.io/name']}`, "edge"},
		{`{.items[0].metadata.labels}`, `{"app.kubernetes.io/name":"edge","zone":"a"}`},
		{`{.items[0].status.capacity.pods}`, "110"},
		{`{.items[1].metadata.labels.*}`, "b"},
		{`{..address}`, "10.0.0.1 n1 10.0.0.2"},
		{`{range .items[*]}{@.metadata.name}{end}`, "n1n2"},
		{`{"a}b"}`, "a}b"},
	} {
		tp, err := parseJSONPath(tc.tmpl)
		if err != nil {
			t.Errorf("%s: %v", tc.tmpl, err)
			continue
		}
		var b bytes.Buffer
		if err := (jsonPathPrinter{tp}).printDoc(&b, []byte(nodeList)); err != nil {
			t.Errorf("%s: %v", tc.tmpl, err)
			continue
		}
		if b.String() != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.tmpl, b.String(), tc.want)
		}
	}
}

// TestJSONPathErrorsNameTheProblem: each error quotes the template, says
// what is wrong and where: the offset of the problem in the template, not
// of its action (issue 15 review item 7).
func TestJSONPathErrorsNameTheProblem(t *testing.T) {
	for _, tc := range []struct {
		tmpl, want string
		at         int
	}{
		{`{.items[*].metadata.name`, "unclosed action", 0},
		{`{range .items[*]}{.metadata.name}`, "{range} without an {end}", 0},
		{`{.a}{end}`, "{end} without a {range}", 4},
		{`{}`, "empty action", 0},
		{`{metadata.name}`, "did you mean .metadata.name?", 1},
		{`{.items[x]}`, "expected an index, a slice", 8},
		{`{.items[abc]}`, "expected an index, a slice", 8},
		{`x: {.items[ abc ]}`, "expected an index, a slice", 12},
		{`{.a}{ .items[1:x] }`, "bad slice bound", 13},
		{`{.items[?(@.a = "b")]}`, "expected one of ==", 14},
		{`{.items[?(@.a == b)]}`, "expected @path", 17},
		{`{.items[?( @.a == "b" x )]}`, `unexpected "x"`, 22},
		{`{.items[?(@.a == "b"]}`, "unclosed filter", 7},
		{`{.items[?(@.a..)].b}`, "'..' must be followed", 15},
		{`{"\q"}`, `unknown escape \q`, 2},
		{`{"a" b}`, `unexpected " b" after the string literal`, 4},
		{`{.items[0}`, "unclosed [", 7},
		{`{.a.}{.b c}`, `unexpected " c" in path`, 8},
		{`{range .a[y]}{end}`, "range: expected an index", 10},
		{`{.a{.b}}`, "unexpected { inside an action", 3},
	} {
		_, err := parseJSONPath(tc.tmpl)
		at := fmt.Sprintf(" at offset %d", tc.at)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.tmpl) || !strings.HasSuffix(err.Error(), at) {
			t.Errorf("%s: error %v, want it to quote the template, say %q and end %q", tc.tmpl, err, tc.want, at)
		}
	}
}

func TestGetJSONPathAndCustomColumns(t *testing.T) {
	f := newFakeAPI(t)
	seedPods(f)

	expect(t, "jsonpath list", f.run("get", "pods", "-o", "jsonpath={.items[*].metadata.name}"), 0, "db-0 web-1", "")
	expect(t, "jsonpath range", f.run("get", "pods", "-o", `jsonpath={range .items[*]}{.metadata.name}{"\t"}{.status.phase}{"\n"}{end}`), 0,
		"db-0\tPending\nweb-1\tRunning\n", "")
	expect(t, "jsonpath one object", f.run("get", "pod", "web-1", "-o", "jsonpath={.spec.nodeName}"), 0, "n1", "")
	expect(t, "jsonpath filter", f.run("get", "pod/web-1", "-o", `jsonpath={.status.containerStatuses[?(@.name=="c")].ready}`), 0, "true", "")
	expect(t, "jsonpath without template", f.run("get", "pods", "-o", "jsonpath"), 1, "",
		"error: template format specified but no template given: -o jsonpath=TEMPLATE\nSee 'outpost get --help' for usage.\n")
	r := f.run("get", "pods", "-o", "jsonpath={.items[*]")
	if r.code != 1 || !strings.Contains(r.stderr, "error parsing jsonpath {.items[*]: unclosed action") {
		t.Errorf("bad template: exit %d, stderr %q", r.code, r.stderr)
	}

	expect(t, "custom-columns", f.run("get", "pods", "-o", "custom-columns=NAME:.metadata.name,NODE:.spec.nodeName,APP:metadata.labels.app"), 0,
		"NAME    NODE     APP\ndb-0    <none>   db\nweb-1   n1       web\n", "")
	expect(t, "custom-columns one object, filter", f.run("get", "pod", "web-1", "-o", `custom-columns=POD:{.metadata.name},READY:.status.containerStatuses[?(@.name=="c")].ready`), 0,
		"POD     READY\nweb-1   true\n", "")
	expect(t, "custom-columns across namespaces", f.run("get", "pods", "-A", "-o", "custom-columns=NS:.metadata.namespace,NAME:.metadata.name"), 0,
		"NS        NAME\ndefault   db-0\ndefault   web-1\nteam      other\n", "")
	expect(t, "custom-columns empty", f.run("get", "pods", "-n", "void", "-o", "custom-columns=NAME:.metadata.name"), 0,
		"", "No resources found in void namespace.\n")
	r = f.run("get", "pods", "-o", "custom-columns=NAME,NODE:.spec.[")
	if r.code != 1 || !strings.Contains(r.stderr, `column "NAME": expected <header>:<json-path-expr>`) || !strings.Contains(r.stderr, "column NODE:") {
		t.Errorf("bad columns: exit %d, stderr %q; want both columns named", r.code, r.stderr)
	}
	file := writeFile(t, t.TempDir(), "cols", "NAME   PHASE\n.metadata.name   .status.phase\n")
	expect(t, "custom-columns-file", f.run("get", "pods", "-o", "custom-columns-file="+file), 0,
		"NAME    PHASE\ndb-0    Pending\nweb-1   Running\n", "")
	tmplFile := writeFile(t, filepath.Dir(file), "tmpl", `{.metadata.name}`)
	expect(t, "jsonpath-file", f.run("get", "pod", "db-0", "-o", "jsonpath-file="+tmplFile), 0, "db-0", "")
	r = f.run("get", "pods", "-o", "jsonpat={.x}")
	if r.code != 1 || !strings.Contains(r.stderr, "allowed formats are: custom-columns,custom-columns-file,json,jsonpath,jsonpath-file,name,wide,yaml") {
		t.Errorf("unknown format: exit %d, stderr %q", r.code, r.stderr)
	}
}

// Under --watch, custom columns print their header once and jsonpath its
// template per object: the list, then the watch's events.
func TestGetWatchTemplates(t *testing.T) {
	for _, tc := range []struct{ format, want string }{
		{"custom-columns=NAME:.metadata.name", "NAME\ndb-0\nweb-1\ndb-0\nweb-1\n"},
		{`jsonpath={.metadata.name}{"\n"}`, "db-0\nweb-1\ndb-0\nweb-1\n"},
	} {
		f := newFakeAPI(t)
		seedPods(f)
		w := startWatch(t, f, "get", "pods", "-n", "default", "-w", "-o", tc.format)
		if !w.waitFor(tc.want) {
			t.Errorf("%s: get -w printed %q, want %q (stderr %q)", tc.format, w.out.String(), tc.want, w.errb.String())
		}
		w.stop()
	}
}

// Templates come from the command line: none may panic the parser or the
// evaluator, whatever it says.
func FuzzJSONPath(f *testing.F) {
	for _, s := range []string{`{.items[*].metadata.name}`, `{range .items[*]}{.a}{"\n"}{end}`, `{.a[?(@.b=="c")].d}`,
		`{..x}`, `{.a[1:-1]}`, `{$.kind}`, `{'\''}`, `{.a['b.c']}`, `{.a[?(@.n>=1)]}`, `{range .a}{range .b}{end}{end}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tmpl string) {
		tp, err := parseJSONPath(tmpl)
		if err != nil {
			return
		}
		var b bytes.Buffer
		_ = (jsonPathPrinter{tp}).printDoc(&b, []byte(nodeList))
	})
}

package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
)

func TestParseTargets(t *testing.T) {
	type tg struct {
		plural string
		names  []string
	}
	tests := []struct {
		args    []string
		want    []tg
		wantErr string
	}{
		{args: []string{"pods"}, want: []tg{{"pods", nil}}},
		{args: []string{"po", "a", "b", "a"}, want: []tg{{"pods", []string{"a", "b"}}}},
		{args: []string{"Pod"}, want: []tg{{"pods", nil}}},
		{args: []string{"deploy"}, want: []tg{{"deployments", nil}}},
		{args: []string{"deployments.apps", "web"}, want: []tg{{"deployments", []string{"web"}}}},
		{args: []string{"pods,nodes"}, want: []tg{{"pods", nil}, {"nodes", nil}}},
		{args: []string{"pods,po"}, want: []tg{{"pods", nil}}},
		{args: []string{"pod/x", "node/n1", "po/y"}, want: []tg{{"pods", []string{"x", "y"}}, {"nodes", []string{"n1"}}}},
		{args: []string{"ds/agent"}, want: []tg{{"daemonsets", []string{"agent"}}}},
		{args: []string{"tokens"}, want: []tg{{"tokens", nil}}},
		{args: nil, wantErr: "you must specify the type of resource"},
		{args: []string{"foo"}, wantErr: `the server doesn't have a resource type "foo"`},
		{args: []string{"pods,foo"}, wantErr: `the server doesn't have a resource type "foo"`},
		{args: []string{"pods", "pod/x"}, wantErr: "there is no need to specify a resource type"},
		{args: []string{"pod/x", "y"}, wantErr: "there is no need to specify a resource type"},
		{args: []string{"pod/"}, wantErr: "must have a single resource and name"},
		{args: []string{"pod/a/b"}, wantErr: "must have a single resource and name"},
	}
	for _, tt := range tests {
		got, err := parseTargets(tt.args)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("parseTargets(%q) error = %v, want %q", tt.args, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseTargets(%q): %v", tt.args, err)
			continue
		}
		var simple []tg
		for _, g := range got {
			simple = append(simple, tg{g.r.Plural, g.names})
		}
		if !reflect.DeepEqual(simple, tt.want) {
			t.Errorf("parseTargets(%q) = %v, want %v", tt.args, simple, tt.want)
		}
	}
}

func TestParseMetaArgs(t *testing.T) {
	tests := []struct {
		args    []string
		names   []string
		set     map[string]string
		remove  []string
		bySel   bool // -l or --all
		wantErr string
	}{
		{args: []string{"pod", "a=b", "c-"}, bySel: true, set: map[string]string{"a": "b"}, remove: []string{"c"}},
		{args: []string{"pod", "x", "a=b"}, bySel: true, wantErr: "names cannot be combined with -l or --all"},
		{args: []string{"pod", "x", "a=b", "c-"}, names: []string{"x"}, set: map[string]string{"a": "b"}, remove: []string{"c"}},
		{args: []string{"pod/x", "a="}, names: []string{"x"}, set: map[string]string{"a": ""}},
		{args: []string{"node", "n1", "n2", "example.com/zone=a=b"}, names: []string{"n1", "n2"}, set: map[string]string{"example.com/zone": "a=b"}},
		{args: []string{"pod", "x"}, wantErr: "at least one label update is required"},
		{args: []string{"pod", "a=b"}, wantErr: "one or more resources must be specified"},
		{args: []string{"pod", "x", "a=b", "y"}, wantErr: "all resources must be specified before label changes: y"},
		{args: []string{"pod", "x", "a=b", "a-"}, wantErr: `can not both modify and remove the label "a"`},
		{args: []string{"pod", "x", "=b"}, wantErr: "the key is empty"},
		{args: []string{"pod", "x", "-"}, wantErr: "the key is empty"},
	}
	for _, tt := range tests {
		targets, ch, err := parseMetaArgs(tt.args, labelKind, tt.bySel)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("parseMetaArgs(%q) error = %v, want %q", tt.args, err, tt.wantErr)
			}
			var ue *usageError
			if err != nil && !errors.As(err, &ue) {
				t.Errorf("parseMetaArgs(%q): %v is not a usage error", tt.args, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseMetaArgs(%q): %v", tt.args, err)
			continue
		}
		if !reflect.DeepEqual(targets[0].names, tt.names) || !reflect.DeepEqual(ch.set, tt.set) || !reflect.DeepEqual(ch.remove, tt.remove) {
			t.Errorf("parseMetaArgs(%q) = %v %v %v", tt.args, targets[0].names, ch.set, ch.remove)
		}
	}
}

func TestApplyMetaChange(t *testing.T) {
	ch := metaChange{set: map[string]string{"zone": "b", "rack": "1"}, order: []string{"zone", "rack"}, remove: []string{"old", "gone"}}
	tests := []struct {
		name      string
		cur       map[string]any
		overwrite bool
		want      map[string]any
		changed   bool
		missing   []string
		wantErr   string
	}{
		{
			name: "refuses a changed value without overwrite", cur: map[string]any{"zone": "a", "old": "x"},
			want: map[string]any{"zone": "a", "old": "x"}, wantErr: "'zone' already has a value (a), and --overwrite is false",
		},
		{
			name: "overwrite", cur: map[string]any{"zone": "a", "old": "x"}, overwrite: true,
			want: map[string]any{"zone": "b", "rack": "1"}, changed: true, missing: []string{"gone"},
		},
		{
			name: "same value needs no overwrite", cur: map[string]any{"zone": "b", "rack": "1"},
			want: map[string]any{"zone": "b", "rack": "1"}, missing: []string{"old", "gone"},
		},
	}
	for _, tt := range tests {
		changed, missing, err := applyMetaChange(tt.cur, ch, tt.overwrite, labelKind)
		if tt.wantErr != "" {
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("%s: error %v, want %q", tt.name, err, tt.wantErr)
			}
		} else if err != nil {
			t.Errorf("%s: %v", tt.name, err)
		}
		if !reflect.DeepEqual(tt.cur, tt.want) || changed != tt.changed || !reflect.DeepEqual(missing, tt.missing) {
			t.Errorf("%s: got %v changed=%v missing=%v", tt.name, tt.cur, changed, missing)
		}
	}
}

func mustMap(t *testing.T, s string) map[string]any {
	t.Helper()
	m, err := decodeJSONMap([]byte(s))
	if err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return m
}

// withLast returns obj with the last-applied annotation of manifest set,
// as a previous apply would have left it.
func withLast(t *testing.T, obj, manifest string) string {
	t.Helper()
	la, err := lastApplied(mustMap(t, manifest))
	if err != nil {
		t.Fatal(err)
	}
	m := mustMap(t, obj)
	md := m["metadata"].(map[string]any)
	ann, _ := md["annotations"].(map[string]any)
	if ann == nil {
		ann = map[string]any{}
	}
	ann[LastAppliedAnnotation] = la
	md["annotations"] = ann
	b, _ := json.Marshal(m)
	return string(b)
}

func TestMergeApply(t *testing.T) {
	v1 := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{"app":"web","old":"x"}},
		"spec":{"containers":[{"name":"c","image":"nginx:1"}],"nodeSelector":{"zone":"a"}}}`
	// What the server stored from v1: defaults, an admission toleration,
	// a controller's label, a status.
	storedV1 := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"default","resourceVersion":"5","uid":"u",
		"labels":{"app":"web","old":"x","pod-template-hash":"abc"}},
		"spec":{"containers":[{"name":"c","image":"nginx:1","imagePullPolicy":"IfNotPresent"}],"nodeSelector":{"zone":"a"},
		"restartPolicy":"Always","tolerations":[{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute"}]},
		"status":{"phase":"Running"}}`
	tests := []struct {
		name      string
		stored    string
		manifest  string
		unchanged bool
		check     func(t *testing.T, out map[string]any)
	}{
		{
			name: "same manifest again is unchanged despite defaults", stored: withLast(t, storedV1, v1), manifest: v1, unchanged: true,
		},
		{
			name: "new image keeps defaults, status and admission fields", stored: withLast(t, storedV1, v1),
			manifest: strings.Replace(v1, "nginx:1", "nginx:2", 1),
			check: func(t *testing.T, out map[string]any) {
				c := out["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
				if c["image"] != "nginx:2" || c["imagePullPolicy"] != "IfNotPresent" {
					t.Errorf("container %v: want the new image and the defaulted pull policy", c)
				}
				spec := out["spec"].(map[string]any)
				if spec["restartPolicy"] != "Always" || spec["tolerations"] == nil {
					t.Errorf("spec lost server-set fields: %v", spec)
				}
				if out["status"].(map[string]any)["phase"] != "Running" {
					t.Errorf("status changed: %v", out["status"])
				}
				if out["metadata"].(map[string]any)["resourceVersion"] != "5" {
					t.Error("resourceVersion of the read not kept: the write would not be conditional")
				}
			},
		},
		{
			name: "removed fields are removed, foreign ones kept", stored: withLast(t, storedV1, v1),
			manifest: `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{"app":"web"}},"spec":{"containers":[{"name":"c","image":"nginx:1"}]}}`,
			check: func(t *testing.T, out map[string]any) {
				labels := out["metadata"].(map[string]any)["labels"].(map[string]any)
				if _, ok := labels["old"]; ok {
					t.Errorf("label removed from the manifest is still there: %v", labels)
				}
				if labels["pod-template-hash"] != "abc" {
					t.Errorf("label set by a controller was dropped: %v", labels)
				}
				if _, ok := out["spec"].(map[string]any)["nodeSelector"]; ok {
					t.Error("nodeSelector removed from the manifest is still there")
				}
			},
		},
		{
			name:   "no previous apply: manifest laid over stored",
			stored: storedV1, manifest: v1,
			check: func(t *testing.T, out map[string]any) {
				ann := out["metadata"].(map[string]any)["annotations"].(map[string]any)
				if _, ok := ann[LastAppliedAnnotation]; !ok {
					t.Error("the last-applied annotation was not recorded")
				}
				spec := out["spec"].(map[string]any)
				stored := mustMap(t, storedV1)["spec"]
				if !reflect.DeepEqual(spec, stored) {
					t.Errorf("spec changed although the manifest is a subset of it:\n%v\n%v", spec, stored)
				}
			},
		},
		{
			name: "field the server drops is not fought over", stored: withLast(t,
				`{"apiVersion":"v1","kind":"Service","metadata":{"name":"s","resourceVersion":"3"},"spec":{"ports":[{"port":80}]}}`,
				`{"apiVersion":"v1","kind":"Service","metadata":{"name":"s"},"spec":{"ports":[{"port":80}],"sessionAffinity":"None"}}`),
			manifest:  `{"apiVersion":"v1","kind":"Service","metadata":{"name":"s"},"spec":{"ports":[{"port":80}],"sessionAffinity":"None"}}`,
			unchanged: true,
		},
		{
			// kubectl's three-way merge: the manifest's values win over
			// changes made on the server since the last apply.
			name:     "server-side changes to fields the manifest sets are undone",
			stored:   withLast(t, strings.Replace(strings.Replace(storedV1, "nginx:1", "nginx:9", 1), `"zone":"a"`, `"zone":"b"`, 1), v1),
			manifest: v1,
			check: func(t *testing.T, out map[string]any) {
				spec := out["spec"].(map[string]any)
				c := spec["containers"].([]any)[0].(map[string]any)
				if c["image"] != "nginx:1" || c["imagePullPolicy"] != "IfNotPresent" {
					t.Errorf("container %v: want the manifest's image back and the default kept", c)
				}
				if spec["nodeSelector"].(map[string]any)["zone"] != "a" {
					t.Errorf("nodeSelector %v: want the manifest's zone=a back", spec["nodeSelector"])
				}
			},
		},
		{
			name:     "label removed on the server comes back",
			stored:   withLast(t, strings.Replace(storedV1, `"app":"web",`, "", 1), v1),
			manifest: v1,
			check: func(t *testing.T, out map[string]any) {
				labels := out["metadata"].(map[string]any)["labels"].(map[string]any)
				if labels["app"] != "web" || labels["pod-template-hash"] != "abc" {
					t.Errorf("labels %v: want app=web back and the controller's label kept", labels)
				}
			},
		},
		{
			name: "lists of named objects pair by name, in the manifest's order",
			stored: withLast(t, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","resourceVersion":"2"},"spec":{"containers":[
				{"name":"side","image":"s:1","imagePullPolicy":"Always"},
				{"name":"injected","image":"i:1"},
				{"name":"web","image":"w:2","imagePullPolicy":"IfNotPresent","terminationMessagePath":"/dev/termination-log"}]}}`,
				`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"web","image":"w:1"},{"name":"side","image":"s:1"}]}}`),
			manifest: `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"web","image":"w:1"},{"name":"side","image":"s:1"}]}}`,
			check: func(t *testing.T, out map[string]any) {
				got, _ := json.Marshal(out["spec"].(map[string]any)["containers"])
				want := `[{"image":"w:1","imagePullPolicy":"IfNotPresent","name":"web","terminationMessagePath":"/dev/termination-log"},{"image":"s:1","imagePullPolicy":"Always","name":"side"}]`
				if string(got) != want {
					t.Errorf("containers\n%s\nwant\n%s", got, want)
				}
			},
		},
		{
			name: "list of maps of equal length merges by position, keeping defaults",
			stored: withLast(t, `{"apiVersion":"v1","kind":"Service","metadata":{"name":"s","resourceVersion":"3"},"spec":{"ports":[{"port":81,"protocol":"TCP"}]}}`,
				`{"apiVersion":"v1","kind":"Service","metadata":{"name":"s"},"spec":{"ports":[{"port":80}]}}`),
			manifest: `{"apiVersion":"v1","kind":"Service","metadata":{"name":"s"},"spec":{"ports":[{"port":80}]}}`,
			check: func(t *testing.T, out map[string]any) {
				got, _ := json.Marshal(out["spec"].(map[string]any)["ports"])
				if string(got) != `[{"port":80,"protocol":"TCP"}]` {
					t.Errorf("ports %s, want port 80 back with the defaulted protocol", got)
				}
			},
		},
		{
			name: "a list of another length replaces the live one",
			stored: withLast(t, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","resourceVersion":"3"},"spec":{"args":["a","b","c"]}}`,
				`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"args":["a","b"]}}`),
			manifest: `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"args":["a","b"]}}`,
			check: func(t *testing.T, out map[string]any) {
				if got, _ := json.Marshal(out["spec"].(map[string]any)["args"]); string(got) != `["a","b"]` {
					t.Errorf("args %s", got)
				}
			},
		},
		{
			name: "a number stored as a string is the same value",
			stored: withLast(t, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","resourceVersion":"3"},"spec":{"containers":[{"name":"c","resources":{"limits":{"cpu":"1"}}}]}}`,
				`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"c","resources":{"limits":{"cpu":1}}}]}}`),
			manifest:  `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"c","resources":{"limits":{"cpu":1}}}]}}`,
			unchanged: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stored, manifest := mustMap(t, tt.stored), mustMap(t, tt.manifest)
			before := deepCopy(stored)
			la, err := lastApplied(manifest)
			if err != nil {
				t.Fatal(err)
			}
			out := mergeApply(stored, manifest, la)
			if !reflect.DeepEqual(stored, before) {
				t.Fatal("mergeApply changed the stored object it compares with")
			}
			if got := reflect.DeepEqual(out, stored); got != tt.unchanged {
				b, _ := json.Marshal(out)
				t.Fatalf("unchanged = %v, want %v; merged:\n%s", got, tt.unchanged, b)
			}
			if tt.check != nil {
				tt.check(t, out)
			}
		})
	}
}

func TestFormatError(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{api.NewNotFound(api.ResourceForKind("Pod"), "x"), `Error from server (NotFound): pods "x" not found`},
		{fmt.Errorf("error when applying pod/x from %q: %w", "a.yaml", api.NewInvalid("Pod", "x", api.ErrorList{api.Required(api.Root("spec").Child("containers"), "")})),
			`Error from server (Invalid): error when applying pod/x from "a.yaml": Pod "x" is invalid: spec.containers: Required value`},
		{&api.StatusError{Status: api.Status{Message: "odd"}}, "Error from server: odd"},
		{errors.New("boom"), "error: boom"},
	}
	for _, tt := range tests {
		if got := FormatError(tt.err); got != tt.want {
			t.Errorf("FormatError = %q, want %q", got, tt.want)
		}
	}
}

func TestTokenSpec(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	spec, err := tokenSpec("developer", []string{"a"}, "", time.Hour, "ci", at)
	if err != nil || spec.Role != "developer" || !spec.Expires.Equal(at.Add(time.Hour)) || spec.Description != "ci" {
		t.Errorf("tokenSpec = %+v, %v", spec, err)
	}
	if spec, err := tokenSpec("cluster-admin", nil, "", 0, "", at); err != nil || spec.Expires != nil {
		t.Errorf("ttl 0 should never expire: %+v, %v", spec, err)
	}
	bad := []struct {
		role  string
		ns    []string
		node  string
		ttl   time.Duration
		error string
	}{
		{"", nil, "", time.Hour, "--role is required"},
		{"server", nil, "", time.Hour, `--role "server" is not one of`},
		{"node", []string{"a"}, "", time.Hour, "--namespace applies to developer tokens only"},
		{"developer", nil, "", time.Hour, "needs at least one --namespace"},
		{"developer", []string{"a"}, "n1", time.Hour, "--node applies to node tokens only"},
		{"node", nil, "", -time.Hour, "--ttl must not be negative"},
	}
	for _, b := range bad {
		if _, err := tokenSpec(b.role, b.ns, b.node, b.ttl, "", at); err == nil || !strings.Contains(err.Error(), b.error) {
			t.Errorf("tokenSpec(%q, %v, %q, %v) = %v, want %q", b.role, b.ns, b.node, b.ttl, err, b.error)
		}
	}
}

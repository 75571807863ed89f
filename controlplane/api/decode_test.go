package api

import (
	"errors"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// podJSON wraps a spec into a pod document.
func podJSON(spec string) string {
	return `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"default"},"spec":` + spec + `}`
}

func statusErr(t *testing.T, err error) *StatusError {
	t.Helper()
	se, ok := errors.AsType[*StatusError](err)
	if !ok {
		t.Fatalf("error %v (%T) is not a *StatusError", err, err)
	}
	return se
}

func TestDecodeUnknownFields(t *testing.T) {
	tests := []struct {
		name   string
		doc    string
		fields []string // the FieldValueUnknown causes, in document order
	}{
		{
			name:   "typo in a container",
			doc:    podJSON(`{"containers":[{"name":"a","imagee":"nginx"}]}`),
			fields: []string{"spec.containers[0].imagee"},
		},
		{
			name: "several typos at several depths are all listed",
			doc: `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labelz":{"a":"b"}},` +
				`"spec":{"containers":[{"name":"a","image":"x"},{"name":"b","imagee":"x","ports":[{"containerPort":80,"protocoll":"TCP"}]}],` +
				`"nodeSelecter":{"a":"b"}},"sttus":{}}`,
			fields: []string{
				"metadata.labelz",
				"spec.containers[1].imagee",
				"spec.containers[1].ports[0].protocoll",
				"spec.nodeSelecter",
				"sttus",
			},
		},
		{
			name:   "typo next to a Kubernetes-only field",
			doc:    podJSON(`{"dnsPolicy":"ClusterFirst","containers":[{"name":"a","image":"x","livenessProbe":{"x":1},"imagePullPolicyy":"Always"}]}`),
			fields: []string{"spec.containers[0].imagePullPolicyy"},
		},
		{
			name:   "typo inside a template",
			doc:    `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"template":{"spec":{"containers":[{"name":"a","imagee":"x"}]}}}}`,
			fields: []string{"spec.template.spec.containers[0].imagee"},
		},
		{
			name:   "typo inside affinity",
			doc:    podJSON(`{"containers":[],"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpression":[]}]}}}}`),
			fields: []string{"spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpression"},
		},
		{
			// Issue 9 item 10: encoding/json matches names without regard
			// to case and stored these as nodeSelector and topologyKey;
			// Kubernetes' strict decoding refuses them.
			name: "field names in another case",
			doc: podJSON(`{"containers":[{"name":"a","image":"x"}],"nodeselector":{"a":"b"},` +
				`"affinity":{"podAntiAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":[{"labelSelector":{},"topologykey":"zone"}]}}}`),
			fields: []string{
				"spec.nodeselector",
				"spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologykey",
			},
		},
		{
			name:   "metadata in another case",
			doc:    `{"apiVersion":"v1","kind":"Pod","Metadata":{"name":"p"},"spec":{"containers":[]}}`,
			fields: []string{"Metadata"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj, _, err := Decode([]byte(tt.doc))
			if err == nil {
				t.Fatalf("decoded %+v, want an error", obj)
			}
			se := statusErr(t, err)
			if se.Code() != http.StatusUnprocessableEntity || se.Status.Reason != ReasonInvalid {
				t.Fatalf("code %d reason %q, want 422 Invalid: %v", se.Code(), se.Status.Reason, err)
			}
			var got []string
			for _, c := range se.Status.Details.Causes {
				if c.Type != FieldValueUnknown {
					t.Errorf("cause %+v is not %s", c, FieldValueUnknown)
				}
				got = append(got, c.Field)
			}
			if !slices.Equal(got, tt.fields) {
				t.Errorf("unknown fields %q, want %q", got, tt.fields)
			}
			for _, f := range tt.fields {
				if !strings.Contains(err.Error(), f+": unknown field") {
					t.Errorf("message %q does not name %s", err, f)
				}
			}
		})
	}
}

func TestDecodeUnknownFieldSuggestion(t *testing.T) {
	_, _, err := Decode([]byte(podJSON(`{"containers":[{"name":"a","imagee":"x"}]}`)))
	if err == nil || !strings.Contains(err.Error(), `did you mean "image"?`) {
		t.Fatalf("error %v does not suggest image", err)
	}
	if d := statusErr(t, err).Status.Details; d.Kind != "Pod" || d.Name != "p" {
		t.Errorf("details name the object %s/%s, want Pod/p", d.Kind, d.Name)
	}
}

// A field named in another case is refused with its right name.
func TestDecodeSuggestsTheRightCase(t *testing.T) {
	_, _, err := Decode([]byte(podJSON(`{"containers":[],"NODESELECTOR":{"a":"b"}}`)))
	if err == nil || !strings.Contains(err.Error(), `did you mean "nodeSelector"?`) {
		t.Fatalf("error %v does not suggest nodeSelector", err)
	}
}

func TestDecodeKubernetesOnlyFieldsWarn(t *testing.T) {
	tests := []struct {
		name  string
		doc   string
		warns []string
	}{
		{
			name: "container and pod spec fields",
			doc: podJSON(`{"containers":[{"name":"a","image":"x","securityContext":{"privileged":false},` +
				`"terminationMessagePath":"/dev/termination-log","livenessProbe":{"httpGet":{"port":8080}},"env":[{"name":"A","valueFrom":{"fieldRef":{}}}]}],` +
				`"hostIPC":false,"serviceAccountName":"default","securityContext":{},"volumes":[{"name":"c","configMap":{"name":"cm"}}]}`),
			warns: []string{
				"spec.containers[0].securityContext",
				"spec.containers[0].terminationMessagePath",
				"spec.containers[0].livenessProbe",
				"spec.containers[0].env[0].valueFrom",
				"spec.hostIPC",
				"spec.serviceAccountName",
				"spec.securityContext",
				"spec.volumes[0].configMap",
			},
		},
		{
			name:  "metadata fields",
			doc:   `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"n","selfLink":"/api/v1/namespaces/n","managedFields":[{"manager":"kubectl"}]}}`,
			warns: []string{"metadata.selfLink", "metadata.managedFields"},
		},
		{
			name:  "service fields",
			doc:   `{"apiVersion":"v1","kind":"Service","metadata":{"name":"s"},"spec":{"ports":[{"port":80,"appProtocol":"http"}],"ipFamilies":["IPv4"]},"status":{"loadBalancer":{}}}`,
			warns: []string{"spec.ports[0].appProtocol", "spec.ipFamilies", "status.loadBalancer"},
		},
		{
			name:  "node fields",
			doc:   `{"apiVersion":"v1","kind":"Node","metadata":{"name":"n"},"spec":{"configSource":{}},"status":{"volumesInUse":[],"nodeInfo":{"swap":{}}}}`,
			warns: []string{"spec.configSource", "status.volumesInUse", "status.nodeInfo.swap"},
		},
		{
			name:  "pod status fields",
			doc:   podJSON(`{"containers":[]},"status":{"hostIPs":[],"containerStatuses":[{"name":"a","ready":true,"restartCount":0,"image":"x","imageID":"","allocatedResources":{}}]}`),
			warns: []string{"status.hostIPs", "status.containerStatuses[0].allocatedResources"},
		},
		{
			name:  "template fields of a deployment",
			doc:   `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"template":{"spec":{"containers":[{"name":"a","image":"x","readinessProbe":{}}],"topologySpreadConstraints":[]}}},"status":{"collisionCount":1}}`,
			warns: []string{"spec.template.spec.containers[0].readinessProbe", "spec.template.spec.topologySpreadConstraints", "status.collisionCount"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj, w, err := Decode([]byte(tt.doc))
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			want := make(Warnings, len(tt.warns))
			for i, f := range tt.warns {
				want[i] = f + ": accepted but not acted on by outpost"
			}
			if !slices.Equal(w, want) {
				t.Errorf("warnings\n %q\nwant\n %q", w, want)
			}
			if obj.GetObjectMeta().Name == "" {
				t.Errorf("the object lost its name: %+v", obj)
			}
		})
	}
}

// TestDecodeKeepsFieldsBesideIgnoredOnes checks that the slow path still
// decodes the fields outpost knows.
func TestDecodeKeepsFieldsBesideIgnoredOnes(t *testing.T) {
	obj, w, err := Decode([]byte(podJSON(`{"hostIPC":false,"nodeName":"n1","containers":[{"name":"a","image":"nginx:1","tty":true,"resources":{"limits":{"cpu":"500m"}}}]}`)))
	if err != nil {
		t.Fatal(err)
	}
	if len(w) != 2 {
		t.Errorf("warnings %q, want 2", w)
	}
	p := obj.(*Pod)
	if p.Spec.NodeName != "n1" || p.Spec.Containers[0].Image != "nginx:1" || p.Spec.Containers[0].Resources.Limits["cpu"].MilliValue() != 500 {
		t.Errorf("decoded %+v", p.Spec)
	}
	if p.APIVersion != "v1" || p.Kind != "Pod" {
		t.Errorf("TypeMeta %+v", p.TypeMeta)
	}
}

func TestKnownFieldsDoNotShadowGoFields(t *testing.T) {
	for typ, names := range kubernetesOnlyFields {
		sf := fieldsOf(typ)
		for _, n := range names {
			// encoding/json matches keys case-insensitively, so a
			// Kubernetes-only name must not fold onto a Go field either.
			if f := sf.lookup(n); f != nil {
				t.Errorf("%s: %q is both a Go field (%s) and a Kubernetes-only field", typ, n, f.name)
			}
		}
		if len(names) != len(slices.Compact(slices.Sorted(slices.Values(names)))) {
			t.Errorf("%s: duplicate names in %q", typ, names)
		}
	}
}

func TestDecodeBadRequest(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want []string // substrings of the message
	}{
		// encoding/json counts the offending '}' (byte 55) as read; its v2
		// engine (GOEXPERIMENT=jsonv2) points at it. Either names the place.
		{"syntax error", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p",}}`, []string{"invalid JSON at byte offset 5", "'}'"}},
		{"truncated", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"`, []string{"invalid JSON", "unexpected end of JSON input"}},
		{"empty", ``, []string{"empty"}},
		{"not an object", `["a"]`, []string{"expected a JSON object"}},
		{"string for a number", podJSON(`{"containers":[{"name":"a","ports":[{"containerPort":"80"}]}]}`),
			[]string{`spec.containers[0].ports[0].containerPort: expected an integer, got a string "80"`}},
		{"number for a string", podJSON(`{"nodeName":5,"containers":[]}`), []string{"spec.nodeName: expected a string, got a number 5"}},
		{"object for an array", podJSON(`{"containers":{"name":"a"}}`), []string{"spec.containers: expected an array, got an object"}},
		{"out of range", podJSON(`{"priority":3000000000,"containers":[]}`), []string{"spec.priority: 3000000000 is out of range for int32"}},
		{"fraction for an integer", podJSON(`{"terminationGracePeriodSeconds":1.5,"containers":[]}`), []string{"spec.terminationGracePeriodSeconds: 1.5 is not an integer"}},
		{"bad quantity", podJSON(`{"containers":[{"name":"a","resources":{"requests":{"cpu":"lots"}}}]}`), []string{"spec.containers[0].resources.requests[cpu]: quantities must match"}},
		{"bad time", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","creationTimestamp":"yesterday"}}`, []string{"metadata.creationTimestamp:"}},
		{"label value not a string", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{"a":true}}}`, []string{"metadata.labels[a]: expected a string, got a boolean true"}},
		{"two type errors are both named", podJSON(`{"nodeName":5,"hostNetwork":"yes","containers":[]}`), []string{"spec.nodeName:", "spec.hostNetwork: expected a boolean"}},
		{"type error with an unknown field", podJSON(`{"nodeNam":"x","hostNetwork":"yes","containers":[]}`), []string{"spec.hostNetwork: expected a boolean"}},
		{"trailing data", podJSON(`{"containers":[]}`) + ` {}`, []string{"invalid JSON at byte offset"}},
		{"no kind", `{"apiVersion":"v1","metadata":{"name":"p"}}`, []string{`no "kind"`}},
		{"no apiVersion", `{"kind":"Pod","metadata":{"name":"p"}}`, []string{`no "apiVersion"`}},
		{"unknown kind", `{"apiVersion":"v1","kind":"ConfigMap"}`, []string{`no matches for kind "ConfigMap" in version "v1"`}},
		{"wrong apiVersion", `{"apiVersion":"v1","kind":"Deployment"}`, []string{`no matches for kind "Deployment" in version "v1"`, `"apps/v1"`}},
		{"kind not a string", `{"apiVersion":"v1","kind":5}`, []string{"kind: expected a string"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj, _, err := Decode([]byte(tt.doc))
			if err == nil {
				t.Fatalf("decoded %+v, want an error", obj)
			}
			se := statusErr(t, err)
			if se.Code() != http.StatusBadRequest || se.Status.Reason != ReasonBadRequest {
				t.Fatalf("code %d reason %q, want 400 BadRequest: %v", se.Code(), se.Status.Reason, err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message %q does not contain %q", err, w)
				}
			}
			if tt.name == "syntax error" && !regexp.MustCompile(`byte offset 5[56]:`).MatchString(err.Error()) {
				t.Errorf("message %q does not point at byte 55 or just after it", err)
			}
		})
	}
}

func TestDecodeIntoChecksKind(t *testing.T) {
	tests := []struct {
		name, doc, want string
	}{
		{"other kind", `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"}}`, "the kind in the body (Deployment) does not match the expected kind (Pod)"},
		{"other version", `{"apiVersion":"v2","kind":"Pod","metadata":{"name":"d"}}`, "the API version in the body (v2) does not match the expected API version (v1)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeInto([]byte(tt.doc), &Pod{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
		})
	}
	// Without kind and apiVersion the body is taken as the kind asked for.
	p := &Pod{Spec: PodSpec{NodeName: "stale"}}
	if _, err := DecodeInto([]byte(`{"metadata":{"name":"p"}}`), p); err != nil {
		t.Fatal(err)
	}
	if p.Kind != "Pod" || p.APIVersion != "v1" || p.Spec.NodeName != "" {
		t.Errorf("got %+v, want TypeMeta filled and the old content gone", p)
	}
}

func TestDecodeEdgeCases(t *testing.T) {
	tests := []struct {
		name  string
		doc   string
		check func(*Pod) bool
	}{
		{"nulls", `{"apiVersion":"v1","kind":"Pod","metadata":null,"spec":{"containers":null,"nodeName":null,"affinity":null}}`,
			func(p *Pod) bool { return p.Spec.Containers == nil && p.Spec.Affinity == nil }},
		{"duplicate key, last wins", podJSON(`{"nodeName":"a","nodeName":"b","containers":[]}`),
			func(p *Pod) bool { return p.Spec.NodeName == "b" }},
		{"duplicate key with an ignored field", podJSON(`{"nodeName":"a","dnsPolicy":"x","nodeName":"b","containers":[]}`),
			func(p *Pod) bool { return p.Spec.NodeName == "b" }},
		{"number quantity", podJSON(`{"containers":[{"name":"a","resources":{"limits":{"cpu":2}}}]}`),
			func(p *Pod) bool { return p.Spec.Containers[0].Resources.Limits["cpu"].MilliValue() == 2000 }},
		{"any label key is decoded", `{"apiVersion":"v1","kind":"Pod","metadata":{"labels":{"imagee":"x","dnsPolicy":"y"}}}`,
			func(p *Pod) bool { return p.Labels["imagee"] == "x" && p.Labels["dnsPolicy"] == "y" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj, _, err := Decode([]byte(tt.doc))
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(obj.(*Pod)) {
				t.Errorf("decoded %+v", obj)
			}
		})
	}
}

func TestEncode(t *testing.T) {
	d := &Deployment{ObjectMeta: ObjectMeta{Name: "d"}}
	b, err := Encode(d)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"apiVersion":"apps/v1","kind":"Deployment"`) {
		t.Errorf("encoded %s without its type", b)
	}
	if d.Kind != "" {
		t.Errorf("Encode changed the object it was given: %+v", d.TypeMeta)
	}
	back, _, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	d.TypeMeta = TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}
	if !reflect.DeepEqual(back, d) {
		t.Errorf("round trip gave %+v, want %+v", back, d)
	}
	if _, err := Encode(&Binding{}); !errors.Is(err, ErrUnknownKind) {
		t.Errorf("Encode(Binding without type) = %v, want ErrUnknownKind", err)
	}
}

func TestYAMLDocuments(t *testing.T) {
	in := "# leading comment\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n---   # one\n\n--- \napiVersion: v1\nkind: Namespace\nmetadata:\n  name: b\n...\n"
	docs, err := YAMLDocuments([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 2 {
		t.Fatalf("got %d documents %q, want 2", len(docs), docs)
	}
	for i, want := range []string{"a", "b"} {
		obj, _, err := Decode(docs[i])
		if err != nil {
			t.Fatal(err)
		}
		if obj.GetObjectMeta().Name != want {
			t.Errorf("document %d is %q, want %q", i, obj.GetObjectMeta().Name, want)
		}
	}
	_, err = YAMLDocuments([]byte("a: 1\n---\na: [\n"))
	if err == nil || !strings.Contains(err.Error(), "YAML document 2 (from line 3)") {
		t.Errorf("error %v does not name document 2 at line 3", err)
	}
}

func TestDecodeYAMLOrJSON(t *testing.T) {
	in := `apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Namespace
  metadata: {name: a}
- apiVersion: apps/v1
  kind: Deployment
  metadata: {name: d}
  spec:
    template:
      spec:
        containers: [{name: c, image: x, stdin: true}]
---
{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}}
`
	objs, warns, err := DecodeYAMLOrJSON([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.GetTypeMeta().Kind)
	}
	if !slices.Equal(kinds, []string{"Namespace", "Deployment", "Node"}) {
		t.Errorf("kinds %q", kinds)
	}
	if len(warns) != 3 || len(warns[1]) != 1 || warns[1][0] != "spec.template.spec.containers[0].stdin: accepted but not acted on by outpost" {
		t.Errorf("warnings %q", warns)
	}
	_, _, err = DecodeYAMLOrJSON([]byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {nme: b}\n"))
	if err == nil || !strings.HasPrefix(err.Error(), "document 2: ") || !strings.Contains(err.Error(), "metadata.nme") {
		t.Errorf("error %v does not name document 2 and metadata.nme", err)
	}
}

// benchPod is a typical pod of about 1 KiB, with only fields outpost has.
const benchPod = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-7d4b9c8f6d-x2k9p","namespace":"default",
"labels":{"app":"web","pod-template-hash":"7d4b9c8f6d","tier":"frontend"},
"annotations":{"outpost.io/created-by":"deployment/web"},
"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-7d4b9c8f6d","uid":"6f1c1f0e-2b9e-4c53-9d3a-1f2e3d4c5b6a","controller":true}]},
"spec":{"containers":[{"name":"web","image":"registry.local:5000/web:1.4.2","ports":[{"name":"http","containerPort":8080,"protocol":"TCP"}],
"env":[{"name":"LOG_LEVEL","value":"info"},{"name":"PORT","value":"8080"}],
"resources":{"requests":{"cpu":"250m","memory":"128Mi"},"limits":{"cpu":"500m","memory":"256Mi"}},
"volumeMounts":[{"name":"data","mountPath":"/var/lib/web"}],"imagePullPolicy":"IfNotPresent"}],
"volumes":[{"name":"data","emptyDir":{}}],"restartPolicy":"Always","terminationGracePeriodSeconds":30,
"nodeSelector":{"zone":"us"},"schedulerName":"default-scheduler",
"tolerations":[{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}],
"affinity":{"podAntiAffinity":{"preferredDuringSchedulingIgnoredDuringExecution":[{"weight":100,"podAffinityTerm":{"labelSelector":{"matchLabels":{"app":"web"}},"topologyKey":"kubernetes.io/hostname"}}]}}},
"status":{"phase":"Pending"}}`

func BenchmarkDecodePod(b *testing.B) {
	data := []byte(benchPod)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		var p Pod
		if _, err := DecodeInto(data, &p); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodePodAnyKind(b *testing.B) {
	data := []byte(benchPod)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Decode(data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodePodKubernetesFields measures the slow path: the same pod
// with two fields that only Kubernetes has.
func BenchmarkDecodePodKubernetesFields(b *testing.B) {
	data := []byte(strings.Replace(benchPod, `"restartPolicy":"Always"`, `"restartPolicy":"Always","preemptionPolicy":"Never","enableServiceLinks":true`, 1))
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		var p Pod
		w, err := DecodeInto(data, &p)
		if err != nil || len(w) != 2 {
			b.Fatal(w, err)
		}
	}
}

// BenchmarkValidatePod measures CheckValid, which every create runs, on
// the decode benchmark's pod: field paths are built on the way down and
// must cost nothing while no field is wrong.
func BenchmarkValidatePod(b *testing.B) {
	var p Pod
	if _, err := DecodeInto([]byte(benchPod), &p); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := CheckValid(&p, nil); err != nil {
			b.Fatal(err)
		}
	}
}

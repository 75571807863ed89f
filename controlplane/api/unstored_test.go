package api

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// DropUnstored leaves exactly what the decoder keeps: the stripped
// manifest decodes without a warning of dropped fields, to the same
// object as the whole one.
func TestDropUnstored(t *testing.T) {
	for _, manifest := range []string{
		`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","selfLink":"/x","labels":{"securityContext":"a label, kept"}},
		  "spec":{"serviceAccountName":"sa","hostPID":true,"containers":[{"name":"c","image":"i","securityContext":{"privileged":true},
		  "env":[{"name":"A","value":"1"},{"name":"B","valueFrom":{"fieldRef":{"fieldPath":"x"}}}]}],
		  "volumes":[{"name":"v","emptyDir":{}}]}}`,
		`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"selector":{"matchLabels":{"a":"b"}},
		  "template":{"metadata":{"labels":{"a":"b"}},"spec":{"automountServiceAccountToken":false,
		  "containers":[{"name":"c","image":"i","readinessProbe":{"exec":{"command":["true"]}}}]}}}}`,
	} {
		var m map[string]any
		if err := json.Unmarshal([]byte(manifest), &m); err != nil {
			t.Fatal(err)
		}
		r := ResourceForKind(m["kind"].(string))
		whole := r.New()
		warns, err := DecodeInto([]byte(manifest), whole)
		if err != nil || len(warns) == 0 {
			t.Fatalf("%s: the whole manifest: %v %v; want warnings of dropped fields", r.Kind, warns, err)
		}
		DropUnstored(r, m)
		b, _ := json.Marshal(m)
		kept := r.New()
		warns, err = DecodeInto(b, kept)
		if err != nil || len(warns) != 0 {
			t.Errorf("%s: stripped %s: warnings %v, %v; want none", r.Kind, b, warns, err)
		}
		if !reflect.DeepEqual(whole, kept) {
			t.Errorf("%s: the stripped manifest decodes to another object than the whole one", r.Kind)
		}
		if r.Kind == "Pod" && !strings.Contains(string(b), `"securityContext":"a label, kept"`) {
			t.Errorf("a label named like a dropped field went too: %s", b)
		}
	}
}

package api

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// addSeedDocuments adds the seed manifests and the benchmark pod to a
// corpus, as JSON.
func addSeedDocuments(f *testing.F) {
	files, _ := filepath.Glob("testdata/seeds/*")
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		docs, err := YAMLDocuments(data)
		if err != nil {
			f.Fatal(err)
		}
		for _, d := range docs {
			f.Add(d)
		}
	}
	f.Add([]byte(benchPod))
}

// FuzzDecode checks that Decode never panics, fails only with a
// *StatusError, and that what it accepts encodes and decodes back to an
// equal object.
func FuzzDecode(f *testing.F) {
	addSeedDocuments(f)
	f.Add([]byte(podJSON(`{"containers":[{"name":"a","imagee":"x","securityContext":{}}]}`)))
	f.Add([]byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"creationTimestamp":"0001-01-01T00:00:00Z"}}`))
	f.Add([]byte(`{"apiVersion":"apps/v1","kind":"Deployment","spec":{"strategy":{"rollingUpdate":{"maxSurge":"25%","maxUnavailable":0}}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if tm, ok := peekTypeMeta(data); ok && json.Valid(data) {
			var ref TypeMeta
			if err := json.Unmarshal(data, &ref); err == nil && ref != tm {
				t.Fatalf("peekTypeMeta = %+v, encoding/json reads %+v", tm, ref)
			}
		}
		obj, _, err := Decode(data)
		if err != nil {
			if _, ok := errors.AsType[*StatusError](err); !ok {
				t.Fatalf("error %v (%T) is not a *StatusError", err, err)
			}
			return
		}
		enc, err := Encode(obj)
		if err != nil {
			t.Fatalf("Encode: %v", err)
		}
		back, w, err := Decode(enc)
		if err != nil {
			t.Fatalf("decoding the encoded object: %v\n%s", err, enc)
		}
		if len(w) != 0 {
			t.Fatalf("the encoded object has warnings %q", w)
		}
		if !SemanticEqual(obj, back) {
			t.Fatalf("round trip changed the object:\n%+v\n%+v\n%s", obj, back, enc)
		}
	})
}

// FuzzValidate checks that defaulting and validation never panic.
func FuzzValidate(f *testing.F) {
	addSeedDocuments(f)
	f.Add([]byte(`{"apiVersion":"v1","kind":"Node","metadata":{"name":"n"},"spec":{"taints":[{"key":"a/b/c","effect":"x"},{"key":"a/b/c","effect":"x"}]}}`))
	f.Add([]byte(`{"apiVersion":"apps/v1","kind":"DaemonSet","metadata":{"name":"d"},"spec":{"selector":{"matchExpressions":[{"key":"a","operator":"In"}]}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		obj, _, err := Decode(data)
		if err != nil {
			return
		}
		old, _, err := Decode(data)
		if err != nil {
			t.Fatalf("second decode failed: %v", err)
		}
		SetDefaults(obj)
		errs := Validate(obj)
		for _, e := range errs {
			if e.Field == "" {
				t.Fatalf("error without a path: %v", e)
			}
		}
		_ = ValidateUpdate(obj, old)
		SetDefaults(old)
		if errs := ValidateUpdate(obj, old); len(errs) > len(Validate(obj)) {
			// An unchanged object may only fail for what Validate finds.
			t.Fatalf("updating an object to itself is refused: %v", errs)
		}
	})
}

// FuzzParseSelector checks that parsing never panics, that errors wrap
// ErrSelector and that String parses back to the same selector.
func FuzzParseSelector(f *testing.F) {
	for _, s := range []string{"", "a=b", "a==b,c!=d", "a in (x, y)", "a notin (x)", "a", "!a", "a>1,b<2", "x in ()",
		"example.com/a=b", "a=b,", "a in (", "!", "a b", "(a)", "a=b=c"} {
		f.Add(s)
	}
	labels := map[string]string{"a": "b", "x": "", "n": "5"}
	f.Fuzz(func(t *testing.T, s string) {
		sel, err := ParseSelector(s)
		if err != nil {
			if !errors.Is(err, ErrSelector) {
				t.Fatalf("error %v is not ErrSelector", err)
			}
			return
		}
		sel.Matches(labels)
		sel.Matches(nil)
		again, err := ParseSelector(sel.String())
		if err != nil {
			t.Fatalf("String() %q does not parse: %v", sel.String(), err)
		}
		if again.String() != sel.String() || again.Matches(labels) != sel.Matches(labels) {
			t.Fatalf("%q parses back to %q", sel.String(), again.String())
		}
	})
}

// FuzzParseQuantity checks that parsing never panics, that the fast path
// agrees with exact arithmetic and that a quantity survives JSON.
func FuzzParseQuantity(f *testing.F) {
	for _, s := range []string{"100m", "500Mi", "4", "1e3", "0.5", "1.5Gi", "-1", "8Ei", "1e-9", ".5", "5.", "+1k", "0.0001m"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fast, ok := parseMilliFast(s)
		exact, exactErr := parseMilliExact(s)
		if ok && (exactErr != nil || exact != fast) {
			t.Fatalf("%q: fast path %d, exact %d (%v)", s, fast, exact, exactErr)
		}
		q, err := ParseQuantity(s)
		if err != nil {
			return
		}
		again, err := ParseQuantity(q.String())
		if err != nil || again.MilliValue() != q.MilliValue() {
			t.Fatalf("%q reparses as %v, %v", q.String(), again, err)
		}
		b, err := json.Marshal(q)
		if err != nil {
			t.Fatal(err)
		}
		var back Quantity
		if err := json.Unmarshal(b, &back); err != nil || back.MilliValue() != q.MilliValue() {
			t.Fatalf("JSON %s decodes as %v, %v", b, back, err)
		}
	})
}

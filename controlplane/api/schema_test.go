package api

import (
	"reflect"
	"testing"
)

func TestSchemaFields(t *testing.T) {
	byName := func(t reflect.Type) map[string]reflect.Type {
		out := map[string]reflect.Type{}
		for _, f := range SchemaFields(t) {
			out[f.Name] = f.Type
		}
		return out
	}
	pod := byName(reflect.TypeFor[*Pod]())
	for name, want := range map[string]reflect.Type{
		"apiVersion": reflect.TypeFor[string](), "kind": reflect.TypeFor[string](),
		"metadata": reflect.TypeFor[ObjectMeta](), "spec": reflect.TypeFor[PodSpec](), "status": reflect.TypeFor[PodStatus](),
	} {
		if got, ok := pod[name]; !ok || got != want {
			t.Errorf("Pod field %s: %v, want %v", name, got, want)
		}
	}
	if len(pod) != 5 {
		t.Errorf("Pod has %d fields, want 5: %v", len(pod), pod)
	}
	spec := byName(reflect.TypeFor[PodSpec]())
	if spec["containers"] != reflect.TypeFor[[]Container]() {
		t.Errorf("PodSpec.containers: %v", spec["containers"])
	}
	// Kubernetes-only fields are listed, without a type.
	if typ, ok := spec["serviceAccountName"]; !ok || typ != nil {
		t.Errorf("PodSpec.serviceAccountName: %v, %v; want listed without a type", typ, ok)
	}
	if SchemaFields(reflect.TypeFor[Quantity]()) != nil || SchemaFields(reflect.TypeFor[string]()) != nil {
		t.Error("a leaf type has fields")
	}
	if !SchemaLeaf(reflect.TypeFor[*Time]()) || SchemaLeaf(reflect.TypeFor[PodSpec]()) {
		t.Error("SchemaLeaf")
	}
}

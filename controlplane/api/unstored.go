package api

import "reflect"

// DropUnstored removes from manifest, an object of r as decoded into maps
// and slices (a manifest, a request body), the fields the strict decoder
// accepts with a warning but does not keep: the Kubernetes-only fields of
// known.go. What is left is what the server stores of it, so a copy kept
// beside the object (apply's last-applied annotation) records no more
// than the object holds. Values of the wrong shape are left alone: the
// decoder refuses those.
func DropUnstored(r *Resource, manifest map[string]any) {
	if r == nil || r.New == nil {
		return
	}
	dropUnstored(reflect.TypeOf(r.New()), manifest)
}

func dropUnstored(t reflect.Type, v any) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if isLeaf(t) {
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return
		}
		sf := fieldsOf(t)
		for k, x := range m {
			if f := sf.lookup(k); f != nil {
				dropUnstored(f.typ, x)
			} else if _, ok := sf.known[k]; ok {
				delete(m, k)
			}
		}
	case reflect.Map:
		if m, ok := v.(map[string]any); ok {
			for _, x := range m {
				dropUnstored(t.Elem(), x)
			}
		}
	case reflect.Slice, reflect.Array:
		if s, ok := v.([]any); ok {
			for _, x := range s {
				dropUnstored(t.Elem(), x)
			}
		}
	}
}

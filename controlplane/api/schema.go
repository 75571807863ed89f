package api

import (
	"reflect"
	"slices"
)

// SchemaField is one JSON field of an object as the strict decoder sees
// it: the decoder's own field table (the Go type's fields, by encoding/json's
// rules) plus the Kubernetes-only fields of known.go, so that `outpost
// explain` shows exactly what a manifest may hold.
type SchemaField struct {
	Name string
	// Type is the field's Go type; nil for a Kubernetes-only field,
	// which the decoder accepts with a warning and drops unread.
	Type reflect.Type
}

// SchemaFields lists the fields of a struct type in the decoder's order
// (declared fields, then those of embedded structs), then its
// Kubernetes-only fields in name order. Pointers are followed; t of any
// other kind, or one that decodes itself (Quantity, Time, IntOrString),
// has no fields.
func SchemaFields(t reflect.Type) []SchemaField {
	t = SchemaElem(t)
	if t.Kind() != reflect.Struct || isLeaf(t) {
		return nil
	}
	sf := fieldsOf(t)
	out := make([]SchemaField, 0, len(sf.fields)+len(sf.known))
	for _, f := range sf.fields {
		out = append(out, SchemaField{Name: f.name, Type: f.typ})
	}
	known := make([]string, 0, len(sf.known))
	for k := range sf.known {
		known = append(known, k)
	}
	slices.Sort(known)
	for _, k := range known {
		out = append(out, SchemaField{Name: k})
	}
	return out
}

// SchemaElem is t without pointers, as the decoder walks it.
func SchemaElem(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// SchemaLeaf reports whether values of t decode themselves from a
// string or number (Quantity, Time, IntOrString), so that they have no
// fields of their own.
func SchemaLeaf(t reflect.Type) bool {
	return isLeaf(SchemaElem(t))
}

package store

import (
	"bytes"
	"reflect"
	"strconv"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// layout says which fields of a kind are its status and which its spec, so
// that updates can keep one and replace the other for every kind in
// api.Resources without a hand-written case per kind. It is computed once
// at start-up; a kind added to api.Resources needs no change here.
type layout struct {
	status int   // field index of Status, or -1
	spec   []int // every field that is neither type, object metadata nor status
}

var (
	typeMetaType   = reflect.TypeFor[api.TypeMeta]()
	objectMetaType = reflect.TypeFor[api.ObjectMeta]()
	layouts        = buildLayouts()
)

func buildLayouts() map[reflect.Type]*layout {
	m := make(map[reflect.Type]*layout, len(api.Resources))
	for _, r := range api.Resources {
		t := reflect.TypeOf(r.New()).Elem()
		l := &layout{status: -1}
		for i := range t.NumField() {
			f := t.Field(i)
			switch {
			case f.Type == typeMetaType || f.Type == objectMetaType:
			case f.Name == "Status" && r.HasStatus:
				l.status = i
			default:
				l.spec = append(l.spec, i)
			}
		}
		m[t] = l
	}
	return m
}

func layoutOf(obj api.Object) (*layout, reflect.Value) {
	v := reflect.ValueOf(obj).Elem()
	return layouts[v.Type()], v
}

// shallowCopy returns a new object whose fields are those of obj. Maps and
// slices stay shared, which is safe because stored objects are never
// changed: the copy gets new metadata values, not changed ones.
func shallowCopy(obj api.Object) api.Object {
	switch o := obj.(type) {
	case *api.Pod:
		c := *o
		return &c
	case *api.Event:
		c := *o
		return &c
	case *api.Node:
		c := *o
		return &c
	}
	v := reflect.ValueOf(obj).Elem()
	c := reflect.New(v.Type())
	c.Elem().Set(v)
	return c.Interface().(api.Object)
}

// copyStatus sets dst's status to src's (both of one kind).
func copyStatus(dst, src api.Object) {
	l, dv := layoutOf(dst)
	if l == nil || l.status < 0 {
		return
	}
	dv.Field(l.status).Set(reflect.ValueOf(src).Elem().Field(l.status))
}

// specEqual reports whether a and b (of one kind) have equal specs: every
// field but the metadata and the status. Both went through the same JSON
// decoding, so deep equality matches equality of their encodings.
func specEqual(a, b api.Object) bool {
	l, av := layoutOf(a)
	if l == nil {
		return reflect.DeepEqual(a, b)
	}
	bv := reflect.ValueOf(b).Elem()
	for _, i := range l.spec {
		if !reflect.DeepEqual(av.Field(i).Addr().Interface(), bv.Field(i).Addr().Interface()) {
			return false
		}
	}
	return true
}

// encode is the JSON a GET returns: the typed object with apiVersion and
// kind, which the store sets on every object it keeps.
func encode(obj api.Object) ([]byte, error) {
	return api.Marshal(obj)
}

var rvKey = []byte(`"resourceVersion":"`)

// withRV returns a copy of a stored object and its encoding carrying a new
// resourceVersion, without encoding the object again. The first
// `"resourceVersion":"` in an encoding is the object's own: apiVersion,
// kind and the metadata fields before it are plain strings, and a JSON
// string never holds an unescaped quote. If the encoding is not as
// expected, it is encoded again.
func withRV(obj api.Object, raw []byte, rv uint64) (api.Object, []byte, error) {
	c := shallowCopy(obj)
	m := c.GetObjectMeta()
	old := m.ResourceVersion
	m.ResourceVersion = strconv.FormatUint(rv, 10)
	if out, ok := patchRV(raw, old, m.ResourceVersion); ok {
		return c, out, nil
	}
	b, err := encode(c)
	return c, b, err
}

// patchRV returns a copy of raw with the object's resourceVersion old
// replaced by rv, or false if raw is not as expected.
func patchRV(raw []byte, old, rv string) ([]byte, bool) {
	i := bytes.Index(raw, rvKey)
	if i < 0 {
		return nil, false
	}
	start := i + len(rvKey)
	end := start + len(old)
	if end >= len(raw) || string(raw[start:end]) != old || raw[end] != '"' {
		return nil, false
	}
	out := make([]byte, 0, len(raw)+len(rv)-len(old))
	out = append(out, raw[:start]...)
	out = append(out, rv...)
	return append(out, raw[end:]...), true
}

// hasFinalizers reports whether obj must wait for finalizers before it
// goes. A namespace's spec.finalizers count too, except "kubernetes": that
// one stands for deleting the namespace's content, which the store does
// itself.
func hasFinalizers(obj api.Object) bool {
	if len(obj.GetObjectMeta().Finalizers) > 0 {
		return true
	}
	if ns, ok := obj.(*api.Namespace); ok {
		for _, f := range ns.Spec.Finalizers {
			if f != "kubernetes" {
				return true
			}
		}
	}
	return false
}

// eventTime is when an Event was last seen, for expiry.
func eventTime(ev *api.Event) api.Time {
	switch {
	case ev.LastTimestamp != nil && !ev.LastTimestamp.IsZero():
		return *ev.LastTimestamp
	case ev.FirstTimestamp != nil && !ev.FirstTimestamp.IsZero():
		return *ev.FirstTimestamp
	case ev.CreationTimestamp != nil:
		return *ev.CreationTimestamp
	}
	return api.Time{}
}

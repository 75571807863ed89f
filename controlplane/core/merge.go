package core

import (
	"reflect"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// statusField is, per kind with a status subresource, the index of its
// Status field. The store merges the same way when it applies an update;
// the server merges first so that validation and admission judge the
// object that will be stored, not the one that was sent.
var statusField = func() map[reflect.Type]int {
	m := map[reflect.Type]int{}
	for _, r := range api.Resources {
		if !r.HasStatus {
			continue
		}
		t := reflect.TypeOf(r.New()).Elem()
		if f, ok := t.FieldByName("Status"); ok && len(f.Index) == 1 {
			m[t] = f.Index[0]
		}
	}
	return m
}()

// keepStatus gives obj the status of old (same kind): a write to the main
// resource does not change the status.
func keepStatus(obj, old api.Object) {
	v := reflect.ValueOf(obj).Elem()
	i, ok := statusField[v.Type()]
	if !ok {
		return
	}
	v.Field(i).Set(reflect.ValueOf(old).Elem().Field(i))
}

// keepAllButStatus makes obj a copy of old with obj's own status: a write
// to /status changes nothing else. The resourceVersion obj carries (the
// precondition) is kept too.
func keepAllButStatus(obj, old api.Object) {
	v := reflect.ValueOf(obj).Elem()
	i, ok := statusField[v.Type()]
	if !ok {
		return
	}
	rv := obj.GetObjectMeta().ResourceVersion
	st := reflect.New(v.Field(i).Type()).Elem()
	st.Set(v.Field(i))
	v.Set(reflect.ValueOf(old).Elem())
	v.Field(i).Set(st)
	obj.GetObjectMeta().ResourceVersion = rv
}

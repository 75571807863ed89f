package store

import (
	"hash/maphash"
	"math"
	"reflect"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// interner makes stored objects share equal maps and slices (issue 16
// item 3). Pods of one template carry the same labels, annotations,
// containers, volumes and tolerations; decoded, each pod held its own
// copy of them: about half of a 150,000-pod store's heap. Stored objects
// are never changed (DESIGN.md, the mutation detector), so equal parts may
// be one value, as shallow copies of one object already share theirs.
//
// Only the applier uses it (Apply and Restore run one at a time), so it
// has no lock. Interning changes no content: what a server stores, encodes
// and hashes is the same with or without it, so servers need not agree on
// it. The table forgets everything once it holds maxInterned values, which
// bounds what it keeps alive; values already shared stay shared.
type interner struct {
	seed maphash.Seed
	vals map[uint64][]reflect.Value
	n    int
}

const maxInterned = 1 << 15

var stringMap = reflect.TypeFor[map[string]string]()

// object replaces the maps and slices of obj's metadata, and the maps,
// slices and pointers of its spec, with equal ones already stored. prev,
// if not nil, is the version obj replaces: a field that is still prev's
// (a status update or a bind copies the rest) is already interned. obj
// must not be shared yet.
func (in *interner) object(obj, prev api.Object) {
	var pm, pv reflect.Value
	if prev != nil && reflect.TypeOf(prev) == reflect.TypeOf(obj) {
		pm = reflect.ValueOf(prev.GetObjectMeta()).Elem()
		pv = reflect.ValueOf(prev).Elem()
	}
	// Metadata pointers are times and grace periods, which differ from
	// object to object.
	in.fields(reflect.ValueOf(obj.GetObjectMeta()).Elem(), pm, false)
	if spec := reflect.ValueOf(obj).Elem().FieldByName("Spec"); spec.IsValid() && spec.Kind() == reflect.Struct {
		var ps reflect.Value
		if pv.IsValid() {
			ps = pv.FieldByName("Spec")
		}
		in.fields(spec, ps, true)
	}
}

// fields interns the map and slice fields of struct v, and its pointer
// fields if pointers is set. prev is the struct v replaces, or invalid.
func (in *interner) fields(v, prev reflect.Value, pointers bool) {
	for i := range v.NumField() {
		f := v.Field(i)
		if !f.CanSet() {
			continue
		}
		switch k := f.Kind(); {
		case k == reflect.Map || k == reflect.Slice || (k == reflect.Pointer && pointers):
			if f.IsNil() || (prev.IsValid() && same(f, prev.Field(i))) {
				continue
			}
			f.Set(in.value(f))
		}
	}
}

// same reports whether maps, slices or pointers a and b are one value.
func same(a, b reflect.Value) bool {
	if a.Kind() == reflect.Slice && a.Len() != b.Len() {
		return false
	}
	return a.UnsafePointer() == b.UnsafePointer()
}

// value returns the stored value equal to v, remembering v if there is
// none.
func (in *interner) value(v reflect.Value) reflect.Value {
	if in.vals == nil {
		in.seed = maphash.MakeSeed()
		in.vals = make(map[uint64][]reflect.Value)
	}
	var h maphash.Hash
	h.SetSeed(in.seed)
	writeHash(&h, v)
	k := h.Sum64()
	for _, c := range in.vals[k] {
		if c.Type() == v.Type() && api.EqualValues(c, v) {
			return c
		}
	}
	if in.n >= maxInterned {
		clear(in.vals)
		in.n = 0
	}
	in.vals[k] = append(in.vals[k], v)
	in.n++
	return v
}

// writeHash writes v's content into h: equal values (reflect.DeepEqual)
// write equal bytes. Map entries are combined in an order-free way.
func writeHash(h *maphash.Hash, v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		h.WriteString(v.String())
		h.WriteByte(0)
	case reflect.Bool:
		if v.Bool() {
			h.WriteByte(1)
		} else {
			h.WriteByte(0)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		writeUint(h, uint64(v.Int()))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		writeUint(h, v.Uint())
	case reflect.Float32, reflect.Float64:
		writeUint(h, math.Float64bits(v.Float()))
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			h.WriteByte(0)
			return
		}
		h.WriteByte(1)
		writeHash(h, v.Elem())
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.IsNil() {
			h.WriteByte(0)
			return
		}
		writeUint(h, uint64(v.Len())+1)
		for i := range v.Len() {
			writeHash(h, v.Index(i))
		}
	case reflect.Map:
		if v.IsNil() {
			h.WriteByte(0)
			return
		}
		writeUint(h, uint64(v.Len())+1)
		var sum uint64
		if v.Type() == stringMap && v.CanInterface() {
			// Labels, annotations, selectors: without reflect's copies.
			for k, x := range v.Interface().(map[string]string) {
				sum += maphash.String(h.Seed(), k) ^ (maphash.String(h.Seed(), x) * 0x9e3779b97f4a7c15)
			}
			writeUint(h, sum)
			return
		}
		var eh maphash.Hash
		eh.SetSeed(h.Seed())
		k, x := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		it := v.MapRange()
		for it.Next() {
			eh.Reset()
			k.SetIterKey(it)
			x.SetIterValue(it)
			writeHash(&eh, k)
			writeHash(&eh, x)
			sum += eh.Sum64()
		}
		writeUint(h, sum)
	case reflect.Struct:
		for i := range v.NumField() {
			writeHash(h, v.Field(i))
		}
	default:
		// Kinds the API types do not use (channels, funcs): hash the kind
		// only; DeepEqual still decides.
		writeUint(h, uint64(v.Kind()))
	}
}

func writeUint(h *maphash.Hash, u uint64) {
	var b [8]byte
	for i := range b {
		b[i] = byte(u >> (8 * i))
	}
	h.Write(b[:])
}

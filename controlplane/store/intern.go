package store

import (
	"hash/maphash"
	"math"
	"reflect"
	"slices"
	"sync"
	"unsafe"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// interner makes stored objects share equal values (issue 16 item 3).
// Pods of one template carry the same labels, annotations, containers,
// volumes and tolerations; pods started in the same second carry the same
// conditions; every object of a namespace names it, every event of the
// scheduler its component. Decoded, each object held its own copy of all
// of them: at 150,000 running pods with their Scheduled events, most of a
// store's heap. Stored objects are never changed (DESIGN.md, the mutation
// detector), so equal parts may be one value, as shallow copies of one
// object already share theirs.
//
// It shares three things, each found in its own table:
//   - maps, slices and pointers, found by a content hash and compared
//     field by field (value);
//   - strings, but for those that name one object only (uniqueFields);
//   - times (*api.Time), by their value.
//
// Only the applier uses it (Apply and Restore run one at a time), so it
// has no lock. Interning changes no content: what a server stores, encodes
// and hashes is the same with or without it, so servers need not agree on
// it. Each table forgets everything once it holds maxInterned values,
// which bounds what it keeps alive; values already shared stay shared.
type interner struct {
	seed  maphash.Seed
	vals  map[uint64][]reflect.Value
	n     int
	strs  map[string]string
	times map[api.Time]*api.Time
	// off turns it off, for the tests that compare a store with one that
	// shares nothing.
	off bool
}

const (
	maxInterned = 1 << 15
	// maxInternedString is the longest string shared: longer ones are
	// messages, rarely repeated, and would pin more memory in the table.
	maxInternedString = 256
)

var (
	stringMap   = reflect.TypeFor[map[string]string]()
	apiTimeType = reflect.TypeFor[api.Time]()
)

// object makes obj share its values with objects already stored. prev, if
// not nil, is the version obj replaces: a field that is still prev's (a
// status update or a bind copies the rest) is already interned. obj must
// not be shared yet. decoded says that obj's maps, slices and pointers
// other than prev's are its own, fresh from decoding, so that what they
// hold may be replaced too; otherwise (an object built from a stored one,
// or handed over by the server that built it) only obj's own fields are
// set, and a map, slice or pointer is shared whole or left as it is.
func (in *interner) object(obj, prev api.Object, decoded bool) {
	if in.off {
		return
	}
	v := reflect.ValueOf(obj)
	var pv unsafe.Pointer
	if prev != nil && reflect.TypeOf(prev) == v.Type() {
		pv = reflect.ValueOf(prev).UnsafePointer()
	}
	in.walk(v.UnsafePointer(), pv, internPlanOf(v.Type().Elem()), decoded)
	if p, ok := obj.(*api.Pod); ok && decoded {
		// status.podIPs[0] is status.podIP, one address per pod.
		var prevIPs []api.PodIPEntry
		if pp, ok := prev.(*api.Pod); ok {
			prevIPs = pp.Status.PodIPs
		}
		if ips := p.Status.PodIPs; len(ips) > 0 && ips[0].IP == p.Status.PodIP && !sameSlice(ips, prevIPs) {
			ips[0].IP = p.Status.PodIP
		}
	}
}

// shareInvolved makes event ev name its involved object with the strings
// that object is stored with, if it is stored: the scheduler's event of
// each pod names the pod and its uid again. get finds an entry of t:
// (*table).get for the store's tables, or a restore's own.
func (s *Store) shareInvolved(ev *api.Event, get func(t *table, ns, name string) *entry) {
	if s.intern.off {
		return
	}
	ref := &ev.InvolvedObject
	t := s.byKind[ref.Kind]
	if t == nil || ref.Name == "" || !isAPIVersion(t.res, ref.APIVersion) {
		return
	}
	ns := ref.Namespace
	if !t.res.Namespaced {
		ns = ""
	}
	e := get(t, ns, ref.Name)
	if e == nil {
		return
	}
	m := e.obj.GetObjectMeta()
	ref.Name = m.Name // the key it was found by
	if ref.UID == m.UID {
		ref.UID = m.UID
	}
}

// isAPIVersion reports whether v is r's apiVersion, without building it.
func isAPIVersion(r *api.Resource, v string) bool {
	if r.Group == "" {
		return v == r.Version
	}
	g := len(r.Group)
	return len(v) == g+1+len(r.Version) && v[:g] == r.Group && v[g] == '/' && v[g+1:] == r.Version
}

// walk interns the fields of the struct at v that plan p names; prev is
// the struct v replaces, or nil. v's own fields are set; with deep, so are
// those of the slices and pointers it holds (other than prev's). It works
// on addresses rather than reflect.Values: a pod has some sixty fields to
// look at, most of them still prev's, and reflect's field access checks
// each field's name.
func (in *interner) walk(v, prev unsafe.Pointer, p *internPlan, deep bool) {
	for i := range p.ops {
		o := &p.ops[i]
		f := unsafe.Add(v, o.off)
		var pf unsafe.Pointer
		if prev != nil {
			pf = unsafe.Add(prev, o.off)
		}
		switch o.kind {
		case opString:
			sp := (*string)(f)
			s := *sp
			if s == "" || len(s) > maxInternedString || (pf != nil && unsafe.StringData(s) == unsafe.StringData(*(*string)(pf))) {
				continue
			}
			if c := in.str(s); unsafe.StringData(c) != unsafe.StringData(s) {
				*sp = c
			}
		case opTime:
			tp := (**api.Time)(f)
			if *tp == nil || (pf != nil && *tp == *(**api.Time)(pf)) {
				continue
			}
			if c := in.time(*tp); c != *tp {
				*tp = c
			}
		case opStruct:
			in.walk(f, pf, o.elem, deep)
		default:
			// The first word of a map, slice or pointer is its address.
			data := *(*unsafe.Pointer)(f)
			if data == nil || (pf != nil && sameAt(o.kind, f, pf)) {
				continue
			}
			if o.share {
				fv := reflect.NewAt(o.typ, f).Elem()
				if c := in.value(fv); c.UnsafePointer() != data {
					fv.Set(c)
					continue
				}
			}
			if !deep {
				continue
			}
			// The first of its kind, or one that is never shared whole:
			// share what it holds.
			switch {
			case o.kind == opPointer && o.elem != nil:
				in.walk(data, nil, o.elem, true)
			case o.kind == opSlice && o.elem != nil:
				for j := range sliceLen(f) {
					in.walk(unsafe.Add(data, uintptr(j)*o.size), nil, o.elem, true)
				}
			case o.kind == opSlice && o.strs:
				ss := *(*[]string)(f) // or of a string type: the same layout
				for j, e := range ss {
					if len(e) <= maxInternedString {
						ss[j] = in.str(e)
					}
				}
			}
		}
	}
}

// sameAt reports whether the map, slice or pointer (kind k) at f is the
// one at pf.
func sameAt(k internOp, f, pf unsafe.Pointer) bool {
	return *(*unsafe.Pointer)(f) == *(*unsafe.Pointer)(pf) && (k != opSlice || sliceLen(f) == sliceLen(pf))
}

// sliceLen is the length of the slice at f, of any element type.
func sliceLen(f unsafe.Pointer) int { return len(*(*[]byte)(f)) }

// str returns the stored string equal to s, remembering s if there is
// none.
func (in *interner) str(s string) string {
	if c, ok := in.strs[s]; ok {
		return c
	}
	if in.strs == nil {
		in.strs = make(map[string]string)
	} else if len(in.strs) >= maxInterned {
		clear(in.strs)
	}
	in.strs[s] = s
	return s
}

// time returns the stored time equal to *t (the same instant, location
// and all, so that it encodes and compares the same), remembering t if
// there is none.
func (in *interner) time(t *api.Time) *api.Time {
	if in.off {
		return t
	}
	if c, ok := in.times[*t]; ok {
		return c
	}
	if in.times == nil {
		in.times = make(map[api.Time]*api.Time)
	} else if len(in.times) >= maxInterned {
		clear(in.times)
	}
	in.times[*t] = t
	return t
}

// uniqueFields are the string fields whose values name one object, or one
// container or address of it: interning them would fill the table for
// nothing. A map, slice or pointer holding one is never equal to another
// object's, so it is not looked up whole either (but for a spec's).
var uniqueFields = map[reflect.Type][]string{
	reflect.TypeFor[api.ObjectMeta]():               {"Name", "UID", "ResourceVersion"},
	reflect.TypeFor[api.ObjectReference]():          {"Name", "UID", "ResourceVersion"},
	reflect.TypeFor[api.Event]():                    {"Message"},
	reflect.TypeFor[api.PodStatus]():                {"PodIP"},
	reflect.TypeFor[api.PodIPEntry]():               {"IP"},
	reflect.TypeFor[api.ContainerStatus]():          {"ContainerID"},
	reflect.TypeFor[api.ContainerStateTerminated](): {"ContainerID"},
}

type internOp uint8

const (
	opString  internOp = iota // intern the string
	opTime                    // intern the *api.Time
	opStruct                  // walk the struct (elem)
	opSlice                   // share whole (share); with deep, walk its elements (elem, strs)
	opPointer                 // share whole (share); with deep, walk what it points to (elem)
	opMap                     // share whole (share)
)

// op is what walk does with one field.
type op struct {
	field int          // its index
	off   uintptr      // its offset
	typ   reflect.Type // its type
	size  uintptr      // the size of a slice's element
	kind  internOp
	share bool
	strs  bool        // a slice of strings
	elem  *internPlan // the struct a struct field, slice or pointer holds; nil if nothing in it is interned
}

// internPlan is what walk does with a struct type's fields.
type internPlan struct {
	ops []op
	// unique is set if the type holds a uniqueFields string, anywhere.
	unique bool
}

var (
	internPlansMu sync.Mutex
	internPlans   sync.Map // reflect.Type → *internPlan
)

// internPlanOf returns the plan of object type t: its metadata and what is
// neither spec nor metadata as any struct; the maps, slices and pointers
// right in its spec are shared whole even if they hold unique strings, as
// a template's containers and volumes are.
func internPlanOf(t reflect.Type) *internPlan {
	if p, ok := internPlans.Load(t); ok {
		return p.(*internPlan)
	}
	internPlansMu.Lock()
	defer internPlansMu.Unlock()
	// Restore's decoders start together: the first to get the lock builds
	// the plan, the others find it.
	if p, ok := internPlans.Load(t); ok {
		return p.(*internPlan)
	}
	p := buildInternPlan(t, map[reflect.Type]*internPlan{})
	for i := range p.ops {
		if o := &p.ops[i]; o.kind == opStruct && t.Field(o.field).Name == "Spec" {
			spec := *o.elem
			spec.ops = slices.Clone(spec.ops)
			for j := range spec.ops {
				spec.ops[j].share = true
			}
			o.elem = &spec
		}
	}
	internPlans.Store(t, p)
	return p
}

// buildInternPlan returns the plan of struct type t; nil if it has nothing to
// intern. seen holds the plans being built, for types that hold
// themselves.
func buildInternPlan(t reflect.Type, seen map[reflect.Type]*internPlan) *internPlan {
	if p, ok := seen[t]; ok {
		return p
	}
	p := &internPlan{}
	seen[t] = p
	unique := uniqueFields[t]
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		ft := f.Type
		o := op{field: i, off: f.Offset, typ: ft, share: true}
		switch ft.Kind() {
		case reflect.String:
			if slices.Contains(unique, f.Name) {
				p.unique = true
				continue
			}
			o.kind = opString
		case reflect.Struct:
			o.kind, o.elem = opStruct, buildInternPlan(ft, seen)
			if o.elem == nil {
				continue
			}
			p.unique = p.unique || o.elem.unique
		case reflect.Pointer:
			o.kind = opPointer
			if ft.Elem() == apiTimeType {
				o.kind = opTime
			} else if ft.Elem().Kind() == reflect.Struct {
				o.elem = buildInternPlan(ft.Elem(), seen)
				o.share = o.elem == nil || !o.elem.unique
			}
		case reflect.Slice:
			o.kind, o.size = opSlice, ft.Elem().Size()
			o.strs = ft.Elem().Kind() == reflect.String
			if ft.Elem().Kind() == reflect.Struct {
				o.elem = buildInternPlan(ft.Elem(), seen)
				o.share = o.elem == nil || !o.elem.unique
			}
		case reflect.Map:
			o.kind = opMap
		default:
			continue
		}
		p.ops = append(p.ops, o)
	}
	if len(p.ops) == 0 && !p.unique {
		return nil
	}
	return p
}

// sameSlice reports whether a and b are one slice.
func sameSlice[E any](a, b []E) bool {
	return len(a) == len(b) && unsafe.SliceData(a) == unsafe.SliceData(b)
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

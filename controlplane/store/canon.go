package store

import (
	"encoding"
	"encoding/json"
	"reflect"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// canonicalize brings obj, in place, to the value that decoding its own
// JSON encoding gives: what a follower holds after it decoded the create
// command built from obj. It reports false when obj holds something it
// cannot vouch for (an interface value, a string that is not UTF-8, a value
// the encoder or decoder would refuse, a type it has no rule for); the
// caller then decodes the command instead.
//
// The leader's Apply uses it to keep the object the handler already decoded
// and validated rather than decode the command a second time: every server
// must hold equal typed objects (reflect.DeepEqual), because the store's
// later decisions read them (the generation bump compares specs deeply).
// The rules mirror encoding/json's:
//   - a field the encoder omits (omitempty and empty, omitzero and zero,
//     json:"-") decodes to its zero value: an empty map or slice becomes nil;
//   - a type with its own MarshalJSON or MarshalText becomes the decode of
//     its encoding (Quantity, Time and IntOrString by a direct rule);
//   - a pointer whose target encodes as null decodes to nil;
//   - anything else keeps its value; structs, pointers, slices and maps are
//     walked.
//
// Nothing is written where the value is canonical already, so parts that
// obj shares with stored (decoded, hence canonical) objects are only read.
//
// A test fills every kind of the Resource table with random values, empty
// collections and zero leaves included, and checks the result against a
// real encode and decode.
func canonicalize(obj any) bool {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return false
	}
	p := planOf(v.Type().Elem())
	if p == nil {
		return false
	}
	_, ok := p(v.Elem())
	return ok
}

// canonFunc canonicalizes an addressable value in place. changed reports
// whether it wrote anything (there or below); ok false means it could not.
type canonFunc func(v reflect.Value) (changed, ok bool)

var (
	plans   sync.Map // reflect.Type → canonFunc (nil: no plan)
	plansMu sync.Mutex

	marshalerType     = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
	isZeroerType      = reflect.TypeFor[interface{ IsZero() bool }]()

	// leafRules are the self-encoding API types canonicalized directly
	// rather than by an encode and a decode.
	leafRules = map[reflect.Type]canonFunc{
		reflect.TypeFor[api.Quantity]():    canonQuantity,
		reflect.TypeFor[api.Time]():        canonTime,
		reflect.TypeFor[api.IntOrString](): canonIntOrString,
	}
	// encodesNull says which of the leafRules types encode as null for
	// some values (a pointer to such a value decodes as nil).
	encodesNull = map[reflect.Type]func(reflect.Value) bool{
		reflect.TypeFor[api.Time](): func(v reflect.Value) bool { return v.Interface().(api.Time).IsZero() },
	}
)

// planOf returns the canonFunc of t, building it once.
func planOf(t reflect.Type) canonFunc {
	if p, ok := plans.Load(t); ok {
		return p.(canonFunc)
	}
	plansMu.Lock()
	defer plansMu.Unlock()
	if p, ok := plans.Load(t); ok {
		return p.(canonFunc)
	}
	b := planBuilder{building: map[reflect.Type]*canonFunc{}}
	p := b.plan(t)
	plans.Store(t, p)
	return p
}

type planBuilder struct {
	// building holds the plans under construction, for recursive types.
	building map[reflect.Type]*canonFunc
}

func keep(reflect.Value) (bool, bool) { return false, true }

func validString(v reflect.Value) (bool, bool) { return false, utf8.ValidString(v.String()) }

// hasOwnEncoding reports whether t (or *t) encodes itself.
func hasOwnEncoding(t reflect.Type) bool {
	pt := reflect.PointerTo(t)
	return t.Implements(marshalerType) || pt.Implements(marshalerType) ||
		t.Implements(textMarshalerType) || pt.Implements(textMarshalerType)
}

func (b *planBuilder) plan(t reflect.Type) canonFunc {
	if p, ok := b.building[t]; ok {
		// A recursive type: call the plan once it is built.
		return func(v reflect.Value) (bool, bool) { return (*p)(v) }
	}
	var p canonFunc
	b.building[t] = &p
	defer delete(b.building, t)
	p = b.build(t)
	return p
}

func (b *planBuilder) build(t reflect.Type) canonFunc {
	if r, ok := leafRules[t]; ok {
		return r
	}
	if t.Kind() == reflect.Pointer {
		// Before the method check: *T has T's methods too.
		return b.pointerPlan(t)
	}
	if hasOwnEncoding(t) {
		return roundTrip
	}
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64:
		return keep
	case reflect.String:
		return validString
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 && !hasOwnEncoding(t.Elem()) {
			return keep // base64, decoded byte for byte
		}
		fallthrough
	case reflect.Array:
		elem := b.plan(t.Elem())
		if elem == nil {
			return nil
		}
		return func(v reflect.Value) (bool, bool) {
			any := false
			for i := range v.Len() {
				c, ok := elem(v.Index(i))
				if !ok {
					return any, false
				}
				any = any || c
			}
			return any, true
		}
	case reflect.Map:
		return b.mapPlan(t)
	case reflect.Struct:
		return b.structPlan(t)
	}
	// Interfaces, channels, functions: no rule.
	return nil
}

func (b *planBuilder) pointerPlan(t reflect.Type) canonFunc {
	elemT := t.Elem()
	var elem canonFunc
	if hasOwnEncoding(elemT) && leafRules[elemT] == nil {
		return pointerRoundTrip
	}
	if elem = b.plan(elemT); elem == nil {
		return nil
	}
	null := encodesNull[elemT]
	return func(v reflect.Value) (bool, bool) {
		if v.IsNil() {
			return false, true
		}
		if null != nil && null(v.Elem()) {
			v.SetZero()
			return true, true
		}
		return elem(v.Elem())
	}
}

func (b *planBuilder) mapPlan(t reflect.Type) canonFunc {
	if t.Key().Kind() != reflect.String || hasOwnEncoding(t.Key()) {
		return nil
	}
	if t == reflect.TypeFor[map[string]string]() {
		return func(v reflect.Value) (bool, bool) {
			for k, e := range v.Interface().(map[string]string) {
				if !utf8.ValidString(k) || !utf8.ValidString(e) {
					return false, false
				}
			}
			return false, true
		}
	}
	elem := b.plan(t.Elem())
	if elem == nil {
		return nil
	}
	return func(v reflect.Value) (bool, bool) {
		if v.Len() == 0 {
			return false, true
		}
		any := false
		// Read into k and tmp: it.Key and it.Value copy each to the heap.
		k, tmp := reflect.New(t.Key()).Elem(), reflect.New(t.Elem()).Elem()
		for it := v.MapRange(); it.Next(); {
			k.SetIterKey(it)
			if !utf8.ValidString(k.String()) {
				return any, false
			}
			tmp.SetIterValue(it)
			c, ok := elem(tmp)
			if !ok {
				return any, false
			}
			if c {
				// Replacing an existing key's value during iteration is
				// allowed; it happens only where the value was not
				// canonical, so never in a map shared with a stored object.
				v.SetMapIndex(k, tmp)
				any = true
			}
		}
		return any, true
	}
}

// fieldPlan is what canonicalization does with one struct field.
type fieldPlan struct {
	index     int
	drop      bool // json:"-": never encoded, so zero after a decode
	omitEmpty bool
	omitZero  func(reflect.Value) bool
	canon     canonFunc
}

func (b *planBuilder) structPlan(t reflect.Type) canonFunc {
	fields := make([]fieldPlan, 0, t.NumField())
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if sf.Anonymous && name == "" && tag != "-" {
			// An embedded struct without a name of its own (TypeMeta)
			// promotes its fields: walking it as a struct applies the same
			// per-field rules. Promotion conflicts and embedded pointers
			// are not handled.
			if sf.Type.Kind() != reflect.Struct || hasOwnEncoding(sf.Type) {
				return nil
			}
			p := b.plan(sf.Type)
			if p == nil {
				return nil
			}
			fields = append(fields, fieldPlan{index: i, canon: p})
			continue
		}
		if !sf.IsExported() && !sf.Anonymous {
			// Never encoded, so zero after a decode, which reflect cannot
			// set here: such structs get no plan.
			return nil
		}
		if tag == "-" {
			fields = append(fields, fieldPlan{index: i, drop: true})
			continue
		}
		fp := fieldPlan{index: i}
		for o := range strings.SplitSeq(opts, ",") {
			switch o {
			case "omitempty":
				fp.omitEmpty = true
			case "omitzero":
				fp.omitZero = isZeroFunc(sf.Type)
			case "", "inline":
			case "string":
				if k := sf.Type.Kind(); k == reflect.String || k == reflect.Pointer {
					return nil
				}
			default:
				return nil
			}
		}
		if fp.canon = b.plan(sf.Type); fp.canon == nil {
			return nil
		}
		fields = append(fields, fp)
	}
	return func(v reflect.Value) (bool, bool) {
		any := false
		for i := range fields {
			f := &fields[i]
			fv := v.Field(f.index)
			if f.drop || f.omitEmpty && isEmpty(fv) || f.omitZero != nil && f.omitZero(fv) {
				// The encoder leaves the field out; a decode leaves it zero.
				if !fv.IsZero() {
					fv.SetZero()
					any = true
				}
				continue
			}
			c, ok := f.canon(fv)
			if !ok {
				return any, false
			}
			any = any || c
		}
		return any, true
	}
}

// isEmpty is encoding/json's omitempty test.
func isEmpty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Interface, reflect.Pointer:
		return v.IsZero()
	}
	return false
}

// isZeroFunc is encoding/json's omitzero test for values of type t: the
// type's IsZero method if it has one, else the zero value.
func isZeroFunc(t reflect.Type) func(reflect.Value) bool {
	switch {
	case t.Kind() == reflect.Pointer && t.Implements(isZeroerType):
		return func(v reflect.Value) bool {
			return v.IsNil() || v.Interface().(interface{ IsZero() bool }).IsZero()
		}
	case t.Kind() == reflect.Interface:
		return nil // no plan is built for interfaces anyway
	case t.Implements(isZeroerType):
		return func(v reflect.Value) bool { return v.Interface().(interface{ IsZero() bool }).IsZero() }
	case reflect.PointerTo(t).Implements(isZeroerType):
		return func(v reflect.Value) bool { return v.Addr().Interface().(interface{ IsZero() bool }).IsZero() }
	}
	return reflect.Value.IsZero
}

// canonQuantity: a quantity encodes as its text ("0" when it has none) and
// decodes by parsing that text.
func canonQuantity(v reflect.Value) (bool, bool) {
	q := v.Addr().Interface().(*api.Quantity)
	s := q.String()
	if !utf8.ValidString(s) {
		return false, false
	}
	pq, err := api.ParseQuantity(strings.TrimSpace(s))
	if err != nil {
		return false, false
	}
	if pq == *q {
		return false, true
	}
	*q = pq
	return true, true
}

// canonTime: a time encodes as RFC 3339 in UTC with whole seconds (zero as
// null, which decodes to zero); years outside 0-9999 do not decode.
func canonTime(v reflect.Value) (bool, bool) {
	t := v.Addr().Interface().(*api.Time)
	if t.IsZero() {
		if *t == (api.Time{}) {
			return false, true
		}
		*t = api.Time{}
		return true, true
	}
	ct := t.UTC().Truncate(time.Second)
	if y := ct.Year(); y < 0 || y > 9999 {
		return false, false
	}
	if t.Time == ct {
		return false, true
	}
	t.Time = ct
	return true, true
}

// canonIntOrString: a number or a string, the other half dropped.
func canonIntOrString(v reflect.Value) (bool, bool) {
	x := v.Addr().Interface().(*api.IntOrString)
	c := api.IntOrString{IsString: x.IsString, IntVal: x.IntVal}
	if x.IsString {
		if !utf8.ValidString(x.StrVal) {
			return false, false
		}
		c = api.IntOrString{IsString: true, StrVal: x.StrVal}
	}
	if c == *x {
		return false, true
	}
	*x = c
	return true, true
}

// roundTrip replaces a self-encoding leaf without a rule of its own by the
// decode of its encoding.
func roundTrip(v reflect.Value) (bool, bool) {
	b, err := api.Marshal(v.Addr().Interface())
	if err != nil {
		return false, false
	}
	n := reflect.New(v.Type())
	if err := unmarshal(b, n.Interface()); err != nil {
		return false, false
	}
	if reflect.DeepEqual(v.Interface(), n.Elem().Interface()) {
		return false, true
	}
	v.Set(n.Elem())
	return true, true
}

// pointerRoundTrip is roundTrip for a pointer to such a leaf: a target
// that encodes as null decodes as a nil pointer.
func pointerRoundTrip(v reflect.Value) (bool, bool) {
	if v.IsNil() {
		return false, true
	}
	b, err := api.Marshal(v.Interface())
	if err != nil {
		return false, false
	}
	n := reflect.New(v.Type())
	if err := unmarshal(b, n.Interface()); err != nil {
		return false, false
	}
	if reflect.DeepEqual(v.Interface(), n.Elem().Interface()) {
		return false, true
	}
	v.Set(n.Elem())
	return true, true
}

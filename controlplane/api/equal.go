package api

import (
	"maps"
	"reflect"
)

var (
	quantityType  = reflect.TypeFor[Quantity]()
	timeType      = reflect.TypeFor[Time]()
	stringMapType = reflect.TypeFor[map[string]string]()

	resourceListType = reflect.TypeFor[ResourceList]()
)

// SemanticEqual reports whether a and b hold the same API value: as
// reflect.DeepEqual, except that a nil and an empty slice or map are equal
// (JSON cannot tell them apart), quantities compare by amount ("1" equals
// "1000m"), times by instant, and a missing time equals the zero time.
func SemanticEqual(a, b any) bool {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	if !va.IsValid() || !vb.IsValid() {
		return va.IsValid() == vb.IsValid()
	}
	if va.Type() != vb.Type() {
		return false
	}
	return equalValue(va, vb, true)
}

// EqualValues reports whether a and b, of one type, hold equal content as
// reflect.DeepEqual would (nil and empty differ, "1" and "1000m" differ),
// without boxing them into interfaces: the store compares parts of
// objects with it on every write.
func EqualValues(a, b reflect.Value) bool { return equalValue(a, b, false) }

// equalValue reports whether a and b, of one type, hold the same API value
// (semantic) or the same content (not semantic, as reflect.DeepEqual).
func equalValue(a, b reflect.Value, semantic bool) bool {
	if semantic {
		switch a.Type() {
		case quantityType:
			return a.Field(1).Int() == b.Field(1).Int()
		case timeType:
			return a.Interface().(Time).Equal(b.Interface().(Time).Time)
		}
	}
	switch a.Kind() {
	case reflect.Pointer, reflect.Interface:
		if a.IsNil() || b.IsNil() {
			if semantic && a.Type().Elem() == timeType {
				// A zero time encodes as null, which decodes as nil.
				return isZeroTimePtr(a) && isZeroTimePtr(b)
			}
			return a.IsNil() == b.IsNil()
		}
		if a.Kind() == reflect.Interface && a.Elem().Type() != b.Elem().Type() {
			return false
		}
		return equalValue(a.Elem(), b.Elem(), semantic)
	case reflect.Struct:
		for i := range a.NumField() {
			if !equalValue(a.Field(i), b.Field(i), semantic) {
				return false
			}
		}
		return true
	case reflect.Slice, reflect.Array:
		if a.Len() != b.Len() || (!semantic && a.Kind() == reflect.Slice && a.IsNil() != b.IsNil()) {
			return false
		}
		for i := range a.Len() {
			if !equalValue(a.Index(i), b.Index(i), semantic) {
				return false
			}
		}
		return true
	case reflect.Map:
		if a.Len() != b.Len() || (!semantic && a.IsNil() != b.IsNil()) {
			return false
		}
		if a.Type() == stringMapType && a.CanInterface() && b.CanInterface() {
			// Labels, annotations, selectors: without reflect's copies.
			return maps.Equal(a.Interface().(map[string]string), b.Interface().(map[string]string))
		}
		if a.Type() == resourceListType && a.CanInterface() && b.CanInterface() {
			// Requests and limits: the store compares them on every write.
			return equalResources(a.Interface().(ResourceList), b.Interface().(ResourceList), semantic)
		}
		it := a.MapRange()
		for it.Next() {
			bv := b.MapIndex(it.Key())
			if !bv.IsValid() || !equalValue(it.Value(), bv, semantic) {
				return false
			}
		}
		return true
	case reflect.String:
		return a.String() == b.String()
	case reflect.Bool:
		return a.Bool() == b.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return a.Int() == b.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return a.Uint() == b.Uint()
	case reflect.Float32, reflect.Float64:
		return a.Float() == b.Float()
	}
	if !a.CanInterface() || !b.CanInterface() {
		return false // an unexported kind the API types do not use
	}
	return reflect.DeepEqual(a.Interface(), b.Interface())
}

// equalResources is equalValue for two resource lists of one length.
func equalResources(a, b ResourceList, semantic bool) bool {
	for k, q := range a {
		r, ok := b[k]
		if !ok || (semantic && q.milli != r.milli) || (!semantic && q != r) {
			return false
		}
	}
	return true
}

// isZeroTimePtr reports whether a *Time is nil or holds the zero time.
func isZeroTimePtr(v reflect.Value) bool {
	return v.IsNil() || v.Elem().Interface().(Time).IsZero()
}

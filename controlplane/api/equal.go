package api

import "reflect"

var (
	quantityType = reflect.TypeFor[Quantity]()
	timeType     = reflect.TypeFor[Time]()
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
	return equalValue(va, vb)
}

// equalValue reports whether a and b, of one type, hold the same API value.
func equalValue(a, b reflect.Value) bool {
	switch a.Type() {
	case quantityType:
		return a.Field(1).Int() == b.Field(1).Int()
	case timeType:
		return a.Interface().(Time).Equal(b.Interface().(Time).Time)
	}
	switch a.Kind() {
	case reflect.Pointer, reflect.Interface:
		if a.IsNil() || b.IsNil() {
			if a.Type().Elem() == timeType {
				// A zero time encodes as null, which decodes as nil.
				return isZeroTimePtr(a) && isZeroTimePtr(b)
			}
			return a.IsNil() == b.IsNil()
		}
		if a.Kind() == reflect.Interface && a.Elem().Type() != b.Elem().Type() {
			return false
		}
		return equalValue(a.Elem(), b.Elem())
	case reflect.Struct:
		for i := range a.NumField() {
			if !equalValue(a.Field(i), b.Field(i)) {
				return false
			}
		}
		return true
	case reflect.Slice, reflect.Array:
		if a.Len() != b.Len() {
			return false
		}
		for i := range a.Len() {
			if !equalValue(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	case reflect.Map:
		if a.Len() != b.Len() {
			return false
		}
		it := a.MapRange()
		for it.Next() {
			bv := b.MapIndex(it.Key())
			if !bv.IsValid() || !equalValue(it.Value(), bv) {
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
	return reflect.DeepEqual(a.Interface(), b.Interface())
}

// isZeroTimePtr reports whether a *Time is nil or holds the zero time.
func isZeroTimePtr(v reflect.Value) bool {
	return v.IsNil() || v.Elem().Interface().(Time).IsZero()
}

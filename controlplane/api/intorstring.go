package api

import (
	"encoding/json"
	"strconv"

	"github.com/go-json-experiment/json/jsontext"
)

// IntOrString holds a JSON number or string, as Kubernetes' intstr does
// (ports by number or name, maxSurge as "25%" or 1).
type IntOrString struct {
	IsString bool
	IntVal   int32
	StrVal   string
}

// FromInt makes an IntOrString holding i.
func FromInt(i int32) IntOrString { return IntOrString{IntVal: i} }

// FromString makes an IntOrString holding s.
func FromString(s string) IntOrString { return IntOrString{IsString: true, StrVal: s} }

// IsZero reports whether nothing was set.
func (v IntOrString) IsZero() bool { return !v.IsString && v.IntVal == 0 }

// MarshalJSON writes a number or a string.
func (v IntOrString) MarshalJSON() ([]byte, error) {
	if v.IsString {
		return json.Marshal(v.StrVal)
	}
	return strconv.AppendInt(nil, int64(v.IntVal), 10), nil
}

// MarshalJSONTo writes what MarshalJSON does without a buffer of its
// own (see Time.MarshalJSONTo).
func (v IntOrString) MarshalJSONTo(enc *jsontext.Encoder) error {
	if v.IsString {
		return enc.WriteToken(jsontext.String(v.StrVal))
	}
	return enc.WriteValue(strconv.AppendInt(enc.AvailableBuffer(), int64(v.IntVal), 10))
}

// UnmarshalJSON reads a number or a string.
func (v *IntOrString) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		v.IsString = true
		v.IntVal = 0
		return json.Unmarshal(b, &v.StrVal)
	}
	v.IsString = false
	v.StrVal = ""
	return json.Unmarshal(b, &v.IntVal)
}

// String returns the value as text.
func (v IntOrString) String() string {
	if v.IsString {
		return v.StrVal
	}
	return strconv.Itoa(int(v.IntVal))
}

//go:build !goexperiment.jsonv2

package api

import (
	"bytes"
	"encoding/json"
)

// strictUnmarshal reports whether data is one JSON object that decodes into
// obj with no unknown field, no wrong type and nothing after it.
// On false obj holds a partial decode; the caller decodes again to say why.
func strictUnmarshal(data []byte, obj any) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if dec.Decode(obj) != nil {
		return false
	}
	return checkTrailing(data, int(dec.InputOffset())) == nil
}

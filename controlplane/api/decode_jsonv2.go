//go:build goexperiment.jsonv2

package api

import (
	"encoding/json"
	jsonv2 "encoding/json/v2"
)

// strictOptions are encoding/json's (v1) semantics with unknown fields
// refused, as json.Decoder.DisallowUnknownFields sets them, and errors
// reported the v2 way: the legacy way scans the whole value for syntax
// errors before decoding it. Only success matters here; on failure the
// caller decodes again the v1 way to say what is wrong.
var strictOptions = jsonv2.JoinOptions(json.DefaultOptionsV1(), jsonv2.RejectUnknownMembers(true),
	json.ReportErrorsWithLegacySemantics(false))

// strictUnmarshal reports whether data is one JSON object that decodes into
// obj with no unknown field, no wrong type and nothing after it. On the v2
// engine one Unmarshal decides that in one pass; json.Decoder would first
// scan the whole value to find its end and then decode it.
// On false obj holds a partial decode; the caller decodes again to say why.
func strictUnmarshal(data []byte, obj any) bool {
	return jsonv2.Unmarshal(data, obj, strictOptions) == nil
}

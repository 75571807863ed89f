//go:build goexperiment.jsonv2

package store

import (
	"bytes"
	"encoding/json"
	jsonv2 "encoding/json/v2"
)

// decodeOptions are encoding/json's (v1) semantics, but for how errors are
// reported: the legacy way scans the whole value for syntax errors before
// decoding it, a second pass over every command. A value that decodes
// does so to the same result either way; the store only needs to know
// that a body does not.
var decodeOptions = jsonv2.JoinOptions(json.DefaultOptionsV1(), json.ReportErrorsWithLegacySemantics(false))

// unmarshal decodes a command's or snapshot's JSON body into v.
func unmarshal(data []byte, v any) error {
	return jsonv2.Unmarshal(data, v, decodeOptions)
}

// appendJSON appends the encoding of v to b, as json.Marshal writes it,
// without an intermediate buffer.
func appendJSON(b []byte, v any) ([]byte, error) {
	buf := bytes.NewBuffer(b)
	if err := jsonv2.MarshalWrite(buf, v, json.DefaultOptionsV1()); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

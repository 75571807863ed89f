package api

import (
	"bytes"
	"sync"

	jsonv2 "github.com/go-json-experiment/json"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

// One JSON engine in every build (issue 9 item 4): the module
// encoding/json/v2 came from, which is an alias of the standard library's
// under GOEXPERIMENT=jsonv2 and the same code without it. Every server
// must decode a raft entry to the same object, so what the store and the
// API write and read goes through here, and `go install` and `make build`
// are the same program. It is also the fast engine: a decode costs a
// third to a half less than encoding/json's own.
var (
	// v1Options are encoding/json's semantics, with errors reported the
	// v2 way: the legacy way scans the whole value for syntax errors
	// before decoding it. A value that decodes does so to the same result
	// either way.
	v1Options = jsonv2.JoinOptions(jsonv1.DefaultOptionsV1(), jsonv1.ReportErrorsWithLegacySemantics(false))

	// strictOptions are v1Options with unknown fields refused, as
	// json.Decoder.DisallowUnknownFields does, and names matched exactly,
	// as Kubernetes' strict decoding matches them (v1 would store
	// `nodeselector` as nodeSelector).
	strictOptions = jsonv2.JoinOptions(v1Options,
		jsonv2.RejectUnknownMembers(true), jsonv2.MatchCaseInsensitiveNames(false))
)

// Marshal encodes v as encoding/json's Marshal does.
func Marshal(v any) ([]byte, error) {
	bp := scratch.Get().(*[]byte)
	if b, ok := appendGenerated((*bp)[:0], v); ok {
		out := bytes.Clone(b) // exactly sized: the store may keep it as long as the object
		// A buffer grown by one huge object is let go rather than kept
		// in the pool for ever.
		if cap(b) <= maxScratch {
			*bp = b
			scratch.Put(bp)
		}
		return out, nil
	}
	scratch.Put(bp)
	return jsonv2.Marshal(v, v1Options)
}

// scratch holds buffers Marshal encodes into before it copies the result
// out, so that a pod costs one allocation of its size instead of a
// growing one.
var scratch = sync.Pool{New: func() any { return new([]byte) }}

const maxScratch = 64 << 10

// MarshalAppend appends the encoding of v, as Marshal writes it, to b,
// without an intermediate buffer.
func MarshalAppend(b []byte, v any) ([]byte, error) {
	if out, ok := appendGenerated(b, v); ok {
		return out, nil
	}
	buf := bytes.NewBuffer(b)
	if err := jsonv2.MarshalWrite(buf, v, v1Options); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Unmarshal decodes data into v as encoding/json's Unmarshal does (but
// for the wording of errors). Use it for what the store wrote; a
// client's body goes through DecodeInto.
func Unmarshal(data []byte, v any) error {
	if decodeGenerated(data, v) {
		return nil
	}
	return jsonv2.Unmarshal(data, v, v1Options)
}

// strictUnmarshal reports whether data is one JSON object that decodes into
// obj with no unknown field, no field named in another case, no wrong type
// and nothing after it, in one pass.
// On false obj holds a partial decode; the caller decodes again to say why.
func strictUnmarshal(data []byte, obj any) bool {
	// The generated decoder takes only exact names it knows, which is
	// within what strict decoding accepts.
	return decodeGenerated(data, obj) || jsonv2.Unmarshal(data, obj, strictOptions) == nil
}

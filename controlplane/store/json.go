package store

import "github.com/outpost-edge/outpost/controlplane/api"

// Every server must decode a command to the same state, so the store
// reads and writes JSON with the API's one engine in every build (issue 9
// item 4; api/json.go).

// unmarshal decodes a command's or snapshot's JSON body into v.
func unmarshal(data []byte, v any) error { return api.Unmarshal(data, v) }

// appendJSON appends the encoding of v to b, as json.Marshal writes it.
func appendJSON(b []byte, v any) ([]byte, error) { return api.MarshalAppend(b, v) }

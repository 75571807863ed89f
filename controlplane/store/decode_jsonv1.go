//go:build !goexperiment.jsonv2

package store

import "encoding/json"

// unmarshal decodes a command's or snapshot's JSON body into v.
func unmarshal(data []byte, v any) error {
	return json.Unmarshal(data, v)
}

// appendJSON appends the encoding of v to b, as json.Marshal writes it.
func appendJSON(b []byte, v any) ([]byte, error) {
	enc, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, enc...), nil
}

package api

import (
	"encoding/json"
	"fmt"
)

// DeepCopy returns a private deep copy of obj (through its JSON, which
// every kind round-trips).
func DeepCopy(obj Object) (Object, error) {
	r := ResourceOf(obj)
	if r == nil {
		return nil, ErrUnknownKind
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("copy %s: %w", r.Kind, err)
	}
	out := r.New()
	if err := json.Unmarshal(raw, out); err != nil {
		return nil, fmt.Errorf("copy %s: %w", r.Kind, err)
	}
	return out, nil
}

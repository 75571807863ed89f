package api

import "errors"

// Sentinel errors of the package; callers test them with errors.Is, and the
// wrapped message says where and why.
var (
	// ErrQuantity is returned for a string that is not a Kubernetes quantity.
	ErrQuantity = errors.New("quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")
	// ErrDuration is returned for a string that is not a Go duration
	// ("10s", "1m30s").
	ErrDuration = errors.New("durations must be written as Go writes them, such as 10s or 1m30.5s")
	// ErrSelector wraps every label selector parse error.
	ErrSelector = errors.New("invalid label selector")
	// ErrFieldSelector wraps every field selector parse error.
	ErrFieldSelector = errors.New("invalid field selector")
	// ErrUnknownKind is returned by Encode for an object outside the
	// Resource table.
	ErrUnknownKind = errors.New("kind is not served by outpost")
)

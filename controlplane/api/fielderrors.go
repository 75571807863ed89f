package api

import (
	"fmt"
	"strconv"
	"strings"
)

// Field error types, worded as Kubernetes words them.
const (
	FieldValueRequired     = "FieldValueRequired"
	FieldValueInvalid      = "FieldValueInvalid"
	FieldValueNotSupported = "FieldValueNotSupported"
	FieldValueDuplicate    = "FieldValueDuplicate"
	FieldValueForbidden    = "FieldValueForbidden"
	FieldValueTooLong      = "FieldValueTooLong"
	FieldValueUnknown      = "FieldValueUnknown" // a field no version of Kubernetes has
	FieldValueNotFound     = "FieldValueNotFound"
)

// FieldError is one problem at one field path.
type FieldError struct {
	Type     string
	Field    string // "spec.containers[0].image"
	BadValue any
	Detail   string
}

// ErrorBody is the error without its path: `Invalid value: "x": why`.
func (e *FieldError) ErrorBody() string {
	var s string
	switch e.Type {
	case FieldValueRequired:
		s = "Required value"
	case FieldValueForbidden:
		s = "Forbidden"
	case FieldValueUnknown:
		s = "unknown field"
	case FieldValueTooLong:
		s = "Too long"
	case FieldValueNotFound:
		s = fmt.Sprintf("Not found: %s", quoteValue(e.BadValue))
	case FieldValueDuplicate:
		s = fmt.Sprintf("Duplicate value: %s", quoteValue(e.BadValue))
	case FieldValueNotSupported:
		s = fmt.Sprintf("Unsupported value: %s", quoteValue(e.BadValue))
	default:
		s = fmt.Sprintf("Invalid value: %s", quoteValue(e.BadValue))
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

func (e *FieldError) Error() string { return e.Field + ": " + e.ErrorBody() }

func quoteValue(v any) string {
	switch t := v.(type) {
	case string:
		return strconv.Quote(t)
	case nil:
		return "null"
	default:
		return fmt.Sprintf("%v", t)
	}
}

// ErrorList is every problem found in one object.
type ErrorList []*FieldError

// Path builds field paths: Root("spec").Child("containers").Index(0).
type Path struct {
	parent *Path
	name   string
	index  string
}

// Root starts a path.
func Root(name string) *Path { return &Path{name: name} }

// Child appends .name.
func (p *Path) Child(name string, more ...string) *Path {
	c := &Path{parent: p, name: name}
	for _, m := range more {
		c = &Path{parent: c, name: m}
	}
	return c
}

// Index appends [i].
func (p *Path) Index(i int) *Path { return &Path{parent: p, index: strconv.Itoa(i)} }

// Key appends [key].
func (p *Path) Key(k string) *Path { return &Path{parent: p, index: k} }

// String renders the path.
func (p *Path) String() string {
	if p == nil {
		return ""
	}
	var parts []*Path
	for q := p; q != nil; q = q.parent {
		parts = append(parts, q)
	}
	var b strings.Builder
	for i := len(parts) - 1; i >= 0; i-- {
		q := parts[i]
		if q.index != "" || q.name == "" {
			b.WriteString("[" + q.index + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(q.name)
	}
	return b.String()
}

// Required reports a missing value.
func Required(p *Path, detail string) *FieldError {
	return &FieldError{Type: FieldValueRequired, Field: p.String(), Detail: detail}
}

// Invalid reports a bad value.
func Invalid(p *Path, v any, detail string) *FieldError {
	return &FieldError{Type: FieldValueInvalid, Field: p.String(), BadValue: v, Detail: detail}
}

// NotSupported reports a value outside a fixed set.
func NotSupported(p *Path, v any, valid []string) *FieldError {
	q := make([]string, len(valid))
	for i, s := range valid {
		q[i] = strconv.Quote(s)
	}
	return &FieldError{Type: FieldValueNotSupported, Field: p.String(), BadValue: v, Detail: "supported values: " + strings.Join(q, ", ")}
}

// Duplicate reports a value given twice.
func Duplicate(p *Path, v any) *FieldError {
	return &FieldError{Type: FieldValueDuplicate, Field: p.String(), BadValue: v}
}

// NotFound reports a reference to something that does not exist.
func NotFound(p *Path, v any) *FieldError {
	return &FieldError{Type: FieldValueNotFound, Field: p.String(), BadValue: v}
}

// Forbidden reports a field that may not be set here.
func Forbidden(p *Path, detail string) *FieldError {
	return &FieldError{Type: FieldValueForbidden, Field: p.String(), Detail: detail}
}

// TooLong reports a value over its length limit.
func TooLong(p *Path, max int) *FieldError {
	return &FieldError{Type: FieldValueTooLong, Field: p.String(), Detail: fmt.Sprintf("must have at most %d bytes", max)}
}

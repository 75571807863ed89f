package api

import (
	"fmt"
	"slices"
	"strings"
)

// FieldSelector selects objects by the values of a few of their fields, as
// `--field-selector` does. Matches does not allocate.
type FieldSelector interface {
	// Matches reports whether obj satisfies every requirement.
	Matches(obj Object) bool
	// Empty reports whether there are no requirements.
	Empty() bool
	// String is the selector in kubectl's syntax, escaped so that
	// ParseFieldSelector reads it back.
	String() string
	// Requirements returns a copy of the requirements, in the given order.
	Requirements() []FieldRequirement
}

// FieldRequirement is field=value or field!=value.
type FieldRequirement struct {
	Field    string
	Operator string // OpEquals or OpNotEquals; "==" is read as "="
	Value    string
}

// commonFieldLabels are selectable on every kind.
var commonFieldLabels = []string{"metadata.name", "metadata.namespace"}

// fieldLabels are the kind-specific selectable fields; FieldValue reads
// each of them.
var fieldLabels = map[string][]string{
	"Pod": {
		"spec.nodeName", "spec.schedulerName", "spec.restartPolicy", "spec.hostNetwork",
		"status.phase", "status.podIP", "status.nominatedNodeName",
	},
	"Event": {
		"involvedObject.kind", "involvedObject.name", "involvedObject.namespace",
		"involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
		"involvedObject.fieldPath", "reason", "type", "source",
	},
	"Node":      {"spec.unschedulable"},
	"Namespace": {"status.phase"},
}

// SupportedFieldLabels lists the fields a field selector may name for r
// (nil r: the fields every kind has).
func SupportedFieldLabels(r *Resource) []string {
	out := slices.Clone(commonFieldLabels)
	if r != nil {
		out = append(out, fieldLabels[r.Kind]...)
	}
	return out
}

// FieldValue returns the value of a selectable field of obj, and whether
// the field is selectable on obj's kind. Booleans are "true" and "false".
func FieldValue(obj Object, field string) (string, bool) {
	switch field {
	case "metadata.name":
		return obj.GetObjectMeta().Name, true
	case "metadata.namespace":
		return obj.GetObjectMeta().Namespace, true
	}
	switch o := obj.(type) {
	case *Pod:
		switch field {
		case "spec.nodeName":
			return o.Spec.NodeName, true
		case "spec.schedulerName":
			return o.Spec.SchedulerName, true
		case "spec.restartPolicy":
			return o.Spec.RestartPolicy, true
		case "spec.hostNetwork":
			return boolString(o.Spec.HostNetwork), true
		case "status.phase":
			return o.Status.Phase, true
		case "status.podIP":
			return o.Status.PodIP, true
		case "status.nominatedNodeName":
			return o.Status.NominatedNodeName, true
		}
	case *Event:
		switch field {
		case "involvedObject.kind":
			return o.InvolvedObject.Kind, true
		case "involvedObject.name":
			return o.InvolvedObject.Name, true
		case "involvedObject.namespace":
			return o.InvolvedObject.Namespace, true
		case "involvedObject.uid":
			return o.InvolvedObject.UID, true
		case "involvedObject.apiVersion":
			return o.InvolvedObject.APIVersion, true
		case "involvedObject.resourceVersion":
			return o.InvolvedObject.ResourceVersion, true
		case "involvedObject.fieldPath":
			return o.InvolvedObject.FieldPath, true
		case "reason":
			return o.Reason, true
		case "type":
			return o.Type, true
		case "source":
			return o.Source.Component, true
		}
	case *Node:
		if field == "spec.unschedulable" {
			return boolString(o.Spec.Unschedulable), true
		}
	case *Namespace:
		if field == "status.phase" {
			return o.Status.Phase, true
		}
	}
	return "", false
}

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

type fieldSelector []FieldRequirement

func (s fieldSelector) Matches(obj Object) bool {
	for i := range s {
		v, ok := FieldValue(obj, s[i].Field)
		if !ok {
			return false
		}
		if (v == s[i].Value) != (s[i].Operator == OpEquals) {
			return false
		}
	}
	return true
}

func (s fieldSelector) Empty() bool { return len(s) == 0 }

func (s fieldSelector) String() string {
	var b strings.Builder
	for i, r := range s {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(escapeFieldValue(r.Field))
		b.WriteString(r.Operator)
		b.WriteString(escapeFieldValue(r.Value))
	}
	return b.String()
}

func (s fieldSelector) Requirements() []FieldRequirement { return slices.Clone(s) }

// escapeFieldValue escapes the characters that separate terms.
func escapeFieldValue(v string) string {
	if !strings.ContainsAny(v, `\,=!`) {
		return v
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		switch v[i] {
		case '\\', ',', '=', '!':
			b.WriteByte('\\')
		}
		b.WriteByte(v[i])
	}
	return b.String()
}

// ParseFieldSelector reads `field=value,field!=value` (also `==`; a
// backslash escapes '\', ',', '=' and '!' in values) and checks every field
// against the fields selectable on r (nil r: metadata.name and
// metadata.namespace only). The empty string selects everything.
func ParseFieldSelector(r *Resource, s string) (FieldSelector, error) {
	if strings.TrimSpace(s) == "" {
		return fieldSelector(nil), nil
	}
	var reqs fieldSelector
	for start := 0; start <= len(s); {
		term, next, err := splitTerm(s, start)
		if err != nil {
			return nil, err
		}
		req, err := parseFieldTerm(s, start, term)
		if err != nil {
			return nil, err
		}
		if _, ok := fieldSupported(r, req.Field); !ok {
			what := "all kinds"
			if r != nil {
				what = r.Plural
			}
			return nil, fmt.Errorf("%w %q: field label not supported for %s: %q (supported: %s)",
				ErrFieldSelector, s, what, req.Field, strings.Join(SupportedFieldLabels(r), ", "))
		}
		reqs = append(reqs, req)
		start = next
	}
	return reqs, nil
}

func fieldSupported(r *Resource, field string) (string, bool) {
	if slices.Contains(commonFieldLabels, field) {
		return field, true
	}
	if r != nil && slices.Contains(fieldLabels[r.Kind], field) {
		return field, true
	}
	return "", false
}

// splitTerm returns the raw text of the term starting at start, up to an
// unescaped ',', and where the next term starts (past the end when none).
func splitTerm(s string, start int) (string, int, error) {
	for i := start; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case ',':
			if i+1 == len(s) {
				return "", 0, fmt.Errorf("%w %q: at position %d: expected a requirement after ','", ErrFieldSelector, s, i+1)
			}
			return s[start:i], i + 1, nil
		}
	}
	return s[start:], len(s) + 1, nil
}

// parseFieldTerm reads one `field op value`, unescaping the value.
func parseFieldTerm(s string, pos int, term string) (FieldRequirement, error) {
	for i := 0; i < len(term); i++ {
		var op string
		var n int
		switch {
		case term[i] == '\\':
			i++
			continue
		case strings.HasPrefix(term[i:], "!="):
			op, n = OpNotEquals, 2
		case strings.HasPrefix(term[i:], "=="):
			op, n = OpEquals, 2
		case term[i] == '=':
			op, n = OpEquals, 1
		default:
			continue
		}
		field := strings.TrimSpace(term[:i])
		if field == "" {
			return FieldRequirement{}, fmt.Errorf("%w %q: at position %d: expected a field name before %q", ErrFieldSelector, s, pos+i, op)
		}
		value, err := unescapeFieldValue(strings.TrimSpace(term[i+n:]))
		if err != nil {
			return FieldRequirement{}, fmt.Errorf("%w %q: at position %d: %w", ErrFieldSelector, s, pos+i+n, err)
		}
		return FieldRequirement{Field: field, Operator: op, Value: value}, nil
	}
	return FieldRequirement{}, fmt.Errorf("%w %q: at position %d: %q has no operator: expected field=value or field!=value", ErrFieldSelector, s, pos, term)
}

func unescapeFieldValue(v string) (string, error) {
	if !strings.ContainsAny(v, `\,=!`) {
		return v, nil
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch c {
		case '\\':
			if i+1 == len(v) {
				return "", fmt.Errorf("a value may not end with an unescaped '\\'")
			}
			i++
			switch v[i] {
			case '\\', ',', '=', '!':
				b.WriteByte(v[i])
			default:
				return "", fmt.Errorf("invalid escape sequence %q", v[i-1:i+1])
			}
		case ',', '=':
			return "", fmt.Errorf("%q must be escaped with '\\' in a value", c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

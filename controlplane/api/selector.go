package api

import (
	"fmt"
	"slices"
	"strings"
)

// Operators of selector requirements that only the text form has; the
// others are the Op* constants of the API types (In, NotIn, Exists,
// DoesNotExist, Gt, Lt).
const (
	OpEquals    = "="
	OpNotEquals = "!="
)

// Selector selects objects by their labels. Matches does not allocate.
type Selector interface {
	// Matches reports whether labels satisfy every requirement.
	Matches(labels map[string]string) bool
	// Empty reports whether the selector has no requirements and so
	// matches everything.
	Empty() bool
	// String is the selector in kubectl's syntax; ParseSelector reads it
	// back to an equal selector.
	String() string
	// Requirements returns a copy of the requirements, sorted by key.
	Requirements() []Requirement
}

// Requirement is one condition on one label key.
type Requirement struct {
	Key      string
	Operator string // OpEquals, OpNotEquals, OpIn, OpNotIn, OpExists, OpDoesNotExist, OpGt, OpLt
	Values   []string
	num      int64 // the parsed value of Gt and Lt
}

// matches reports whether labels satisfy r.
func (r *Requirement) matches(labels map[string]string) bool {
	v, ok := labels[r.Key]
	switch r.Operator {
	case OpEquals:
		return ok && v == r.Values[0]
	case OpNotEquals:
		return !ok || v != r.Values[0]
	case OpIn:
		return ok && slices.Contains(r.Values, v)
	case OpNotIn:
		return !ok || !slices.Contains(r.Values, v)
	case OpExists:
		return ok
	case OpDoesNotExist:
		return !ok
	case OpGt, OpLt:
		if !ok {
			return false
		}
		n, good := parseInt64(v)
		if !good {
			return false
		}
		if r.Operator == OpGt {
			return n > r.num
		}
		return n < r.num
	}
	return false
}

func (r *Requirement) appendString(b *strings.Builder) {
	switch r.Operator {
	case OpExists:
		b.WriteString(r.Key)
	case OpDoesNotExist:
		b.WriteString("!" + r.Key)
	case OpEquals:
		b.WriteString(r.Key + "=" + r.Values[0])
	case OpNotEquals:
		b.WriteString(r.Key + "!=" + r.Values[0])
	case OpGt:
		b.WriteString(r.Key + ">" + r.Values[0])
	case OpLt:
		b.WriteString(r.Key + "<" + r.Values[0])
	case OpIn, OpNotIn:
		b.WriteString(r.Key)
		if r.Operator == OpIn {
			b.WriteString(" in (")
		} else {
			b.WriteString(" notin (")
		}
		for i, v := range r.Values {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(v)
		}
		b.WriteByte(')')
	}
}

// parseInt64 parses a decimal integer without allocating on failure.
func parseInt64(s string) (int64, bool) {
	if s == "" || len(s) > 20 {
		return 0, false
	}
	neg := false
	switch s[0] {
	case '-':
		neg = true
		s = s[1:]
	case '+':
		s = s[1:]
	}
	if s == "" {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
		if n > 1<<63 {
			return 0, false
		}
	}
	if neg {
		return -int64(n), true
	}
	if n > 1<<63-1 {
		return 0, false
	}
	return int64(n), true
}

// labelSelector is requirements that are ANDed.
type labelSelector []Requirement

func (s labelSelector) Matches(labels map[string]string) bool {
	for i := range s {
		if !s[i].matches(labels) {
			return false
		}
	}
	return true
}

func (s labelSelector) Empty() bool { return len(s) == 0 }

func (s labelSelector) String() string {
	var b strings.Builder
	for i := range s {
		if i > 0 {
			b.WriteByte(',')
		}
		s[i].appendString(&b)
	}
	return b.String()
}

func (s labelSelector) Requirements() []Requirement {
	out := make([]Requirement, len(s))
	for i, r := range s {
		r.Values = slices.Clone(r.Values)
		out[i] = r
	}
	return out
}

// nothingSelector matches no object: the selector of a nil LabelSelector.
type nothingSelector struct{}

func (nothingSelector) Matches(map[string]string) bool { return false }
func (nothingSelector) Empty() bool                    { return false }
func (nothingSelector) String() string                 { return "" }
func (nothingSelector) Requirements() []Requirement    { return nil }

// Everything returns a selector that matches every object.
func Everything() Selector { return labelSelector(nil) }

// Nothing returns a selector that matches no object. Its String is "",
// like Everything's: the text form cannot say "nothing".
func Nothing() Selector { return nothingSelector{} }

// newSelector sorts the requirements into their canonical order.
func newSelector(reqs []Requirement) Selector {
	slices.SortStableFunc(reqs, func(a, b Requirement) int { return strings.Compare(a.Key, b.Key) })
	return labelSelector(reqs)
}

// SelectorFromSet returns a selector that matches objects carrying every
// key=value pair of set; an empty set matches everything. The pairs are not
// validated: they come from objects that were.
func SelectorFromSet(set map[string]string) Selector {
	if len(set) == 0 {
		return Everything()
	}
	reqs := make([]Requirement, 0, len(set))
	for k, v := range set {
		reqs = append(reqs, Requirement{Key: k, Operator: OpEquals, Values: []string{v}})
	}
	return newSelector(reqs)
}

// SelectorFromLabelSelector converts the API form of a selector. As in
// Kubernetes, a nil LabelSelector matches nothing while an empty one
// (neither matchLabels nor matchExpressions) matches everything; validation
// refuses both for workload selectors, so the difference matters for pod
// affinity terms, where a missing labelSelector selects no pods.
func SelectorFromLabelSelector(ls *LabelSelector) (Selector, error) {
	if ls == nil {
		return Nothing(), nil
	}
	if len(ls.MatchLabels)+len(ls.MatchExpressions) == 0 {
		return Everything(), nil
	}
	reqs := make([]Requirement, 0, len(ls.MatchLabels)+len(ls.MatchExpressions))
	for k, v := range ls.MatchLabels {
		if err := checkKeyValue(k, v); err != nil {
			return nil, fmt.Errorf("%w: matchLabels: %w", ErrSelector, err)
		}
		reqs = append(reqs, Requirement{Key: k, Operator: OpEquals, Values: []string{v}})
	}
	for i, e := range ls.MatchExpressions {
		switch e.Operator {
		case OpIn, OpNotIn, OpExists, OpDoesNotExist:
		default:
			return nil, fmt.Errorf("%w: matchExpressions[%d].operator: %q is not a valid label selector operator (In, NotIn, Exists, DoesNotExist)", ErrSelector, i, e.Operator)
		}
		r, err := newRequirement(e.Key, e.Operator, e.Values)
		if err != nil {
			return nil, fmt.Errorf("%w: matchExpressions[%d]: %w", ErrSelector, i, err)
		}
		reqs = append(reqs, r)
	}
	return newSelector(reqs), nil
}

// checkKeyValue validates a label key and value.
func checkKeyValue(k, v string) error {
	if msgs := IsQualifiedName(k); msgs != nil {
		return fmt.Errorf("invalid label key %q: %s", k, strings.Join(msgs, "; "))
	}
	if msgs := IsValidLabelValue(v); msgs != nil {
		return fmt.Errorf("invalid label value %q: %s", v, strings.Join(msgs, "; "))
	}
	return nil
}

// newRequirement checks that key, operator and values fit together, as
// Kubernetes does, and sorts set values.
func newRequirement(key, op string, values []string) (Requirement, error) {
	if msgs := IsQualifiedName(key); msgs != nil {
		return Requirement{}, fmt.Errorf("invalid label key %q: %s", key, strings.Join(msgs, "; "))
	}
	r := Requirement{Key: key, Operator: op}
	switch op {
	case OpIn, OpNotIn:
		if len(values) == 0 {
			return r, fmt.Errorf("for 'in' and 'notin' operators, the set of values must not be empty")
		}
	case OpEquals, OpNotEquals:
		if len(values) != 1 {
			return r, fmt.Errorf("for '=' and '!=' operators, exactly one value is required")
		}
	case OpExists, OpDoesNotExist:
		if len(values) != 0 {
			return r, fmt.Errorf("for 'exists' and 'doesnotexist' operators, the set of values must be empty")
		}
	case OpGt, OpLt:
		if len(values) != 1 {
			return r, fmt.Errorf("for 'Gt' and 'Lt' operators, exactly one value is required")
		}
		n, ok := parseInt64(values[0])
		if !ok {
			return r, fmt.Errorf("for 'Gt' and 'Lt' operators, the value must be an integer, not %q", values[0])
		}
		r.num = n
	default:
		return r, fmt.Errorf("%q is not a valid selector operator", op)
	}
	for _, v := range values {
		if msgs := IsValidLabelValue(v); msgs != nil && op != OpGt && op != OpLt {
			return r, fmt.Errorf("invalid label value %q: %s", v, strings.Join(msgs, "; "))
		}
	}
	r.Values = slices.Clone(values)
	if op == OpIn || op == OpNotIn {
		slices.Sort(r.Values)
		r.Values = slices.Compact(r.Values)
	}
	return r, nil
}

// ParseSelector reads kubectl's label selector syntax: requirements joined
// by ',' (AND), each one of `key=value`, `key==value`, `key!=value`,
// `key in (v1,v2)`, `key notin (v1,v2)`, `key` (exists), `!key` (does not
// exist), `key>n` or `key<n`. White space around tokens is ignored. The
// empty string selects everything. Errors say at which byte and why.
func ParseSelector(s string) (Selector, error) {
	p := selectorParser{s: s}
	var reqs []Requirement
	p.space()
	if p.i == len(s) {
		return Everything(), nil
	}
	for {
		r, err := p.requirement()
		if err != nil {
			return nil, err
		}
		reqs = append(reqs, r)
		p.space()
		if p.i == len(s) {
			break
		}
		if s[p.i] != ',' {
			return nil, p.errorf("expected ',' or the end, found %q", p.rest())
		}
		p.i++
		p.space()
		if p.i == len(s) {
			return nil, p.errorf("expected a requirement after ','")
		}
	}
	return newSelector(reqs), nil
}

type selectorParser struct {
	s string
	i int
}

func (p *selectorParser) errorf(format string, args ...any) error {
	return fmt.Errorf("%w %q: at position %d: %s", ErrSelector, p.s, p.i, fmt.Sprintf(format, args...))
}

func (p *selectorParser) rest() string { return truncate(p.s[p.i:]) }

func (p *selectorParser) space() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t' || p.s[p.i] == '\n' || p.s[p.i] == '\r') {
		p.i++
	}
}

// isSelectorSpecial reports whether c ends a key or value.
func isSelectorSpecial(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', ',', '=', '!', '(', ')', '<', '>':
		return true
	}
	return false
}

// word reads a key or value: everything up to white space or a special
// character.
func (p *selectorParser) word() string {
	start := p.i
	for p.i < len(p.s) && !isSelectorSpecial(p.s[p.i]) {
		p.i++
	}
	return p.s[start:p.i]
}

func (p *selectorParser) requirement() (Requirement, error) {
	start := p.i
	if p.s[p.i] == '!' {
		p.i++
		p.space()
		key := p.word()
		if key == "" {
			return Requirement{}, p.errorf("expected a label key after '!'")
		}
		return p.make(start, key, OpDoesNotExist, nil)
	}
	key := p.word()
	if key == "" {
		return Requirement{}, p.errorf("expected a label key, found %q", p.rest())
	}
	p.space()
	if p.i == len(p.s) || p.s[p.i] == ',' {
		return p.make(start, key, OpExists, nil)
	}
	var op string
	switch {
	case strings.HasPrefix(p.s[p.i:], "=="):
		op, p.i = OpEquals, p.i+2
	case strings.HasPrefix(p.s[p.i:], "!="):
		op, p.i = OpNotEquals, p.i+2
	case p.s[p.i] == '=':
		op, p.i = OpEquals, p.i+1
	case p.s[p.i] == '>':
		op, p.i = OpGt, p.i+1
	case p.s[p.i] == '<':
		op, p.i = OpLt, p.i+1
	default:
		switch w := p.word(); w {
		case "in":
			op = OpIn
		case "notin":
			op = OpNotIn
		default:
			p.i -= len(w)
			return Requirement{}, p.errorf("expected one of '=', '==', '!=', '>', '<', 'in', 'notin', ',' or the end after key %q, found %q", key, p.rest())
		}
		values, err := p.set()
		if err != nil {
			return Requirement{}, err
		}
		return p.make(start, key, op, values)
	}
	p.space()
	value := p.word()
	if p.i < len(p.s) && p.s[p.i] != ',' && !isSpace(p.s[p.i]) {
		return Requirement{}, p.errorf("unexpected %q in the value of key %q", p.s[p.i], key)
	}
	return p.make(start, key, op, []string{value})
}

// isSpace reports whether c is white space between selector tokens.
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// set reads "(v1, v2, ...)".
func (p *selectorParser) set() ([]string, error) {
	p.space()
	if p.i == len(p.s) || p.s[p.i] != '(' {
		return nil, p.errorf("expected '(' to open the set of values, found %q", p.rest())
	}
	p.i++
	var values []string
	for {
		p.space()
		v := p.word()
		p.space()
		if p.i == len(p.s) {
			return nil, p.errorf("expected ')' to close the set of values")
		}
		switch p.s[p.i] {
		case ',':
			values = append(values, v)
			p.i++
		case ')':
			// "()" is the set of the empty value, as in Kubernetes.
			values = append(values, v)
			p.i++
			return values, nil
		default:
			return nil, p.errorf("unexpected %q in a set of values", p.s[p.i])
		}
	}
}

// make builds a requirement, turning a validation error into one that says
// where the requirement starts.
func (p *selectorParser) make(start int, key, op string, values []string) (Requirement, error) {
	r, err := newRequirement(key, op, values)
	if err != nil {
		return r, fmt.Errorf("%w %q: at position %d: %w", ErrSelector, p.s, start, err)
	}
	return r, nil
}

// NodeSelectorTermMatches reports whether a node with these labels and this
// name satisfies every requirement of term (matchExpressions on labels,
// matchFields on metadata.name). A term with no requirements matches no
// node, as in Kubernetes. It does not allocate unless the term is invalid.
func NodeSelectorTermMatches(term NodeSelectorTerm, labels map[string]string, nodeName string) (bool, error) {
	if len(term.MatchExpressions) == 0 && len(term.MatchFields) == 0 {
		return false, nil
	}
	for i := range term.MatchExpressions {
		e := &term.MatchExpressions[i]
		ok, err := nodeRequirementMatches(e, labels[e.Key], hasKey(labels, e.Key))
		if err != nil {
			return false, fmt.Errorf("%w: matchExpressions[%d]: %w", ErrSelector, i, err)
		}
		if !ok {
			return false, nil
		}
	}
	for i := range term.MatchFields {
		f := &term.MatchFields[i]
		if f.Key != "metadata.name" {
			return false, fmt.Errorf("%w: matchFields[%d].key: %q is not supported (only metadata.name)", ErrSelector, i, f.Key)
		}
		ok, err := nodeRequirementMatches(f, nodeName, true)
		if err != nil {
			return false, fmt.Errorf("%w: matchFields[%d]: %w", ErrSelector, i, err)
		}
		if !ok {
			return false, nil
		}
	}
	return true, nil
}

// NodeSelectorMatches reports whether any term of ns matches the node (the
// terms are ORed). A nil selector matches every node.
func NodeSelectorMatches(ns *NodeSelector, labels map[string]string, nodeName string) (bool, error) {
	if ns == nil {
		return true, nil
	}
	for _, t := range ns.NodeSelectorTerms {
		ok, err := NodeSelectorTermMatches(t, labels, nodeName)
		if err != nil || ok {
			return ok, err
		}
	}
	return false, nil
}

// hasKey reports whether m has the key k.
func hasKey(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}

func nodeRequirementMatches(e *NodeSelectorRequirement, v string, present bool) (bool, error) {
	switch e.Operator {
	case OpIn, OpNotIn:
		if len(e.Values) == 0 {
			return false, fmt.Errorf("operator %s needs at least one value", e.Operator)
		}
		in := present && slices.Contains(e.Values, v)
		if e.Operator == OpIn {
			return in, nil
		}
		return !in, nil
	case OpExists, OpDoesNotExist:
		if len(e.Values) != 0 {
			return false, fmt.Errorf("operator %s takes no values", e.Operator)
		}
		return present == (e.Operator == OpExists), nil
	case OpGt, OpLt:
		if len(e.Values) != 1 {
			return false, fmt.Errorf("operator %s needs exactly one value", e.Operator)
		}
		want, ok := parseInt64(e.Values[0])
		if !ok {
			return false, fmt.Errorf("operator %s needs an integer value, not %q", e.Operator, e.Values[0])
		}
		if !present {
			return false, nil
		}
		n, ok := parseInt64(v)
		if !ok {
			return false, nil
		}
		if e.Operator == OpGt {
			return n > want, nil
		}
		return n < want, nil
	}
	return false, fmt.Errorf("%q is not a valid node selector operator", e.Operator)
}

// FormatLabels renders labels as "k=v,k2=v2", sorted by key, the form
// administrators write, for messages.
func FormatLabels(labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k + "=" + labels[k])
	}
	return b.String()
}

package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// A small JSONPath template evaluator for -o jsonpath= and
// -o custom-columns=, as kubectl reads them: text with {actions} between,
// where an action is a path ({.metadata.name}, {.items[*].spec.nodeName},
// {.status.conditions[?(@.type=="Ready")].status}, {$.kind}, {@}), a
// string literal ({"\n"}, {'\t'}), or {range PATH} ... {end}. Paths that
// lead nowhere print nothing (kubectl allows missing keys in get's
// output), so one template serves objects that lack a field.

// jsonPathTemplate is a parsed template.
type jsonPathTemplate struct {
	src   string
	nodes []jpNode
}

// jpNode is one piece of a template: jpText, *jpPath or *jpRange.
type jpNode any

// jpText is text printed as it is (outside braces, or a literal action).
type jpText string

// jpRange prints body once for each value of path, with that value as
// the current object (@, and paths starting with ".").
type jpRange struct {
	path *jpPath
	body []jpNode
}

// jpPath is one path: steps applied from the root ($) or the current
// object (@, and a leading ".").
type jpPath struct {
	src      string
	fromRoot bool
	steps    []jpStep
}

type jpStepKind int

const (
	stepField    jpStepKind = iota // .name, ['name']
	stepWildcard                   // .*, [*]
	stepDescend                    // .. (the value and everything under it)
	stepIndex                      // [n], [-n]
	stepSlice                      // [lo:hi]
	stepFilter                     // [?(@.a == "b")]
)

type jpStep struct {
	kind       jpStepKind
	name       string
	index      int
	lo, hi     *int
	filter     *jpFilter
	iterateArr bool // a field or index: an array it reaches is ranged over element by element
}

// jpFilter is [?(left op right)] or, without op, [?(left)] (left exists).
type jpFilter struct {
	left, right jpOperand
	op          string
}

// jpOperand is a path (relative to the element, @, or the root, $) or a
// literal: a string, a number, true, false or null.
type jpOperand struct {
	path    *jpPath
	literal any
}

// jsonPathError is a template that cannot be parsed: what is wrong and
// where.
type jsonPathError struct {
	template string
	offset   int
	problem  string
}

func (e *jsonPathError) Error() string {
	return fmt.Sprintf("error parsing jsonpath %s: %s at offset %d", e.template, e.problem, e.offset)
}

// jpSyntaxError is a problem at a place in a path or literal: rest is the
// length of the text from there to the end of what was parsed, so that
// parseJSONPath can say where in its template the problem is (a parser
// sees only ever shorter tails of its text).
type jpSyntaxError struct {
	msg  string
	rest int
}

func (e *jpSyntaxError) Error() string { return e.msg }

// syntaxAt is a jpSyntaxError at the start of rest, a tail of the text
// being parsed.
func syntaxAt(rest, format string, args ...any) error {
	return &jpSyntaxError{msg: fmt.Sprintf(format, args...), rest: len(rest)}
}

// shiftSyntax places an error of a parse of a part of a text in that
// text: tail is the length of what follows the part.
func shiftSyntax(err error, tail int) error {
	if se, ok := errors.AsType[*jpSyntaxError](err); ok {
		return &jpSyntaxError{msg: se.msg, rest: se.rest + tail}
	}
	return err
}

// parseJSONPath parses a -o jsonpath template.
func parseJSONPath(tmpl string) (*jsonPathTemplate, error) {
	t := &jsonPathTemplate{src: tmpl}
	type frame struct {
		r      *jpRange
		offset int
		outer  []jpNode
	}
	var open []frame
	cur := []jpNode{}
	i := 0
	for i < len(tmpl) {
		j := strings.IndexByte(tmpl[i:], '{')
		if j < 0 {
			cur = append(cur, jpText(tmpl[i:]))
			break
		}
		if j > 0 {
			cur = append(cur, jpText(tmpl[i:i+j]))
		}
		start := i + j
		end, err := actionEnd(tmpl, start+1)
		if err != nil {
			offset := start
			if se, ok := errors.AsType[*jpSyntaxError](err); ok {
				offset = len(tmpl) - se.rest
			}
			return nil, &jsonPathError{template: tmpl, offset: offset, problem: err.Error()}
		}
		action := strings.TrimSpace(tmpl[start+1 : end])
		// The offset just past the action's text, from which a
		// jpSyntaxError's rest counts back.
		actionStop := start + 1 + len(strings.TrimRightFunc(tmpl[start+1:end], unicode.IsSpace))
		fail := func(problem string) error {
			return &jsonPathError{template: tmpl, offset: start, problem: problem}
		}
		failAt := func(prefix string, err error) error {
			offset := start
			if se, ok := errors.AsType[*jpSyntaxError](err); ok {
				offset = actionStop - se.rest
			}
			return &jsonPathError{template: tmpl, offset: offset, problem: prefix + err.Error()}
		}
		switch {
		case action == "":
			return nil, fail("empty action {}")
		case action == "end":
			if len(open) == 0 {
				return nil, fail("{end} without a {range}")
			}
			f := open[len(open)-1]
			open = open[:len(open)-1]
			f.r.body = cur
			cur = append(f.outer, f.r)
		case action == "range" || strings.HasPrefix(action, "range "):
			p, err := parseJSONPathExpr(strings.TrimSpace(strings.TrimPrefix(action, "range")))
			if err != nil {
				return nil, failAt("range: ", err)
			}
			open = append(open, frame{r: &jpRange{path: p}, offset: start, outer: cur})
			cur = []jpNode{}
		case action[0] == '"' || action[0] == '\'':
			s, n, err := unquote(action)
			if err != nil {
				return nil, failAt("", err)
			}
			if n != len(action) {
				return nil, failAt("", syntaxAt(action[n:], "unexpected %q after the string literal", action[n:]))
			}
			cur = append(cur, jpText(s))
		default:
			p, err := parseJSONPathExpr(action)
			if err != nil {
				return nil, failAt("", err)
			}
			cur = append(cur, p)
		}
		i = end + 1
	}
	if len(open) > 0 {
		return nil, &jsonPathError{template: tmpl, offset: open[len(open)-1].offset, problem: "{range} without an {end}"}
	}
	t.nodes = cur
	return t, nil
}

// actionEnd returns the offset of the } that closes the action starting
// at from, skipping braces inside quoted strings.
func actionEnd(s string, from int) (int, error) {
	var nested bool
	end, inQuote := scanUnquoted(s, from, func(_ int, c byte) bool {
		nested = c == '{'
		return c == '}' || c == '{'
	})
	switch {
	case nested:
		return 0, syntaxAt(s[end:], "unexpected { inside an action")
	case end >= 0:
		return end, nil
	case inQuote:
		return 0, fmt.Errorf("unterminated string in an unclosed action")
	}
	return 0, fmt.Errorf("unclosed action (no closing })")
}

// scanUnquoted calls stop with each byte of s from offset from that is
// outside a quoted string ('...' or "...", with backslash escapes) and
// returns the offset where stop said so, or -1 and whether s ended
// inside a string.
func scanUnquoted(s string, from int, stop func(i int, c byte) bool) (int, bool) {
	var quote byte
	for i := from; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0 && c == '\\':
			i++
		case quote != 0 && c == quote:
			quote = 0
		case quote != 0:
		case c == '"' || c == '\'':
			quote = c
		case stop(i, c):
			return i, false
		}
	}
	return -1, quote != 0
}

// unquote reads the quoted string that s starts with ('...' or "...",
// with \n, \t, \\ and escaped quotes) and how many bytes it took.
func unquote(s string) (string, int, error) {
	q := s[0]
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case c == q:
			return b.String(), i + 1, nil
		case c == '\\' && i+1 < len(s):
			i++
			switch s[i] {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case '\\', '"', '\'':
				b.WriteByte(s[i])
			default:
				return "", 0, syntaxAt(s[i-1:], "unknown escape \\%c in a string literal", s[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", 0, syntaxAt(s, "unterminated string literal %s", s)
}

// parseJSONPathExpr parses one path: $ or @ or a leading . then steps.
func parseJSONPathExpr(s string) (*jpPath, error) {
	p := &jpPath{src: s}
	rest, err := p.parse(s)
	if err != nil {
		return nil, err
	}
	if rest != "" {
		return nil, syntaxAt(rest, "unexpected %q in path %q", rest, s)
	}
	return p, nil
}

// parse reads the path at the start of s and returns what follows it
// (an operator in a filter, for instance).
func (p *jpPath) parse(s string) (string, error) {
	switch {
	case s == "":
		return "", syntaxAt(s, "empty path")
	case s[0] == '$':
		p.fromRoot = true
		s = s[1:]
	case s[0] == '@':
		s = s[1:]
	case s[0] != '.' && s[0] != '[':
		return "", syntaxAt(s, "path %q must start with . (or $ for the root, @ for the current object): did you mean .%s?", s, s)
	}
	for s != "" {
		switch {
		case strings.HasPrefix(s, ".."):
			p.steps = append(p.steps, jpStep{kind: stepDescend})
			s = s[2:]
			if s == "" || s[0] == '.' {
				return "", syntaxAt(s, "'..' must be followed by a field name, * or [")
			}
			if s[0] == '[' {
				continue
			}
			fallthrough
		case s[0] == '.':
			if s[0] == '.' {
				s = s[1:]
			}
			if strings.HasPrefix(s, "*") {
				p.steps = append(p.steps, jpStep{kind: stepWildcard})
				s = s[1:]
				continue
			}
			name, n := identifier(s)
			if n == 0 {
				if s == "" {
					// "{.}" and "{.items[0].}" are the object itself, as in kubectl.
					continue
				}
				return "", syntaxAt(s, "expected a field name after '.' at %q", s)
			}
			p.steps = append(p.steps, jpStep{kind: stepField, name: name, iterateArr: true})
			s = s[n:]
		case s[0] == '[':
			st, n, err := parseBracket(s)
			if err != nil {
				return "", err
			}
			p.steps = append(p.steps, st)
			s = s[n:]
		default:
			return s, nil
		}
	}
	return "", nil
}

// identifier reads a field name: up to a '.', '[', space, quote, ')' or
// an operator; "\." is a dot within the name
// (.metadata.labels.app\.kubernetes\.io/name).
func identifier(s string) (string, int) {
	var b strings.Builder
	i := 0
	for i < len(s) {
		c := s[i]
		if c == '\\' && i+1 < len(s) && s[i+1] == '.' {
			b.WriteByte('.')
			i += 2
			continue
		}
		if strings.IndexByte(".[] \t'\")=!<>&|,{}", c) >= 0 {
			break
		}
		b.WriteByte(c)
		i++
	}
	return b.String(), i
}

// parseBracket reads [*], [n], [lo:hi], ['name'] or [?(filter)].
func parseBracket(s string) (jpStep, int, error) {
	if strings.HasPrefix(s, "[?(") {
		end := closingParen(s, 2)
		if end < 0 || end+1 >= len(s) || s[end+1] != ']' {
			return jpStep{}, 0, syntaxAt(s, "unclosed filter %q: expected [?(...)]", s)
		}
		inner := strings.TrimLeftFunc(s[3:end], unicode.IsSpace)
		f, err := parseFilter(strings.TrimSpace(inner))
		if err != nil {
			// The filter's text ends where its trimmed text does.
			return jpStep{}, 0, shiftSyntax(err, len(s)-(end-len(inner)+len(strings.TrimSpace(inner))))
		}
		return jpStep{kind: stepFilter, filter: f}, end + 2, nil
	}
	if len(s) > 1 && (s[1] == '\'' || s[1] == '"') {
		name, n, err := unquote(s[1:])
		if err != nil {
			return jpStep{}, 0, err
		}
		if 1+n >= len(s) || s[1+n] != ']' {
			return jpStep{}, 0, syntaxAt(s[1+n:], "expected ] after [%s", s[1:1+n])
		}
		return jpStep{kind: stepField, name: name, iterateArr: true}, n + 2, nil
	}
	end := strings.IndexByte(s, ']')
	if end < 0 {
		return jpStep{}, 0, syntaxAt(s, "unclosed [ in %q", s)
	}
	in := strings.TrimSpace(s[1:end])
	// where is the tail of s from in's first byte.
	where := strings.TrimLeftFunc(s[1:], unicode.IsSpace)
	if in == "*" {
		return jpStep{kind: stepWildcard}, end + 1, nil
	}
	if lo, hi, ok := strings.Cut(in, ":"); ok {
		st := jpStep{kind: stepSlice}
		for _, b := range []struct {
			text string
			to   **int
		}{{lo, &st.lo}, {hi, &st.hi}} {
			if t := strings.TrimSpace(b.text); t != "" {
				n, err := strconv.Atoi(t)
				if err != nil {
					return jpStep{}, 0, syntaxAt(where, "bad slice bound %q in [%s]", t, in)
				}
				*b.to = &n
			}
		}
		return st, end + 1, nil
	}
	n, err := strconv.Atoi(in)
	if err != nil {
		return jpStep{}, 0, syntaxAt(where, "expected an index, a slice, *, a quoted name or ?(filter) in [%s]", in)
	}
	return jpStep{kind: stepIndex, index: n, iterateArr: true}, end + 1, nil
}

// closingParen returns the offset of the ) matching the ( at open,
// skipping quoted strings, or -1.
func closingParen(s string, open int) int {
	depth := 0
	end, _ := scanUnquoted(s, open, func(_ int, c byte) bool {
		switch c {
		case '(':
			depth++
		case ')':
			depth--
		}
		return depth == 0
	})
	return end
}

var filterOps = []string{"==", "!=", "<=", ">=", "<", ">"}

// parseFilter reads "left", or "left op right".
func parseFilter(s string) (*jpFilter, error) {
	if s == "" {
		return nil, syntaxAt(s, "empty filter ?()")
	}
	f := &jpFilter{}
	rest, err := parseOperand(s, &f.left)
	if err != nil {
		return nil, err
	}
	rest = strings.TrimSpace(rest)
	if rest == "" {
		if f.left.path == nil {
			return nil, syntaxAt(s, "filter ?(%s) tests a literal, not a path", s)
		}
		return f, nil
	}
	for _, op := range filterOps {
		if strings.HasPrefix(rest, op) {
			f.op = op
			rest = strings.TrimSpace(rest[len(op):])
			break
		}
	}
	if f.op == "" {
		return nil, syntaxAt(rest, "expected one of %s after %q in filter ?(%s)", strings.Join(filterOps, " "), strings.TrimSpace(strings.TrimSuffix(s, rest)), s)
	}
	rest, err = parseOperand(rest, &f.right)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(rest) != "" {
		return nil, syntaxAt(strings.TrimLeftFunc(rest, unicode.IsSpace), "unexpected %q in filter ?(%s)", strings.TrimSpace(rest), s)
	}
	return f, nil
}

// parseOperand reads a path or a literal at the start of s.
func parseOperand(s string, o *jpOperand) (string, error) {
	switch {
	case s == "":
		return "", syntaxAt(s, "missing operand in a filter")
	case s[0] == '@' || s[0] == '$':
		p := &jpPath{}
		rest, err := p.parse(s)
		if err != nil {
			return "", err
		}
		p.src = strings.TrimSpace(strings.TrimSuffix(s, rest))
		o.path = p
		return rest, nil
	case s[0] == '"' || s[0] == '\'':
		v, n, err := unquote(s)
		if err != nil {
			return "", err
		}
		o.literal = v
		return s[n:], nil
	}
	word, n := identifier(s)
	switch word {
	case "true":
		o.literal = true
	case "false":
		o.literal = false
	case "null":
		o.literal = nil
	default:
		if _, err := strconv.ParseFloat(word, 64); err != nil || word == "" {
			return "", syntaxAt(s, "expected @path, $path, a quoted string, a number, true, false or null in a filter, not %q", s)
		}
		o.literal = json.Number(word)
	}
	return s[n:], nil
}

// decodeDocument decodes JSON keeping numbers as written (an int64
// stays exact, and 1 prints as 1, not 1e+00).
func decodeDocument(doc []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(doc))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, fmt.Errorf("%w: %w", errBadJSON, err)
	}
	return v, nil
}

// execute writes the template evaluated on data (as decodeDocument
// returns it).
func (t *jsonPathTemplate) execute(w io.Writer, data any) error {
	var b bytes.Buffer
	if err := execNodes(&b, t.nodes, data, data); err != nil {
		return err
	}
	_, err := w.Write(b.Bytes())
	return err
}

func execNodes(b *bytes.Buffer, nodes []jpNode, root, cur any) error {
	for _, n := range nodes {
		switch n := n.(type) {
		case jpText:
			b.WriteString(string(n))
		case *jpPath:
			for i, v := range n.eval(root, cur) {
				if i > 0 {
					b.WriteByte(' ')
				}
				b.WriteString(formatValue(v))
			}
		case *jpRange:
			for _, v := range n.path.evalRange(root, cur) {
				if err := execNodes(b, n.body, root, v); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// formatValue prints a string as it is and anything else as JSON, as
// kubectl does.
func formatValue(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case json.Number:
		return v.String()
	case nil:
		return ""
	}
	out, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(out)
}

// eval returns every value the path reaches, in document order.
func (p *jpPath) eval(root, cur any) []any {
	vals := []any{cur}
	if p.fromRoot {
		vals = []any{root}
	}
	for _, st := range p.steps {
		var next []any
		for _, v := range vals {
			next = st.apply(next, root, v)
		}
		vals = next
	}
	return vals
}

// evalRange is what {range PATH} iterates: the path's values, with an
// array reached by a field or an index taken element by element, so that
// {range .items} works as {range .items[*]}.
func (p *jpPath) evalRange(root, cur any) []any {
	vals := p.eval(root, cur)
	if len(p.steps) == 0 || !p.steps[len(p.steps)-1].iterateArr {
		return vals
	}
	var out []any
	for _, v := range vals {
		if arr, ok := v.([]any); ok {
			out = append(out, arr...)
		} else {
			out = append(out, v)
		}
	}
	return out
}

func (st jpStep) apply(out []any, root, v any) []any {
	switch st.kind {
	case stepField:
		if m, ok := v.(map[string]any); ok {
			if x, ok := m[st.name]; ok {
				out = append(out, x)
			}
		}
	case stepWildcard:
		switch v := v.(type) {
		case []any:
			out = append(out, v...)
		case map[string]any:
			for _, k := range sortedKeys(v) {
				out = append(out, v[k])
			}
		}
	case stepDescend:
		out = descend(out, v)
	case stepIndex:
		if arr, ok := v.([]any); ok {
			i := st.index
			if i < 0 {
				i += len(arr)
			}
			if i >= 0 && i < len(arr) {
				out = append(out, arr[i])
			}
		}
	case stepSlice:
		if arr, ok := v.([]any); ok {
			lo, hi := 0, len(arr)
			if st.lo != nil {
				lo = clampIndex(*st.lo, len(arr))
			}
			if st.hi != nil {
				hi = clampIndex(*st.hi, len(arr))
			}
			if lo < hi {
				out = append(out, arr[lo:hi]...)
			}
		}
	case stepFilter:
		if arr, ok := v.([]any); ok {
			for _, el := range arr {
				if st.filter.match(root, el) {
					out = append(out, el)
				}
			}
		}
	}
	return out
}

func clampIndex(i, n int) int {
	if i < 0 {
		i += n
	}
	return min(max(i, 0), n)
}

// descend appends v and everything under it, depth first.
func descend(out []any, v any) []any {
	out = append(out, v)
	switch v := v.(type) {
	case []any:
		for _, x := range v {
			out = descend(out, x)
		}
	case map[string]any:
		for _, k := range sortedKeys(v) {
			out = descend(out, v[k])
		}
	}
	return out
}

// sortedKeys are m's keys in order: map order is random, and output
// must not be.
func sortedKeys(m map[string]any) []string {
	return slices.Sorted(maps.Keys(m))
}

// match reports whether el passes the filter.
func (f *jpFilter) match(root, el any) bool {
	left, ok := f.left.value(root, el)
	if f.op == "" {
		return ok
	}
	right, rok := f.right.value(root, el)
	if !ok || !rok {
		// A missing field equals nothing and differs from everything.
		return f.op == "!=" && ok != rok
	}
	c, comparable := compareValues(left, right)
	switch f.op {
	case "==":
		return comparable && c == 0
	case "!=":
		return !comparable || c != 0
	case "<":
		return comparable && c < 0
	case "<=":
		return comparable && c <= 0
	case ">":
		return comparable && c > 0
	case ">=":
		return comparable && c >= 0
	}
	return false
}

// value is the operand's value for el: a literal, or the first value its
// path reaches (ok false when it reaches none).
func (o jpOperand) value(root, el any) (any, bool) {
	if o.path == nil {
		return o.literal, true
	}
	vals := o.path.eval(root, el)
	if len(vals) == 0 {
		return nil, false
	}
	return vals[0], true
}

// compareValues orders numbers as numbers and strings as strings; other
// values are equal only when their JSON is.
func compareValues(a, b any) (int, bool) {
	if x, ok := number(a); ok {
		if y, ok := number(b); ok {
			switch {
			case x < y:
				return -1, true
			case x > y:
				return 1, true
			}
			return 0, true
		}
	}
	if x, ok := a.(string); ok {
		if y, ok := b.(string); ok {
			return strings.Compare(x, y), true
		}
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if bytes.Equal(ja, jb) {
		return 0, true
	}
	return 0, false
}

func number(v any) (float64, bool) {
	if n, ok := v.(json.Number); ok {
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

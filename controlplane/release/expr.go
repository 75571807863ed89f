package release

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// Facts are what a risk's Expression rule may ask of the cluster.
type Facts struct {
	// Version is the version the cluster runs; Channel its channel;
	// Arch its control plane's architecture ("amd64").
	Version, Channel, Arch string
	// NodeLabels are each node's labels.
	NodeLabels []map[string]string
}

// Eval evaluates an Expression rule against facts. The language, in
// full:
//
//	expr    = or
//	or      = and { "||" and }
//	and     = unary { "&&" unary }
//	unary   = "!" unary | compare
//	compare = value [ ("==" | "!=" | "<" | "<=" | ">" | ">=") value ]
//	value   = NUMBER | STRING | "true" | "false" | "(" expr ")"
//	        | "version" | "channel" | "arch" | "nodes" | "nodes(" STRING ")"
//
// version, channel and arch are strings; nodes is the number of nodes,
// nodes("SELECTOR") the number whose labels match a label selector
// ("node-role.kubernetes.io/worker", "topology.kubernetes.io/zone in
// (a,b)"). Two strings that are both versions ("1.2.3") compare as
// versions, other strings by bytes. The expression must come out true or
// false. For example: version < "1.3.0" && nodes("gpu=true") > 0.
func Eval(expr string, facts Facts) (bool, error) {
	if len(expr) > 2000 {
		return false, errors.New("expression longer than 2000 characters")
	}
	toks, err := tokenize(expr)
	if err != nil {
		return false, fmt.Errorf("expression %q: %w", expr, err)
	}
	p := &parser{toks: toks, facts: facts}
	v, err := p.or(0)
	if err == nil && p.pos < len(p.toks) {
		err = fmt.Errorf("unexpected %q", p.toks[p.pos].text)
	}
	if err != nil {
		return false, fmt.Errorf("expression %q: %w", expr, err)
	}
	b, ok := v.(bool)
	if !ok {
		return false, fmt.Errorf("expression %q is %s, not true or false", expr, describe(v))
	}
	return b, nil
}

type token struct {
	kind byte // 'n' number, 's' string, 'i' identifier, 'o' operator
	text string
}

func tokenize(s string) ([]token, error) {
	var out []token
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			i++
		case c >= '0' && c <= '9':
			j := i
			for j < len(s) && s[j] >= '0' && s[j] <= '9' {
				j++
			}
			out = append(out, token{'n', s[i:j]})
			i = j
		case c == '"':
			j := i + 1
			for j < len(s) && s[j] != '"' {
				if s[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(s) {
				return nil, errors.New("a string is not closed")
			}
			str, err := strconv.Unquote(s[i : j+1])
			if err != nil {
				return nil, fmt.Errorf("string %s: %w", s[i:j+1], err)
			}
			out = append(out, token{'s', str})
			i = j + 1
		case unicode.IsLetter(rune(c)) || c == '_':
			j := i
			for j < len(s) && (unicode.IsLetter(rune(s[j])) || unicode.IsDigit(rune(s[j])) || s[j] == '_') {
				j++
			}
			out = append(out, token{'i', s[i:j]})
			i = j
		default:
			op := ""
			for _, o := range []string{"==", "!=", "<=", ">=", "&&", "||", "<", ">", "!", "(", ")"} {
				if strings.HasPrefix(s[i:], o) {
					op = o
					break
				}
			}
			if op == "" {
				return nil, fmt.Errorf("unexpected %q at %d", c, i)
			}
			out = append(out, token{'o', op})
			i += len(op)
		}
	}
	return out, nil
}

type parser struct {
	toks  []token
	pos   int
	facts Facts
}

// maxDepth bounds nesting, so that no expression exhausts the stack.
const maxDepth = 50

func (p *parser) peek(op string) bool {
	return p.pos < len(p.toks) && p.toks[p.pos].kind == 'o' && p.toks[p.pos].text == op
}

func (p *parser) or(depth int) (any, error) {
	l, err := p.and(depth)
	for err == nil && p.peek("||") {
		p.pos++
		var r any
		if r, err = p.and(depth); err == nil {
			l, err = logic(l, r, "||")
		}
	}
	return l, err
}

func (p *parser) and(depth int) (any, error) {
	l, err := p.unary(depth)
	for err == nil && p.peek("&&") {
		p.pos++
		var r any
		if r, err = p.unary(depth); err == nil {
			l, err = logic(l, r, "&&")
		}
	}
	return l, err
}

func logic(l, r any, op string) (any, error) {
	lb, ok1 := l.(bool)
	rb, ok2 := r.(bool)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("%s takes true or false, not %s and %s", op, describe(l), describe(r))
	}
	if op == "&&" {
		return lb && rb, nil
	}
	return lb || rb, nil
}

func (p *parser) unary(depth int) (any, error) {
	if depth > maxDepth {
		return nil, errors.New("nested too deeply")
	}
	if p.peek("!") {
		p.pos++
		v, err := p.unary(depth + 1)
		if err != nil {
			return nil, err
		}
		b, ok := v.(bool)
		if !ok {
			return nil, fmt.Errorf("! takes true or false, not %s", describe(v))
		}
		return !b, nil
	}
	return p.compare(depth)
}

func (p *parser) compare(depth int) (any, error) {
	l, err := p.value(depth)
	if err != nil {
		return nil, err
	}
	for _, op := range []string{"==", "!=", "<=", ">=", "<", ">"} {
		if !p.peek(op) {
			continue
		}
		p.pos++
		r, err := p.value(depth)
		if err != nil {
			return nil, err
		}
		c, err := compareValues(l, r, op)
		if err != nil {
			return nil, err
		}
		switch op {
		case "==":
			return c == 0, nil
		case "!=":
			return c != 0, nil
		case "<":
			return c < 0, nil
		case "<=":
			return c <= 0, nil
		case ">":
			return c > 0, nil
		}
		return c >= 0, nil
	}
	return l, nil
}

func compareValues(l, r any, op string) (int, error) {
	switch lv := l.(type) {
	case int:
		if rv, ok := r.(int); ok {
			return lv - rv, nil
		}
	case string:
		if rv, ok := r.(string); ok {
			return CompareVersions(lv, rv), nil
		}
	case bool:
		if rv, ok := r.(bool); ok && (op == "==" || op == "!=") {
			if lv == rv {
				return 0, nil
			}
			return 1, nil
		}
	}
	return 0, fmt.Errorf("cannot compare %s %s %s", describe(l), op, describe(r))
}

func (p *parser) value(depth int) (any, error) {
	if p.pos >= len(p.toks) {
		return nil, errors.New("the expression ends early")
	}
	t := p.toks[p.pos]
	p.pos++
	switch t.kind {
	case 'n':
		n, err := strconv.Atoi(t.text)
		if err != nil {
			return nil, fmt.Errorf("number %s: %w", t.text, err)
		}
		return n, nil
	case 's':
		return t.text, nil
	case 'o':
		if t.text != "(" {
			return nil, fmt.Errorf("unexpected %q", t.text)
		}
		v, err := p.or(depth + 1)
		if err != nil {
			return nil, err
		}
		if !p.peek(")") {
			return nil, errors.New("a ( is not closed")
		}
		p.pos++
		return v, nil
	}
	switch t.text {
	case "true":
		return true, nil
	case "false":
		return false, nil
	case "version":
		return p.facts.Version, nil
	case "channel":
		return p.facts.Channel, nil
	case "arch":
		return p.facts.Arch, nil
	case "nodes":
		if !p.peek("(") {
			return len(p.facts.NodeLabels), nil
		}
		p.pos++
		if p.pos >= len(p.toks) || p.toks[p.pos].kind != 's' {
			return nil, errors.New(`nodes( takes a label selector in quotes: nodes("gpu=true")`)
		}
		sel, err := api.ParseSelector(p.toks[p.pos].text)
		if err != nil {
			return nil, fmt.Errorf("nodes(%q): %w", p.toks[p.pos].text, err)
		}
		p.pos++
		if !p.peek(")") {
			return nil, errors.New("nodes( is not closed")
		}
		p.pos++
		n := 0
		for _, l := range p.facts.NodeLabels {
			if sel.Matches(l) {
				n++
			}
		}
		return n, nil
	}
	return nil, fmt.Errorf("unknown name %q (known: version, channel, arch, nodes, true, false)", t.text)
}

func describe(v any) string {
	switch v := v.(type) {
	case int:
		return "the number " + strconv.Itoa(v)
	case string:
		return "the string " + strconv.Quote(v)
	case bool:
		return strconv.FormatBool(v)
	}
	return fmt.Sprintf("%v", v)
}

// isVersion reports whether s is a dotted version (1.2.3, 1.2.3-rc.1).
func isVersion(s string) bool {
	core, _, _ := strings.Cut(s, "-")
	parts := strings.Split(core, ".")
	if len(parts) < 2 {
		return false
	}
	for _, p := range parts {
		if _, err := strconv.Atoi(p); err != nil {
			return false
		}
	}
	return true
}

// CompareVersions orders dotted versions numerically, a pre-release
// (1.3.0-rc.1) before its release; strings that are not versions by
// bytes.
func CompareVersions(a, b string) int {
	if !isVersion(a) || !isVersion(b) {
		return strings.Compare(a, b)
	}
	ac, apre, _ := strings.Cut(a, "-")
	bc, bpre, _ := strings.Cut(b, "-")
	ap, bp := strings.Split(ac, "."), strings.Split(bc, ".")
	for i := 0; i < max(len(ap), len(bp)); i++ {
		var x, y int
		if i < len(ap) {
			x, _ = strconv.Atoi(ap[i])
		}
		if i < len(bp) {
			y, _ = strconv.Atoi(bp[i])
		}
		if x != y {
			return x - y
		}
	}
	switch {
	case apre == bpre:
		return 0
	case apre == "":
		return 1
	case bpre == "":
		return -1
	}
	// Pre-releases by dot-separated part, numbers as numbers (rc.10
	// after rc.9), as semantic versioning orders them.
	ap, bp = strings.Split(apre, "."), strings.Split(bpre, ".")
	for i := 0; i < min(len(ap), len(bp)); i++ {
		x, xerr := strconv.Atoi(ap[i])
		y, yerr := strconv.Atoi(bp[i])
		switch {
		case xerr == nil && yerr == nil && x != y:
			return x - y
		case xerr != nil || yerr != nil:
			if c := strings.Compare(ap[i], bp[i]); c != 0 {
				return c
			}
		}
	}
	return len(ap) - len(bp)
}

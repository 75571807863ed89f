package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// Parse reads a policy file, JSON or YAML, as the seed writes them, and
// checks it. Every problem is reported at once, by field path, in an
// error that wraps ErrInvalid. The warnings are things a valid policy
// does that its author may not expect (a cloud-only predicate that
// filters nothing, an ignored field, a "..." line of the seed's samples).
//
// A policy that lists predicates or priorities replaces the default ones
// completely (SPEC SCH-2); one that leaves out the predicates key, or the
// priorities key, gets the default list for that part, as in Kubernetes,
// with a warning.
func Parse(data []byte) (*Policy, []string, error) {
	data, warns := elideDots(data)
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		// The seed's 14.2.4.1 sample mixes YAML keys with JSON lists and
		// commas; read such a file as one flow mapping before giving up.
		fixed, ok := asFlowMapping(data)
		if !ok {
			return nil, warns, fmt.Errorf("%w: neither JSON nor YAML: %w", ErrInvalid, err)
		}
		j2, err2 := yaml.YAMLToJSON(fixed)
		if err2 != nil {
			return nil, warns, fmt.Errorf("%w: neither JSON nor YAML: %w", ErrInvalid, err)
		}
		j = j2
		warns = append(warns, "read as one flow mapping: the file mixes YAML keys with JSON lists, as the OpenShift manual's modified-policy sample does")
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, warns, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	ps := &parser{warns: warns, bad: map[string]bool{}}
	p := ps.policy(v)
	if p != nil {
		for _, e := range validate(p) {
			if !ps.isBad(e.Field) {
				ps.errs = append(ps.errs, e)
			}
		}
	}
	if len(ps.errs) > 0 {
		return nil, ps.warns, listError(ps.errs)
	}
	return p, append(ps.warns, Warnings(p)...), nil
}

// Validate checks a policy built in code or decoded elsewhere, with the
// same rules as Parse.
func Validate(p *Policy) error {
	if p == nil {
		return fmt.Errorf("%w: no policy", ErrInvalid)
	}
	if errs := validate(p); len(errs) > 0 {
		return listError(errs)
	}
	return nil
}

// InvalidError is a policy that parsed but breaks rules: every problem by
// field path within the policy document. It wraps ErrInvalid.
type InvalidError struct {
	Errs api.ErrorList
}

// Error renders every problem, one per line.
func (e *InvalidError) Error() string {
	if len(e.Errs) == 1 {
		return ErrInvalid.Error() + ": " + e.Errs[0].Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d problems:", ErrInvalid.Error(), len(e.Errs))
	for _, fe := range e.Errs {
		b.WriteString("\n  - ")
		b.WriteString(fe.Error())
	}
	return b.String()
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

func listError(errs api.ErrorList) error { return &InvalidError{Errs: errs} }

// elideDots blanks the lines that hold only "...": the seed's sample
// policies use them to stand for the entries they leave out, and YAML
// would read them as the end of the document.
func elideDots(data []byte) ([]byte, []string) {
	var warns []string
	lines := bytes.SplitAfter(data, []byte("\n"))
	changed := false
	for i, l := range lines {
		if string(bytes.TrimSpace(l)) == "..." {
			if !changed {
				data = nil
				changed = true
			}
			warns = append(warns, fmt.Sprintf("line %d: \"...\" ignored (the OpenShift manual's samples use it for entries they leave out)", i+1))
			lines[i] = []byte("\n")
		}
	}
	if !changed {
		return data, nil
	}
	return bytes.Join(lines, nil), warns
}

// parser turns the decoded document into a Policy, reporting shape errors
// (wrong types, unknown fields). Paths with a shape error are remembered
// so that validation does not report them a second time.
type parser struct {
	errs  api.ErrorList
	warns []string
	bad   map[string]bool
}

func (ps *parser) fail(e *api.FieldError) {
	ps.errs = append(ps.errs, e)
	ps.bad[e.Field] = true
}

// isBad reports whether field or one of its parents had a shape error.
func (ps *parser) isBad(field string) bool {
	for f := range ps.bad {
		if field == f || strings.HasPrefix(field, f+".") || strings.HasPrefix(field, f+"[") {
			return true
		}
	}
	return false
}

// object checks that v is an object whose keys are all in allowed.
func (ps *parser) object(v any, p *api.Path, allowed ...string) (map[string]any, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		if p == nil {
			ps.fail(api.Invalid(api.Root("(document)"), describe(v), "a policy must be an object with kind: Policy"))
		} else {
			ps.fail(api.Invalid(p, describe(v), "must be an object"))
		}
		return nil, false
	}
	for _, k := range sortedKeys(m) {
		if !slices.Contains(allowed, k) {
			ps.fail(&api.FieldError{Type: api.FieldValueUnknown, Field: p.Child(k).String(),
				Detail: "allowed here: " + strings.Join(allowed, ", ")})
		}
	}
	return m, true
}

func (ps *parser) str(v any, p *api.Path) string {
	s, ok := v.(string)
	if !ok {
		ps.fail(api.Invalid(p, describe(v), "must be a string"))
	}
	return s
}

func (ps *parser) boolean(v any, p *api.Path) bool {
	switch t := v.(type) {
	case bool:
		return t
	case string:
		if b, err := strconv.ParseBool(t); err == nil {
			return b
		}
	}
	ps.fail(api.Invalid(p, describe(v), "must be true or false"))
	return false
}

// integer accepts a JSON number or a string of digits: the seed writes
// weights both ways ("weight": 1 and "weight" : "1").
func (ps *parser) integer(v any, p *api.Path) (int64, bool) {
	var s string
	switch t := v.(type) {
	case json.Number:
		s = t.String()
	case string:
		s = strings.TrimSpace(t)
	default:
		ps.fail(api.Invalid(p, describe(v), "must be an integer"))
		return 0, false
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, true
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && f == math.Trunc(f) && math.Abs(f) < 1<<62 {
		return int64(f), true
	}
	ps.fail(api.Invalid(p, v, "must be an integer"))
	return 0, false
}

func (ps *parser) strings(v any, p *api.Path) []string {
	l, ok := v.([]any)
	if !ok {
		ps.fail(api.Invalid(p, describe(v), "must be a list of label keys"))
		return nil
	}
	out := make([]string, 0, len(l))
	for i, e := range l {
		out = append(out, ps.str(e, p.Index(i)))
	}
	return out
}

func (ps *parser) policy(v any) *Policy {
	m, ok := ps.object(v, nil, "kind", "apiVersion", "version", "predicates", "priorities",
		"hardPodAffinitySymmetricWeight", "alwaysCheckAllPredicates", "extenders")
	if !ok {
		return nil
	}
	p := &Policy{}
	if k, ok := m["kind"]; ok {
		p.Kind = ps.str(k, api.Root("kind"))
	}
	for _, key := range []string{"apiVersion", "version"} {
		if av, ok := m[key]; ok {
			s := ps.str(av, api.Root(key))
			if p.APIVersion != "" && s != p.APIVersion {
				ps.fail(api.Invalid(api.Root(key), s, "apiVersion and version disagree"))
			}
			p.APIVersion = s
		}
	}
	if _, ok := m["extenders"]; ok {
		ps.fail(api.Forbidden(api.Root("extenders"), "scheduler extenders are not supported: an outside scheduler binds pods through the binding API instead (SPEC SCH-12)"))
	}
	if w, ok := m["hardPodAffinitySymmetricWeight"]; ok {
		if n, ok := ps.integer(w, api.Root("hardPodAffinitySymmetricWeight")); ok {
			if n < 0 || n > 100 {
				ps.fail(api.Invalid(api.Root("hardPodAffinitySymmetricWeight"), n, "must be between 0 and 100"))
			} else {
				n32 := int32(n)
				p.HardPodAffinitySymmetricWeight = &n32
			}
		}
	}
	if b, ok := m["alwaysCheckAllPredicates"]; ok {
		p.AlwaysCheckAllPredicates = ps.boolean(b, api.Root("alwaysCheckAllPredicates"))
	}
	def := Default()
	if pv, ok := m["predicates"]; ok && pv != nil {
		p.Predicates = ps.predicates(pv, api.Root("predicates"))
	} else {
		p.Predicates = def.Predicates
		ps.warns = append(ps.warns, "no predicates listed: the default predicates apply")
	}
	if pv, ok := m["priorities"]; ok && pv != nil {
		p.Priorities = ps.priorities(pv, api.Root("priorities"))
	} else {
		p.Priorities = def.Priorities
		ps.warns = append(ps.warns, "no priorities listed: the default priorities apply")
	}
	return p
}

func (ps *parser) predicates(v any, p *api.Path) []Predicate {
	l, ok := v.([]any)
	if !ok {
		ps.fail(api.Invalid(p, describe(v), "must be a list of {name, argument}"))
		return nil
	}
	out := make([]Predicate, 0, len(l))
	for i, e := range l {
		ip := p.Index(i)
		m, ok := ps.object(e, ip, "name", "argument", "weight")
		if !ok {
			out = append(out, Predicate{})
			continue
		}
		var pr Predicate
		if n, ok := m["name"]; ok {
			pr.Name = ps.str(n, ip.Child("name"))
		}
		if _, ok := m["weight"]; ok {
			ps.warns = append(ps.warns, fmt.Sprintf("%s: ignored: predicates filter and have no weight", ip.Child("weight")))
		}
		if a, ok := m["argument"]; ok && a != nil {
			ap := ip.Child("argument")
			am, ok := ps.object(a, ap, TypeServiceAffinity, TypeLabelsPresence, TypeServiceAntiAffinity, TypeLabelPreference)
			if ok {
				pr.Argument = &PredicateArgument{}
				for _, k := range []string{TypeServiceAntiAffinity, TypeLabelPreference} {
					if _, ok := am[k]; ok {
						ps.fail(api.Invalid(ap.Child(k), "{...}", "is a priority argument; a predicate takes serviceAffinity or labelsPresence"))
						ps.bad[ap.String()] = true
					}
				}
				if sa, ok := am[TypeServiceAffinity]; ok {
					sp := ap.Child(TypeServiceAffinity)
					if sm, ok := ps.object(sa, sp, "labels"); ok {
						pr.Argument.ServiceAffinity = &ServiceAffinity{}
						if lv, ok := sm["labels"]; ok {
							pr.Argument.ServiceAffinity.Labels = ps.strings(lv, sp.Child("labels"))
						}
					}
				}
				if lp, ok := am[TypeLabelsPresence]; ok {
					lpp := ap.Child(TypeLabelsPresence)
					if lm, ok := ps.object(lp, lpp, "labels", "presence"); ok {
						pr.Argument.LabelsPresence = &LabelsPresence{}
						if lv, ok := lm["labels"]; ok {
							pr.Argument.LabelsPresence.Labels = ps.strings(lv, lpp.Child("labels"))
						}
						if b, ok := lm["presence"]; ok {
							pr.Argument.LabelsPresence.Presence = ps.boolean(b, lpp.Child("presence"))
						} else {
							ps.warns = append(ps.warns, fmt.Sprintf("%s: not given, so false: nodes with any of the labels are refused", lpp.Child("presence")))
						}
					}
				}
			}
		}
		out = append(out, pr)
	}
	return out
}

func (ps *parser) priorities(v any, p *api.Path) []Priority {
	l, ok := v.([]any)
	if !ok {
		ps.fail(api.Invalid(p, describe(v), "must be a list of {name, weight, argument}"))
		return nil
	}
	out := make([]Priority, 0, len(l))
	for i, e := range l {
		ip := p.Index(i)
		m, ok := ps.object(e, ip, "name", "weight", "argument")
		if !ok {
			out = append(out, Priority{})
			continue
		}
		var pr Priority
		if n, ok := m["name"]; ok {
			pr.Name = ps.str(n, ip.Child("name"))
		}
		if w, ok := m["weight"]; ok {
			pr.Weight, _ = ps.integer(w, ip.Child("weight"))
		} else {
			ps.fail(api.Required(ip.Child("weight"), "a priority needs a positive weight"))
		}
		if a, ok := m["argument"]; ok && a != nil {
			ap := ip.Child("argument")
			am, ok := ps.object(a, ap, TypeServiceAntiAffinity, TypeLabelPreference, TypeServiceAffinity, TypeLabelsPresence)
			if ok {
				pr.Argument = &PriorityArgument{}
				for _, k := range []string{TypeServiceAffinity, TypeLabelsPresence} {
					if _, ok := am[k]; ok {
						ps.fail(api.Invalid(ap.Child(k), "{...}", "is a predicate argument; a priority takes serviceAntiAffinity or labelPreference"))
						ps.bad[ap.String()] = true
					}
				}
				if sa, ok := am[TypeServiceAntiAffinity]; ok {
					sp := ap.Child(TypeServiceAntiAffinity)
					if sm, ok := ps.object(sa, sp, "label", "labels"); ok {
						pr.Argument.ServiceAntiAffinity = &ServiceAntiAffinity{}
						if lv, ok := sm["label"]; ok {
							pr.Argument.ServiceAntiAffinity.Label = ps.str(lv, sp.Child("label"))
						}
						if lv, ok := sm["labels"]; ok {
							// The seed's generic snippet writes a list here;
							// its examples and Kubernetes use one label.
							labels := ps.strings(lv, sp.Child("labels"))
							switch {
							case len(labels) != 1:
								ps.fail(api.Invalid(sp.Child("labels"), strings.Join(labels, ","), "serviceAntiAffinity spreads over one label: use label: NAME"))
							case pr.Argument.ServiceAntiAffinity.Label != "":
								ps.fail(api.Invalid(sp.Child("labels"), labels[0], "give label or labels, not both"))
							default:
								pr.Argument.ServiceAntiAffinity.Label = labels[0]
								ps.warns = append(ps.warns, fmt.Sprintf("%s: read as label: %s", sp.Child("labels"), labels[0]))
							}
						}
					}
				}
				if lp, ok := am[TypeLabelPreference]; ok {
					lpp := ap.Child(TypeLabelPreference)
					if lm, ok := ps.object(lp, lpp, "label", "presence"); ok {
						pr.Argument.LabelPreference = &LabelPreference{}
						if lv, ok := lm["label"]; ok {
							pr.Argument.LabelPreference.Label = ps.str(lv, lpp.Child("label"))
						}
						if b, ok := lm["presence"]; ok {
							pr.Argument.LabelPreference.Presence = ps.boolean(b, lpp.Child("presence"))
						} else {
							ps.warns = append(ps.warns, fmt.Sprintf("%s: not given, so false: nodes without the label are preferred", lpp.Child("presence")))
						}
					}
				}
			}
		}
		out = append(out, pr)
	}
	return out
}

// validate checks the meaning of a policy: names, weights, arguments.
func validate(p *Policy) api.ErrorList {
	var errs api.ErrorList
	if p == nil {
		return errs
	}
	switch p.Kind {
	case Kind:
	case "":
		errs = append(errs, api.Required(api.Root("kind"), "must be Policy"))
	default:
		errs = append(errs, api.NotSupported(api.Root("kind"), p.Kind, []string{Kind}))
	}
	if p.APIVersion != "" && p.APIVersion != Version {
		errs = append(errs, api.NotSupported(api.Root("apiVersion"), p.APIVersion, []string{Version}))
	}
	if w := p.HardPodAffinitySymmetricWeight; w != nil && (*w < 0 || *w > 100) {
		errs = append(errs, api.Invalid(api.Root("hardPodAffinitySymmetricWeight"), *w, "must be between 0 and 100"))
	}
	names := map[string]bool{}
	for i := range p.Predicates {
		errs = append(errs, validatePredicate(&p.Predicates[i], api.Root("predicates").Index(i), names)...)
	}
	names = map[string]bool{}
	for i := range p.Priorities {
		errs = append(errs, validatePriority(&p.Priorities[i], api.Root("priorities").Index(i), names)...)
	}
	return errs
}

func validatePredicate(pr *Predicate, p *api.Path, names map[string]bool) api.ErrorList {
	var errs api.ErrorList
	np := p.Child("name")
	if pr.Name == "" {
		return append(errs, api.Required(np, "every predicate needs a name"))
	}
	if names[pr.Name] {
		errs = append(errs, api.Duplicate(np, pr.Name))
	}
	names[pr.Name] = true
	a := pr.Argument
	if a == nil {
		return withoutArgument(errs, p, pr.Name, "predicate", predicateInfo, predicateAliases)
	}
	ap := p.Child("argument")
	set := 0
	if a.ServiceAffinity != nil {
		set++
	}
	if a.LabelsPresence != nil {
		set++
	}
	if set != 1 {
		return append(errs, api.Invalid(ap, fmt.Sprintf("%d arguments", set), "must set exactly one of serviceAffinity, labelsPresence"))
	}
	typ := pr.Type()
	if info, ok := PredicateInfo(pr.Name); ok && configurableNames[info.Type] != typ {
		errs = append(errs, api.Invalid(np, pr.Name, fmt.Sprintf("is a built-in predicate; a configured %s needs a name of its own", typ)))
	}
	switch typ {
	case TypeServiceAffinity:
		errs = append(errs, validateLabels(a.ServiceAffinity.Labels, ap.Child(TypeServiceAffinity, "labels"))...)
	case TypeLabelsPresence:
		errs = append(errs, validateLabels(a.LabelsPresence.Labels, ap.Child(TypeLabelsPresence, "labels"))...)
	}
	return errs
}

// withoutArgument appends to errs what is wrong with a predicate or
// priority (kind) named without an argument: a built-in needs none, but a
// configurable type cannot run without one and an unknown name is an
// error, with a hint when it differs from a known one only in case.
func withoutArgument(errs api.ErrorList, p *api.Path, name, kind string, known map[string]*Info, aliases map[string]string) api.ErrorList {
	info, ok := lookupInfo(name, known, aliases)
	switch {
	case ok && isConfigurableType(info.Type):
		errs = append(errs, api.Required(p.Child("argument"), fmt.Sprintf("%s is configurable: give argument.%s", name, name)))
	case !ok:
		detail := "unknown " + kind
		if s := suggest(name, known, aliases); s != "" {
			detail += fmt.Sprintf(" (did you mean %q?)", s)
		}
		errs = append(errs, api.Invalid(p.Child("name"), name, detail))
	}
	return errs
}

func validatePriority(pr *Priority, p *api.Path, names map[string]bool) api.ErrorList {
	var errs api.ErrorList
	np := p.Child("name")
	if pr.Name == "" {
		errs = append(errs, api.Required(np, "every priority needs a name"))
	} else if names[pr.Name] {
		errs = append(errs, api.Duplicate(np, pr.Name))
	}
	names[pr.Name] = true
	if pr.Weight <= 0 || pr.Weight > MaxWeight {
		errs = append(errs, api.Invalid(p.Child("weight"), pr.Weight, fmt.Sprintf("must be a positive integer, at most %d", MaxWeight)))
	}
	if pr.Name == "" {
		return errs
	}
	a := pr.Argument
	if a == nil {
		return withoutArgument(errs, p, pr.Name, "priority", priorityInfo, nil)
	}
	ap := p.Child("argument")
	set := 0
	if a.ServiceAntiAffinity != nil {
		set++
	}
	if a.LabelPreference != nil {
		set++
	}
	if set != 1 {
		return append(errs, api.Invalid(ap, fmt.Sprintf("%d arguments", set), "must set exactly one of serviceAntiAffinity, labelPreference"))
	}
	if _, ok := PriorityInfo(pr.Name); ok {
		errs = append(errs, api.Invalid(np, pr.Name, fmt.Sprintf("is a built-in priority; a configured %s needs a name of its own", pr.Type())))
	}
	switch pr.Type() {
	case TypeServiceAntiAffinity:
		errs = append(errs, validateLabel(a.ServiceAntiAffinity.Label, ap.Child(TypeServiceAntiAffinity, "label"))...)
	case TypeLabelPreference:
		errs = append(errs, validateLabel(a.LabelPreference.Label, ap.Child(TypeLabelPreference, "label"))...)
	}
	return errs
}

func validateLabels(labels []string, p *api.Path) api.ErrorList {
	if len(labels) == 0 {
		return api.ErrorList{api.Required(p, "at least one label key")}
	}
	var errs api.ErrorList
	seen := map[string]bool{}
	for i, l := range labels {
		errs = append(errs, validateLabel(l, p.Index(i))...)
		if seen[l] {
			errs = append(errs, api.Duplicate(p.Index(i), l))
		}
		seen[l] = true
	}
	return errs
}

func validateLabel(l string, p *api.Path) api.ErrorList {
	if l == "" {
		return api.ErrorList{api.Required(p, "a label key")}
	}
	if msgs := api.IsQualifiedName(l); msgs != nil {
		return api.ErrorList{api.Invalid(p, l, "not a valid label key: "+strings.Join(msgs, "; "))}
	}
	return nil
}

// describe names a decoded JSON value's type for messages.
func describe(v any) string {
	switch t := v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	case string:
		return t
	case bool:
		return strconv.FormatBool(t)
	case json.Number:
		return t.String()
	}
	return fmt.Sprintf("%v", v)
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// asFlowMapping rewrites a document of top-level "key: value" entries
// whose separators are missing or are commas (`kind: "Policy" version:
// "v1" "predicates": [...], "priorities": [...]`) as the YAML flow mapping
// `{kind: "Policy", version: "v1", "predicates": [...], ...}`. Values are
// quoted strings, plain words or bracketed JSON/YAML flow collections. ok
// is false when the document has any other shape.
func asFlowMapping(data []byte) ([]byte, bool) {
	type token struct {
		kind byte // 's' string, 'w' word, 'c' collection, ':' or ','
		text []byte
	}
	var toks []token
	i := 0
	for i < len(data) {
		c := data[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '#':
			for i < len(data) && data[i] != '\n' {
				i++
			}
		case c == ':' || c == ',':
			toks = append(toks, token{kind: c})
			i++
		case c == '"' || c == '\'':
			end, ok := skipString(data, i)
			if !ok {
				return nil, false
			}
			toks = append(toks, token{kind: 's', text: data[i:end]})
			i = end
		case c == '[' || c == '{':
			end, ok := skipCollection(data, i)
			if !ok {
				return nil, false
			}
			toks = append(toks, token{kind: 'c', text: data[i:end]})
			i = end
		default:
			start := i
			for i < len(data) && !bytes.ContainsRune([]byte(" \t\r\n,#[]{}"), rune(data[i])) &&
				!(data[i] == ':' && (i+1 == len(data) || bytes.IndexByte([]byte(" \t\r\n"), data[i+1]) >= 0)) {
				i++
			}
			if i == start {
				return nil, false
			}
			toks = append(toks, token{kind: 'w', text: data[start:i]})
		}
	}
	var out bytes.Buffer
	out.WriteByte('{')
	for j := 0; j < len(toks); {
		if j+2 >= len(toks) || (toks[j].kind != 's' && toks[j].kind != 'w') || toks[j+1].kind != ':' || toks[j+2].kind == ':' || toks[j+2].kind == ',' {
			return nil, false
		}
		if out.Len() > 1 {
			out.WriteString(", ")
		}
		out.Write(toks[j].text)
		out.WriteString(": ")
		out.Write(toks[j+2].text)
		j += 3
		if j < len(toks) && toks[j].kind == ',' {
			j++
		}
	}
	out.WriteByte('}')
	return out.Bytes(), true
}

// skipString returns the end of the quoted string that starts at i.
func skipString(data []byte, i int) (int, bool) {
	q := data[i]
	for j := i + 1; j < len(data); j++ {
		switch {
		case q == '"' && data[j] == '\\':
			j++
		case data[j] == q:
			if q == '\'' && j+1 < len(data) && data[j+1] == '\'' {
				j++ // '' is an escaped quote in YAML
				continue
			}
			return j + 1, true
		}
	}
	return 0, false
}

// skipCollection returns the end of the bracketed collection at i.
func skipCollection(data []byte, i int) (int, bool) {
	depth := 0
	for j := i; j < len(data); j++ {
		switch data[j] {
		case '"', '\'':
			end, ok := skipString(data, j)
			if !ok {
				return 0, false
			}
			j = end - 1
		case '[', '{':
			depth++
		case ']', '}':
			depth--
			if depth == 0 {
				return j + 1, true
			}
		}
	}
	return 0, false
}

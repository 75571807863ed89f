package api

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"sync"
)

// Warnings are messages about an accepted object that the server passes on
// to the client (as `Warning: 299` headers) and the CLI prints.
type Warnings []string

// acceptedSuffix ends the warning about a Kubernetes-only field.
const acceptedSuffix = ": accepted but not acted on by outpost"

// DecodeInto decodes the JSON object in data into obj, replacing what obj
// held. Unknown fields are refused with a 422 *StatusError listing each by
// path; fields that Kubernetes has but outpost does not act on are dropped
// and named in the warnings; malformed JSON or a value of the wrong JSON
// type is a 400 *StatusError saying where.
//
// When obj is a kind of the Resource table, a kind or apiVersion in data
// must be that kind's, and obj's TypeMeta is set from the table.
func DecodeInto(data []byte, obj Object) (Warnings, error) {
	return decodeInto(data, obj, false)
}

// DecodeRequestInto is DecodeInto for the body of a create or update, which
// must also say what it is, as Kubernetes requires: without kind or
// apiVersion it is a 400 naming each missing one, where it used to be
// stored as whatever the URL named.
func DecodeRequestInto(data []byte, obj Object) (Warnings, error) {
	return decodeInto(data, obj, true)
}

func decodeInto(data []byte, obj Object, requireType bool) (Warnings, error) {
	if obj == nil || reflect.ValueOf(obj).IsNil() {
		return nil, NewBadRequest("nothing to decode into")
	}
	r := ResourceOf(obj)
	rv := reflect.ValueOf(obj).Elem()
	rv.SetZero()

	// Fast path: nearly every object a client writes uses only fields the Go
	// type has, and one strict pass of encoding/json decides it.
	if strictUnmarshal(data, obj) {
		if r != nil {
			if err := checkTypeMeta(obj.GetTypeMeta(), r, requireType); err != nil {
				return nil, err
			}
		}
		return nil, nil
	}
	rv.SetZero()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	err := dec.Decode(obj)
	switch {
	case errors.Is(err, io.EOF):
		return nil, NewBadRequest("the request body is empty")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return nil, syntaxError(data, err)
	}
	if _, ok := errors.AsType[*json.SyntaxError](err); ok {
		return nil, syntaxError(data, err)
	}
	// Slow path: an unknown field, a field named in another case (which
	// encoding/json accepts, hence no error above), a value of the wrong
	// type, a value a leaf type refused, or data after the object. Walk
	// the document to say which, by path.
	rv.SetZero()
	w, err := decodeSlow(data, obj, r)
	if err != nil {
		return nil, err
	}
	if r != nil {
		if err := checkTypeMeta(obj.GetTypeMeta(), r, requireType); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// Decode decodes a JSON object of any kind in the Resource table, chosen by
// its apiVersion and kind; see DecodeInto for the rules.
func Decode(data []byte) (Object, Warnings, error) {
	tm, ok := peekTypeMeta(data)
	if ok {
		goto found
	}
	if err := json.Unmarshal(data, &tm); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case len(bytes.TrimSpace(data)) == 0:
			return nil, nil, NewBadRequest("the request body is empty")
		case errors.As(err, &se) || errors.Is(err, io.ErrUnexpectedEOF):
			return nil, nil, syntaxError(data, err)
		case errors.As(err, &te) && te.Field != "":
			return nil, nil, NewBadRequest(fmt.Sprintf("%s: expected a string, got %s", te.Field, te.Value))
		case errors.As(err, &te):
			return nil, nil, NewBadRequest(fmt.Sprintf("expected a JSON object, got %s", te.Value))
		default:
			return nil, nil, NewBadRequest(err.Error())
		}
	}
found:
	r, err := resourceForTypeMeta(tm)
	if err != nil {
		return nil, nil, err
	}
	obj := r.New()
	w, err := DecodeInto(data, obj)
	if err != nil {
		return nil, nil, err
	}
	return obj, w, nil
}

// resourceForTypeMeta finds the Resource named by an object's apiVersion and
// kind, or says which of the two is wrong.
func resourceForTypeMeta(tm TypeMeta) (*Resource, error) {
	if tm.Kind == "" {
		return nil, NewBadRequest(`the object has no "kind"`)
	}
	if tm.APIVersion == "" {
		return nil, NewBadRequest(fmt.Sprintf(`the %s has no "apiVersion"`, tm.Kind))
	}
	r := ResourceForKind(tm.Kind)
	if r == nil || r.APIVersion() != tm.APIVersion {
		msg := fmt.Sprintf("no matches for kind %q in version %q", tm.Kind, tm.APIVersion)
		if r != nil {
			msg += fmt.Sprintf(": %s is served as %q", r.Kind, r.APIVersion())
		}
		return nil, NewBadRequest(msg)
	}
	return r, nil
}

// checkTypeMeta refuses a body of another kind than the one asked for and
// fills the TypeMeta in.
func checkTypeMeta(tm *TypeMeta, r *Resource, required bool) error {
	if required && (tm.Kind == "" || tm.APIVersion == "") {
		var missing []string
		if tm.Kind == "" {
			missing = append(missing, "kind: Required value")
		}
		if tm.APIVersion == "" {
			missing = append(missing, "apiVersion: Required value")
		}
		return NewBadRequest("the object does not say what it is: " + strings.Join(missing, ", "))
	}
	if tm.Kind != "" && tm.Kind != r.Kind {
		return NewBadRequest(fmt.Sprintf("the kind in the body (%s) does not match the expected kind (%s)", tm.Kind, r.Kind))
	}
	if tm.APIVersion != "" && tm.APIVersion != r.APIVersion() {
		return NewBadRequest(fmt.Sprintf("the API version in the body (%s) does not match the expected API version (%s)", tm.APIVersion, r.APIVersion()))
	}
	tm.Kind, tm.APIVersion = r.Kind, r.APIVersion()
	return nil
}

// Encode writes obj as JSON with its apiVersion and kind set from the
// Resource table. obj itself is not changed: it may be shared.
func Encode(obj Object) ([]byte, error) {
	if obj == nil || reflect.ValueOf(obj).IsNil() {
		return nil, fmt.Errorf("%w: nil object", ErrUnknownKind)
	}
	tm := obj.GetTypeMeta()
	r := ResourceOf(obj)
	if r == nil {
		if tm.Kind == "" || tm.APIVersion == "" {
			return nil, fmt.Errorf("%w: %T", ErrUnknownKind, obj)
		}
		return Marshal(obj)
	}
	if tm.Kind == r.Kind && tm.APIVersion == r.APIVersion() {
		return Marshal(obj)
	}
	// A shallow copy is enough: only the TypeMeta differs.
	cp := reflect.New(reflect.TypeOf(obj).Elem())
	cp.Elem().Set(reflect.ValueOf(obj).Elem())
	c := cp.Interface().(Object)
	*c.GetTypeMeta() = TypeMeta{APIVersion: r.APIVersion(), Kind: r.Kind}
	return Marshal(c)
}

// checkTrailing refuses anything but white space after the object.
func checkTrailing(data []byte, off int) error {
	if off > len(data) {
		return nil
	}
	for i, c := range data[off:] {
		switch c {
		case ' ', '\t', '\r', '\n':
		default:
			return NewBadRequest(fmt.Sprintf("invalid JSON at byte offset %d: unexpected data after the object", off+i))
		}
	}
	return nil
}

// syntaxError turns a JSON syntax error into a 400 that says where.
func syntaxError(data []byte, err error) *StatusError {
	if se, ok := errors.AsType[*json.SyntaxError](err); ok {
		return NewBadRequest(fmt.Sprintf("invalid JSON at byte offset %d: %s", se.Offset, se.Error()))
	}
	return NewBadRequest(fmt.Sprintf("invalid JSON at byte offset %d: unexpected end of JSON input", len(data)))
}

// kindName names obj's kind in messages, also for types outside the table.
func kindName(obj Object, r *Resource) string {
	if r != nil {
		return r.Kind
	}
	return reflect.TypeOf(obj).Elem().Name()
}

// decodeSlow walks data against obj's type to find every unknown field,
// every Kubernetes-only field and every value of the wrong type, then decodes
// leniently, dropping the Kubernetes-only fields.
func decodeSlow(data []byte, obj Object, r *Resource) (Warnings, error) {
	w := &walker{dec: json.NewDecoder(bytes.NewReader(data))}
	w.dec.UseNumber()
	rootType := reflect.TypeOf(obj).Elem()
	err := w.walk(rootType)
	if err == nil {
		// Anything after the object is an error too.
		if _, terr := w.dec.Token(); terr == nil {
			err = NewBadRequest(fmt.Sprintf("invalid JSON at byte offset %d: unexpected data after the object", w.dec.InputOffset()))
		} else if !errors.Is(terr, io.EOF) {
			err = terr
		}
	}
	if err != nil {
		if se, ok := errors.AsType[*StatusError](err); ok {
			return nil, se
		}
		return nil, syntaxError(data, err)
	}
	kind := kindName(obj, r)
	if len(w.bad) > 0 {
		prefix := kind + " cannot be decoded: "
		if r != nil {
			prefix = fmt.Sprintf("%s in version %q cannot be handled as a %s: ", kind, r.APIVersion(), kind)
		}
		return nil, NewBadRequest(prefix + strings.Join(w.bad, "; "))
	}
	if err := json.Unmarshal(data, obj); err != nil {
		return nil, NewBadRequest(fmt.Sprintf("%s cannot be decoded: %v", kind, err))
	}
	if len(w.unknown) > 0 {
		return nil, NewInvalid(kind, obj.GetObjectMeta().Name, w.unknown)
	}
	if w.volumeSources != nil {
		setUnsupportedSources(obj, w.volumeSources)
	}
	return w.warnings, nil
}

// walker follows a JSON token stream along a Go type.
type walker struct {
	dec      *json.Decoder
	path     []byte // the current field path, as FieldError.Field writes it
	unknown  ErrorList
	warnings Warnings
	bad      []string // values of the wrong type, "path: why"
	// volumeSources: Kubernetes-only volume sources, by the volume's path
	// (see volume_sources.go).
	volumeSources map[string][]string
}

func (w *walker) pushField(name string) int {
	n := len(w.path)
	if n > 0 {
		w.path = append(w.path, '.')
	}
	w.path = append(w.path, name...)
	return n
}

func (w *walker) pushIndex(i int) int {
	n := len(w.path)
	w.path = append(w.path, '[')
	w.path = strconv.AppendInt(w.path, int64(i), 10)
	w.path = append(w.path, ']')
	return n
}

func (w *walker) pushKey(k string) int {
	n := len(w.path)
	w.path = append(w.path, '[')
	w.path = append(w.path, k...)
	w.path = append(w.path, ']')
	return n
}

func (w *walker) where() string {
	if len(w.path) == 0 {
		return "<root>"
	}
	return string(w.path)
}

func (w *walker) typeError(want string, got any) {
	w.bad = append(w.bad, fmt.Sprintf("%s: expected %s, got %s", w.where(), want, describeToken(got)))
}

// walk checks the next JSON value against t. It returns only errors that end
// the walk (malformed JSON); problems with the value are collected.
func (w *walker) walk(t reflect.Type) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if isLeaf(t) {
		return w.leaf(t)
	}
	switch t.Kind() {
	case reflect.Struct:
		return w.object(t, fieldsOf(t))
	case reflect.Map:
		return w.object(t, nil)
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return w.scalar(t) // []byte is a base64 string
		}
		return w.array(t)
	case reflect.Array:
		return w.array(t)
	case reflect.Interface:
		return w.skip()
	default:
		return w.scalar(t)
	}
}

// leaf checks a value of a type that decodes itself (Quantity, Time,
// IntOrString) by letting it try.
func (w *walker) leaf(t reflect.Type) error {
	var raw json.RawMessage
	if err := w.dec.Decode(&raw); err != nil {
		return err
	}
	if err := json.Unmarshal(raw, reflect.New(t).Interface()); err != nil {
		msg := err.Error()
		if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
			msg = "expected " + expectedOf(t) + ", got " + te.Value
		}
		w.bad = append(w.bad, fmt.Sprintf("%s: %s", w.where(), msg))
	}
	return nil
}

// open reads the token that starts an object or array and reports
// whether it was delim, so that there are members to walk: null has none,
// and any other value is a type error, skipped.
func (w *walker) open(delim json.Delim, want string) (bool, error) {
	tok, err := w.dec.Token()
	if err != nil || tok == nil {
		return false, err
	}
	if tok == delim {
		return true, nil
	}
	w.typeError(want, tok)
	return false, w.skipOpened(tok)
}

func (w *walker) object(t reflect.Type, sf *structFields) error {
	if ok, err := w.open('{', "an object"); !ok {
		return err
	}
	for w.dec.More() {
		kt, err := w.dec.Token()
		if err != nil {
			return err
		}
		key, _ := kt.(string)
		var n int
		if sf == nil {
			n = w.pushKey(key)
			err = w.walk(t.Elem())
		} else {
			n = w.pushField(key)
			if f := sf.lookup(key); f != nil {
				err = w.walk(f.typ)
			} else if _, ok := sf.known[key]; ok {
				w.warnings = append(w.warnings, string(w.path)+acceptedSuffix)
				if t == volumeType {
					w.noteVolumeSource(n, key)
				}
				err = w.skip()
			} else {
				w.unknown = append(w.unknown, &FieldError{Type: FieldValueUnknown, Field: string(w.path), Detail: sf.suggest(key)})
				err = w.skip()
			}
		}
		w.path = w.path[:n]
		if err != nil {
			return err
		}
	}
	_, err := w.dec.Token() // '}'
	return err
}

func (w *walker) array(t reflect.Type) error {
	if ok, err := w.open('[', "an array"); !ok {
		return err
	}
	for i := 0; w.dec.More(); i++ {
		n := w.pushIndex(i)
		err := w.walk(t.Elem())
		w.path = w.path[:n]
		if err != nil {
			return err
		}
	}
	_, err := w.dec.Token() // ']'
	return err
}

func (w *walker) scalar(t reflect.Type) error {
	tok, err := w.dec.Token()
	if err != nil {
		return err
	}
	want := expectedOf(t)
	switch v := tok.(type) {
	case nil:
	case json.Delim:
		w.typeError(want, tok)
		return w.skipOpened(tok)
	case string:
		if t.Kind() != reflect.String && !(t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8) {
			w.typeError(want, tok)
		}
	case bool:
		if t.Kind() != reflect.Bool {
			w.typeError(want, tok)
		}
	case json.Number:
		w.number(t, v, want)
	}
	return nil
}

func (w *walker) number(t reflect.Type, v json.Number, want string) {
	var err error
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		_, err = strconv.ParseInt(string(v), 10, t.Bits())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		_, err = strconv.ParseUint(string(v), 10, t.Bits())
	case reflect.Float32, reflect.Float64:
		_, err = strconv.ParseFloat(string(v), t.Bits())
	default:
		w.typeError(want, v)
		return
	}
	if err != nil {
		why := "is not " + want
		if errors.Is(err, strconv.ErrRange) {
			why = "is out of range for " + t.Kind().String()
		}
		w.bad = append(w.bad, fmt.Sprintf("%s: %s %s", w.where(), truncate(string(v)), why))
	}
}

// skip passes over the next value, whatever it is.
func (w *walker) skip() error {
	var raw json.RawMessage
	return w.dec.Decode(&raw)
}

// skipOpened passes over the rest of an object or array whose opening
// token has been read; other tokens are complete already.
func (w *walker) skipOpened(tok any) error {
	d, ok := tok.(json.Delim)
	if !ok || d == '}' || d == ']' {
		return nil
	}
	for depth := 1; depth > 0; {
		t, err := w.dec.Token()
		if err != nil {
			return err
		}
		switch t {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
	return nil
}

func expectedOf(t reflect.Type) string {
	switch t {
	case reflect.TypeFor[Quantity]():
		return "a quantity"
	case reflect.TypeFor[Time]():
		return "an RFC 3339 time"
	case reflect.TypeFor[IntOrString]():
		return "an integer or a string"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return "a base64 string"
		}
		return "an array"
	}
	return t.String()
}

func describeToken(tok any) string {
	switch v := tok.(type) {
	case nil:
		return "null"
	case json.Delim:
		if v == '{' {
			return "an object"
		}
		return "an array"
	case string:
		return "a string " + strconv.Quote(truncate(v))
	case bool:
		return "a boolean " + strconv.FormatBool(v)
	case json.Number:
		return "a number " + truncate(string(v))
	}
	return fmt.Sprintf("%v", tok)
}

func truncate(s string) string {
	const max = 40
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}

var (
	unmarshalerType     = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
	fieldCache          sync.Map // reflect.Type → *structFields
	leafCache           sync.Map // reflect.Type → bool
)

// isLeaf reports whether values of t decode themselves, so that the walker
// checks them whole instead of looking inside.
func isLeaf(t reflect.Type) bool {
	if v, ok := leafCache.Load(t); ok {
		return v.(bool)
	}
	pt := reflect.PointerTo(t)
	leaf := pt.Implements(unmarshalerType) || pt.Implements(textUnmarshalerType)
	leafCache.Store(t, leaf)
	return leaf
}

// structFields is the JSON view of one struct type, as encoding/json sees
// it, plus the Kubernetes-only field names of known.go.
type structFields struct {
	fields []structField
	exact  map[string]int
	known  map[string]struct{}
}

type structField struct {
	name string
	typ  reflect.Type
}

// lookup finds the field a JSON key decodes into. Only the exact name
// does: Kubernetes' strict decoding refuses `nodeselector` for
// nodeSelector, where encoding/json would take it.
func (sf *structFields) lookup(key string) *structField {
	if i, ok := sf.exact[key]; ok {
		return &sf.fields[i]
	}
	return nil
}

// suggest names a close field for a typo, if there is one.
func (sf *structFields) suggest(key string) string {
	for _, f := range sf.fields {
		if strings.EqualFold(f.name, key) {
			return fmt.Sprintf("did you mean %q?", f.name)
		}
	}
	best, bestD := "", 3
	try := func(name string) {
		if d := editDistance(key, name); d < bestD && d < len(name)/2+1 {
			best, bestD = name, d
		}
	}
	for _, f := range sf.fields {
		try(f.name)
	}
	for k := range sf.known {
		try(k)
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf("did you mean %q?", best)
}

func fieldsOf(t reflect.Type) *structFields {
	if v, ok := fieldCache.Load(t); ok {
		return v.(*structFields)
	}
	sf := &structFields{exact: map[string]int{}, known: map[string]struct{}{}}
	collectFields(t, sf)
	for _, k := range kubernetesOnlyFields[t] {
		sf.known[k] = struct{}{}
	}
	v, _ := fieldCache.LoadOrStore(t, sf)
	return v.(*structFields)
}

// collectFields follows encoding/json's rules for our types: named fields
// first, then the fields of untagged embedded structs, which lose to a
// field of the same name nearer the top.
func collectFields(t reflect.Type, sf *structFields) {
	var embedded []reflect.Type
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				embedded = append(embedded, ft)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if _, dup := sf.exact[name]; dup {
			continue
		}
		sf.exact[name] = len(sf.fields)
		sf.fields = append(sf.fields, structField{name: name, typ: f.Type})
	}
	for _, et := range embedded {
		collectFields(et, sf)
	}
}

// editDistance is the Levenshtein distance of two short strings.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 64
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// peekTypeMeta finds the top-level apiVersion and kind of a JSON object in
// one pass, without decoding it. It gives up (ok false) on anything unusual
// (escapes, values that are not plain strings, malformed input) and leaves
// those to encoding/json, so it never disagrees with it.
func peekTypeMeta(data []byte) (tm TypeMeta, ok bool) {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return tm, false
	}
	i++
	for {
		i = skipSpace(data, i)
		if i >= len(data) {
			return tm, false
		}
		if data[i] == '}' {
			return tm, checkTrailing(data, i+1) == nil
		}
		key, next, ok := plainString(data, i)
		if !ok {
			return tm, false
		}
		isKind := string(key) == "kind"
		isVersion := string(key) == "apiVersion"
		i = skipSpace(data, next)
		if i >= len(data) || data[i] != ':' {
			return tm, false
		}
		i = skipSpace(data, i+1)
		if isKind || isVersion {
			v, next, ok := plainString(data, i)
			if !ok {
				return tm, false
			}
			if isKind {
				tm.Kind = internTypeName(v)
			} else {
				tm.APIVersion = internTypeName(v)
			}
			i = next
		} else if i, ok = skipValue(data, i); !ok {
			return tm, false
		}
		i = skipSpace(data, i)
		if i >= len(data) {
			return tm, false
		}
		switch data[i] {
		case ',':
			i++
		case '}':
		default:
			return tm, false
		}
	}
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// plainString finds a JSON string without escapes, control characters or
// non-ASCII bytes at data[i] and returns its content.
func plainString(data []byte, i int) ([]byte, int, bool) {
	if i >= len(data) || data[i] != '"' {
		return nil, i, false
	}
	for j := i + 1; j < len(data); j++ {
		switch c := data[j]; {
		case c == '"':
			return data[i+1 : j], j + 1, true
		case c == '\\' || c < 0x20 || c >= 0x80:
			return nil, i, false
		}
	}
	return nil, i, false
}

// typeNames holds the kinds and API versions of the Resource table, so that
// reading them from a body does not allocate.
var typeNames = func() map[string]string {
	m := make(map[string]string)
	for _, r := range Resources {
		m[r.Kind] = r.Kind
		m[r.APIVersion()] = r.APIVersion()
	}
	return m
}()

func internTypeName(b []byte) string {
	if s, ok := typeNames[string(b)]; ok {
		return s
	}
	return string(b)
}

// skipValue passes over one JSON value at data[i] by counting brackets
// outside strings. It does not check the value; the decoder does that.
func skipValue(data []byte, i int) (int, bool) {
	depth := 0
	for i < len(data) {
		switch data[i] {
		case '"':
			i++
			for i < len(data) && data[i] != '"' {
				if data[i] == '\\' {
					i++
				}
				i++
			}
			if i >= len(data) {
				return i, false
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i, true
			}
			depth--
		case ',':
			if depth == 0 {
				return i, true
			}
		}
		i++
		if depth == 0 && i < len(data) && (data[i] == ',' || data[i] == '}') {
			return i, true
		}
	}
	return i, false
}

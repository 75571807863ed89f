package api

import (
	"strconv"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// The generated decoder (zz_generated_decode.go, from encode_gen_test.go)
// reads the JSON the generated encoder and ordinary clients write, several
// times faster than the reflective engine, and gives up on anything else:
// a name not spelled exactly as the type's, one given twice, null where
// the encoder never writes it, a number that is not a plain integer in
// range, invalid UTF-8, a lone surrogate. Given up, the object is reset
// and the engine decodes it again and decides, with the errors it always
// gave. So it only ever returns what the engine would, faster.

// decodeRoot decodes data into o, which must be zero, with dec; on
// anything but a whole value read, o is zeroed again.
func decodeRoot[T any](data []byte, o *T, isZero func(*T) bool, dec func(*fastDec, *T) bool) bool {
	if o == nil || !isZero(o) {
		return false
	}
	// Pooled, with its string cache: one on the stack would escape
	// through dec all the same.
	d := fastDecs.Get().(*fastDec)
	d.data, d.i = data, 0
	ok := dec(d, o) && d.end()
	d.data = nil
	fastDecs.Put(d)
	if !ok {
		var zero T
		*o = zero
	}
	return ok
}

// fastDec reads JSON from data; i is where it stands.
type fastDec struct {
	data []byte
	i    int
	strs stringCache
}

var fastDecs = sync.Pool{New: func() any { return new(fastDec) }}

// stringCache hands out the short strings it saw last instead of new
// copies: a pod holds a dozen (policies, the scheduler's name, label
// keys and values) that every other pod holds too, as the engine's own
// cache does.
type stringCache [256]string

// str returns b as a string, the cached one if it is the same.
func (c *stringCache) str(b []byte) string {
	if len(b) == 0 || len(b) > 16 {
		return string(b)
	}
	h := uint32(2166136261)
	for _, x := range b {
		h = (h ^ uint32(x)) * 16777619
	}
	slot := &c[h%uint32(len(c))]
	if *slot == string(b) {
		return *slot
	}
	*slot = string(b)
	return *slot
}

// ws skips whitespace and returns the next byte, 0 at the end.
func (d *fastDec) ws() byte {
	for d.i < len(d.data) {
		switch c := d.data[d.i]; c {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return c
		}
	}
	return 0
}

// end reports whether only whitespace is left.
func (d *fastDec) end() bool { return d.ws() == 0 && d.i == len(d.data) }

// consume skips whitespace and c, reporting whether c was next.
func (d *fastDec) consume(c byte) bool {
	if d.ws() != c {
		return false
	}
	d.i++
	return true
}

// literal consumes lit (null, true, false) if it is next.
func (d *fastDec) literal(lit string) bool {
	if d.ws() == lit[0] && len(d.data)-d.i >= len(lit) && string(d.data[d.i:d.i+len(lit)]) == lit {
		d.i += len(lit)
		return true
	}
	return false
}

// null consumes a null if it is next.
func (d *fastDec) null() bool { return d.literal("null") }

// more reads what follows a member or element: true after a comma,
// false at close (consumed); ok false on anything else.
func (d *fastDec) more(close byte) (more, ok bool) {
	switch d.ws() {
	case ',':
		d.i++
		return true, true
	case close:
		d.i++
		return false, true
	}
	return false, false
}

// quoted reads a string without escapes or control characters and
// returns it with its quotes.
func (d *fastDec) quoted() ([]byte, bool) {
	if d.ws() != '"' {
		return nil, false
	}
	for j := d.i + 1; j < len(d.data); j++ {
		switch c := d.data[j]; {
		case c == '"':
			q := d.data[d.i : j+1]
			d.i = j + 1
			return q, true
		case c == '\\' || c < 0x20:
			return nil, false
		}
	}
	return nil, false
}

// name reads a member name and its colon. Names with escapes are left
// to the engine.
func (d *fastDec) name() ([]byte, bool) {
	q, ok := d.quoted()
	if !ok {
		return nil, false
	}
	return q[1 : len(q)-1], d.consume(':')
}

// str reads a string.
func (d *fastDec) str() (string, bool) {
	if d.ws() != '"' {
		return "", false
	}
	start := d.i + 1
	ascii := true
	for j := start; j < len(d.data); j++ {
		c := d.data[j]
		if plain[c] {
			continue
		}
		switch {
		case c == '"':
			raw := d.data[start:j]
			if !ascii && !utf8.Valid(raw) {
				return "", false
			}
			d.i = j + 1
			return d.strs.str(raw), true
		case c == '\\':
			return d.escaped(start)
		case c < 0x20:
			return "", false
		default:
			ascii = false
		}
	}
	return "", false
}

// plain marks the bytes a string holds as they are: ASCII but for the
// quote, the backslash and control characters.
var plain = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// escaped reads a string with escapes from start, just after its quote.
func (d *fastDec) escaped(start int) (string, bool) {
	out := make([]byte, 0, 64)
	j := start
	for j < len(d.data) {
		c := d.data[j]
		switch {
		case c == '"':
			if !utf8.Valid(out) {
				return "", false
			}
			d.i = j + 1
			return string(out), true
		case c < 0x20:
			return "", false
		case c != '\\':
			out = append(out, c)
			j++
			continue
		}
		if j+1 >= len(d.data) {
			return "", false
		}
		switch e := d.data[j+1]; e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := d.hex4(j + 2)
			if !ok {
				return "", false
			}
			j += 6
			if utf16.IsSurrogate(r) {
				// Only a proper pair; a lone half is the engine's.
				r2, ok := d.hex4(j + 2)
				if !ok || d.data[j] != '\\' || d.data[j+1] != 'u' {
					return "", false
				}
				r = utf16.DecodeRune(r, r2)
				if r == utf8.RuneError {
					return "", false
				}
				j += 6
			}
			out = utf8.AppendRune(out, r)
			continue
		default:
			return "", false
		}
		j += 2
	}
	return "", false
}

// hex4 reads the four hex digits at j.
func (d *fastDec) hex4(j int) (rune, bool) {
	if j+4 > len(d.data) {
		return 0, false
	}
	var r rune
	for _, c := range d.data[j : j+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// boolean reads true or false.
func (d *fastDec) boolean() (bool, bool) {
	if d.literal("true") {
		return true, true
	}
	return false, d.literal("false")
}

// integer reads a JSON number that is a plain integer: no fraction, no
// exponent, no leading zero; the digits are returned for strconv.
func (d *fastDec) integer() ([]byte, bool) {
	d.ws()
	start := d.i
	j := start
	if j < len(d.data) && d.data[j] == '-' {
		j++
	}
	digits := j
	for j < len(d.data) && '0' <= d.data[j] && d.data[j] <= '9' {
		j++
	}
	if j == digits || (d.data[digits] == '0' && j-digits > 1) {
		return nil, false
	}
	if j < len(d.data) {
		if c := d.data[j]; c == '.' || c == 'e' || c == 'E' {
			return nil, false
		}
	}
	d.i = j
	return d.data[start:j], true
}

func (d *fastDec) int(bits int) (int64, bool) {
	raw, ok := d.integer()
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(string(raw), 10, bits)
	return n, err == nil
}

func (d *fastDec) uint(bits int) (uint64, bool) {
	raw, ok := d.integer()
	if !ok || raw[0] == '-' {
		return 0, false
	}
	n, err := strconv.ParseUint(string(raw), 10, bits)
	return n, err == nil
}

// scalar returns the raw bytes of the next string (quotes included, no
// escapes, ASCII only) or plain number, for a type's UnmarshalJSON: what
// the engine would hand it. Anything else is the engine's.
func (d *fastDec) scalar() ([]byte, bool) {
	switch c := d.ws(); {
	case c == '"':
		q, ok := d.quoted()
		for _, c := range q {
			if c >= utf8.RuneSelf {
				return nil, false
			}
		}
		return q, ok
	case c == '-' || '0' <= c && c <= '9':
		return d.integer()
	}
	return nil, false
}

// decodeString and the like read the next value into *p, of whichever
// type of that kind.
func decodeString[T ~string](d *fastDec, p *T) bool {
	s, ok := d.str()
	*p = T(s)
	return ok
}

func decodeBool[T ~bool](d *fastDec, p *T) bool {
	b, ok := d.boolean()
	*p = T(b)
	return ok
}

func decodeInt[T ~int | ~int8 | ~int16 | ~int32 | ~int64](d *fastDec, p *T, bits int) bool {
	n, ok := d.int(bits)
	*p = T(n)
	return ok
}

func decodeUint[T ~uint | ~uint16 | ~uint32 | ~uint64](d *fastDec, p *T, bits int) bool {
	n, ok := d.uint(bits)
	*p = T(n)
	return ok
}

// decodeTime and decodeQuantity hand the next string or number to the
// type's UnmarshalJSON, as the engine does.
func decodeTime(d *fastDec, p *Time) bool {
	raw, ok := d.scalar()
	return ok && p.UnmarshalJSON(raw) == nil
}

func decodeQuantity(d *fastDec, p *Quantity) bool {
	raw, ok := d.scalar()
	return ok && p.UnmarshalJSON(raw) == nil
}

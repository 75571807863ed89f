package api

import (
	"bytes"
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// Quantity is a resource amount as Kubernetes writes it ("100m", "500Mi",
// "4", "1e3"). It keeps the text it was given so that objects round-trip,
// and its value in thousandths so that the scheduler can add and compare
// without parsing again.
type Quantity struct {
	s     string
	milli int64
}

// ParseQuantity parses s. Values that do not fit in int64 thousandths are
// refused rather than silently rounded.
func ParseQuantity(s string) (Quantity, error) {
	m, err := parseMilli(s)
	if err != nil {
		return Quantity{}, err
	}
	return Quantity{s: s, milli: m}, nil
}

// MustParseQuantity is ParseQuantity for constants in code and tests.
func MustParseQuantity(s string) Quantity {
	q, err := ParseQuantity(s)
	if err != nil {
		panic(fmt.Sprintf("api.MustParseQuantity(%q): %v", s, err))
	}
	return q
}

// NewMilliQuantity makes a quantity of m thousandths, written in the
// shortest exact form.
func NewMilliQuantity(m int64) Quantity {
	if m%1000 == 0 {
		return Quantity{s: strconv.FormatInt(m/1000, 10), milli: m}
	}
	return Quantity{s: strconv.FormatInt(m, 10) + "m", milli: m}
}

// NewQuantity makes a quantity of v whole units.
func NewQuantity(v int64) Quantity { return NewMilliQuantity(v * 1000) }

// MilliValue is the amount in thousandths (CPU in millicores).
func (q Quantity) MilliValue() int64 { return q.milli }

// Value is the amount in whole units, rounded up as Kubernetes does.
func (q Quantity) Value() int64 {
	if q.milli >= 0 {
		return (q.milli + 999) / 1000
	}
	return q.milli / 1000
}

// IsZero reports whether the quantity is zero.
func (q Quantity) IsZero() bool { return q.milli == 0 }

// String returns the quantity as it was written.
func (q Quantity) String() string {
	if q.s == "" {
		return "0"
	}
	return q.s
}

// MarshalJSON writes the quantity as a JSON string.
func (q Quantity) MarshalJSON() ([]byte, error) {
	return strconv.AppendQuote(nil, q.String()), nil
}

// MarshalJSONTo writes what MarshalJSON does without a buffer of its
// own (see Time.MarshalJSONTo).
func (q Quantity) MarshalJSONTo(enc *jsontext.Encoder) error {
	return enc.WriteToken(jsontext.String(q.String()))
}

// UnmarshalJSON reads a quantity from a JSON string or number.
func (q *Quantity) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*q = Quantity{}
		return nil
	}
	var s string
	switch {
	case len(b) >= 2 && b[0] == '"' && b[len(b)-1] == '"' && bytes.IndexByte(b, '\\') < 0:
		s = string(b[1 : len(b)-1]) // the common case: one copy, kept as the text
	case len(b) >= 2 && b[0] == '"':
		uq, err := strconv.Unquote(string(b))
		if err != nil {
			return ErrQuantity
		}
		s = uq
	default:
		s = string(b)
	}
	pq, err := ParseQuantity(strings.TrimSpace(s))
	if err != nil {
		return err
	}
	*q = pq
	return nil
}

var suffixes = map[string]*big.Rat{
	"":   big.NewRat(1, 1),
	"n":  big.NewRat(1, 1_000_000_000),
	"u":  big.NewRat(1, 1_000_000),
	"m":  big.NewRat(1, 1000),
	"k":  big.NewRat(1000, 1),
	"M":  big.NewRat(1_000_000, 1),
	"G":  big.NewRat(1_000_000_000, 1),
	"T":  new(big.Rat).SetInt64(1_000_000_000_000),
	"P":  new(big.Rat).SetInt64(1_000_000_000_000_000),
	"E":  new(big.Rat).SetInt64(1_000_000_000_000_000_000),
	"Ki": new(big.Rat).SetInt64(1 << 10),
	"Mi": new(big.Rat).SetInt64(1 << 20),
	"Gi": new(big.Rat).SetInt64(1 << 30),
	"Ti": new(big.Rat).SetInt64(1 << 40),
	"Pi": new(big.Rat).SetInt64(1 << 50),
	"Ei": new(big.Rat).SetInt64(1 << 60),
}

func parseMilli(s string) (int64, error) {
	if m, ok := parseMilliFast(s); ok {
		return m, nil
	}
	return parseMilliExact(s)
}

// milliMultipliers are the suffixes whose value in thousandths fits int64,
// for parseMilliFast.
var milliMultipliers = map[string]uint64{
	"": 1000, "m": 1, "k": 1_000_000, "M": 1_000_000_000, "G": 1_000_000_000_000,
	"T": 1_000_000_000_000_000, "P": 1_000_000_000_000_000_000,
	"Ki": 1 << 10 * 1000, "Mi": 1 << 20 * 1000, "Gi": 1 << 30 * 1000,
	"Ti": 1 << 40 * 1000, "Pi": 1 << 50 * 1000,
}

// parseMilliFast parses the common forms ("250m", "1.5Gi", "4") with
// integer arithmetic, without allocating, and rounds up as parseMilliExact
// does. It gives up (ok false) on exponents, the n, u, E and Ei suffixes,
// long numbers and anything that could overflow; parseMilliExact then
// decides.
func parseMilliFast(s string) (int64, bool) {
	i := 0
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	var whole, frac, fracScale uint64 = 0, 0, 1
	start := i
	for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		if i-start >= 18 {
			return 0, false
		}
		whole = whole*10 + uint64(s[i]-'0')
	}
	digits := i - start
	if i < len(s) && s[i] == '.' {
		i++
		fs := i
		for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			if i-fs >= 9 {
				return 0, false
			}
			frac = frac*10 + uint64(s[i]-'0')
			fracScale *= 10
		}
		digits += i - fs
	}
	if digits == 0 {
		return 0, false
	}
	mult, ok := milliMultipliers[s[i:]]
	if !ok {
		return 0, false
	}
	hi, m := bits.Mul64(whole, mult)
	if hi != 0 || m > math.MaxInt64 {
		return 0, false
	}
	// frac < fracScale ≤ 1e9 and mult ≤ 1e18 could overflow: split.
	fhi, fm := bits.Mul64(frac, mult)
	if fhi >= fracScale {
		return 0, false
	}
	fq, rem := bits.Div64(fhi, fm, fracScale)
	m += fq
	if !neg && rem != 0 {
		m++ // round up to whole thousandths
	}
	if m > math.MaxInt64 {
		return 0, false
	}
	if neg {
		return -int64(m), true
	}
	return int64(m), true
}

// parseMilliExact parses any quantity with exact rational arithmetic.
func parseMilliExact(s string) (int64, error) {
	if s == "" || len(s) > 64 {
		return 0, ErrQuantity
	}
	// Split the number from its suffix: digits, sign and one dot first.
	i := 0
	if s[0] == '+' || s[0] == '-' {
		i++
	}
	start := i
	dots := 0
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
		if s[i] == '.' {
			dots++
		}
		i++
	}
	num, suf := s[:i], s[i:]
	if i == start || dots > 1 || num[len(num)-1] == '.' && i-start == 1 {
		return 0, ErrQuantity
	}
	r, ok := new(big.Rat).SetString(num)
	if !ok {
		return 0, ErrQuantity
	}
	if mult, ok := suffixes[suf]; ok {
		r.Mul(r, mult)
	} else if suf[0] == 'e' || suf[0] == 'E' {
		exp, err := strconv.Atoi(suf[1:])
		if err != nil || exp > 30 || exp < -30 {
			return 0, ErrQuantity
		}
		p := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(abs(exp))), nil)
		pr := new(big.Rat).SetInt(p)
		if exp < 0 {
			pr.Inv(pr)
		}
		r.Mul(r, pr)
	} else {
		return 0, ErrQuantity
	}
	r.Mul(r, big.NewRat(1000, 1))
	// Round up to whole thousandths, as Kubernetes rounds up sub-milli CPU.
	n := new(big.Int).Quo(r.Num(), r.Denom())
	if new(big.Rat).SetInt(n).Cmp(r) < 0 {
		n.Add(n, big.NewInt(1))
	}
	if !n.IsInt64() || n.Int64() == math.MinInt64 {
		return 0, fmt.Errorf("quantity %q is too large", s)
	}
	return n.Int64(), nil
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// ResourceList maps a resource name ("cpu", "memory", "pods", ...) to an amount.
type ResourceList map[string]Quantity

// Well-known resource names.
const (
	ResourceCPU              = "cpu"
	ResourceMemory           = "memory"
	ResourcePods             = "pods"
	ResourceEphemeralStorage = "ephemeral-storage"
)

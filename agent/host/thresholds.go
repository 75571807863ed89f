package host

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// Signal is an eviction signal, named as the kubelet names it.
type Signal string

// The signals the agent observes.
const (
	SignalMemoryAvailable   Signal = "memory.available"
	SignalNodeFSAvailable   Signal = "nodefs.available"
	SignalNodeFSInodesFree  Signal = "nodefs.inodesFree"
	SignalImageFSAvailable  Signal = "imagefs.available"
	SignalImageFSInodesFree Signal = "imagefs.inodesFree"
	SignalPIDAvailable      Signal = "pid.available"
)

// signals is the known set, in the order messages list them.
var signals = []Signal{
	SignalMemoryAvailable,
	SignalNodeFSAvailable, SignalNodeFSInodesFree,
	SignalImageFSAvailable, SignalImageFSInodesFree,
	SignalPIDAvailable,
}

func knownSignal(s Signal) bool {
	for _, k := range signals {
		if k == s {
			return true
		}
	}
	return false
}

// Threshold is one hard eviction threshold, "SIGNAL<VALUE": the signal is
// crossed while the observed amount is below the limit.
type Threshold struct {
	Signal Signal
	// Quantity is the limit as an amount (bytes for *.available, a count
	// for inodesFree and pid.available); it is used when Percent is false.
	Quantity api.Quantity
	// Percentage is the limit as a share of the total, 0 to 100; it is
	// used when Percent is true.
	Percentage float64
	Percent    bool
}

// DefaultThresholds returns the kubelet's hard eviction defaults on Linux:
// memory.available<100Mi, nodefs.available<10%, nodefs.inodesFree<5%,
// imagefs.available<15%. A new slice each call, so callers may change it.
func DefaultThresholds() []Threshold {
	return []Threshold{
		{Signal: SignalMemoryAvailable, Quantity: api.MustParseQuantity("100Mi")},
		{Signal: SignalNodeFSAvailable, Percentage: 10, Percent: true},
		{Signal: SignalNodeFSInodesFree, Percentage: 5, Percent: true},
		{Signal: SignalImageFSAvailable, Percentage: 15, Percent: true},
	}
}

// String writes the threshold as ParseThresholds reads it.
func (t Threshold) String() string {
	return string(t.Signal) + "<" + t.valueString()
}

func (t Threshold) valueString() string {
	if t.Percent {
		return strconv.FormatFloat(t.Percentage, 'f', -1, 64) + "%"
	}
	return t.Quantity.String()
}

// Limit is the threshold in the signal's unit for a resource of the given
// total: the quantity, or the percentage of total (truncated, as the
// kubelet computes it).
func (t Threshold) Limit(total int64) int64 {
	if t.Percent {
		v := float64(total) * t.Percentage / 100
		if v >= math.MaxInt64 {
			return math.MaxInt64
		}
		return int64(v)
	}
	return t.Quantity.Value()
}

// FormatThresholds writes thresholds as one setting, comma separated.
func FormatThresholds(ts []Threshold) string {
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = t.String()
	}
	return strings.Join(parts, ",")
}

// ParseThresholds reads hard eviction thresholds in the kubelet's syntax:
// comma-separated "SIGNAL<VALUE" items, VALUE a quantity ("100Mi", "1k")
// or a percentage ("10%"). An empty spec is no thresholds. Every bad item
// is reported, each with its position and reason, in one error wrapping
// ErrThreshold.
func ParseThresholds(spec string) ([]Threshold, error) {
	if strings.TrimSpace(spec) == "" {
		return nil, nil
	}
	var (
		out      []Threshold
		problems []string
		seen     = map[Signal]bool{}
	)
	for i, item := range strings.Split(spec, ",") {
		t, err := parseThreshold(strings.TrimSpace(item))
		if err == nil && seen[t.Signal] {
			err = fmt.Errorf("duplicate signal %q", t.Signal)
		}
		if err != nil {
			problems = append(problems, fmt.Sprintf("item %d %q: %v", i+1, strings.TrimSpace(item), err))
			continue
		}
		seen[t.Signal] = true
		out = append(out, t)
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%w: %s", ErrThreshold, strings.Join(problems, "; "))
	}
	return out, nil
}

// parseThreshold reads one trimmed item; its errors are reasons only, the
// caller adds the item.
func parseThreshold(item string) (Threshold, error) {
	if item == "" {
		return Threshold{}, fmt.Errorf("empty item")
	}
	op := strings.IndexAny(item, "<>=!")
	if op < 0 {
		return Threshold{}, fmt.Errorf("no operator: want SIGNAL<VALUE")
	}
	sig := Signal(strings.TrimSpace(item[:op]))
	rest := item[op:]
	if !strings.HasPrefix(rest, "<") || strings.HasPrefix(rest, "<=") {
		end := 1
		if len(rest) > 1 && strings.ContainsRune("<>=!", rune(rest[1])) {
			end = 2
		}
		return Threshold{}, fmt.Errorf("operator %q is not supported, only <", rest[:end])
	}
	if sig == "" {
		return Threshold{}, fmt.Errorf("missing signal")
	}
	if !knownSignal(sig) {
		return Threshold{}, fmt.Errorf("unknown signal %q (known: %s)", sig, signalList())
	}
	val := strings.TrimSpace(rest[1:])
	if val == "" {
		return Threshold{}, fmt.Errorf("missing value")
	}
	t := Threshold{Signal: sig}
	if p, ok := strings.CutSuffix(val, "%"); ok {
		f, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil {
			return Threshold{}, fmt.Errorf("percentage %q is not a number", val)
		}
		if !(f >= 0 && f <= 100) { // also refuses NaN
			return Threshold{}, fmt.Errorf("percentage must be 0-100%%, not %s", val)
		}
		t.Percentage, t.Percent = f, true
		return t, nil
	}
	q, err := api.ParseQuantity(val)
	if err != nil {
		return Threshold{}, fmt.Errorf("value %q is neither a quantity nor a percentage: %w", val, err)
	}
	if q.MilliValue() < 0 {
		return Threshold{}, fmt.Errorf("value %s must not be negative", val)
	}
	t.Quantity = q
	return t, nil
}

func signalList() string {
	s := make([]string, len(signals))
	for i, k := range signals {
		s[i] = string(k)
	}
	return strings.Join(s, ", ")
}

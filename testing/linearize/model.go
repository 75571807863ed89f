package linearize

import (
	"fmt"
	"sort"
	"strconv"

	"github.com/anishathalye/porcupine"
)

// Op kinds.
const (
	OpCreate = "create"
	OpUpdate = "update"
	OpRead   = "read"
	OpDelete = "delete"
)

// Result kinds.
const (
	ResOK       = "ok"
	ResExists   = "exists"
	ResConflict = "conflict"
	ResNotFound = "notfound"
	// ResUnknown is an operation whose effect is not known: it may have
	// been applied or not.
	ResUnknown = "unknown"
)

// Input is one client request.
type Input struct {
	Kind     string
	Key      string
	Value    string
	ExpectRV string // update precondition
}

// Output is what the client learned.
type Output struct {
	Result string
	Value  string // read
	RV     string // the version written or read
	// Cause says why a result is ResUnknown (CauseServer504 or
	// CauseClientGaveUp); the model does not look at it.
	Cause string
}

// unknownRV stands for a version the model has not observed yet: an
// update of unknown outcome was applied, so the real version exists but
// nobody has read it.
const unknownRV = "?"

// register is one key's state. When rv is unknownRV the real version is
// still bounded from below: resource versions are raft indexes, so a write
// that took effect after the key was last at version v (or was deleted
// after it) committed at an index above v. Without that bound an update
// that ignored its precondition passed the check whenever an earlier write
// of the key had an unknown outcome.
type register struct {
	exists bool
	value  string
	rv     string
	low    uint64 // every version this key may have next is above low
}

// version is the number in a resource version; 0 for one that is not a
// number (which no server hands out).
func version(rv string) uint64 {
	n, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// written is the state after a write of value took effect at version rv
// (unknownRV when nobody learned it).
func (s register) written(value, rv string) register {
	low := s.low
	if rv != unknownRV {
		low = version(rv)
	}
	return register{exists: true, value: value, rv: rv, low: low}
}

// deleted is the state after a delete took effect: the key is gone and a
// later create commits above the last version it had.
func (s register) deleted() register { return register{low: s.low} }

// rvMatches reports whether a precondition on version want may hold: the
// known version equals it, or the unknown one could, being above the
// bound.
func (s register) rvMatches(want string) bool {
	if s.rv == unknownRV {
		return version(want) > s.low
	}
	return s.rv == want
}

// Model is the porcupine model of outpost's object store seen through the
// API, partitioned by key.
func Model() porcupine.Model {
	nd := porcupine.NondeterministicModel{
		Partition: partitionByKey,
		Init:      func() []interface{} { return []interface{}{register{}} },
		Step:      step,
		Equal:     func(a, b interface{}) bool { return a.(register) == b.(register) },
		DescribeOperation: func(in, out interface{}) string {
			i, o := in.(Input), out.(Output)
			switch i.Kind {
			case OpCreate:
				return fmt.Sprintf("create(%s=%s) -> %s %s", i.Key, i.Value, o.Result, o.RV)
			case OpUpdate:
				return fmt.Sprintf("update(%s=%s if rv=%s) -> %s %s", i.Key, i.Value, i.ExpectRV, o.Result, o.RV)
			case OpDelete:
				return fmt.Sprintf("delete(%s if rv=%s) -> %s", i.Key, i.ExpectRV, o.Result)
			}
			return fmt.Sprintf("read(%s) -> %s %s@%s", i.Key, o.Result, o.Value, o.RV)
		},
		DescribeState: func(s interface{}) string {
			r := s.(register)
			if !r.exists {
				return "absent"
			}
			return fmt.Sprintf("%s@%s", r.value, r.rv)
		},
	}
	return nd.ToModel()
}

func step(state, input, output interface{}) []interface{} {
	s, in, out := state.(register), input.(Input), output.(Output)
	switch in.Kind {
	case OpCreate:
		switch out.Result {
		case ResOK:
			if !s.exists && version(out.RV) > s.low {
				return []interface{}{s.written(in.Value, out.RV)}
			}
		case ResExists:
			if s.exists {
				return []interface{}{s}
			}
		case ResUnknown:
			if s.exists {
				return []interface{}{s}
			}
			return []interface{}{s, s.written(in.Value, unknownRV)}
		}
	case OpUpdate:
		switch out.Result {
		case ResOK:
			if s.exists && s.rvMatches(in.ExpectRV) && version(out.RV) > s.low {
				return []interface{}{s.written(in.Value, out.RV)}
			}
		case ResConflict:
			if s.exists && (s.rv != in.ExpectRV || s.rv == unknownRV) {
				return []interface{}{s}
			}
		case ResNotFound:
			if !s.exists {
				return []interface{}{s}
			}
		case ResUnknown:
			if s.exists && s.rvMatches(in.ExpectRV) {
				return []interface{}{s, s.written(in.Value, unknownRV)}
			}
			return []interface{}{s}
		}
	case OpDelete:
		switch out.Result {
		case ResOK:
			if s.exists && s.rvMatches(in.ExpectRV) {
				return []interface{}{s.deleted()}
			}
		case ResConflict:
			if s.exists && (s.rv != in.ExpectRV || s.rv == unknownRV) {
				return []interface{}{s}
			}
		case ResNotFound:
			if !s.exists {
				return []interface{}{s}
			}
		case ResUnknown:
			if s.exists && s.rvMatches(in.ExpectRV) {
				return []interface{}{s, s.deleted()}
			}
			return []interface{}{s}
		}
	case OpRead:
		switch out.Result {
		case ResOK:
			if s.exists && s.value == out.Value && (s.rv == out.RV || s.rv == unknownRV && version(out.RV) > s.low) {
				return []interface{}{s.written(s.value, out.RV)}
			}
		case ResNotFound:
			if !s.exists {
				return []interface{}{s}
			}
		}
	}
	return nil
}

func partitionByKey(history []porcupine.Operation) [][]porcupine.Operation {
	by := map[string][]porcupine.Operation{}
	for _, op := range history {
		k := op.Input.(Input).Key
		by[k] = append(by[k], op)
	}
	keys := make([]string, 0, len(by))
	for k := range by {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([][]porcupine.Operation, 0, len(keys))
	for _, k := range keys {
		out = append(out, by[k])
	}
	return out
}

package linearize

import (
	"fmt"
	"sort"

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
}

// unknownRV stands for a version the model has not observed yet: an
// update of unknown outcome was applied, so the real version exists but
// nobody has read it.
const unknownRV = "?"

type register struct {
	exists bool
	value  string
	rv     string
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

func rvMatches(have, want string) bool { return have == want || have == unknownRV }

func step(state, input, output interface{}) []interface{} {
	s, in, out := state.(register), input.(Input), output.(Output)
	switch in.Kind {
	case OpCreate:
		switch out.Result {
		case ResOK:
			if !s.exists {
				return []interface{}{register{true, in.Value, out.RV}}
			}
		case ResExists:
			if s.exists {
				return []interface{}{s}
			}
		case ResUnknown:
			if s.exists {
				return []interface{}{s}
			}
			return []interface{}{s, register{true, in.Value, unknownRV}}
		}
	case OpUpdate:
		switch out.Result {
		case ResOK:
			if s.exists && rvMatches(s.rv, in.ExpectRV) {
				return []interface{}{register{true, in.Value, out.RV}}
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
			if s.exists && rvMatches(s.rv, in.ExpectRV) {
				return []interface{}{s, register{true, in.Value, unknownRV}}
			}
			return []interface{}{s}
		}
	case OpDelete:
		switch out.Result {
		case ResOK:
			if s.exists && rvMatches(s.rv, in.ExpectRV) {
				return []interface{}{register{}}
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
			if s.exists && rvMatches(s.rv, in.ExpectRV) {
				return []interface{}{s, register{}}
			}
			return []interface{}{s}
		}
	case OpRead:
		switch out.Result {
		case ResOK:
			if s.exists && s.value == out.Value && rvMatches(s.rv, out.RV) {
				return []interface{}{register{true, s.value, out.RV}}
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

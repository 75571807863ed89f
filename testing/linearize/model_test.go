package linearize

import (
	"testing"

	"github.com/anishathalye/porcupine"
)

// The model must reject the histories a broken store would produce, or the
// cluster test proves nothing.
func TestModelRejectsViolations(t *testing.T) {
	op := func(c int, call, ret int64, in Input, out Output) porcupine.Operation {
		return porcupine.Operation{ClientId: c, Call: call, Return: ret, Input: in, Output: out}
	}
	cases := []struct {
		name string
		ops  []porcupine.Operation
		ok   bool
	}{
		{"create then read", []porcupine.Operation{
			op(0, 0, 1, Input{Kind: OpCreate, Key: "a", Value: "1"}, Output{Result: ResOK, RV: "5"}),
			op(1, 2, 3, Input{Kind: OpRead, Key: "a"}, Output{Result: ResOK, Value: "1", RV: "5"}),
		}, true},
		{"stale read after acknowledged update", []porcupine.Operation{
			op(0, 0, 1, Input{Kind: OpCreate, Key: "a", Value: "1"}, Output{Result: ResOK, RV: "5"}),
			op(0, 2, 3, Input{Kind: OpUpdate, Key: "a", Value: "2", ExpectRV: "5"}, Output{Result: ResOK, RV: "7"}),
			op(1, 4, 5, Input{Kind: OpRead, Key: "a"}, Output{Result: ResOK, Value: "1", RV: "5"}),
		}, false},
		{"lost acknowledged create", []porcupine.Operation{
			op(0, 0, 1, Input{Kind: OpCreate, Key: "a", Value: "1"}, Output{Result: ResOK, RV: "5"}),
			op(1, 2, 3, Input{Kind: OpRead, Key: "a"}, Output{Result: ResNotFound}),
		}, false},
		{"two creates both succeed", []porcupine.Operation{
			op(0, 0, 3, Input{Kind: OpCreate, Key: "a", Value: "1"}, Output{Result: ResOK, RV: "5"}),
			op(1, 0, 3, Input{Kind: OpCreate, Key: "a", Value: "2"}, Output{Result: ResOK, RV: "6"}),
		}, false},
		{"two conditional updates from one version both succeed", []porcupine.Operation{
			op(0, 0, 1, Input{Kind: OpCreate, Key: "a", Value: "1"}, Output{Result: ResOK, RV: "5"}),
			op(0, 2, 5, Input{Kind: OpUpdate, Key: "a", Value: "2", ExpectRV: "5"}, Output{Result: ResOK, RV: "7"}),
			op(1, 2, 5, Input{Kind: OpUpdate, Key: "a", Value: "3", ExpectRV: "5"}, Output{Result: ResOK, RV: "8"}),
		}, false},
		{"unknown create may have happened", []porcupine.Operation{
			op(0, 0, 1<<62, Input{Kind: OpCreate, Key: "a", Value: "1"}, Output{Result: ResUnknown}),
			op(1, 2, 3, Input{Kind: OpRead, Key: "a"}, Output{Result: ResOK, Value: "1", RV: "9"}),
			op(1, 4, 5, Input{Kind: OpUpdate, Key: "a", Value: "2", ExpectRV: "9"}, Output{Result: ResOK, RV: "11"}),
		}, true},
		{"unknown create may not have happened", []porcupine.Operation{
			op(0, 0, 1<<62, Input{Kind: OpCreate, Key: "a", Value: "1"}, Output{Result: ResUnknown}),
			op(1, 2, 3, Input{Kind: OpRead, Key: "a"}, Output{Result: ResNotFound}),
		}, true},
		{"read of a deleted object", []porcupine.Operation{
			op(0, 0, 1, Input{Kind: OpCreate, Key: "a", Value: "1"}, Output{Result: ResOK, RV: "5"}),
			op(0, 2, 3, Input{Kind: OpDelete, Key: "a", ExpectRV: "5"}, Output{Result: ResOK}),
			op(1, 4, 5, Input{Kind: OpRead, Key: "a"}, Output{Result: ResOK, Value: "1", RV: "5"}),
		}, false},
		{"delete then create again", []porcupine.Operation{
			op(0, 0, 1, Input{Kind: OpCreate, Key: "a", Value: "1"}, Output{Result: ResOK, RV: "5"}),
			op(0, 2, 3, Input{Kind: OpDelete, Key: "a", ExpectRV: "5"}, Output{Result: ResOK}),
			op(1, 4, 5, Input{Kind: OpCreate, Key: "a", Value: "2"}, Output{Result: ResOK, RV: "8"}),
			op(1, 6, 7, Input{Kind: OpRead, Key: "a"}, Output{Result: ResOK, Value: "2", RV: "8"}),
		}, true},
		// Issue 9 item 6: an unknown write used to make the key match any
		// version, so an update that ignored its precondition passed.
		{"update with a stale precondition after an unknown write", []porcupine.Operation{
			op(0, 0, 1, Input{Kind: OpCreate, Key: "a", Value: "1"}, Output{Result: ResOK, RV: "5"}),
			op(1, 2, 1<<62, Input{Kind: OpUpdate, Key: "a", Value: "2", ExpectRV: "5"}, Output{Result: ResUnknown}),
			op(2, 4, 5, Input{Kind: OpUpdate, Key: "a", Value: "3", ExpectRV: "1"}, Output{Result: ResOK, RV: "9"}),
		}, false},
		{"update on the unknown write's version", []porcupine.Operation{
			op(0, 0, 1, Input{Kind: OpCreate, Key: "a", Value: "1"}, Output{Result: ResOK, RV: "5"}),
			op(1, 2, 1<<62, Input{Kind: OpUpdate, Key: "a", Value: "2", ExpectRV: "5"}, Output{Result: ResUnknown}),
			op(2, 4, 5, Input{Kind: OpUpdate, Key: "a", Value: "3", ExpectRV: "7"}, Output{Result: ResOK, RV: "9"}),
		}, true},
		{"create again below the deleted version", []porcupine.Operation{
			op(0, 0, 1, Input{Kind: OpCreate, Key: "a", Value: "1"}, Output{Result: ResOK, RV: "5"}),
			op(0, 2, 3, Input{Kind: OpDelete, Key: "a", ExpectRV: "5"}, Output{Result: ResOK}),
			op(1, 4, 5, Input{Kind: OpCreate, Key: "a", Value: "2"}, Output{Result: ResOK, RV: "4"}),
		}, false},
		{"conflict although the version matched", []porcupine.Operation{
			op(0, 0, 1, Input{Kind: OpCreate, Key: "a", Value: "1"}, Output{Result: ResOK, RV: "5"}),
			op(0, 2, 3, Input{Kind: OpUpdate, Key: "a", Value: "2", ExpectRV: "5"}, Output{Result: ResConflict}),
		}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := porcupine.CheckOperations(Model(), tc.ops); got != tc.ok {
				t.Fatalf("CheckOperations = %v, want %v", got, tc.ok)
			}
		})
	}
}

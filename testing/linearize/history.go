package linearize

import (
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// History collects operations from concurrent clients.
type History struct {
	mu    sync.Mutex
	start time.Time
	ops   []porcupine.Operation
}

// NewHistory starts an empty history; times are measured from now.
func NewHistory() *History { return &History{start: time.Now()} }

// Call marks the start of an operation; pass the result to Done.
func (h *History) Call() int64 { return int64(time.Since(h.start)) }

// Done records an operation that started at call. An operation whose
// outcome is unknown must be recorded as ending after every other
// operation, because it may take effect at any later time; Done does that
// for ResUnknown.
func (h *History) Done(client int, call int64, in Input, out Output) {
	ret := int64(time.Since(h.start))
	if out.Result == ResUnknown {
		ret = 1 << 62
	}
	h.mu.Lock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
	h.mu.Unlock()
}

// Operations returns a copy of what was recorded.
func (h *History) Operations() []porcupine.Operation {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]porcupine.Operation(nil), h.ops...)
}

// Check runs porcupine over the history; timeout bounds the search.
func (h *History) Check(timeout time.Duration) (porcupine.CheckResult, porcupine.LinearizationInfo) {
	return porcupine.CheckOperationsVerbose(Model(), h.Operations(), timeout)
}

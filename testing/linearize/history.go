package linearize

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
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

// Save writes a failed check's visualization (info, from Check) and the
// recorded operations to the system's temporary directory as name.html
// and name.json, where they outlive the test's own directory, and says
// where, for the failure message.
func (h *History) Save(info porcupine.LinearizationInfo, name string) string {
	name = strings.NewReplacer("/", "-", " ", "-").Replace(name)
	base := filepath.Join(os.TempDir(), name)
	var saved []string
	if err := porcupine.VisualizePath(Model(), info, base+".html"); err == nil {
		saved = append(saved, "visualization in "+base+".html")
	}
	if b, err := json.Marshal(h.Operations()); err == nil && os.WriteFile(base+".json", b, 0o644) == nil {
		saved = append(saved, "history in "+base+".json")
	}
	if len(saved) == 0 {
		return "nothing saved"
	}
	return strings.Join(saved, ", ")
}

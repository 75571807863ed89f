package realtest

import (
	"errors"
	"testing"
)

// recorder is the part of testing.TB that Require uses, recorded.
type recorder struct {
	testing.TB
	failed, skipped string
}

func (r *recorder) Helper()                        {}
func (r *recorder) Fatalf(format string, a ...any) { r.failed = format }
func (r *recorder) Skip(args ...any)               { r.skipped = args[0].(string) }

// With OUTPOST_TEST_REAL=1 a missing part fails the test; without, it
// skips, naming it; nothing missing does neither.
func TestRequire(t *testing.T) {
	t.Setenv("OUTPOST_TEST_REAL", "1")
	r := &recorder{}
	Require(r, "nft is not installed")
	if r.failed == "" || r.skipped != "" {
		t.Errorf("OUTPOST_TEST_REAL=1: failed %q skipped %q, want a failure", r.failed, r.skipped)
	}
	t.Setenv("OUTPOST_TEST_REAL", "")
	r = &recorder{}
	RequireNoError(r, errors.New("not root"))
	if r.failed != "" || r.skipped != "not root (set OUTPOST_TEST_REAL=1 to make this a failure)" {
		t.Errorf("without: failed %q skipped %q, want a skip naming it", r.failed, r.skipped)
	}
	r = &recorder{}
	Require(r)
	RequireNoError(r, nil)
	if r.failed != "" || r.skipped != "" {
		t.Errorf("nothing missing: failed %q skipped %q", r.failed, r.skipped)
	}
}

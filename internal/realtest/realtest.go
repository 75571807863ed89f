package realtest

import (
	"os"
	"strings"
	"testing"
)

// Require ends t, failed or skipped, when missing names anything (each
// a reason, such as "nft is not installed"); with nothing missing it
// returns.
func Require(t testing.TB, missing ...string) {
	t.Helper()
	if len(missing) == 0 {
		return
	}
	why := strings.Join(missing, "; ")
	if os.Getenv("OUTPOST_TEST_REAL") == "1" {
		t.Fatalf("OUTPOST_TEST_REAL=1 but %s", why)
		return
	}
	t.Skip(why + " (set OUTPOST_TEST_REAL=1 to make this a failure)")
}

// RequireNoError is Require of err's message, when err is not nil.
func RequireNoError(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		Require(t, err.Error())
	}
}

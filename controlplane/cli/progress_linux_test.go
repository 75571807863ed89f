package cli

import (
	"os"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/outpost-edge/outpost/internal/realtest"
)

// TestProgressOnPseudoTerminal: the terminal end of a pseudo-terminal is
// taken for one, with its width; $TERM=dumb is not.
func TestProgressOnPseudoTerminal(t *testing.T) {
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	realtest.RequireNoError(t, err)
	defer ptmx.Close()
	if err := unix.IoctlSetPointerInt(int(ptmx.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetUint32(int(ptmx.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	tty, err := os.OpenFile("/dev/pts/"+strconv.Itoa(int(n)), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	if err := unix.IoctlSetWinsize(int(tty.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: 42}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TERM", "xterm")
	p := NewProgress(tty)
	if !p.Terminal() || p.width != 42 {
		t.Errorf("pseudo-terminal: terminal %v width %d, want true 42", p.Terminal(), p.width)
	}
	t.Setenv("TERM", "dumb")
	if NewProgress(tty).Terminal() {
		t.Error("TERM=dumb taken for a terminal that can rewrite a line")
	}
}

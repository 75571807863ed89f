package cli

import (
	"os"

	"golang.org/x/sys/unix"
)

// terminalSize reports whether f is a terminal, and its width in columns
// (0 when unknown). A terminal is what answers the terminal ioctl: a
// character device such as /dev/null is not one.
func terminalSize(f *os.File) (terminal bool, width int) {
	fd := int(f.Fd())
	if _, err := unix.IoctlGetTermios(fd, unix.TCGETS); err != nil {
		return false, 0
	}
	if ws, err := unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ); err == nil {
		width = int(ws.Col)
	}
	return true, width
}

//go:build !linux

package cli

import "os"

// terminalSize reports no terminal where the Linux ioctls are not built:
// progress is then printed as plain lines, which is always readable.
func terminalSize(*os.File) (terminal bool, width int) { return false, 0 }

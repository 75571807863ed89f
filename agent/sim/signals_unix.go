//go:build unix

package sim

import (
	"os"
	"syscall"
)

// silenceSignal and resumeSignal silence and resume every node of a
// running `outpost sim agents`.
var (
	silenceSignal os.Signal = syscall.SIGUSR1
	resumeSignal  os.Signal = syscall.SIGUSR2
)

//go:build !unix

package sim

import "os"

// Without SIGUSR1 and SIGUSR2 only `outpost sim silence` silences nodes.
var (
	silenceSignal os.Signal
	resumeSignal  os.Signal
)

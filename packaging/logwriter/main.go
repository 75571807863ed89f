// Command outpost-logwriter is the log writer containerd's shims run for
// outpost's containers (runtime/containerd/logwriter), alone in a binary
// of the standard library only: one runs beside every running container,
// and on its own it holds about 0.6 MiB of private memory where the whole
// outpost binary re-executed holds about 3.7 MiB. `make build` embeds it
// into outpost (agent/logwriterbin) and the agent installs it in its data
// dir; an outpost built without it uses its own executable.
package main

import (
	"fmt"
	"os"

	"github.com/outpost-edge/outpost/runtime/containerd/logwriter"
)

func main() {
	logwriter.RunIfAsked()
	fmt.Fprintf(os.Stderr, "outpost-logwriter is run by containerd's shim: outpost-logwriter %s FILE\n", logwriter.Arg)
	os.Exit(2)
}

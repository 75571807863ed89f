// Command testlogwriter is a log writer and nothing else, for tests: a
// small binary built without the race detector, so that the per-container
// writer processes of the real-containerd tests start quickly.
package main

import (
	"fmt"
	"os"

	"github.com/outpost-edge/outpost/runtime/containerd/logwriter"
)

func main() {
	logwriter.RunIfAsked()
	fmt.Fprintln(os.Stderr, "usage: testlogwriter", logwriter.Arg, "FILE")
	os.Exit(2)
}

// Package logwriter is the process that writes a container's log file:
// containerd's shim starts it (the "binary://" log driver) with the
// container's stdout and stderr, and it appends one timestamped entry per
// line to the file named on its command line. The outpost binary is the
// log writer by default: its main calls RunIfAsked before anything else.
//
// It depends on the standard library only, so that a process started per
// container stays small, and so that tests can build a writer quickly.
// The file format is described in runtime/containerd's logs.go and
// DESIGN.md.
package logwriter

// Package runtimetest is the contract suite every runtime.Runtime must
// pass: Run drives create, start, exit codes, restarts, stop with grace,
// cgroup limits, host ports, env and args, host-path mounts, logs, exec,
// image errors, start errors, foreign containers and a client restart,
// the same way against runtime/fake and against a real containerd.
//
// The processes it runs come from one test image built at test time:
// the static Go program in testbin/ (CGO_ENABLED=0 go build), packed by
// runtime/ociarchive as TestImageRef. Its first argument picks what it
// does; runtime/fake simulates the same commands.
package runtimetest

// Package proc runs real `outpost server` processes on loopback for the
// crash tests and the cluster benchmarks, and reads their CPU and memory
// from /proc.
package proc

// Command bench runs outpost's cluster benchmarks and writes BENCHMARKS.md:
// real `outpost server` processes on loopback, driven through the real HTTP
// API, with the CPU of every process (and of everything else on the machine)
// measured per level so that a noisy run can be told from a slow one.
//
//	go run ./testing/bench -bin bin/outpost -out BENCHMARKS.md
package main

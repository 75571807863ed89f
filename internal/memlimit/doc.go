// Package memlimit sets the Go runtime's soft memory limit of outpost's
// long-running roles from their --memory-limit flag, GOMEMLIMIT, or the
// memory limit of the cgroup they run in (a systemd unit's MemoryMax or
// MemoryHigh).
//
// Without a soft limit the collector lets the heap grow to twice what is
// live before it collects (GOGC=100), so a server holding 450 MiB of
// objects sits at 900 MiB or more. A unit given MemoryMax=600M would then
// be killed by the kernel long before the runtime tried to stay inside
// it. With the limit the collector works harder as the heap nears it
// instead (issue 16 item 3).
//
// With no limit given or found (auto, no GOMEMLIMIT, no cgroup limit),
// the limit follows the live heap (follow.go): after every collection it
// is set to at least 560 MiB, else to what is live plus a little, so a
// large cluster's server stays near what it holds while a small one's
// collects as it would have without a limit.
package memlimit

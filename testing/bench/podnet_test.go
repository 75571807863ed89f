package main

import (
	"testing"
	"time"
)

// The targets are judged from the run's numbers: the whole nft rewrite
// over 200 ms is not met while the update under it is, and the fan-out's
// p99 is judged alone and with the update added.
func TestPodnetMarkdownTargets(t *testing.T) {
	lines := []string{"BenchmarkApply1000Services-2   10   494000000 ns/op", "BenchmarkSyncOneEndpointChange1000Services-2   10   41000000 ns/op"}
	whole, _ := benchMetric(lines, proxyWholeBench, "ns/op")
	update, _ := benchMetric(lines, proxyUpdateBench, "ns/op")
	p50, ok := benchMetric([]string{"BenchmarkPodNetworkSetup-2   200   63073119 ns/op   18.45 setup-p50-ms   23.31 setup-p99-ms"}, podnetSetupBench, "setup-p50-ms")
	if !ok || p50 != 18.45 {
		t.Fatalf("setup-p50-ms read as %v, %v", p50, ok)
	}
	r := podnetResult{setupP50: 18450 * time.Microsecond, whole: time.Duration(whole), update: time.Duration(update), proxyLines: lines,
		fan: fanoutResult{nodes: 100, trials: 1, onLeader: 34,
			add:    changeTimes{all: durs(20, 30, 950), first: durs(20), last: durs(950), write: durs(5), leader: durs(20), follower: durs(30, 950)},
			remove: changeTimes{all: durs(10, 15, 25), first: durs(10), last: durs(25), write: durs(4), leader: durs(10), follower: durs(15, 25)}}}
	md := podnetMarkdown(r, "cmd", "2 cores", time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC))
	sectionHas(t, md,
		"## Pod networks (issue 14)",
		"`cmd` (run on 2026-11-26 12:00 UTC; machine: 2 cores;",
		"| pod network setup added to a pod's start, p50 | 18.4 ms | ≤ 20 ms | yes |",
		"(the proxy's update) | 41.0 ms | < 200 ms | yes |",
		"once every 50 s) | 494 ms | < 200 ms | **no** |",
		"nodes, p99 | 950 ms | ≤ 1 s | yes |",
		"incremental nft sync | 991 ms | ≤ 1 s | yes |",
		"The full rewrite is still ~0.49 s, the incremental change ~41.0 ms",
		"is met for the sync a change causes, not for the whole rewrite",
		"| pod Ready with its address → a ready endpoint | 3 | 30.0 ms | 950 ms | 950 ms | 20.0 ms | 950 ms / 950 ms | 5.0 ms |",
		"| both | 6 | 25.0 ms | 950 ms | 950 ms |",
		"(34 on the leader, 66 on the followers)",
	)

	// A slower update takes the end-to-end figure over the target; a
	// failed fan-out and a missing benchmark are reported as not met.
	r.update = 60 * time.Millisecond
	sectionHas(t, podnetMarkdown(r, "cmd", "m", time.Now()), "incremental nft sync | 1.01 s | ≤ 1 s | **no** |")
	r.fan.err, r.setupP50, r.setupErr = "the watchers had not all listed", 0, "no result for BenchmarkPodNetworkSetup"
	md = podnetMarkdown(r, "cmd", "m", time.Now())
	sectionHas(t, md,
		"start, p50 | not measured (see below) | ≤ 20 ms | **no** |",
		"nodes, p99 | not measured (see below) | ≤ 1 s | **no** |",
		"**Failed:** the watchers had not all listed",
		"**Failed:** no result for BenchmarkPodNetworkSetup",
	)
}

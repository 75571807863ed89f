package main

import (
	"strings"
	"testing"
	"time"
)

func durs(ms ...int) []time.Duration {
	var out []time.Duration
	for _, m := range ms {
		out = append(out, time.Duration(m)*time.Millisecond)
	}
	return out
}

func TestPct(t *testing.T) {
	d := durs(10, 20, 30, 40)
	for p, want := range map[int]time.Duration{0: 10 * time.Millisecond, 50: 30 * time.Millisecond, 99: 40 * time.Millisecond, 100: 40 * time.Millisecond} {
		if got := pct(d, p); got != want {
			t.Errorf("pct(%d) = %v, want %v", p, got, want)
		}
	}
	if pct(nil, 50) != 0 {
		t.Error("pct of nothing is not 0")
	}
}

// The median run is chosen by p50 among the runs that completed; failed
// runs are left out, and with none completed the reason is given.
func TestMedianRun(t *testing.T) {
	runs := []startRun{
		{name: "a", n: 2, fromCreate: durs(500, 600)},
		{name: "b", n: 2, fromCreate: durs(100, 200)},
		{name: "c", n: 2, fromCreate: durs(900, 999)},
		{name: "broken", n: 2, fromCreate: durs(1), err: "the agent exited"},
	}
	if m, err := medianRun(runs); err != "" || m.name != "a" {
		t.Fatalf("medianRun = %q, %q; want run a", m.name, err)
	}
	if _, err := medianRun(runs[3:]); !strings.Contains(err, "the agent exited") {
		t.Fatalf("medianRun of failed runs: %q, want the failure", err)
	}
}

// A section whose setup failed says so and still reports the binary.
func TestAgentMarkdownSetupFailed(t *testing.T) {
	md := agentMarkdown(agentResult{setupErr: "network namespaces need root", binBytes: 30 << 20, binStripped: true}, "cmd")
	sectionHas(t, md, "## Node agent (issue 4)", "failed: network namespaces need root", "| not run |", "30.0 MiB | ≤ 60 MiB | yes")
}

// Targets are judged as the issue sets them, and one failed measurement
// is reported as failed while the others keep their numbers.
func TestAgentMarkdownTargets(t *testing.T) {
	fast := startRun{name: "run1", n: 3, fromCreate: durs(100, 200, 900), fromBound: durs(90, 190, 890)}
	r := agentResult{
		idle:     memSample{agent: memGroup{n: 1, rss: 31 << 20}},
		loaded:   memSample{pods: 100, agent: memGroup{n: 1, rss: 40 << 20}, shims: memGroup{n: 100}},
		runs:     []startRun{fast},
		detect:   []detection{{after: 4 * time.Second}, {err: "Ready=Unknown not seen within 60 s of the cut"}},
		binBytes: 61 << 20, binStripped: false,
	}
	md := agentMarkdown(r, "cmd")
	sectionHas(t, md,
		"31.0 MiB | ≤ 30 MiB | **no**",
		"40.0 MiB | ≤ 50 MiB | yes",
		"200 ms / 900 ms | < 300 ms / < 1 s | yes / yes",
		"failed (see below) | < 10 s | no",
		"Ready=Unknown not seen within 60 s of the cut",
		"NOT stripped",
		"61.0 MiB | ≤ 60 MiB | **no**",
	)
	// Issue 16's row per OCI runtime: p50 under 1 s, and why crun has no
	// numbers when it has none.
	sectionHas(t, md, "50 at once, runc (issue 16); median of 1 runs: run1 (p50s 200 ms) | 200 ms / 900 ms | p50 < 1 s | yes",
		"50 at once, crun (issue 16) | failed: no run")
	r.crunRuns = []startRun{{name: "crun1", n: 3, fromCreate: durs(900, 1200, 1300)}}
	sectionHas(t, agentMarkdown(r, "cmd"), "50 at once, crun (issue 16); median of 1 runs: crun1 (p50s 1200 ms) | 1200 ms / 1300 ms | p50 < 1 s | **no**",
		"| crun1 (median) | 3 of 3 |")
	r.crunRuns, r.crunErr = nil, "crun is not installed (apt-get install crun)"
	sectionHas(t, agentMarkdown(r, "cmd"), "crun (issue 16) | not run: crun is not installed")
	r.crunErr = ""
	// And at the agent's defaults (a CNI network per pod).
	r.cniRuns = []startRun{{name: "cni1", n: 3, fromCreate: durs(300, 950, 1400)}}
	sectionHas(t, agentMarkdown(r, "cmd"), "50 at once, the agent's defaults (auto's runtime, a CNI network per pod) (issue 16); median of 1 runs: cni1 (p50s 950 ms) | 950 ms / 1400 ms | p50 < 1 s | yes",
		"| cni1 (median) | 3 of 3 |", "*cniN*: the agent restarted at its defaults")
	r.cniRuns, r.cniErr = nil, "nft is not installed"
	sectionHas(t, agentMarkdown(r, "cmd"), "a CNI network per pod) (issue 16) | not run: nft is not installed", "No runs at the agent's defaults: nft is not installed.")
	r.cniErr = ""
	r.deletion = deletion{pods: 100, wall: 2500 * time.Millisecond, cpu: cpuUse{agent: 300 * time.Millisecond, containerd: 700 * time.Millisecond, node: 2 * time.Second}}
	sectionHas(t, agentMarkdown(r, "cmd"), "*Deleting* the 100 pods of the memory table at once", "in 2.5 s; CPU s agent 0.30, containerd 0.70, node total 2.00")
	r.detect = r.detect[:1]
	r.idle.err = "the agent process is gone"
	r.idle.agent = memGroup{}
	md = agentMarkdown(r, "cmd")
	sectionHas(t, md, "4.0 s | < 10 s | yes", "failed: the agent process is gone")
}

// sectionHas fails t for each of wants that the report section md lacks.
func sectionHas(t *testing.T, md string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(md, want) {
			t.Errorf("section lacks %q:\n%s", want, md)
		}
	}
}

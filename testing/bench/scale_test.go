package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// The scale section judges each row against issue 16 item 3's targets:
// p99 under 1 s for the three API operations, RSS at most 600 MiB on
// every server, a new member caught up and ready within 10 s; errors,
// lost events and wrong list counts make a row not met.
func TestScaleMarkdownTargets(t *testing.T) {
	r := scaleResult{
		cfg: scaleConfig{nodes: 200, pods: 6000, duration: 30 * time.Second, load: scaleLoadDirect, watchers: 20, readers: 4},
		cmd: "cmd", register: 3 * time.Second, creates: 2 * time.Second, running: 5 * time.Second, perNode: 30,
		get:        opLat{leader: durs(1, 2, 3), follower: durs(4, 5, 900)},
		list:       opLat{leader: durs(10), follower: durs(20, 1500)},
		watch:      opLat{leader: durs(5), follower: durs(7)},
		watchLost:  1,
		readQPS:    [2]float64{100, 50},
		memLoaded:  []serverMem{{id: "s1", leader: true, rss: 700 << 20, heap: 300 << 20}, {id: "s2", rss: 500 << 20, heapErr: "boom"}},
		memMeasure: []serverMem{{id: "s1", leader: true, rss: 600 << 20, file: 20 << 20}, {id: "s2", rss: 590 << 20}},
		snapBytes:  5 << 20, snapIndex: 9000, joinIndex: 9500,
		joinCaughtUp: 2 * time.Second, joinVoter: 3 * time.Second, joinReady: 11 * time.Second,
	}
	md := scaleMarkdown(r)
	sectionHas(t, md,
		"## Scale: 3 servers, simulated nodes and Running pods (issue 16 item 3)",
		"`cmd`.",
		"created with `spec.nodeName` set (30 a node)",
		"| GET one pod | 4.0 ms | 900 ms | 900 ms | 6 | 0 | 3.0 ms | 900 ms | p99 < 1 s | met |",
		"| LIST pods by node (all namespaces) | 20.0 ms | 1.50 s | 1.50 s | 3 | 0 | 10.0 ms | 1.50 s | p99 < 1 s | **not met** |",
		"| watch: write → event at the node's watch | 7.0 ms | 7.0 ms | 7.0 ms | 2 | 0 + 1 lost |",
		"| server RSS after the load, MiB | s1 (leader) 700, s2 500 | | | | | | | ≤ 600 MiB each | **not met** |",
		"| server RSS after the measurement, MiB | s1 (leader) 600 (file 20), s2 590 | | | | | | | ≤ 600 MiB each | met |",
		"| new member: start → holds the leader's index at its start | 2.00 s | | | | | | | < 10 s | met |",
		"| new member: start → /readyz answers | 11.00 s | | | | | | | < 10 s | **not met** |",
		"s1 300 MiB, s2 not read (boom)",
		"snapshot of 5.0 MiB at index 9000, the leader being at index 9500 when it started (500 entries replayed",
		"Every node stayed Ready",
		"All 6000 pods were still Running",
	)

	r.cfg.load, r.perNodeMin, r.perNodeMax = scaleLoadScheduler, 29, 31
	sectionHas(t, scaleMarkdown(r), "created unbound and bound by the default scheduler (29 to 31 a node)")

	// A failed section says so, and what was not measured is not met.
	md = scaleMarkdown(scaleResult{cfg: r.cfg, cmd: "cmd", err: "nodes did not register", maxNotReady: 2})
	sectionHas(t, md, "**Failed:** nodes did not register", "| GET one pod | not measured | | | 0 | 0 | | | p99 < 1 s | **not met** |")

	// Nodes that went NotReady and pods lost are reported.
	r.maxNotReady, r.notReadySeen, r.maxTainted, r.notRunning, r.deleted = 2, []string{"scale-0001", "scale-0002"}, 1, 30, 3
	sectionHas(t, scaleMarkdown(r), "up to 2 nodes were not Ready at one time (scale-0001, scale-0002), up to 1 carried",
		"at the end 30 pods were not Running, 3 had been deleted")
}

func TestParseHeapAlloc(t *testing.T) {
	body := []byte("heap profile: 1: 2 [3: 4] @ heap/1048576\n...\n# runtime.MemStats\n# Alloc = 123\n# TotalAlloc = 999\n# HeapAlloc = 314572800\n# HeapSys = 1\n")
	if v, err := parseHeapAlloc(body); err != "" || v != 300<<20 {
		t.Fatalf("parseHeapAlloc = %d, %q; want %d", v, err, 300<<20)
	}
	if _, err := parseHeapAlloc([]byte("nothing")); err == "" {
		t.Fatal("a profile without HeapAlloc was read")
	}
}

// A writer that finds its watcher waiting for another writer's change
// writes nothing, and so times nothing: no sample of 0 ms is counted.
func TestWatchWriterSkipsBusyWatcher(t *testing.T) {
	busy := &nodeWatcher{node: "scale-0001", onLeader: true, pods: map[string]*api.Pod{}, waitSeq: "7"}
	o, lost := watchWriter(context.Background(), []*nodeWatcher{busy}, nil, time.Now().Add(20*time.Millisecond))
	if n := o.count(); n != 0 || o.errs != 0 || lost != 0 {
		t.Fatalf("busy watcher: %d latencies (%v), %d errors (%s), %d lost; want none", n, o.leader, o.errs, o.firstErr, lost)
	}
}

// Bad scale flags are refused at once, each named with why.
func TestScaleConfigCheck(t *testing.T) {
	good := scaleConfig{nodes: 5, pods: 150, duration: time.Second, load: scaleLoadDirect, watchers: 2, readers: 1}
	if err := good.check(); err != nil {
		t.Fatalf("good config refused: %v", err)
	}
	bad := scaleConfig{nodes: 0, pods: -1, duration: 0, load: "fast", watchers: 0, readers: 0}
	err := bad.check()
	if err == nil {
		t.Fatal("bad config accepted")
	}
	for _, want := range []string{`-scale-load "fast": want direct or scheduler`, "-scale-nodes 0: want at least 1", "-scale-pods -1: want at least 1",
		"-scale-watchers 0", "-scale-readers 0", "-scale-duration 0s: want more than 0"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// The newest snapshot is the newest one written whole: a directory raft's
// file store is still writing (name.tmp, size 0 until it closes) is not
// one (it read as "a snapshot of 0.0 MiB" when the new member snapshotted
// while the bench looked).
func TestLatestSnapshotSkipsOneBeingWritten(t *testing.T) {
	dir := t.TempDir()
	for name, meta := range map[string]string{
		"2-10-100":     `{"Index":10,"Size":5000}`,
		"2-20-200.tmp": `{"Index":20,"Size":0}`,
	} {
		d := filepath.Join(dir, "raft", "snapshots", name)
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "meta.json"), []byte(meta), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got, err := latestSnapshot(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.Index != 10 || got.Size != 5000 {
		t.Fatalf("latest snapshot %+v, want index 10 of 5000 bytes", got)
	}
}

package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
	"github.com/outpost-edge/outpost/internal/memlimit"
	"github.com/outpost-edge/outpost/testing/proc"
)

func main() {
	var (
		bin       = flag.String("bin", "bin/outpost", "the outpost binary to benchmark")
		out       = flag.String("out", "BENCHMARKS.md", "where to write the report")
		levels    = flag.String("levels", "1,16,64,256", "concurrent clients per level")
		duration  = flag.Duration("duration", 10*time.Second, "time per level")
		bulk      = flag.Int("bulk-pods", 100000, "pods stored for the RSS and restart measurement (0 skips)")
		gobench   = flag.Bool("go-bench", true, "also run the Go micro-benchmarks")
		profile   = flag.String("cpuprofile", "", "directory to save a CPU profile (SERVER-LEVEL.pprof) and the allocations (SERVER-LEVEL.allocs.pprof) of every server per level, and a CPU profile of the bench process (its clients) as clients-LEVEL.pprof")
		sched     = flag.Bool("scheduler", true, "run the scheduler workloads (issue 3)")
		schedN    = flag.Int("scheduler-nodes", 5000, "nodes in the scheduler workloads")
		schedX    = flag.Float64("scheduler-scale", 1, "scale the scheduler workloads' pod counts")
		only      = flag.Bool("scheduler-only", false, "run only the scheduler workloads")
		schedW    = flag.String("scheduler-workloads", "", "run only the scheduler workloads whose name contains this")
		agentB    = flag.Bool("agent", true, "run the node agent measurements (issue 4; needs root, containerd, runc)")
		agentO    = flag.Bool("agent-only", false, "run only the node agent measurements")
		memLim    = flag.String("memory-limit", "", "--memory-limit of every 3-server cluster's servers (writes, watch, scale and the other cluster sections); empty: their default, auto, which on a host whose cgroup has no memory limit follows the live heap (at least 560 MiB)")
		scaleHeap = flag.String("scale-heap-dir", "", "directory to save every server's heap profile and memory statistics at each reading of the scale section, and the new member's log")
		agentI    = flag.Duration("agent-idle", 20*time.Second, "how long the idle agent runs after Ready before its RSS is read")
		hbB       = flag.Bool("heartbeats", true, "run the node heartbeat measurement (issue 9 item 8)")
		hbN       = flag.Int("heartbeat-nodes", 5000, "simulated nodes in the heartbeat measurement")
		hbO       = flag.Bool("heartbeats-only", false, "run only the node heartbeat measurement")
		evB       = flag.Bool("eviction", true, "run the eviction measurements (issue 10; the cut-off one needs root, containerd, runc)")
		evO       = flag.String("eviction-only", "", "run only these eviction measurements: comma-separated of cutoff, zones, mass")
		machB     = flag.Bool("machines", true, "run the control-plane replacement measurement (issue 11; needs root, containerd, runc)")
		machO     = flag.Bool("machines-only", false, "run only the control-plane replacement measurement")
		machPods  = flag.Int("machines-pods", 100000, "pods stored during the control-plane replacement measurement")
		updB      = flag.Bool("updates", true, "run the rolling node update measurement (issue 12)")
		updO      = flag.Bool("updates-only", false, "run only the rolling node update measurement")
		updN      = flag.Int("update-nodes", 1000, "simulated nodes in the rolling node update measurement")
		relB      = flag.Bool("releases", true, "run the release update measurements (issue 13; the servers' one needs root and systemd-nspawn)")
		relO      = flag.Bool("releases-only", false, "run only the release update measurements")
		relN      = flag.Int("release-agents", 500, "simulated agents replacing their binary in the release update measurement")
		pnB       = flag.Bool("podnet", true, "run the pod network measurements (issue 14; the Go benchmarks need root, the CNI plugins and nft)")
		pnO       = flag.Bool("podnet-only", false, "run only the pod network measurements")
		pnN       = flag.Int("podnet-nodes", 100, "simulated nodes watching Services in the pod network measurement")
		pnT       = flag.Int("podnet-trials", 50, "pods made ready and deleted in the pod network measurement")
		etcdBin   = flag.String("etcd", "bin/etcd-bench", "etcd-bench binary (testing/bench/etcd; make bin/etcd-bench) that runs etcd beside outpost for the write table's etcd column; empty or missing: no etcd column")
		watchC    = flag.Int("watch-conns", 100, "connections (each its own client, as separate agents have) the 100 watchers of the watch fan-out are spread over; 1 puts them all on the writer's connection")
		scaleB    = flag.Bool("scale", true, "run the scale measurement (issue 16 item 3): simulated nodes and Running pods on 3 servers; API latency, RSS, snapshot install on a new member")
		scaleO    = flag.Bool("scale-only", false, "run only the scale measurement")
		scaleN    = flag.Int("scale-nodes", 5000, "simulated nodes in the scale measurement")
		scaleP    = flag.Int("scale-pods", 150000, "pods bound to the nodes and Running in the scale measurement")
		scaleD    = flag.Duration("scale-duration", 30*time.Second, "how long the scale measurement's reads and watches run")
		scaleL    = flag.String("scale-load", scaleLoadScheduler, "how the scale measurement's pods get to their nodes: scheduler (created unbound, the default scheduler binds them, as in production) or direct (created with spec.nodeName, round-robin: fewer writes, no scheduler events)")
		scaleW    = flag.Int("scale-watchers", 20, "nodes whose pods are watched (each as its agent would) in the scale measurement")
		scaleR    = flag.Int("scale-readers", 4, "client goroutines sending gets, and as many sending lists by node, in the scale measurement")
		writesO   = flag.Bool("writes-only", false, "run only the write levels and the watch fan-out (no bulk load, Go benchmarks or other sections)")
	)
	flag.Parse()
	watchConns = *watchC
	idleSettle = *agentI
	heapDir = *scaleHeap
	memLimit = *memLim
	if *writesO {
		*bulk, *gobench, *sched, *agentB, *hbB, *evB, *machB, *updB, *relB, *pnB, *scaleB = 0, false, false, false, false, false, false, false, false, false, false
	}
	ctx := context.Background()
	profileDir = *profile
	if profileDir != "" {
		// Made here: a missing directory would fail the first level only
		// after the cluster is up.
		if err := os.MkdirAll(profileDir, 0o755); err != nil {
			log.Fatalf("-cpuprofile: %v", err)
		}
	}
	etcdBench = *etcdBin
	r := &report{started: time.Now(), machine: machineInfo()}
	others := !*hbO && *evO == "" && !*machO && !*updO && !*relO && !*pnO && !*scaleO
	// The scale section runs last: its flags are checked before the
	// sections before it take their hours.
	scaleRun := (*scaleB && others && !*only && !*agentO) || *scaleO
	scaleCfg := scaleConfig{nodes: *scaleN, pods: *scaleP, duration: *scaleD, load: *scaleL, watchers: *scaleW, readers: *scaleR}
	var bad []string
	if err := scaleCfg.check(); scaleRun && err != nil {
		bad = append(bad, err.Error())
	}
	if *agentI < 0 {
		bad = append(bad, fmt.Sprintf("-agent-idle %s: want 0 or more", *agentI))
	}
	if heapDir != "" {
		// Made now: the profiles are saved hours in, one failure a server
		// and reading each.
		if err := os.MkdirAll(heapDir, 0o755); err != nil {
			bad = append(bad, fmt.Sprintf("-scale-heap-dir: %v", err))
		}
	}
	if len(bad) > 0 {
		fmt.Fprintln(os.Stderr, strings.Join(bad, "\n"))
		os.Exit(2)
	}
	if !*only && !*agentO && others {
		var err error
		if r, err = run(ctx, *bin, *levels, *duration, *bulk); err != nil {
			log.Fatal(err)
		}
		if *gobench {
			r.goBench = goBenchmarks()
		}
	}
	if *sched && !*agentO && others {
		res := runSchedulerBench(ctx, *bin, *schedN, *schedX, *schedW)
		algo := ""
		if *gobench {
			algo = schedGoBench()
		}
		r.sched = schedMarkdown(res, algo)
	}
	if (*hbB && !*only && !*agentO && others) || *hbO {
		r.heartbeats = hbMarkdown(runHeartbeatBench(ctx, *bin, *hbN), fmt.Sprintf("go run ./testing/bench -bin %s -heartbeats-only -heartbeat-nodes %d", *bin, *hbN))
	}
	if (*evB && others && !*only && !*agentO) || *evO != "" {
		want := func(part string) bool { return *evO == "" || slices.Contains(strings.Split(*evO, ","), part) }
		var cut string
		var z *zoneResult
		var m *massResult
		if want("cutoff") {
			cut = cutOffBench(ctx, *bin)
			log.Printf("eviction, cut off → replacement:\n%s", cut)
		}
		if want("zones") {
			zr := runZoneBench(ctx, *bin)
			z = &zr
		}
		if want("mass") {
			mr := runMassEvictionBench(ctx, *bin)
			m = &mr
		}
		cmd := "go run ./testing/bench -bin " + *bin + " -eviction-only cutoff,zones,mass"
		r.eviction = evictionMarkdown(cut, z, m, cmd)
	}
	if (*agentB && others) || *agentO {
		r.agent = agentMarkdown(runAgentBench(ctx, *bin), "go run ./testing/bench -bin "+*bin+" -agent-only")
	}
	if (*machB && others && !*only && !*agentO) || *machO {
		r.machines = machinesMarkdown(e2eBench(ctx, *bin, "BenchmarkControlPlaneReplacement", "1x", "controlplane_bench_test.go",
			[]string{fmt.Sprintf("OUTPOST_BENCH_PODS=%d", *machPods)}),
			fmt.Sprintf("go run ./testing/bench -bin %s -machines-only -machines-pods %d", *bin, *machPods))
	}
	if (*updB && others && !*only && !*agentO) || *updO {
		r.updates = nodeUpdatesMarkdown(runNodeUpdateBench(ctx, *bin, *updN, 5*time.Second),
			fmt.Sprintf("go run ./testing/bench -bin %s -updates-only -update-nodes %d", *bin, *updN),
			e2eBench(ctx, *bin, "BenchmarkConfigUpdateRealSystemd", "1x", "osupdate_bench_test.go", nil))
	}
	if (*relB && others && !*only && !*agentO) || *relO {
		r.releases = releasesMarkdown(runAgentWaveBench(ctx, *bin, *relN, 2*time.Second),
			fmt.Sprintf("go run ./testing/bench -bin %s -releases-only -release-agents %d", *bin, *relN),
			e2eBench(ctx, *bin, "BenchmarkReleaseUpdateRealSystemd", "1x", "release_bench_test.go", nil))
	}
	if (*pnB && others && !*only && !*agentO) || *pnO {
		r.podnet = podnetMarkdown(runPodnetBench(ctx, *bin, *pnN, *pnT),
			fmt.Sprintf("go run ./testing/bench -bin %s -podnet-only -podnet-nodes %d -podnet-trials %d", *bin, *pnN, *pnT), r.machine, time.Now())
	}
	if scaleRun {
		cmd := fmt.Sprintf("go run ./testing/bench -bin %s -scale-only -scale-nodes %d -scale-pods %d -scale-duration %s -scale-load %s -scale-watchers %d -scale-readers %d",
			*bin, *scaleN, *scaleP, *scaleD, *scaleL, *scaleW, *scaleR)
		r.scale = scaleMarkdown(runScaleBench(ctx, *bin, scaleCfg, cmd))
	}
	if err := os.WriteFile(*out, []byte(r.markdown()), 0o644); err != nil {
		log.Fatal(err)
	}
	fmt.Print(r.markdown())
}

type levelResult struct {
	clients              int
	ops, errs            int64
	seconds              float64
	p50, p99             time.Duration
	serverCPU, clientCPU time.Duration
	otherCPU             time.Duration
	// sentAhead and answeredEarly are the leader's early sends in the
	// level, and raft's appends they answered (raftstore/sendahead.go);
	// -1: not read.
	sentAhead, answeredEarly float64
}

type report struct {
	started time.Time
	machine string
	levels  []levelResult
	watch   watchResult
	// watchSnapshots are the servers that started a raft snapshot during
	// the watch measurement: each encodes every object, a burst of CPU.
	watchSnapshots []string
	watchers       int
	watchConns     int
	bulkPods       int
	bulkSecs       float64
	rss            []int64
	snapBytes      int64
	restartDur     time.Duration
	goBench        string
	notes          []string
	sched          string
	agent          string
	heartbeats     string
	eviction       string
	machines       string
	updates        string
	releases       string
	podnet         string
	scale          string
	// etcd holds etcd's result per client count, measured in the same run.
	etcd        map[int]etcdLevel
	etcdVersion string
}

// watchConns is how many connections the fan-out's watchers use.
var watchConns = 100

// memLimit is the servers' --memory-limit (-memory-limit); "" leaves
// their default.
var memLimit string

// withMemLimit is args with --memory-limit added when -memory-limit is
// set.
func withMemLimit(args ...string) []string {
	if memLimit == "" {
		return args
	}
	return append(args, "--memory-limit", memLimit)
}

// memLimitNote says how the servers' memory limit was set, for the
// sections' text.
func memLimitNote() string {
	switch memLimit {
	case "", "auto":
		// What the servers log at their start, from the code that sets it.
		follow := memlimit.Limit{Follow: true, From: "no cgroup memory limit here"}
		return "The servers run with their default `--memory-limit auto`: the Go runtime's soft limit " + follow.String() + ".\n\n"
	case "none", "0":
		return "The servers run with `--memory-limit none`: no soft limit, so the Go collector lets the heap grow to twice what is live (GOGC=100).\n\n"
	}
	return fmt.Sprintf("The servers run with `--memory-limit %s`: a soft limit, under which the Go collector works harder rather than let the heap grow to twice what is live, and, the limit given as a size, collects at GOGC=200 below it.\n\n", memLimit)
}

// profileDir, when set, receives every server's CPU profile per level.
var profileDir string

func run(ctx context.Context, bin, levelsArg string, dur time.Duration, bulk int) (*report, error) {
	root, err := os.MkdirTemp("", "outpost-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(root)
	r := &report{started: time.Now(), machine: machineInfo()}
	if r.etcd, r.etcdVersion, err = runEtcd(ctx, levelsArg, dur); err != nil {
		log.Printf("etcd column left out: %v", err)
		r.notes = append(r.notes, "etcd column left out: "+err.Error())
	}
	for _, n := range slices.Sorted(maps.Keys(r.etcd)) {
		e := r.etcd[n]
		log.Printf("etcd level %d: %.0f ops/s p50 %.2f ms p99 %.2f ms", n, e.opsPerSec(), e.P50ms, e.P99ms)
	}
	// No scheduler: the pods have no nodes to go to, and its status and
	// event writes would mingle with the measured ones.
	c, err := proc.StartCluster(ctx, bin, root, 3, withMemLimit("--raft-snapshot-interval", "5s", "--no-default-scheduler")...)
	if err != nil {
		return nil, err
	}
	defer c.Stop()
	leader, cl, err := leaderClient(ctx, c)
	if err != nil {
		return nil, err
	}
	r.notes = append(r.notes, fmt.Sprintf("clients send to the leader (%s) over HTTPS with the admin token; fsync on", leader.ID),
		"servers run with --no-default-scheduler (the pods have no nodes; the scheduler section below measures scheduling) and --raft-snapshot-interval 5s, so snapshots and log compaction (every 8,192 entries) happen during the levels, as they do in production",
		"ops/s is conditional creates (create-if-absent: POST of a new name) of ~1.3 KiB pods; CPU columns are per level from /proc; 'other' is everything else on the machine")
	if memLimit != "" {
		r.notes = append(r.notes, "servers run with --memory-limit "+memLimit+" (a soft limit; given as a size, they collect at GOGC=200 below it)")
	}
	if _, _, err := cl.Create(ctx, &api.Namespace{ObjectMeta: api.ObjectMeta{Name: "bench"}}); err != nil && !api.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create namespace: %w", err)
	}
	var seq atomic.Int64
	for _, ls := range strings.Split(levelsArg, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(ls))
		if err != nil {
			return nil, fmt.Errorf("level %q: %w", ls, err)
		}
		lr, err := loadLevel(ctx, c, cl, n, dur, &seq)
		if err != nil {
			return nil, err
		}
		log.Printf("level %d: %.0f ops/s p50 %v p99 %v", n, float64(lr.ops)/lr.seconds, lr.p50, lr.p99)
		r.levels = append(r.levels, lr)
	}
	r.watchConns = max(1, min(watchConns, 100))
	watchStart := time.Now()
	if r.watch, r.watchers, err = watchFanout(ctx, leader, cl, 100, 200, watchConns); err != nil {
		r.notes = append(r.notes, "watch fan-out failed: "+err.Error())
	}
	r.watchSnapshots = snapshotsStarted(c.Servers, watchStart, time.Now())
	if bulk > 0 {
		if err := bulkAndRestart(ctx, c, cl, bulk, &seq, r); err != nil {
			r.notes = append(r.notes, "bulk/restart failed: "+err.Error())
		}
	}
	return r, nil
}

// snapshotsStarted lists the servers (by ID) that started a raft
// snapshot between from and to, read from the names of their snapshot
// directories (TERM-INDEX-UNIXMILLI, with .tmp while one is written).
func snapshotsStarted(servers []*proc.Server, from, to time.Time) []string {
	var ids []string
	for _, s := range servers {
		dirs, _ := filepath.Glob(filepath.Join(s.Dir, "raft", "snapshots", "*"))
		for _, d := range dirs {
			parts := strings.Split(strings.TrimSuffix(filepath.Base(d), ".tmp"), "-")
			if len(parts) != 3 {
				continue
			}
			ms, err := strconv.ParseInt(parts[2], 10, 64)
			if err != nil {
				continue
			}
			if t := time.UnixMilli(ms); !t.Before(from) && !t.After(to) {
				ids = append(ids, s.ID)
			}
		}
	}
	return ids
}

func leaderClient(ctx context.Context, c *proc.Cluster) (*proc.Server, *client.Client, error) {
	cfg, err := c.Servers[0].AdminConfig()
	if err != nil {
		return nil, nil, err
	}
	cl, err := client.New(cfg)
	if err != nil {
		return nil, nil, err
	}
	peers, err := cl.RaftPeers(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("raft peers: %w", err)
	}
	for _, p := range peers {
		if !p.Leader {
			continue
		}
		for _, s := range c.Servers {
			if s.ID == p.ID {
				lcfg, err := s.AdminConfig()
				if err != nil {
					return nil, nil, err
				}
				lcl, err := client.New(lcfg)
				return s, lcl, err
			}
		}
	}
	return nil, nil, fmt.Errorf("no leader among %d peers", len(peers))
}

// benchPod is a pod whose JSON encoding is about 1 KiB.
func benchPod(name string) *api.Pod {
	return &api.Pod{
		ObjectMeta: api.ObjectMeta{
			Name: name, Namespace: "bench",
			Labels:      map[string]string{"app": "bench", "tier": "load"},
			Annotations: map[string]string{"bench.outpost.io/padding": strings.Repeat("x", 520)},
		},
		Spec: api.PodSpec{Containers: []api.Container{{
			Name: "app", Image: "registry.local/bench/app:1.0",
			Command: []string{"/app", "--serve"},
			Resources: api.ResourceRequirements{Requests: api.ResourceList{
				"cpu": api.MustParseQuantity("100m"), "memory": api.MustParseQuantity("500Mi")}},
		}}},
	}
}

// earlySends reads the server's counts of early sends and of raft's
// appends they answered from its /metrics.
func earlySends(ctx context.Context, cl *client.Client) (sent, answered float64, err error) {
	body, _, err := cl.Do(ctx, "GET", "/metrics", nil, nil)
	if err != nil {
		return 0, 0, err
	}
	sent, n1 := metricSum(body, "outpost_raft_sent_ahead_total")
	answered, n2 := metricSum(body, "outpost_raft_answered_early_total")
	if n1 != 1 || n2 != 1 {
		return 0, 0, fmt.Errorf("/metrics has %d and %d samples of the 2 early-send counters, want 1 each", n1, n2)
	}
	return sent, answered, nil
}

// metricSum adds up the samples of metric name, of any labels, in a
// Prometheus text exposition, and counts them.
func metricSum(body []byte, name string) (sum float64, n int) {
	for line := range strings.Lines(string(body)) {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || (rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		rest = strings.TrimSpace(rest)
		if v, err := strconv.ParseFloat(rest[strings.LastIndexByte(rest, ' ')+1:], 64); err == nil {
			sum += v
			n++
		}
	}
	return sum, n
}

func cpuOf(c *proc.Cluster) time.Duration {
	var t time.Duration
	for _, s := range c.Servers {
		if pid := s.PID(); pid != 0 {
			d, _ := proc.CPU(pid)
			t += d
		}
	}
	return t
}

func loadLevel(ctx context.Context, c *proc.Cluster, cl *client.Client, n int, dur time.Duration, seq *atomic.Int64) (levelResult, error) {
	lr := levelResult{clients: n, sentAhead: -1, answeredEarly: -1}
	sent0, answered0, earlyErr := earlySends(ctx, cl)
	lat := make([][]time.Duration, n)
	var errs atomic.Int64
	var firstErr atomic.Value
	if profileDir != "" {
		for _, s := range c.Servers {
			go func() {
				cfg, err := s.AdminConfig()
				var pc *client.Client
				if err == nil {
					pc, err = client.New(cfg)
				}
				if err != nil {
					log.Printf("profile %s: %v", s.ID, err)
					return
				}
				// The allocations over the same window too: what the
				// collector's share of the CPU profile comes from.
				secs := url.Values{"seconds": {strconv.Itoa(max(1, int(dur.Seconds())-1))}}
				var wg sync.WaitGroup
				for path, name := range map[string]string{"/debug/pprof/profile": "%s-%d.pprof", "/debug/pprof/allocs": "%s-%d.allocs.pprof"} {
					wg.Go(func() {
						body, _, err := pc.Do(ctx, "GET", path, secs, nil)
						if err == nil {
							err = os.WriteFile(filepath.Join(profileDir, fmt.Sprintf(name, s.ID, n)), body, 0o644)
						}
						if err != nil {
							log.Printf("profile %s (%s): %v", s.ID, path, err)
						}
					})
				}
				wg.Wait()
			}()
		}
	}
	if profileDir != "" {
		// The clients' side too: they share the cores with the servers.
		f, err := os.Create(filepath.Join(profileDir, fmt.Sprintf("clients-%d.pprof", n)))
		if err != nil {
			return lr, fmt.Errorf("profile the clients: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return lr, fmt.Errorf("profile the clients: %w", err)
		}
		defer func() {
			pprof.StopCPUProfile()
			if err := f.Close(); err != nil {
				log.Printf("profile of the clients: %v", err)
			}
		}()
	}
	sc0, cc0, mb0 := cpuOf(c), proc.SelfCPU(), proc.MachineBusy()
	start := time.Now()
	deadline := start.Add(dur)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				p := benchPod(fmt.Sprintf("p%d", seq.Add(1)))
				t0 := time.Now()
				_, _, err := cl.Create(ctx, p)
				if err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				lat[i] = append(lat[i], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	lr.seconds = time.Since(start).Seconds()
	sc1, cc1, mb1 := cpuOf(c), proc.SelfCPU(), proc.MachineBusy()
	lr.serverCPU, lr.clientCPU = sc1-sc0, cc1-cc0
	lr.otherCPU = max(0, (mb1-mb0)-lr.serverCPU-lr.clientCPU)
	if sent1, answered1, err := earlySends(ctx, cl); err == nil && earlyErr == nil {
		lr.sentAhead, lr.answeredEarly = sent1-sent0, answered1-answered0
	}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	lr.ops, lr.errs = int64(len(all)), errs.Load()
	if len(all) > 0 {
		lr.p50, lr.p99 = all[len(all)/2], all[len(all)*99/100]
	}
	if lr.ops == 0 {
		return lr, fmt.Errorf("level %d: no write succeeded (%v)", n, firstErr.Load())
	}
	return lr, nil
}

// watchResult is what watchFanout measured: deliveries (write sent →
// event decoded at a watcher) and the writes' own round trips, and the
// write time of each event that some watcher got late, to tell a slow
// commit from slow delivery.
type watchResult struct {
	p50, p99                     time.Duration
	writeP50, writeP99, writeMax time.Duration
	events                       int
	slow                         []time.Duration // write time of each event delivered late to a watcher
}

// slowDelivery is the delivery time past which an event counts as late:
// the target's p99.
const slowDelivery = 10 * time.Millisecond

func slowWrites(ws []time.Duration) string {
	if len(ws) == 0 {
		return "nothing"
	}
	s := make([]string, len(ws))
	for i, w := range ws {
		s[i] = fmt.Sprintf("%.1f", ms(w))
	}
	return strings.Join(s, ", ") + " ms"
}

// watchFanout opens watchers on the bench namespace and measures, per event
// and watcher, the time from just before the write was sent to the event's
// arrival. The watchers are spread over conns clients of their own, each
// with its own connection (conns of 1 or less puts them all on cl, the
// writer's).
func watchFanout(ctx context.Context, leader *proc.Server, cl *client.Client, watchers, events, conns int) (res watchResult, opened int, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wcls := []*client.Client{cl}
	if conns > 1 {
		cfg, err := leader.AdminConfig()
		if err != nil {
			return res, 0, err
		}
		wcls = wcls[:0]
		for range min(conns, watchers) {
			wc, err := client.New(cfg)
			if err != nil {
				return res, 0, err
			}
			wcls = append(wcls, wc)
		}
	}
	pods := api.ResourceForKind("Pod")
	_, rv, err := cl.List(ctx, pods, "bench", client.ListOptions{LabelSelector: "fanout=1"})
	if err != nil {
		return res, 0, err
	}
	type sentEvent struct {
		at, wrote time.Time
		slowest   time.Duration
	}
	var mu sync.Mutex
	sent := map[string]*sentEvent{}
	var lats []time.Duration
	var wg sync.WaitGroup
	for i := range watchers {
		ch, err := wcls[i%len(wcls)].Watch(ctx, pods, "bench", client.ListOptions{LabelSelector: "fanout=1"}, rv)
		if err != nil {
			return res, opened, fmt.Errorf("watch %d: %w", opened, err)
		}
		opened++
		wg.Add(1)
		go func() {
			defer wg.Done()
			got := 0
			for ev := range ch {
				if ev.Type != "ADDED" || ev.Object == nil {
					continue
				}
				now := time.Now()
				mu.Lock()
				if se, ok := sent[ev.Object.GetObjectMeta().Name]; ok {
					d := now.Sub(se.at)
					lats = append(lats, d)
					se.slowest = max(se.slowest, d)
				}
				mu.Unlock()
				if got++; got == events {
					return
				}
			}
		}()
	}
	order := make([]*sentEvent, 0, events)
	for i := range events {
		p := benchPod(fmt.Sprintf("fanout-%d", i))
		p.Labels["fanout"] = "1"
		se := &sentEvent{at: time.Now()}
		mu.Lock()
		sent[p.Name] = se
		mu.Unlock()
		if _, _, err := cl.Create(ctx, p); err != nil {
			return res, opened, err
		}
		// Written by this goroutine only, read after wg.Wait.
		se.wrote = time.Now()
		order = append(order, se)
		time.Sleep(5 * time.Millisecond) // pacing the load generator, not synchronisation
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cancel()
		<-done
	}
	slices.Sort(lats)
	if len(lats) == 0 {
		return res, opened, fmt.Errorf("no watch events arrived")
	}
	if len(lats) < watchers*events {
		err = fmt.Errorf("only %d of %d deliveries arrived", len(lats), watchers*events)
	}
	res.p50, res.p99, res.events = lats[len(lats)/2], lats[len(lats)*99/100], len(order)
	writes := make([]time.Duration, len(order))
	mu.Lock()
	for i, se := range order {
		writes[i] = se.wrote.Sub(se.at)
		if se.slowest > slowDelivery {
			res.slow = append(res.slow, writes[i])
		}
	}
	mu.Unlock()
	slices.Sort(writes)
	res.writeP50, res.writeP99, res.writeMax = writes[len(writes)/2], writes[len(writes)*99/100], writes[len(writes)-1]
	return res, opened, err
}

func bulkAndRestart(ctx context.Context, c *proc.Cluster, cl *client.Client, total int, seq *atomic.Int64, r *report) error {
	pods := api.ResourceForKind("Pod")
	_, _, err := cl.List(ctx, pods, "bench", client.ListOptions{})
	if err != nil {
		return err
	}
	have := int(seq.Load())
	start := time.Now()
	var wg sync.WaitGroup
	var fail atomic.Value
	for range 128 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := seq.Add(1)
				if int(i) > total {
					return
				}
				if _, _, err := cl.Create(ctx, benchPod(fmt.Sprintf("p%d", i))); err != nil {
					fail.CompareAndSwap(nil, err)
				}
			}
		}()
	}
	wg.Wait()
	if e, ok := fail.Load().(error); ok {
		return e
	}
	r.bulkPods, r.bulkSecs = max(total, have), time.Since(start).Seconds()
	for _, s := range c.Servers {
		rss, _ := proc.RSS(s.PID())
		r.rss = append(r.rss, rss)
	}
	// Restart the last server: it restores its snapshot and replays the log tail.
	s := c.Servers[len(c.Servers)-1]
	c.Kill(s)
	snaps, _ := filepath.Glob(filepath.Join(s.Dir, "raft", "snapshots", "*", "state.bin"))
	for _, f := range snaps {
		if fi, err := os.Stat(f); err == nil && fi.Size() > r.snapBytes {
			r.snapBytes = fi.Size()
		}
	}
	t0 := time.Now()
	if err := c.Start(s); err != nil {
		return err
	}
	if err := s.WaitReady(ctx); err != nil {
		return err
	}
	r.restartDur = time.Since(t0)
	return nil
}

func machineInfo() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "model name"); ok {
				model = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	return fmt.Sprintf("%d cores (%s), %s, %s", runtime.NumCPU(), model, runtime.GOOS+"/"+runtime.GOARCH, runtime.Version())
}

func goBenchmarks() string {
	out, err := goTestBench("-bench", ".", "-benchmem", "-benchtime", "1s",
		"./controlplane/api/...", "./controlplane/store/...", "./raftstore/...", "./agent/podnet/")
	if err != nil {
		return err.Error()
	}
	return strings.Join(out, "\n")
}

// goTestBench runs `go test -run '^$'` with args (the benchmarks to run
// and their packages) and returns go test's lines that report them: each
// benchmark's result and the package it is in.
func goTestBench(args ...string) ([]string, error) {
	out, err := exec.Command("go", append([]string{"test", "-run", "^$"}, args...)...).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("go test -bench failed: %w\n%s", err, out)
	}
	var keep []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "Benchmark") || strings.HasPrefix(l, "pkg:") {
			keep = append(keep, l)
		}
	}
	return keep, nil
}

func (r *report) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# outpost benchmarks\n\nWritten by `make bench` (`go run ./testing/bench`) on %s.\n\nMachine: %s.\n\n",
		r.started.UTC().Format("2006-01-02 15:04 MST"), r.machine)
	if len(r.levels) > 0 {
		b.WriteString("## Conditional creates of 1 KiB pods, 3 servers on loopback, real HTTP API\n\n")
		for _, n := range r.notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
		if len(r.etcd) > 0 {
			fmt.Fprintf(&b, "- etcd %s ran first in the same run (`etcd-bench run`, testing/bench/etcd, built by `make bin/etcd-bench` from the Go module proxy): 3 members on loopback, fsync on, TLS on client and peer ports (--auto-tls, --peer-auto-tls), the same levels and duration; its clients (one gRPC connection, as outpost's one HTTP/2 connection) send a transaction to the leader: put a 1 KiB value if the key's create revision is 0\n", r.etcdVersion)
		}
		b.WriteString("\n| clients | ops/s | p50 ms | p99 ms | errors | server CPU s | client CPU s | other CPU s | etcd ops/s | etcd p50 / p99 ms | etcd server CPU s | vs etcd ops/s |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, l := range r.levels {
			ops := float64(l.ops) / l.seconds
			eo, ep, ec, vs := "-", "-", "-", "-"
			if e, ok := r.etcd[l.clients]; ok && e.Ops > 0 {
				eo, ep, ec = fmt.Sprintf("%.0f", e.opsPerSec()), fmt.Sprintf("%.2f / %.2f", e.P50ms, e.P99ms), fmt.Sprintf("%.1f", e.ServerCPU)
				vs = fmt.Sprintf("%.2f×", ops/e.opsPerSec())
			}
			fmt.Fprintf(&b, "| %d | %.0f | %.2f | %.2f | %d | %.1f | %.1f | %.1f | %s | %s | %s | %s |\n",
				l.clients, ops, ms(l.p50), ms(l.p99), l.errs, l.serverCPU.Seconds(), l.clientCPU.Seconds(), l.otherCPU.Seconds(), eo, ep, ec, vs)
		}
		var early []string
		for _, l := range r.levels {
			if l.sentAhead > 0 {
				early = append(early, fmt.Sprintf("%d clients: %.0f sent, %.0f answered (%.0f %%)",
					l.clients, l.sentAhead, l.answeredEarly, 100*l.answeredEarly/l.sentAhead))
			}
		}
		if len(early) > 0 {
			fmt.Fprintf(&b, "\nThe leader's early sends (batches sent to a follower while the leader stores them) and how many of them answered raft's own append of the same entries, so that raft did not send them again: %s.\n", strings.Join(early, "; "))
		}
	}
	if r.watchers > 0 {
		w := r.watch
		fmt.Fprintf(&b, "\n## Watch fan-out\n\n%d watchers on the leader over %d connection(s) of the bench process, one create at a time: time from sending the write to the event decoded into a Pod at each watcher: p50 %.2f ms, p99 %.2f ms (target p99 10 ms). This includes the write itself; delivery from the store to 100 watchers alone is BenchmarkWatchFanout100 below.\n", r.watchers, r.watchConns, ms(w.p50), ms(w.p99))
		fmt.Fprintf(&b, "\nThe writes alone (create sent → its reply): p50 %.2f ms, p99 %.2f ms, max %.2f ms. Events that reached a watcher later than %v: %d of %d; their writes took %s.\n",
			ms(w.writeP50), ms(w.writeP99), ms(w.writeMax), slowDelivery, len(w.slow), w.events, slowWrites(w.slow))
		if len(r.watchSnapshots) > 0 {
			fmt.Fprintf(&b, "\nRaft snapshots started during this measurement on %s (each encodes every stored object: the write levels left up to 50,000 pods).\n", strings.Join(r.watchSnapshots, ", "))
		} else {
			b.WriteString("\nNo raft snapshot started during this measurement.\n")
		}
	}
	if r.bulkPods > 0 {
		fmt.Fprintf(&b, "\n## %d pods stored\n\nLoaded in %.0f s. Server RSS: ", r.bulkPods, r.bulkSecs)
		for i, v := range r.rss {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%.0f MiB", float64(v)/(1<<20))
		}
		fmt.Fprintf(&b, ".\nLargest snapshot on disk: %.1f MiB. A follower killed and restarted was ready (snapshot restore + log replay + rejoin) after %.2f s.\n",
			float64(r.snapBytes)/(1<<20), r.restartDur.Seconds())
	}
	if r.goBench != "" {
		fmt.Fprintf(&b, "\n## Go micro-benchmarks\n\n```\n%s\n```\n", r.goBench)
	}
	b.WriteString(r.sched)
	b.WriteString(r.heartbeats)
	b.WriteString(r.agent)
	b.WriteString(r.eviction)
	b.WriteString(r.machines)
	b.WriteString(r.updates)
	b.WriteString(r.releases)
	b.WriteString(r.podnet)
	b.WriteString(r.scale)
	return b.String()
}

// machinesMarkdown is the control-plane replacement section.
func machinesMarkdown(res, cmd string) string {
	return "\n## Control-plane member replacement (issue 11)\n\n`" + cmd + "`.\n\n" +
		"`BenchmarkControlPlaneReplacement` in testing/e2e: six hosts in network namespaces, each running the real binary as an agent with `--control-plane-eligible` (heartbeat 2 s), three also serving (`--no-default-scheduler`: the stored pods are for the snapshot's size), three zones (a: h1, h4; b: h2, h5; c: h3, h6); a ControlPlaneMachineSet (3 replicas, domains by zone) and a MachineHealthCheck (Ready=Unknown for 10 s, maxUnhealthy 1). The leader's host is killed (its server and agent SIGKILLed, its link cut: writes wait for an election); a surviving server is polled every 100 ms for each step, timed from the kill. 16 clients create namespaces throughout. It runs twice: with the servers' default `--raft-heartbeat-timeout 1s` and with `500ms` (how long the followers wait for the dead leader before an election). Targets: promoted and old member removed within 30 s plus the 10 s timeout with 100,000 pods stored; no gap over 2 s without an acknowledged write.\n\n```\n" +
		res + "\n```\n"
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

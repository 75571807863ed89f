package main

import (
	"context"
	"fmt"
	"log"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
	"github.com/outpost-edge/outpost/testing/proc"
)

// A scheduler workload, named as kube-scheduler's scheduler_perf names it,
// with the shapes of its templates: nodes 4 CPU / 32Gi / 110 pods in 10
// zones, pods 100m / 500Mi.
type schedWorkload struct {
	name   string
	nodes  int
	pods   int
	target float64 // pods/s the issue asks for
	pod    func(ns, name string) *api.Pod
	setup  func(ctx context.Context, cl *client.Client, ns string) error
	// kube is kube-scheduler's number on this kind of machine (issue 3).
	kube string
}

type schedResult struct {
	w           schedWorkload
	createRate  float64 // pods/s created while no scheduler ran
	drainRate   float64 // pods/s bound from a backlog, from the server's ready to the last binding
	drainSecs   float64 // from the server's ready to the last binding
	drainBefore int     // pods already bound when the watch started
	liveRate    float64 // pods/s from the first create to the last binding, scheduler running
	liveCreate  float64 // pods/s created during the live run
	serverCPU   time.Duration
	drainCPU    time.Duration
	profileTop  string
	err         string
}

func schedPod(ns, name string, labels map[string]string) *api.Pod {
	return &api.Pod{
		ObjectMeta: api.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: api.PodSpec{Containers: []api.Container{{
			Name: "pause", Image: "registry.local/pause:3.9",
			Resources: api.ResourceRequirements{Requests: api.ResourceList{
				"cpu": api.MustParseQuantity("100m"), "memory": api.MustParseQuantity("500Mi")}},
		}}},
	}
}

func schedWorkloads(nodes int, scale float64) []schedWorkload {
	n := func(v int) int { return max(1, int(float64(v)*scale)) }
	return []schedWorkload{
		{name: "SchedulingBasic", nodes: nodes, pods: n(10000), target: 5000, kube: "334 (175 on the 10,000-pod CI workload)",
			pod: func(ns, name string) *api.Pod { return schedPod(ns, name, map[string]string{"app": "basic"}) }},
		{name: "SchedulingPodAntiAffinity", nodes: nodes, pods: n(2000), target: 2000, kube: "133",
			pod: func(ns, name string) *api.Pod {
				p := schedPod(ns, name, map[string]string{"color": "green"})
				p.Spec.Affinity = &api.Affinity{PodAntiAffinity: &api.PodAntiAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: []api.PodAffinityTerm{{
						LabelSelector: &api.LabelSelector{MatchLabels: map[string]string{"color": "green"}},
						TopologyKey:   "kubernetes.io/hostname",
					}},
				}}
				return p
			}},
		{name: "TopologySpreading (SelectorSpread by zone through a Service)", nodes: nodes, pods: n(5000), target: 1500, kube: "156 (Nomad spread: 66)",
			pod: func(ns, name string) *api.Pod { return schedPod(ns, name, map[string]string{"app": "spread"}) },
			setup: func(ctx context.Context, cl *client.Client, ns string) error {
				svc := &api.Service{ObjectMeta: api.ObjectMeta{Name: "spread", Namespace: ns},
					Spec: api.ServiceSpec{Selector: map[string]string{"app": "spread"}, Ports: []api.ServicePort{{Port: 80}}}}
				_, _, err := cl.Create(ctx, svc)
				return err
			}},
	}
}

func schedNode(i int) *api.Node {
	name := fmt.Sprintf("node-%05d", i)
	zone := fmt.Sprintf("zone-%d", i%10)
	rl := api.ResourceList{"cpu": api.MustParseQuantity("4"), "memory": api.MustParseQuantity("32Gi"), "pods": api.MustParseQuantity("110")}
	return &api.Node{
		ObjectMeta: api.ObjectMeta{Name: name, Labels: map[string]string{
			"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": zone, "topology.kubernetes.io/region": "region-1"}},
		Status: api.NodeStatus{Capacity: rl, Allocatable: rl,
			Conditions: []api.NodeCondition{{Type: "Ready", Status: "True", Reason: "KubeletReady"}}},
	}
}

// parallel runs fn(i) for i in [0, n) on workers goroutines and returns
// the first error.
func parallel(n, workers int, fn func(i int) error) error {
	var next atomic.Int64
	var first atomic.Value
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || first.Load() != nil {
					return
				}
				if err := fn(i); err != nil {
					first.CompareAndSwap(nil, err)
				}
			}
		})
	}
	wg.Wait()
	if err, _ := first.Load().(error); err != nil {
		return err
	}
	return nil
}

// runSchedulerBench measures each workload on a fresh one-server cluster
// (fsync on, HTTPS): the backlog drain (pods created with no scheduler
// running, then the server restarted with default-scheduler) and a live
// run (pods created by 64 clients while the scheduler binds them).
func runSchedulerBench(ctx context.Context, bin string, nodes int, scale float64, only string) []schedResult {
	var out []schedResult
	for _, w := range schedWorkloads(nodes, scale) {
		if only != "" && !strings.Contains(w.name, only) {
			continue
		}
		r := schedResult{w: w}
		if err := schedOne(ctx, bin, &r); err != nil {
			r.err = err.Error()
			log.Printf("%s: %v", w.name, err)
		}
		log.Printf("%s: created %.0f/s, drain %.0f pods/s, live %.0f pods/s", w.name, r.createRate, r.drainRate, r.liveRate)
		out = append(out, r)
	}
	return out
}

func schedOne(ctx context.Context, bin string, r *schedResult) error {
	root, err := os.MkdirTemp("", "outpost-sched-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	c, err := proc.StartCluster(ctx, bin, root, 1, "--no-default-scheduler")
	if err != nil {
		return err
	}
	defer c.Stop()
	s := c.Servers[0]
	cl, err := s.Client()
	if err != nil {
		return err
	}
	w := r.w
	if err := parallel(w.nodes, 64, func(i int) error {
		_, _, err := cl.Create(ctx, schedNode(i))
		return err
	}); err != nil {
		return fmt.Errorf("create nodes: %w", err)
	}
	for _, ns := range []string{"drain", "live"} {
		if _, _, err := cl.Create(ctx, &api.Namespace{ObjectMeta: api.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
		if w.setup != nil {
			if err := w.setup(ctx, cl, ns); err != nil {
				return err
			}
		}
	}
	start := time.Now()
	if err := parallel(w.pods, 64, func(i int) error {
		_, _, err := cl.Create(ctx, w.pod("drain", fmt.Sprintf("p-%05d", i)))
		return err
	}); err != nil {
		return fmt.Errorf("create pods: %w", err)
	}
	r.createRate = float64(w.pods) / time.Since(start).Seconds()

	// Restart with the scheduler: it finds the backlog.
	c.Stop()
	c.Args = nil
	if err := c.Start(s); err != nil {
		return err
	}
	if err := s.WaitReady(ctx); err != nil {
		return err
	}
	ready := time.Now()
	cl, err = s.Client()
	if err != nil {
		return err
	}
	cpu0, _ := proc.CPU(s.PID())
	profDone := make(chan string, 1)
	go func() { profDone <- cpuProfileTop(ctx, bin, cl, 2) }()
	run, err := waitBound(ctx, cl, "drain", w.pods)
	if err != nil {
		return fmt.Errorf("drain: %w", err)
	}
	cpu1, _ := proc.CPU(s.PID())
	r.drainSecs = run.last().Sub(ready).Seconds()
	r.drainRate = run.rate()
	r.drainBefore = run.before
	r.drainCPU = cpu1 - cpu0
	r.profileTop = <-profDone

	// Live: created while the scheduler runs.
	var createdAt time.Time
	created := make(chan struct{})
	liveStart := time.Now()
	go func() {
		start := time.Now()
		err := parallel(w.pods, 64, func(i int) error {
			_, _, err := cl.Create(ctx, w.pod("live", fmt.Sprintf("p-%05d", i)))
			return err
		})
		if err != nil {
			log.Printf("live create: %v", err)
		}
		createdAt = time.Now()
		r.liveCreate = float64(w.pods) / createdAt.Sub(start).Seconds()
		close(created)
	}()
	cpu0, _ = proc.CPU(s.PID())
	run, err = waitBound(ctx, cl, "live", w.pods)
	if err != nil {
		return fmt.Errorf("live: %w", err)
	}
	<-created
	cpu1, _ = proc.CPU(s.PID())
	r.liveRate = float64(w.pods) / run.last().Sub(liveStart).Seconds()
	r.serverCPU = cpu1 - cpu0
	return nil
}

// boundRun is what waitBound saw: when it started looking, how many
// pods were bound already, and when each later binding arrived.
type boundRun struct {
	start  time.Time
	before int         // bound when the watch started
	times  []time.Time // arrival of every binding seen on the watch
}

// rate is bindings per second over the watch: those already made when it
// started are left out of both the count and the time.
func (b boundRun) rate() float64 {
	if len(b.times) == 0 {
		return 0
	}
	return float64(len(b.times)) / b.times[len(b.times)-1].Sub(b.start).Seconds()
}

func (b boundRun) last() time.Time {
	if len(b.times) == 0 {
		return b.start
	}
	return b.times[len(b.times)-1]
}

// waitBound watches namespace ns until want pods have a node.
func waitBound(ctx context.Context, cl *client.Client, ns string, want int) (boundRun, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	podsR := api.ResourceForKind("Pod")
	bound := map[string]bool{}
	run := boundRun{start: time.Now()}
	first := true
	for {
		objs, rv, err := cl.List(ctx, podsR, ns, client.ListOptions{})
		if err != nil {
			return run, err
		}
		for _, o := range objs {
			if p := o.(*api.Pod); p.Spec.NodeName != "" && !bound[p.Name] {
				bound[p.Name] = true
				if first {
					run.before++
				} else {
					run.times = append(run.times, time.Now())
				}
			}
		}
		if first {
			run.start = time.Now()
			first = false
		}
		if len(bound) >= want {
			return run, nil
		}
		ch, err := cl.Watch(ctx, podsR, ns, client.ListOptions{}, rv)
		if api.IsGone(err) {
			// The scheduler bound more pods since the list than the
			// server's watch window holds: list again.
			continue
		}
		if err != nil {
			return run, err
		}
		for ev := range ch {
			if ev.Object == nil {
				break
			}
			if p, ok := ev.Object.(*api.Pod); ok && p.Spec.NodeName != "" && !bound[p.Name] {
				bound[p.Name] = true
				run.times = append(run.times, time.Now())
				if len(bound) >= want {
					cancel()
					return run, nil
				}
			}
		}
		if ctx.Err() != nil {
			return run, fmt.Errorf("%d of %d pods bound: %w", len(bound), want, ctx.Err())
		}
	}
}

// cpuProfileTop takes a CPU profile of the server for secs seconds and
// returns pprof's top functions by cumulative time.
func cpuProfileTop(ctx context.Context, bin string, cl *client.Client, secs int) string {
	body, _, err := cl.Do(ctx, "GET", "/debug/pprof/profile", url.Values{"seconds": {fmt.Sprint(secs)}}, nil)
	if err != nil {
		return "profile failed: " + err.Error()
	}
	f := filepath.Join(os.TempDir(), fmt.Sprintf("outpost-sched-%d.pprof", time.Now().UnixNano()))
	if err := os.WriteFile(f, body, 0o600); err != nil {
		return err.Error()
	}
	defer os.Remove(f)
	out, err := exec.Command("go", "tool", "pprof", "-top", "-cum", "-nodecount=25", bin, f).CombinedOutput()
	if err != nil {
		return "pprof failed: " + err.Error()
	}
	var keep []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "flat%") || strings.Contains(l, "outpost") || strings.HasPrefix(strings.TrimSpace(l), "Showing") || strings.Contains(l, "Duration") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

func schedMarkdown(rs []schedResult, algo string) string {
	var b strings.Builder
	b.WriteString("\n## Scheduler (issue 3), one server, real API and raft (fsync on)\n\n")
	b.WriteString("Nodes 4 CPU / 32Gi / 110 pods in 10 zones, pods 100m / 500Mi, as scheduler_perf's templates. ")
	b.WriteString("*Drain*: the pods were created while no scheduler ran, then the server restarted with default-scheduler; pods/s are the bindings a watch saw arrive divided by the time from the watch's start to the last one (bindings made before the watch started are left out of both); the total time from the server's ready to the last binding is in its own column. ")
	b.WriteString("*Live*: 64 clients create the pods while the scheduler binds them; pods/s from the first create to the last binding (the creates are part of it). ")
	b.WriteString("Bindings go through the same checks as POST pods/NAME/binding, batched into raft entries.\n\n")
	b.WriteString("| workload | nodes | pods | drain pods/s | drain: ready to done s | live pods/s | creates/s (no scheduler / live) | server CPU s (drain / live) | target pods/s | met? | kube-scheduler here |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|\n")
	for _, r := range rs {
		met := "no"
		if r.drainRate >= r.w.target && r.liveRate >= r.w.target {
			met = "yes"
		} else if r.drainRate >= r.w.target {
			met = "drain only"
		}
		if r.err != "" {
			met = "error: " + r.err
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %.0f | %.2f | %.0f | %.0f / %.0f | %.1f / %.1f | %.0f | %s | %s |\n",
			r.w.name, r.w.nodes, r.w.pods, r.drainRate, r.drainSecs, r.liveRate, r.createRate, r.liveCreate, r.drainCPU.Seconds(), r.serverCPU.Seconds(), r.w.target, met, r.w.kube)
	}
	for _, r := range rs {
		if r.profileTop != "" {
			fmt.Fprintf(&b, "\nCPU profile of the server, first 2 s of the %s drain (`go tool pprof -top -cum`, outpost functions):\n\n```\n%s\n```\n", r.w.name, r.profileTop)
			break
		}
	}
	if algo != "" {
		fmt.Fprintf(&b, "\n### The algorithm alone (no API): `go test -bench . ./controlplane/scheduler/ ./controlplane/scheduler/loop/`\n\n```\n%s\n```\n", algo)
	}
	return b.String()
}

func schedGoBench() string {
	keep, err := goTestBench("-bench", ".", "-benchmem", "-benchtime", "3x",
		"./controlplane/scheduler/", "./controlplane/scheduler/loop/")
	if err != nil {
		return err.Error()
	}
	slices.Sort(keep)
	return strings.Join(keep, "\n")
}

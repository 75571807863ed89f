package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
	"github.com/outpost-edge/outpost/testing/proc"
)

// The scale measurement (issue 16 item 3): 3 servers, simulated nodes
// heartbeating and pods bound to them and Running with the status an
// agent posts; then the API's latency for what agents and users do most
// (get a pod, list a node's pods, watch a node's pods) with the
// heartbeats going on, each server's memory, and a new member installing
// the big snapshot.

// Targets of issue 16 item 3.
const (
	scaleLatencyTarget  = time.Second
	scaleRSSTarget      = 600 << 20
	scaleInstallTarget  = 10 * time.Second
	scaleHeartbeat      = 10 * time.Second
	scaleNamespaces     = 30
	scaleCreateClients  = 128
	scaleSimWorkers     = 64
	scaleWatchWriters   = 2
	scaleSnapInterval   = 5 * time.Second
	scaleWatchTimeout   = 10 * time.Second
	scaleLoadTimeout    = 30 * time.Minute
	scaleInstallTimeout = 5 * time.Minute
	// scaleSeqAnnotation carries the watch measurement's sequence number:
	// the event that shows it is the one a write caused.
	scaleSeqAnnotation = "bench.outpost.io/seq"
)

// Ways to load the pods (scaleConfig.load).
const (
	// scaleLoadDirect creates the pods with spec.nodeName set (as a
	// controller that binds at create would), round-robin over the nodes.
	scaleLoadDirect = "direct"
	// scaleLoadScheduler creates them unbound; the default scheduler
	// binds them.
	scaleLoadScheduler = "scheduler"
)

var errScaleBench = errors.New("scale benchmark")

type scaleConfig struct {
	nodes, pods int
	duration    time.Duration
	load        string
	watchers    int
	readers     int // client goroutines for gets, and as many for lists
}

// check refuses a configuration the section cannot run, naming each
// flag that is wrong and why.
func (c scaleConfig) check() error {
	var errs []string
	if c.load != scaleLoadDirect && c.load != scaleLoadScheduler {
		errs = append(errs, fmt.Sprintf("-scale-load %q: want %s or %s", c.load, scaleLoadDirect, scaleLoadScheduler))
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"-scale-nodes", c.nodes}, {"-scale-pods", c.pods}, {"-scale-watchers", c.watchers}, {"-scale-readers", c.readers}} {
		if f.v < 1 {
			errs = append(errs, fmt.Sprintf("%s %d: want at least 1", f.name, f.v))
		}
	}
	if c.duration <= 0 {
		errs = append(errs, fmt.Sprintf("-scale-duration %s: want more than 0 (the reads and watches run this long)", c.duration))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %s", errScaleBench, strings.Join(errs, "; "))
	}
	return nil
}

// opLat is one operation's latencies, by where the request went.
type opLat struct {
	leader, follower []time.Duration
	errs             int
	firstErr         string
}

func (o *opLat) add(onLeader bool, d time.Duration) {
	if onLeader {
		o.leader = append(o.leader, d)
	} else {
		o.follower = append(o.follower, d)
	}
}

func (o *opLat) fail(err error) {
	if o.errs == 0 {
		o.firstErr = err.Error()
	}
	o.errs++
}

// merge adds what another goroutine measured.
func (o *opLat) merge(p *opLat) {
	o.leader = append(o.leader, p.leader...)
	o.follower = append(o.follower, p.follower...)
	if o.errs == 0 && p.errs > 0 {
		o.firstErr = p.firstErr
	}
	o.errs += p.errs
}

// count is how many latencies were measured.
func (o *opLat) count() int { return len(o.leader) + len(o.follower) }

// sorted sorts both lists and returns all latencies, sorted.
func (o *opLat) sorted() []time.Duration {
	slices.Sort(o.leader)
	slices.Sort(o.follower)
	all := slices.Concat(o.leader, o.follower)
	slices.Sort(all)
	return all
}

// serverMem is one server's memory at one moment.
type serverMem struct {
	id      string
	leader  bool
	rss     int64
	file    int64 // the part of rss that is mapped files (the binary's pages)
	heap    int64 // live heap after a forced collection; 0: not read
	heapErr string
}

type scaleResult struct {
	cfg scaleConfig
	cmd string

	register time.Duration // sim start → all nodes Ready
	creates  time.Duration // load start → last create acknowledged
	running  time.Duration // load start → every pod Running
	perNode  int           // pods on each node (direct load)
	// perNodeMin and perNodeMax are the fewest and most pods on a node
	// once all ran.
	perNodeMin, perNodeMax int
	get, list              opLat
	watch                  opLat
	watchLost              int // writes whose event did not arrive within scaleWatchTimeout
	listWrong              int // lists by node whose pod count was not the node's
	readQPS                [2]float64
	memLoaded              []serverMem
	memMeasure             []serverMem

	// What the node lifecycle controller did from registration to the
	// end: a node not Ready or tainted is a node whose heartbeats did not
	// get through, and its pods would be evicted.
	maxNotReady  int
	notReadySeen []string
	maxTainted   int
	notRunning   int // pods not Running at the end
	deleted      int // pods deleted during the section

	// The new member.
	snapBytes    int64
	snapIndex    uint64
	joinIndex    uint64 // the leader's last index when the member started
	joinCaughtUp time.Duration
	joinVoter    time.Duration
	joinReady    time.Duration
	joinRSS      int64
	joinErr      string

	err   string
	notes []string
}

// runScaleBench runs the whole section on a fresh cluster.
func runScaleBench(ctx context.Context, bin string, cfg scaleConfig, cmd string) scaleResult {
	r := scaleResult{cfg: cfg, cmd: cmd}
	if err := scaleOne(ctx, bin, &r); err != nil {
		r.err = err.Error()
		log.Printf("scale bench: %v", err)
	}
	return r
}

func scaleOne(ctx context.Context, bin string, r *scaleResult) error {
	cfg := r.cfg
	if err := cfg.check(); err != nil {
		return err
	}
	// The default scheduler runs in both ways of loading, as in
	// production; with the direct load it has nothing to do.
	bc, err := startBenchCluster(ctx, bin, "outpost-scale-bench-", "--raft-snapshot-interval", scaleSnapInterval.String())
	if err != nil {
		return err
	}
	defer bc.close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// Nodes.
	sim, err := startSimProcess(bc.root, bin, bc.leader, "scale", cfg.nodes, scaleHeartbeat,
		"--workers", strconv.Itoa(scaleSimWorkers))
	if err != nil {
		return err
	}
	defer sim.stop()
	if err := waitNodes(ctx, bc.cl, cfg.nodes, 10*time.Minute); err != nil {
		return fmt.Errorf("%w (sim: %s)", err, lastLine(sim.stderr.String()))
	}
	r.register = time.Since(sim.began)
	log.Printf("scale bench: %d nodes Ready after %s", cfg.nodes, r.register.Round(time.Second))
	nodes, err := scaleNodeNames(ctx, bc.cl)
	if err != nil {
		return err
	}
	mon := &nodeMonitor{notReady: map[string]bool{}, tainted: map[string]bool{}}
	if err := watchNodes(ctx, bc.cl, mon.see); err != nil {
		return err
	}

	// Pods.
	tr := &podTracker{running: map[string]bool{}, nodeOf: map[string]string{}}
	if err := tr.start(ctx, bc.cl); err != nil {
		return err
	}
	if err := scaleLoad(ctx, bc, r, nodes, tr); err != nil {
		return err
	}
	loadEnd, err := leaderIndex(ctx, bc.cl, bc.leader.ID)
	if err != nil {
		return err
	}
	r.memLoaded = scaleMemory(ctx, bc)
	logMem("after the load", r.memLoaded)

	// The measurement.
	if err := scaleMeasure(ctx, bc, r, nodes); err != nil {
		return err
	}
	r.memMeasure = scaleMemory(ctx, bc)
	logMem("after the measurement", r.memMeasure)
	r.maxNotReady, r.notReadySeen, r.maxTainted = mon.result()
	r.notRunning, r.deleted = tr.result(cfg.pods)
	if r.maxNotReady > 0 || r.notRunning > 0 {
		log.Printf("scale bench: %d nodes were not Ready at one time (%v); %d pods not Running, %d deleted", r.maxNotReady, r.notReadySeen, r.notRunning, r.deleted)
	}

	// The new member.
	if err := scaleJoin(ctx, bc, r, loadEnd); err != nil {
		r.joinErr = err.Error()
		log.Printf("scale bench, new member: %v", err)
	}
	return nil
}

// simProcess is an `outpost sim agents` process.
type simProcess struct {
	cmd    *exec.Cmd
	stderr *bytes.Buffer
	began  time.Time
}

// startSimProcess runs count simulated nodes named name-NNNN through
// via's API, in a process of their own: their CPU is not the servers'
// nor the measuring clients'.
func startSimProcess(dir, bin string, via *proc.Server, name string, count int, hb time.Duration, extra ...string) (*simProcess, error) {
	nodesFile := filepath.Join(dir, name+"-nodes.yaml")
	if err := os.WriteFile(nodesFile, []byte("apiVersion: v1\nkind: Node\nmetadata:\n  name: "+name+"\n"), 0o600); err != nil {
		return nil, err
	}
	args := append([]string{"sim", "agents", "--config", filepath.Join(via.Dir, "admin.conf"),
		"-f", nodesFile, "--count", fmt.Sprint(count), "--heartbeat", hb.String(), "-q"}, extra...)
	s := &simProcess{cmd: exec.Command(bin, args...), stderr: &bytes.Buffer{}}
	s.cmd.Stderr = s.stderr
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	s.began = time.Now()
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start sim agents: %w", err)
	}
	return s, nil
}

// stop interrupts the simulation (SIGKILL after 30 s) and waits for it.
func (s *simProcess) stop() {
	_ = s.cmd.Process.Signal(os.Interrupt)
	proc.WaitOrKill(s.cmd, 30*time.Second)
}

// scaleNodeNames lists the simulated nodes, sorted.
func scaleNodeNames(ctx context.Context, cl *client.Client) ([]string, error) {
	objs, _, err := cl.List(ctx, api.ResourceForKind("Node"), "", client.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	var names []string
	for _, o := range objs {
		if n := o.GetObjectMeta().Name; strings.HasPrefix(n, "scale-") {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names, nil
}

// nodeMonitor follows, from a node watch, the nodes not Ready and those
// carrying a taint of the node lifecycle controller, and the most of each
// at one time.
type nodeMonitor struct {
	mu                sync.Mutex
	notReady, tainted map[string]bool
	maxNR, maxT       int
	seen              []string
}

func (m *nodeMonitor) see(n *api.Node, _ time.Time) {
	if !strings.HasPrefix(n.Name, "scale-") {
		return
	}
	st, _ := readyCondition(n)
	tainted := false
	for _, t := range n.Spec.Taints {
		tainted = tainted || t.Key == api.TaintNodeNotReady || t.Key == api.TaintNodeUnreachable
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	set := func(s map[string]bool, on bool) {
		if on {
			s[n.Name] = true
		} else {
			delete(s, n.Name)
		}
	}
	set(m.notReady, st != api.ConditionTrue)
	set(m.tainted, tainted)
	if st != api.ConditionTrue && len(m.seen) < 10 && !slices.Contains(m.seen, n.Name) {
		m.seen = append(m.seen, n.Name)
	}
	m.maxNR = max(m.maxNR, len(m.notReady))
	m.maxT = max(m.maxT, len(m.tainted))
}

func (m *nodeMonitor) result() (maxNotReady int, names []string, maxTainted int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.maxNR, slices.Clone(m.seen), m.maxT
}

// podTracker follows every pod of the scale namespaces from one watch:
// how many are Running, and how many were deleted.
type podTracker struct {
	mu      sync.Mutex
	running map[string]bool
	nodeOf  map[string]string // the node each pod is bound to
	nRun    int
	deleted int
}

func scaleNS(i int) string { return fmt.Sprintf("scale-%02d", i%scaleNamespaces) }

func (t *podTracker) start(ctx context.Context, cl *client.Client) error {
	listed := make(chan struct{})
	var once sync.Once
	key := func(o api.Object) string { m := o.GetObjectMeta(); return m.Namespace + "/" + m.Name }
	ours := func(o api.Object) bool { return strings.HasPrefix(o.GetObjectMeta().Namespace, "scale-") }
	set := func(k string, p *api.Pod, running bool) {
		if p.Spec.NodeName != "" {
			t.nodeOf[k] = p.Spec.NodeName
		}
		if was, ok := t.running[k]; ok && was {
			t.nRun--
		}
		t.running[k] = running
		if running {
			t.nRun++
		}
	}
	go cl.ListWatch(ctx, api.ResourceForKind("Pod"), "", client.ListOptions{}, client.ListWatchHandler{
		Reset: func(objs []api.Object) {
			t.mu.Lock()
			clear(t.running)
			clear(t.nodeOf)
			t.nRun = 0
			for _, o := range objs {
				if p, ok := o.(*api.Pod); ok && ours(p) {
					set(key(p), p, p.Status.Phase == api.PodRunning)
				}
			}
			t.mu.Unlock()
			once.Do(func() { close(listed) })
		},
		Event: func(typ string, o api.Object) {
			p, ok := o.(*api.Pod)
			if !ok || !ours(p) {
				return
			}
			k := key(p)
			t.mu.Lock()
			defer t.mu.Unlock()
			if typ == client.EventDeleted {
				set(k, p, false)
				delete(t.running, k)
				delete(t.nodeOf, k)
				t.deleted++
				return
			}
			set(k, p, p.Status.Phase == api.PodRunning && p.DeletionTimestamp == nil)
		},
	})
	select {
	case <-listed:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Minute):
		return fmt.Errorf("%w: the pod watch did not list within a minute", errScaleBench)
	}
}

func (t *podTracker) runningCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.nRun
}

// spread is the fewest and the most pods bound to one of nodes.
func (t *podTracker) spread(nodes []string) (least, most int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	per := make(map[string]int, len(nodes))
	for _, n := range t.nodeOf {
		per[n]++
	}
	least = -1
	for _, n := range nodes {
		c := per[n]
		if least < 0 || c < least {
			least = c
		}
		most = max(most, c)
	}
	return max(least, 0), most
}

// result is how many of want pods are not Running, and how many pods
// were deleted since the tracker started.
func (t *podTracker) result(want int) (notRunning, deleted int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return want - t.nRun, t.deleted
}

// scalePod is pod i of the load, ~1.3 KiB before its status (the write
// section's pod): on node nodes[i%len(nodes)] when bound (30 a node at
// the default sizes, one in each namespace).
func scalePod(i int, nodes []string, bound bool) *api.Pod {
	p := benchPod(fmt.Sprintf("pod-%06d", i))
	p.Namespace = scaleNS(i / len(nodes))
	p.Labels = map[string]string{"app": p.Namespace, "tier": "scale"}
	if bound {
		p.Spec.NodeName = nodes[i%len(nodes)]
	}
	return p
}

// scaleLoad creates the pods with 128 clients through the leader and
// waits until the simulated nodes have them all Running.
func scaleLoad(ctx context.Context, bc *benchCluster, r *scaleResult, nodes []string, tr *podTracker) error {
	for i := range scaleNamespaces {
		if _, _, err := bc.cl.Create(ctx, &api.Namespace{ObjectMeta: api.ObjectMeta{Name: scaleNS(i)}}); err != nil && !api.IsAlreadyExists(err) {
			return fmt.Errorf("create namespace: %w", err)
		}
	}
	bound := r.cfg.load == scaleLoadDirect
	if bound {
		r.perNode = r.cfg.pods / len(nodes)
	}
	start := time.Now()
	err := parallel(r.cfg.pods, scaleCreateClients, func(i int) error {
		var err error
		// A write whose outcome is unknown (504) or refused for now
		// (503) is sent again; one that was applied meanwhile is there.
		for try := range 3 {
			if _, _, err = bc.cl.Create(ctx, scalePod(i, nodes, bound)); err == nil || api.IsAlreadyExists(err) {
				return nil
			}
			if err := sleepCtx(ctx, time.Duration(try+1)*time.Second); err != nil {
				return err
			}
		}
		return fmt.Errorf("create pod %d: %w", i, err)
	})
	if err != nil {
		return err
	}
	r.creates = time.Since(start)
	log.Printf("scale bench: %d pods created (%s) in %s", r.cfg.pods, r.cfg.load, r.creates.Round(time.Second))
	deadline := start.Add(scaleLoadTimeout)
	last, lastAt := -1, time.Now()
	for {
		n := tr.runningCount()
		if n >= r.cfg.pods {
			break
		}
		if n != last {
			last, lastAt = n, time.Now()
		}
		if time.Now().After(deadline) || time.Since(lastAt) > 2*time.Minute {
			return fmt.Errorf("%w: %d of %d pods Running %s after the load started", errScaleBench, n, r.cfg.pods, time.Since(start).Round(time.Second))
		}
		if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
	r.running = time.Since(start)
	r.perNodeMin, r.perNodeMax = tr.spread(nodes)
	log.Printf("scale bench: %d pods Running %s after the load started", r.cfg.pods, r.running.Round(time.Second))
	return nil
}

// scaleClients is an admin client of each server, and whether it leads.
func scaleClients(bc *benchCluster) ([]*client.Client, []bool, error) {
	var cls []*client.Client
	var leads []bool
	for _, s := range bc.c.Servers {
		cl, err := s.Client()
		if err != nil {
			return nil, nil, err
		}
		cls, leads = append(cls, cl), append(leads, s == bc.leader)
	}
	return cls, leads, nil
}

// scaleMeasure runs the getters, the listers and the watch measurement
// together for the configured duration.
func scaleMeasure(ctx context.Context, bc *benchCluster, r *scaleResult, nodes []string) error {
	cfg := r.cfg
	cls, leads, err := scaleClients(bc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ws, err := startNodeWatchers(ctx, bc, nodes, cfg.watchers)
	if err != nil {
		return err
	}
	start := time.Now()
	deadline := start.Add(cfg.duration)
	var wg sync.WaitGroup
	var mu sync.Mutex
	pods := api.ResourceForKind("Pod")
	perNode := func(node int) int { // pods of node in the direct load
		return r.cfg.pods/len(nodes) + b2i(node < r.cfg.pods%len(nodes))
	}
	var listWrong atomic.Int64
	for g := range cfg.readers {
		cl, onLeader := cls[g%len(cls)], leads[g%len(cls)]
		wg.Go(func() {
			var o opLat
			for time.Now().Before(deadline) {
				i := rand.IntN(cfg.pods)
				p := scalePod(i, nodes, false)
				t0 := time.Now()
				obj, err := cl.Get(ctx, pods, p.Namespace, p.Name, client.GetOptions{})
				if err != nil {
					o.fail(err)
					continue
				}
				o.add(onLeader, time.Since(t0))
				if obj.GetObjectMeta().Name != p.Name {
					o.fail(fmt.Errorf("%w: asked for pod %s, got %s", errScaleBench, p.Name, obj.GetObjectMeta().Name))
				}
			}
			mu.Lock()
			r.get.merge(&o)
			mu.Unlock()
		})
		wg.Go(func() {
			var o opLat
			for time.Now().Before(deadline) {
				n := rand.IntN(len(nodes))
				t0 := time.Now()
				objs, _, err := cl.List(ctx, pods, "", client.ListOptions{FieldSelector: "spec.nodeName=" + nodes[n]})
				if err != nil {
					o.fail(err)
					continue
				}
				o.add(onLeader, time.Since(t0))
				if cfg.load == scaleLoadDirect && len(objs) != perNode(n) {
					listWrong.Add(1)
				}
			}
			mu.Lock()
			r.list.merge(&o)
			mu.Unlock()
		})
	}
	var lost atomic.Int64
	for range scaleWatchWriters {
		wg.Go(func() {
			o, n := watchWriter(ctx, ws, bc.cl, deadline)
			lost.Add(int64(n))
			mu.Lock()
			r.watch.merge(&o)
			mu.Unlock()
		})
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	r.readQPS = [2]float64{float64(r.get.count()) / secs, float64(r.list.count()) / secs}
	r.watchLost, r.listWrong = int(lost.Load()), int(listWrong.Load())
	log.Printf("scale bench: %d gets (%.0f/s), %d lists by node (%.0f/s), %d watch deliveries, %d lost", r.get.count(), r.readQPS[0],
		r.list.count(), r.readQPS[1], r.watch.count(), r.watchLost)
	return nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// watchWriter changes a pod of a random watcher of ws through cl and
// times its event's arrival, until deadline: the latencies, and how many
// events were lost. A watcher another writer is waiting on is skipped;
// nothing was written, so there is nothing to time.
func watchWriter(ctx context.Context, ws []*nodeWatcher, cl *client.Client, deadline time.Time) (o opLat, lost int) {
	for time.Now().Before(deadline) {
		w := ws[rand.IntN(len(ws))]
		d, err := w.change(ctx, cl)
		switch {
		case errors.Is(err, errWatchBusy):
		case errors.Is(err, errWatchLost):
			lost++
		case err != nil:
			o.fail(err)
		default:
			o.add(w.onLeader, d)
		}
	}
	return o, lost
}

var (
	errWatchLost = errors.New("the event did not arrive")
	// errWatchBusy: another writer's change is under way at the watcher.
	errWatchBusy = errors.New("the watcher waits for another change")
)

// nodeWatcher watches one node's pods as its agent does (list, then
// watch, with fieldSelector spec.nodeName and the node's credential).
type nodeWatcher struct {
	node     string
	onLeader bool

	mu   sync.Mutex
	pods map[string]*api.Pod
	// waiting is the sequence number a write is waiting for, and where
	// to say it arrived.
	waitSeq string
	arrived chan time.Time
}

// startNodeWatchers starts n watchers on nodes spread over the list, on
// the servers in turn, and returns once each has listed.
func startNodeWatchers(ctx context.Context, bc *benchCluster, nodes []string, n int) ([]*nodeWatcher, error) {
	n = min(n, len(nodes))
	names := make([]string, n)
	for i := range n {
		names[i] = nodes[i*len(nodes)/n]
	}
	tokens, err := nodeTokens(ctx, bc.cl, names)
	if err != nil {
		return nil, err
	}
	var listed sync.WaitGroup
	ws := make([]*nodeWatcher, n)
	for i, name := range names {
		cl, onLeader, err := bc.nodeClient(i, tokens[name])
		if err != nil {
			return nil, err
		}
		w := &nodeWatcher{node: name, onLeader: onLeader, pods: map[string]*api.Pod{}}
		ws[i] = w
		listed.Add(1)
		go w.follow(ctx, cl, listed.Done)
	}
	if err := waitListed(ctx, &listed); err != nil {
		return nil, fmt.Errorf("%w: the node watchers had not all listed: %w", errScaleBench, err)
	}
	for _, w := range ws {
		w.mu.Lock()
		n := len(w.pods)
		w.mu.Unlock()
		if n == 0 {
			return nil, fmt.Errorf("%w: node %s has no pods to write to", errScaleBench, w.node)
		}
	}
	return ws, nil
}

func (w *nodeWatcher) follow(ctx context.Context, cl *client.Client, listed func()) {
	var once sync.Once
	seen := func(p *api.Pod, now time.Time) {
		w.pods[p.Namespace+"/"+p.Name] = p
		if w.waitSeq != "" && p.Annotations[scaleSeqAnnotation] == w.waitSeq {
			w.waitSeq = ""
			w.arrived <- now
		}
	}
	cl.ListWatch(ctx, api.ResourceForKind("Pod"), "", client.ListOptions{FieldSelector: "spec.nodeName=" + w.node}, client.ListWatchHandler{
		Reset: func(objs []api.Object) {
			now := time.Now()
			w.mu.Lock()
			clear(w.pods)
			for _, o := range objs {
				if p, ok := o.(*api.Pod); ok {
					seen(p, now)
				}
			}
			w.mu.Unlock()
			once.Do(listed)
		},
		Event: func(typ string, o api.Object) {
			now := time.Now()
			p, ok := o.(*api.Pod)
			if !ok {
				return
			}
			w.mu.Lock()
			defer w.mu.Unlock()
			if typ == client.EventDeleted {
				delete(w.pods, p.Namespace+"/"+p.Name)
				return
			}
			seen(p, now)
		},
	})
}

var scaleSeq atomic.Int64

// change updates an annotation of one of w's pods through the leader and
// returns the time from sending the write to the event's arrival at w.
func (w *nodeWatcher) change(ctx context.Context, cl *client.Client) (time.Duration, error) {
	seq := strconv.FormatInt(scaleSeq.Add(1), 10)
	arrived := make(chan time.Time, 1)
	w.mu.Lock()
	if w.waitSeq != "" { // another writer's change is under way here
		w.mu.Unlock()
		if err := sleepCtx(ctx, time.Millisecond); err != nil {
			return 0, err
		}
		return 0, errWatchBusy
	}
	var pod *api.Pod
	for _, p := range w.pods {
		pod = p // map order: a random pod of the node
		break
	}
	if pod == nil {
		w.mu.Unlock()
		return 0, fmt.Errorf("%w: node %s has no pod to change", errScaleBench, w.node)
	}
	upd := *pod
	upd.Annotations = map[string]string{}
	for k, v := range pod.Annotations {
		upd.Annotations[k] = v
	}
	upd.Annotations[scaleSeqAnnotation] = seq
	w.waitSeq, w.arrived = seq, arrived
	w.mu.Unlock()
	t0 := time.Now()
	_, _, err := cl.Update(ctx, &upd)
	if err != nil {
		w.mu.Lock()
		if w.waitSeq == seq {
			w.waitSeq = ""
		}
		w.mu.Unlock()
		return 0, fmt.Errorf("update pod %s/%s: %w", upd.Namespace, upd.Name, err)
	}
	select {
	case at := <-arrived:
		return at.Sub(t0), nil
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(scaleWatchTimeout):
		w.mu.Lock()
		if w.waitSeq == seq {
			w.waitSeq = ""
		}
		w.mu.Unlock()
		return 0, errWatchLost
	}
}

// scaleMemory is each server's RSS and live heap now.
func scaleMemory(ctx context.Context, bc *benchCluster) []serverMem {
	var out []serverMem
	for _, s := range bc.c.Servers {
		m := serverMem{id: s.ID, leader: s == bc.leader}
		if ms, err := proc.Mem(s.PID()); err == nil {
			m.rss, m.file = ms.RSS, ms.File
		}
		out = append(out, m)
	}
	// The RSS first: the collection that the heap profile forces could
	// lower the others'.
	for i, s := range bc.c.Servers {
		out[i].heap, out[i].heapErr = liveHeap(ctx, s)
	}
	return out
}

var heapAllocLine = regexp.MustCompile(`(?m)^# HeapAlloc = (\d+)`)

// liveHeap is the server's heap after a forced collection: the HeapAlloc
// that /debug/pprof/heap?gc=1&debug=1 reports.
func liveHeap(ctx context.Context, s *proc.Server) (int64, string) {
	cl, err := s.Client()
	if err != nil {
		return 0, err.Error()
	}
	body, _, err := cl.Do(ctx, "GET", "/debug/pprof/heap", url.Values{"gc": {"1"}, "debug": {"1"}}, nil)
	if err != nil {
		return 0, err.Error()
	}
	if heapDir != "" {
		saveHeap(ctx, cl, s.ID, body)
	}
	return parseHeapAlloc(body)
}

// heapDir, when set (-scale-heap-dir), receives each server's heap
// profile at each reading: SERVER-N.pprof, and SERVER-N.txt with the
// runtime's memory statistics; and the new member's log, new-member.log.
var (
	heapDir   string
	heapSaved atomic.Int64
)

func saveHeap(ctx context.Context, cl *client.Client, id string, text []byte) {
	n := heapSaved.Add(1)
	base := filepath.Join(heapDir, fmt.Sprintf("%s-%d", id, n))
	if err := os.WriteFile(base+".txt", text, 0o600); err != nil {
		log.Printf("scale bench: save heap statistics: %v", err)
	}
	prof, _, err := cl.Do(ctx, "GET", "/debug/pprof/heap", nil, nil)
	if err == nil {
		err = os.WriteFile(base+".pprof", prof, 0o600)
	}
	if err != nil {
		log.Printf("scale bench: save heap profile: %v", err)
	}
}

func parseHeapAlloc(body []byte) (int64, string) {
	m := heapAllocLine.FindSubmatch(body)
	if m == nil {
		return 0, "no HeapAlloc in the heap profile"
	}
	v, err := strconv.ParseInt(string(m[1]), 10, 64)
	if err != nil {
		return 0, err.Error()
	}
	return v, ""
}

func logMem(when string, ms []serverMem) {
	var parts []string
	for _, m := range ms {
		parts = append(parts, fmt.Sprintf("%s RSS %.0f MiB (file %.0f) heap %.0f MiB", m.id, mib(m.rss), mib(m.file), mib(m.heap)))
	}
	log.Printf("scale bench, %s: %s", when, strings.Join(parts, "; "))
}

// snapMeta is what hashicorp/raft's file snapshot store writes beside a
// snapshot (meta.json).
type snapMeta struct {
	Index uint64
	Size  int64
}

// latestSnapshot is the newest snapshot in a server's data dir.
func latestSnapshot(dir string) (snapMeta, error) {
	metas, _ := filepath.Glob(filepath.Join(dir, "raft", "snapshots", "*", "meta.json"))
	var best snapMeta
	for _, f := range metas {
		if strings.HasSuffix(filepath.Dir(f), ".tmp") {
			continue // still being written (raft's file store renames it when done)
		}
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var m snapMeta
		if json.Unmarshal(b, &m) == nil && m.Index > best.Index {
			best = m
		}
	}
	if best.Index == 0 {
		return best, fmt.Errorf("%w: no snapshot under %s", errScaleBench, dir)
	}
	return best, nil
}

// scaleJoin starts a fourth server that joins the cluster and times it
// from its start to holding the leader's index, to being a voter, and to
// answering /readyz; then removes it again.
func scaleJoin(ctx context.Context, bc *benchCluster, r *scaleResult, loadEnd uint64) error {
	if snap, err := latestSnapshot(bc.leader.Dir); err == nil && snap.Index < loadEnd {
		r.notes = append(r.notes, fmt.Sprintf("the leader's newest snapshot is at index %d, %d entries before the end of the load (a snapshot is taken once the log since the last one holds 8,192 entries or a quarter as many entries as there are stored objects, whichever is more, looked at every --raft-snapshot-interval): the new member installs it and then replays the log after it", snap.Index, loadEnd-snap.Index))
	}
	s, err := proc.NewServer(fmt.Sprintf("s%d", len(bc.c.Servers)+1), filepath.Join(bc.root, "new-member"))
	if err != nil {
		return err
	}
	if heapDir != "" {
		s.Args = []string{"--log-level", "info"}
	}
	if r.joinIndex, err = leaderIndex(ctx, bc.cl, bc.leader.ID); err != nil {
		return err
	}
	bc.c.Servers = append(bc.c.Servers, s)
	t0 := time.Now()
	if err := bc.c.Start(s); err != nil {
		return err
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := bc.cl.RaftRemove(rctx, s.ID); err != nil {
			r.notes = append(r.notes, "removing the new member: "+err.Error())
		}
		bc.c.Terminate(s)
		if heapDir != "" {
			// Its log times the install's steps (received, restored, replayed).
			if b, err := os.ReadFile(filepath.Join(s.Dir, "server.log")); err == nil {
				_ = os.WriteFile(filepath.Join(heapDir, "new-member.log"), b, 0o600)
			}
		}
		bc.c.Servers = slices.DeleteFunc(bc.c.Servers, func(o *proc.Server) bool { return o == s })
	}()
	deadline := t0.Add(scaleInstallTimeout)
	for r.joinCaughtUp == 0 || r.joinVoter == 0 || r.joinReady == 0 {
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: after %s the new member was caught up: %v, voter: %v, ready: %v (its log: %s)", errScaleBench, scaleInstallTimeout,
				r.joinCaughtUp > 0, r.joinVoter > 0, r.joinReady > 0, tail(filepath.Join(s.Dir, "server.log"), 1))
		}
		if s.PID() == 0 {
			return fmt.Errorf("%w: the new member exited", errScaleBench)
		}
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		peers, err := bc.cl.RaftPeers(pctx)
		cancel()
		now := time.Since(t0)
		if err == nil {
			for _, p := range peers {
				if p.ID != s.ID {
					continue
				}
				if r.joinCaughtUp == 0 && p.LastIndex >= r.joinIndex {
					r.joinCaughtUp = now
				}
				if r.joinVoter == 0 && p.Suffrage == "Voter" {
					r.joinVoter = now
				}
			}
		}
		if r.joinReady == 0 {
			if cl, err := s.Client(); err == nil {
				pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				_, _, err = cl.Do(pctx, "GET", "/readyz", nil, nil)
				cancel()
				if err == nil {
					r.joinReady = time.Since(t0)
				}
			}
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
	r.joinRSS, _ = proc.RSS(s.PID())
	snap, err := latestSnapshot(s.Dir)
	if err != nil {
		return err
	}
	r.snapBytes, r.snapIndex = snap.Size, snap.Index
	log.Printf("scale bench, new member: caught up %s, voter %s, ready %s; snapshot %.1f MiB at index %d (leader at %d)",
		r.joinCaughtUp, r.joinVoter, r.joinReady, mib(r.snapBytes), r.snapIndex, r.joinIndex)
	return nil
}

// --- report ---

func scaleMarkdown(r scaleResult) string {
	var b strings.Builder
	cfg := r.cfg
	b.WriteString("\n## Scale: 3 servers, simulated nodes and Running pods (issue 16 item 3)\n\n")
	fmt.Fprintf(&b, "`%s`. Three `outpost server` processes on loopback (fsync on, controllers and the default scheduler on, `--raft-snapshot-interval %s`); one `outpost sim agents` process runs %d simulated nodes through the leader, each with its own node credential, heartbeating every %s (the heartbeat call), and posts each pod bound to them Running as an agent does (phase, conditions, container statuses, pod IP; through the status subresource with the node's credential; %d writes in flight).\n\n",
		r.cmd, scaleSnapInterval, cfg.nodes, scaleHeartbeat, scaleSimWorkers)
	b.WriteString(memLimitNote())
	if r.err != "" {
		fmt.Fprintf(&b, "**Failed:** %s\n\n", r.err)
	}
	if r.register > 0 {
		fmt.Fprintf(&b, "Nodes registered and Ready after %.0f s. ", r.register.Seconds())
	}
	if r.running > 0 {
		way := fmt.Sprintf("created with `spec.nodeName` set (%d a node)", r.perNode)
		if cfg.load == scaleLoadScheduler {
			way = fmt.Sprintf("created unbound and bound by the default scheduler (%d to %d a node)", r.perNodeMin, r.perNodeMax)
		}
		fmt.Fprintf(&b, "%d pods (~1.3 KiB before their status, in %d namespaces) %s by %d clients through the leader: creates done after %.0f s (%.0f/s), all Running after %.0f s.\n\n",
			cfg.pods, scaleNamespaces, way, scaleCreateClients, r.creates.Seconds(), float64(cfg.pods)/r.creates.Seconds(), r.running.Seconds())
	} else {
		b.WriteString("\n\n")
	}
	if len(r.memLoaded) > 0 {
		fmt.Fprintf(&b, "Then, for %s with the heartbeats going on, %d client goroutines on each kind of read, spread over the three servers (reads are served by every server: without resourceVersion a get or list is a quorum read, the follower asking the leader for its commit index), all with the admin credential, each sending its next request when the last returned: GET of a random pod (%.0f/s), LIST of a random node's pods across all namespaces with `fieldSelector=spec.nodeName=NODE` as an agent lists at start (%.0f/s); and %d watchers, one for each of %d nodes spread over the servers, each listing and watching its node's pods as the agent does (node credential, `fieldSelector=spec.nodeName`), while %d writers update an annotation of one of a watched node's pods through the leader and wait for it at the watcher: the time from sending the write to the event's arrival.\n\n",
			cfg.duration, cfg.readers, r.readQPS[0], r.readQPS[1], min(cfg.watchers, cfg.nodes), min(cfg.watchers, cfg.nodes), scaleWatchWriters)
	}
	b.WriteString("| measure | p50 | p99 | max | count | errors | leader p99 | followers p99 | target | met? |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	latRow := func(what string, o opLat, extra int, extraWhat string) {
		all := o.sorted()
		if len(all) == 0 {
			fmt.Fprintf(&b, "| %s | not measured | | | 0 | %d | | | %s | **not met** |\n", what, o.errs+extra, target("p99 <", scaleLatencyTarget))
			return
		}
		p99 := pct(all, 99)
		errs := strconv.Itoa(o.errs)
		if extra > 0 {
			errs += fmt.Sprintf(" + %d %s", extra, extraWhat)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %d | %s | %s | %s | %s | %s |\n", what, short(pct(all, 50)), short(p99), short(pct(all, 100)), len(all), errs,
			shortOrDash(o.leader), shortOrDash(o.follower), target("p99 <", scaleLatencyTarget), metWord(p99 < scaleLatencyTarget && o.errs == 0 && extra == 0))
	}
	latRow("GET one pod", r.get, 0, "")
	latRow("LIST pods by node (all namespaces)", r.list, r.listWrong, "wrong counts")
	latRow("watch: write → event at the node's watch", r.watch, r.watchLost, "lost")
	memRow := func(what string, ms []serverMem) {
		if len(ms) == 0 {
			return
		}
		var vals []string
		ok := true
		for _, m := range ms {
			role := ""
			if m.leader {
				role = " (leader)"
			}
			v := fmt.Sprintf("%s%s %.0f", m.id, role, mib(m.rss))
			if m.file > 0 {
				v += fmt.Sprintf(" (file %.0f)", mib(m.file))
			}
			vals = append(vals, v)
			ok = ok && m.rss > 0 && m.rss <= scaleRSSTarget
		}
		fmt.Fprintf(&b, "| %s, MiB | %s | | | | | | | ≤ 600 MiB each | %s |\n", what, strings.Join(vals, ", "), metWord(ok))
	}
	memRow("server RSS after the load", r.memLoaded)
	memRow("server RSS after the measurement", r.memMeasure)
	installRow := func(what string, d time.Duration) {
		if d == 0 {
			fmt.Fprintf(&b, "| %s | not measured | | | | | | | %s | **not met** |\n", what, target("<", scaleInstallTarget))
			return
		}
		fmt.Fprintf(&b, "| %s | %s | | | | | | | %s | %s |\n", what, short(d), target("<", scaleInstallTarget), metWord(d < scaleInstallTarget))
	}
	if r.joinErr != "" || r.joinReady > 0 || len(r.memMeasure) > 0 {
		installRow("new member: start → holds the leader's index at its start", r.joinCaughtUp)
		installRow("new member: start → /readyz answers", r.joinReady)
		if r.joinVoter > 0 {
			fmt.Fprintf(&b, "| new member: start → promoted to voter | %s | | | | | | | | |\n", short(r.joinVoter))
		}
	}
	b.WriteString("\n")
	heaps := func(ms []serverMem) string {
		var parts []string
		for _, m := range ms {
			if m.heapErr != "" {
				parts = append(parts, m.id+" not read ("+m.heapErr+")")
			} else {
				parts = append(parts, fmt.Sprintf("%s %.0f MiB", m.id, mib(m.heap)))
			}
		}
		return strings.Join(parts, ", ")
	}
	if len(r.memLoaded) > 0 {
		fmt.Fprintf(&b, "- Live heap (HeapAlloc after a forced collection, `/debug/pprof/heap?gc=1`), after the load: %s", heaps(r.memLoaded))
		if len(r.memMeasure) > 0 {
			fmt.Fprintf(&b, "; after the measurement: %s", heaps(r.memMeasure))
		}
		b.WriteString(".\n")
	}
	if len(r.memMeasure) > 0 {
		if r.maxNotReady == 0 && r.maxTainted == 0 {
			b.WriteString("- Every node stayed Ready and untainted from registration to the end of the measurement (a node watch followed them).\n")
		} else {
			fmt.Fprintf(&b, "- **Nodes lost:** up to %d nodes were not Ready at one time (%s), up to %d carried the not-ready or unreachable taint: their heartbeats did not get through.\n",
				r.maxNotReady, strings.Join(r.notReadySeen, ", "), r.maxTainted)
		}
		if r.notRunning == 0 && r.deleted == 0 {
			fmt.Fprintf(&b, "- All %d pods were still Running at the end; none was deleted or evicted.\n", cfg.pods)
		} else {
			fmt.Fprintf(&b, "- **Pods lost:** at the end %d pods were not Running, %d had been deleted.\n", r.notRunning, r.deleted)
		}
	}
	if len(r.memLoaded) > 0 {
		b.WriteString("- Server RSS counts mapped files too (*file*: nearly all the `outpost` binary's pages, shared with every process of the binary and reclaimable); the rest is the server's own memory, mostly the Go heap.\n")
	}
	if r.snapBytes > 0 {
		fmt.Fprintf(&b, "- The new member (`outpost server --join`, as a fourth server) received a snapshot of %.1f MiB at index %d, the leader being at index %d when it started (%d entries replayed from the log after the snapshot); it held %.0f MiB RSS once ready. It was removed again afterwards.\n",
			mib(r.snapBytes), r.snapIndex, r.joinIndex, r.joinIndex-min(r.joinIndex, r.snapIndex), mib(r.joinRSS))
	}
	if r.joinErr != "" {
		fmt.Fprintf(&b, "- **New member failed:** %s\n", r.joinErr)
	}
	if errs := slices.DeleteFunc([]string{r.get.firstErr, r.list.firstErr, r.watch.firstErr}, func(s string) bool { return s == "" }); len(errs) > 0 {
		fmt.Fprintf(&b, "- First errors: %s.\n", strings.Join(errs, "; "))
	}
	for _, n := range r.notes {
		fmt.Fprintf(&b, "- %s\n", n)
	}
	b.WriteString("- Unlike real agents, the simulated nodes share one pod watch (and one node watch) and the admin client's connections: the servers hold one watch of every pod instead of one per node, and the bench process one more (it counts the Running pods and the deletions). The watch row's latency includes the write (through the leader, fsync, replication).\n")
	return b.String()
}

func shortOrDash(d []time.Duration) string {
	if len(d) == 0 {
		return "-"
	}
	return short(pct(d, 99))
}

package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/outpost-edge/outpost/agent/sim"
	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
	"github.com/outpost-edge/outpost/testing/proc"
)

// Issue 10's performance section, the parts with simulated nodes: the
// zone-aware tainting rate (2,000 nodes in 4 zones) and mass taint
// eviction (10,000 pods on 1,000 nodes). The real-agent part (a node
// cut off → its replacement Running) is a Go benchmark in testing/e2e,
// run from here.

// The zone measurement's settings: rates high enough that each zone
// state is measured in tens of seconds (the defaults, 0.1 and 0.01
// node/s, would take hours for the same counts); the limiter is the same.
const (
	zoneHeartbeat = 5 * time.Second
	zoneGrace     = 15 * time.Second
	zoneRate      = 2.0
	zoneSecondary = 0.5
	zoneWindow    = 30 * time.Second
)

// zoneGroup is one simulation: count copies of one Node in one zone, so
// that a group can go silent at once.
type zoneGroup struct {
	name, zone string
	count      int
}

// 2,000 nodes: zone a 1,000 (600 + 400), b 250 (40 + 210), c 250, d 500.
var zoneGroups = []zoneGroup{
	{"a-first", "zone-a", 600}, {"a-rest", "zone-a", 400},
	{"b-few", "zone-b", 40}, {"b-rest", "zone-b", 210},
	{"c", "zone-c", 250}, {"d", "zone-d", 500},
}

type zonePhase struct {
	name    string
	zone    string
	state   string
	setting float64
	tainted int     // nodes of the zone tainted in the window
	rate    float64 // (tainted-1) / (last - first)
	secs    float64
	err     string
}

type zoneResult struct {
	nodes     int
	register  time.Duration
	phases    []zonePhase
	untouched string // what the other zones saw
	// master disruption: time from every zone Full to no eviction taint
	// left, and eviction taints added in the window after.
	masterCleared time.Duration
	masterAdded   int
	leaderCPU     float64 // cores, whole leader process, over the phases
	ctrlCPU       float64 // cores, controllers' stacks in the leader's profile
	ctrlProfile   string
	err           string
}

// taintLog records every time a node gains the unreachable NoExecute
// taint, and whether each holds it now.
type taintLog struct {
	mu   sync.Mutex
	adds []taintAdd
	has  map[string]bool
	zone map[string]string
}

type taintAdd struct {
	zone string
	at   time.Time
}

func (l *taintLog) see(n *api.Node, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	tainted := slices.ContainsFunc(n.Spec.Taints, func(t api.Taint) bool {
		return t.Key == api.TaintNodeUnreachable && t.Effect == api.TaintEffectNoExecute
	})
	zone := n.Labels["topology.kubernetes.io/zone"]
	l.zone[n.Name] = zone
	if tainted && !l.has[n.Name] {
		l.adds = append(l.adds, taintAdd{zone, at})
	}
	l.has[n.Name] = tainted
}

// in returns the times zone's nodes were tainted in [from, to).
func (l *taintLog) in(zone string, from, to time.Time) []time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []time.Time
	for _, a := range l.adds {
		if a.zone == zone && !a.at.Before(from) && a.at.Before(to) {
			out = append(out, a.at)
		}
	}
	slices.SortFunc(out, func(a, b time.Time) int { return a.Compare(b) })
	return out
}

// tainted counts the nodes holding the taint now, by zone.
func (l *taintLog) tainted() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int{}
	for n, h := range l.has {
		if h {
			out[l.zone[n]]++
		}
	}
	return out
}

func runZoneBench(ctx context.Context, bin string) (r zoneResult) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Minute)
	defer cancel()
	if err := zoneBench(ctx, bin, &r); err != nil {
		r.err = err.Error()
		log.Printf("zone bench: %v", err)
	}
	return r
}

func zoneBench(ctx context.Context, bin string, r *zoneResult) error {
	bc, err := startBenchCluster(ctx, bin, "outpost-zone-bench-", "--no-default-scheduler",
		"--node-monitor-grace-period", zoneGrace.String(),
		"--node-eviction-rate", fmt.Sprint(zoneRate), "--secondary-node-eviction-rate", fmt.Sprint(zoneSecondary))
	if err != nil {
		return err
	}
	defer bc.close()
	leader, cl, ccfg := bc.leader, bc.cl, bc.admin
	began := time.Now()
	groups := map[string]*sim.Agents{}
	defer func() {
		for _, a := range groups {
			a.Stop()
		}
	}()
	for _, g := range zoneGroups {
		a, err := startSim(ctx, ccfg, g.name, g.zone, g.count, zoneHeartbeat, false)
		if err != nil {
			return fmt.Errorf("group %s: %w", g.name, err)
		}
		groups[g.name] = a
		r.nodes += g.count
	}
	if err := waitNodes(ctx, cl, r.nodes, 10*time.Minute); err != nil {
		return err
	}
	r.register = time.Since(began).Round(time.Second)
	log.Printf("zone bench: %d nodes Ready after %v", r.nodes, r.register)

	tl := &taintLog{has: map[string]bool{}, zone: map[string]string{}}
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	if err := watchNodes(wctx, cl, tl.see); err != nil {
		return err
	}
	cpu0 := leaderCPU(leader)
	t0 := time.Now()
	type prof struct {
		cores float64
		top   string
	}
	profile := make(chan prof, 1)
	profileSecs := int((zoneGrace + 2*zoneWindow).Seconds())
	silence := func(names ...string) {
		for _, n := range names {
			_ = groups[n].Silence(groups[n].Names()...)
		}
	}

	// Normal: 40 of zone b's 250 go silent.
	silence("b-few")
	r.phases = append(r.phases, measurePhase(ctx, cl, tl, "40 of zone b's 250 nodes silent", "zone-b", api.ZoneNormal, zoneRate, 40))
	// PartialDisruption: 600 of zone a's 1,000; the profile covers this
	// phase and the next.
	go func() {
		cores, top := controllersCPU(ctx, bin, cl, profileSecs)
		profile <- prof{cores, top}
	}()
	silence("a-first")
	r.phases = append(r.phases, measurePhase(ctx, cl, tl, "600 of zone a's 1,000 nodes silent", "zone-a", api.ZonePartialDisruption, zoneSecondary, 0))
	// FullDisruption beside healthy zones: the other 400 of zone a.
	silence("a-rest")
	r.phases = append(r.phases, measurePhase(ctx, cl, tl, "all 1,000 of zone a silent (1,000 of them since the last phase)", "zone-a", api.ZoneFullDisruption, zoneRate, 0))
	r.leaderCPU = (leaderCPU(leader) - cpu0).Seconds() / time.Since(t0).Seconds()
	now := tl.tainted()
	r.untouched = fmt.Sprintf("nodes tainted now: zone a %d, zone b %d (its 40 silent ones), zone c %d, zone d %d", now["zone-a"], now["zone-b"], now["zone-c"], now["zone-d"])
	if now["zone-c"] != 0 || now["zone-d"] != 0 || now["zone-b"] != 40 {
		r.untouched += ": the healthy zones were not left alone"
	}
	select {
	case p := <-profile:
		r.ctrlCPU, r.ctrlProfile = p.cores, p.top
	case <-ctx.Done():
		return ctx.Err()
	}

	// Every zone down: master disruption.
	silence("b-rest", "c", "d")
	if err := waitZones(ctx, cl, 3*zoneGrace, func(l *api.ZoneList) bool { return l.MasterDisruption }); err != nil {
		return fmt.Errorf("master disruption: %w", err)
	}
	masterAt := time.Now()
	deadline := masterAt.Add(2 * time.Minute)
	for total(tl.tainted()) > 0 {
		if time.Now().After(deadline) {
			return fmt.Errorf("master disruption: %v nodes still tainted 2 minutes after it began", tl.tainted())
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil { // polling the watch's record, with a deadline
			return err
		}
	}
	r.masterCleared = time.Since(masterAt)
	from := time.Now()
	if err := sleepCtx(ctx, zoneWindow); err != nil { // the window in which nothing may be tainted
		return err
	}
	for _, z := range []string{"zone-a", "zone-b", "zone-c", "zone-d"} {
		r.masterAdded += len(tl.in(z, from, time.Now()))
	}
	return nil
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// measurePhase waits until zone is in state, then counts the zone's
// nodes tainted in the window that follows (or, with want > 0, until
// want nodes of it are tainted).
func measurePhase(ctx context.Context, cl *client.Client, tl *taintLog, name, zone, state string, setting float64, want int) zonePhase {
	ph := zonePhase{name: name, zone: zone, state: state, setting: setting}
	silencedAt := time.Now()
	if err := waitZones(ctx, cl, 3*zoneGrace, func(l *api.ZoneList) bool {
		for _, z := range l.Items {
			if z.Name == zone {
				return z.State == state
			}
		}
		return false
	}); err != nil {
		ph.err = err.Error()
		return ph
	}
	from := time.Now()
	if want > 0 {
		// Normal from the start: the window is from the silence on.
		from = silencedAt
	}
	end := from.Add(zoneWindow)
	if want > 0 {
		end = from.Add(time.Duration(float64(want)/setting*float64(time.Second)) + 2*zoneGrace)
	}
	for time.Now().Before(end) {
		if want > 0 && len(tl.in(zone, from, time.Now())) >= want {
			break
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil { // polling the watch's record until the window ends
			ph.err = err.Error()
			return ph
		}
	}
	ts := tl.in(zone, from, time.Now())
	ph.tainted = len(ts)
	if len(ts) >= 2 {
		ph.secs = ts[len(ts)-1].Sub(ts[0]).Seconds()
		ph.rate = float64(len(ts)-1) / ph.secs
	}
	log.Printf("zone bench, %s: %s, %d tainted at %.3f nodes/s (setting %.2f)", name, state, ph.tainted, ph.rate, setting)
	return ph
}

func waitZones(ctx context.Context, cl *client.Client, timeout time.Duration, ok func(*api.ZoneList) bool) error {
	deadline := time.Now().Add(timeout)
	var last string
	for {
		l, err := cl.Zones(ctx)
		if err == nil && ok(l) {
			return nil
		}
		if err != nil {
			last = err.Error()
		} else {
			last = fmt.Sprintf("%+v", l.Items)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: not within %v; zones: %s", errEvictionBench, timeout, last)
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil { // polling the zones endpoint, with a deadline
			return err
		}
	}
}

var errEvictionBench = errors.New("eviction benchmark")

// benchCluster is three servers in a temporary directory, the leader and
// an admin client of it.
type benchCluster struct {
	root   string
	c      *proc.Cluster
	leader *proc.Server
	cl     *client.Client
	admin  client.Config
}

func startBenchCluster(ctx context.Context, bin, prefix string, args ...string) (_ *benchCluster, err error) {
	bc := &benchCluster{}
	if bc.root, err = os.MkdirTemp("", prefix); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			bc.close()
		}
	}()
	if bc.c, err = proc.StartCluster(ctx, bin, bc.root, 3, withMemLimit(args...)...); err != nil {
		return nil, err
	}
	if bc.leader, bc.cl, err = leaderClient(ctx, bc.c); err != nil {
		return nil, err
	}
	if bc.admin, err = bc.leader.AdminConfig(); err != nil {
		return nil, err
	}
	return bc, nil
}

func (bc *benchCluster) close() {
	if bc.c != nil {
		bc.c.Stop()
	}
	os.RemoveAll(bc.root)
}

// startSim runs count simulated nodes named name-NNNN in zone.
func startSim(ctx context.Context, ccfg client.Config, name, zone string, count int, hb time.Duration, pods bool) (*sim.Agents, error) {
	doc := fmt.Sprintf("apiVersion: v1\nkind: Node\nmetadata:\n  name: %s\n  labels:\n    topology.kubernetes.io/zone: %s\n", name, zone)
	nodes, _, err := sim.LoadNodes([]byte(doc))
	if err != nil {
		return nil, err
	}
	return sim.Start(ctx, sim.Config{Client: ccfg, Nodes: nodes, Count: count, Heartbeat: hb, DisablePods: !pods,
		Logger: slog.New(slog.DiscardHandler)})
}

// watchNodes feeds every node, and every change of one, to see until
// ctx ends, listing again when the watch falls too far behind; it
// returns after the first list.
func watchNodes(ctx context.Context, cl *client.Client, see func(*api.Node, time.Time)) error {
	listed := make(chan struct{})
	var once sync.Once
	go cl.ListWatch(ctx, api.ResourceForKind("Node"), "", client.ListOptions{}, client.ListWatchHandler{
		Reset: func(objs []api.Object) {
			now := time.Now()
			for _, o := range objs {
				see(o.(*api.Node), now)
			}
			once.Do(func() { close(listed) })
		},
		Event: func(_ string, o api.Object) {
			if n, ok := o.(*api.Node); ok {
				see(n, time.Now())
			}
		},
	})
	select {
	case <-listed:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// controllersCPU profiles the leader for secs seconds and returns the
// cores spent in stacks through the controllers and their informers,
// with pprof's top of them.
func controllersCPU(ctx context.Context, bin string, cl *client.Client, secs int) (float64, string) {
	body, _, err := cl.Do(ctx, "GET", "/debug/pprof/profile", url.Values{"seconds": {fmt.Sprint(secs)}}, nil)
	if err != nil {
		return 0, "profile failed: " + err.Error()
	}
	f := filepath.Join(os.TempDir(), fmt.Sprintf("outpost-evict-%d.pprof", time.Now().UnixNano()))
	if err := os.WriteFile(f, body, 0o600); err != nil {
		return 0, err.Error()
	}
	defer os.Remove(f)
	// No node dropped, so that "Showing nodes accounting for" is every
	// sample the focus keeps.
	out, err := exec.Command("go", "tool", "pprof", "-top", "-cum", "-nodefraction=0", "-edgefraction=0", "-nodecount=1000000",
		"-focus", `outpost/controlplane/controllers?\.`, bin, f).CombinedOutput()
	if err != nil {
		return 0, "pprof failed: " + err.Error() + ": " + string(out)
	}
	var keep []string
	shown := 0
	for _, l := range strings.Split(string(out), "\n") {
		switch {
		case strings.Contains(l, "flat%"), strings.Contains(l, "Duration"), strings.HasPrefix(strings.TrimSpace(l), "Showing"):
			keep = append(keep, l)
		case strings.Contains(l, "outpost") && shown < 20:
			keep = append(keep, l)
			shown++
		}
	}
	return profileCores(string(out)), strings.Join(keep, "\n")
}

var (
	profDuration = regexp.MustCompile(`Duration: ([0-9.]+[a-zµ]+)`)
	profFocused  = regexp.MustCompile(`Showing nodes accounting for ([0-9.]+[a-zµ]+),`)
)

// profileCores is the focused samples' time over the profile's duration.
func profileCores(top string) float64 {
	m, f := profDuration.FindStringSubmatch(top), profFocused.FindStringSubmatch(top)
	if m == nil || f == nil {
		return 0
	}
	d, err1 := time.ParseDuration(m[1])
	x, err2 := time.ParseDuration(f[1])
	if err1 != nil || err2 != nil || d <= 0 {
		return 0
	}
	return x.Seconds() / d.Seconds()
}

// --- 10,000 pods on 1,000 nodes, 100 nodes tainted NoExecute at once ---

const (
	massNodes       = 1000
	massDeployments = 10
	massReplicas    = 1000
	massTainted     = 100
	massTaintKey    = "bench.outpost.io/evict"
)

type massResult struct {
	pods, nodes, tainted int
	setup                time.Duration
	taintWrites          time.Duration // the 100 node updates
	marked, gone, back   time.Duration // from the first taint write
	evicted              int
	probeGet, probePut   []time.Duration
	probeErrs            int
	leaderCPU            float64
	err                  string
}

func runMassEvictionBench(ctx context.Context, bin string) (r massResult) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Minute)
	defer cancel()
	if err := massEviction(ctx, bin, &r); err != nil {
		r.err = err.Error()
		log.Printf("mass eviction bench: %v", err)
	}
	return r
}

// podTrack follows every pod of the namespace through a watch.
type podTrack struct {
	mu       sync.Mutex
	pods     map[string]*api.Pod // by UID
	tainted  map[string]bool     // node names
	markedAt time.Time           // when no pod on a tainted node was left unmarked
}

func (t *podTrack) reset(objs []api.Object) {
	t.mu.Lock()
	defer t.mu.Unlock()
	clear(t.pods)
	for _, o := range objs {
		if p, ok := o.(*api.Pod); ok {
			t.pods[p.UID] = p
		}
	}
}

func (t *podTrack) see(typ string, p *api.Pod) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if typ == client.EventDeleted {
		delete(t.pods, p.UID)
		return
	}
	t.pods[p.UID] = p
}

// counts: pods on tainted nodes (and of those, not yet marked for
// deletion), and Running pods elsewhere.
func (t *podTrack) counts() (onTainted, unmarked, runningElsewhere int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range t.pods {
		switch {
		case t.tainted[p.Spec.NodeName]:
			onTainted++
			if p.DeletionTimestamp == nil {
				unmarked++
			}
		case p.Spec.NodeName != "" && p.Status.Phase == api.PodRunning && p.DeletionTimestamp == nil:
			runningElsewhere++
		}
	}
	return
}

func massEviction(ctx context.Context, bin string, r *massResult) error {
	bc, err := startBenchCluster(ctx, bin, "outpost-mass-evict-bench-")
	if err != nil {
		return err
	}
	defer bc.close()
	leader, cl, ccfg := bc.leader, bc.cl, bc.admin
	began := time.Now()
	agents, err := startSim(ctx, ccfg, "mass", "zone-a", massNodes, 10*time.Second, true)
	if err != nil {
		return err
	}
	defer agents.Stop()
	r.nodes = massNodes
	if err := waitNodes(ctx, cl, massNodes, 10*time.Minute); err != nil {
		return err
	}
	const ns = "mass"
	if _, _, err := cl.Create(ctx, &api.Namespace{ObjectMeta: api.ObjectMeta{Name: ns}}); err != nil && !api.IsAlreadyExists(err) {
		return err
	}
	tr := &podTrack{pods: map[string]*api.Pod{}, tainted: map[string]bool{}}
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go cl.ListWatch(wctx, api.ResourceForKind("Pod"), ns, client.ListOptions{}, client.ListWatchHandler{
		Reset: tr.reset,
		Event: func(typ string, o api.Object) {
			if p, ok := o.(*api.Pod); ok {
				tr.see(typ, p)
			}
		},
	})
	replicas := int32(massReplicas)
	for i := range massDeployments {
		name := fmt.Sprintf("web-%d", i)
		d := &api.Deployment{ObjectMeta: api.ObjectMeta{Name: name, Namespace: ns},
			Spec: api.DeploymentSpec{Replicas: &replicas, Selector: &api.LabelSelector{MatchLabels: map[string]string{"app": name}},
				Template: api.PodTemplateSpec{ObjectMeta: api.ObjectMeta{Labels: map[string]string{"app": name}},
					Spec: api.PodSpec{Containers: []api.Container{{Name: "app", Image: "registry.local/pause:3.9",
						Resources: api.ResourceRequirements{Requests: api.ResourceList{
							"cpu": api.MustParseQuantity("10m"), "memory": api.MustParseQuantity("16Mi")}}}}}}}}
		if _, _, err := cl.Create(ctx, d); err != nil {
			return fmt.Errorf("deployment %s: %w", name, err)
		}
	}
	r.pods = massDeployments * massReplicas
	if err := waitPods(ctx, tr, r.pods, 15*time.Minute); err != nil {
		return err
	}
	r.setup = time.Since(began).Round(time.Second)
	log.Printf("mass eviction bench: %d pods Running on %d nodes after %v", r.pods, massNodes, r.setup)

	// The 100 busiest nodes... any 100 will do: the first by name.
	names := agents.Names()
	sort.Strings(names)
	victims := names[:massTainted]
	tr.mu.Lock()
	for _, n := range victims {
		tr.tainted[n] = true
	}
	tr.mu.Unlock()
	onTainted, _, _ := tr.counts()
	r.tainted = massTainted

	pctx, stopProbe := context.WithCancel(ctx)
	var pwg sync.WaitGroup
	pwg.Go(func() { probeAPI(pctx, cl, ns, names[len(names)-1], r) })
	cpu0 := leaderCPU(leader)
	t0 := time.Now()
	if err := parallel(len(victims), 32, func(i int) error { return taintNode(ctx, cl, victims[i]) }); err != nil {
		stopProbe()
		pwg.Wait()
		return fmt.Errorf("tainting: %w", err)
	}
	r.taintWrites = time.Since(t0)
	deadline := t0.Add(10 * time.Minute)
	for r.back == 0 {
		if time.Now().After(deadline) {
			break
		}
		on, unmarked, elsewhere := tr.counts()
		now := time.Since(t0)
		if r.marked == 0 && unmarked == 0 {
			r.marked = now
		}
		if r.gone == 0 && on == 0 {
			r.gone = now
		}
		if r.gone != 0 && elsewhere >= r.pods {
			r.back = now
		}
		if err := sleepCtx(ctx, 50*time.Millisecond); err != nil { // polling the watch's record, with a deadline
			break
		}
	}
	r.leaderCPU = (leaderCPU(leader) - cpu0).Seconds() / time.Since(t0).Seconds()
	stopProbe()
	pwg.Wait()
	r.evicted = onTainted
	if r.back == 0 {
		on, unmarked, elsewhere := tr.counts()
		return fmt.Errorf("%w: after 10 minutes %d pods on tainted nodes (%d unmarked), %d of %d Running elsewhere", errEvictionBench, on, unmarked, elsewhere, r.pods)
	}
	log.Printf("mass eviction bench: %d pods evicted; all marked %v, gone %v, all %d Running again %v", r.evicted, r.marked, r.gone, r.pods, r.back)
	return nil
}

func waitPods(ctx context.Context, tr *podTrack, n int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		_, _, running := tr.counts()
		if running >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: %d of %d pods Running after %v", errEvictionBench, running, n, timeout)
		}
		if err := sleepCtx(ctx, 500*time.Millisecond); err != nil { // polling the watch's record, with a deadline
			return err
		}
	}
}

// taintNode adds the benchmark's NoExecute taint to node name, retrying
// on conflicts with the nodes' own status writes.
func taintNode(ctx context.Context, cl *client.Client, name string) error {
	nodesR := api.ResourceForKind("Node")
	for range 20 {
		o, err := cl.Get(ctx, nodesR, "", name, client.GetOptions{})
		if err != nil {
			return err
		}
		n := o.(*api.Node)
		n.Spec.Taints = append(n.Spec.Taints, api.Taint{Key: massTaintKey, Effect: api.TaintEffectNoExecute})
		_, _, err = cl.Update(ctx, n)
		if err == nil || !api.IsConflict(err) {
			return err
		}
	}
	return fmt.Errorf("%w: node %s: 20 conflicts in a row", errEvictionBench, name)
}

// probeAPI measures the API while the eviction runs: a GET of a node and
// a label update of it (a raft write), every 50 ms each.
func probeAPI(ctx context.Context, cl *client.Client, ns, node string, r *massResult) {
	nodesR := api.ResourceForKind("Node")
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		t := time.Now()
		o, err := cl.Get(ctx, nodesR, "", node, client.GetOptions{})
		if err != nil {
			if ctx.Err() == nil {
				r.probeErrs++
			}
			continue
		}
		r.probeGet = append(r.probeGet, time.Since(t))
		n := o.(*api.Node)
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		n.Labels["bench.outpost.io/probe"] = fmt.Sprint(i)
		t = time.Now()
		if _, _, err := cl.Update(ctx, n); err != nil {
			if ctx.Err() == nil && !api.IsConflict(err) {
				r.probeErrs++
			}
			continue
		}
		r.probePut = append(r.probePut, time.Since(t))
	}
}

// --- the real-agent benchmark, run from testing/e2e ---

// cutOffBench runs BenchmarkCutOffReplacement and returns its result
// lines (and its log of each run).
func cutOffBench(ctx context.Context, bin string) string {
	return e2eBench(ctx, bin, "BenchmarkCutOffReplacement", "3x", "eviction_bench_test.go", nil)
}

// e2eBench runs the Go benchmark name of testing/e2e against bin and
// returns the benchmark's name lines and the log lines of its file
// logFile (each run's findings).
func e2eBench(ctx context.Context, bin, name, benchtime, logFile string, env []string) string {
	abs, err := filepath.Abs(bin)
	if err != nil {
		return err.Error()
	}
	cmd := exec.CommandContext(ctx, "go", "test", "-run", "^$", "-bench", "^"+name+"$", "-benchtime", benchtime, "-timeout", "60m", "./testing/e2e/")
	cmd.Env = append(append(os.Environ(), "OUTPOST_BIN="+abs, "OUTPOST_TEST_REAL=1"), env...)
	out, err := cmd.CombinedOutput()
	// The test's own logs interleave with go test's lines: keep the
	// benchmark's name and its log (each run, then the means).
	var keep []string
	for _, l := range strings.Split(string(out), "\n") {
		t := strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, "Benchmark"):
			keep = append(keep, strings.Join(strings.Fields(l), " "))
		case strings.HasPrefix(t, logFile):
			keep = append(keep, "    "+t[strings.Index(t, " ")+1:])
		}
	}
	if err != nil {
		keep = append(keep, "go test failed: "+err.Error(), lastLine(string(out)))
	}
	return strings.Join(keep, "\n")
}

// --- report ---

func evictionMarkdown(cut string, z *zoneResult, m *massResult, cmd string) string {
	var b strings.Builder
	b.WriteString("\n## Eviction (issue 10)\n\n`" + cmd + "`.\n\n")
	if cut != "" {
		b.WriteString("### A node cut off → its replacement Running (real agents)\n\n")
		b.WriteString("`BenchmarkCutOffReplacement` in testing/e2e (3 cuts per fence margin): one `outpost server`, two `outpost agent`s with their own containerd in network namespaces (heartbeat 1s), `--node-monitor-grace-period 4s`; one pod that prefers edge-2, tolerates `unreachable`/`not-ready` for 0 s and has a grace period of 1 s. edge-2's link is cut; 20 ms polls of the API and of edge-2's containerd time each step from the cut; the last line of each margin is the means. Target: replacement Running in under 8 s.\n\n")
		b.WriteString("The release cannot come earlier than the node's last sign of life + 4 s grace + 0 s toleration + 1 s pod grace + `--fence-margin`: that wait is what makes sure the cut-off copy has stopped before the replacement starts (Kubernetes replaces at once and may run both; its defaults take about 5 min 50 s).\n\n```\n")
		b.WriteString(cut)
		b.WriteString("\n```\n")
	}
	if z != nil {
		b.WriteString("\n### Zone-aware tainting rate, 2,000 simulated nodes in 4 zones\n\n")
		fmt.Fprintf(&b, "Three servers; %d simulated nodes (zone a 1,000, b 250, c 250, d 500) heartbeating every %v, `--node-monitor-grace-period %v --node-eviction-rate %g --secondary-node-eviction-rate %g` (defaults 0.1 and 0.01; the limiter is the same, the rates are raised so that each state is measured in seconds). Groups of nodes go silent at once; a watch records when each node gets `unreachable:NoExecute`; each window starts when `GET /apis/outpost.io/v1/zones` reports the state. Rate = (nodes tainted − 1) / (last − first). Registration took %v.\n\n",
			z.nodes, zoneHeartbeat, zoneGrace, zoneRate, zoneSecondary, z.register)
		if z.err != "" {
			fmt.Fprintf(&b, "**Failed:** %s\n\n", z.err)
		}
		b.WriteString("| silent | zone state | setting (nodes/s) | tainted | over s | measured (nodes/s) | vs setting |\n|---|---|---:|---:|---:|---:|---:|\n")
		for _, p := range z.phases {
			if p.err != "" {
				fmt.Fprintf(&b, "| %s | %s | %g | failed: %s | | | |\n", p.name, p.state, p.setting, p.err)
				continue
			}
			fmt.Fprintf(&b, "| %s | %s | %g | %d | %.1f | %.3f | %+.1f %% |\n", p.name, p.state, p.setting, p.tainted, p.secs, p.rate, (p.rate/p.setting-1)*100)
		}
		fmt.Fprintf(&b, "\nThe other zones: %s. Master disruption (every zone silent): every eviction taint gone %.1f s after the zones endpoint reported it; %d nodes tainted in the %v after.\n\n",
			z.untouched, z.masterCleared.Seconds(), z.masterAdded, zoneWindow)
		fmt.Fprintf(&b, "Leader CPU over the three phases: %.2f cores for the whole process (it also serves 400 heartbeats/s). The controllers' share, from a %d s CPU profile of the leader covering the last two phases (stacks through `controlplane/controllers` or `controlplane/controller`, the informers): **%.3f cores** (target under 0.25).\n\n```\n%s\n```\n",
			z.leaderCPU, int((zoneGrace + 2*zoneWindow).Seconds()), z.ctrlCPU, z.ctrlProfile)
	}
	if m != nil {
		b.WriteString("\n### 10,000 pods on 1,000 simulated nodes, 100 nodes tainted NoExecute at once\n\n")
		fmt.Fprintf(&b, "Three servers with the default scheduler; 1,000 simulated nodes (they mark pods Running and finish deletes at once); %d deployments of %d replicas without tolerations (setup %v). 100 nodes get `%s:NoExecute` from 32 clients at once; a watch of the pods times the rest from the first taint write. Meanwhile a probe GETs a node and updates its label every 50 ms.\n\n",
			massDeployments, massReplicas, m.setup, massTaintKey)
		if m.err != "" {
			fmt.Fprintf(&b, "**Failed:** %s\n\n", m.err)
		}
		fmt.Fprintf(&b, "| pods evicted | taint writes s | all marked s | all gone s | all %d Running again s | leader CPU (cores) |\n|---:|---:|---:|---:|---:|---:|\n| %d | %.2f | %.2f | %.2f | %.2f | %.2f |\n\n",
			m.pods, m.evicted, m.taintWrites.Seconds(), m.marked.Seconds(), m.gone.Seconds(), m.back.Seconds(), m.leaderCPU)
		slices.Sort(m.probeGet)
		slices.Sort(m.probePut)
		fmt.Fprintf(&b, "API latency meanwhile: GET node p50 %.1f ms, p99 %.1f ms, max %.1f ms (%d probes); node update p50 %.1f ms, p99 %.1f ms, max %.1f ms (%d); %d probe errors.\n",
			ms(pct(m.probeGet, 50)), ms(pct(m.probeGet, 99)), ms(pct(m.probeGet, 100)), len(m.probeGet),
			ms(pct(m.probePut, 50)), ms(pct(m.probePut, 99)), ms(pct(m.probePut, 100)), len(m.probePut), m.probeErrs)
	}
	return b.String()
}

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/runtime"
	"github.com/outpost-edge/outpost/testing/netns"
)

// evictManifest: 4 tickers that tolerate an unreachable node for 6 s,
// spread over the nodes, and a daemon set (which tolerates it for ever).
const evictManifest = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: ticker
spec:
  replicas: 4
  selector:
    matchLabels: {app: ticker}
  template:
    metadata:
      labels: {app: ticker}
    spec:
      terminationGracePeriodSeconds: 2
      tolerations:
        - {key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: 6}
      affinity:
        podAntiAffinity:
          preferredDuringSchedulingIgnoredDuringExecution:
            - weight: 100
              podAffinityTerm:
                topologyKey: kubernetes.io/hostname
                labelSelector:
                  matchLabels: {app: ticker}
      containers:
        - name: ticker
          image: ` + demoImage + `
          imagePullPolicy: IfNotPresent
          args: ["tick", "-every", "1s"]
          resources:
            requests: {cpu: 10m, memory: 16Mi}
---
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: keeper
spec:
  selector:
    matchLabels: {app: keeper}
  template:
    metadata:
      labels: {app: keeper}
    spec:
      terminationGracePeriodSeconds: 2
      containers:
        - name: keeper
          image: ` + demoImage + `
          imagePullPolicy: IfNotPresent
          args: ["tick", "-every", "1s"]
`

// twoEdges starts a server (node monitor grace 4 s, fence margin
// margin) and agents edge-1 and edge-2 (heartbeat 1 s) in test hosts
// host and host+1, both Ready with the demo image.
func twoEdges(t testing.TB, ctx context.Context, archive string, host int, margin string) (c *testCluster, n1, n2 *agentNode, h1, h2 *netns.Host) {
	t.Helper()
	root := t.TempDir()
	h1, h2 = netns.New(t, host), netns.New(t, host+1)
	c = startServer(t, root, h1.Gateway, "--node-monitor-grace-period", "4s", "--fence-margin", margin)
	n1 = newAgent(t, "edge-1", h1, filepath.Join(root, "n1"), fmt.Sprintf("https://%s:%d", h1.Gateway, c.apiPort), c.joinString(ctx), "--heartbeat", "1s")
	n2 = newAgent(t, "edge-2", h2, filepath.Join(root, "n2"), fmt.Sprintf("https://%s:%d", h2.Gateway, c.apiPort), c.joinString(ctx), "--heartbeat", "1s")
	n1.start()
	n2.start()
	c.waitReady("edge-1", "True", time.Minute)
	c.waitReady("edge-2", "True", time.Minute)
	c.importImage(ctx, archive, "edge-1")
	c.importImage(ctx, archive, "edge-2")
	return c, n1, n2, h1, h2
}

// sampled is what the sampler saw of one container: running from first
// to last (the last sample that found it running).
type sampled struct {
	node, pod, app string
	started        time.Time // containerd's start time
	first, last    time.Time
}

// sampler looks at every node's running containers every interval, from
// outside the hosts (containerd's socket is not in a network namespace).
type sampler struct {
	interval time.Duration
	mu       sync.Mutex
	seen     map[string]*sampled // by container ID
	// most is the most tickers seen running at once.
	most     int
	mostWhen time.Time
	// rounds counts the samples taken of every node.
	rounds int
}

func (s *sampler) run(ctx context.Context, nodes []*agentNode) {
	tick := time.NewTicker(s.interval)
	defer tick.Stop()
	for ctx.Err() == nil {
		now := time.Now()
		tickers := 0
		for _, n := range nodes {
			cs, err := n.rt.ListContainers(ctx)
			if err != nil {
				// A restarted agent's containerd is briefly away; the
				// containers run on (shims), and the next sample sees them.
				continue
			}
			s.mu.Lock()
			for _, c := range cs {
				if c.State != runtime.StateRunning {
					continue
				}
				app := c.Labels[runtime.LabelPodName]
				if strings.HasPrefix(app, "ticker-") {
					tickers++
				}
				sm := s.seen[c.ID]
				if sm == nil {
					sm = &sampled{node: n.name, pod: c.Labels[runtime.LabelPodName], app: strings.SplitN(app, "-", 2)[0], started: c.StartedAt, first: now}
					s.seen[c.ID] = sm
				}
				sm.last = now
			}
			s.mu.Unlock()
		}
		s.mu.Lock()
		if tickers > s.most {
			s.most, s.mostWhen = tickers, now
		}
		s.rounds++
		s.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
}

func (s *sampler) containers() []sampled {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]sampled, 0, len(s.seen))
	for _, sm := range s.seen {
		out = append(out, *sm)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].first.Before(out[j].first) })
	return out
}

// Issue 10, "How it is checked", the end-to-end bullet: real agents and
// containerd in network namespaces, node monitor grace 4 s, tickers that
// tolerate unreachable for 6 s. One node cut off: its tickers are
// recreated on the other node, while its agent stopped its copies first
// (no ticker ever runs in more copies than the deployment's 4, and each
// replacement starts after the copy it replaces was last seen running);
// the daemon set's pod runs on throughout; the cut-off agent SIGKILLed
// and restarted does not bring its stopped pods back; healed, the node's
// stale pods are gone and nothing restarts that did not need to.
func TestEvictionNeverRunsTwo(t *testing.T) {
	requireReal(t)
	_, archive := buildDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, n1, n2, h1, h2 := twoEdges(t, ctx, archive, 43, "2s")
	c.apply(ctx, "evict", evictManifest)
	var before []*api.Pod
	waitFor(t, 90*time.Second, "4 tickers on both nodes and a keeper on each", func() (bool, string) {
		ts, err := c.pods(ctx, "app=ticker")
		if err != nil {
			return false, err.Error()
		}
		ks, err := c.pods(ctx, "app=keeper")
		if err != nil {
			return false, err.Error()
		}
		before = ts
		return len(ts) == 4 && allRunning(ts) && len(nodesOf(ts)) == 2 && len(ks) == 2 && allRunning(ks), describePods(append(ts, ks...))
	})
	onCut := 0
	for _, p := range before {
		if p.Spec.NodeName == "edge-2" {
			onCut++
		}
	}
	if _, err := n1.containers(ctx); err != nil {
		t.Fatal(err)
	}
	keeperBefore := runningByPod(t, ctx, n2)
	s := &sampler{interval: 50 * time.Millisecond, seen: map[string]*sampled{}}
	sctx, stopSampler := context.WithCancel(ctx)
	var swg sync.WaitGroup
	swg.Go(func() { s.run(sctx, []*agentNode{n1, n2}) })
	defer func() { stopSampler(); swg.Wait() }()

	waitFor(t, 10*time.Second, "the sampler's first round", func() (bool, string) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.rounds > 0, "none"
	})
	// Cut edge-2 off.
	cut := time.Now()
	h2.Cut(t)
	var unknownAt, replacedAt time.Time
	waitFor(t, 60*time.Second, "edge-2's tickers replaced on edge-1", func() (bool, string) {
		if unknownAt.IsZero() {
			if n, err := c.node(ctx, "edge-2"); err == nil && readyStatus(n) == "Unknown" {
				unknownAt = time.Now()
			}
		}
		ts, err := c.pods(ctx, "app=ticker")
		if err != nil {
			return false, err.Error()
		}
		on1 := 0
		for _, p := range ts {
			if p.Spec.NodeName == "edge-1" && allRunning([]*api.Pod{p}) {
				on1++
			}
		}
		if on1 == 4 && replacedAt.IsZero() {
			replacedAt = time.Now()
		}
		return on1 == 4, describePods(ts)
	})
	t.Logf("MEASURED cut → edge-2 Ready=Unknown %v; → all 4 tickers Running on edge-1 %v", since(cut, unknownAt), since(cut, replacedAt))

	// The daemon set's pod ran on, the same container.
	if now := runningByPod(t, ctx, n2); !sameKeeper(keeperBefore, now) {
		t.Errorf("edge-2's keeper did not run on while cut off: before %v, after %v", keeperBefore, now)
	}

	// Still cut off: the agent is SIGKILLed and starts again; it must not
	// bring its stopped tickers back.
	n2.kill9()
	n2.start()
	waitFor(t, 30*time.Second, "the restarted agent's containerd and its keeper", func() (bool, string) {
		if !n2.alive() {
			t.Fatal("edge-2's agent exited after its restart")
		}
		cs, err := n2.containers(ctx)
		if err != nil {
			return false, err.Error() // its containerd is starting
		}
		now := map[string]runtime.ContainerStatus{}
		for _, st := range cs {
			if st.State == runtime.StateRunning {
				now[st.Labels[runtime.LabelPodName]] = st
			}
		}
		return sameKeeper(keeperBefore, now), fmt.Sprint(now)
	})
	// Give it time to act on its state file, measured by its heartbeat
	// attempts: several status checks pass in 5 s.
	restartedAt := time.Now()
	waitFor(t, 30*time.Second, "5 s of the restarted agent", func() (bool, string) {
		return time.Since(restartedAt) > 5*time.Second, ""
	})

	// Heal.
	h2.Restore(t)
	c.waitReady("edge-2", "True", 60*time.Second)
	waitFor(t, 30*time.Second, "edge-2's taints gone", func() (bool, string) {
		n, err := c.node(ctx, "edge-2")
		if err != nil {
			return false, err.Error()
		}
		for _, tn := range n.Spec.Taints {
			if tn.Key == api.TaintNodeUnreachable || tn.Key == api.TaintNodeNotReady {
				return false, fmt.Sprint(n.Spec.Taints)
			}
		}
		return true, ""
	})
	afterHeal, err := c.pods(ctx, "app=ticker")
	if err != nil {
		t.Fatal(err)
	}
	healedAt := time.Now()
	waitFor(t, 30*time.Second, "10 s after the heal", func() (bool, string) {
		return time.Since(healedAt) > 10*time.Second, ""
	})
	stopSampler()
	swg.Wait()

	// Nothing ran twice: never more than 4 tickers at once, and every
	// ticker that started after the cut on edge-1 started after a copy
	// on edge-2 was last seen running.
	if s.most > 4 {
		t.Errorf("%d tickers ran at once at %v; the deployment has 4", s.most, s.mostWhen)
	}
	var lastOnCut time.Time
	replacements := 0
	for _, sm := range s.containers() {
		if sm.app == "ticker" && sm.node == "edge-2" && sm.last.After(lastOnCut) {
			lastOnCut = sm.last
		}
	}
	for _, sm := range s.containers() {
		if sm.app != "ticker" || sm.node != "edge-1" || sm.first.Before(cut) {
			continue
		}
		started := sm.started
		if started.IsZero() {
			started = sm.first
		}
		replacements++
		// The true stop may be up to one sample after the last sighting.
		if !started.After(lastOnCut.Add(s.interval)) {
			t.Errorf("replacement %s started at %v, while a ticker still ran on edge-2 (last seen %v)", sm.pod, started, lastOnCut)
		}
		t.Logf("MEASURED replacement %s started %v after edge-2's tickers were last seen running", sm.pod, started.Sub(lastOnCut).Round(time.Millisecond))
	}
	t.Logf("MEASURED cut → edge-2's agent stopped its %d tickers (last seen running) %v", onCut, since(cut, lastOnCut))
	if replacements != onCut {
		t.Errorf("%d replacements seen running on edge-1, want %d (edge-2's tickers)", replacements, onCut)
	}
	for _, sm := range s.containers() {
		if sm.app == "ticker" && sm.node == "edge-2" && sm.last.After(replacedAt) {
			t.Errorf("ticker %s ran on edge-2 at %v, after its replacement ran on edge-1", sm.pod, sm.last)
		}
	}
	// After the heal nothing was recreated or restarted.
	final, err := c.pods(ctx, "app=ticker")
	if err != nil {
		t.Fatal(err)
	}
	if names(final) != names(afterHeal) || len(final) != 4 {
		t.Errorf("tickers changed after the heal: %s, then %s", names(afterHeal), names(final))
	}
	if now := runningByPod(t, ctx, n2); !sameKeeper(keeperBefore, now) {
		t.Errorf("edge-2's keeper restarted: before %v, after %v", keeperBefore, now)
	}
	for pod, st := range runningByPod(t, ctx, n2) {
		if strings.HasPrefix(pod, "ticker-") {
			t.Errorf("a ticker (%s, %s) runs on edge-2 after the heal; all 4 had moved to edge-1", pod, st.ID)
		}
	}

	// Every node cut off: the control plane takes itself for the one cut
	// off (TNT-8, every zone in FullDisruption) and evicts nothing, well
	// past grace + toleration + grace period + margin (4 + 6 + 2 + 2 s).
	// The agents stop the tickers by their own rule (TNT-9: they cannot
	// tell) and start them again when the links return.
	h1.Cut(t)
	h2.Cut(t)
	allCut := time.Now()
	waitFor(t, 30*time.Second, "both nodes Unknown", func() (bool, string) {
		a, err1 := c.node(ctx, "edge-1")
		b, err2 := c.node(ctx, "edge-2")
		if err1 != nil || err2 != nil {
			return false, fmt.Sprint(err1, err2)
		}
		return readyStatus(a) == "Unknown" && readyStatus(b) == "Unknown", readyStatus(a) + " " + readyStatus(b)
	})
	waitFor(t, 60*time.Second, "20 s with every node cut off", func() (bool, string) {
		ps, err := c.pods(ctx, "app=ticker")
		if err != nil {
			return false, err.Error()
		}
		for _, p := range ps {
			if p.DeletionTimestamp != nil {
				t.Fatalf("pod %s evicted while every node was cut off", p.Name)
			}
		}
		return time.Since(allCut) > 20*time.Second, names(ps)
	})
	// A node marked a moment before the other may be tainted until the
	// zones are looked at again; by now neither is.
	for _, n := range []string{"edge-1", "edge-2"} {
		node, err := c.node(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		for _, tn := range node.Spec.Taints {
			if tn.Effect == api.TaintEffectNoExecute {
				t.Errorf("node %s has %s:NoExecute with every node cut off", n, tn.Key)
			}
		}
	}
	h1.Restore(t)
	h2.Restore(t)
	waitFor(t, 90*time.Second, "the same 4 tickers Running again", func() (bool, string) {
		ps, err := c.pods(ctx, "app=ticker")
		if err != nil {
			return false, err.Error()
		}
		return names(ps) == names(final) && allRunning(ps), describePods(ps)
	})
}

func since(from, at time.Time) string {
	if at.IsZero() {
		return "not seen"
	}
	return at.Sub(from).Round(100 * time.Millisecond).String()
}

// sameKeeper reports whether the keeper container of before still runs,
// the same one, in now.
func sameKeeper(before, now map[string]runtime.ContainerStatus) bool {
	for pod, st := range before {
		if strings.HasPrefix(pod, "keeper-") {
			cur, ok := now[pod]
			return ok && cur.ID == st.ID
		}
	}
	return false
}

func names(ps []*api.Pod) string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

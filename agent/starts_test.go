package agent_test

import (
	"context"
	"fmt"
	goruntime "runtime"
	"sync"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/agent/podnet"
	"github.com/outpost-edge/outpost/runtime"
	"github.com/outpost-edge/outpost/runtime/fake"
)

// gate holds callers until it opens and counts those in flight (entered,
// not yet done).
type gate struct {
	open chan struct{}

	mu            sync.Mutex
	inFlight, max int
}

func newGate() *gate { return &gate{open: make(chan struct{})} }

func (g *gate) enter(ctx context.Context) {
	g.mu.Lock()
	g.inFlight++
	g.max = max(g.max, g.inFlight)
	g.mu.Unlock()
	select {
	case <-g.open:
	case <-ctx.Done():
	}
}

func (g *gate) leave() {
	g.mu.Lock()
	g.inFlight--
	g.mu.Unlock()
}

func (g *gate) counts() (int, int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.inFlight, g.max
}

// gatedRuntime holds every container create at its gate, counted in
// flight until the container is started.
type gatedRuntime struct {
	*fake.Runtime
	*gate
}

func (g *gatedRuntime) CreateContainer(ctx context.Context, spec runtime.ContainerSpec) error {
	g.enter(ctx)
	return g.Runtime.CreateContainer(ctx, spec)
}

func (g *gatedRuntime) StartContainer(ctx context.Context, id string) error {
	defer g.leave()
	return g.Runtime.StartContainer(ctx, id)
}

// burstIsBounded creates more pods than an agent starts at once (twice
// the CPUs, at least 4) and checks that no more than that many are held
// at g at any time, then lets them all go and run.
func burstIsBounded(t *testing.T, e *env, g *gate, what string) {
	t.Helper()
	limit := max(4, 2*goruntime.NumCPU())
	pods := limit + 6
	for i := range pods {
		e.createPod(fmt.Sprintf("burst-%d", i), nil)
	}
	waitFor(t, fmt.Sprintf("%d %s in flight", limit, what), 20*time.Second, func() (bool, string) {
		n, _ := g.counts()
		return n >= limit, fmt.Sprintf("%d in flight", n)
	})
	// Every pod's worker runs by now: without the bound the others would
	// pile in within this window.
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		if _, m := g.counts(); m > limit {
			t.Fatalf("%d %s at once, want at most %d", m, what, limit)
		}
		time.Sleep(20 * time.Millisecond) // polling a negative condition over a bounded window
	}
	close(g.open)
	for i := range pods {
		e.waitPhase(fmt.Sprintf("burst-%d", i), "Running", nil)
	}
	if _, m := g.counts(); m != limit {
		t.Errorf("at most %d %s at once, want exactly %d (the bound, used)", m, what, limit)
	}
}

// A burst of pods is started a few containers at a time, so on a small
// host the first pods run early instead of all sharing the CPU and
// finishing together (issue 16 item 4); every pod still runs.
func TestBurstStartsAFewAtATime(t *testing.T) {
	e := newEnv(t)
	rt := &gatedRuntime{Runtime: e.rt, gate: newGate()}
	cfg := e.config(rt)
	cfg.JoinToken = e.joinString()
	e.start(cfg)
	burstIsBounded(t, e, rt.gate, "container creates")
}

// failingStarts refuses every start and records when each was asked.
type failingStarts struct {
	*fake.Runtime
	mu    sync.Mutex
	asked []time.Time
}

func (f *failingStarts) StartContainer(ctx context.Context, id string) error {
	f.mu.Lock()
	f.asked = append(f.asked, time.Now())
	f.mu.Unlock()
	return fmt.Errorf("%w: container %s: refused by the test", runtime.ErrStart, id)
}

func (f *failingStarts) times() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.asked...)
}

// A created container whose start keeps failing is retried after a pause,
// not at once: the worker spun on the runtime and the log (issue 16
// review).
func TestFailingStartIsRetriedAfterAPause(t *testing.T) {
	e := newEnv(t)
	rt := &failingStarts{Runtime: e.rt}
	cfg := e.config(rt)
	cfg.JoinToken = e.joinString()
	e.start(cfg)
	e.createPod("refused", nil)
	waitFor(t, "two starts asked", 20*time.Second, func() (bool, string) {
		n := len(rt.times())
		return n >= 2, fmt.Sprintf("%d asked", n)
	})
	ts := rt.times()
	for i := 1; i < len(ts); i++ {
		if gap := ts[i].Sub(ts[i-1]); gap < 500*time.Millisecond {
			t.Fatalf("start %d asked %v after the one before; want a pause (times %v)", i+1, gap, ts)
		}
	}
}

// gatedNet holds every pod network setup at its gate, counted in flight
// until the setup returns.
type gatedNet struct {
	*fakeNet
	*gate
}

func (g *gatedNet) Setup(ctx context.Context, p podnet.Pod) (podnet.Network, error) {
	g.enter(ctx)
	defer g.leave()
	return g.fakeNet.Setup(ctx, p)
}

// A pod's network setup is part of its start and shares its bound: the
// plugins' processes are CPU like the runtime's, and a burst whose pods
// all set up their networks at once finishes all of them late (issue 16
// item 4).
func TestBurstNetworkSetupsAFewAtATime(t *testing.T) {
	e := newEnv(t)
	net := &gatedNet{gate: newGate(), fakeNet: &fakeNet{nets: map[string]podnet.Network{}, ports: map[string][]podnet.PortMapping{}, setups: map[string]int{}}}
	cfg := e.config(e.rt)
	cfg.PodNetwork = net
	cfg.JoinToken = e.joinString()
	e.start(cfg)
	burstIsBounded(t, e, net.gate, "pod network setups")
}

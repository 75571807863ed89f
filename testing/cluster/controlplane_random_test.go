package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
	"github.com/outpost-edge/outpost/controlplane/controllers"
	"github.com/outpost-edge/outpost/controlplane/server"
)

// TestControlPlaneRandomized (issue 11, SPEC CPL-1..3): seeded random
// sequences of deleting a member's machine, stopping a server and
// starting it again, adding an eligible host and changing the failure
// domains, against the controllers and the real raft membership code
// (in-process servers over TCP). The test plays the hosts' agents: a
// host asked to serve gets a server of its name, and a host whose
// machine is gone has its server stopped. Sampled every 20 ms on the
// leader: never fewer than three voters, never more than four (one
// member change in flight). Once the faults stop, the set converges:
// three reachable voters, balanced over its domains.
//
// OUTPOST_RANDOM_SEED replays a seed (every run logs its own);
// OUTPOST_SOAK=1 (make soak) runs 60 steps instead of 8.
func TestControlPlaneRandomized(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("OUTPOST_RANDOM_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("OUTPOST_RANDOM_SEED=%q: %v", v, err)
		}
	}
	steps := 8
	if os.Getenv("OUTPOST_SOAK") != "" {
		steps = 60
	}
	t.Logf("seed %d (OUTPOST_RANDOM_SEED=%d replays it), %d steps", seed, seed, steps)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	ctx := ctxT(t, time.Duration(steps)*20*time.Second+4*time.Minute)
	opts := Options{Servers: 3, ControlLoops: true, Configure: func(cfg *server.Config) {
		// The test's nodes never heartbeat: unknown at once, so a
		// deleted machine's release does not wait for an agent.
		cfg.NodeMonitorGracePeriod = time.Second
	}}
	if p := os.Getenv("OUTPOST_RANDOM_LOG"); p != "" {
		// The servers' info records to a file, to follow a failing seed.
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		opts.Logger = slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	c := New(t, opts)
	c.WaitForLeader(ctx)
	e := &randomEnv{t: t, ctx: ctx, c: c, clients: map[string]*client.Client{}, zones: map[string]string{}}

	// s1..s3 serve in zones a, b, c; spares in a and b.
	for i, z := range []string{"a", "b", "c"} {
		e.addHost(fmt.Sprintf("s%d", i+1), z)
	}
	e.addHost("h1", "a")
	e.addHost("h2", "b")
	three := int32(3)
	e.create(&api.ControlPlaneMachineSet{ObjectMeta: api.ObjectMeta{Name: "cluster"}, Spec: api.ControlPlaneMachineSetSpec{
		Replicas: &three, State: api.ControlPlaneActive, Strategy: api.ControlPlaneStrategy{Type: api.StrategyRollingUpdate},
		FailureDomains: api.ControlPlaneFailureDomains{LabelKey: zoneLabel}}})

	sampleCtx, stopSampling := context.WithCancel(ctx)
	var sampler sync.WaitGroup
	sampler.Go(func() { e.sample(sampleCtx) })

	domainChoices := [][]string{nil, {"a", "b", "c"}, {"a", "b"}, {"b", "c", "d"}, {"a"}}
	var stopped *Member
	hosts := 2
	for step := range steps {
		var did string
		switch op := rng.IntN(5); {
		case op == 0:
			voters := e.voters()
			v := voters[rng.IntN(len(voters))]
			if _, err := e.admin().Delete(ctx, machinesRes, "", v, nil); err != nil && !api.IsNotFound(err) {
				t.Fatalf("delete machine %s: %v", v, err)
			}
			did = "delete machine " + v
		case op == 1 && stopped == nil:
			running := c.Running()
			stopped = running[rng.IntN(len(running))]
			c.Stop(stopped)
			did = "stop server " + stopped.ID
		case op == 1:
			did = e.restart(stopped)
			stopped = nil
		case op == 2:
			hosts++
			z := []string{"a", "b", "c", "d"}[rng.IntN(4)]
			name := fmt.Sprintf("h%d", hosts)
			e.addHost(name, z)
			did = "add eligible host " + name + " in zone " + z
		default:
			names := domainChoices[rng.IntN(len(domainChoices))]
			e.setDomains(names)
			did = fmt.Sprintf("failure domains %v", names)
		}
		t.Logf("step %d: %s; voters %v", step, did, e.voters())
		// The hosts' agents act for a while before the next fault.
		until := time.Now().Add(time.Duration(500+rng.IntN(2500)) * time.Millisecond)
		for time.Now().Before(until) {
			e.agents()
			time.Sleep(50 * time.Millisecond) // the agents' polling period
		}
	}
	if stopped != nil {
		t.Log(e.restart(stopped))
	}
	// Faults stop. Three spares in every zone of the final domains (a
	// domain may have to hold every member), so a balanced placement
	// exists whatever the faults used up.
	final := e.domains
	if len(final) == 0 {
		final = []string{"a", "b", "c", "d"}
	}
	for _, z := range final {
		for range 3 {
			hosts++
			e.addHost(fmt.Sprintf("h%d", hosts), z)
		}
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		e.agents()
		ok, why := e.converged()
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("seed %d: not converged 3 minutes after the faults stopped: %s", seed, why)
		}
		time.Sleep(50 * time.Millisecond) // the agents' polling period
	}
	stopSampling()
	sampler.Wait()
	e.mu.Lock()
	defer e.mu.Unlock()
	t.Logf("voters sampled %d times: between %d and %d", e.samples, e.min, e.max)
	if e.min < 3 || e.max > 4 {
		t.Errorf("seed %d: voters went to %d..%d, want 3..4 (never below three, one change at a time): %s", seed, e.min, e.max, strings.Join(e.bad, "; "))
	}
}

const zoneLabel = "topology.kubernetes.io/zone"

var (
	machinesRes = api.ResourceForKind("Machine")
	nodesRes    = api.ResourceForKind("Node")
	cpmsRes     = api.ResourceForKind("ControlPlaneMachineSet")
)

type randomEnv struct {
	t       *testing.T
	ctx     context.Context
	c       *Cluster
	clients map[string]*client.Client
	zones   map[string]string // host → zone
	domains []string

	mu       sync.Mutex
	min, max int
	samples  int
	bad      []string
}

// admin is a client of the leader (of any running server while there
// is none).
func (e *randomEnv) admin() *client.Client {
	m := e.c.Leader()
	if m == nil {
		m = e.c.Running()[0]
	}
	cl, ok := e.clients[m.ID]
	if !ok {
		cl = e.c.Client(m)
		e.clients[m.ID] = cl
	}
	return cl
}

func (e *randomEnv) create(o api.Object) {
	e.t.Helper()
	for {
		_, _, err := e.admin().Create(e.ctx, o)
		if err == nil || api.IsAlreadyExists(err) {
			return
		}
		if e.ctx.Err() != nil {
			e.t.Fatalf("create %s: %v", o.GetObjectMeta().Name, err)
		}
		time.Sleep(100 * time.Millisecond) // no leader for a moment: again
	}
}

// addHost registers a node as an eligible host's agent would (Ready, in
// zone); the machine controller makes its machine.
func (e *randomEnv) addHost(name, zone string) {
	e.t.Helper()
	e.zones[name] = zone
	e.create(&api.Node{ObjectMeta: api.ObjectMeta{Name: name, Labels: map[string]string{zoneLabel: zone, api.LabelControlPlaneEligible: "true"}}})
	now := api.NewTime(time.Now())
	e.retry("node "+name+" Ready", func(cl *client.Client) error {
		obj, err := cl.Get(e.ctx, nodesRes, "", name, client.GetOptions{})
		if err != nil {
			return err
		}
		n := obj.(*api.Node)
		n.Status.Conditions = []api.NodeCondition{{Type: api.NodeReady, Status: api.ConditionTrue, LastHeartbeatTime: now, LastTransitionTime: now}}
		_, _, err = cl.UpdateStatus(e.ctx, n)
		return err
	})
}

func (e *randomEnv) setDomains(names []string) {
	e.domains = names
	e.retry("failure domains", func(cl *client.Client) error {
		obj, err := cl.Get(e.ctx, cpmsRes, "", "cluster", client.GetOptions{})
		if err != nil {
			return err
		}
		cp := obj.(*api.ControlPlaneMachineSet)
		cp.Spec.FailureDomains.Names = names
		_, _, err = cl.Update(e.ctx, cp)
		return err
	})
}

// retry runs fn against the leader until it succeeds.
func (e *randomEnv) retry(what string, fn func(*client.Client) error) {
	e.t.Helper()
	for {
		err := fn(e.admin())
		if err == nil {
			return
		}
		if e.ctx.Err() != nil {
			e.t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(100 * time.Millisecond) // a conflict or no leader: again
	}
}

// config is the leader's raft configuration.
func (e *randomEnv) config() []RaftPeerView {
	_, srv := e.c.LeaderServer()
	if srv == nil {
		return nil
	}
	peers, err := srv.Node().Configured()
	if err != nil {
		return nil
	}
	out := make([]RaftPeerView, len(peers))
	for i, p := range peers {
		out[i] = RaftPeerView{ID: p.ID, Voter: p.Suffrage == "Voter"}
	}
	return out
}

// RaftPeerView is one member as the test sees it.
type RaftPeerView struct {
	ID    string
	Voter bool
}

func (e *randomEnv) voters() []string {
	var out []string
	for _, p := range e.config() {
		if p.Voter {
			out = append(out, p.ID)
		}
	}
	return out
}

// restart starts a stopped server again, unless it was removed from raft
// meanwhile (its machine deleted): its agent released it, and a removed
// server serves nothing. The control plane may also remove it while it
// starts (its machine was found unhealthy while it was down, and the
// check above came just before); it then says so and stays down, as the
// test's agents would leave it.
func (e *randomEnv) restart(m *Member) string {
	e.t.Helper()
	member := func() bool { return slices.ContainsFunc(e.config(), func(p RaftPeerView) bool { return p.ID == m.ID }) }
	if !member() {
		return "server " + m.ID + " was removed from raft while stopped: it stays down"
	}
	if err := e.c.start(m, 0); err != nil {
		e.t.Fatalf("restart %s: %v", m.ID, err)
	}
	ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
	defer cancel()
	for {
		wctx, wcancel := context.WithTimeout(ctx, time.Second)
		err := m.Server.WaitReady(wctx)
		wcancel()
		switch {
		case err == nil:
			return "restart server " + m.ID
		case !member():
			e.c.Stop(m)
			return "server " + m.ID + " was removed from raft while it restarted: it stays down"
		case ctx.Err() != nil:
			e.t.Fatalf("restart %s: %v", m.ID, err)
		}
	}
}

// sample records the voter count of the leader's configuration.
func (e *randomEnv) sample(ctx context.Context) {
	for ctx.Err() == nil {
		if cfg := e.config(); cfg != nil {
			n := 0
			for _, p := range cfg {
				if p.Voter {
					n++
				}
			}
			e.mu.Lock()
			if e.samples == 0 || n < e.min {
				e.min = n
			}
			e.max = max(e.max, n)
			e.samples++
			if (n < 3 || n > 4) && len(e.bad) < 10 {
				e.bad = append(e.bad, fmt.Sprintf("%v at %s", cfg, time.Now().Format("15:04:05.000")))
			}
			e.mu.Unlock()
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond): // the sampling period
		}
	}
}

// agents does what the hosts' agents do: a host asked to serve, that
// serves nothing yet, starts a server of its name (it joins through the
// others); a host whose machine is gone stops its server.
func (e *randomEnv) agents() {
	objs, _, err := e.admin().List(e.ctx, machinesRes, "", client.ListOptions{})
	if err != nil {
		return
	}
	machines := map[string]*api.Machine{}
	for _, o := range objs {
		machines[o.GetObjectMeta().Name] = o.(*api.Machine)
	}
	known := map[string]*Member{}
	running := map[string]bool{}
	e.c.mu.Lock()
	for _, m := range e.c.Members {
		known[m.ID] = m
		running[m.ID] = m.Server != nil
	}
	e.c.mu.Unlock()
	for name, m := range machines {
		if _, asked := m.Annotations[api.AnnotationServerRequested]; asked && m.DeletionTimestamp == nil && known[name] == nil {
			e.t.Logf("host %s asked to serve (%s): starting its server", name, m.Annotations[api.AnnotationServerRequested])
			e.c.AddServerNamed(name)
		}
	}
	for id, m := range known {
		if _, ok := machines[id]; !ok && running[id] && e.zones[id] != "" && !slices.Contains(e.voters(), id) {
			e.t.Logf("host %s released: stopping its server", id)
			e.c.Stop(m)
		}
	}
}

// converged says whether three reachable voters serve, none of whose
// machines is being deleted, spread as the set's domains want, and the
// set says Balanced.
func (e *randomEnv) converged() (bool, string) {
	voters := e.voters()
	if len(voters) != 3 {
		return false, fmt.Sprintf("voters %v", voters)
	}
	running := map[string]bool{}
	for _, m := range e.c.Running() {
		running[m.ID] = true
	}
	count := map[string]int{}
	for _, v := range voters {
		if !running[v] {
			return false, "voter " + v + " not running"
		}
		obj, err := e.admin().Get(e.ctx, machinesRes, "", v, client.GetOptions{})
		if err != nil || obj.GetObjectMeta().DeletionTimestamp != nil {
			return false, "voter " + v + "'s machine missing or being deleted"
		}
		count[e.zones[v]]++
	}
	want := controllers.DomainTargets(3, e.domainsNow())
	for d, n := range want {
		if count[d] != n {
			return false, fmt.Sprintf("voters %v by zone %v, want %v", voters, count, want)
		}
	}
	obj, err := e.admin().Get(e.ctx, cpmsRes, "", "cluster", client.GetOptions{})
	if err != nil {
		return false, err.Error()
	}
	cp := obj.(*api.ControlPlaneMachineSet)
	if len(cp.Status.Conditions) != 1 || cp.Status.Conditions[0].Reason != "Balanced" {
		return false, fmt.Sprintf("set status %+v", cp.Status)
	}
	return true, ""
}

// domainsNow are the set's domains: those named, else the zones of the
// voters and eligible hosts (every host here is eligible).
func (e *randomEnv) domainsNow() []string {
	if len(e.domains) > 0 {
		return e.domains
	}
	var out []string
	objs, _, _ := e.admin().List(e.ctx, machinesRes, "", client.ListOptions{})
	for _, o := range objs {
		if o.GetObjectMeta().DeletionTimestamp == nil {
			if z := e.zones[o.GetObjectMeta().Name]; z != "" && !slices.Contains(out, z) {
				out = append(out, z)
			}
		}
	}
	slices.Sort(out)
	return out
}

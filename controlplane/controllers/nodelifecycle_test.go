package controllers

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/controller"
)

// fakeMembership is a gossip pool whose member states the test sets.
type fakeMembership struct {
	mu      sync.Mutex
	members map[string]fakeMember
	subs    []chan string
}

type fakeMember struct {
	state MemberState
	since time.Time
}

func newFakeMembership() *fakeMembership {
	return &fakeMembership{members: map[string]fakeMember{}}
}

func (f *fakeMembership) MemberState(name string) (MemberState, time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, ok := f.members[name]
	return m.state, m.since, ok
}

func (f *fakeMembership) Subscribe() (<-chan string, func()) {
	ch := make(chan string, 64)
	f.mu.Lock()
	f.subs = append(f.subs, ch)
	f.mu.Unlock()
	return ch, func() {}
}

// set changes a member and tells subscribers, as the pool's events do.
func (f *fakeMembership) set(name string, st MemberState, since time.Time) {
	f.mu.Lock()
	f.members[name] = fakeMember{st, since}
	subs := f.subs
	f.mu.Unlock()
	for _, ch := range subs {
		ch <- name
	}
}

// startLifecycle runs the controllers with the node lifecycle settings
// and a fast sweep, so that advancing the fake clock is noticed at once.
func (e *env) startLifecycle(nl NodeLifecycle, client ...controller.Client) {
	e.t.Helper()
	var cl controller.Client = e.f
	if len(client) > 0 {
		cl = client[0]
	}
	e.startConfig(Config{Client: cl, NodeLifecycle: nl})
}

// startConfig runs the controllers with cfg (its logger and clock the
// test's) and a fast sweep.
func (e *env) startConfig(cfg Config) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	cfg.Logger = slog.New(slog.NewTextHandler(testWriter{e.t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cfg.Now = e.clock.Now
	go func() {
		done <- run(ctx, cfg, hooks{
			delivered:         e.noteDelivered,
			nodeMonitorPeriod: 20 * time.Millisecond,
			synced: func(ctrl, key string) {
				e.mu.Lock()
				e.syncs[ctrl+"/"+key]++
				e.mu.Unlock()
				e.poke()
			},
		})
	}()
	e.stop = func() {
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("Run: %v", err)
		}
	}
}

// agentNode creates node name as an agent would have registered it: Ready
// and MemoryPressure with a heartbeat at the fake clock's now.
func (e *env) agentNode(name string) *api.Node {
	e.t.Helper()
	now := api.NewTime(e.clock.Now())
	n := &api.Node{ObjectMeta: api.ObjectMeta{Name: name}}
	n.Status.Conditions = []api.NodeCondition{
		{Type: api.NodeReady, Status: api.ConditionTrue, Reason: "KubeletReady", Message: "agent is posting ready status", LastHeartbeatTime: now, LastTransitionTime: now},
		{Type: api.NodeMemoryPressure, Status: api.ConditionFalse, Reason: "AgentHasSufficientMemory", LastHeartbeatTime: now, LastTransitionTime: now},
	}
	obj, err := e.f.Create(context.Background(), n)
	if err != nil {
		e.t.Fatal(err)
	}
	return obj.(*api.Node)
}

// heartbeat posts node name's status again with a new heartbeat and
// Ready=True, as the agent does.
func (e *env) heartbeat(name string) {
	e.t.Helper()
	n := e.node(name)
	now := api.NewTime(e.clock.Now())
	for i := range n.Status.Conditions {
		c := &n.Status.Conditions[i]
		c.LastHeartbeatTime = now
		if c.Status == api.ConditionUnknown {
			c.LastTransitionTime = now
		}
		c.Status, c.Reason, c.Message = api.ConditionTrue, "KubeletReady", "agent is posting ready status"
		if c.Type != api.NodeReady {
			c.Status, c.Reason = api.ConditionFalse, "AgentHasSufficientMemory"
		}
	}
	if _, err := e.f.UpdateStatus(context.Background(), n); err != nil {
		e.t.Fatal(err)
	}
}

// node returns a private copy of the stored node.
func (e *env) node(name string) *api.Node {
	e.t.Helper()
	obj, err := e.f.Get(nodesRes, "", name)
	if err != nil {
		e.t.Fatal(err)
	}
	cp := *obj.(*api.Node)
	cp.Status.Conditions = append([]api.NodeCondition(nil), cp.Status.Conditions...)
	return &cp
}

// settle waits until the controller has looked at name twice more: the
// second look began after whatever the test changed before calling.
func (e *env) settle(name string) {
	e.t.Helper()
	before := e.syncCount("nodelifecycle", name)
	e.waitFor("two more looks at "+name, func() (bool, string) {
		n := e.syncCount("nodelifecycle", name)
		return n >= before+2, fmt.Sprintf("%d looks so far", n-before)
	})
}

// waitUnknown waits until every condition of name is Unknown with msg.
func (e *env) waitUnknown(name, msg string) *api.Node {
	e.t.Helper()
	var n *api.Node
	e.waitFor(name+" Unknown", func() (bool, string) {
		n = e.node(name)
		for _, c := range n.Status.Conditions {
			if c.Status != api.ConditionUnknown || c.Reason != reasonNodeStatusUnknown || c.Message != msg {
				return false, c.Type + " is " + c.Status + " (" + c.Message + ")"
			}
		}
		return true, ""
	})
	return n
}

func readyStatus(n *api.Node) string {
	if c := nodeReadyCondition(n); c != nil {
		return c.Status
	}
	return ""
}

// The heartbeat backstop: a node whose agent stops posting is marked
// after the grace period, not before, and a new heartbeat restarts the
// period. Nodes gossip does not know (simulated nodes) and a controller
// with no gossip at all are judged this way.
func TestNodeLifecycleHeartbeatBackstop(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    Membership
	}{
		{"no gossip", nil},
		{"node unknown to gossip", func() Membership {
			m := newFakeMembership()
			m.set("someone-else", MemberDead, time.Now())
			return m
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			created := e.agentNode("sim-1")
			e.startLifecycle(NodeLifecycle{Membership: tc.m})
			e.settle("sim-1")

			e.clock.Advance(30 * time.Second)
			e.settle("sim-1")
			if got := readyStatus(e.node("sim-1")); got != api.ConditionTrue {
				t.Fatalf("Ready = %s 30s after the last heartbeat, want True (grace is 40s)", got)
			}
			e.heartbeat("sim-1")
			e.settle("sim-1")
			e.clock.Advance(30 * time.Second) // 60s after start, 30s after the new heartbeat
			e.settle("sim-1")
			if got := readyStatus(e.node("sim-1")); got != api.ConditionTrue {
				t.Fatalf("Ready = %s 30s after a fresh heartbeat, want True", got)
			}
			if w := e.f.Writes("status nodes"); w != 1 {
				t.Fatalf("%d node status writes, want only the test's heartbeat", w)
			}
			lastBeat := e.node("sim-1").Status.Conditions[0].LastHeartbeatTime

			e.clock.Advance(11 * time.Second)
			n := e.waitUnknown("sim-1", msgHeartbeatsStopped)
			now := api.NewTime(e.clock.Now())
			for _, c := range n.Status.Conditions {
				if !c.LastHeartbeatTime.Equal(lastBeat.Time) {
					t.Errorf("%s lastHeartbeatTime = %v, want the agent's %v kept", c.Type, c.LastHeartbeatTime, lastBeat)
				}
				if c.LastTransitionTime == nil || c.LastTransitionTime.Sub(now.Time).Abs() > time.Second {
					t.Errorf("%s lastTransitionTime = %v, want about %v", c.Type, c.LastTransitionTime, now)
				}
			}
			if created.Status.Conditions[0].LastTransitionTime.Equal(n.Status.Conditions[0].LastTransitionTime.Time) {
				t.Error("lastTransitionTime did not move")
			}
			// Marked once; the sweep does not write it again.
			e.clock.Advance(time.Minute)
			e.settle("sim-1")
			if w := e.f.Writes("status nodes"); w != 2 {
				t.Fatalf("%d node status writes, want 2 (heartbeat, one mark)", w)
			}
		})
	}
}

// Gossip reports the node failed (or its agent left): the node is marked
// at once, long before the heartbeat grace period.
func TestNodeLifecycleGossipFastPath(t *testing.T) {
	for _, tc := range []struct {
		state MemberState
		msg   string
	}{{MemberDead, msgGossipFailed}, {MemberLeft, msgGossipLeft}} {
		t.Run(string(tc.state), func(t *testing.T) {
			e := newEnv(t)
			m := newFakeMembership()
			m.set("edge-1", MemberAlive, e.clock.Now())
			e.agentNode("edge-1")
			e.agentNode("edge-2")
			e.startLifecycle(NodeLifecycle{Membership: m})
			e.settle("edge-1")
			if got := readyStatus(e.node("edge-1")); got != api.ConditionTrue {
				t.Fatalf("Ready = %s while gossip says alive, want True", got)
			}
			began := e.clock.Now()
			e.clock.Advance(2 * time.Second)
			m.set("edge-1", tc.state, e.clock.Now())
			e.waitUnknown("edge-1", tc.msg)
			e.waitFor("a NodeNotReady event", func() (bool, string) {
				evs, _, err := e.f.List(eventsRes)
				if err != nil {
					t.Fatal(err)
				}
				for _, obj := range evs {
					ev := obj.(*api.Event)
					if ev.Namespace == "default" && ev.InvolvedObject.Kind == "Node" && ev.InvolvedObject.Name == "edge-1" &&
						ev.Reason == "NodeNotReady" && strings.Contains(ev.Message, tc.msg) {
						return true, ""
					}
				}
				return false, fmt.Sprintf("%d events, none NodeNotReady for edge-1", len(evs))
			})
			if d := e.clock.Now().Sub(began); d >= DefaultNodeMonitorGracePeriod {
				t.Fatalf("marked after %v of fake time; the gossip path must not wait for the grace period", d)
			}
			if got := readyStatus(e.node("edge-2")); got != api.ConditionTrue {
				t.Fatalf("edge-2 (not in gossip, heartbeat fresh) Ready = %s, want True", got)
			}
		})
	}
}

// No flapping: gossip alive again does not make a node Ready; the agent's
// own status does, and it stays while gossip still calls the member dead
// (the agent's gossip is what is broken), until the heartbeats stop.
func TestNodeLifecycleNoFlapping(t *testing.T) {
	e := newEnv(t)
	m := newFakeMembership()
	m.set("edge-1", MemberAlive, e.clock.Now())
	e.agentNode("edge-1")
	e.startLifecycle(NodeLifecycle{Membership: m})
	e.settle("edge-1")
	e.clock.Advance(time.Second)
	m.set("edge-1", MemberDead, e.clock.Now())
	e.waitUnknown("edge-1", msgGossipFailed)

	// Gossip says alive again: still Unknown, until the agent speaks.
	e.clock.Advance(time.Second)
	m.set("edge-1", MemberAlive, e.clock.Now())
	e.settle("edge-1")
	if got := readyStatus(e.node("edge-1")); got != api.ConditionUnknown {
		t.Fatalf("Ready = %s after gossip alone said alive, want Unknown", got)
	}

	// Dead again in gossip; then the agent posts: its word wins.
	e.clock.Advance(time.Second)
	m.set("edge-1", MemberDead, e.clock.Now())
	e.settle("edge-1")
	e.clock.Advance(time.Second)
	writes := e.f.Writes("status nodes")
	e.heartbeat("edge-1")
	for range 3 {
		e.clock.Advance(5 * time.Second)
		e.settle("edge-1")
		if got := readyStatus(e.node("edge-1")); got != api.ConditionTrue {
			t.Fatalf("Ready = %s after the agent posted, while gossip still says dead: the controller flapped it", got)
		}
	}
	if w := e.f.Writes("status nodes"); w != writes+1 {
		t.Fatalf("%d status writes after the agent's post, want only the agent's", w-writes)
	}
	// The backstop still watches it.
	e.clock.Advance(DefaultNodeMonitorGracePeriod)
	e.waitUnknown("edge-1", msgHeartbeatsStopped)
}

// A node no agent reports (no conditions, or a Ready condition without a
// heartbeat, as tests and benchmarks make them) is left alone.
func TestNodeLifecycleIgnoresNodesWithoutHeartbeats(t *testing.T) {
	e := newEnv(t)
	m := newFakeMembership()
	m.set("bare", MemberDead, e.clock.Now())
	m.set("by-hand", MemberDead, e.clock.Now())
	if _, err := e.f.Create(context.Background(), &api.Node{ObjectMeta: api.ObjectMeta{Name: "bare"}}); err != nil {
		t.Fatal(err)
	}
	byHand := &api.Node{ObjectMeta: api.ObjectMeta{Name: "by-hand"}}
	byHand.Status.Conditions = []api.NodeCondition{{Type: api.NodeReady, Status: api.ConditionTrue, Reason: "KubeletReady"}}
	if _, err := e.f.Create(context.Background(), byHand); err != nil {
		t.Fatal(err)
	}
	e.agentNode("agent-1") // the control: this one is marked
	e.startLifecycle(NodeLifecycle{Membership: m})
	e.settle("bare")
	e.clock.Advance(2 * DefaultNodeMonitorGracePeriod)
	e.waitUnknown("agent-1", msgHeartbeatsStopped)
	e.settle("bare")
	e.settle("by-hand")
	if n := e.node("bare"); len(n.Status.Conditions) != 0 {
		t.Fatalf("conditions %+v written on a node no agent reports", n.Status.Conditions)
	}
	if got := readyStatus(e.node("by-hand")); got != api.ConditionTrue {
		t.Fatalf("by-hand Ready = %s, want True left alone", got)
	}
}

// fakeLiveness is the leader's heartbeat memory, set by the test.
type fakeLiveness struct {
	mu   sync.Mutex
	last map[string]time.Time
}

func (f *fakeLiveness) LastHeartbeat(name string) (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.last[name]
	return t, ok
}

func (f *fakeLiveness) beat(name string, at time.Time) {
	f.mu.Lock()
	f.last[name] = at
	f.mu.Unlock()
}

// Heartbeats held in the leader's memory keep a node Ready without any
// status write; when they stop, the node is marked a grace period after
// the last one. A heartbeat older than the controller's first look does
// not shorten the fresh grace period a new leader gives (issue 9 item 8).
func TestNodeLifecycleLivenessHeartbeats(t *testing.T) {
	e := newEnv(t)
	live := &fakeLiveness{last: map[string]time.Time{}}
	e.agentNode("hb-1")
	// Heard long before this controller started (an earlier leadership).
	live.beat("hb-1", e.clock.Now().Add(-time.Hour))
	e.startLifecycle(NodeLifecycle{Liveness: live})
	e.settle("hb-1")
	for range 4 {
		e.clock.Advance(30 * time.Second)
		live.beat("hb-1", e.clock.Now())
		e.settle("hb-1")
		if got := readyStatus(e.node("hb-1")); got != api.ConditionTrue {
			t.Fatalf("Ready = %s while heartbeats arrive every 30s (grace 40s)", got)
		}
	}
	if w := e.f.Writes("status nodes"); w != 0 {
		t.Fatalf("%d node status writes while the node heartbeated, want none", w)
	}
	e.clock.Advance(30 * time.Second)
	e.settle("hb-1")
	if got := readyStatus(e.node("hb-1")); got != api.ConditionTrue {
		t.Fatalf("Ready = %s 30s after the last heartbeat, want True", got)
	}
	e.clock.Advance(11 * time.Second)
	e.waitUnknown("hb-1", msgHeartbeatsStopped)
}

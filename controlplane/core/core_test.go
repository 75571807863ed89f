package core

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/admission"
	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/auth"
	"github.com/outpost-edge/outpost/controlplane/controller"
	"github.com/outpost-edge/outpost/controlplane/store"
	"github.com/outpost-edge/outpost/raftstore"
)

// startCore runs a one-server cluster's core with no transport on top:
// the store, raft over loopback, and the core's leadership and catch-up.
// duties is Config.Duties.
func startCore(t *testing.T, duties func(context.Context, controller.Client), mod func(*Config), made ...func(*Core)) *Core {
	t.Helper()
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	st := store.New(store.Options{})
	node, err := raftstore.Open(t.Context(), raftstore.Config{
		ID: "s1", DataDir: t.TempDir(), BindAddr: "127.0.0.1:0", APIAddr: "http://s1.test:6443",
		Insecure: true, BootstrapExpect: 1, Logger: log,
		HeartbeatTimeout: 300 * time.Millisecond, ElectionTimeout: 300 * time.Millisecond,
		LeaderLeaseTimeout: 300 * time.Millisecond, CommitTimeout: 5 * time.Millisecond,
	}, FSM(st))
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Store: st, Node: node, Logger: log, EventTTL: time.Hour,
		AdminTokenID: "admin0", AdminSecretHash: strings.Repeat("ab", 32), Duties: duties,
	}
	if mod != nil {
		mod(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range made {
		f(c) // before the core's goroutines start
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { c.AwaitCatchUp(ctx); done <- struct{}{} }()
	go func() { c.RunLeadership(ctx); done <- struct{}{} }()
	t.Cleanup(func() {
		cancel()
		<-done
		<-done
		if err := node.Close(); err != nil {
			t.Error(err)
		}
	})
	return c
}

func testPod(name string) *api.Pod {
	return &api.Pod{
		TypeMeta:   api.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: api.ObjectMeta{Namespace: NamespaceDefault, Name: name},
		Spec:       api.PodSpec{Containers: []api.Container{{Name: "app", Image: "registry.local/app:1"}}},
	}
}

// The core is the API without HTTP: the leader's duties get its client
// only after the barrier and the bootstrap objects, and every write, from
// the loops or from a user, goes through defaulting, validation and the
// refusals that keep the cluster whole (issue 9 item 9).
func TestCoreWithoutTransport(t *testing.T) {
	clients := make(chan controller.Client, 1)
	// OnCaughtUp runs before the gate opens: what it sets up (the admin
	// token's generation) is in place before the first request.
	hookSawGateClosed := make(chan bool, 1)
	var self *Core
	c := startCore(t, func(ctx context.Context, cl controller.Client) {
		clients <- cl
		<-ctx.Done()
	}, func(cfg *Config) {
		cfg.OnCaughtUp = func() { hookSawGateClosed <- self.CatchingUp() != "" }
	}, func(c *Core) { self = c })
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := c.WaitCaughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	if why := c.CatchingUp(); why != "" {
		t.Fatalf("caught up, yet CatchingUp says %q", why)
	}
	select {
	case closed := <-hookSawGateClosed:
		if !closed {
			t.Error("OnCaughtUp ran after the gate opened")
		}
	default:
		t.Error("caught up without running OnCaughtUp")
	}
	var cl controller.Client
	select {
	case cl = <-clients:
	case <-ctx.Done():
		t.Fatal("the leader's duties never started")
	}
	// Duties start after the bootstrap: what they need exists already.
	for _, ns := range []string{NamespaceDefault, NamespaceSystem} {
		if _, _, err := c.Get(namespacesResource, "", ns); err != nil {
			t.Errorf("duties started before namespace %s existed: %v", ns, err)
		}
	}
	if tok, err := c.GetToken("admin0"); err != nil || tok == nil || tok.Spec.Role != api.RoleClusterAdmin {
		t.Errorf("admin token at bootstrap: %+v, %v", tok, err)
	}

	// Invalid input is refused before raft, every problem by field path.
	before := c.st.AppliedIndex()
	bad := testPod("Bad_Name")
	bad.Spec.Containers[0].Image = ""
	_, err := c.Create(ctx, ControlPlane, bad)
	if !api.IsInvalid(err) || !strings.Contains(err.Error(), "metadata.name") || !strings.Contains(err.Error(), "spec.containers[0].image") {
		t.Errorf("invalid pod: %v; want 422 naming metadata.name and spec.containers[0].image", err)
	}
	if got := c.st.AppliedIndex(); got != before {
		t.Errorf("a refused create reached raft: applied index %d -> %d", before, got)
	}

	// The loops' client writes through the same pipeline: defaults set,
	// server-owned fields filled in.
	obj, err := cl.Create(ctx, testPod("web"))
	if err != nil {
		t.Fatal(err)
	}
	p := obj.(*api.Pod)
	if p.UID == "" || p.CreationTimestamp.IsZero() || p.Spec.RestartPolicy == "" {
		t.Errorf("created pod lacks server-owned fields or defaults: uid %q created %v restartPolicy %q", p.UID, p.CreationTimestamp, p.Spec.RestartPolicy)
	}
	// A bound pod gets its Scheduled event, from the scheduler named.
	if errs := cl.Bind(ctx, []controller.Binding{{Namespace: NamespaceDefault, Name: "web", NodeName: "n1", Scheduler: "edge-scheduler"}}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	events, _, err := cl.List(api.ResourceForKind("Event"))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, o := range events {
		e := o.(*api.Event)
		if e.Reason == "Scheduled" && e.InvolvedObject.Name == "web" && e.Source.Component == "edge-scheduler" &&
			e.Message == "Successfully assigned default/web to n1" {
			found = true
		}
	}
	if !found {
		t.Errorf("no Scheduled event from edge-scheduler for default/web among %d events", len(events))
	}

	// What must not be deleted is refused whoever asks, saying why.
	admin := &auth.Identity{Name: "admin", Role: api.RoleClusterAdmin}
	for _, tt := range []struct {
		res  *api.Resource
		name string
		want string
	}{
		{namespacesResource, NamespaceDefault, "this namespace may not be deleted"},
		{namespacesResource, NamespaceSystem, "this namespace may not be deleted"},
		{tokensResource, "admin0", "built-in admin token"},
	} {
		for _, id := range []*auth.Identity{admin, ControlPlane} {
			_, err := c.Delete(ctx, id, tt.res, "", tt.name, api.DeleteOptions{})
			if api.ReasonOf(err) != api.ReasonForbidden || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%s deletes %s %s: %v; want 403 saying %q", id.Name, tt.res.Plural, tt.name, err, tt.want)
			}
		}
	}
}

// A configured admission step runs on the core's writes, after the
// built-in ones, and what it changes is validated again.
func TestCoreAdmissionChain(t *testing.T) {
	c := startCore(t, nil, func(cfg *Config) {
		cfg.Admission = []admission.Interface{labelStep{}}
	})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	waitBootstrapped(t, ctx, c)
	res, err := c.Create(ctx, ControlPlane, testPod("ok"))
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Object.GetObjectMeta().Labels["admitted"]; got != "yes" {
		t.Errorf("the admission step's label was not kept: %q", got)
	}
	// A step that fails with a plain error: a 500, never the 504 of a
	// write whose outcome is unknown, and nothing reaches raft.
	before := c.st.AppliedIndex()
	_, err = c.Create(ctx, ControlPlane, testPod("fails"))
	if se := (*api.StatusError)(nil); !errors.As(err, &se) || se.Code() != 500 || !strings.Contains(err.Error(), "no pods named fails") {
		t.Errorf("a plain admission error: %v; want a 500 carrying it", err)
	}
	if c.st.AppliedIndex() != before {
		t.Error("a refused create reached raft")
	}
	// The step sets an invalid label on this one: validation after the
	// chain refuses it.
	if _, err := c.Create(ctx, ControlPlane, testPod("breaks")); !api.IsInvalid(err) || !strings.Contains(err.Error(), "metadata.labels") {
		t.Errorf("a pod the chain made invalid: %v; want 422 naming metadata.labels", err)
	}
}

// labelStep labels every pod it admits; on the pod "breaks" it writes a
// label value no validation allows.
type labelStep struct{}

func (labelStep) Admit(_ context.Context, op string, _ *auth.Identity, obj, _ api.Object) error {
	if op != admission.OpCreate {
		return nil
	}
	m := obj.GetObjectMeta()
	if m.Name == "fails" {
		return errors.New("no pods named fails")
	}
	if m.Labels == nil {
		m.Labels = map[string]string{}
	}
	m.Labels["admitted"] = "yes"
	if m.Name == "breaks" {
		m.Labels["admitted"] = "not a valid value!"
	}
	return nil
}

// A write on a leader waits for its leadership's barrier: its
// preconditions are checked against this server's store, which before
// the barrier may lack what the last leader committed (a leadership
// transfer's target answered "conflict" about such a state). With the
// gate shut, as a new leadership finds it, a create is held until its
// context ends; once the barrier opens the gate it goes through.
func TestWritesWaitForTheLeaderBarrier(t *testing.T) {
	c := startCore(t, nil, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	waitBootstrapped(t, ctx, c)
	gate := c.resetGate() // a new leadership, its barrier not passed yet
	held, stop := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err := c.Create(held, ControlPlane, testPod("early"))
	stop()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a create before the barrier: %v, want it held until its context ended", err)
	}
	if _, _, err := c.Get(podsResource, NamespaceDefault, "early"); !api.IsNotFound(err) {
		t.Fatalf("the held create was applied: %v", err)
	}
	close(gate)
	if _, err := c.Create(ctx, ControlPlane, testPod("after")); err != nil {
		t.Fatalf("a create after the barrier: %v", err)
	}
}

// waitBootstrapped waits until c caught up and its leader created the
// default namespace.
func waitBootstrapped(t *testing.T, ctx context.Context, c *Core) {
	t.Helper()
	if err := c.WaitCaughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	for {
		if _, _, err := c.Get(namespacesResource, "", NamespaceDefault); err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("no default namespace")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// lostLeadership is the raft member as awaitBarrier sees it, made to
// lose the leadership when lose is called.
type lostLeadership struct {
	leadership
	mu      sync.Mutex
	lost    bool
	changed chan struct{}
	// waiting is closed when a write first waits for a change.
	waiting     chan struct{}
	waitingOnce sync.Once
}

func (l *lostLeadership) lose() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lost = true
	close(l.changed)
}

func (l *lostLeadership) IsLeader() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.lost && l.leadership.IsLeader()
}

func (l *lostLeadership) LeaderChanged() <-chan struct{} {
	l.waitingOnce.Do(func() { close(l.waiting) })
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.changed
}

// startWithLeadership starts a core whose leadership, as awaitBarrier
// sees it, is lost when the test says.
func startWithLeadership(t *testing.T) (*Core, *lostLeadership) {
	var l *lostLeadership
	c := startCore(t, nil, nil, func(c *Core) {
		l = &lostLeadership{leadership: c.leadership, changed: make(chan struct{}), waiting: make(chan struct{})}
		c.leadership = l
	})
	return c, l
}

// holdWrite creates pod name on c, which must wait at the gate, and
// returns once it waits; the channel gets the create's error.
func holdWrite(t *testing.T, ctx context.Context, c *Core, l *lostLeadership, name string) <-chan error {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		_, err := c.Create(ctx, ControlPlane, testPod(name))
		errc <- err
	}()
	select {
	case <-l.waiting:
	case <-ctx.Done():
		t.Fatal("the write was not held at the gate")
	}
	return errc
}

// A write held by a new leader's barrier that then loses the leadership
// (its barrier cannot commit any more) is answered at once with
// raftstore's not-leader error, which the API forwards to the next
// leader, instead of waiting out the gate and answering 503.
func TestWriteHeldByTheBarrierEndsWhenLeadershipIsLost(t *testing.T) {
	c, l := startWithLeadership(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	waitBootstrapped(t, ctx, c)
	c.resetGate() // a new leadership, its barrier not passed yet
	errc := holdWrite(t, ctx, c, l, "held")
	l.lose()
	var err error
	select {
	case err = <-errc:
	case <-time.After(gateWait - time.Second):
		t.Fatal("the held write did not end when the leadership was lost")
	}
	if !errors.Is(err, raftstore.ErrNotLeader) {
		t.Fatalf("the held write: %v, want raftstore.ErrNotLeader", err)
	}
	if _, _, err := c.Get(podsResource, NamespaceDefault, "held"); !api.IsNotFound(err) {
		t.Fatalf("the held write was applied: %v", err)
	}
}

// raft makes a server leader, and says so, before RunLeadership replaces
// the last leadership's gate, which is never opened. A write that comes
// in between goes through as soon as the new leadership's barrier opens
// the new gate, instead of waiting out gateWait on the old one and
// answering 503 (TestForwardedWriteEndsWhenLeadershipMoves failed so
// under load).
func TestWriteHeldByTheLastGateGoesThroughTheNewOne(t *testing.T) {
	c, l := startWithLeadership(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	waitBootstrapped(t, ctx, c)
	c.resetGate() // the last leadership's gate, left shut
	errc := holdWrite(t, ctx, c, l, "between")
	close(c.resetGate()) // the new leadership's barrier passed
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("the held write: %v, want it done", err)
		}
	case <-time.After(gateWait - time.Second):
		t.Fatal("the held write waited on the replaced gate")
	}
}

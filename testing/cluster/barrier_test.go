package cluster

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/server"
	"github.com/outpost-edge/outpost/controlplane/store"
	"github.com/outpost-edge/outpost/raftstore"
)

// heldFSM applies entries normally until the one whose result is the
// object trigger says to stop at; every entry after it waits until release
// is closed, as on a server whose disk or CPU lags behind its log. Raft
// keeps appending and acknowledging entries meanwhile (its apply queue is
// deep), so the server stays a healthy voter that can win an election.
type heldFSM struct {
	raftstore.FSM
	trigger func(api.Object) bool
	release chan struct{}

	mu      sync.Mutex
	holding bool
	held    chan struct{} // closed once the trigger entry was applied
}

func newHeldFSM(trigger func(api.Object) bool) *heldFSM {
	return &heldFSM{trigger: trigger, release: make(chan struct{}), held: make(chan struct{})}
}

func (h *heldFSM) wrap(inner raftstore.FSM) raftstore.FSM {
	h.FSM = inner
	return h
}

func (h *heldFSM) Apply(index uint64, cmd []byte) any {
	h.mu.Lock()
	holding := h.holding
	h.mu.Unlock()
	if holding {
		<-h.release
	}
	res := h.FSM.Apply(index, cmd)
	if r, ok := res.(*store.Result); ok && r.Err == nil && r.Object != nil && !holding && h.trigger(r.Object) {
		h.mu.Lock()
		h.holding = true
		h.mu.Unlock()
		close(h.held)
	}
	return res
}

// A new leader must not run its controllers on a store that lacks entries
// the old leader committed (issue 9 item 1). The next leader s2 applies
// the creation of a ReplicaSet and then lags: the old leader's controller
// creates the three pods, a quorum commits them, but s2 has not applied
// them when it wins the election. Its ReplicaSet controller, started on
// that stale store, would count no pods and create three more. Counted
// from a third server's watch, the cluster never holds more pods than the
// ReplicaSet allows.
func TestNewLeaderWaitsForBarrierBeforeControllers(t *testing.T) {
	ctx := ctxT(t, 2*time.Minute)
	labels := map[string]string{"app": "web"}
	hold := newHeldFSM(func(o api.Object) bool {
		rs, ok := o.(*api.ReplicaSet)
		return ok && rs.Name == "web"
	})
	c := New(t, Options{ControlLoops: true, Configure: func(cfg *server.Config) {
		if cfg.ID == "s2" {
			cfg.WrapFSM = hold.wrap
		}
	}})
	s1, s2, s3 := c.Members[0], c.Members[1], c.Members[2]
	if l := c.WaitForLeader(ctx); l != s1 {
		if err := l.Server.Node().TransferLeadership(ctx, s1.ID); err != nil {
			t.Fatalf("transfer leadership to s1: %v", err)
		}
	}
	if l := c.WaitForLeader(ctx); l != s1 {
		t.Fatalf("leader is %s, want s1", l.ID)
	}

	// Every pod the cluster ever holds, as s3 applies them.
	podRes := api.ResourceForKind("Pod")
	events, err := s3.Server.Store().Watch(ctx, podRes, "default", store.ListOptions{}, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	live, most := map[string]bool{}, 0
	go func() {
		for ev := range events {
			if ev.Object == nil {
				continue
			}
			mu.Lock()
			name := ev.Object.GetObjectMeta().Name
			if ev.Type == store.Deleted {
				delete(live, name)
			} else {
				live[name] = true
			}
			most = max(most, len(live))
			mu.Unlock()
		}
	}()

	rs := &api.ReplicaSet{
		ObjectMeta: api.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: api.ReplicaSetSpec{
			Replicas: new(int32(3)),
			Selector: &api.LabelSelector{MatchLabels: labels},
			Template: api.PodTemplateSpec{
				ObjectMeta: api.ObjectMeta{Labels: labels},
				Spec:       api.PodSpec{Containers: []api.Container{{Name: "app", Image: "web:1"}}},
			},
		},
	}
	if _, _, err := c.Client(s1).Create(ctx, rs); err != nil {
		t.Fatal(err)
	}
	select {
	case <-hold.held:
	case <-ctx.Done():
		t.Fatal("s2 never applied the ReplicaSet")
	}
	// The old leader's controller creates the pods; s1 and s3 commit them.
	waitFor(t, ctx, "three pods on s1", func() bool { return s1.Server.Store().Len(podRes) == 3 })
	if n := s2.Server.Store().Len(podRes); n != 0 {
		t.Fatalf("s2 holds %d pods, want 0: it was to lag behind", n)
	}

	if err := s1.Server.Node().TransferLeadership(ctx, s2.ID); err != nil {
		t.Fatalf("transfer leadership to s2: %v", err)
	}
	waitFor(t, ctx, "s2 leading", func() bool { return s2.Server.Node().IsLeader() })
	// The lag lasts a while into s2's leadership: long enough for
	// controllers started without the barrier to act on the stale store
	// (their writes then queue behind the held entries).
	select {
	case <-time.After(1500 * time.Millisecond): // the fault's duration, not synchronisation
	case <-ctx.Done():
	}
	close(hold.release)

	// Everything s2 appended meanwhile is applied everywhere; the
	// controller has settled on three pods.
	last := s2.Server.Node().Status().LastIndex
	waitFor(t, ctx, "s3 applying s2's entries", func() bool { return s3.Server.Node().AppliedIndex() >= last })
	waitFor(t, ctx, "three pods on s2", func() bool { return s2.Server.Store().Len(podRes) == 3 })
	mu.Lock()
	defer mu.Unlock()
	if most > 3 {
		t.Fatalf("the cluster held %d pods of a ReplicaSet of 3: the new leader's controller acted before its store caught up", most)
	}
	if most != 3 {
		t.Fatalf("the watch saw at most %d pods, want 3", most)
	}
}

// waitFor polls cond until it holds or ctx ends.
func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(10 * time.Millisecond): // polling, bounded by ctx
		}
	}
}

package store

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// leaderFollower applies every command to a "leader" store with the very
// bytes CreateCmd returned, as raft does on the leader, and to a
// "follower" store with a copy, as raft does on followers.
type leaderFollower struct {
	t        *testing.T
	leader   *harness
	follower *harness
}

func newLeaderFollower(t *testing.T) *leaderFollower {
	lf := &leaderFollower{t: t, leader: newHarness(t, Options{}), follower: newHarness(t, Options{})}
	lf.apply(lf.mustCmd(CreateCmd(newNamespace("default"))))
	return lf
}

func (lf *leaderFollower) mustCmd(cmd []byte, err error) []byte {
	lf.t.Helper()
	if err != nil {
		lf.t.Fatal(err)
	}
	return cmd
}

func (lf *leaderFollower) apply(cmd []byte) (leader, follower *Result) {
	lf.t.Helper()
	leader = lf.leader.apply(cmd)
	follower = lf.follower.apply(bytes.Clone(cmd))
	if (leader.Err == nil) != (follower.Err == nil) {
		lf.t.Fatalf("leader error %v, follower error %v", leader.Err, follower.Err)
	}
	if !bytes.Equal(leader.Raw, follower.Raw) {
		lf.t.Fatalf("stored JSON differs:\nleader   %s\nfollower %s", leader.Raw, follower.Raw)
	}
	if !reflect.DeepEqual(leader.Object, follower.Object) {
		lf.t.Fatalf("stored objects differ:\nleader   %#v\nfollower %#v", leader.Object, follower.Object)
	}
	hl, _ := lf.leader.s.StateHash(lf.leader.idx)
	hf, _ := lf.follower.s.StateHash(lf.follower.idx)
	if hl != hf {
		lf.t.Fatalf("state hashes differ: leader %x, follower %x", hl, hf)
	}
	return leader, follower
}

func TestCreateHandoffMatchesFollower(t *testing.T) {
	lf := newLeaderFollower(t)
	p := bigPod("default", "web-1", "")
	// What a handler may hold but a decode never gives: empty maps and
	// slices, a time with a zone and a monotonic reading, a zero quantity,
	// a field that is never encoded.
	p.Annotations = map[string]string{}
	p.Finalizers = []string{}
	p.Spec.Containers[0].Env = []api.EnvVar{}
	p.Spec.Containers[0].Resources.Requests["ephemeral-storage"] = api.Quantity{}
	p.Spec.Volumes[0].UnsupportedSources = []string{"nfs"}
	p.CreationTimestamp = &api.Time{Time: time.Now()}
	p.DeletionTimestamp = &api.Time{}
	containers := p.Spec.Containers

	cmd, err := lf.leader.s.CreateCmd(p)
	if err != nil {
		t.Fatal(err)
	}
	if lf.leader.s.handoff.n.Load() != 1 {
		t.Fatalf("CreateCmd handed %d objects over, want 1", lf.leader.s.handoff.n.Load())
	}
	leader, _ := lf.apply(cmd)
	if leader.Err != nil {
		t.Fatal(leader.Err)
	}
	// The leader kept the handler's object (sharing its containers) rather
	// than decoding a new one.
	if got := leader.Object.(*api.Pod).Spec.Containers; &got[0] != &containers[0] {
		t.Error("the leader decoded the command instead of keeping the object CreateCmd prepared")
	}
	if n := lf.leader.s.handoff.n.Load(); n != 0 {
		t.Errorf("%d objects still handed over after Apply", n)
	}
	lf.leader.s.Release(cmd) // after Apply: nothing left to forget
}

func TestCreateHandoffUpdatesStayEqual(t *testing.T) {
	lf := newLeaderFollower(t)
	p := newPod("default", "p", "", map[string]string{})
	p.Spec.Containers[0].Args = []string{}
	cmd := lf.mustCmd(lf.leader.s.CreateCmd(p))
	lf.apply(cmd)
	lf.leader.s.Release(cmd)

	// An update with the same spec, decoded on both: the generation must
	// not move on either, which it would where the leader kept an empty
	// slice that the follower decoded as nil.
	u := newPod("default", "p", "", nil)
	u.UID = p.UID
	u.Labels = map[string]string{"a": "b"}
	leader, _ := lf.apply(lf.mustCmd(UpdateCmd(u, SubresourceMain)))
	if leader.Err != nil {
		t.Fatal(leader.Err)
	}
	if g := leader.Object.GetObjectMeta().Generation; g != 1 {
		t.Errorf("generation %d after an update that kept the spec, want 1", g)
	}
}

func TestCreateHandoffFallsBack(t *testing.T) {
	t.Run("released before apply", func(t *testing.T) {
		lf := newLeaderFollower(t)
		p := newPod("default", "p", "", nil)
		cmd := lf.mustCmd(lf.leader.s.CreateCmd(p))
		lf.leader.s.Release(cmd)
		if n := lf.leader.s.handoff.n.Load(); n != 0 {
			t.Fatalf("%d objects handed over after Release", n)
		}
		leader, _ := lf.apply(cmd)
		if leader.Err != nil {
			t.Fatal(leader.Err)
		}
		if &leader.Object.(*api.Pod).Spec.Containers[0] == &p.Spec.Containers[0] {
			t.Error("a released command still used the handed-over object")
		}
	})
	t.Run("same bytes elsewhere", func(t *testing.T) {
		lf := newLeaderFollower(t)
		p := newPod("default", "p", "", nil)
		cmd := lf.mustCmd(lf.leader.s.CreateCmd(p))
		defer lf.leader.s.Release(cmd)
		// A copy (as read back from the log) is not the handed-over command.
		res := lf.leader.apply(bytes.Clone(cmd))
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		if &res.Object.(*api.Pod).Spec.Containers[0] == &p.Spec.Containers[0] {
			t.Error("a copy of the command used the handed-over object")
		}
	})
	t.Run("refused create", func(t *testing.T) {
		lf := newLeaderFollower(t)
		p := newPod("missing", "p", "", nil)
		cmd := lf.mustCmd(lf.leader.s.CreateCmd(p))
		defer lf.leader.s.Release(cmd)
		if leader, _ := lf.apply(cmd); !api.IsNotFound(leader.Err) {
			t.Fatalf("create in a missing namespace: %v, want NotFound", leader.Err)
		}
	})
}

// The leader's shortcuts keep servers equal for every command it accepts
// (issue 9 item 4c), checked on random objects of every kind: a create
// the leader applies from the handed-off object (no decode) stores the
// same bytes, the same typed object and the same state hash as a follower
// that decodes the command; the stored bytes are the encoding of the
// stored object, so a server restored from a snapshot (which decodes
// them) holds what one that applied the log holds; and a bind, which
// splices the stored bytes instead of encoding the pod, keeps that true.
func TestLeaderShortcutsMatchFollowers(t *testing.T) {
	lf := newLeaderFollower(t)
	for _, r := range api.Resources {
		t.Run(r.Kind, func(t *testing.T) {
			lf.t = t
			f := &filler{r: rand.New(rand.NewPCG(7, uint64(len(r.Kind))))}
			accepted := 0
			for i := range 150 {
				obj := r.New()
				f.fill(reflect.ValueOf(obj).Elem())
				m := obj.GetObjectMeta()
				m.Name, m.ResourceVersion = fmt.Sprintf("o%d", i), ""
				if r.Namespaced {
					m.Namespace = "default"
				}
				if r.Kind == "Namespace" {
					// A terminating namespace's name must not collide
					// with "default", which the others live in.
					m.Name = fmt.Sprintf("ns%d", i)
				}
				cmd, err := lf.leader.s.CreateCmd(obj)
				if err != nil {
					continue // not a command the leader would propose
				}
				leader, follower := lf.apply(cmd)
				lf.leader.s.Release(cmd)
				if leader.Err != nil {
					continue
				}
				accepted++
				checkRawIsEncoding(t, "create", follower.Raw, follower.Object)
				if r.Kind != "Pod" {
					continue
				}
				node := []string{"n1", `odd"<node>`, "node-with-a-long-name.example.com"}[i%3]
				lb, fb := lf.apply(BindCmd(m.Namespace, m.Name, Binding{NodeName: node, Now: t0}))
				if lb.Err == nil {
					checkRawIsEncoding(t, "bind", fb.Raw, fb.Object)
				}
			}
			if accepted < 50 {
				t.Fatalf("only %d of 150 random %s objects were stored: the test does not exercise the store", accepted, r.Kind)
			}
		})
	}
}

func checkRawIsEncoding(t *testing.T, what string, raw []byte, obj api.Object) {
	t.Helper()
	want, err := api.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(raw, want) {
		t.Fatalf("%s: the stored bytes are not the stored object's encoding:\nstored  %s\nencoded %s", what, raw, want)
	}
}

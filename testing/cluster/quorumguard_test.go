package cluster

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
	"github.com/outpost-edge/outpost/controlplane/controllers"
)

// The quorum guard (issue 11 item 3, CPL-1) with real raft over TCP:
// every control-plane machine gets the QuorumGuard hook; deleting one
// waits, with an Event saying so, until a replacement server has joined
// (and been promoted); then the old member leaves raft, the hook goes and
// the deletion ends. Sampled throughout: never fewer than three voters.
func TestQuorumGuardReplacesBeforeRemoving(t *testing.T) {
	c := New(t, Options{Servers: 3, ControlLoops: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	leader := c.WaitForLeader(ctx)
	cl := c.Client(leader)
	machines := api.ResourceForKind("Machine")
	for _, m := range c.Members {
		if _, _, err := cl.Create(ctx, &api.Machine{ObjectMeta: api.ObjectMeta{Name: m.ID}}); err != nil {
			t.Fatal(err)
		}
	}
	// The leader's client: the removed server runs on, out of the
	// cluster, and knows no leader.
	lc := func() *client.Client {
		if l := c.Leader(); l != nil {
			return c.Client(l)
		}
		return cl
	}
	getMachine := func(name string) *api.Machine {
		obj, err := lc().Get(ctx, machines, "", name, client.GetOptions{})
		if err != nil {
			return nil
		}
		return obj.(*api.Machine)
	}
	hooked := func(m *api.Machine) bool {
		return m != nil && slices.ContainsFunc(m.Spec.LifecycleHooks.PreDrain, func(h api.LifecycleHook) bool {
			return h.Name == controllers.QuorumGuardHook && h.Owner == controllers.QuorumGuardOwner
		})
	}
	waitFor(t, ctx, "every server's machine guarded", func() bool {
		for _, m := range c.Members {
			if !hooked(getMachine(m.ID)) {
				return false
			}
		}
		return true
	})

	// Sample the voters from now on.
	var mu sync.Mutex
	fewest := 99
	sctx, stopSampling := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for sctx.Err() == nil {
			if l := c.Leader(); l != nil {
				if peers, err := l.Server.Node().Peers(sctx); err == nil {
					voters := 0
					for _, p := range peers {
						if p.Suffrage == "Voter" {
							voters++
						}
					}
					mu.Lock()
					fewest = min(fewest, voters)
					mu.Unlock()
				}
			}
			select {
			case <-sctx.Done():
			case <-time.After(20 * time.Millisecond): // the sampling interval
			}
		}
	})

	victim := c.Followers()[0].ID
	if _, err := cl.Delete(ctx, machines, "", victim, nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the guard waiting for a replacement", func() bool {
		evs, _, err := lc().List(ctx, api.ResourceForKind("Event"), "default", client.ListOptions{})
		if err != nil {
			return false
		}
		return slices.ContainsFunc(evs, func(o api.Object) bool {
			ev := o.(*api.Event)
			return ev.InvolvedObject.Name == victim && ev.Reason == "WaitingForReplacement"
		})
	})
	if m := getMachine(victim); !hooked(m) || m.Status.Phase != api.MachineDeleting {
		t.Fatalf("the victim's machine while no replacement joined: %+v", m)
	}
	added := c.AddServer()
	waitFor(t, ctx, "the victim's machine gone", func() bool { return getMachine(victim) == nil })
	stopSampling()
	wg.Wait()
	peers, err := c.Leader().Server.Node().Peers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, p := range peers {
		if p.Suffrage == "Voter" {
			ids = append(ids, p.ID)
		}
	}
	if slices.Contains(ids, victim) || !slices.Contains(ids, added.ID) || len(ids) != 3 {
		t.Errorf("voters after the replacement %v: want 3, %s in, %s out", ids, added.ID, victim)
	}
	if fewest < 3 {
		t.Errorf("the control plane had %d voters at one point; never fewer than 3", fewest)
	}
}

package cluster

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/auth"
	"github.com/outpost-edge/outpost/controlplane/client"
	"github.com/outpost-edge/outpost/controlplane/server"
)

var nodesR = api.ResourceForKind("Node")

// heartbeatGrace is the node monitor grace period of these tests.
const heartbeatGrace = 2 * time.Second

func withGrace(cfg *server.Config) { cfg.NodeMonitorGracePeriod = heartbeatGrace }

// nodeClient registers node name (status Ready, its heartbeat posted at
// posted) with a node token of its own, and returns a client acting as
// that node through member via, failing over to every other member.
func nodeClient(t *testing.T, ctx context.Context, c *Cluster, via *Member, name string, posted time.Time) *client.Client {
	t.Helper()
	admin := c.Client(via)
	id, secret := auth.NewToken()
	tok := &api.Token{ObjectMeta: api.ObjectMeta{Name: id}, Spec: api.TokenSpec{Role: api.RoleNode, NodeName: name, SecretHash: auth.HashSecret(secret)}}
	if _, err := admin.CreateToken(ctx, tok); err != nil {
		t.Fatal(err)
	}
	cfg := c.ClientConfig(via)
	cfg.Token = id + "." + secret
	for _, m := range c.Members {
		cfg.Servers = append(cfg.Servers, "https://"+m.APIAddr)
	}
	cl, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := api.NewTime(posted)
	n := &api.Node{ObjectMeta: api.ObjectMeta{Name: name}, Status: api.NodeStatus{Conditions: []api.NodeCondition{
		{Type: api.NodeReady, Status: api.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: ts, LastTransitionTime: ts},
	}}}
	if _, _, err := cl.Create(ctx, n); err != nil {
		t.Fatalf("register node %s: %v", name, err)
	}
	return cl
}

// readyOf returns the node's Ready status and when it last changed. The
// time is stored to the second (Kubernetes' Time), so it is returned as
// the end of that second: a lower bound check against it would
// otherwise be up to a second early.
func readyOf(n *api.Node) (string, time.Time) {
	for _, c := range n.Status.Conditions {
		if c.Type == api.NodeReady {
			var at time.Time
			if c.LastTransitionTime != nil {
				at = c.LastTransitionTime.Time.Truncate(time.Second).Add(time.Second)
			}
			return c.Status, at
		}
	}
	return "", time.Time{}
}

// heartbeatUntil sends node's heartbeats every period until stop is
// closed, counting those that succeeded.
func heartbeatUntil(ctx context.Context, cl *client.Client, node string, period time.Duration, stop <-chan struct{}, ok *atomic.Int64) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if _, err := cl.NodeHeartbeat(hctx, node); err == nil {
			ok.Add(1)
		}
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-stop:
			return
		case <-t.C:
		}
	}
}

// A node that heartbeats and does not change writes nothing through raft:
// over many heartbeats (through a follower, forwarded to the leader) and
// longer than the grace period, its resourceVersion stays and it stays
// Ready. Once its heartbeats stop it goes Unknown, no sooner than the
// grace period after the last one (issue 9 item 8).
func TestHeartbeatsWriteNoRaftEntries(t *testing.T) {
	ctx := ctxT(t, 2*time.Minute)
	c := New(t, Options{ControlLoops: true, Configure: withGrace})
	leader := c.WaitForLeader(ctx)
	via := c.Followers()[0]
	cl := nodeClient(t, ctx, c, via, "hb-quiet", time.Now())
	admin := c.Client(leader)
	obj, err := admin.Get(ctx, nodesR, "", "hb-quiet", client.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rv0 := obj.GetObjectMeta().ResourceVersion
	applied0 := leader.Server.Node().AppliedIndex()

	const beats = 30
	for i := range beats {
		if _, err := cl.NodeHeartbeat(ctx, "hb-quiet"); err != nil {
			t.Fatalf("heartbeat %d: %v", i, err)
		}
		if i < beats-1 {
			time.Sleep(heartbeatGrace / 20) // the heartbeat period under test, not synchronisation
		}
	}
	last := time.Now()
	applied := leader.Server.Node().AppliedIndex() - applied0
	obj, err = admin.Get(ctx, nodesR, "", "hb-quiet", client.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rv := obj.GetObjectMeta().ResourceVersion; rv != rv0 {
		st, _ := readyOf(obj.(*api.Node))
		t.Fatalf("%d heartbeats over %s (grace %s) changed the node: resourceVersion %s -> %s, Ready %s", beats, time.Since(last.Add(-beats*heartbeatGrace/20)).Round(time.Millisecond), heartbeatGrace, rv0, rv, st)
	}
	t.Logf("%d heartbeats: the node's resourceVersion stayed %s; the leader applied %d entries meanwhile (all writers)", beats, rv0, applied)
	if applied >= beats/2 {
		t.Errorf("the leader applied %d raft entries during %d heartbeats of a quiet cluster", applied, beats)
	}

	waitFor(t, ctx, "the silent node to go Unknown", func() bool {
		obj, err := admin.Get(ctx, nodesR, "", "hb-quiet", client.GetOptions{})
		if err != nil {
			return false
		}
		st, at := readyOf(obj.(*api.Node))
		if st != api.ConditionUnknown {
			return false
		}
		if d := at.Sub(last); d < heartbeatGrace {
			t.Errorf("marked Unknown %s after the last heartbeat, before the %s grace period", d, heartbeatGrace)
		}
		return true
	})
}

// A new leader has heard no heartbeat yet; it gives every node a full
// grace period from when it starts looking, whatever the stored status
// says. Here the nodes' last status write is an hour old, as it is for
// any node that heartbeats and has not changed: a node still
// heartbeating stays Ready through the failover, and one that stopped
// with the old leader is marked no sooner than a grace period after the
// failover (issue 9 item 8).
func TestNewLeaderGivesEveryNodeAFreshGracePeriod(t *testing.T) {
	ctx := ctxT(t, 2*time.Minute)
	c := New(t, Options{ControlLoops: true, Configure: withGrace})
	leader := c.WaitForLeader(ctx)
	via := c.Followers()[0]
	hourAgo := time.Now().Add(-time.Hour)
	live := nodeClient(t, ctx, c, via, "hb-live", hourAgo)
	quiet := nodeClient(t, ctx, c, via, "hb-stops", hourAgo)

	stopLive, stopQuiet := make(chan struct{}), make(chan struct{})
	var liveOK, quietOK atomic.Int64
	done := make(chan struct{}, 2)
	go func() { heartbeatUntil(ctx, live, "hb-live", heartbeatGrace/8, stopLive, &liveOK); done <- struct{}{} }()
	go func() {
		heartbeatUntil(ctx, quiet, "hb-stops", heartbeatGrace/8, stopQuiet, &quietOK)
		done <- struct{}{}
	}()
	defer func() {
		close(stopLive)
		<-done
	}()
	// Both stay Ready under the first leader for longer than the grace.
	admin := c.Client(via)
	watchFrom := func() string {
		obj, err := admin.Get(ctx, nodesR, "", "hb-live", client.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return obj.GetObjectMeta().ResourceVersion
	}
	watch, err := admin.Watch(ctx, nodesR, "", client.ListOptions{}, watchFrom())
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "heartbeats for longer than the grace period", func() bool {
		return liveOK.Load() > 12 && quietOK.Load() > 12
	})
	close(stopQuiet)
	<-done
	failover := time.Now()
	c.Stop(leader)
	c.WaitForLeader(ctx)

	// Watch both until hb-stops is marked; hb-live must never be.
	for {
		select {
		case <-ctx.Done():
			t.Fatal("hb-stops was never marked Unknown")
		case ev, ok := <-watch:
			if !ok || ev.Err != nil {
				t.Fatalf("node watch ended: %v", ev.Err)
			}
			n, _ := ev.Object.(*api.Node)
			if n == nil {
				continue
			}
			st, at := readyOf(n)
			switch {
			case n.Name == "hb-live" && st != api.ConditionTrue:
				t.Fatalf("hb-live, heartbeating all along, went %s %s after the failover", st, at.Sub(failover).Round(time.Millisecond))
			case n.Name == "hb-stops" && st == api.ConditionUnknown:
				if d := at.Sub(failover); d < heartbeatGrace {
					t.Fatalf("hb-stops marked Unknown %s after the failover, before a fresh %s grace period", d.Round(time.Millisecond), heartbeatGrace)
				}
				t.Logf("hb-stops marked Unknown %s after the failover (grace %s); hb-live stayed Ready", at.Sub(failover).Round(time.Millisecond), heartbeatGrace)
				return
			}
		}
	}
}

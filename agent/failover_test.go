package agent_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
	"github.com/outpost-edge/outpost/controlplane/server"
	"github.com/outpost-edge/outpost/testing/cluster"
)

// failoverGrace is the node monitor grace period of the failover test:
// short, so that an agent cut off from the control plane is marked
// Unknown well within the time the test watches.
const failoverGrace = 3 * time.Second

// An agent whose server stops fails over to another one: its node stays
// Ready (the node lifecycle controller never marks it Unknown, though
// the agent has no gossip to vouch for it) and it keeps receiving pods
// (issue 9 item 7).
func TestAgentFailsOverWhenItsServerStops(t *testing.T) {
	e := newEnvWith(t, cluster.Options{Servers: 3, ControlLoops: true, Configure: func(c *server.Config) {
		c.NodeMonitorGracePeriod = failoverGrace
	}})
	first := e.c.Members[0]
	cfg := e.config(e.rt)
	cfg.Server = "https://" + first.APIAddr
	cfg.JoinToken = e.joinString()
	e.start(cfg)
	// Watched and asked through another server than the agent's.
	other := e.c.Members[1]
	admin := e.c.Client(other)
	waitFor(t, "node Ready", 20*time.Second, func() (bool, string) {
		obj, err := admin.Get(e.ctx, nodesR, "", e.node, client.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return nodeReady(obj.(*api.Node)) == api.ConditionTrue, ""
	})
	// The credential names every server, not only the one joined.
	var cred struct {
		Servers []string `json:"servers"`
	}
	b, err := os.ReadFile(filepath.Join(e.dir, "credential.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &cred); err != nil {
		t.Fatal(err)
	}
	if len(cred.Servers) != 3 {
		t.Errorf("the credential lists servers %v, want all 3", cred.Servers)
	}

	obj, err := admin.Get(e.ctx, nodesR, "", e.node, client.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	watch, err := admin.Watch(e.ctx, nodesR, "", client.ListOptions{FieldSelector: "metadata.name=" + e.node}, obj.GetObjectMeta().ResourceVersion)
	if err != nil {
		t.Fatal(err)
	}
	e.c.Stop(first)
	wctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
	defer cancel()
	e.c.WaitForLeader(wctx)
	stopped := time.Now()

	// Over four grace periods, every version of the Node stays Ready.
	window := time.After(4 * failoverGrace)
	heartbeats := 0
watching:
	for {
		select {
		case ev, ok := <-watch:
			if !ok {
				t.Fatal("the node watch ended")
			}
			if ev.Err != nil {
				t.Fatalf("node watch: %v", ev.Err)
			}
			n, _ := ev.Object.(*api.Node)
			if n == nil {
				continue
			}
			if st := nodeReady(n); st != api.ConditionTrue {
				t.Fatalf("%s after the agent's server stopped, node Ready = %s: %+v", time.Since(stopped).Round(time.Millisecond), st, n.Status.Conditions)
			}
			heartbeats++
		case <-window:
			break watching
		}
	}
	t.Logf("%d node versions seen, all Ready, over %s after the agent's server stopped", heartbeats, 4*failoverGrace)

	// Pods bound after the stop reach the agent and run.
	e.admin = admin
	e.createPod("after-failover", nil)
	e.waitPhase("after-failover", api.PodRunning, nil)

	// A server added later is learned (from the heartbeat's reply or the
	// servers list) and saved in the credential.
	added := e.c.AddServer()
	waitFor(t, "the credential to list the added server", 30*time.Second, func() (bool, string) {
		b, err := os.ReadFile(filepath.Join(e.dir, "credential.json"))
		if err != nil {
			return false, err.Error()
		}
		if err := json.Unmarshal(b, &cred); err != nil {
			return false, err.Error()
		}
		return slices.Contains(cred.Servers, "https://"+added.APIAddr), strings.Join(cred.Servers, ",")
	})
}

// An agent whose node does not change proves it alive with heartbeats
// that the leader keeps in memory: over several grace periods its Node
// is not written (same resourceVersion) and stays Ready. When the
// control plane's copy says otherwise (marked Unknown), the heartbeat's
// reply makes the agent post its status again (issue 9 item 8).
func TestAgentHeartbeatsWithoutWritingStatus(t *testing.T) {
	const grace = 1500 * time.Millisecond
	e := newEnvWith(t, cluster.Options{Servers: 1, ControlLoops: true, Configure: func(c *server.Config) {
		c.NodeMonitorGracePeriod = grace
	}})
	cfg := e.config(e.rt)
	cfg.JoinToken = e.joinString()
	e.start(cfg)
	get := func() *api.Node {
		obj, err := e.admin.Get(e.ctx, nodesR, "", e.node, client.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return obj.(*api.Node)
	}
	var rv string
	waitFor(t, "node Ready", 20*time.Second, func() (bool, string) {
		obj, err := e.admin.Get(e.ctx, nodesR, "", e.node, client.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		rv = obj.GetObjectMeta().ResourceVersion
		return nodeReady(obj.(*api.Node)) == api.ConditionTrue, ""
	})
	watch, err := e.admin.Watch(e.ctx, nodesR, "", client.ListOptions{FieldSelector: "metadata.name=" + e.node}, rv)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-watch:
		n, _ := ev.Object.(*api.Node)
		t.Fatalf("the Node of an agent whose host did not change was written while it heartbeated: %s %+v", ev.Type, n)
	case <-time.After(4 * grace): // the window watched: four grace periods, eight heartbeats
	}
	if st := nodeReady(get()); st != api.ConditionTrue {
		t.Fatalf("node Ready = %s", st)
	}

	// Marked Unknown behind the agent's back: the next heartbeat's reply
	// says so, and the agent posts Ready again.
	n := get()
	for i := range n.Status.Conditions {
		n.Status.Conditions[i].Status = api.ConditionUnknown
	}
	if _, _, err := e.admin.UpdateStatus(e.ctx, n); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the agent to post Ready again", 20*time.Second, func() (bool, string) {
		st := nodeReady(get())
		return st == api.ConditionTrue, st
	})
}

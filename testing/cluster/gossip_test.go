package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/gossip"
)

// serversSeen counts the live server members m's pool knows.
func serversSeen(m *Member) int {
	n := 0
	for _, mem := range m.Server.Gossip().Members() {
		if mem.Role == gossip.RoleServer && mem.State == gossip.StateAlive {
			n++
		}
	}
	return n
}

// waitGossip polls cond until it holds or 20s pass.
func waitGossip(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s", what, why)
		}
		<-tick.C
	}
}

// The servers of a cluster form one gossip pool, so an agent that joins
// any of them through the addresses a server hands out reaches all; a
// server that stops is recorded as having left, not failed.
func TestServersGossipTogether(t *testing.T) {
	c := New(t, Options{Servers: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	leader := c.WaitForLeader(ctx)
	waitGossip(t, "every server sees the three servers", func() (bool, string) {
		for _, m := range c.Running() {
			if n := serversSeen(m); n != 3 {
				return false, fmt.Sprintf("%s sees %d", m.ID, n)
			}
		}
		return true, ""
	})
	addrs := leader.Server.GossipAddrs()
	if len(addrs) != 3 || addrs[0] != leader.Server.Gossip().LocalAddr() {
		t.Fatalf("leader's GossipAddrs = %v, want 3, its own first (%s)", addrs, leader.Server.Gossip().LocalAddr())
	}

	gone := c.Followers()[0]
	c.Stop(gone)
	waitGossip(t, "the others record "+gone.ID+" as left", func() (bool, string) {
		for _, m := range c.Running() {
			mem, _ := m.Server.Gossip().Member("server:" + gone.ID)
			if mem.State != gossip.StateLeft {
				return false, fmt.Sprintf("%s sees it %s", m.ID, mem.State)
			}
		}
		return true, ""
	})
	if got := leader.Server.GossipAddrs(); len(got) != 2 {
		t.Fatalf("GossipAddrs after a server left = %v, want 2", got)
	}
}

package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
	"github.com/outpost-edge/outpost/controlplane/server"
	"github.com/outpost-edge/outpost/raftstore"
)

// corruptingFSM applies a different command than the log holds on one
// server: it rewrites the marker in a command's bytes, as a bit flip or a
// decoding bug would, and so plants a divergence no other check sees.
type corruptingFSM struct {
	raftstore.FSM
	on func() bool
}

var divergeFrom, divergeTo = []byte("diverge-aaaa"), []byte("diverge-bbbb")

func (f *corruptingFSM) Apply(index uint64, cmd []byte) any {
	if f.on() && bytes.Contains(cmd, divergeFrom) {
		cmd = bytes.ReplaceAll(bytes.Clone(cmd), divergeFrom, divergeTo)
	}
	return f.FSM.Apply(index, cmd)
}

func stateHashReport(ctx context.Context, cl *client.Client) (api.StateHashReport, error) {
	var rep api.StateHashReport
	body, _, err := cl.Do(ctx, "GET", "/debug/statehash", nil, nil)
	if err != nil {
		return rep, err
	}
	return rep, json.Unmarshal(body, &rep)
}

// A server whose state drifted from its peers' is found by the state hash
// check (issue 9 item 4b): it fails /readyz saying so, every server's
// report names it, the mismatch is counted in the metrics, and the leader
// records a Warning event naming it. Before the divergence every check
// agrees, so the check does not cry wolf.
func TestStateHashCheckFindsADivergedServer(t *testing.T) {
	ctx := ctxT(t, 2*time.Minute)
	var victim atomic.Value // the ID of the server that applies a corrupted command
	victim.Store("")
	c := New(t, Options{Configure: func(cfg *server.Config) {
		cfg.StateHashInterval = 100 * time.Millisecond
		id := cfg.ID
		cfg.WrapFSM = func(inner raftstore.FSM) raftstore.FSM {
			return &corruptingFSM{FSM: inner, on: func() bool { return victim.Load() == id }}
		}
	}})
	leader := c.WaitForLeader(ctx)
	var f *Member
	for _, m := range c.Members {
		if m != leader {
			f = m
			break
		}
	}
	lc := c.Client(leader)
	svc := func(name string) *api.Service {
		return &api.Service{
			ObjectMeta: api.ObjectMeta{Name: name, Namespace: "default", Annotations: map[string]string{"v": string(divergeFrom)}},
			Spec:       api.ServiceSpec{ClusterIP: "None"},
		}
	}

	// Before: the same object everywhere, and checks past it agree.
	obj, _, err := lc.Create(ctx, svc("same"))
	if err != nil {
		t.Fatal(err)
	}
	at, err := strconv.ParseUint(obj.GetObjectMeta().ResourceVersion, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range c.Members {
		cl := c.Client(m)
		waitFor(t, ctx, m.ID+"'s first check past index "+obj.GetObjectMeta().ResourceVersion, func() bool {
			rep, err := stateHashReport(ctx, cl)
			if err != nil || rep.Index < at {
				return false
			}
			if len(rep.Diverged) > 0 {
				t.Fatalf("%s reports a divergence before there is one: %+v", m.ID, rep)
			}
			known := 0
			for _, sh := range rep.Servers {
				if sh.Hash != "" {
					known++
					if sh.Hash != rep.Servers[0].Hash {
						t.Fatalf("%s: hashes differ before any divergence: %+v", m.ID, rep)
					}
				}
			}
			return known == len(c.Members)
		})
	}

	// f applies the next marked object with other bytes than the log's.
	victim.Store(f.ID)
	if _, _, err := lc.Create(ctx, svc("diverged")); err != nil {
		t.Fatal(err)
	}
	fc := c.Client(f)
	waitFor(t, ctx, f.ID+" to fail /readyz", func() bool {
		_, _, err := fc.Do(ctx, "GET", "/readyz", nil, nil)
		return err != nil && strings.Contains(err.Error(), "state differs from its peers")
	})
	for _, m := range c.Members {
		cl := c.Client(m)
		waitFor(t, ctx, m.ID+"'s report to name "+f.ID, func() bool {
			rep, err := stateHashReport(ctx, cl)
			return err == nil && slices.Equal(rep.Diverged, []string{f.ID})
		})
		if m != f {
			if _, _, err := cl.Do(ctx, "GET", "/readyz", nil, nil); err != nil {
				t.Errorf("%s, whose state is the majority's, is not ready: %v", m.ID, err)
			}
		}
	}
	waitFor(t, ctx, "a StateDiverged event naming "+f.ID, func() bool {
		evs, _, err := lc.List(ctx, api.ResourceForKind("Event"), server.NamespaceSystem, client.ListOptions{})
		if err != nil {
			return false
		}
		for _, o := range evs {
			ev := o.(*api.Event)
			if ev.Reason == "StateDiverged" && ev.InvolvedObject.Name == f.ID && ev.Type == "Warning" {
				return true
			}
		}
		return false
	})
	metrics, _, err := lc.Do(ctx, "GET", "/metrics", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(metrics, []byte("outpost_state_hash_mismatches_total ")) || bytes.Contains(metrics, []byte("outpost_state_hash_mismatches_total 0\n")) {
		t.Errorf("the leader's metrics count no mismatch:\n%s", grepLines(metrics, "outpost_state_hash"))
	}
}

func grepLines(b []byte, s string) string {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

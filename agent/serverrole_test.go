package agent_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/agent"
	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
)

var machinesR = api.ResourceForKind("Machine")

// fakeRole records what the agent asks of the server role.
type fakeRole struct {
	mu     sync.Mutex
	starts [][]string
	stops  int
}

func (f *fakeRole) Start(_ context.Context, args []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.starts = append(f.starts, slices.Clone(args))
	return nil
}

func (f *fakeRole) Stop(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stops++
	return nil
}

func (f *fakeRole) state() (starts [][]string, stops int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.starts), f.stops
}

// flagValue is the value after flag in args ("" without it).
func flagValue(args []string, flag string) string {
	if i := slices.Index(args, flag); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return ""
}

// TestServerRole: an eligible agent (SPEC CPL-2) labels its Node; when
// the control plane machine set asks its machine to serve, the leader's
// heartbeat reply carries the request and the agent starts `outpost
// server` joining through the raft members, as its node's name, with the
// cluster secret's file; a restarted agent starts the saved role again
// without being asked; once the machine's deletion reaches the provider
// the agent stops the role, forgets it and says so on its Node, which
// the release waits for (MCH-1).
func TestServerRole(t *testing.T) {
	e := newEnv(t)
	secret := filepath.Join(t.TempDir(), "cluster-secret")
	if err := os.WriteFile(secret, []byte(strings.Repeat("s", 40)), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := e.config(e.rt)
	cfg.JoinToken = e.joinString()
	cfg.ControlPlaneEligible = true
	cfg.ClusterSecretFile = secret
	cfg.ServerArgs = []string{"--raft-snapshot-threshold", "100"}
	role := &fakeRole{}
	cfg.ServerRole = role
	e.start(cfg)

	waitFor(t, "the node's machine, eligible", 30*time.Second, func() (bool, string) {
		obj, err := e.admin.Get(e.ctx, nodesR, "", e.node, client.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if obj.(*api.Node).Labels[api.LabelControlPlaneEligible] != "true" {
			return false, "node labels " + strings.Join(mapKeys(obj.(*api.Node).Labels), ",")
		}
		_, err = e.admin.Get(e.ctx, machinesR, "", e.node, client.GetOptions{})
		return err == nil, "machine: " + errString(err)
	})
	if starts, _ := role.state(); len(starts) != 0 {
		t.Fatalf("the server role started unasked: %v", starts)
	}
	setMachine(t, e, func(m *api.Machine) {
		m.Annotations = map[string]string{api.AnnotationServerRequested: "z1 2026-11-26T08:00:00Z"}
	})
	waitFor(t, "the server role started", 30*time.Second, func() (bool, string) {
		starts, _ := role.state()
		return len(starts) == 1, ""
	})
	starts, _ := role.state()
	args := starts[0]
	if args[0] != "server" || flagValue(args, "--id") != e.node || flagValue(args, "--join") != e.c.Members[0].RaftAddr ||
		flagValue(args, "--cluster-secret-file") != secret || flagValue(args, "--advertise-raft") != "127.0.0.1:6444" ||
		flagValue(args, "--data-dir") != filepath.Join(e.dir, "server") || flagValue(args, "--raft-snapshot-threshold") != "100" {
		t.Errorf("server role args %q", args)
	}
	// Asked again at every heartbeat until the server joins: started once.
	hbs := heartbeatsSeen(t, e, 3)
	if starts, _ := role.state(); len(starts) != 1 {
		t.Errorf("the server role started %d times in %d heartbeats, want once", len(starts), hbs)
	}

	// A restarted agent runs the saved role before anything asks it.
	e.stopAgent()
	setMachine(t, e, func(m *api.Machine) { delete(m.Annotations, api.AnnotationServerRequested) })
	role2 := &fakeRole{}
	cfg.ServerRole = role2
	cfg.JoinToken = ""
	e.start(cfg)
	waitFor(t, "the saved server role started again", 30*time.Second, func() (bool, string) {
		starts, _ := role2.state()
		return len(starts) == 1 && slices.Equal(starts[0], args), ""
	})

	// The machine's deletion: drained, no hooks, Terminable; the agent
	// is told to release.
	if _, err := e.admin.Delete(e.ctx, machinesR, "", e.node, nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the role stopped and the node annotated", 60*time.Second, func() (bool, string) {
		_, stops := role2.state()
		obj, err := e.admin.Get(e.ctx, nodesR, "", e.node, client.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		_, ok := obj.(*api.Node).Annotations[api.AnnotationRolesStopped]
		return stops == 1 && ok, ""
	})
	if _, err := os.Stat(filepath.Join(e.dir, "server-role.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the server role's file after the release: %v, want it gone", err)
	}
}

// TestServerRoleNeedsSecret: an eligible agent without the cluster
// secret's file is refused at start, saying what it needs.
func TestServerRoleNeedsSecret(t *testing.T) {
	cfg := agent.Config{DataDir: t.TempDir(), NodeName: "n", ControlPlaneEligible: true}
	err := agent.Run(context.Background(), cfg)
	if !errors.Is(err, agent.ErrConfig) || !strings.Contains(err.Error(), "--control-plane-eligible needs --cluster-secret-file") {
		t.Errorf("Run: %v", err)
	}
	cfg.ClusterSecretFile = filepath.Join(t.TempDir(), "missing")
	if err := agent.Run(context.Background(), cfg); !errors.Is(err, agent.ErrConfig) || !strings.Contains(err.Error(), "--cluster-secret-file") {
		t.Errorf("Run with a missing secret file: %v", err)
	}
}

func setMachine(t *testing.T, e *env, change func(*api.Machine)) {
	t.Helper()
	for {
		obj, err := e.admin.Get(e.ctx, machinesR, "", e.node, client.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		m := obj.(*api.Machine)
		change(m)
		_, _, err = e.admin.Update(e.ctx, m)
		if !api.IsConflict(err) {
			if err != nil {
				t.Fatal(err)
			}
			return
		}
	}
}

// heartbeatsSeen waits until the leader heard n more of the node's
// heartbeats and returns n.
func heartbeatsSeen(t *testing.T, e *env, n int) int {
	t.Helper()
	srv := e.c.Members[0].Server
	last, _ := srv.NodeHeartbeat(e.node)
	for seen := 0; seen < n; {
		waitFor(t, "a heartbeat", 10*time.Second, func() (bool, string) {
			at, ok := srv.NodeHeartbeat(e.node)
			if ok && at.After(last) {
				last = at
				return true, ""
			}
			return false, ""
		})
		seen++
	}
	return n
}

func mapKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

//go:build unix

package sim

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/client"
)

// syncBuffer is a strings.Builder that the agents' goroutines and the test
// may use at once.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// `sim agents` registers the stamped-out nodes, switches them all on
// SIGUSR1 and SIGUSR2, and stops on its context leaving them registered.
func TestAgentsCommand(t *testing.T) {
	adminCfg, confPath := startServer(t)
	admin, err := client.New(adminCfg)
	if err != nil {
		t.Fatal(err)
	}
	nodesFile := filepath.Join(t.TempDir(), "nodes.yaml")
	if err := os.WriteFile(nodesFile, []byte("apiVersion: v1\nkind: Node\nmetadata: {name: cli}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out syncBuffer
	cmd := Command()
	cmd.SetArgs([]string{"agents", "-f", nodesFile, "--count", "2", "--heartbeat", "1s", "--config", confPath})
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()

	waitFor(t, "2 nodes running", 10*time.Second, func() bool { return strings.Contains(out.String(), "2 nodes running") })
	for _, name := range []string{"cli-0001", "cli-0002"} {
		if n := getNode(t, admin, name); !IsSimulated(n) {
			t.Errorf("node %s is not marked simulated", name)
		}
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "SIGUSR1 handled", 5*time.Second, func() bool { return strings.Contains(out.String(), "2 nodes silenced") })
	if err := syscall.Kill(os.Getpid(), syscall.SIGUSR2); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "SIGUSR2 handled", 5*time.Second, func() bool { return strings.Contains(out.String(), "2 nodes resumed") })
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("sim agents: %v\n%s", err, out.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("sim agents did not stop")
	}
	if !strings.Contains(out.String(), "stay registered") {
		t.Errorf("no shutdown line in %q", out.String())
	}
	getNode(t, admin, "cli-0001") // still registered
}

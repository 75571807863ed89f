package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
	"github.com/outpost-edge/outpost/testing/proc"
)

// writeStream creates pods from several clients until ctx ends, and records
// every name whose create was acknowledged.
func writeStream(ctx context.Context, cl *client.Client, clients int, prefix string, acked *sync.Map, count *atomic.Int64) *sync.WaitGroup {
	var wg sync.WaitGroup
	var seq atomic.Int64
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				name := fmt.Sprintf("%s-%d", prefix, seq.Add(1))
				p := &api.Pod{
					ObjectMeta: api.ObjectMeta{Name: name, Namespace: "default"},
					Spec:       api.PodSpec{Containers: []api.Container{{Name: "c", Image: "img:1"}}},
				}
				if _, _, err := cl.Create(ctx, p); err == nil {
					acked.Store(name, true)
					count.Add(1)
				}
			}
		}()
	}
	return &wg
}

func waitCount(t *testing.T, n *atomic.Int64, want int64, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for n.Load() < want {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d writes acknowledged after %v", n.Load(), want, timeout)
		}
		time.Sleep(5 * time.Millisecond) // polling a counter, with a deadline
	}
}

// missing lists the acknowledged names (keys of acked) that a consistent
// list no longer holds, and how many were acknowledged.
func missing(ctx context.Context, cl *client.Client, acked *sync.Map) (total, stored int, lost []string, err error) {
	items, _, err := cl.List(ctx, api.ResourceForKind("Pod"), "default", client.ListOptions{Consistent: true})
	if err != nil {
		return 0, 0, nil, err
	}
	have := make(map[string]bool, len(items))
	for _, it := range items {
		have[it.GetObjectMeta().Name] = true
	}
	acked.Range(func(k, _ any) bool {
		total++
		if !have[k.(string)] {
			lost = append(lost, k.(string))
		}
		return true
	})
	return total, len(items), lost, nil
}

func assertAllPresent(t *testing.T, ctx context.Context, cl *client.Client, acked *sync.Map) {
	t.Helper()
	total, stored, lost, err := missing(ctx, cl, acked)
	if err != nil {
		t.Fatalf("list after restart: %v", err)
	}
	if len(lost) > 0 {
		t.Fatalf("%d of %d acknowledged writes lost after SIGKILL, e.g. %v", len(lost), total, lost[:min(5, len(lost))])
	}
	t.Logf("all %d acknowledged writes survived (%d objects stored)", total, stored)
}

// A real server process killed with SIGKILL in the middle of a write stream
// loses no acknowledged write (ARCHITECTURE hard rule; issue 2).
func TestCrashSingleServerKill9(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, _, cl := startCluster(ctx, t, 1)
	s := c.Servers[0]
	var acked sync.Map
	var n atomic.Int64
	wctx, stop := context.WithCancel(ctx)
	wg := writeStream(wctx, cl, 8, "k", &acked, &n)
	waitCount(t, &n, 300, time.Minute)
	c.Kill(s) // SIGKILL while the writers are still writing
	stop()
	wg.Wait()

	if err := c.Start(s); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	assertAllPresent(t, ctx, cl, &acked)
}

// Three servers killed with SIGKILL at once (a site losing power) keep every
// write that was acknowledged before.
func TestCrashWholeClusterKill9(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, _, cl := startCluster(ctx, t, 3)
	var acked sync.Map
	var n atomic.Int64
	wctx, stop := context.WithCancel(ctx)
	wg := writeStream(wctx, cl, 8, "w", &acked, &n)
	waitCount(t, &n, 300, time.Minute)
	c.KillAll()
	stop()
	wg.Wait()
	if err := c.StartAll(ctx); err != nil {
		t.Fatal(err)
	}
	assertAllPresent(t, ctx, cl, &acked)
}

// startCluster starts n server processes with args, stopped when the test
// ends, and returns them with the admin's client config and client.
func startCluster(ctx context.Context, t *testing.T, n int, args ...string) (*proc.Cluster, client.Config, *client.Client) {
	t.Helper()
	c, err := proc.StartCluster(ctx, outpostBin, t.TempDir(), n, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	t.Cleanup(func() {
		if t.Failed() {
			for _, s := range c.Servers {
				dumpTail(t, "server "+s.ID, filepath.Join(s.Dir, "server.log"), 40)
			}
		}
	})
	cfg, err := c.Servers[0].AdminConfig()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := c.Servers[0].Client()
	if err != nil {
		t.Fatal(err)
	}
	return c, cfg, cl
}

// A server whose port another process took meanwhile exits; the start
// says so at once, with that server's log, and a fresh cluster's start
// tries again on new ports (CI runs other packages' tests beside these,
// and ports are picked free before the servers bind them).
func TestClusterStartSurvivesATakenPort(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	newCluster := func() *proc.Cluster {
		c := &proc.Cluster{Bin: outpostBin, Secret: "a-secret-for-the-taken-port-test"}
		root := t.TempDir()
		for _, id := range []string{"s1", "s2", "s3"} {
			s, err := proc.NewServer(id, filepath.Join(root, id))
			if err != nil {
				t.Fatal(err)
			}
			c.Servers = append(c.Servers, s)
		}
		c.Servers[1].APIAddr = taken.Addr().String()
		return c
	}

	c := newCluster()
	start := time.Now()
	err = c.StartAll(ctx)
	c.Stop()
	if !errors.Is(err, proc.ErrPortTaken) || !strings.Contains(err.Error(), "server s2 exited") || time.Since(start) > 30*time.Second {
		t.Fatalf("StartAll with s2's port taken: after %v: %v; want at once, naming s2 and ErrPortTaken", time.Since(start), err)
	}

	c = newCluster()
	defer c.Stop()
	if err := c.StartFresh(ctx); err != nil {
		t.Fatalf("StartFresh with s2's port taken: %v", err)
	}
	if c.Servers[1].APIAddr == taken.Addr().String() {
		t.Error("s2 kept the taken port")
	}
}

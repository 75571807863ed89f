package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
)

// BenchmarkReleaseUpdateRealSystemd (issue 13's performance section):
// three servers, each the packaged unit under a real systemd on its own
// nspawn host, OUTPOST_BENCH_OBJECTS objects stored (default 10,000),
// move from 1.0.0 to 1.1.0 with `outpost adm upgrade` while a client
// writes. Reported: the update's total time, the longest time without an
// acknowledged write, and each server's restart to healthy (its status
// probe failing to it answering as a ready voter on 1.1.0). One update
// per iteration, on fresh hosts (run it with -benchtime 1x).
func BenchmarkReleaseUpdateRealSystemd(b *testing.B) {
	objects := 10000
	if v, err := strconv.Atoi(os.Getenv("OUTPOST_BENCH_OBJECTS")); err == nil {
		objects = v
	}
	for range b.N {
		b.StopTimer()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
		e := startReleaseEnv(b, ctx, 0)
		e.follow(b, ctx)
		storeObjects(b, ctx, e.c, objects)
		rs := watchRestarts(ctx, e.c.cl, "1.1.0")
		load := startWriteLoad(b, ctx, e.c, e.apis)
		b.StartTimer()
		t0 := time.Now()
		e.c.mustCLI(ctx, "adm", "upgrade", "--to", "1.1.0")
		waitFor(b, 10*time.Minute, "the update to 1.1.0 completed", func() (bool, string) {
			v := e.cv(ctx)
			ok := len(v.Status.History) > 0 && v.Status.History[0].Version == "1.1.0" && v.Status.History[0].State == api.UpdateCompleted
			return ok, cvConds(v)
		})
		total := time.Since(t0)
		b.StopTimer()
		r := load.stop()
		restarts := rs.stop()
		longest := time.Duration(0)
		for _, d := range restarts {
			longest = max(longest, d)
		}
		b.Logf("%d objects stored: 1.0.0 → 1.1.0 in %.1f s; restart to healthy %v (longest %.1f s); longest write gap %.2f s; reachable voters %d–%d; %d writes acknowledged",
			objects, total.Seconds(), roundAll(restarts), longest.Seconds(), r.maxGap.Seconds(), r.minVoters, r.maxVoters, r.acked)
		b.ReportMetric(total.Seconds(), "total-s")
		b.ReportMetric(r.maxGap.Seconds(), "write-gap-s")
		b.ReportMetric(longest.Seconds(), "restart-s")
		cancel()
	}
}

// storeObjects creates n namespaces, 16 at a time.
func storeObjects(tb testing.TB, ctx context.Context, c *testCluster, n int) {
	tb.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	next := make(chan int)
	for range 16 {
		wg.Go(func() {
			for i := range next {
				ns := &api.Namespace{ObjectMeta: api.ObjectMeta{Name: fmt.Sprintf("stored-%05d", i)}}
				if _, _, err := c.cl.Create(ctx, ns); err != nil && !api.IsAlreadyExists(err) {
					select {
					case errs <- err:
					default:
					}
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		tb.Fatalf("storing %d objects: %v", n, err)
	default:
	}
}

// restartWatch samples the raft peers every 100 ms and times each
// server's restart: from its status probe failing to it answering as a
// ready voter on version.
type restartWatch struct {
	stopFn context.CancelFunc
	done   chan map[string]time.Duration
}

func watchRestarts(ctx context.Context, cl *client.Client, version string) *restartWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &restartWatch{stopFn: cancel, done: make(chan map[string]time.Duration, 1)}
	go func() {
		down := map[string]time.Time{}
		out := map[string]time.Duration{}
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			rctx, c := context.WithTimeout(ctx, 2*time.Second)
			ps, err := cl.RaftPeers(rctx)
			c()
			now := time.Now()
			if err == nil {
				for _, p := range ps {
					_, wasDown := down[p.ID]
					switch {
					case !p.Reachable && !wasDown:
						down[p.ID] = now
					case wasDown && p.Reachable && p.Version == version && p.Info["selfUpdate"] == api.SelfUpdateReady:
						if _, done := out[p.ID]; !done {
							out[p.ID] = now.Sub(down[p.ID])
						}
					}
				}
			}
			select {
			case <-ctx.Done():
				w.done <- out
				return
			case <-t.C:
			}
		}
	}()
	return w
}

func (w *restartWatch) stop() map[string]time.Duration {
	w.stopFn()
	return <-w.done
}

func roundAll(m map[string]time.Duration) map[string]time.Duration {
	out := make(map[string]time.Duration, len(m))
	for k, v := range m {
		out[k] = v.Round(100 * time.Millisecond)
	}
	return out
}

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/outpost-edge/outpost/controlplane/client"
	"github.com/outpost-edge/outpost/internal/plant"
	"github.com/outpost-edge/outpost/testing/linearize"
	"github.com/outpost-edge/outpost/testing/proc"
)

// Faults of the process-level nemesis, in the order it applies them. Each
// reveals bugs the in-process cluster's graceful stops cannot: SIGTERM of
// the leader hands leadership over with writes in flight (their outcome is
// unknown to the server, and they do commit); SIGKILL runs no shutdown
// code; SIGSTOP leaves a leader that still believes it leads while another
// wins, then answers what queued up; killing every server restarts the
// cluster from a long unapplied log tail.
var crashFaults = []string{"sigterm-leader", "sigkill-leader", "sigstop-leader", "kill-all"}

// A history of creates, conditional updates, deletes and consistent reads
// recorded against three real server processes while they are terminated,
// killed, paused and all killed at once is linearizable (issue 9 item 6).
func TestLinearizableUnderCrashes(t *testing.T) {
	dur := 30 * time.Second
	if os.Getenv("OUTPOST_SOAK") != "" {
		dur = 5 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), dur+4*time.Minute)
	defer cancel()
	res, sum := runLinearizable(ctx, t, outpostBin, dur, crashFaults)
	if res != porcupine.Ok {
		t.Fatalf("history is %s, not linearizable: %s", res, sum)
	}
}

// Each bug of internal/plant, switched on in a binary built with the
// outpost_plant tag, makes the same run non-linearizable: the check above
// can fail, for the bugs a store is likely to have (issue 9 item 6). A bug
// that shows only under some interleavings gets a few runs.
func TestPlantedBugsAreCaught(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "outpost-plant")
	build := exec.Command("go", "build", "-tags", "outpost_plant", "-o", bin, "github.com/outpost-edge/outpost/cmd/outpost")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		t.Fatalf("build with planted bugs: %v", err)
	}
	// Which faults reveal each bug; the others only slow the run down.
	reveal := map[string][]string{
		plant.StaleRead:          {"sigstop-leader"},
		plant.IgnorePrecondition: {"sigkill-leader"},
		plant.LostWrite:          {"sigkill-leader"},
		plant.SkipReadBarrier:    {"kill-all"},
		plant.UnknownAs503:       {"sigterm-leader", "sigstop-leader"},
		plant.NoLeaderCheck:      {"sigstop-leader"},
	}
	// A leader that steps down within microseconds of waking, as raft's
	// lease check makes it, leaves these two bugs a narrow window: they
	// are caught in some runs, not all, so they run in make soak, where
	// each gets up to ten; make test runs the four every run catches.
	racy := map[string]bool{plant.UnknownAs503: true, plant.NoLeaderCheck: true}
	soak := os.Getenv("OUTPOST_SOAK") != ""
	for _, bug := range plant.All {
		t.Run(bug, func(t *testing.T) {
			attempts := 2
			switch {
			case racy[bug] && !soak:
				t.Skip("caught only in some runs; make soak runs it (OUTPOST_SOAK=1)")
			case racy[bug]:
				attempts = 10
			}
			t.Setenv("OUTPOST_PLANT", bug) // inherited by the server processes
			for i := range attempts {
				ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
				res, sum := runLinearizable(ctx, t, bin, 15*time.Second, reveal[bug])
				cancel()
				if res == porcupine.Illegal {
					t.Logf("caught on run %d: %s", i+1, sum)
					return
				}
				t.Logf("run %d: history %s: %s", i+1, res, sum)
			}
			t.Fatalf("planted bug %q was not caught in %d runs", bug, attempts)
		})
	}
}

// runLinearizable runs the workload against three fresh server processes of
// bin for dur while the nemesis applies faults in turn, and checks the
// history.
func runLinearizable(ctx context.Context, t *testing.T, bin string, dur time.Duration, faults []string) (porcupine.CheckResult, string) {
	t.Helper()
	c, err := proc.StartCluster(ctx, bin, t.TempDir(), 3)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	h := linearize.NewHistory()
	w := &linearize.Workload{History: h, Keys: []string{"k0", "k1", "k2", "k3", "k4", "k5"}, Namespace: "default"}
	var clients []*client.Client
	for _, s := range c.Servers {
		cl, err := s.Client()
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, cl)
	}
	runCtx, stop := context.WithTimeout(ctx, dur)
	defer stop()
	done := processNemesis(runCtx, t, c, clients, faults)
	w.RunAll(runCtx, 12, clients)
	applied := done()

	sum, counts := linearize.Summary(h)
	sum = fmt.Sprintf("%s; faults: %v", sum, applied)
	t.Logf("history: %s", sum)
	if err := linearize.Thin(counts); err != nil {
		t.Fatalf("history too thin to mean anything (%v): %s", err, sum)
	}
	start := time.Now()
	res, info := h.Check(2 * time.Minute)
	took := time.Since(start).Round(time.Millisecond)
	t.Logf("checked in %v: %s", took, res)
	sum += fmt.Sprintf("; checked in %v", took)
	if res != porcupine.Ok {
		// Unknown too: a checker that ran out of time may have been
		// proving an illegal history, and only the history can tell.
		sum += "; " + h.Save(info, "outpost-linearizability-"+filepath.Base(t.Name()))
	}
	return res, sum
}

// processNemesis applies faults in turn, one every couple of seconds, until
// ctx ends; the function it returns waits until every server runs again
// and lists what was done.
func processNemesis(ctx context.Context, t *testing.T, c *proc.Cluster, clients []*client.Client, faults []string) func() []string {
	var done []string
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		// pause waits out a fault's length; the schedule, not a stand-in
		// for synchronisation.
		pause := func(d time.Duration) {
			select {
			case <-ctx.Done():
			case <-time.After(d):
			}
		}
		restart := func(ss ...*proc.Server) {
			for _, s := range ss {
				if err := c.Start(s); err != nil {
					t.Errorf("nemesis: restart %s: %v", s.ID, err)
				}
			}
		}
		for round := 0; ctx.Err() == nil; round++ {
			pause(2 * time.Second)
			if ctx.Err() != nil {
				return
			}
			f := faults[round%len(faults)]
			if f == "kill-all" {
				c.KillAll()
				done = append(done, f)
				pause(500 * time.Millisecond)
				restart(c.Servers...)
				continue
			}
			l := leaderOf(ctx, c, clients)
			if l == nil {
				continue
			}
			done = append(done, f+" "+l.ID)
			switch f {
			case "sigterm-leader":
				c.Terminate(l)
				pause(time.Second)
				restart(l)
			case "sigkill-leader":
				c.Kill(l)
				pause(time.Second)
				restart(l)
			case "sigstop-leader":
				// Long enough for the others to elect a leader (election
				// timeout 1 s) and take writes.
				if err := c.Pause(l); err != nil {
					t.Errorf("nemesis: %v", err)
					return
				}
				pause(4 * time.Second)
				if err := c.Resume(l); err != nil {
					t.Errorf("nemesis: %v", err)
					return
				}
			}
		}
	}()
	return func() []string {
		<-finished
		// Everything runs again (a paused server was resumed above, a
		// killed one restarted): the next run starts clean.
		return done
	}
}

// leaderOf asks the running servers which of them leads, clients[i]
// talking to c.Servers[i]; nil when none answers within a second.
func leaderOf(ctx context.Context, c *proc.Cluster, clients []*client.Client) *proc.Server {
	for i, s := range c.Servers {
		if s.PID() == 0 {
			continue
		}
		qctx, cancel := context.WithTimeout(ctx, time.Second)
		peers, err := clients[i].RaftPeers(qctx)
		cancel()
		if err != nil {
			continue
		}
		for _, p := range peers {
			if !p.Leader {
				continue
			}
			for _, o := range c.Servers {
				if o.ID == p.ID {
					return o
				}
			}
		}
	}
	return nil
}

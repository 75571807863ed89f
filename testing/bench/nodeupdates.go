package main

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/outpost-edge/outpost/agent/sim"
	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
)

// The rolling update of a large pool (issue 12's performance section):
// simulated nodes play an agent's config update (Working and cordoned,
// then Done UpdateDuration later) while the machine config controller of
// three real servers rolls a new config out at maxUnavailable. The
// ideal is nodes / maxUnavailable × the update's duration.

type updateResult struct {
	nodes          int
	maxUnavailable int
	perNode        time.Duration
	total          time.Duration
	ideal          time.Duration
	maxSeen        int
	err            string
	// The overhead, from the watch: the first node given the config
	// after the MachineConfig's creation; a node's Working after it was
	// given the config (the agent's reaction); Done after Working less
	// the update's duration (the agent's second write); the next node
	// given the config after one was Done (the controller's reaction);
	// the pool's status counting every node after the last Done.
	firstAssign, toWorking, doneWrite, reassign, lastStatus time.Duration
}

// nodeTimes is when the watch first saw a node given the new config,
// Working, and Done on it.
type nodeTimes struct{ given, working, done time.Time }

func runNodeUpdateBench(ctx context.Context, bin string, nodes int, perNode time.Duration) updateResult {
	r := updateResult{nodes: nodes, maxUnavailable: nodes / 10, perNode: perNode}
	r.ideal = time.Duration(float64(nodes) / float64(r.maxUnavailable) * float64(perNode))
	if err := nodeUpdateOnce(ctx, bin, &r); err != nil {
		r.err = err.Error()
		log.Printf("node update bench: %v", err)
	} else {
		log.Printf("node update bench: %d nodes, maxUnavailable 10%%, %v each: %v (ideal %v), at most %d unavailable seen", nodes, perNode, r.total, r.ideal, r.maxSeen)
	}
	return r
}

func nodeUpdateOnce(ctx context.Context, bin string, r *updateResult) error {
	bc, err := startBenchCluster(ctx, bin, "outpost-update-bench-", "--no-default-scheduler")
	if err != nil {
		return err
	}
	defer bc.close()
	doc := "apiVersion: v1\nkind: Node\nmetadata:\n  name: upd\n  labels:\n    node-role.kubernetes.io/worker: \"\"\n"
	tmpl, _, err := sim.LoadNodes([]byte(doc))
	if err != nil {
		return err
	}
	agents, err := sim.Start(ctx, sim.Config{Client: bc.admin, Nodes: tmpl, Count: r.nodes, Heartbeat: 10 * time.Second, DisablePods: true,
		UpdateDuration: r.perNode, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	defer agents.Stop()
	if err := waitNodes(ctx, bc.cl, r.nodes, 10*time.Minute); err != nil {
		return err
	}
	// The README's example pool, at 10 %.
	pool, err := os.ReadFile("examples/machineconfig/00-pool-worker.yaml")
	if err != nil {
		return err
	}
	poolDoc := strings.Replace(string(pool), "maxUnavailable: 2", "maxUnavailable: 10%", 1)
	if poolDoc == string(pool) {
		return fmt.Errorf("examples/machineconfig/00-pool-worker.yaml no longer says maxUnavailable: 2; change the benchmark with it")
	}
	objs, _, err := api.DecodeYAMLOrJSON([]byte(poolDoc + `---
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: 50-bench
  labels:
    machineconfiguration.openshift.io/role: worker
spec:
  config:
    ignition:
      version: 3.2.0
    storage:
      files:
      - path: /etc/bench.conf
        contents:
          source: data:,v1
`))
	if err != nil {
		return err
	}
	// Count the nodes unavailable (cordoned or Working) from a watch,
	// and time each node's steps.
	var mu sync.Mutex
	busy := map[string]bool{}
	times := map[string]*nodeTimes{}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	if err := watchNodes(wctx, bc.cl, func(n *api.Node, seen time.Time) {
		a := n.Annotations
		b := n.Spec.Unschedulable || a[api.AnnotationMCState] == api.MCStateWorking
		mu.Lock()
		defer mu.Unlock()
		if b {
			busy[n.Name] = true
		} else {
			delete(busy, n.Name)
		}
		r.maxSeen = max(r.maxSeen, len(busy))
		want := a[api.AnnotationDesiredConfig]
		if want == "" {
			return
		}
		nt := times[n.Name]
		if nt == nil {
			nt = &nodeTimes{}
			times[n.Name] = nt
		}
		switch {
		case nt.given.IsZero():
			nt.given = seen
		case nt.working.IsZero() && a[api.AnnotationMCState] == api.MCStateWorking:
			nt.working = seen
		case !nt.working.IsZero() && nt.done.IsZero() && a[api.AnnotationMCState] == api.MCStateDone && a[api.AnnotationCurrentConfig] == want:
			nt.done = seen
		}
	}); err != nil {
		return err
	}
	t0 := time.Now()
	for _, o := range objs {
		if _, _, err := bc.cl.Create(ctx, o); err != nil {
			return err
		}
	}
	deadline := time.Now().Add(20 * r.ideal)
	for {
		obj, err := bc.cl.Get(ctx, api.ResourceForKind("MachineConfigPool"), "", "worker", client.GetOptions{})
		if err == nil {
			p := obj.(*api.MachineConfigPool)
			if int(p.Status.UpdatedMachineCount) == r.nodes && p.Status.Configuration.Name != "" {
				r.total = time.Since(t0)
				mu.Lock()
				r.breakDown(t0, t0.Add(r.total), times)
				mu.Unlock()
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the pool not Updated after %v (%v)", time.Since(t0), err)
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil { // polling the pool, with a deadline
			return err
		}
	}
}

// breakDown fills r's overhead means from each node's times.
func (r *updateResult) breakDown(t0, end time.Time, times map[string]*nodeTimes) {
	var given, done []time.Time
	var toWorking, doneWrite []time.Duration
	for _, nt := range times {
		if nt.given.IsZero() || nt.working.IsZero() || nt.done.IsZero() {
			continue
		}
		given = append(given, nt.given)
		done = append(done, nt.done)
		toWorking = append(toWorking, nt.working.Sub(nt.given))
		doneWrite = append(doneWrite, nt.done.Sub(nt.working)-r.perNode)
	}
	if len(given) == 0 {
		return
	}
	slices.SortFunc(given, time.Time.Compare)
	slices.SortFunc(done, time.Time.Compare)
	r.firstAssign = given[0].Sub(t0)
	r.lastStatus = end.Sub(done[len(done)-1])
	r.toWorking, r.doneWrite = mean(toWorking), mean(doneWrite)
	// The i-th Done frees the place the (maxUnavailable+i)-th node takes.
	var reassign []time.Duration
	for i := 0; i+r.maxUnavailable < len(given) && i < len(done); i++ {
		reassign = append(reassign, given[i+r.maxUnavailable].Sub(done[i]))
	}
	r.reassign = mean(reassign)
}

func mean(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum / time.Duration(len(ds))
}

func nodeUpdatesMarkdown(r updateResult, cmd, real string) string {
	var b strings.Builder
	b.WriteString("\n## Rolling node update of a large pool (issue 12)\n\n`" + cmd + "`.\n\n")
	b.WriteString("Three real servers (`--no-default-scheduler`), 1,000 simulated nodes (`outpost sim agents --update-duration`) in one MachineConfigPool, `maxUnavailable: 10%`; each node plays an agent's config update: Working and cordoned as soon as the controller gives it the rendered config, Done and uncordoned 5 s later (its simulated apply and reboot). Timed from the MachineConfig's creation to the pool counting every node updated; the most nodes unavailable at once is counted from a watch. Ideal: 1,000 / 100 × 5 s = 50 s; target within 5 % of it.\n\n")
	if r.err != "" {
		b.WriteString("Failed: " + r.err + "\n")
		return b.String()
	}
	over := (r.total.Seconds()/r.ideal.Seconds() - 1) * 100
	fmt.Fprintf(&b, "| nodes | maxUnavailable | per node | total | ideal | over ideal | most unavailable at once |\n|---:|---:|---:|---:|---:|---:|---:|\n")
	fmt.Fprintf(&b, "| %d | %d | %v | %.1f s | %.1f s | %.1f %% | %d |\n", r.nodes, r.maxUnavailable, r.perNode, r.total.Seconds(), r.ideal.Seconds(), over, r.maxSeen)
	fmt.Fprintf(&b, "\nWhere the time over the ideal goes (as a watch of the nodes saw it; means): the first node given the config %v after the MachineConfig's creation; a node Working %v after it was given the config; its Done write %v after the %v of its update; the next node given the config %v after one was Done; the pool's status counting every node %v after the last Done (the benchmark polls it every 100 ms). With %d nodes in each of %d places, the per-node part is paid %d times in a row.\n",
		r.firstAssign.Round(time.Millisecond), r.toWorking.Round(time.Millisecond), r.doneWrite.Round(time.Millisecond), r.perNode, r.reassign.Round(time.Millisecond), r.lastStatus.Round(time.Millisecond),
		r.nodes/max(r.maxUnavailable, 1), r.maxUnavailable, r.nodes/max(r.maxUnavailable, 1))
	b.WriteString("\n### On hosts booting a real systemd\n\n`BenchmarkConfigUpdateRealSystemd` in testing/e2e: three hosts booting systemd under systemd-nspawn (each in its network namespace, the agent as `outpost-agent.service` with `--os-backend directory`), a server on a fourth; a pool of the three (`maxUnavailable: 2`) takes a config with a file, a unit and an OS version; each host really reboots (systemd-nspawn exits 133 and is booted again). Timed from the config's creation to the pool Updated; the steps are the agents' own (`update step` log lines, mean of the three hosts).\n\n```\n")
	b.WriteString(real)
	b.WriteString("\n```\n")
	return b.String()
}

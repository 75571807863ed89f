package main

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
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
}

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
	// Count the nodes unavailable (cordoned or Working) from a watch.
	var mu sync.Mutex
	busy := map[string]bool{}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	if err := watchNodes(wctx, bc.cl, func(n *api.Node, _ time.Time) {
		a := n.Annotations
		b := n.Spec.Unschedulable || a[api.AnnotationMCState] == api.MCStateWorking
		mu.Lock()
		if b {
			busy[n.Name] = true
		} else {
			delete(busy, n.Name)
		}
		r.maxSeen = max(r.maxSeen, len(busy))
		mu.Unlock()
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
	b.WriteString("\n### On hosts booting a real systemd\n\n`BenchmarkConfigUpdateRealSystemd` in testing/e2e: three hosts booting systemd under systemd-nspawn (each in its network namespace, the agent as `outpost-agent.service` with `--os-backend directory`), a server on a fourth; a pool of the three (`maxUnavailable: 2`) takes a config with a file, a unit and an OS version; each host really reboots (systemd-nspawn exits 133 and is booted again). Timed from the config's creation to the pool Updated; the steps are the agents' own (`update step` log lines, mean of the three hosts).\n\n```\n")
	b.WriteString(real)
	b.WriteString("\n```\n")
	return b.String()
}

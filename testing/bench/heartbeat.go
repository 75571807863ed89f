package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
	"github.com/outpost-edge/outpost/testing/proc"
)

// The heartbeat measurement (issue 9 item 8): simulated nodes
// heartbeating at the agent's default period, once as agents did before
// the heartbeat call (the whole Node status through raft every
// heartbeat) and once as they do now (the heartbeat call, held in the
// leader's memory).
const (
	hbPeriod = 10 * time.Second
	// hbSettle lets the first heartbeats, spread over one period after
	// registration, reach their steady rate.
	hbSettle = hbPeriod + 5*time.Second
	hbWindow = 60 * time.Second
)

type hbMode struct {
	name string
	args []string
	// viaFollower sends the nodes' requests to a follower, which
	// forwards them to the leader, as for agents that talk to followers.
	viaFollower bool
}

var hbModes = []hbMode{
	{"before: Node status every heartbeat", []string{"--status-every-heartbeat"}, false},
	{"after: heartbeat call, status on change + every 5 min", nil, false},
	{"after, through a follower", nil, true},
}

type hbResult struct {
	mode       string
	nodes      int
	register   time.Duration
	raftPerSec float64
	leaderCPU  float64 // cores
	otherCPU   float64 // the two followers, cores
	simCPU     float64 // the simulating process, cores
	err        string
}

// runHeartbeatBench measures each mode on a fresh 3-server cluster.
func runHeartbeatBench(ctx context.Context, bin string, nodes int) []hbResult {
	var out []hbResult
	for _, m := range hbModes {
		r := hbResult{mode: m.name, nodes: nodes}
		if err := hbOne(ctx, bin, nodes, m, &r); err != nil {
			r.err = err.Error()
			log.Printf("heartbeat bench, %s: %v", m.name, err)
		} else {
			log.Printf("heartbeat bench, %s: %d nodes, %.1f raft entries/s, leader %.2f cores", m.name, nodes, r.raftPerSec, r.leaderCPU)
		}
		out = append(out, r)
	}
	return out
}

func hbOne(ctx context.Context, bin string, nodes int, m hbMode, r *hbResult) error {
	// No scheduler: nothing is scheduled; the node lifecycle controller
	// runs, as it reads the heartbeats.
	bc, err := startBenchCluster(ctx, bin, "outpost-hb-bench-", "--no-default-scheduler")
	if err != nil {
		return err
	}
	defer bc.close()
	root, c, leader, cl := bc.root, bc.c, bc.leader, bc.cl
	via := leader
	if m.viaFollower {
		for _, s := range c.Servers {
			if s != leader {
				via = s
				break
			}
		}
	}
	sim, err := startSimProcess(root, bin, via, "hb", nodes, hbPeriod, append([]string{"--pods=false"}, m.args...)...)
	if err != nil {
		return err
	}
	defer sim.stop()
	began, stderr := sim.began, sim.stderr
	if err := waitNodes(ctx, cl, nodes, 10*time.Minute); err != nil {
		return fmt.Errorf("%w (sim: %s)", err, lastLine(stderr.String()))
	}
	r.register = time.Since(began)
	if err := sleepCtx(ctx, hbSettle); err != nil {
		return err
	}
	idx0, err := leaderIndex(ctx, cl, leader.ID)
	if err != nil {
		return err
	}
	cpu0, cpuAll0, sim0 := leaderCPU(leader), cpuOf(c), pidCPU(sim.cmd.Process.Pid)
	t0 := time.Now()
	if err := sleepCtx(ctx, hbWindow); err != nil {
		return err
	}
	idx1, err := leaderIndex(ctx, cl, leader.ID)
	if err != nil {
		return err
	}
	secs := time.Since(t0).Seconds()
	cpu1, cpuAll1, sim1 := leaderCPU(leader), cpuOf(c), pidCPU(sim.cmd.Process.Pid)
	r.raftPerSec = float64(idx1-idx0) / secs
	r.leaderCPU = (cpu1 - cpu0).Seconds() / secs
	r.otherCPU = ((cpuAll1 - cpuAll0) - (cpu1 - cpu0)).Seconds() / secs
	r.register = r.register.Round(time.Second)
	r.simCPU = (sim1 - sim0).Seconds() / secs
	if n, err := notReady(ctx, cl); err != nil || n > 0 {
		return fmt.Errorf("after the window, %d nodes were not Ready (%v)", n, err)
	}
	return nil
}

func leaderCPU(s *proc.Server) time.Duration { return pidCPU(s.PID()) }

func pidCPU(pid int) time.Duration {
	d, _ := proc.CPU(pid)
	return d
}

// leaderIndex is the leader's last raft index: every write is one entry.
func leaderIndex(ctx context.Context, cl *client.Client, id string) (uint64, error) {
	peers, err := cl.RaftPeers(ctx)
	if err != nil {
		return 0, err
	}
	for _, p := range peers {
		if p.ID == id {
			if !p.Leader {
				return 0, fmt.Errorf("%w: %s no longer leads", errHeartbeatBench, id)
			}
			return p.LastIndex, nil
		}
	}
	return 0, fmt.Errorf("%w: %s is not a raft peer", errHeartbeatBench, id)
}

var errHeartbeatBench = errors.New("heartbeat benchmark")

// waitNodes waits until n nodes are registered and Ready.
func waitNodes(ctx context.Context, cl *client.Client, n int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		objs, _, err := cl.List(ctx, api.ResourceForKind("Node"), "", client.ListOptions{})
		ready := 0
		if err == nil {
			for _, o := range objs {
				if st, _ := readyCondition(o.(*api.Node)); st == api.ConditionTrue {
					ready++
				}
			}
			if ready >= n {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: %d of %d nodes Ready after %s (%v)", errHeartbeatBench, ready, n, timeout, err)
		}
		if err := sleepCtx(ctx, time.Second); err != nil {
			return err
		}
	}
}

// notReady counts the nodes whose Ready condition is not True.
func notReady(ctx context.Context, cl *client.Client) (int, error) {
	objs, _, err := cl.List(ctx, api.ResourceForKind("Node"), "", client.ListOptions{})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, o := range objs {
		if st, _ := readyCondition(o.(*api.Node)); st != api.ConditionTrue {
			n++
		}
	}
	return n, nil
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

func hbMarkdown(rs []hbResult, cmdline string) string {
	if len(rs) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n## Node heartbeats (issue 9 item 8)\n\n")
	fmt.Fprintf(&b, "`%s`. Three `outpost server` processes on loopback (fsync on, no scheduler, controllers on); one `outpost sim agents` process registers %d simulated nodes through the leader (the last row: through a follower, which forwards every write and heartbeat to the leader), each with its own node token, heartbeating every %s (jittered ±10%%). After registration and %s of settling, %s are measured: raft entries/s from the leader's last index, CPU from /proc in cores. *Before* posts each node's whole status every heartbeat (what agents did); *after* sends the heartbeat call (no raft write; the leader keeps liveness in memory) and posts status only on change and every 5 minutes. Both modes run the same binary (`--status-every-heartbeat` gives the old behaviour).\n\n", cmdline, rs[0].nodes, hbPeriod, hbSettle, hbWindow)
	b.WriteString("| mode | nodes | registration s | raft entries/s | leader CPU (cores) | followers CPU (cores) | sim CPU (cores) |\n|---|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rs {
		if r.err != "" {
			fmt.Fprintf(&b, "| %s | %d | failed: %s | | | | |\n", r.mode, r.nodes, r.err)
			continue
		}
		fmt.Fprintf(&b, "| %s | %d | %.0f | %.1f | %.2f | %.2f | %.2f |\n", r.mode, r.nodes, r.register.Seconds(), r.raftPerSec, r.leaderCPU, r.otherCPU, r.simCPU)
	}
	return b.String()
}

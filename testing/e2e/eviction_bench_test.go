package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/runtime"
	"github.com/outpost-edge/outpost/testing/netns"
)

// cutManifest is one replica that prefers edge-2, does not tolerate an
// unreachable node at all (tolerationSeconds 0, as the target
// says) and has a grace period of 1 s.
const cutManifest = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
spec:
  replicas: 1
  selector:
    matchLabels: {app: %[1]s}
  template:
    metadata:
      labels: {app: %[1]s}
    spec:
      terminationGracePeriodSeconds: 1
      tolerations:
        - {key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: 0}
        - {key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute, tolerationSeconds: 0}
      affinity:
        nodeAffinity:
          preferredDuringSchedulingIgnoredDuringExecution:
            - weight: 100
              preference:
                matchExpressions:
                  - {key: kubernetes.io/hostname, operator: In, values: [edge-2]}
      containers:
        - name: ticker
          image: ` + demoImage + `
          imagePullPolicy: IfNotPresent
          args: ["tick", "-every", "1s"]
          resources:
            requests: {cpu: 10m, memory: 16Mi}
`

// cutTimes are the moments of one cut, from the cut, as the benchmark's
// 20 ms polls of the API and of edge-2's containerd saw them.
type cutTimes struct {
	unknown, tainted, evicting, stopped, released, running time.Duration
}

// BenchmarkCutOffReplacement is issue 10's first performance target:
// a node is cut off → the first replacement pod Running on another node,
// with real agents and containerd in network namespaces,
// --node-monitor-grace-period 4s and tolerationSeconds 0. It reports the
// parts (mean of the runs, seconds from the cut): Ready=Unknown, the
// unreachable:NoExecute taint, the pod marked for deletion, edge-2's
// agent stopping the container (fenced), the pod object released by the
// control plane, the replacement Running on edge-1. The release cannot
// come before the node's last sign of life + grace period + toleration +
// the pod's grace period + --fence-margin: what keeps the two copies
// from ever running at once. Run by `make bench` (testing/bench) with
// -benchtime 3x; each fence margin is its own cluster.
func BenchmarkCutOffReplacement(b *testing.B) {
	for _, margin := range []string{"2s", "5s"} {
		b.Run("fence-margin="+margin, func(b *testing.B) { benchCutOff(b, margin) })
	}
}

func benchCutOff(b *testing.B, margin string) {
	requireReal(b)
	_, archive := buildDemo(b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c, _, n2, _, h2 := twoEdges(b, ctx, archive, 45, margin)

	var runs []cutTimes
	// b.Loop runs this function once, however many cuts -benchtime asks
	// for, so the cluster above is set up once.
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		name := fmt.Sprintf("cut%d", i+1)
		c.apply(ctx, name, fmt.Sprintf(cutManifest, name))
		var victim *api.Pod
		waitFor(b, 90*time.Second, name+" Running on edge-2", func() (bool, string) {
			ps, err := c.pods(ctx, "app="+name)
			if err != nil {
				return false, err.Error()
			}
			ok := len(ps) == 1 && ps[0].Spec.NodeName == "edge-2" && allRunning(ps)
			if ok {
				victim = ps[0]
			}
			return ok, describePods(ps)
		})
		b.StartTimer()
		ct := cutOnce(b, ctx, c, n2, h2, name, victim)
		b.StopTimer()
		runs = append(runs, ct)
		b.Logf("run %d: Unknown %v, tainted %v, marked for deletion %v, edge-2 stopped it %v, released %v, replacement Running %v",
			i+1, ct.unknown, ct.tainted, ct.evicting, ct.stopped, ct.released, ct.running)
		h2.Restore(b)
		c.waitReady("edge-2", "True", time.Minute)
		c.mustCLI(ctx, "delete", "deployment", name)
		waitFor(b, time.Minute, name+"'s pods gone", func() (bool, string) {
			ps, err := c.pods(ctx, "app="+name)
			return err == nil && len(ps) == 0, describePods(ps)
		})
		b.StartTimer()
	}
	b.StopTimer()
	mean := func(f func(cutTimes) time.Duration) float64 {
		var sum time.Duration
		for _, r := range runs {
			sum += f(r)
		}
		return sum.Seconds() / float64(len(runs))
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(mean(func(r cutTimes) time.Duration { return r.unknown }), "s-unknown")
	b.ReportMetric(mean(func(r cutTimes) time.Duration { return r.tainted }), "s-tainted")
	b.ReportMetric(mean(func(r cutTimes) time.Duration { return r.evicting }), "s-evicting")
	b.ReportMetric(mean(func(r cutTimes) time.Duration { return r.stopped }), "s-agent-stopped")
	b.ReportMetric(mean(func(r cutTimes) time.Duration { return r.released }), "s-released")
	b.ReportMetric(mean(func(r cutTimes) time.Duration { return r.running }), "s-replacement-running")
	b.ReportMetric(slices.Max(durations(runs)).Seconds(), "s-replacement-running-max")
	b.Logf("mean of %d: Unknown %.2fs, tainted %.2fs, marked for deletion %.2fs, edge-2 stopped it %.2fs, released %.2fs, replacement Running %.2fs (slowest %.2fs)",
		len(runs), mean(func(r cutTimes) time.Duration { return r.unknown }), mean(func(r cutTimes) time.Duration { return r.tainted }),
		mean(func(r cutTimes) time.Duration { return r.evicting }), mean(func(r cutTimes) time.Duration { return r.stopped }),
		mean(func(r cutTimes) time.Duration { return r.released }), mean(func(r cutTimes) time.Duration { return r.running }),
		slices.Max(durations(runs)).Seconds())
}

func durations(runs []cutTimes) []time.Duration {
	out := make([]time.Duration, 0, len(runs))
	for _, r := range runs {
		out = append(out, r.running)
	}
	return out
}

// cutOnce cuts edge-2 off and polls until victim's replacement runs on
// edge-1; it also checks that the two never ran at once.
func cutOnce(b *testing.B, ctx context.Context, c *testCluster, n2 *agentNode, h2 *netns.Host, app string, victim *api.Pod) cutTimes {
	var ct cutTimes
	cut := time.Now()
	h2.Cut(b)
	var lastOld time.Time // the victim's container last seen running
	deadline := cut.Add(90 * time.Second)
	for ct.running == 0 {
		if time.Now().After(deadline) {
			b.Fatalf("%s: no replacement Running on edge-1 within 90 s of the cut (%+v)", app, ct)
		}
		now := time.Now()
		if cs, err := n2.containers(ctx); err == nil {
			running := slices.ContainsFunc(cs, func(s runtime.ContainerStatus) bool {
				return s.State == runtime.StateRunning && s.Labels[runtime.LabelPodName] == victim.Name
			})
			if running {
				lastOld = now
			} else if ct.stopped == 0 {
				ct.stopped = now.Sub(cut)
			}
		}
		if n, err := c.node(ctx, "edge-2"); err == nil {
			if ct.unknown == 0 && readyStatus(n) == "Unknown" {
				ct.unknown = now.Sub(cut)
			}
			if ct.tainted == 0 && slices.ContainsFunc(n.Spec.Taints, func(t api.Taint) bool {
				return t.Key == api.TaintNodeUnreachable && t.Effect == api.TaintEffectNoExecute
			}) {
				ct.tainted = now.Sub(cut)
			}
		}
		ps, err := c.pods(ctx, "app="+app)
		if err == nil {
			old := false
			for _, p := range ps {
				switch {
				case p.UID == victim.UID:
					old = true
					if ct.evicting == 0 && p.DeletionTimestamp != nil {
						ct.evicting = now.Sub(cut)
					}
				case p.Spec.NodeName == "edge-1" && allRunning([]*api.Pod{p}):
					ct.running = now.Sub(cut)
				}
			}
			if !old && ct.released == 0 {
				ct.released = now.Sub(cut)
			}
		}
		time.Sleep(20 * time.Millisecond) // the polling interval of a measurement with a deadline
	}
	if ct.stopped == 0 || !lastOld.Before(cut.Add(ct.running)) {
		b.Fatalf("%s: the cut-off copy still ran (last seen %v after the cut) when its replacement ran (%v)", app, lastOld.Sub(cut), ct.running)
	}
	return ct
}

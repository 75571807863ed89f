package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
)

// BenchmarkConfigUpdateRealSystemd (issue 12's performance section, on
// the nspawn hosts): three hosts booting a real systemd, the agent as
// its packaged unit; a pool of the three (maxUnavailable 2) takes a
// config with a file, a unit and an OS version. Reported: the time from
// the config's creation to the pool Updated, and each step of the
// agents' updates (mean of the hosts) as they log them. One update per
// iteration, on fresh hosts (run it with -benchtime 1x).
func BenchmarkConfigUpdateRealSystemd(b *testing.B) {
	for range b.N {
		b.StopTimer()
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
		c, hosts := startSystemdHosts(b, ctx, 3, nil)
		b.StartTimer()
		t0 := time.Now()
		c.apply(ctx, "pool", updatePoolManifest(b))
		waitFor(b, 5*time.Minute, "the pool Updated", func() (bool, string) {
			obj, err := c.cl.Get(ctx, api.ResourceForKind("MachineConfigPool"), "", "worker", client.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			p := obj.(*api.MachineConfigPool)
			return p.Status.UpdatedMachineCount == 3 && poolStatus(p, api.PoolUpdated) == api.ConditionTrue, describeStates(ctx, c)
		})
		total := time.Since(t0)
		b.StopTimer()
		steps := updateSteps(b, ctx, hosts)
		b.Logf("3 hosts, maxUnavailable 2: config applied → pool Updated %.1f s; per host (mean): %s", total.Seconds(), stepSummary(steps))
		b.ReportMetric(total.Seconds(), "updated-s")
		for _, s := range stepNames {
			b.ReportMetric(meanOf(steps[s.step]).Seconds(), fmt.Sprintf("%s-s", s.step))
		}
		cancel()
	}
}

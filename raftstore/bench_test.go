package raftstore

import (
	"bytes"
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkApply3Servers measures committed writes per second through a
// 3-server in-process cluster with 64 concurrent writers of 1 KiB.
func BenchmarkApply3Servers(b *testing.B) {
	nodes := startCluster(b, 3, func(c *Config) {
		c.Logger = nil
		c.HeartbeatTimeout = 500 * time.Millisecond
		c.ElectionTimeout = 500 * time.Millisecond
		c.LeaderLeaseTimeout = 250 * time.Millisecond
	})
	leader := waitLeader(b, nodes)
	cmd := append([]byte("set k "), bytes.Repeat([]byte("v"), 1024)...)
	const writers = 64
	var next atomic.Int64
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				if _, _, err := leader.node.Apply(context.Background(), cmd); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "writes/s")
}

package raftstore

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkApply3Servers measures committed writes per second through a
// 3-server in-process cluster with 1 and 64 concurrent writers of 1 KiB,
// with AppendEntries pipelined (as servers run) and without.
func BenchmarkApply3Servers(b *testing.B) {
	for _, mode := range []string{"pipelined", "unpipelined"} {
		for _, writers := range []int{1, 64} {
			b.Run(fmt.Sprintf("%s/writers=%d", mode, writers), func(b *testing.B) {
				benchApply3(b, writers, mode == "unpipelined")
			})
		}
	}
}

func benchApply3(b *testing.B, writers int, noPipeline bool) {
	nodes := startCluster(b, 3, func(c *Config) {
		c.Logger = nil
		c.HeartbeatTimeout = 500 * time.Millisecond
		c.ElectionTimeout = 500 * time.Millisecond
		c.LeaderLeaseTimeout = 250 * time.Millisecond
		c.noPipeline = noPipeline
	})
	leader := waitLeader(b, nodes)
	cmd := append([]byte("set k "), bytes.Repeat([]byte("v"), 1024)...)
	var next atomic.Int64
	b.ReportAllocs()
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

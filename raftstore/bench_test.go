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
// 3-server in-process cluster with 1 and 64 concurrent writers of 1 KiB:
// as servers run (AppendEntries pipelined, entries sent ahead of the
// leader's fsync), without the early send, and without either.
func BenchmarkApply3Servers(b *testing.B) {
	modes := map[string]func(*Config){
		"pipelined":              func(*Config) {},
		"pipelined-no-sendahead": func(c *Config) { c.noSendAhead = true },
		"unpipelined":            func(c *Config) { c.noPipeline, c.noSendAhead = true, true },
	}
	for _, mode := range []string{"pipelined", "pipelined-no-sendahead", "unpipelined"} {
		for _, writers := range []int{1, 64} {
			b.Run(fmt.Sprintf("%s/writers=%d", mode, writers), func(b *testing.B) {
				benchApply3(b, writers, modes[mode])
			})
		}
	}
}

func benchApply3(b *testing.B, writers int, mode func(*Config)) {
	nodes := startCluster(b, 3, func(c *Config) {
		c.Logger = nil
		c.HeartbeatTimeout = 500 * time.Millisecond
		c.ElectionTimeout = 500 * time.Millisecond
		c.LeaderLeaseTimeout = 250 * time.Millisecond
		mode(c)
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

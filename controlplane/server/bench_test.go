package server

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
)

// BenchmarkCreatePod measures the write path over HTTPS against one
// in-process server: authentication, decoding, validation, raft (with
// fsync) and the reply.
func BenchmarkCreatePod(b *testing.B) {
	cfg := testConfig(b)
	cfg.Logger = nil
	s := startServer(b, cfg)
	cl, err := client.New(s.AdminConfig())
	if err != nil {
		b.Fatal(err)
	}
	var seq atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p := &api.Pod{
				ObjectMeta: api.ObjectMeta{Name: fmt.Sprintf("p%d", seq.Add(1)), Namespace: "default",
					Labels:      map[string]string{"app": "bench"},
					Annotations: map[string]string{"pad": strings.Repeat("x", 512)}},
				Spec: api.PodSpec{Containers: []api.Container{{Name: "app", Image: "registry.local/app:1.0"}}},
			}
			if _, _, err := cl.Create(context.Background(), p); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

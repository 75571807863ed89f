package store

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
)

func BenchmarkApplyCreatePod(b *testing.B) {
	s := New(Options{})
	c, _ := CreateCmd(newNamespace("default"))
	s.Apply(1, c)
	cmds := make([][]byte, b.N)
	for i := range cmds {
		cmds[i], _ = CreateCmd(bigPod("default", "web-"+strconv.Itoa(i), "node-"+strconv.Itoa(i%50)))
	}
	b.ReportMetric(float64(len(cmds[0])), "cmd-bytes")
	b.ReportAllocs()
	b.ResetTimer()
	for i, c := range cmds {
		if r := s.Apply(uint64(i+2), c).(*Result); r.Err != nil {
			b.Fatal(r.Err)
		}
	}
}

func BenchmarkApplyUpdatePodStatus(b *testing.B) {
	s := New(Options{})
	c, _ := CreateCmd(newNamespace("default"))
	s.Apply(1, c)
	c, _ = CreateCmd(bigPod("default", "web", "n1"))
	s.Apply(2, c)
	cmds := make([][]byte, b.N)
	for i := range cmds {
		p := bigPod("default", "web", "n1")
		p.Status.Message = "step " + strconv.Itoa(i)
		cmds[i], _ = UpdateCmd(p, SubresourceStatus)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i, c := range cmds {
		if r := s.Apply(uint64(i+3), c).(*Result); r.Err != nil {
			b.Fatal(r.Err)
		}
	}
}

// BenchmarkWatchFanout100 measures one pod change reaching 100 watchers:
// ns/op is the time until the last of them has it, and p99-ms the 99th
// percentile of single deliveries.
func BenchmarkWatchFanout100(b *testing.B) {
	const watchers = 100
	s := New(Options{})
	c, _ := CreateCmd(newNamespace("default"))
	s.Apply(1, c)
	c, _ = CreateCmd(bigPod("default", "web", "n1"))
	s.Apply(2, c)
	cmds := make([][]byte, b.N)
	for i := range cmds {
		p := bigPod("default", "web", "n1")
		p.Status.Message = "step " + strconv.Itoa(i)
		cmds[i], _ = UpdateCmd(p, SubresourceStatus)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var start atomic.Int64
	var wg sync.WaitGroup
	lat := make([][]time.Duration, watchers)
	for w := range watchers {
		ch, err := s.Watch(ctx, rPods, "", ListOptions{}, 0, false)
		if err != nil {
			b.Fatal(err)
		}
		go func() {
			for range ch {
				lat[w] = append(lat[w], time.Duration(time.Now().UnixNano()-start.Load()))
				wg.Done()
			}
		}()
	}
	b.ResetTimer()
	for i, c := range cmds {
		wg.Add(watchers)
		start.Store(time.Now().UnixNano())
		s.Apply(uint64(i+3), c)
		wg.Wait()
	}
	b.StopTimer()
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	if len(all) > 0 {
		b.ReportMetric(float64(all[len(all)*99/100])/1e6, "p99-ms")
	}
}

// BenchmarkSnapshotRestore100kPods writes a snapshot of 100,000 pods and
// restores it into a fresh store.
func BenchmarkSnapshotRestore100kPods(b *testing.B) {
	const pods = 100_000
	s := New(Options{})
	idx := uint64(1)
	c, _ := CreateCmd(newNamespace("default"))
	s.Apply(idx, c)
	for i := range pods {
		idx++
		c, _ := CreateCmd(bigPod("default", "web-"+strconv.Itoa(i), "node-"+strconv.Itoa(i%100)))
		if r := s.Apply(idx, c).(*Result); r.Err != nil {
			b.Fatal(r.Err)
		}
	}
	var persist, restore time.Duration
	var size int
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		snap, err := s.Snapshot()
		if err != nil {
			b.Fatal(err)
		}
		var buf bytes.Buffer
		if err := snap.Persist(&buf); err != nil {
			b.Fatal(err)
		}
		snap.Release()
		persist += time.Since(t0)
		size = buf.Len()

		t1 := time.Now()
		dst := New(Options{})
		if err := dst.Restore(&buf, idx); err != nil {
			b.Fatal(err)
		}
		restore += time.Since(t1)
		if dst.Len(api.ResourceForPlural("pods")) != pods {
			b.Fatal("restored store lost pods")
		}
	}
	b.ReportMetric(float64(size)/(1<<20), "snapshot-MiB")
	b.ReportMetric(float64(persist.Milliseconds())/float64(b.N), "persist-ms")
	b.ReportMetric(float64(restore.Milliseconds())/float64(b.N), "restore-ms")
}

// BenchmarkBindBatch64 applies one raft entry binding 64 pending pods, as
// the scheduler sends them; ns/op is per entry. Creating and removing the
// pods is not timed.
func BenchmarkBindBatch64(b *testing.B) { benchBindBatch64(b, Options{}) }

// BenchmarkBindBatch64Cold is BenchmarkBindBatch64 with pods created long
// before they are bound, as when the scheduler drains a backlog: with a
// watch window of one event they no longer keep their JSON, and a bind
// encodes the whole pod instead of splicing (entry, bind.go).
func BenchmarkBindBatch64Cold(b *testing.B) { benchBindBatch64(b, Options{WatchWindow: 1}) }

func benchBindBatch64(b *testing.B, opts Options) {
	const batch = 64
	s := New(opts)
	c, _ := CreateCmd(newNamespace("default"))
	s.Apply(1, c)
	idx := uint64(1)
	creates := make([][]byte, batch)
	binds := make([][]byte, batch)
	deletes := make([][]byte, batch)
	for i := range batch {
		name := "web-" + strconv.Itoa(i)
		creates[i], _ = CreateCmd(bigPod("default", name, ""))
		binds[i] = BindCmd("default", name, Binding{NodeName: "node-" + strconv.Itoa(i%50), Now: t0})
		deletes[i] = DeleteCmd(rPods, "default", name, Preconditions{}, t0)
	}
	create, bind, del := BatchCmd(creates...), BatchCmd(binds...), BatchCmd(deletes...)
	b.ReportMetric(float64(len(bind)), "cmd-bytes")
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		idx++
		s.Apply(idx, create)
		b.StartTimer()
		idx++
		for _, r := range s.Apply(idx, bind).([]*Result) {
			if r.Err != nil {
				b.Fatal(r.Err)
			}
		}
		b.StopTimer()
		idx++
		s.Apply(idx, del)
		b.StartTimer()
	}
}

// BenchmarkCanonicalizePod is what the leader's Apply spends instead of
// decoding a create command it built itself (compare BenchmarkDecodeCreatePod).
func BenchmarkCanonicalizePod(b *testing.B) {
	p := bigPod("default", "web-1", "node-1")
	p.CreationTimestamp = api.NewTime(time.Now())
	b.ReportAllocs()
	for b.Loop() {
		if !canonicalize(p) {
			b.Fatal("refused")
		}
	}
}

// BenchmarkDecodeCreatePod is the decode of a create command's body that
// every follower does.
func BenchmarkDecodeCreatePod(b *testing.B) {
	p := bigPod("default", "web-1", "node-1")
	p.CreationTimestamp = api.NewTime(time.Now())
	body, err := json.Marshal(p)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		var out api.Pod
		if err := unmarshal(body, &out); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkApplyRunningPodStatus applies the status a node posts for a
// started pod (runningStatus: conditions, a container status, addresses),
// to 1,000 bound pods in turn: what an agent's status writes cost,
// interning (intern.go) included.
func BenchmarkApplyRunningPodStatus(b *testing.B) {
	const pods = 1000
	s := New(Options{})
	idx := uint64(1)
	apply := func(c []byte) {
		if r := s.Apply(idx, c).(*Result); r.Err != nil {
			b.Fatal(r.Err)
		}
		idx++
	}
	c, _ := CreateCmd(newNamespace("default"))
	apply(c)
	start := time.Unix(1_780_000_000, 0).UTC()
	for i := range pods {
		c, _ := CreateCmd(bigPod("default", "web-"+strconv.Itoa(i), ""))
		apply(c)
		apply(BindCmd("default", "web-"+strconv.Itoa(i), Binding{NodeName: "node-" + strconv.Itoa(i%50), Now: start}))
	}
	cmds := make([][]byte, b.N)
	for n := range cmds {
		i := n % pods
		p := bigPod("default", "web-"+strconv.Itoa(i), "node-"+strconv.Itoa(i%50))
		cmds[n], _ = UpdateCmd(runningStatus(p, n, start), SubresourceStatus)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for _, c := range cmds {
		apply(c)
	}
}

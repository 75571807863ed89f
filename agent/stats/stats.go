package stats

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/outpost-edge/outpost/agent/endpoint/wire"
	"github.com/outpost-edge/outpost/runtime"
	"github.com/outpost-edge/outpost/runtime/cgroups"
)

// DefaultInterval is the time between two readings.
const DefaultInterval = 10 * time.Second

// Runtime is what the sampler needs of the container runtime.
type Runtime interface {
	ListContainers(ctx context.Context) ([]runtime.ContainerStatus, error)
	ContainerUsage(ctx context.Context, id string) (runtime.Usage, error)
}

// Config configures a Sampler.
type Config struct {
	Runtime  Runtime
	NodeName string
	// Node reads the node's counters; nil reads the host's cgroups.
	Node func() (cgroups.Reading, error)
	// Interval is the time between readings (default DefaultInterval).
	Interval time.Duration
	// Now is the clock of the node's readings (default time.Now).
	Now func() time.Time
	// OnError, when set, is called for each reading that failed (the
	// agent counts them as sync loop errors).
	OnError func(error)
	Logger  *slog.Logger
}

// point is one cumulative reading.
type point struct {
	t      time.Time
	cpu    uint64
	memory uint64
}

// containerKey names a container across its attempts.
type containerKey struct{ uid, name string }

// containerInfo is what a reading knows of a running container.
type containerInfo struct {
	ns, pod, uid, name string
	started            time.Time
	// prev is the reading before cur of the same container ID, if any.
	prev, cur point
	hasPrev   bool
}

// Sampler keeps the last two readings of the node and its containers.
type Sampler struct {
	cfg Config
	log *slog.Logger

	mu sync.Mutex
	// node's last two readings; nodeN counts them (0, 1, 2+).
	nodePrev, nodeCur point
	nodeN             int
	// containers are the running ones of the last reading, by ID.
	containers map[string]containerInfo
	// restarts is the highest attempt of every container the runtime
	// holds, by pod UID and name, with the pod's namespace and name.
	restarts map[containerKey]restartInfo
}

type restartInfo struct {
	ns, pod string
	count   int
}

// New returns a Sampler; Run (or Sample) fills it.
func New(cfg Config) *Sampler {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Node == nil {
		cfg.Node = cgroups.FS{}.ReadNode
	}
	if cfg.OnError == nil {
		cfg.OnError = func(error) {}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Sampler{cfg: cfg, log: log.With("component", "stats"), containers: map[string]containerInfo{}, restarts: map[containerKey]restartInfo{}}
}

// Run reads at once and then every Interval until ctx ends.
func (s *Sampler) Run(ctx context.Context) {
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	for {
		s.Sample(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Sample takes one reading of the node and every running container.
func (s *Sampler) Sample(ctx context.Context) {
	now := s.cfg.Now()
	nr, nodeErr := s.cfg.Node()
	if nodeErr != nil {
		s.log.Debug("node usage not read", "err", nodeErr)
		s.cfg.OnError(nodeErr)
	}
	all, listErr := s.cfg.Runtime.ListContainers(ctx)
	if listErr != nil {
		s.log.Debug("containers not listed for usage", "err", listErr)
		s.cfg.OnError(listErr)
	}
	restarts := map[containerKey]restartInfo{}
	read := map[string]containerInfo{}
	for _, c := range all {
		l := c.Labels
		k := containerKey{l[runtime.LabelPodUID], l[runtime.LabelContainer]}
		// The attempt counts from 0, so the highest is the restarts;
		// outpost wrote every label, a broken one counts as 0.
		n, _ := strconv.Atoi(l[runtime.LabelAttempt])
		if r, ok := restarts[k]; !ok || n > r.count {
			restarts[k] = restartInfo{ns: l[runtime.LabelPodNamespace], pod: l[runtime.LabelPodName], count: max(n, 0)}
		}
		if c.State != runtime.StateRunning {
			continue
		}
		u, err := s.cfg.Runtime.ContainerUsage(ctx, c.ID)
		if err != nil {
			s.log.Debug("container usage not read", "container", c.ID, "err", err)
			s.cfg.OnError(err)
			continue
		}
		if u.Time.IsZero() {
			continue // stopped since the list
		}
		read[c.ID] = containerInfo{
			ns: l[runtime.LabelPodNamespace], pod: l[runtime.LabelPodName], uid: k.uid, name: k.name,
			started: c.StartedAt,
			cur:     point{t: u.Time, cpu: u.CPUNanos, memory: u.MemoryWorkingSetBytes},
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if nodeErr == nil {
		s.nodePrev, s.nodeCur = s.nodeCur, point{t: now, cpu: nr.CPUNanos, memory: nr.WorkingSetBytes}
		s.nodeN = min(s.nodeN+1, 2)
	}
	if listErr != nil {
		return // keep the last readings rather than forget every container
	}
	for id, ci := range read {
		if old, ok := s.containers[id]; ok {
			ci.prev, ci.hasPrev = old.cur, true
		}
		read[id] = ci
	}
	s.containers = read
	s.restarts = restarts
}

// rate returns the CPU use between two readings in nanocores and the
// window; ok is false when they do not give one (same time, or a counter
// that went back).
func rate(prev, cur point) (nanocores uint64, window time.Duration, ok bool) {
	window = cur.t.Sub(prev.t)
	if window <= 0 || cur.cpu < prev.cpu {
		return 0, 0, false
	}
	return uint64(float64(cur.cpu-prev.cpu) / window.Seconds()), window, true
}

func cpuStats(prev, cur point, hasPrev bool) *wire.CPUStats {
	st := &wire.CPUStats{Time: cur.t.UTC(), UsageCoreNanoSeconds: cur.cpu}
	if !hasPrev {
		return st
	}
	if nc, w, ok := rate(prev, cur); ok {
		st.UsageNanoCores, st.WindowNanos = &nc, int64(w)
	}
	return st
}

// Summary is the latest readings, pods and containers sorted by name.
func (s *Sampler) Summary() wire.Summary {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := wire.Summary{Kind: wire.KindSummary, Node: wire.NodeStats{NodeName: s.cfg.NodeName}, Pods: []wire.PodStats{}}
	if s.nodeN > 0 {
		out.Node.CPU = cpuStats(s.nodePrev, s.nodeCur, s.nodeN > 1)
		out.Node.Memory = &wire.MemoryStats{Time: s.nodeCur.t.UTC(), WorkingSetBytes: s.nodeCur.memory}
	}
	byPod := map[string]*wire.PodStats{}
	for _, ci := range s.containers {
		p := byPod[ci.uid]
		if p == nil {
			p = &wire.PodStats{PodRef: wire.PodReference{Name: ci.pod, Namespace: ci.ns, UID: ci.uid}}
			byPod[ci.uid] = p
		}
		p.Containers = append(p.Containers, wire.ContainerStats{
			Name: ci.name, StartTime: ci.started.UTC(),
			CPU:    cpuStats(ci.prev, ci.cur, ci.hasPrev),
			Memory: &wire.MemoryStats{Time: ci.cur.t.UTC(), WorkingSetBytes: ci.cur.memory},
		})
	}
	for _, p := range byPod {
		slices.SortFunc(p.Containers, func(a, b wire.ContainerStats) int { return cmp.Compare(a.Name, b.Name) })
		out.Pods = append(out.Pods, *p)
	}
	slices.SortFunc(out.Pods, func(a, b wire.PodStats) int {
		return cmp.Or(cmp.Compare(a.PodRef.Namespace, b.PodRef.Namespace), cmp.Compare(a.PodRef.Name, b.PodRef.Name), cmp.Compare(a.PodRef.UID, b.PodRef.UID))
	})
	return out
}

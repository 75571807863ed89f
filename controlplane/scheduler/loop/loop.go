package loop

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/controller"
	"github.com/outpost-edge/outpost/controlplane/scheduler"
)

// Sentinel errors of the package.
var (
	// ErrInvalidConfig is returned by New for a Config it cannot run with.
	ErrInvalidConfig = errors.New("invalid scheduler loop configuration")
	// ErrRunning is returned by Run while another Run of the loop goes on.
	ErrRunning = errors.New("scheduler loop is already running")
	// errBindResult stands for a binding Client.Bind gave no outcome for.
	errBindResult = errors.New("bind returned no outcome for this binding")
)

// Reasons the loop writes on pods and events.
const (
	// ReasonUnschedulable is the PodScheduled=False reason of a pod that
	// fits no node (SCH-13).
	ReasonUnschedulable = "Unschedulable"
	// ReasonSchedulerNotRunning is the PodScheduled=False reason of a pod
	// naming a scheduler that does not run (SCH-12).
	ReasonSchedulerNotRunning = "SchedulerNotRunning"
	// EventFailedScheduling is the reason of the Warning event of a pod
	// that fits no node.
	EventFailedScheduling = "FailedScheduling"
)

// Defaults and fixed timings. The backoff is kube-scheduler's: 1 s
// doubling to 10 s per failed attempt; pods parked as unschedulable are
// retried at least once a minute even when nothing seems to change
// (a placed pod that an affinity term needs, for one, triggers nothing).
const (
	defaultMaxBatch      = 500
	defaultGrace         = 10 * time.Second
	bindersInFlight      = 3
	initialBackoff       = time.Second
	maxBackoff           = 10 * time.Second
	unschedulableRecheck = 60 * time.Second
)

// Config configures a Loop.
type Config struct {
	// Client reads the leader's store and writes through the API's rules.
	Client controller.Client
	// Schedulers by name (pod.spec.schedulerName); "default-scheduler" is
	// normally present. The loop owns them while it runs: a Scheduler is
	// not safe for concurrent use.
	Schedulers map[string]*scheduler.Scheduler
	// Logger gets the loop's records; nil discards them.
	Logger *slog.Logger
	// Registerer gets the loop's metrics; nil registers none.
	Registerer prometheus.Registerer
	// Informers, when set, gives the loop its informers of nodes, pods
	// and services, shared with the other loops that use it (the server
	// shares them with the workload controllers); its context must end
	// no sooner than Run's. Nil: each Run lists and watches on its own.
	Informers *controller.Informers
	// Now is the clock of timestamps and backoff; nil is time.Now.
	Now func() time.Time
	// MaxBatch is the most bindings per Client.Bind call; 0 is 500.
	MaxBatch int
	// UnknownSchedulerGrace is how long a pod naming a scheduler that
	// does not run stays Pending before the loop says so on the pod
	// (an outside scheduler may bind it meanwhile); 0 is 10 s.
	UnknownSchedulerGrace time.Duration
}

// Loop schedules the cluster's unbound pods while Run runs.
type Loop struct {
	client    controller.Client
	informers *controller.Informers
	log       *slog.Logger
	now       func() time.Time
	maxBatch  int
	grace     time.Duration
	m         *metrics

	// wake tells the owner goroutine that its inbox or the schedulers
	// changed.
	wake chan struct{}

	mu            sync.Mutex
	scheds        map[string]*scheduler.Scheduler
	schedsChanged atomic.Bool

	running atomic.Bool

	scheduled, unschedulable, failed atomic.Uint64
	pending, binding                 atomic.Int64
}

// New checks cfg and returns a loop; Run starts it.
func New(cfg Config) (*Loop, error) {
	if cfg.Client == nil {
		return nil, fmt.Errorf("%w: Client is required", ErrInvalidConfig)
	}
	if cfg.MaxBatch < 0 {
		return nil, fmt.Errorf("%w: MaxBatch %d: must not be negative", ErrInvalidConfig, cfg.MaxBatch)
	}
	if cfg.UnknownSchedulerGrace < 0 {
		return nil, fmt.Errorf("%w: UnknownSchedulerGrace %s: must not be negative", ErrInvalidConfig, cfg.UnknownSchedulerGrace)
	}
	for name, s := range cfg.Schedulers {
		if s == nil {
			return nil, fmt.Errorf("%w: Schedulers[%q]: must not be nil", ErrInvalidConfig, name)
		}
	}
	l := &Loop{
		client:    cfg.Client,
		log:       cfg.Logger,
		now:       cfg.Now,
		maxBatch:  cfg.MaxBatch,
		grace:     cfg.UnknownSchedulerGrace,
		wake:      make(chan struct{}, 1),
		scheds:    maps.Clone(cfg.Schedulers),
		informers: cfg.Informers,
	}
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	if l.now == nil {
		l.now = time.Now
	}
	if l.maxBatch == 0 {
		l.maxBatch = defaultMaxBatch
	}
	if l.grace == 0 {
		l.grace = defaultGrace
	}
	l.m = newMetrics(cfg.Registerer, l.log)
	return l, nil
}

// SetSchedulers replaces the running schedulers (a policy reload, a
// scheduler added or removed). The owner goroutine takes the new set
// between two cycles; pods waiting for a scheduler that now runs are
// queued, and pods parked as unschedulable are tried again under the new
// policies. Safe from any goroutine. Nil entries are dropped.
func (l *Loop) SetSchedulers(m map[string]*scheduler.Scheduler) {
	next := make(map[string]*scheduler.Scheduler, len(m))
	for name, s := range m {
		if s != nil {
			next[name] = s
		}
	}
	l.mu.Lock()
	l.scheds = next
	l.mu.Unlock()
	l.schedsChanged.Store(true)
	l.signal()
}

func (l *Loop) schedulers() map[string]*scheduler.Scheduler {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.scheds
}

func (l *Loop) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// Stats counts what the loop did since New.
type Stats struct {
	// Scheduled counts bindings the store acknowledged.
	Scheduled uint64
	// Unschedulable counts attempts that found no fitting node.
	Unschedulable uint64
	// Failed counts bindings refused or lost, and attempts that ended in
	// an error other than "fits no node".
	Failed uint64
	// Pending is how many unbound pods the loop knows and has not bound
	// yet: queued, backing off, parked, waiting for their scheduler, or
	// being bound.
	Pending int
	// Binding is how many of them are assumed and wait for their binding.
	Binding int
}

// Stats returns the loop's counters; safe from any goroutine.
func (l *Loop) Stats() Stats {
	return Stats{
		Scheduled:     l.scheduled.Load(),
		Unschedulable: l.unschedulable.Load(),
		Failed:        l.failed.Load(),
		Pending:       int(l.pending.Load()),
		Binding:       int(l.binding.Load()),
	}
}

// Resources the loop watches.
var (
	nodesRes    = api.ResourceOf(&api.Node{})
	podsRes     = api.ResourceOf(&api.Pod{})
	servicesRes = api.ResourceOf(&api.Service{})
)

// Run schedules until ctx ends, then returns nil once every goroutine it
// started has stopped; the server calls it while it leads. Each Run
// starts from a fresh list of the cluster (or, with Config.Informers,
// from their caches, which the server makes anew for each term as
// leader), so Run may be called again after leadership was lost and
// regained.
func (l *Loop) Run(ctx context.Context) error {
	if !l.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer l.running.Store(false)
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	r := newRunner(ctx, l)
	kinds := []struct {
		res  *api.Resource
		kind inputKind
	}{{nodesRes, inNode}, {podsRes, inPod}, {servicesRes, inService}}
	infs, done := controller.SharedOrOwn(ctx, l.informers, l.client, l.log)
	defer done()
	informers := make([]*controller.Informer, len(kinds))
	for i, k := range kinds {
		inf := infs.For(k.res)
		informers[i] = inf
		// Removed before Run returns: a shared informer serves on, and
		// must not feed a runner that stopped.
		defer inf.Handle(ctx, func(ev controller.Event) {
			r.post(input{kind: k.kind, typ: ev.Type, obj: ev.Object, old: ev.Old})
		})()
	}
	for range bindersInFlight {
		wg.Go(func() { r.binds.run(ctx) })
	}
	wg.Go(func() { r.writes.run(ctx) })
	for _, inf := range informers {
		select {
		case <-inf.Synced():
		case <-ctx.Done():
			return nil
		}
	}
	r.loop()
	return nil
}

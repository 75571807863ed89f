package controllers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/controller"
	"github.com/outpost-edge/outpost/controlplane/scheduler"
	"github.com/outpost-edge/outpost/controlplane/scheduler/policy"
	"github.com/prometheus/client_golang/prometheus"
)

// Sentinel errors of the package.
var (
	// ErrNoClient is returned by Run when Config.Client is nil.
	ErrNoClient = errors.New("controllers: no client")
	// ErrBadKey is returned for a queue key that does not name an object.
	ErrBadKey = errors.New("controllers: malformed queue key")
	// ErrTemplateHashCollision is returned when every name a deployment's
	// new replica set could take is held by another object.
	ErrTemplateHashCollision = errors.New("controllers: replica set names for this template are all taken")
)

// Config configures Run.
type Config struct {
	// Client reads the leader's store and writes through validation,
	// admission and raft.
	Client controller.Client
	// PoolLock, when set, is held while the machine config controller
	// picks a pool's next nodes and writes its status, and by whoever
	// else hands out a place in a pool's maxUnavailable (the server's
	// FleetLock): the two never count the same place twice.
	PoolLock sync.Locker
	// Logger gets the controllers' records; nil discards them.
	Logger *slog.Logger
	// Informers, when set, gives the controllers their informers, shared
	// with the other loops that use it (the server shares them with the
	// scheduler); its context must end no sooner than Run's. Nil: Run
	// keeps informers of its own.
	Informers *controller.Informers
	// Now is the clock for availability (minReadySeconds), conditions and
	// events; default time.Now.
	Now func() time.Time
	// Workers is how many keys each controller reconciles at once;
	// default 2.
	Workers int
	// NodeLifecycle configures the node lifecycle controller (Ready
	// Unknown for silent nodes, from gossip and heartbeats).
	NodeLifecycle NodeLifecycle
	// FenceMargin is what the control plane adds to a cut-off agent's own
	// deadline before it takes a pod of that node for stopped; default
	// DefaultFenceMargin.
	FenceMargin time.Duration
	// MachineProvider releases the hosts of deleted machines; default
	// ManualProvider.
	MachineProvider MachineProvider
	// Registerer receives the controllers' metrics; nil: none.
	Registerer prometheus.Registerer
	// Raft is the raft membership, for the quorum guard; nil runs none.
	Raft Raft
	// ControlPlaneSize is how many voters the quorum guard keeps; default
	// DefaultControlPlaneSize.
	ControlPlaneSize int
	// Version is the version the control plane runs (the ClusterVersion
	// reports it); default "dev".
	Version string
	// FetchGraph reads update graphs; default HTTP(S) and file:// URLs.
	FetchGraph FetchGraph
	// ReleaseDir is where release payloads are fetched to; default a
	// directory in the system's temporary directory.
	ReleaseDir string
	// FetchPayload fetches a release payload; default release.Fetch.
	FetchPayload FetchPayload
}

// Queue backoff: conflicts and failed writes come back after 20ms, 40ms,
// ... up to two minutes, never in a hot loop.
const (
	retryBase = 20 * time.Millisecond
	retryMax  = 2 * time.Minute
	// cacheLagRetry is when a key skipped because the cache had not yet
	// caught up with the controller's own writes is looked at again if no
	// event brings it back sooner (the event of that write normally does).
	cacheLagRetry = time.Second
)

// taintEvictionWorkers is how many pods the taint eviction controller
// evicts at once at least.
const taintEvictionWorkers = 16

// hooks let tests watch the controllers work.
type hooks struct {
	// synced is called after every reconcile of a key.
	synced func(controller, key string)
	// nodeMonitorPeriod replaces nodeMonitorPeriod when > 0.
	nodeMonitorPeriod time.Duration
	// delivered is called after the controllers heard of a change of a
	// node (its cache updated, its handlers run), so a test knows when
	// the controllers see that version.
	delivered func(kind, name, resourceVersion string)
	// after, when set, may take over a reconcile's look again after d
	// (reporting true): a test then calls fire by its own clock, so that
	// a deadline minutes away passes when the test says (a progress
	// deadline).
	after func(d time.Duration, fire func()) bool
	// running is called once the informers have listed and the workers
	// started, with every controller's loop.
	running func(loops []*loop)
}

// shared is what every controller of one Run uses: the client, the
// informers and the indexes kept from their events.
type shared struct {
	hooks  hooks
	client controller.Client
	log    *slog.Logger
	now    func() time.Time
	rec    *recorder
	sels   *selectors

	podInf, rsInf, deployInf, dsInf, nodeInf, pdbInf, machineInf, mhcInf, msInf, cpmsInf, mcInf, mcpInf, cvInf, svcInf, epsInf *controller.Informer
	// pods and rss index the pod and replica set caches by namespace and
	// by owner UID; they are updated by the informers' handlers, before
	// any controller hears of the change.
	pods, rss *index
}

// Run runs the ReplicaSet, Deployment and DaemonSet controllers, the
// garbage collector and the node lifecycle controller until ctx ends, then returns nil. They share one set
// of informers (pods, replicasets, deployments, daemonsets, nodes) and
// start working once every informer has listed.
func Run(ctx context.Context, cfg Config) error { return run(ctx, cfg, hooks{}) }

// eventFlushPeriod is how often repeats of events held back are written.
const eventFlushPeriod = 5 * time.Second

func run(ctx context.Context, cfg Config, h hooks) error {
	if cfg.Client == nil {
		return ErrNoClient
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 2
	}
	log := cfg.Logger
	s := &shared{
		hooks:  h,
		client: cfg.Client,
		log:    log,
		now:    cfg.Now,
		rec:    newRecorder(cfg.Client, log, cfg.Now),
		sels:   newSelectors(),
	}
	infs, done := controller.SharedOrOwn(ctx, cfg.Informers, cfg.Client, log)
	defer done()
	s.podInf = infs.For(api.ResourceForKind("Pod"))
	s.rsInf = infs.For(api.ResourceForKind("ReplicaSet"))
	s.deployInf = infs.For(api.ResourceForKind("Deployment"))
	s.dsInf = infs.For(api.ResourceForKind("DaemonSet"))
	s.nodeInf = infs.For(api.ResourceForKind("Node"))
	s.pdbInf = infs.For(api.ResourceForKind("PodDisruptionBudget"))
	s.machineInf = infs.For(api.ResourceForKind("Machine"))
	s.mhcInf = infs.For(api.ResourceForKind("MachineHealthCheck"))
	s.msInf = infs.For(api.ResourceForKind("MachineSet"))
	s.cpmsInf = infs.For(api.ResourceForKind("ControlPlaneMachineSet"))
	s.mcInf = infs.For(machineConfigsResource)
	s.mcpInf = infs.For(machineConfigPools)
	s.cvInf = infs.For(clusterVersions)
	s.svcInf = infs.For(servicesRes)
	s.epsInf = infs.For(endpointSlicesRes)
	s.pods, s.rss = newIndex(s.podInf), newIndex(s.rsInf)

	// Daemon pods are checked with the default policy's predicates: the
	// ones kube-controller-manager checks, and more (see DESIGN.md).
	pol := policy.Default()
	sched, err := scheduler.New(scheduler.Config{Policy: pol, Logger: log.With("controller", "daemonset")})
	if err != nil {
		return fmt.Errorf("controllers: daemon set predicates: %w", err)
	}
	rsc := newReplicaSetController(s)
	dc := newDeploymentController(s)
	dsc := newDaemonSetController(s, sched, pol)
	gc := newGarbageCollector(s)
	nlc := newNodeLifecycle(s, cfg.NodeLifecycle)
	te := newTaintEviction(s, nlc, cfg.FenceMargin)
	dis := newDisruption(s)
	mc := newMachineController(s, cfg.MachineProvider, cfg.Raft)
	hc := newHealthCheck(s, cfg.Registerer)
	msc := newMachineSet(s)
	mcc := newMachineConfigController(s, cfg.PoolLock)
	esc := newEndpointSlices(s)
	cvc := newClusterVersionController(s, s.cvInf, cfg.Version, cfg.FetchGraph, cfg.FetchPayload, cfg.ReleaseDir, cfg.Raft)
	var qg *quorumGuard
	var cps *controlPlaneSet
	if cfg.Raft != nil {
		cps = newControlPlaneSet(s, cfg.Raft)
		qg = newQuorumGuard(s, cfg.Raft, cfg.ControlPlaneSize, cps.size)
	}

	onPod := func(ev controller.Event) {
		s.pods.apply(ev)
		dsc.view.onPod(ev)
		rsc.onPod(ev)
		dc.onPod(ev)
		dsc.onPod(ev)
		gc.onObject(ev, "pods")
		te.onPod(ev)
		dis.onPod(ev)
		mc.onPod(ev)
		esc.onPod(ev)
	}
	onRS := func(ev controller.Event) {
		s.rss.apply(ev)
		if ev.Type == api.Deleted {
			s.sels.drop(ev.Object.GetObjectMeta().UID)
		}
		rsc.onReplicaSet(ev)
		dc.onReplicaSet(ev)
		gc.onObject(ev, "replicasets")
	}
	onDeploy := func(ev controller.Event) {
		if ev.Type == api.Deleted {
			s.sels.drop(ev.Object.GetObjectMeta().UID)
		}
		dc.onDeployment(ev)
		gc.onObject(ev, "")
	}
	onDS := func(ev controller.Event) {
		if ev.Type == api.Deleted {
			s.sels.drop(ev.Object.GetObjectMeta().UID)
		}
		dsc.onDaemonSet(ev)
		gc.onObject(ev, "")
	}
	onNode := func(ev controller.Event) {
		dsc.view.onNode(ev)
		dsc.onNode(ev)
		gc.onObject(ev, "")
		nlc.onNode(ev)
		te.onNode(ev)
		mc.onNode(ev)
		hc.onChange(ev)
		mcc.onChange(ev)
		esc.onNode(ev)
		if ev.Type != api.Modified || ev.Old == nil || !maps.Equal(ev.Old.GetObjectMeta().Labels, ev.Object.GetObjectMeta().Labels) {
			cvc.onChange(ev) // risks may name nodes' labels, not their heartbeats
		}
		if h.delivered != nil {
			m := ev.Object.GetObjectMeta()
			h.delivered("Node", m.Name, m.ResourceVersion)
		}
	}

	var wg sync.WaitGroup
	for _, w := range []struct {
		inf *controller.Informer
		on  func(controller.Event)
	}{{s.podInf, onPod}, {s.rsInf, onRS}, {s.deployInf, onDeploy}, {s.dsInf, onDS}, {s.nodeInf, onNode}, {s.pdbInf, func(ev controller.Event) {
		if ev.Type == api.Deleted {
			s.sels.drop(ev.Object.GetObjectMeta().UID)
		}
		dis.onBudget(ev)
	}}, {s.machineInf, func(ev controller.Event) {
		mc.onMachine(ev)
		hc.onChange(ev)
		msc.onMachine(ev)
		if qg != nil {
			qg.onMachine(ev)
			cps.poke(ev)
		}
	}}, {s.mhcInf, hc.onCheck}, {s.msInf, msc.onSet}, {s.cpmsInf, func(ev controller.Event) {
		if cps != nil {
			cps.poke(ev)
		}
	}}, {s.mcInf, mcc.onChange}, {s.mcpInf, func(ev controller.Event) {
		mcc.onChange(ev)
		if ev.Type == api.Deleted {
			mcc.q.Add(ev.Object.GetObjectMeta().Name) // its rendered configs go
		}
	}}, {s.cvInf, cvc.onChange}, {s.svcInf, esc.onService}, {s.epsInf, esc.onSlice}} {
		// The handlers go before run returns, even if a shared set's
		// informers serve on.
		defer w.inf.Handle(ctx, w.on)()
	}
	loops := []*loop{rsc.loop, dc.loop, dsc.loop, gc.loop, nlc.loop, te.loop, dis.loop, mc.loop, hc.loop, msc.loop, mcc.loop, cvc.loop, esc.loop}
	if qg != nil {
		loops = append(loops, qg.loop, cps.loop)
	}
	defer func() {
		for _, l := range loops {
			l.q.Stop()
		}
		wg.Wait()
		cvc.bg.Wait() // a payload check ends with ctx
	}()
	for _, inf := range []*controller.Informer{s.podInf, s.rsInf, s.deployInf, s.dsInf, s.nodeInf, s.pdbInf, s.machineInf, s.mhcInf, s.msInf, s.cpmsInf, s.mcInf, s.mcpInf, s.cvInf, s.svcInf, s.epsInf} {
		select {
		case <-ctx.Done():
			return nil
		case <-inf.Synced():
		}
	}
	period := h.nodeMonitorPeriod
	if period <= 0 {
		period = nodeMonitorPeriod
	}
	nlc.afterSweep = te.sweep
	if qg != nil {
		nlc.afterSweep = func() {
			te.sweep()
			qg.sweep()
			cps.poke(controller.Event{})
		}
	}
	wg.Go(func() { nlc.run(ctx, period) })
	wg.Go(func() { s.rec.flushEvents(ctx, eventFlushPeriod) })
	log.Info("workload controllers started", "workers", cfg.Workers)
	for _, l := range loops {
		n := cfg.Workers
		if l == te.loop {
			// A node tainted NoExecute evicts every pod on it at once, each
			// three writes in a row (condition, event, delete); raft
			// commits concurrent writes together, so more workers evict
			// faster (make bench: 100 tainted nodes of 10 pods each).
			n = max(n, taintEvictionWorkers)
		}
		for range n {
			wg.Go(func() { l.work(ctx) })
		}
	}
	if h.running != nil {
		h.running(loops)
	}
	<-ctx.Done()
	log.Info("workload controllers stopped")
	return nil
}

// addAll queues the name of every object inf holds: for controllers
// whose keys are cluster objects' names, when a change may concern any.
func (l *loop) addAll(inf *controller.Informer) {
	for _, obj := range inf.List() {
		l.q.Add(obj.GetObjectMeta().Name)
	}
}

// loop is one controller's queue and reconcile function.
type loop struct {
	name   string
	q      *controller.Queue
	log    *slog.Logger
	synced func(controller, key string)
	// sync reconciles one key. A non-nil error retries the key with
	// backoff; after > 0 looks at it again after that long (a pod
	// becoming available, a progress deadline).
	sync func(ctx context.Context, key string) (after time.Duration, err error)
	// after is hooks.after.
	after func(d time.Duration, fire func()) bool
}

func newLoop(s *shared, name string, sync func(context.Context, string) (time.Duration, error)) *loop {
	return &loop{name: name, q: controller.NewQueue(retryBase, retryMax), log: s.log.With("controller", name), synced: s.hooks.synced, sync: sync, after: s.hooks.after}
}

// work reconciles keys until ctx ends.
func (l *loop) work(ctx context.Context) {
	for {
		key, ok := l.q.Get(ctx)
		if !ok {
			return
		}
		after, err := l.sync(ctx, key)
		switch {
		case err != nil:
			if ctx.Err() == nil {
				lvl := slog.LevelInfo
				if api.IsConflict(err) {
					lvl = slog.LevelDebug // expected when the cache lags; retried
				}
				l.log.Log(ctx, lvl, "reconcile failed; retrying", "key", key, "err", err)
			}
			l.q.AddRateLimited(key)
		default:
			l.q.Forget(key)
			if after > 0 && (l.after == nil || !l.after(after, func() { l.q.Add(key) })) {
				l.q.AddAfter(key, after)
			}
		}
		l.q.Done(key)
		if l.synced != nil {
			l.synced(l.name, key)
		}
	}
}

// splitKey splits "namespace/name".
func splitKey(key string) (namespace, name string, err error) {
	ns, name, ok := strings.Cut(key, "/")
	if !ok || ns == "" || name == "" {
		return "", "", fmt.Errorf("%w: %q", ErrBadKey, key)
	}
	return ns, name, nil
}

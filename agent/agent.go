package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outpost-edge/outpost/internal/exepages"

	"github.com/outpost-edge/outpost/agent/clusterdns"
	"github.com/outpost-edge/outpost/agent/host"
	"github.com/outpost-edge/outpost/agent/stats"
	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/auth"
	"github.com/outpost-edge/outpost/controlplane/client"
	"github.com/outpost-edge/outpost/controlplane/pki"
	"github.com/outpost-edge/outpost/controlplane/scheduler/taints"
	"github.com/outpost-edge/outpost/gossip"
	"github.com/outpost-edge/outpost/runtime"
)

var (
	podsResource   = api.ResourceForKind("Pod")
	nodesResource  = api.ResourceForKind("Node")
	eventsResource = api.ResourceForKind("Event")
)

// Agent is one running node agent.
type Agent struct {
	cfg Config
	log *slog.Logger
	// starts bounds the containers being created and started at once,
	// with their pods' network setups (worker.start): on a small host a
	// burst of pods all starting together share the CPU so that all
	// finish late; a few at a time finish one after another at the same
	// throughput (issue 16 item 4).
	starts chan struct{}
	// netMu guards netWritten: whether this run wrote (or found) the
	// pod network's configuration (podnetwork.go).
	netMu      sync.Mutex
	netWritten bool
	// dns is the cluster's resolver when this agent runs one, and
	// dnsAddr its address once known (dns.go).
	dns     *clusterdns.Server
	dnsAddr atomic.Pointer[netip.Addr]
	cred    *credential
	// credMu guards cred's Servers and its file.
	credMu sync.Mutex
	cl     *client.Client
	rt     Runtime
	state  *state
	// fence is the agent's clock for fencing itself (fence.go).
	fence *fenceClock
	pods  *pods
	// address is the node's InternalIP, also every pod's IP (host
	// network).
	address string
	now     func() time.Time

	// online is whether the control plane answered last time; since is
	// when it stopped answering.
	online atomic.Bool
	// restart asks Run to return for a restart on another binary
	// (binaryupdate.go); wantMu guards the binary the node names.
	restart chan string
	wantMu  sync.Mutex
	// bin is the binary's state as the Node should say it: found at
	// start, changed when a trial is confirmed (binaryupdate.go).
	bin         atomic.Pointer[binaryState]
	offlineMu   sync.Mutex
	offlineFrom time.Time
	// contactSaved is when the state file last got a contact time
	// (UnixNano): a restarted agent judges how long the control plane
	// was away from it, so it must follow contacts, not just the first.
	contactSaved atomic.Int64

	// exitsWatched is whether the runtime's exit events are followed
	// (workers then poll rarely).
	exitsWatched atomic.Bool
	// alive is when the node loop last turned (UnixNano), for the
	// watchdog.
	alive atomic.Int64
	// gossip is the agent's member of the pool, nil without one; the
	// servers it sees are servers to fail over to.
	gossip atomic.Pointer[gossip.Pool]
	// legacyHeartbeat: the server serves no heartbeat call, so the node's
	// status is posted every heartbeat.
	legacyHeartbeat atomic.Bool
	// endpointPort is the port the agent's endpoint listens on.
	endpointPort int
	// thresholds are Config.EvictionHard, parsed once.
	thresholds []host.Threshold

	// events queue pods' and the node's events for sendEvents.
	events chan *api.Event

	// role is the host's server role; roleStarted whether the agent
	// started it (roleMu guards both); released whether the control
	// plane asked to stop outpost's roles (serverrole.go).
	role        ServerRole
	roleMu      sync.Mutex
	roleStarted bool
	released    atomic.Bool
	// refusedRole: a request to serve was refused (not eligible) and
	// said so.
	refusedRole atomic.Bool

	// metrics is the agent's own health, stats its usage sampler; both
	// are served on its endpoint's /metrics (metrics.go, package stats).
	metrics *agentMetrics
	stats   *stats.Sampler

	// osNode is the Node as the config update loop's watch last
	// delivered it: the update's writes start from it (osupdate.go).
	osNode client.Latest[*api.Node]

	wg sync.WaitGroup
}

// contact records that the control plane answered.
func (a *Agent) contact() {
	now := a.now()
	if a.online.Swap(true) {
		// At most one state file write per heartbeat period.
		if last := a.contactSaved.Load(); now.UnixNano()-last >= int64(a.cfg.Heartbeat) && a.contactSaved.CompareAndSwap(last, now.UnixNano()) {
			if err := a.state.setLastContact(now); err != nil {
				a.log.Warn("state file", "err", err)
			}
		}
		return
	}
	a.offlineMu.Lock()
	from := a.offlineFrom
	a.offlineFrom = time.Time{}
	a.offlineMu.Unlock()
	a.contactSaved.Store(now.UnixNano())
	if err := a.state.setLastContact(now); err != nil {
		a.log.Warn("state file", "err", err)
	}
	// Away for longer than a few heartbeats: say so (a blip is not news).
	if !from.IsZero() && now.Sub(from) > 3*a.cfg.Heartbeat {
		away := now.Sub(from).Round(time.Second)
		a.log.Info("control plane reachable again: reconciling with it", "away", away)
		a.nodeEvent(eventNormal, "ControlPlaneReachable",
			fmt.Sprintf("no contact with the control plane for %s (the link was down or the agent was stopped); the node's %d pods ran on from the agent's state file, and it now follows the control plane's view", away, a.podCount()))
	}
}

// offline records that the control plane did not answer.
func (a *Agent) offline(err error) {
	if !a.online.Swap(false) {
		return
	}
	a.offlineMu.Lock()
	a.offlineFrom = a.now()
	a.offlineMu.Unlock()
	a.log.Warn("control plane unreachable: pods keep running from the state file", "err", err)
}

func (a *Agent) podCount() int {
	a.pods.mu.Lock()
	defer a.pods.mu.Unlock()
	return len(a.pods.desired)
}

// registryAuth is the configured registry credentials in the runtime's
// shape.
func (a *Agent) registryAuth() []runtime.RegistryAuth {
	out := make([]runtime.RegistryAuth, 0, len(a.cfg.Registries))
	for _, r := range a.cfg.Registries {
		out = append(out, runtime.RegistryAuth(r))
	}
	return out
}

// Run joins (once), then runs the agent until ctx ends. Pods keep running
// after it returns: containers outlive the agent, and the next Run adopts
// them.
func Run(ctx context.Context, cfg Config) error {
	cfg, thresholds, errs := cfg.check()
	err := errors.Join(errs...)
	if err != nil {
		return err
	}
	log := cfg.Logger.With("node", cfg.NodeName)
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	a := &Agent{cfg: cfg, log: log, pods: newPods(), now: time.Now, restart: make(chan string, 1),
		starts: make(chan struct{}, parallelStarts()),
		events: make(chan *api.Event, 256)}
	a.thresholds = thresholds
	if a.runsResolver() {
		a.dns = clusterdns.NewServer(cfg.ClusterDomain, dnsUpstreams(cfg.ResolvConf, a.clusterDNS()), log)
	}
	a.address = cfg.Address
	if a.address == "" {
		a.address = defaultAddress(ctx, cfg.DataDir)
	}
	if a.cred, err = a.credential(ctx); err != nil {
		return err
	}
	if a.cl, err = client.New(a.cred.clientConfig()); err != nil {
		return fmt.Errorf("client: %w", err)
	}
	if a.state, err = openState(filepath.Join(cfg.DataDir, "state.db")); err != nil {
		return err
	}
	defer a.state.Close()
	upd, err := a.newUpdater()
	if err != nil {
		return err
	}

	rt, stopRuntime, err := a.startRuntime(ctx)
	if err != nil {
		return err
	}
	defer stopRuntime()
	a.rt = rt
	a.metrics = newAgentMetrics(a, log)
	a.stats = stats.New(stats.Config{Runtime: rt, NodeName: cfg.NodeName, Interval: cfg.StatsInterval, Logger: log,
		OnError: func(error) { a.metrics.syncError(loopStats) }})
	if err := a.metrics.register(a.stats.Collector()); err != nil {
		log.Warn("usage metrics not registered", "err", err)
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		a.wg.Wait()
	}()
	if ew, ok := a.rt.(runtime.ExitWatcher); ok {
		a.wg.Go(func() { a.followExits(runCtx, ew) })
	}
	// Autonomy first: the pods of the state file run before the control
	// plane is asked anything, unless their toleration of unreachable ran
	// out meanwhile (fence.go).
	if err := a.loadFenced(); err != nil {
		return err
	}
	if err := a.restore(runCtx); err != nil {
		return err
	}
	a.role = cfg.ServerRole
	if a.role == nil {
		a.role = defaultServerRole(log, cfg.DataDir)
	}
	if err := a.resumeServerRole(runCtx); err != nil {
		return err
	}
	if pr, ok := a.role.(*ProcessRole); ok {
		// A child server ends with its agent, gracefully.
		defer func() { _ = pr.Stop(context.Background()) }()
	}
	stopExtras, err := a.startExtras(runCtx)
	if err != nil {
		return err
	}
	defer stopExtras()
	if cfg.Ready != nil {
		cfg.Ready()
	}
	b := a.readBinary()
	a.bin.Store(&b)
	a.alive.Store(time.Now().UnixNano())
	a.wg.Go(func() { a.watchdog(runCtx, &a.alive) })
	a.wg.Go(func() { a.nodeLoop(runCtx) })
	a.wg.Go(func() { a.fenceLoop(runCtx) })
	a.wg.Go(func() { a.watchPods(runCtx) })
	if a.cfg.PodNetwork != nil && (a.cfg.PodRoutes == PodRoutesHostGW || a.cfg.PodRoutes == PodRoutesVXLAN) {
		a.wg.Go(func() { a.routePods(runCtx) })
	}
	if a.cfg.ServiceProxy || a.dns != nil {
		a.wg.Go(func() { a.followServices(runCtx) })
	}
	if a.dns != nil {
		a.wg.Go(func() { a.serveDNS(runCtx) })
	}
	a.wg.Go(func() { a.reportLoop(runCtx) })
	a.wg.Go(func() { a.stats.Run(runCtx) })
	a.wg.Go(func() { a.sendEvents(runCtx) })
	a.wg.Go(func() { a.refreshServers(runCtx) })
	if upd != nil {
		a.wg.Go(func() { a.osUpdateLoop(runCtx, upd) })
	}
	a.wg.Go(func() {
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-runCtx.Done():
				return
			case <-t.C:
				a.removeOrphans(runCtx)
			}
		}
	})
	a.wg.Go(func() { a.binaryUpdateLoop(runCtx) })
	// The binary holds the server and the CLI too; the agent runs
	// little of it (issue 16 item 4: its idle RSS).
	a.wg.Go(func() { exepages.TrimAfter(runCtx, exepages.StartupDelay, log) })
	log.Info("agent running", "server", a.cred.Server, "address", a.address, "pods", a.podCount())
	select {
	case <-ctx.Done():
	case why := <-a.restart:
		// Exiting cleanly, the pods left running: systemd
		// (Restart=always) starts the binary DIR/current names now.
		log.Info("exiting to be restarted", "why", why)
		return nil
	}
	if cfg.StopPodsOnExit {
		// The loops end first, so that no worker starts a container
		// again behind the sweep.
		cancel()
		a.wg.Wait()
		a.stopAllPods(context.WithoutCancel(ctx))
	}
	return nil
}

// credential loads the node's credential, or joins to get one, retrying
// while the control plane cannot be reached.
func (a *Agent) credential(ctx context.Context) (*credential, error) {
	c, err := loadCredential(a.cfg.DataDir)
	if err != nil || c != nil {
		return c, err
	}
	// Run checked what joining needs (Config.checkJoin).
	var caPEM []byte
	if a.cfg.CAFile != "" {
		if caPEM, err = os.ReadFile(a.cfg.CAFile); err != nil {
			return nil, fmt.Errorf("%w: --ca-cert: %w", ErrConfig, err)
		}
	}
	hosts := []string{a.address}
	if h, err := os.Hostname(); err == nil {
		hosts = append(hosts, h)
	}
	wait := time.Second
	for {
		c, err = join(ctx, a.cfg.Server, a.cfg.JoinToken, caPEM, a.cfg.NodeName, hosts)
		if err == nil {
			break
		}
		if permanent(err) {
			return nil, err
		}
		a.log.Warn("join failed; trying again", "server", a.cfg.Server, "in", wait, "err", err)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
		wait = min(wait*2, 30*time.Second)
	}
	if err := c.save(a.cfg.DataDir); err != nil {
		return nil, err
	}
	a.log.Info("joined the cluster", "server", a.cfg.Server)
	return c, nil
}

// restore starts the pods of the state file, adopting the containers a
// previous run left.
func (a *Agent) restore(ctx context.Context) error {
	saved, err := a.state.pods()
	if err != nil {
		return fmt.Errorf("state file: %w", err)
	}
	existing := map[string][]runtime.ContainerStatus{}
	if all, err := a.rt.ListContainers(ctx); err == nil {
		for _, st := range all {
			uid := st.Labels[runtime.LabelPodUID]
			existing[uid] = append(existing[uid], st)
		}
	} else {
		a.log.Warn("list containers", "err", err)
	}
	now := a.fence.now()
	for _, p := range saved {
		if a.fenceDeadlinePassed(p, now) {
			a.pods.mu.Lock()
			a.pods.desired[string(p.UID)] = p
			a.pods.mu.Unlock()
			a.fencePod(ctx, p)
			continue
		}
		a.setPod(ctx, p, existing[string(p.UID)], true)
	}
	if len(saved) > 0 {
		last := a.state.lastContact()
		a.log.Info("pods restored from the state file", "pods", len(saved), "lastContact", last)
		// Away since the last contact: contact reports it once the
		// control plane answers, if that was more than a few heartbeats
		// (judged then: the agent may have restarted soon after a cut).
		if !last.IsZero() {
			a.offlineMu.Lock()
			a.offlineFrom = last
			a.offlineMu.Unlock()
		}
	}
	return nil
}

// loadFenced sets up the fence clock and the pods the agent holds
// stopped from the state file.
func (a *Agent) loadFenced() error {
	saved, err := a.state.pods()
	if err != nil {
		return fmt.Errorf("state file: %w", err)
	}
	fencedPods, err := a.state.fencedPods()
	if err != nil {
		return fmt.Errorf("state file: %w", err)
	}
	a.fence = loadFence(a.state, bootClock, readBootID(), len(saved)+len(fencedPods) > 0)
	a.pods.mu.Lock()
	defer a.pods.mu.Unlock()
	for uid, p := range fencedPods {
		// Only an acknowledgement of this run lets it run again.
		a.pods.fenced[uid] = fenced{pod: p, at: a.fence.started}
	}
	for _, p := range fencedPods {
		// The event of the stop may have been lost with the previous
		// run's queue: say it again, for when the control plane answers.
		tol, _ := taints.UnreachableToleration(p.Spec.Tolerations)
		a.podEvent(p, "", eventWarning, "StoppedByNode", fmt.Sprintf(
			"Pod stopped by its node while cut off from the control plane (before the agent restarted): its toleration of unreachable (%s) ran out (TNT-9)", tol))
	}
	return nil
}

// permanent reports whether a join error will not go away by trying
// again: a refused token, a bad request, a wrong pin.
func permanent(err error) bool {
	switch api.ReasonOf(err) {
	case api.ReasonUnauthorized, api.ReasonForbidden, api.ReasonInvalid, api.ReasonBadRequest:
		return true
	}
	return errors.Is(err, ErrConfig) || errors.Is(err, ErrBadReply) || errors.Is(err, auth.ErrInvalidToken) || errors.Is(err, pki.ErrPinMismatch)
}

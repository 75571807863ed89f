package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
)

// SilencedAnnotation set to "true" on a Node makes the agent simulating it
// go quiet: no heartbeats, no pod updates. `outpost sim silence` sets it.
const SilencedAnnotation = "sim.outpost.io/silenced"

// Defaults of Config.
const (
	DefaultHeartbeat = 10 * time.Second
	// DefaultStatusRefresh is the agent's: a node that does not change
	// posts its status this often.
	DefaultStatusRefresh = 5 * time.Minute
	DefaultWorkers       = 16
)

// writeTimeout bounds each write, so that a stuck request cannot hold a
// worker of the pool for ever.
const writeTimeout = 30 * time.Second

// Errors of this package.
var (
	// ErrNoNodes is a nodes file without any Node.
	ErrNoNodes = errors.New("no Node objects in the nodes file")
	// ErrNotNode is an object of another kind in the nodes file.
	ErrNotNode = errors.New("the nodes file may hold only Node objects")
	// ErrBadNode is a node the server would refuse (its name, mostly).
	ErrBadNode = errors.New("invalid node")
	// ErrDuplicateNode is a name given twice, in the file or by --count.
	ErrDuplicateNode = errors.New("node name is used twice")
	// ErrBadCount is a negative --count.
	ErrBadCount = errors.New("count must not be negative")
	// ErrUnknownNode is a name that this simulation does not run.
	ErrUnknownNode = errors.New("not a node of this simulation")
	// ErrNoToken is a configuration without the admin token that the
	// simulation needs to make node credentials.
	ErrNoToken = errors.New("the simulation needs a cluster-admin token to make node credentials")
	// ErrBadReply is an object of an unexpected kind from the server.
	ErrBadReply = errors.New("unexpected reply from the server")
)

var (
	nodesResource = api.ResourceForKind("Node")
	podsResource  = api.ResourceForKind("Pod")
)

// Config says what to simulate and where.
type Config struct {
	// Client is a cluster-admin configuration: the simulation uses it to
	// make each node's credential (a node Token) and to put a file's
	// labels and taints back on nodes that exist already. Everything else
	// each node does with its own credential.
	Client client.Config
	// Nodes are the templates, as LoadNodes returns them.
	Nodes []*api.Node
	// Count stamps out this many numbered copies of each template
	// (CopyName: worker-0001...); 0 runs the templates under their names.
	Count int
	// Heartbeat is the interval of each node's heartbeat (default 10s):
	// the heartbeat call, which renews the node's liveness on the leader
	// without a raft write, as a real agent's does. Each interval is
	// jittered by ±10% and the first one is spread over a whole
	// interval, so nodes do not beat in step.
	Heartbeat time.Duration
	// StatusRefresh is how often a node that does not change posts its
	// status anyway (default 5m, as the agent's).
	StatusRefresh time.Duration
	// StatusEveryHeartbeat posts the whole status at every heartbeat
	// instead, as agents did before the heartbeat call (to measure the
	// difference; testing/bench).
	StatusEveryHeartbeat bool
	// UpdateDuration, when above 0, makes each node play a config update
	// (SPEC UPD-8) when its pool gives it a desiredConfig: it reports
	// Working and cordons itself, and UpdateDuration later (its apply and
	// reboot) reports the config current, Done, and uncordons, as a real
	// agent does through the same node annotations.
	UpdateDuration time.Duration
	// BinaryUpdateDuration, when above 0, makes each node's agent play a
	// binary update (SPEC UPD-6) when the cluster version controller
	// names one on its Node: it downloads the binary from the API (and
	// checks its digest), and BinaryUpdateDuration later (its restart)
	// reports the version, as a real agent does. The nodes then say
	// their agents can replace their binary.
	BinaryUpdateDuration time.Duration
	// DisablePods leaves pods alone, for pure scheduler benchmarks:
	// pods bound to the nodes stay Pending.
	DisablePods bool
	// Workers bounds the writes in flight for each of registration,
	// heartbeats and pod updates (default 16).
	Workers int
	// Logger receives the agents' logs (default: none).
	Logger *slog.Logger
	// Progress receives "registered 1000/5000 nodes" lines while nodes
	// register (default: none).
	Progress io.Writer
}

// Agents is a running simulation.
type Agents struct {
	cfg     Config
	log     *slog.Logger
	admin   *client.Client
	watcher *client.Client
	nodes   []*simNode
	byName  map[string]*simNode

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	hbq    *workQueue[int]
	podq   *workQueue[string]

	podMu   sync.Mutex
	pending map[string]*api.Pod // pods of our nodes not yet Running, latest version seen

	warnMu   sync.Mutex
	warnLast time.Time
	warnSkip int

	stopOnce sync.Once
}

// simNode is one simulated agent.
type simNode struct {
	idx      int
	name     string
	tmpl     *api.Node
	ownRange bool
	net      nodeNet
	cl       *client.Client
	// latest is the Node as the watch or the node's own last write
	// gave it: a simulated update's writes start from it, as the
	// agent's do.
	latest client.Latest[*api.Node]

	// mu is held shared by every write the node makes and exclusively to
	// change silenced, so that once Silence returns no write of the node
	// is in flight.
	mu       sync.RWMutex
	silenced bool
	// The addresses pods get, set by registration.
	hostIP   string
	podRange netip.Prefix

	registered atomic.Bool
	// released: the node answered a release request (its machine is
	// being deleted).
	released atomic.Bool
	// annotation is the last seen value of SilencedAnnotation; a change
	// of it silences or resumes the node.
	annotation atomic.Pointer[string]
	// serverReady is whether the stored node says Ready=True; when it
	// does not, the next heartbeat is a transition.
	serverReady atomic.Bool
	nextIP      atomic.Uint32

	// Touched only by registration and then by the one heartbeat worker
	// that has this node's key: the status, when it was last posted, and
	// whether the server lacks the heartbeat call (an older version).
	status     api.NodeStatus
	statusAt   time.Time
	noBeatCall bool

	timerMu sync.Mutex
	timer   *time.Timer

	// version is the agent version the node reports once a simulated
	// binary update ended (nil: the simulator's own); versionChanged
	// asks the next heartbeat to post the status with it.
	version        atomic.Pointer[string]
	versionChanged atomic.Bool
	replacing      atomic.Bool
	// updating is the config a simulated update is applying ("" when
	// none).
	updating atomic.Pointer[string]
}

// arm makes fire run after d, replacing the timer armed before: an extra
// heartbeat (Resume) must not start a second chain of them.
func (n *simNode) arm(d time.Duration, fire func()) {
	n.timerMu.Lock()
	defer n.timerMu.Unlock()
	if n.timer != nil {
		n.timer.Stop()
	}
	n.timer = time.AfterFunc(d, fire)
}

func (n *simNode) disarm() {
	n.timerMu.Lock()
	defer n.timerMu.Unlock()
	if n.timer != nil {
		n.timer.Stop()
	}
}

// Run simulates cfg's nodes until ctx is done. The nodes stay registered
// when it returns.
func Run(ctx context.Context, cfg Config) error {
	a, err := Start(ctx, cfg)
	if err != nil {
		return err
	}
	<-ctx.Done()
	a.Stop()
	return nil
}

// Start registers cfg's nodes, each with its own node credential, and
// returns once all are registered; they then heartbeat and run their
// pods until ctx is done or Stop is called.
func Start(ctx context.Context, cfg Config) (*Agents, error) {
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = DefaultHeartbeat
	}
	if cfg.StatusRefresh <= 0 {
		cfg.StatusRefresh = DefaultStatusRefresh
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Client.Token == "" {
		return nil, ErrNoToken
	}
	names, tmpls, err := Expand(cfg.Nodes, cfg.Count)
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, ErrNoNodes
	}
	admin, err := client.New(cfg.Client)
	if err != nil {
		return nil, err
	}
	a := &Agents{
		cfg:     cfg,
		log:     logger,
		admin:   admin,
		byName:  make(map[string]*simNode, len(names)),
		hbq:     newWorkQueue[int](),
		podq:    newWorkQueue[string](),
		pending: map[string]*api.Pod{},
	}
	for i, name := range names {
		n := &simNode{idx: i, name: name, tmpl: tmpls[i], ownRange: cfg.Count == 0, net: netFor(i)}
		// Fail on a bad template before writing anything.
		if err := validateNode(buildNode(n.tmpl, name, n.net, n.ownRange)); err != nil {
			return nil, err
		}
		a.nodes = append(a.nodes, n)
		a.byName[name] = n
	}
	a.ctx, a.cancel = context.WithCancel(ctx)
	a.wg.Go(func() {
		<-a.ctx.Done()
		a.hbq.Shutdown()
		a.podq.Shutdown()
	})
	for range cfg.Workers {
		a.wg.Go(a.heartbeatWorker)
	}
	if err := a.registerAll(); err != nil {
		a.Stop()
		return nil, err
	}
	a.watcher = a.nodes[0].cl
	a.wg.Go(func() { a.inform(nodesResource, a.resetNodes, a.nodeEvent) })
	if !cfg.DisablePods {
		for range cfg.Workers {
			a.wg.Go(a.podWorker)
		}
		a.wg.Go(func() { a.inform(podsResource, a.resetPods, a.podEvent) })
	}
	return a, nil
}

// Stop ends the simulation and waits for its goroutines. The nodes stay
// registered; without heartbeats they look like hosts that went away.
func (a *Agents) Stop() {
	a.stopOnce.Do(func() {
		a.cancel()
		a.wg.Wait()
		for _, n := range a.nodes {
			n.disarm()
		}
	})
}

// Names returns the names of the simulated nodes.
func (a *Agents) Names() []string {
	out := make([]string, len(a.nodes))
	for i, n := range a.nodes {
		out[i] = n.name
	}
	return out
}

// Ready is the number of nodes registered and not silenced.
func (a *Agents) Ready() int {
	c := 0
	for _, n := range a.nodes {
		if !n.registered.Load() {
			continue
		}
		n.mu.RLock()
		if !n.silenced {
			c++
		}
		n.mu.RUnlock()
	}
	return c
}

// Silence makes the named nodes go quiet: no more heartbeats and pod
// updates until Resume. When it returns, none of their writes is in
// flight. It acts on this process only (`outpost sim silence` uses the
// annotation instead); names this simulation does not run are reported
// in the error, the others are silenced anyway.
func (a *Agents) Silence(names ...string) error {
	return a.each(names, func(n *simNode) { a.setSilenced(n, true, "Silence") })
}

// Resume makes the named nodes heartbeat again, at once.
func (a *Agents) Resume(names ...string) error {
	return a.each(names, func(n *simNode) { a.setSilenced(n, false, "Resume") })
}

func (a *Agents) each(names []string, fn func(*simNode)) error {
	var errs []error
	for _, name := range names {
		n := a.byName[name]
		if n == nil {
			errs = append(errs, fmt.Errorf("node %q: %w", name, ErrUnknownNode))
			continue
		}
		fn(n)
	}
	return errors.Join(errs...)
}

// setSilenced switches node n; why goes to the log.
func (a *Agents) setSilenced(n *simNode, silenced bool, why string) {
	n.mu.Lock()
	was := n.silenced
	n.silenced = silenced
	n.mu.Unlock()
	switch {
	case silenced && !was:
		a.log.Info("node went quiet", "node", n.name, "by", why)
	case !silenced && was:
		a.log.Info("node resumed", "node", n.name, "by", why)
		a.hbq.Add(n.idx)
		a.requeuePods(n.name)
	}
}

// registerAll registers every node with Workers writes in flight,
// reporting progress, and stops at the first node that fails.
func (a *Agents) registerAll() error {
	tokens, err := a.listTokens(a.ctx)
	if err != nil {
		return err
	}
	// Nodes that exist already (a restart) skip the create that would fail.
	existing := map[string]*api.Node{}
	objs, _, err := a.admin.List(a.ctx, nodesResource, "", client.ListOptions{})
	if err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	for _, o := range objs {
		if nd, ok := o.(*api.Node); ok && a.byName[nd.Name] != nil {
			existing[nd.Name] = nd
		}
	}
	total := len(a.nodes)
	step := max(total/10, 100)
	var (
		next   atomic.Int64
		done   atomic.Int64
		failed atomic.Pointer[error]
		wg     sync.WaitGroup
		outMu  sync.Mutex
	)
	ctx, cancel := context.WithCancel(a.ctx)
	defer cancel()
	for range min(a.cfg.Workers, total) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= total {
					return
				}
				n := a.nodes[i]
				if err := a.registerWithToken(ctx, n, tokens, existing[n.name]); err != nil {
					if failed.CompareAndSwap(nil, &err) {
						cancel()
					}
					return
				}
				if c := done.Add(1); a.cfg.Progress != nil && total >= 100 && (c%int64(step) == 0 || c == int64(total)) {
					outMu.Lock()
					fmt.Fprintf(a.cfg.Progress, "registered %d/%d nodes\n", c, total)
					outMu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if p := failed.Load(); p != nil {
		return *p
	}
	if err := a.ctx.Err(); err != nil {
		return fmt.Errorf("registering nodes: %w", err)
	}
	return nil
}

func (a *Agents) registerWithToken(ctx context.Context, n *simNode, tokens map[string]*api.Token, cur *api.Node) error {
	var tok string
	err := retry(ctx, func() error {
		var err error
		tok, err = a.ensureToken(ctx, n.name, tokens)
		return err
	})
	if err != nil {
		return err
	}
	n.cl = a.admin.WithToken(tok)
	if err := retry(ctx, func() error { return a.register(ctx, n, cur) }); err != nil {
		return fmt.Errorf("register node %q: %w", n.name, err)
	}
	n.registered.Store(true)
	// The registration was a heartbeat; the next one comes at a random
	// point of the first interval, so that nodes spread out.
	idx := n.idx
	n.arm(rand.N(a.cfg.Heartbeat), func() { a.hbq.Add(idx) })
	return nil
}

// register creates node n as itself, or, if it exists (cur, when the
// caller has read it), puts the file's labels and taints back (as admin: a
// node may not change them) and reports its status (as itself), unless
// the node is silenced by its annotation.
func (a *Agents) register(ctx context.Context, n *simNode, cur *api.Node) error {
	want := buildNode(n.tmpl, n.name, n.net, n.ownRange)
	if a.cfg.BinaryUpdateDuration > 0 {
		if want.Annotations == nil {
			want.Annotations = map[string]string{}
		}
		want.Annotations[api.AnnotationAgentBinaryState] = api.SelfUpdateReady
	}
	if v := n.version.Load(); v != nil {
		want.Status.NodeInfo.KubeletVersion = *v
	}
	now := api.NewTime(time.Now())
	for i := range want.Status.Conditions {
		c := &want.Status.Conditions[i]
		c.LastHeartbeatTime, c.LastTransitionTime = now, now
	}
	wctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	if cur == nil {
		res, _, err := n.cl.Create(wctx, want)
		if err == nil {
			empty := ""
			n.annotation.Store(&empty)
			cidr := want.Spec.PodCIDR
			if made, ok := res.(*api.Node); ok && made.Spec.PodCIDR != "" {
				cidr = made.Spec.PodCIDR
			}
			a.recordRegistration(n, cidr, want.Status)
			return nil
		}
		if !api.IsAlreadyExists(err) {
			return err
		}
	}
	listed := cur != nil
	cur, err := a.mergeExisting(wctx, n, want, cur)
	if listed && api.IsNotFound(err) {
		return a.register(ctx, n, nil) // deleted since the list
	}
	if err != nil {
		return err
	}
	ann := cur.Annotations[SilencedAnnotation]
	n.annotation.Store(&ann)
	for i := range want.Status.Conditions {
		c := &want.Status.Conditions[i]
		for _, old := range cur.Status.Conditions {
			if old.Type == c.Type && old.Status == c.Status && old.LastTransitionTime != nil {
				c.LastTransitionTime = old.LastTransitionTime
			}
		}
	}
	if ann == "true" {
		a.setSilenced(n, true, "annotation "+SilencedAnnotation)
		a.recordRegistration(n, cur.Spec.PodCIDR, want.Status)
		return nil
	}
	upd := &api.Node{TypeMeta: want.TypeMeta, ObjectMeta: api.ObjectMeta{Name: n.name}, Status: want.Status}
	if _, _, err := n.cl.UpdateStatus(wctx, upd); err != nil {
		return err
	}
	a.recordRegistration(n, cur.Spec.PodCIDR, want.Status)
	return nil
}

// recordRegistration keeps what a registration wrote.
func (a *Agents) recordRegistration(n *simNode, podCIDR string, st api.NodeStatus) {
	n.status = st
	// As if the last post were at a random point of the refresh period:
	// nodes registered together refresh spread out, as agents started at
	// different times do, so the steady rate shows from the start.
	n.statusAt = time.Now().Add(-rand.N(a.cfg.StatusRefresh))
	n.mu.Lock()
	n.podRange = n.net.pods
	if p, err := netip.ParsePrefix(podCIDR); err == nil && p.Addr().Is4() {
		n.podRange = p
	}
	n.hostIP = ""
	for _, addr := range st.Addresses {
		if addr.Type == "InternalIP" {
			n.hostIP = addr.Address
			break
		}
	}
	n.mu.Unlock()
	n.serverReady.Store(api.ReadyIn(st.Conditions))
}

// mergeExisting adds want's labels, annotations, taints and
// unschedulable to the stored node, cur if the caller has read it
// (keeping what others added), and returns the node as stored. cur is
// not changed.
func (a *Agents) mergeExisting(ctx context.Context, n *simNode, want, cur *api.Node) (*api.Node, error) {
	for attempt := 1; ; attempt++ {
		if cur == nil {
			obj, err := n.cl.Get(ctx, nodesResource, "", n.name, client.GetOptions{})
			if err != nil {
				return nil, err
			}
			var ok bool
			if cur, ok = obj.(*api.Node); !ok {
				return nil, fmt.Errorf("node %q: got %T: %w", n.name, obj, ErrBadReply)
			}
		} else {
			cur = cloneNodeMeta(cur)
		}
		if !mergeSpec(cur, want) {
			return cur, nil
		}
		obj, _, err := a.admin.Update(ctx, cur)
		if err == nil {
			if out, ok := obj.(*api.Node); ok {
				return out, nil
			}
			return cur, nil
		}
		if !api.IsConflict(err) || attempt >= 5 {
			return nil, err
		}
		cur = nil
	}
}

// cloneNodeMeta copies what mergeSpec changes, so that a node read by a
// list shared with others is left as it was.
func cloneNodeMeta(n *api.Node) *api.Node {
	cp := *n
	cp.Labels = maps.Clone(n.Labels)
	cp.Annotations = maps.Clone(n.Annotations)
	cp.Spec.Taints = slices.Clone(n.Spec.Taints)
	return &cp
}

// mergeSpec lays want's labels, annotations and taints over cur and sets
// unschedulable if want has it; it reports whether cur changed.
func mergeSpec(cur, want *api.Node) bool {
	changed := false
	for k, v := range want.Labels {
		if old, ok := cur.Labels[k]; !ok || old != v {
			if cur.Labels == nil {
				cur.Labels = map[string]string{}
			}
			cur.Labels[k] = v
			changed = true
		}
	}
	for k, v := range want.Annotations {
		if old, ok := cur.Annotations[k]; !ok || old != v {
			if cur.Annotations == nil {
				cur.Annotations = map[string]string{}
			}
			cur.Annotations[k] = v
			changed = true
		}
	}
	for _, t := range want.Spec.Taints {
		i := slices.IndexFunc(cur.Spec.Taints, func(c api.Taint) bool { return c.Key == t.Key && c.Effect == t.Effect })
		switch {
		case i < 0:
			cur.Spec.Taints = append(cur.Spec.Taints, t)
			changed = true
		case cur.Spec.Taints[i].Value != t.Value:
			cur.Spec.Taints[i].Value = t.Value
			changed = true
		}
	}
	if want.Spec.Unschedulable && !cur.Spec.Unschedulable {
		cur.Spec.Unschedulable = true
		changed = true
	}
	return changed
}

func (a *Agents) heartbeatWorker() {
	for {
		idx, ok := a.hbq.Get()
		if !ok {
			return
		}
		n := a.nodes[idx]
		a.heartbeat(n)
		a.hbq.Done(idx)
		if a.ctx.Err() != nil {
			return
		}
		// ±10% jitter keeps nodes that started together from beating together.
		n.arm(a.cfg.Heartbeat*9/10+rand.N(a.cfg.Heartbeat/5+1), func() { a.hbq.Add(idx) })
	}
}

// heartbeat proves node n alive as an agent does: the heartbeat call,
// which the leader keeps in memory, and a status post (every condition's
// lastHeartbeatTime refreshed) only when the stored node is not Ready
// (a transition) or StatusRefresh passed. A node deleted behind its back
// registers again, as a real agent does.
func (a *Agents) heartbeat(n *simNode) {
	n.mu.RLock()
	if n.silenced {
		n.mu.RUnlock()
		return
	}
	if a.cfg.StatusEveryHeartbeat || n.noBeatCall || !n.serverReady.Load() || n.versionChanged.Load() || time.Since(n.statusAt) >= a.cfg.StatusRefresh {
		a.postStatus(n)
		return
	}
	ctx, cancel := context.WithTimeout(a.ctx, writeTimeout)
	defer cancel()
	hb, err := n.cl.NodeHeartbeat(ctx, n.name)
	if err == nil && hb.Release && n.released.CompareAndSwap(false, true) {
		go a.released(n)
	}
	switch {
	case err == nil && hb.Ready == api.ConditionTrue:
		n.mu.RUnlock()
	case err == nil:
		// Marked Unknown meanwhile: post Ready again now.
		n.serverReady.Store(false)
		a.postStatus(n)
	case isRouteNotFound(err):
		n.noBeatCall = true
		a.postStatus(n)
	default:
		n.mu.RUnlock()
		a.heartbeatFailed(n, err)
	}
}

// released answers a release request as an agent does once it stopped
// outpost's roles (a simulated node runs none): with the annotation on
// its Node that the machine's deletion waits for.
func (a *Agents) released(n *simNode) {
	ctx, cancel := context.WithTimeout(a.ctx, writeTimeout)
	defer cancel()
	obj, err := n.cl.Get(ctx, nodesResource, "", n.name, client.GetOptions{})
	if err == nil {
		node := obj.(*api.Node)
		if node.Annotations == nil {
			node.Annotations = map[string]string{}
		}
		node.Annotations[api.AnnotationRolesStopped] = time.Now().UTC().Format(time.RFC3339)
		_, _, err = n.cl.Update(ctx, node)
	}
	if err != nil {
		n.released.Store(false) // asked again at the next heartbeat
	}
}

// isRouteNotFound is a 404 naming no object: a server that does not serve
// the path at all.
func isRouteNotFound(err error) bool {
	var se *api.StatusError
	return errors.As(err, &se) && se.Status.Code == http.StatusNotFound && (se.Status.Details == nil || se.Status.Details.Name == "")
}

// postStatus refreshes every condition's lastHeartbeatTime through the
// status subresource, as the node. It releases n.mu's read lock, which
// the caller holds.
func (a *Agents) postStatus(n *simNode) {
	now := api.NewTime(time.Now())
	changed := n.versionChanged.Swap(false)
	if v := n.version.Load(); v != nil {
		n.status.NodeInfo.KubeletVersion = *v
	}
	transition := !n.serverReady.Load()
	for i := range n.status.Conditions {
		c := &n.status.Conditions[i]
		c.LastHeartbeatTime = now
		if transition && c.Type == api.NodeReady && c.Status == api.ConditionTrue {
			c.LastTransitionTime = now
		}
	}
	ctx, cancel := context.WithTimeout(a.ctx, writeTimeout)
	defer cancel()
	body := &api.Node{
		TypeMeta:   api.TypeMeta{Kind: "Node", APIVersion: "v1"},
		ObjectMeta: api.ObjectMeta{Name: n.name},
		Status:     n.status,
	}
	_, _, err := n.cl.UpdateStatus(ctx, body)
	n.mu.RUnlock()
	if err != nil && changed {
		n.versionChanged.Store(true)
	}
	if err == nil {
		n.statusAt = now.Time
		n.serverReady.Store(api.ReadyIn(n.status.Conditions))
		return
	}
	a.heartbeatFailed(n, err)
}

// heartbeatFailed registers n again if it was deleted, else logs err.
func (a *Agents) heartbeatFailed(n *simNode, err error) {
	switch {
	case api.IsNotFound(err):
		a.log.Info("node was deleted; registering it again", "node", n.name)
		if err := a.register(a.ctx, n, nil); err != nil && a.ctx.Err() == nil {
			a.warn("registering again failed", "node", n.name, "err", err)
		}
	case a.ctx.Err() == nil:
		a.warn("heartbeat failed", "node", n.name, "err", err)
	}
}

// warn logs at most one failure a second, with the number it left out:
// when the server goes away, thousands of nodes fail at once.
func (a *Agents) warn(msg string, args ...any) {
	a.warnMu.Lock()
	now := time.Now()
	if now.Sub(a.warnLast) < time.Second {
		a.warnSkip++
		a.warnMu.Unlock()
		return
	}
	skipped := a.warnSkip
	a.warnLast, a.warnSkip = now, 0
	a.warnMu.Unlock()
	if skipped > 0 {
		args = append(args, "similar failures not logged", skipped)
	}
	a.log.Warn(msg, args...)
}

// retry runs fn until it succeeds, fails for good, or 5 attempts failed
// with errors worth retrying (the server busy, unreachable or between
// leaders).
func retry(ctx context.Context, fn func() error) error {
	wait := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := fn()
		if err == nil || attempt >= 5 || !retryable(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait *= 2
	}
}

// retryable reports whether err may go away if the request is sent again.
func retryable(err error) bool {
	if errors.Is(err, client.ErrUnreachable) {
		return true
	}
	switch api.ReasonOf(err) {
	case api.ReasonServiceUnavailable, api.ReasonTimeout, api.ReasonTooManyRequests, api.ReasonInternalError:
		return true
	}
	return false
}

package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/outpost-edge/outpost/controlplane/admission"
	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/controller"
	"github.com/outpost-edge/outpost/controlplane/store"
	"github.com/outpost-edge/outpost/raftstore"
)

// Namespaces every cluster has; the leader creates them if absent, and
// they cannot be deleted.
const (
	NamespaceDefault = "default"
	NamespaceSystem  = "outpost-system"
)

var (
	namespacesResource        = api.ResourceForKind("Namespace")
	tokensResource            = api.ResourceForKind("Token")
	clusterVersionsResource   = api.ResourceForKind("ClusterVersion")
	podsResource              = api.ResourceForKind("Pod")
	nodesResource             = api.ResourceForKind("Node")
	replicaSetsResource       = api.ResourceForKind("ReplicaSet")
	deploymentsResource       = api.ResourceForKind("Deployment")
	daemonSetsResource        = api.ResourceForKind("DaemonSet")
	schedulerPoliciesResource = api.ResourceForKind("SchedulerPolicy")
)

// Config is what a Core is made of.
type Config struct {
	Store  *store.Store
	Node   *raftstore.Node
	Logger *slog.Logger
	// AdminTokenID and AdminSecretHash make the built-in admin token's
	// object, which the leader creates at bootstrap and which cannot be
	// deleted.
	AdminTokenID    string
	AdminSecretHash string
	// EventTTL is how long events are kept; the leader deletes older ones.
	EventTTL time.Duration
	// AdmissionConfig configures the admission plugins (SPEC ADM-1); they
	// run after the built-in steps, before Admission.
	AdmissionConfig admission.Config
	// Admission runs last, in order, on every write.
	Admission []admission.Interface
	// Network is where Services' cluster IPs and node ports, and nodes'
	// pod CIDRs, come from (zero fields: the defaults).
	Network Network
	// Seed creates, at bootstrap, objects the transports want before the
	// cluster is ready (the schedulers' policies); nil for none.
	Seed func(ctx context.Context) error
	// OnCaughtUp runs once the store has caught up after the start, just
	// before the transports open: state the server derives from the store
	// (the admin token's generation) is current before the first request.
	OnCaughtUp func()
	// Duties run while this server leads, after the barrier and the
	// bootstrap, with the in-process client; they end when ctx does.
	Duties func(ctx context.Context, c controller.Client)
}

// Core is one server's API core. Its methods are safe for concurrent use.
type Core struct {
	cfg   Config
	st    *store.Store
	node  *raftstore.Node
	log   *slog.Logger
	admit []admission.Interface
	// caughtUp is closed once the store has applied a read index obtained
	// after New (catchup.go).
	caughtUp chan struct{}
	// evictMu takes evictions one at a time (evict.go).
	evictMu sync.Mutex
	// gate is closed once this leadership's barrier passed: the store
	// then holds every entry committed before this leader's term, so a
	// write's preconditions may be checked against it (leader.go).
	// gateReplaced is closed when resetGate replaces gate.
	gateMu       sync.Mutex
	gate         chan struct{}
	gateReplaced chan struct{}
	// leadership is what awaitBarrier asks of the raft member: node, or
	// a stand-in that loses the leadership when a test says.
	leadership leadership
	// allocations serializes writes that take addresses (serviceips.go).
	allocations allocationLock
}

// New returns the core of a server whose store and raft member are cfg's.
func New(cfg Config) (*Core, error) {
	if cfg.Store == nil || cfg.Node == nil {
		return nil, errors.New("core: a store and a raft node are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Core{cfg: cfg, st: cfg.Store, node: cfg.Node, log: cfg.Logger, caughtUp: make(chan struct{}), gate: make(chan struct{}), gateReplaced: make(chan struct{}), leadership: cfg.Node}
	c.admit = append(append(builtinAdmission(cfg.Store.Objects, cfg.Network.WithDefaults()), admission.New(cfg.AdmissionConfig, admission.Deps{Namespace: c.namespace})...), cfg.Admission...)
	return c, nil
}

// fsm adapts the store to raftstore's FSM interface, whose Snapshot
// returns raftstore's own snapshot interface type (the store does not
// import raftstore).
type fsm struct{ *store.Store }

func (f fsm) Snapshot() (raftstore.FSMSnapshot, error) {
	snap, err := f.Store.Snapshot()
	if err != nil {
		return nil, err
	}
	return snap, nil
}

// FSM is st as raft's state machine, for raftstore.Open.
func FSM(st *store.Store) raftstore.FSM { return fsm{st} }

// Get returns the stored object and its JSON. Both are the store's own:
// read them, never change them.
func (c *Core) Get(r *api.Resource, ns, name string) (api.Object, []byte, error) {
	return c.st.Get(r, ns, name)
}

// GetObject returns the stored object, as Get does, without its JSON
// (which the store may have to encode again: store.Store.Get).
func (c *Core) GetObject(r *api.Resource, ns, name string) (api.Object, error) {
	return c.st.GetObject(r, ns, name)
}

// ListItems returns the stored objects of r in ns ("" for all) that opts
// select, and the store's index they were read at, shared as Get's are,
// with their JSON left to the reader (see store.Items), for replies
// written piece by piece.
func (c *Core) ListItems(r *api.Resource, ns string, opts store.ListOptions) (store.Items, uint64, error) {
	return c.st.ListItems(r, ns, opts)
}

// ListObjects returns what ListItems does without the JSON (see
// GetObject).
func (c *Core) ListObjects(r *api.Resource, ns string, opts store.ListOptions) ([]api.Object, uint64, error) {
	return c.st.ListObjects(r, ns, opts)
}

// Watch streams the changes to r in ns after fromRV (see store.Watch);
// the events' objects are shared as Get's are.
func (c *Core) Watch(ctx context.Context, r *api.Resource, ns string, opts store.ListOptions, fromRV uint64, sendInitial bool) (<-chan api.WatchEvent, error) {
	return c.st.Watch(ctx, r, ns, opts, fromRV, sendInitial)
}

// GetToken returns the stored token id, or nil when there is none
// (auth.TokenLookup).
func (c *Core) GetToken(id string) (*api.Token, error) {
	obj, err := c.st.GetObject(tokensResource, "", id)
	if err != nil {
		if api.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	tok, _ := obj.(*api.Token)
	return tok, nil
}

// PodNodeName returns the node pod ns/name is bound to (auth.PodLookup).
func (c *Core) PodNodeName(ns, name string) (string, bool) {
	obj, err := c.st.GetObject(podsResource, ns, name)
	if err != nil {
		return "", false
	}
	p, ok := obj.(*api.Pod)
	if !ok {
		return "", false
	}
	return p.Spec.NodeName, true
}

// namespace returns the stored namespace name, for admission steps that
// read its annotations (PodNodeSelector).
func (c *Core) namespace(name string) (*api.Namespace, error) {
	obj, err := c.st.GetObject(namespacesResource, "", name)
	if err != nil {
		return nil, err
	}
	ns, ok := obj.(*api.Namespace)
	if !ok {
		return nil, fmt.Errorf("namespace %s is stored as %T", name, obj)
	}
	return ns, nil
}

package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// Errors of the package. Failures a client caused (not found, conflicts)
// are *api.StatusError instead, so that the server replies with them as
// they are.
var (
	// ErrUnknownCommand is a command type this server does not know and may
	// not skip: it was written by a newer server. A Result carrying it is
	// fatal (Result.Fatal); the server must stop rather than diverge.
	ErrUnknownCommand = errors.New("unknown raft command type")
	// ErrUnknownResource is a resource outside api.Resources. In a command or
	// a snapshot it means a newer server wrote it, and is fatal too.
	ErrUnknownResource = errors.New("unknown resource")
	// ErrUnknownSubresource is an update subresource other than "" or "status".
	ErrUnknownSubresource = errors.New("unknown subresource")
	// ErrMalformedCommand is a command whose bytes cannot be read.
	ErrMalformedCommand = errors.New("malformed command")
	// ErrBadSnapshot is a snapshot stream that cannot be read: wrong magic,
	// unsupported format version, truncation or a checksum mismatch.
	ErrBadSnapshot = errors.New("bad snapshot")
)

// Defaults for Options.
const (
	DefaultWatchWindow   = 5000
	DefaultWatcherBuffer = 1000
)

// Options configure a Store.
type Options struct {
	// Logger receives the store's logs; nil discards them.
	Logger *slog.Logger
	// WatchWindow is how many recent events are kept per resource for
	// watches that resume from a resourceVersion (DefaultWatchWindow if 0).
	// Each event holds a pointer to an object version, so the memory cost is
	// that of the versions it keeps alive.
	WatchWindow int
	// WatcherBuffer is how many events a watcher may have pending before it
	// is dropped with a 410 (DefaultWatcherBuffer if 0).
	WatcherBuffer int
	// Registerer receives the store's metrics; nil means none.
	Registerer prometheus.Registerer
}

// Result is what Apply returns for one command (a batch returns []*Result).
// Err is an *api.StatusError for failures a client caused; Object and Raw
// are the object as stored after the command (for a delete that removed
// it, its last state at the delete's resourceVersion).
type Result struct {
	Object api.Object
	Raw    []byte
	Err    error
}

// Fatal reports whether the command could not be applied because this
// server is too old for it; the server must stop rather than go on with a
// state that differs from its peers'.
func (r *Result) Fatal() bool {
	return r != nil && (errors.Is(r.Err, ErrUnknownCommand) || errors.Is(r.Err, ErrUnknownResource))
}

// FatalErr returns the error when Fatal reports true, else nil; raftstore
// stops the node on it.
func (r *Result) FatalErr() error {
	if r.Fatal() {
		return r.Err
	}
	return nil
}

// Item is one object of a List: the shared object and its JSON encoding.
type Item struct {
	Object api.Object
	Raw    []byte
}

// Objects returns every stored object of r and the index they were read
// at, for in-process clients (the leader's loops, their test fake). The
// objects are shared: read them, never change them.
func (s *Store) Objects(r *api.Resource) ([]api.Object, uint64, error) {
	return s.ListObjects(r, "", ListOptions{})
}

// ListObjects returns what List does without the JSON, which the store
// may have to encode again (see entry): for callers that read only the
// objects.
func (s *Store) ListObjects(r *api.Resource, namespace string, opts ListOptions) ([]api.Object, uint64, error) {
	entries, rv, err := s.selected(r, namespace, opts)
	if err != nil {
		return nil, 0, err
	}
	out := make([]api.Object, len(entries))
	for i, e := range entries {
		out[i] = e.obj
	}
	return out, rv, nil
}

// ListOptions filter a List or a Watch; nil selectors match everything.
type ListOptions struct {
	Label api.Selector
	Field api.FieldSelector
}

// entry is one stored object version. A write stores a new entry; an
// entry's object is never changed once stored, and the one thing that
// changes in an entry is that it lets go of its JSON.
//
// The JSON of a version is what its write encoded (for its Result and its
// watch event). The entry keeps it only while that write's event is in the
// resource's watch window, which holds those bytes anyway: GET, LIST and
// watches of recently written objects send them as they are, and a bind
// splices into them (bind.go). When the event leaves the window the entry
// drops them, and readers encode the object again (json): the encoding is
// deterministic, the same bytes on every server, so nothing tells the two
// apart but the time it takes. At 150,000 running pods the JSON was more
// than half of the store's heap (BenchmarkMemory150kPods).
type entry struct {
	obj api.Object
	// sum is the version's part of the state hash (statehash.go), kept so
	// that replacing or removing it needs no JSON.
	sum uint64
	// hot is the version's JSON while the entry keeps it; nil once
	// dropped. Readers load it without s.mu (Get after unlocking, Persist
	// while Apply goes on). A pointer to the slice rather than the slice
	// keeps the entry at 32 bytes: every server holds one per object
	// (issue 16 item 3), and only the recent few keep JSON.
	hot atomic.Pointer[[]byte]
}

// newEntry is a stored version of obj whose JSON is raw, keeping raw.
func newEntry(t *table, obj api.Object, raw []byte) *entry {
	e := &entry{obj: obj, sum: hashJSON(t, raw)}
	e.hot.Store(&raw)
	return e
}

// node is spec.nodeName of a pod, its key in the node index. It is not
// kept in the entry: the object has it.
func (e *entry) node() string { return podNode(e.obj) }

// kept returns the JSON the entry still keeps, or nil.
func (e *entry) kept() []byte {
	if p := e.hot.Load(); p != nil {
		return *p
	}
	return nil
}

// drop lets go of the entry's JSON.
func (e *entry) drop() { e.hot.Store(nil) }

// json returns the entry's JSON: the kept bytes, or the object encoded
// again, which gives the same bytes (the mutation detector checks it).
func (e *entry) json() ([]byte, error) {
	if raw := e.kept(); raw != nil {
		return raw, nil
	}
	return e.encodeAppend(nil)
}

// appendJSON appends the entry's JSON to b (see json).
func (e *entry) appendJSON(b []byte) ([]byte, error) {
	if raw := e.kept(); raw != nil {
		return append(b, raw...), nil
	}
	return e.encodeAppend(b)
}

// encodeAppend encodes the object onto b; onto nil, api.Marshal sizes the
// result itself (appending to nil would grow it step by step).
func (e *entry) encodeAppend(b []byte) ([]byte, error) {
	var out []byte
	var err error
	if b == nil {
		out, err = encode(e.obj)
	} else {
		out, err = api.MarshalAppend(b, e.obj)
	}
	if err != nil {
		m := e.obj.GetObjectMeta()
		return b, api.NewInternalError(fmt.Errorf("encode stored %s %s/%s: %w", e.obj.GetTypeMeta().Kind, m.Namespace, m.Name, err))
	}
	return out, nil
}

// table holds the objects of one resource.
type table struct {
	res *api.Resource
	// ns maps namespace to name to entry; cluster-scoped objects live under
	// "". Lookups need no key string built, and a namespace's objects are
	// one map away.
	ns map[string]map[string]*entry
	n  int
	// byNode indexes pods by spec.nodeName ("" holds unscheduled pods) so
	// that an agent's list and watch do not look at every pod.
	byNode map[string]map[*entry]struct{}

	win window

	wmu          sync.Mutex
	watchers     map[*watcher]struct{}
	nodeWatchers map[string]map[*watcher]struct{} // pods: watchers of one node

	objects prometheus.Gauge
}

func (t *table) get(ns, name string) *entry {
	return t.ns[ns][name]
}

// Store is the control plane's state machine. Apply and Restore must be
// called by one goroutine at a time (raft does); every other method is safe
// for concurrent use.
type Store struct {
	log           *slog.Logger
	watchWindow   int
	watcherBuffer int

	// applyMu serialises writers (Apply, Restore): they read the tables
	// without mu, which is safe only while no other writer runs.
	applyMu sync.Mutex
	// mu guards the tables, their windows, and applied together, so a
	// reader sees an entry's effects whole and labelled with its index.
	mu       sync.RWMutex
	tables   []*table // in api.Resources order
	byPlural map[string]*table
	byKind   map[string]*table // for an event's involved object (shareInvolved)
	nsTable  *table
	evTable  *table
	podTable *table
	applied  atomic.Uint64
	// failed holds the error of a fatal entry: the store applies nothing
	// after it.
	failed atomic.Pointer[error]

	waitMu sync.Mutex
	waitCh chan struct{} // closed when applied moves; nil if nobody waits

	handoff handoff

	// intern shares equal parts of stored objects (intern.go); only the
	// applier uses it.
	intern interner

	// sum is the state hash (statehash.go); only the applier changes it.
	sum    uint64
	hashes hashLog

	m *metrics
}

// New returns an empty store.
func New(opts Options) *Store {
	s := &Store{
		log:           opts.Logger,
		watchWindow:   opts.WatchWindow,
		watcherBuffer: opts.WatcherBuffer,
		byPlural:      make(map[string]*table, len(api.Resources)),
		byKind:        make(map[string]*table, len(api.Resources)),
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.watchWindow <= 0 {
		s.watchWindow = DefaultWatchWindow
	}
	if s.watcherBuffer <= 0 {
		s.watcherBuffer = DefaultWatcherBuffer
	}
	s.m = newMetrics(opts.Registerer, s.log)
	for _, r := range api.Resources {
		t := &table{
			res:      r,
			ns:       make(map[string]map[string]*entry),
			watchers: make(map[*watcher]struct{}),
			objects:  s.m.objectsGauge(r.Plural),
		}
		t.win.init(s.watchWindow, 0)
		if r.Kind == "Pod" {
			t.byNode = make(map[string]map[*entry]struct{})
			t.nodeWatchers = make(map[string]map[*watcher]struct{})
		}
		s.tables = append(s.tables, t)
		s.byPlural[r.Plural] = t
		if s.byKind[r.Kind] == nil {
			s.byKind[r.Kind] = t
		}
	}
	s.nsTable = s.byPlural["namespaces"]
	s.evTable = s.byPlural["events"]
	s.podTable = s.byPlural["pods"]
	return s
}

func (s *Store) table(r *api.Resource) (*table, error) {
	if r == nil {
		return nil, fmt.Errorf("nil resource: %w", ErrUnknownResource)
	}
	t := s.byPlural[r.Plural]
	if t == nil {
		return nil, fmt.Errorf("%s: %w", r.Plural, ErrUnknownResource)
	}
	return t, nil
}

// AppliedIndex is the index of the last raft entry applied: the
// resourceVersion of the state that reads see.
func (s *Store) AppliedIndex() uint64 { return s.applied.Load() }

// Failed returns the error of the entry this store could not apply, after
// which it applies nothing; nil while it works. The server must stop.
func (s *Store) Failed() error {
	if err := s.failed.Load(); err != nil {
		return *err
	}
	return nil
}

// WaitForIndex returns once the entry at idx has been applied, or with the
// context's error. The store sees only command entries: to wait for a raft
// read index, which may be a barrier or configuration entry, use
// raftstore's Node.WaitApplied.
func (s *Store) WaitForIndex(ctx context.Context, idx uint64) error {
	for {
		if s.applied.Load() >= idx {
			return nil
		}
		s.waitMu.Lock()
		if s.waitCh == nil {
			s.waitCh = make(chan struct{})
		}
		ch := s.waitCh
		s.waitMu.Unlock()
		// Checked again after taking the channel: an Apply between the first
		// check and here closed the previous channel, not this one.
		if s.applied.Load() >= idx {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("wait for index %d (applied %d): %w", idx, s.applied.Load(), ctx.Err())
		}
	}
}

func (s *Store) notifyApplied() {
	s.waitMu.Lock()
	if s.waitCh != nil {
		close(s.waitCh)
		s.waitCh = nil
	}
	s.waitMu.Unlock()
}

// Get returns the stored object namespace/name (namespace is ignored for
// cluster-scoped resources) and its JSON. The object is shared: do not
// change it. The JSON is encoded again if the entry no longer keeps it; a
// caller that needs only the object calls GetObject.
func (s *Store) Get(r *api.Resource, namespace, name string) (api.Object, []byte, error) {
	e, err := s.getEntry(r, namespace, name)
	if err != nil {
		return nil, nil, err
	}
	raw, err := e.json()
	if err != nil {
		return nil, nil, err
	}
	return e.obj, raw, nil
}

// GetObject returns the stored object namespace/name, as Get does, without
// its JSON.
func (s *Store) GetObject(r *api.Resource, namespace, name string) (api.Object, error) {
	e, err := s.getEntry(r, namespace, name)
	if err != nil {
		return nil, err
	}
	return e.obj, nil
}

func (s *Store) getEntry(r *api.Resource, namespace, name string) (*entry, error) {
	t, err := s.table(r)
	if err != nil {
		return nil, err
	}
	if !t.res.Namespaced {
		namespace = ""
	}
	s.mu.RLock()
	e := t.get(namespace, name)
	s.mu.RUnlock()
	if e == nil {
		return nil, api.NewNotFound(t.res, name)
	}
	return e, nil
}

// List returns the objects of r in namespace ("" for all) that match opts,
// sorted by namespace and name, and the resourceVersion they were read at.
// The objects are shared: do not change them. The JSON of entries that no
// longer keep it is encoded after the lock is let go; a reply of many
// objects reads ListItems instead, which holds no JSON.
func (s *Store) List(r *api.Resource, namespace string, opts ListOptions) ([]Item, uint64, error) {
	entries, rv, err := s.selected(r, namespace, opts)
	if err != nil {
		return nil, 0, err
	}
	items := make([]Item, len(entries))
	for i, e := range entries {
		raw, err := e.json()
		if err != nil {
			return nil, 0, err
		}
		items[i] = Item{Object: e.obj, Raw: raw}
	}
	return items, rv, nil
}

// Items is what ListItems returns: a List whose JSON is produced as it is
// read, so that a reply of many objects is written piece by piece rather
// than held whole (150,000 pods are 330 MB of JSON).
type Items struct{ entries []*entry }

// Len is the number of objects.
func (it Items) Len() int { return len(it.entries) }

// Object returns the i-th object, shared as List's are.
func (it Items) Object(i int) api.Object { return it.entries[i].obj }

// AppendJSON appends the i-th object's JSON to b: the bytes the entry
// keeps, or the object encoded into b, the same bytes (see entry).
func (it Items) AppendJSON(b []byte, i int) ([]byte, error) { return it.entries[i].appendJSON(b) }

// ListItems returns what List does, sorted the same way, with the JSON
// left to be appended by the reader (Items.AppendJSON).
func (s *Store) ListItems(r *api.Resource, namespace string, opts ListOptions) (Items, uint64, error) {
	entries, rv, err := s.selected(r, namespace, opts)
	return Items{entries}, rv, err
}

// selected returns the entries of r in namespace that match opts, sorted
// by namespace and name, and the index they were read at.
func (s *Store) selected(r *api.Resource, namespace string, opts ListOptions) ([]*entry, uint64, error) {
	t, err := s.table(r)
	if err != nil {
		return nil, 0, err
	}
	if !t.res.Namespaced {
		namespace = ""
	}
	f := newFilter(t, namespace, opts)
	s.mu.RLock()
	rv := s.applied.Load()
	entries := t.selected(&f)
	s.mu.RUnlock()
	sortEntries(entries)
	return entries, rv, nil
}

// selected returns t's entries that f matches, in no order. The caller
// holds s.mu.
func (t *table) selected(f *filter) []*entry {
	var out []*entry
	add := func(e *entry) {
		if f.matches(e.obj) {
			out = append(out, e)
		}
	}
	switch {
	case f.hasNode && t.byNode != nil:
		set := t.byNode[f.node]
		out = make([]*entry, 0, len(set))
		for e := range set {
			add(e)
		}
	case f.namespace != "":
		m := t.ns[f.namespace]
		out = make([]*entry, 0, len(m))
		for _, e := range m {
			add(e)
		}
	default:
		out = make([]*entry, 0, t.n)
		for _, m := range t.ns {
			for _, e := range m {
				add(e)
			}
		}
	}
	return out
}

// sortEntries sorts entries by namespace and name.
func sortEntries(entries []*entry) {
	slices.SortFunc(entries, func(a, b *entry) int {
		am, bm := a.obj.GetObjectMeta(), b.obj.GetObjectMeta()
		if c := cmp.Compare(am.Namespace, bm.Namespace); c != 0 {
			return c
		}
		return cmp.Compare(am.Name, bm.Name)
	})
}

// OldestEventTime is when the oldest stored Event was last seen, or the
// zero time if there are none. The leader compares it with its retention to
// decide when to issue ExpireEventsCmd. It looks at every Event.
func (s *Store) OldestEventTime() time.Time {
	var oldest time.Time
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, m := range s.evTable.ns {
		for _, e := range m {
			ev, ok := e.obj.(*api.Event)
			if !ok {
				continue
			}
			t := eventTime(ev).Time
			if oldest.IsZero() || t.Before(oldest) {
				oldest = t
			}
		}
	}
	return oldest
}

// Len is the number of stored objects of r.
func (s *Store) Len(r *api.Resource) int {
	t, err := s.table(r)
	if err != nil {
		return 0
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return t.n
}

// filter is a watcher's or a list's selection, prepared once.
type filter struct {
	namespace string // "" = every namespace
	label     api.Selector
	field     api.FieldSelector
	node      string // the spec.nodeName a field selector requires
	hasNode   bool
}

func newFilter(t *table, namespace string, opts ListOptions) filter {
	f := filter{namespace: namespace, label: opts.Label, field: opts.Field}
	if f.label != nil && f.label.Empty() {
		f.label = nil
	}
	if f.field != nil && f.field.Empty() {
		f.field = nil
	}
	if f.field == nil {
		return f
	}
	if t.byNode != nil {
		f.node, f.hasNode = exactField(f.field, "spec.nodeName")
	}
	if ns, ok := exactField(f.field, "metadata.namespace"); ok && t.res.Namespaced && f.namespace == "" {
		f.namespace = ns
	}
	return f
}

// matches reports whether obj is in the selection.
func (f *filter) matches(obj api.Object) bool {
	m := obj.GetObjectMeta()
	if f.namespace != "" && m.Namespace != f.namespace {
		return false
	}
	if f.hasNode {
		if p, ok := obj.(*api.Pod); ok && p.Spec.NodeName != f.node {
			return false
		}
	}
	if f.label != nil && !f.label.Matches(m.Labels) {
		return false
	}
	return f.field == nil || f.field.Matches(obj)
}

// Size is the number of stored objects of every resource: what a
// snapshot encodes (raftstore spaces snapshots by it).
func (s *Store) Size() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := 0
	for _, t := range s.tables {
		n += t.n
	}
	return n
}

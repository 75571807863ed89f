package store

import (
	"cmp"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/internal/plant"
)

// txn is the application of one raft entry. Commands read the tables
// without s.mu (Apply is the only writer) and take the write lock at their
// first change; it is held to the end of the entry, so that readers see an
// entry whole, with the applied index moved in the same critical section.
type txn struct {
	s      *Store
	index  uint64
	rv     string
	locked bool
	// touched lists namespaces that lost objects, to remove those that are
	// terminating and now empty once the entry's other changes are done.
	touched map[string]struct{}
}

func (tx *txn) lock() {
	if !tx.locked {
		tx.s.mu.Lock()
		tx.locked = true
	}
}

// Apply applies the raft entry at index: one command, or a batch. It
// returns *Result, or []*Result for a batch. It never panics on a bad
// command; an unknown command type without the ignorable bit gives a
// Result whose Fatal method reports true, and is logged as an error.
func (s *Store) Apply(index uint64, cmd []byte) any {
	start := time.Now()
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	if err := s.failed.Load(); err != nil {
		// The state stopped at a command this server could not apply; later
		// entries would build on a state its peers do not have.
		return &Result{Err: *err}
	}
	tx := &txn{s: s, index: index, rv: strconv.FormatUint(index, 10)}
	var res any
	if handed := s.handoff.take(cmd); handed != nil && cmd[0] == cmdCreate {
		res = tx.create(cmd[1:], handed)
	} else {
		res = s.apply(tx, cmd, false)
	}
	if len(tx.touched) > 0 {
		tx.finishNamespaces()
	}
	s.hashes.record(index, s.sum)
	if tx.locked {
		s.applied.Store(index)
		s.mu.Unlock()
		for _, t := range s.tables {
			if t.objects != nil {
				t.objects.Set(float64(t.n))
			}
		}
	} else {
		s.applied.Store(index)
	}
	s.notifyApplied()
	s.m.observeApply(time.Since(start))
	return res
}

func (s *Store) apply(tx *txn, cmd []byte, inBatch bool) any {
	if len(cmd) == 0 {
		return malformed(fmt.Errorf("%w: empty command", ErrMalformedCommand))
	}
	typ, body := cmd[0], cmd[1:]
	switch typ {
	case cmdCreate:
		return tx.create(body, nil)
	case cmdUpdate:
		return tx.update(body)
	case cmdDelete:
		return tx.delete(body, false)
	case cmdDeleteGrace:
		return tx.delete(body, true)
	case cmdExpireEvents:
		return tx.expireEvents(body)
	case cmdBind:
		return tx.bind(body)
	case cmdBatch:
		if inBatch {
			return malformed(fmt.Errorf("%w: nested batch", ErrMalformedCommand))
		}
		return tx.batch(body)
	}
	if typ&cmdIgnorable != 0 {
		s.log.Warn("skipping a raft command of an unknown type marked ignorable; a newer server wrote it",
			"type", fmt.Sprintf("0x%02x", typ), "index", tx.index)
		return &Result{}
	}
	return s.fatal(tx, fmt.Errorf("%w 0x%02x at index %d: a newer server wrote it; upgrade this server", ErrUnknownCommand, typ, tx.index))
}

// fatal stops the store: this entry and every later one fail with err.
func (s *Store) fatal(tx *txn, err error) *Result {
	s.log.Error("cannot apply raft entry; this server must stop and be upgraded", "index", tx.index, "err", err)
	s.failed.CompareAndSwap(nil, &err)
	return &Result{Err: err}
}

// malformed is the result of a command that cannot be read. Every server
// reads the same bytes and fails alike, so the state stays the same
// everywhere and the entry is not fatal.
func malformed(err error) *Result {
	return &Result{Err: api.NewInternalError(err)}
}

// decodeObject reads a command's object body into a new object of t's kind.
func decodeObject(t *table, body []byte) (api.Object, error) {
	obj := t.res.New()
	if err := unmarshal(body, obj); err != nil {
		return nil, fmt.Errorf("%w: %s body: %w", ErrMalformedCommand, t.res.Kind, err)
	}
	tm := obj.GetTypeMeta()
	tm.APIVersion = t.res.APIVersion()
	tm.Kind = t.res.Kind
	return obj, nil
}

// objectKey checks and returns the namespace and name of a command's
// object; cluster-scoped objects lose any namespace they carry.
func objectKey(t *table, obj api.Object) (string, string, *api.StatusError) {
	m := obj.GetObjectMeta()
	if !t.res.Namespaced {
		m.Namespace = ""
	}
	if m.Name == "" {
		return "", "", api.NewBadRequest(fmt.Sprintf("%s: metadata.name: Required value", t.res.Kind))
	}
	if t.res.Namespaced && m.Namespace == "" {
		return "", "", api.NewBadRequest(fmt.Sprintf("%s %q: metadata.namespace: Required value", t.res.Kind, m.Name))
	}
	return m.Namespace, m.Name, nil
}

// create applies a create command. handed is the object Store.CreateCmd
// encoded into body on this server, canonical, so equal to what decoding
// body gives; nil means decode.
func (tx *txn) create(body []byte, handed api.Object) *Result {
	rd := reader{b: body}
	plural := rd.string("resource")
	if rd.err != nil {
		return malformed(rd.err)
	}
	t := tx.s.byPlural[plural]
	if t == nil {
		return tx.s.fatal(tx, fmt.Errorf("create %q: %w; a newer server wrote it", plural, ErrUnknownResource))
	}
	payload := rd.b
	obj := handed
	decoded := obj == nil || api.ResourceOf(obj) != t.res
	if decoded {
		obj = t.res.New()
		if err := unmarshal(payload, obj); err != nil {
			return malformed(fmt.Errorf("%w: %s body: %w", ErrMalformedCommand, t.res.Kind, err))
		}
	}
	prepared := prepareCreate(t.res, obj)
	ns, name, se := objectKey(t, obj)
	if se != nil {
		return &Result{Err: se}
	}
	if t.res.Namespaced {
		nse := tx.s.nsTable.get("", ns)
		if nse == nil {
			return &Result{Err: api.NewNotFound(tx.s.nsTable.res, ns)}
		}
		if nse.obj.GetObjectMeta().DeletionTimestamp != nil {
			return &Result{Err: api.NewForbidden(fmt.Sprintf(
				"%s %q is forbidden: unable to create new content in namespace %s because it is being terminated", t.res.Plural, name, ns))}
		}
	}
	if t.get(ns, name) != nil {
		return &Result{Err: api.NewAlreadyExists(t.res, name)}
	}
	m := obj.GetObjectMeta()
	// CreateCmd wrote the body as the store keeps the object, but for the
	// resourceVersion: put the index in, instead of encoding it again.
	var raw []byte
	var patched bool
	if prepared && m.ResourceVersion == rvPlaceholder {
		raw, patched = patchRV(payload, rvPlaceholder, tx.rv)
	}
	m.ResourceVersion = tx.rv
	var err error
	if !patched {
		raw, err = encode(obj)
	}
	if err != nil {
		return &Result{Err: api.NewInternalError(fmt.Errorf("encode %s %q: %w", t.res.Kind, name, err))}
	}
	if plant.On(plant.LostWrite) && tx.index%16 == 0 {
		return &Result{Object: obj, Raw: raw}
	}
	e := newEntry(t, obj, raw)
	tx.lock()
	tx.put(t, e, nil, decoded)
	return &Result{Object: obj, Raw: raw}
}

func (tx *txn) update(body []byte) *Result {
	rd := reader{b: body}
	sub := rd.byte("subresource")
	plural := rd.string("resource")
	if rd.err != nil {
		return malformed(rd.err)
	}
	t := tx.s.byPlural[plural]
	if t == nil {
		return tx.s.fatal(tx, fmt.Errorf("update %q: %w; a newer server wrote it", plural, ErrUnknownResource))
	}
	if sub > 1 {
		return malformed(fmt.Errorf("%w: update of %s: subresource %d", ErrMalformedCommand, plural, sub))
	}
	obj, err := decodeObject(t, rd.b)
	if err != nil {
		return malformed(err)
	}
	ns, name, se := objectKey(t, obj)
	if se != nil {
		return &Result{Err: se}
	}
	stored := t.get(ns, name)
	if stored == nil {
		return &Result{Err: api.NewNotFound(t.res, name)}
	}
	sm := stored.obj.GetObjectMeta()
	if pre := obj.GetObjectMeta().ResourceVersion; pre != "" && pre != sm.ResourceVersion && !plant.On(plant.IgnorePrecondition) {
		return &Result{Err: api.NewConflict(t.res, name, "the object has been modified; please apply your changes to the latest version and try again")}
	}

	var next api.Object
	if sub == 1 {
		if !t.res.HasStatus {
			return &Result{Err: api.NewBadRequest(fmt.Sprintf("%s have no status subresource", t.res.Plural))}
		}
		next = shallowCopy(stored.obj)
		copyStatus(next, obj)
	} else {
		next = obj
		m := next.GetObjectMeta()
		m.UID = sm.UID
		m.CreationTimestamp = sm.CreationTimestamp
		m.DeletionTimestamp = sm.DeletionTimestamp
		m.DeletionGracePeriodSeconds = sm.DeletionGracePeriodSeconds
		m.Generation = sm.Generation
		if t.res.HasStatus {
			copyStatus(next, stored.obj)
		}
		if !specEqual(next, stored.obj) {
			m.Generation++
		}
	}
	nm := next.GetObjectMeta()
	// An update that changes nothing keeps the stored version, as in
	// Kubernetes: no new resourceVersion, no event.
	nm.ResourceVersion = sm.ResourceVersion
	if reflect.DeepEqual(next, stored.obj) {
		return storedResult(stored)
	}
	nm.ResourceVersion = tx.rv

	raw, err := encode(next)
	if err != nil {
		return &Result{Err: api.NewInternalError(fmt.Errorf("encode %s %q: %w", t.res.Kind, name, err))}
	}
	e := newEntry(t, next, raw)
	tx.lock()
	// The last finalizer removed from an object being deleted lets it go,
	// unless it is a pod its node has yet to stop (a grace period left).
	if nm.DeletionTimestamp != nil && !hasFinalizers(next) && (t != tx.s.nsTable || tx.s.namespaceEmpty(name)) &&
		(nm.DeletionGracePeriodSeconds == nil || *nm.DeletionGracePeriodSeconds == 0) {
		tx.remove(t, stored, next, raw)
		return &Result{Object: next, Raw: raw}
	}
	// next's own parts were decoded from the command; the rest are
	// stored's.
	tx.put(t, e, stored, true)
	return &Result{Object: next, Raw: raw}
}

func (tx *txn) delete(body []byte, withGrace bool) *Result {
	rd := reader{b: body}
	plural := rd.string("resource")
	ns := rd.string("namespace")
	name := rd.string("name")
	preRV := rd.string("preconditions.resourceVersion")
	preUID := rd.string("preconditions.uid")
	nano := rd.varint("time")
	grace := GraceDefault
	if withGrace {
		grace = rd.varint("grace")
	}
	if rd.err != nil {
		return malformed(rd.err)
	}
	t := tx.s.byPlural[plural]
	if t == nil {
		return tx.s.fatal(tx, fmt.Errorf("delete %q: %w; a newer server wrote it", plural, ErrUnknownResource))
	}
	if !t.res.Namespaced {
		ns = ""
	}
	stored := t.get(ns, name)
	if stored == nil {
		return &Result{Err: api.NewNotFound(t.res, name)}
	}
	sm := stored.obj.GetObjectMeta()
	if preUID != "" && preUID != sm.UID {
		return &Result{Err: api.NewConflict(t.res, name, fmt.Sprintf(
			"Precondition failed: UID in precondition: %s, UID in object meta: %s", preUID, sm.UID))}
	}
	if preRV != "" && preRV != sm.ResourceVersion {
		return &Result{Err: api.NewConflict(t.res, name, fmt.Sprintf(
			"Precondition failed: ResourceVersion in precondition: %s, ResourceVersion in object meta: %s", preRV, sm.ResourceVersion))}
	}
	now := api.NewTime(time.Unix(0, nano))
	if t == tx.s.nsTable {
		return tx.deleteNamespace(stored, now)
	}
	if p, ok := stored.obj.(*api.Pod); ok && withGrace {
		if g := podGrace(p, grace); g > 0 {
			return tx.terminatePod(t, stored, p, now, g)
		}
		return tx.forceDeletePod(t, stored, p, now)
	}
	return tx.deleteObject(t, stored, now)
}

// podGrace is the grace period a delete asking for grace gives p: none
// for a pod no node runs (unbound, or finished), as in Kubernetes.
func podGrace(p *api.Pod, grace int64) int64 {
	if p.Spec.NodeName == "" || api.IsPodPhaseTerminal(p.Status.Phase) {
		return 0
	}
	if grace >= 0 {
		return grace
	}
	if g := p.Spec.TerminationGracePeriodSeconds; g != nil && *g >= 0 {
		return *g
	}
	return api.DefaultTerminationGracePeriodSeconds
}

// terminatePod marks a pod terminating: its node's agent stops it within
// grace seconds and then deletes it with grace 0. A second delete may
// only shorten the time left, as in Kubernetes.
func (tx *txn) terminatePod(t *table, e *entry, p *api.Pod, now *api.Time, grace int64) *Result {
	deadline := api.NewTime(now.Add(time.Duration(grace) * time.Second))
	if p.DeletionTimestamp != nil && !deadline.Before(p.DeletionTimestamp.Time) {
		return storedResult(e)
	}
	return tx.markDeleting(t, e, p, deadline, grace)
}

// forceDeletePod removes a pod at once; finalizers still hold it, marked
// with a grace period of 0 so that their removal lets it go.
func (tx *txn) forceDeletePod(t *table, e *entry, p *api.Pod, now *api.Time) *Result {
	if !hasFinalizers(p) || p.DeletionTimestamp == nil {
		return tx.deleteObject(t, e, now)
	}
	if g := p.DeletionGracePeriodSeconds; g != nil && *g == 0 {
		return storedResult(e)
	}
	return tx.markDeleting(t, e, p, p.DeletionTimestamp, 0)
}

// markDeleting stores p with these deletion fields.
func (tx *txn) markDeleting(t *table, e *entry, p *api.Pod, at *api.Time, grace int64) *Result {
	next := *p
	next.DeletionTimestamp = at
	next.DeletionGracePeriodSeconds = &grace
	next.ResourceVersion = tx.rv
	raw, err := encode(&next)
	if err != nil {
		return &Result{Err: api.NewInternalError(fmt.Errorf("encode pod %q: %w", p.Name, err))}
	}
	tx.lock()
	tx.put(t, newEntry(t, &next, raw), e, false)
	return &Result{Object: &next, Raw: raw}
}

// deleteObject removes e, or marks it deleted if finalizers hold it.
func (tx *txn) deleteObject(t *table, e *entry, now *api.Time) *Result {
	if hasFinalizers(e.obj) {
		if e.obj.GetObjectMeta().DeletionTimestamp != nil {
			return storedResult(e)
		}
		next := shallowCopy(e.obj)
		m := next.GetObjectMeta()
		m.DeletionTimestamp = now
		m.ResourceVersion = tx.rv
		raw, err := encode(next)
		if err != nil {
			return &Result{Err: api.NewInternalError(fmt.Errorf("encode %s %q: %w", t.res.Kind, m.Name, err))}
		}
		tx.lock()
		tx.put(t, newEntry(t, next, raw), e, false)
		return &Result{Object: next, Raw: raw}
	}
	final, raw, err := withRV(e.obj, e.kept(), tx.index)
	if err != nil {
		return &Result{Err: api.NewInternalError(fmt.Errorf("encode %s %q: %w", t.res.Kind, e.obj.GetObjectMeta().Name, err))}
	}
	tx.lock()
	tx.remove(t, e, final, raw)
	return &Result{Object: final, Raw: raw}
}

// deleteNamespace marks the namespace Terminating, deletes everything in
// it (marking what finalizers hold), and removes it if nothing is left.
func (tx *txn) deleteNamespace(e *entry, now *api.Time) *Result {
	if e.obj.GetObjectMeta().DeletionTimestamp != nil {
		return storedResult(e)
	}
	name := e.obj.GetObjectMeta().Name
	tx.lock()
	for _, t := range tx.s.tables {
		if !t.res.Namespaced {
			continue
		}
		m := t.ns[name]
		if len(m) == 0 {
			continue
		}
		// Sorted, so that every server emits the same events in the same
		// order.
		for _, n := range slices.Sorted(maps.Keys(m)) {
			var r *Result
			if p, ok := m[n].obj.(*api.Pod); ok && podGrace(p, GraceDefault) > 0 {
				// Its node stops it first; the namespace waits.
				r = tx.terminatePod(t, m[n], p, now, podGrace(p, GraceDefault))
			} else {
				r = tx.deleteObject(t, m[n], now)
			}
			if r.Err != nil {
				tx.s.log.Error("namespace delete: object not deleted", "namespace", name, "resource", t.res.Plural, "name", n, "err", r.Err)
			}
		}
	}
	next := shallowCopy(e.obj).(*api.Namespace)
	next.DeletionTimestamp = now
	next.Status.Phase = api.NamespaceTerminating
	next.ResourceVersion = tx.rv
	raw, err := encode(next)
	if err != nil {
		return &Result{Err: api.NewInternalError(fmt.Errorf("encode namespace %q: %w", name, err))}
	}
	if !hasFinalizers(next) && tx.s.namespaceEmpty(name) {
		tx.remove(tx.s.nsTable, e, next, raw)
	} else {
		tx.put(tx.s.nsTable, newEntry(tx.s.nsTable, next, raw), e, false)
	}
	return &Result{Object: next, Raw: raw}
}

func (tx *txn) expireEvents(body []byte) *Result {
	rd := reader{b: body}
	nano := rd.varint("time")
	if rd.err != nil {
		return malformed(rd.err)
	}
	before := time.Unix(0, nano)
	t := tx.s.evTable
	var victims []*entry
	for _, m := range t.ns {
		for _, e := range m {
			if ev, ok := e.obj.(*api.Event); ok && eventTime(ev).Before(before) {
				victims = append(victims, e)
			}
		}
	}
	if len(victims) == 0 {
		return &Result{}
	}
	slices.SortFunc(victims, func(a, b *entry) int {
		am, bm := a.obj.GetObjectMeta(), b.obj.GetObjectMeta()
		if c := cmp.Compare(am.Namespace, bm.Namespace); c != 0 {
			return c
		}
		return cmp.Compare(am.Name, bm.Name)
	})
	tx.lock()
	for _, e := range victims {
		final, raw, err := withRV(e.obj, e.kept(), tx.index)
		if err != nil {
			tx.s.log.Error("event not expired", "namespace", e.obj.GetObjectMeta().Namespace, "name", e.obj.GetObjectMeta().Name, "err", err)
			continue
		}
		tx.remove(t, e, final, raw)
	}
	return &Result{}
}

func (tx *txn) batch(body []byte) any {
	rd := reader{b: body}
	n := rd.uvarint("count")
	if rd.err == nil && n > uint64(len(rd.b)) {
		rd.fail("count")
	}
	if rd.err != nil {
		return malformed(rd.err)
	}
	cmds := make([][]byte, n)
	for i := range cmds {
		cmds[i] = rd.bytes("command")
	}
	if rd.err != nil {
		return malformed(rd.err)
	}
	// An entry that this server cannot apply whole is refused whole: a
	// fatal command found half way would leave the state half changed.
	for _, c := range cmds {
		if err := tx.s.checkKnown(c); err != nil {
			return tx.s.fatal(tx, err)
		}
	}
	tx.lock()
	results := make([]*Result, len(cmds))
	for i, c := range cmds {
		switch r := tx.s.apply(tx, c, true).(type) {
		case *Result:
			results[i] = r
		default:
			results[i] = malformed(fmt.Errorf("%w: command %d of a batch", ErrMalformedCommand, i))
		}
	}
	return results
}

// checkKnown returns a fatal error if this server does not know cmd's type
// (and may not skip it) or its resource.
func (s *Store) checkKnown(cmd []byte) error {
	if len(cmd) == 0 {
		return nil
	}
	typ := cmd[0]
	rd := reader{b: cmd[1:]}
	switch typ {
	case cmdUpdate:
		rd.byte("subresource")
		fallthrough
	case cmdCreate, cmdDelete, cmdDeleteGrace:
		plural := rd.string("resource")
		if rd.err == nil && s.byPlural[plural] == nil {
			return fmt.Errorf("%q in a batch: %w; a newer server wrote it", plural, ErrUnknownResource)
		}
		return nil
	case cmdExpireEvents, cmdBatch, cmdBind:
		return nil
	}
	if typ&cmdIgnorable != 0 {
		return nil
	}
	return fmt.Errorf("%w 0x%02x in a batch: a newer server wrote it; upgrade this server", ErrUnknownCommand, typ)
}

// put stores e in place of prev (nil for a new object) and emits the event.
// decoded says that what e's object does not share with prev's was decoded
// for it (interner.object).
func (tx *txn) put(t *table, e *entry, prev *entry, decoded bool) {
	var prevObj api.Object
	if prev != nil {
		prevObj = prev.obj
	}
	if ev, ok := e.obj.(*api.Event); ok {
		tx.s.shareInvolved(ev, (*table).get)
	}
	tx.s.intern.object(e.obj, prevObj, decoded)
	m := e.obj.GetObjectMeta()
	names := t.ns[m.Namespace]
	if names == nil {
		names = make(map[string]*entry)
		t.ns[m.Namespace] = names
	}
	names[m.Name] = e
	typ := Modified
	tx.s.sum += e.sum
	if detectMutations() && prev != nil {
		checkUnchanged(t, prev)
	}
	if prev == nil {
		t.n++
		typ = Added
	} else {
		tx.s.sum -= prev.sum
	}
	if t.byNode != nil {
		if prev != nil {
			t.unindexNode(prev)
		}
		t.indexNode(e)
	}
	tx.s.emit(t, event{typ: typ, obj: e.obj, raw: e.kept(), prev: prevObj, rv: tx.index, e: e})
}

// remove drops stored and emits a DELETED event with final and its JSON,
// its last state at this entry's resourceVersion.
func (tx *txn) remove(t *table, stored *entry, final api.Object, raw []byte) {
	m := stored.obj.GetObjectMeta()
	names := t.ns[m.Namespace]
	delete(names, m.Name)
	if len(names) == 0 {
		delete(t.ns, m.Namespace)
	}
	t.n--
	tx.s.sum -= stored.sum
	if detectMutations() {
		checkUnchanged(t, stored)
	}
	if t.byNode != nil {
		t.unindexNode(stored)
	}
	tx.s.emit(t, event{typ: Deleted, obj: final, raw: raw, prev: stored.obj, rv: tx.index})
	if t.res.Namespaced {
		if tx.touched == nil {
			tx.touched = make(map[string]struct{})
		}
		tx.touched[m.Namespace] = struct{}{}
	}
}

// storedResult is the result of a command that left e as it was.
func storedResult(e *entry) *Result {
	raw, err := e.json()
	if err != nil {
		return &Result{Err: err}
	}
	return &Result{Object: e.obj, Raw: raw}
}

// finishNamespaces removes the terminating namespaces that this entry
// emptied.
func (tx *txn) finishNamespaces() {
	for _, name := range slices.Sorted(maps.Keys(tx.touched)) {
		e := tx.s.nsTable.get("", name)
		if e == nil || e.obj.GetObjectMeta().DeletionTimestamp == nil || hasFinalizers(e.obj) || !tx.s.namespaceEmpty(name) {
			continue
		}
		final, raw, err := withRV(e.obj, e.kept(), tx.index)
		if err != nil {
			tx.s.log.Error("terminating namespace not removed", "namespace", name, "err", err)
			continue
		}
		tx.lock()
		tx.remove(tx.s.nsTable, e, final, raw)
	}
}

// namespaceEmpty reports whether no namespaced object lives in ns.
func (s *Store) namespaceEmpty(ns string) bool {
	for _, t := range s.tables {
		if t.res.Namespaced && len(t.ns[ns]) > 0 {
			return false
		}
	}
	return true
}

func (t *table) indexNode(e *entry) {
	node := e.node()
	set := t.byNode[node]
	if set == nil {
		set = make(map[*entry]struct{})
		t.byNode[node] = set
	}
	set[e] = struct{}{}
}

func (t *table) unindexNode(e *entry) {
	node := e.node()
	set := t.byNode[node]
	delete(set, e)
	if len(set) == 0 {
		delete(t.byNode, node)
	}
}

package controllers

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/controller"
	"github.com/outpost-edge/outpost/controlplane/events"
)

// burstReplicas bounds the pods one reconcile creates or deletes, as
// kube-controller-manager's --replicaset burst does.
const burstReplicas = 500

// maxConcurrentWrites bounds the writes one reconcile has in flight.
const maxConcurrentWrites = 64

// Pod helpers.

// podFinished reports whether a pod ended (Succeeded or Failed, such as
// evicted): its controller replaces it.
func podFinished(p *api.Pod) bool {
	return api.IsPodPhaseTerminal(p.Status.Phase)
}

// podActive reports whether a pod counts toward its controller's
// replicas: not finished, not being deleted.
func podActive(p *api.Pod) bool { return !podFinished(p) && p.DeletionTimestamp == nil }

func readyCondition(p *api.Pod) *api.PodCondition { return api.PodConditionOf(p, api.PodReady) }

// podReady reports whether the pod's Ready condition is True.
func podReady(p *api.Pod) bool { return api.PodIsReady(p) }

// podAvailable reports whether a pod has been ready for minReady seconds
// at now; if it is ready but not yet available, wait is how long until it
// is.
func podAvailable(p *api.Pod, minReady int32, now time.Time) (ok bool, wait time.Duration) {
	c := readyCondition(p)
	if c == nil || c.Status != api.ConditionTrue {
		return false, 0
	}
	if minReady <= 0 {
		return true, 0
	}
	if c.LastTransitionTime == nil || c.LastTransitionTime.IsZero() {
		return false, 0
	}
	at := c.LastTransitionTime.Add(time.Duration(minReady) * time.Second)
	if at.Before(now) {
		return true, 0
	}
	return false, at.Sub(now) + time.Second
}

// Owner references.

// newControllerRef is the ownerReference a controller puts on what it
// creates or adopts.
func newControllerRef(owner api.Object) api.OwnerReference {
	r := api.ResourceOf(owner)
	m := owner.GetObjectMeta()
	yes := true
	return api.OwnerReference{APIVersion: r.APIVersion(), Kind: r.Kind, Name: m.Name, UID: m.UID, Controller: &yes, BlockOwnerDeletion: &yes}
}

// isControlledBy reports whether obj's controller is the object with uid.
func isControlledBy(obj api.Object, uid string) bool {
	ref := api.ControllerRef(obj.GetObjectMeta())
	return ref != nil && ref.UID == uid
}

// revisionOf reads a revision annotation; 0 when absent or unreadable.
func revisionOf(m *api.ObjectMeta) int64 {
	v, err := strconv.ParseInt(m.Annotations[annRevision], 10, 64)
	if err != nil {
		return 0
	}
	return v
}

// byCreation orders objects oldest first, by name when created in the
// same second.
func byCreation(a, b *api.ObjectMeta) int {
	var ta, tb time.Time
	if a.CreationTimestamp != nil {
		ta = a.CreationTimestamp.Time
	}
	if b.CreationTimestamp != nil {
		tb = b.CreationTimestamp.Time
	}
	if c := ta.Compare(tb); c != 0 {
		return c
	}
	return cmp.Compare(a.Name, b.Name)
}

// templateHash is the stable name suffix of a pod template: FNV-1a of its
// JSON (map keys sorted, so equal templates hash alike), salted with a
// collision count, written in the consonants-and-digits alphabet that
// generated names use, so that it never spells a word.
func templateHash(t *api.PodTemplateSpec, collisions int) string {
	h := fnv.New32a()
	raw, _ := json.Marshal(t) // a template always encodes
	h.Write(raw)
	if collisions > 0 {
		h.Write(strconv.AppendInt(nil, int64(collisions), 10))
	}
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	v := h.Sum32()
	var b [8]byte
	i := len(b)
	for {
		i--
		b[i] = alphabet[v%uint32(len(alphabet))]
		v /= uint32(len(alphabet))
		if v == 0 {
			break
		}
	}
	return string(b[i:])
}

// templateJSON encodes a template once per reconcile; podFromTemplate
// decodes it per pod, so that every pod gets its own maps and slices and
// the cached owner is never shared with an object being written.
func templateJSON(t *api.PodTemplateSpec) ([]byte, error) {
	raw, err := json.Marshal(t)
	if err != nil {
		return nil, fmt.Errorf("encode pod template: %w", err)
	}
	return raw, nil
}

// maxGenerateNameLen leaves room for the five characters the server adds.
const maxGenerateNameLen = 253 - 5

// decodeTemplate decodes what templateJSON encoded: a private copy.
func decodeTemplate(raw []byte) (api.PodTemplateSpec, error) {
	var t api.PodTemplateSpec
	if err := json.Unmarshal(raw, &t); err != nil {
		return t, fmt.Errorf("decode pod template: %w", err)
	}
	return t, nil
}

// podFromTemplate builds a pod of owner from an encoded template.
func podFromTemplate(raw []byte, owner api.Object) (*api.Pod, error) {
	t, err := decodeTemplate(raw)
	if err != nil {
		return nil, err
	}
	om := owner.GetObjectMeta()
	prefix := om.Name + "-"
	if len(prefix) > maxGenerateNameLen {
		prefix = prefix[:maxGenerateNameLen]
	}
	return &api.Pod{
		ObjectMeta: api.ObjectMeta{
			Namespace:       om.Namespace,
			GenerateName:    prefix,
			Labels:          t.Labels,
			Annotations:     t.Annotations,
			Finalizers:      t.Finalizers,
			OwnerReferences: []api.OwnerReference{newControllerRef(owner)},
		},
		Spec: t.Spec,
	}, nil
}

// preconditionUID makes a delete apply only to the object with uid, not
// to another created since under the same name.
func preconditionUID(uid string) api.DeleteOptions {
	return api.DeleteOptions{Preconditions: api.Preconditions{UID: uid}}
}

// Batched writes.

// slowStart calls fn count times, in concurrent batches of 1, 2, 4, ...,
// and stops after the first batch in which a call failed: a template the
// server refuses costs one failed write, not hundreds. It returns the
// number of successful calls and the first error.
func slowStart(ctx context.Context, count int, fn func(context.Context) error) (int, error) {
	done := 0
	for batch := min(1, count); batch > 0; batch = min(2*batch, count-done) {
		errs := parallel(ctx, batch, func(ctx context.Context, _ int) error { return fn(ctx) })
		var first error
		for _, err := range errs {
			if err == nil {
				done++
			} else if first == nil {
				first = err
			}
		}
		if first != nil {
			return done, first
		}
	}
	return done, nil
}

// parallel calls fn(i) for i in [0, n), at most maxConcurrentWrites at
// once, and returns each call's error.
func parallel(ctx context.Context, n int, fn func(context.Context, int) error) []error {
	errs := make([]error, n)
	if n == 1 {
		errs[0] = fn(ctx, 0)
		return errs
	}
	sem := make(chan struct{}, maxConcurrentWrites)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = fn(ctx, i)
		})
	}
	wg.Wait()
	return errs
}

// nameList renders names for an event: all of a few, the first ten of
// many.
func nameList(names []string) string {
	const show = 10
	if len(names) <= show {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:show], ", ") + fmt.Sprintf(" and %d more", len(names)-show)
}

// countNoun renders "pod" or "N pods" for event messages.
func countNoun(n int, noun string) string {
	if n == 1 {
		return noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// Events.

// recorder writes Events. Events are raft writes, so controllers record
// one per batch, and an event repeated for the same object aggregates on
// the stored one (events.Correlator: count and lastTimestamp), written at
// most once per eventRepeat; flushEvents writes the repeats held back.
type recorder struct {
	corr *events.Correlator
	log  *slog.Logger
	now  func() time.Time

	mu  sync.Mutex
	seq uint64
}

// eventRepeat is how often repeats of one event are written: a warning a
// controller hits on every retry must not cost a raft write each time.
const eventRepeat = 30 * time.Second

func newRecorder(c controller.Client, log *slog.Logger, now func() time.Time) *recorder {
	corr := events.New(eventSink{c}, now)
	corr.MinInterval = eventRepeat
	return &recorder{corr: corr, log: log, now: now}
}

// flushEvents writes held repeats every period until ctx ends.
func (r *recorder) flushEvents(ctx context.Context, period time.Duration) {
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if err := r.corr.Flush(ctx); err != nil && ctx.Err() == nil {
				r.log.Warn("recording repeated events failed", "err", err)
			}
		}
	}
}

// eventSink is a controller.Client as the Correlator's Sink.
type eventSink struct{ c controller.Client }

func (s eventSink) Create(ctx context.Context, ev *api.Event) (*api.Event, error) {
	return events.AsEvent(s.c.Create(ctx, ev))
}

func (s eventSink) Update(ctx context.Context, ev *api.Event) (*api.Event, error) {
	return events.AsEvent(s.c.Update(ctx, ev))
}

// event records an event about obj from component.
func (r *recorder) event(ctx context.Context, obj api.Object, component, typ, reason, msg string) {
	m := obj.GetObjectMeta()
	res := api.ResourceOf(obj)
	r.record(ctx, api.ObjectReference{Kind: res.Kind, APIVersion: res.APIVersion(), Namespace: m.Namespace, Name: m.Name,
		UID: m.UID, ResourceVersion: m.ResourceVersion}, m.Name, component, typ, reason, msg)
}

// zoneEvent records an event about zone (TNT-8): zones are no stored
// objects, so the event names a Zone of outpost.io/v1 ("" for the nodes
// without a zone label, and for the cluster's master disruption).
func (r *recorder) zoneEvent(ctx context.Context, zone, component, typ, reason, msg string) {
	name := zone
	if name == "" {
		name = "(none)"
	}
	r.record(ctx, api.ObjectReference{Kind: "Zone", APIVersion: "outpost.io/v1", Name: name}, "zone", component, typ, reason, msg)
}

// record writes one event about ref; prefix starts the event's name.
func (r *recorder) record(ctx context.Context, ref api.ObjectReference, prefix, component, typ, reason, msg string) {
	now := r.now()
	r.mu.Lock()
	r.seq++
	seq := r.seq
	r.mu.Unlock()
	if len(prefix) > 200 {
		prefix = prefix[:200]
	}
	ts := api.NewTime(now)
	ns := ref.Namespace
	if ns == "" {
		ns = "default" // events of cluster objects (nodes), as Kubernetes keeps them
	}
	ev := &api.Event{
		ObjectMeta:     api.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s.%x", prefix, uint64(now.UnixNano())+seq)},
		InvolvedObject: ref,
		Reason:         reason,
		Message:        msg,
		Source:         api.EventSource{Component: component},
		FirstTimestamp: ts,
		LastTimestamp:  ts,
		Count:          1,
		Type:           typ,
	}
	if _, err := r.corr.Record(ctx, ev); err != nil && ctx.Err() == nil {
		r.log.Warn("recording event failed", "kind", ref.Kind, "namespace", ref.Namespace, "name", ref.Name, "reason", reason, "err", err)
	}
}

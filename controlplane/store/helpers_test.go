package store

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
)

var (
	rNamespaces = api.ResourceForPlural("namespaces")
	rNodes      = api.ResourceForPlural("nodes")
	rPods       = api.ResourceForPlural("pods")
	rEvents     = api.ResourceForPlural("events")
	rServices   = api.ResourceForPlural("services")
)

// t0 is the fixed time every test command carries: Apply must not read
// the clock.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// harness feeds commands to a store at increasing indexes, as raft would.
type harness struct {
	t   testing.TB
	s   *Store
	idx uint64
	log *syncBuffer
}

func newHarness(t testing.TB, opts Options) *harness {
	t.Helper()
	buf := &syncBuffer{}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(buf, nil))
	}
	return &harness{t: t, s: New(opts), log: buf}
}

// applyAny applies cmd at the next index.
func (h *harness) applyAny(cmd []byte) any {
	h.idx++
	return h.s.Apply(h.idx, cmd)
}

func (h *harness) apply(cmd []byte) *Result {
	h.t.Helper()
	r, ok := h.applyAny(cmd).(*Result)
	if !ok {
		h.t.Fatalf("Apply returned %T, want *Result", r)
	}
	return r
}

// ok applies cmd and fails the test if it did not succeed.
func (h *harness) ok(cmd []byte) *Result {
	h.t.Helper()
	r := h.apply(cmd)
	if r.Err != nil {
		h.t.Fatalf("apply at %d: %v", h.idx, r.Err)
	}
	return r
}

func (h *harness) create(obj api.Object) *Result {
	h.t.Helper()
	cmd, err := CreateCmd(obj)
	if err != nil {
		h.t.Fatal(err)
	}
	return h.apply(cmd)
}

func (h *harness) update(obj api.Object, sub Subresource) *Result {
	h.t.Helper()
	cmd, err := UpdateCmd(obj, sub)
	if err != nil {
		h.t.Fatal(err)
	}
	return h.apply(cmd)
}

func (h *harness) del(r *api.Resource, ns, name string, pre Preconditions) *Result {
	h.t.Helper()
	return h.apply(DeleteCmd(r, ns, name, pre, t0.Add(time.Hour)))
}

func (h *harness) mustCreate(obj api.Object) *Result {
	h.t.Helper()
	r := h.create(obj)
	if r.Err != nil {
		h.t.Fatalf("create %s: %v", obj.GetObjectMeta().Name, r.Err)
	}
	return r
}

func (h *harness) get(r *api.Resource, ns, name string) api.Object {
	h.t.Helper()
	obj, _, err := h.s.Get(r, ns, name)
	if err != nil {
		h.t.Fatalf("get %s %s/%s: %v", r.Plural, ns, name, err)
	}
	return obj
}

func (h *harness) absent(r *api.Resource, ns, name string) {
	h.t.Helper()
	if _, _, err := h.s.Get(r, ns, name); !api.IsNotFound(err) {
		h.t.Fatalf("get %s %s/%s: err %v, want NotFound", r.Plural, ns, name, err)
	}
}

func meta(name, ns string, labels map[string]string) api.ObjectMeta {
	return api.ObjectMeta{
		Name: name, Namespace: ns, UID: "uid-" + ns + "-" + name,
		CreationTimestamp: api.NewTime(t0), Labels: labels,
	}
}

func newNamespace(name string, finalizers ...string) *api.Namespace {
	ns := &api.Namespace{ObjectMeta: meta(name, "", nil)}
	ns.Finalizers = finalizers
	return ns
}

func newNode(name string) *api.Node {
	return &api.Node{ObjectMeta: meta(name, "", map[string]string{"kubernetes.io/hostname": name})}
}

func newPod(ns, name, node string, labels map[string]string) *api.Pod {
	return &api.Pod{
		ObjectMeta: meta(name, ns, labels),
		Spec: api.PodSpec{
			NodeName:      node,
			SchedulerName: api.DefaultSchedulerName,
			RestartPolicy: api.RestartPolicyAlways,
			Containers:    []api.Container{{Name: "app", Image: "registry.example/app:1.0"}},
		},
		Status: api.PodStatus{Phase: api.PodPending},
	}
}

// bigPod is a pod of about 1 KiB in JSON, the size of a typical manifest
// with defaults filled in.
func bigPod(ns, name, node string) *api.Pod {
	p := newPod(ns, name, node, map[string]string{"app": "web", "tier": "frontend", "pod-template-hash": "5d8f7c9b4"})
	p.Annotations = map[string]string{"outpost.io/created-by": "replicaset/web-5d8f7c9b4"}
	grace := int64(30)
	p.Spec.TerminationGracePeriodSeconds = &grace
	p.Spec.Containers = []api.Container{{
		Name: "web", Image: "registry.example/team/web-frontend:v1.24.3",
		Args:            []string{"--port=8080", "--log-level=info", "--metrics"},
		Ports:           []api.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: "TCP"}},
		Env:             []api.EnvVar{{Name: "MODE", Value: "production"}, {Name: "REGION", Value: "eu-west"}},
		ImagePullPolicy: api.PullIfNotPresent,
		Resources: api.ResourceRequirements{
			Requests: api.ResourceList{"cpu": api.MustParseQuantity("100m"), "memory": api.MustParseQuantity("128Mi")},
			Limits:   api.ResourceList{"cpu": api.MustParseQuantity("500m"), "memory": api.MustParseQuantity("256Mi")},
		},
		VolumeMounts: []api.VolumeMount{{Name: "data", MountPath: "/var/lib/web"}},
	}}
	p.Spec.Volumes = []api.Volume{{Name: "data", EmptyDir: &api.EmptyDirVolumeSource{}}}
	sec := int64(300)
	p.Spec.Tolerations = []api.Toleration{
		{Key: "node.kubernetes.io/not-ready", Operator: "Exists", Effect: "NoExecute", TolerationSeconds: &sec},
		{Key: "node.kubernetes.io/unreachable", Operator: "Exists", Effect: "NoExecute", TolerationSeconds: &sec},
	}
	p.Status.QOSClass = "Burstable"
	return p
}

func newEvent(ns, name string, last time.Time) *api.Event {
	return &api.Event{
		ObjectMeta:     meta(name, ns, nil),
		InvolvedObject: api.ObjectReference{Kind: "Pod", Namespace: ns, Name: "p"},
		Reason:         "Scheduled", Message: "assigned",
		LastTimestamp: api.NewTime(last), Count: 1, Type: api.EventTypeNormal,
	}
}

// labelEq selects objects whose labels include every pair of set.
func labelEq(set map[string]string) api.Selector { return api.SelectorFromSet(set) }

// fieldSel parses a field selector on pods.
func fieldSel(t testing.TB, s string) api.FieldSelector {
	t.Helper()
	f, err := api.ParseFieldSelector(rPods, s)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// syncBuffer collects log output from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// next receives one event or fails after a deadline.
func next(t testing.TB, ch <-chan WatchEvent) WatchEvent {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("watch channel closed")
		}
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("no watch event within 5s")
	}
	return WatchEvent{}
}

// none asserts that no event is pending. Events are queued by Apply before
// it returns, so after a round trip through a later event nothing can be
// in flight; callers use a marker event for that.
func expectEvents(t testing.TB, ch <-chan WatchEvent, want ...string) []WatchEvent {
	t.Helper()
	var got []WatchEvent
	for range want {
		got = append(got, next(t, ch))
	}
	var desc []string
	for _, ev := range got {
		desc = append(desc, describe(ev))
	}
	if strings.Join(desc, " ") != strings.Join(want, " ") {
		t.Fatalf("events:\n got %v\nwant %v", desc, want)
	}
	return got
}

func describe(ev WatchEvent) string {
	if ev.Object == nil {
		return ev.Type
	}
	m := ev.Object.GetObjectMeta()
	if m.Namespace != "" {
		return fmt.Sprintf("%s:%s/%s", ev.Type, m.Namespace, m.Name)
	}
	return fmt.Sprintf("%s:%s", ev.Type, m.Name)
}

// waitClosed drains ch until it closes and returns the last event.
func waitClosed(t testing.TB, ch <-chan WatchEvent) (last WatchEvent) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				return last
			}
			last = ev
		case <-deadline:
			t.Fatal("watch channel not closed within 5s")
		}
	}
}

func snapshotBytes(t testing.TB, s *Store) []byte {
	t.Helper()
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	var b bytes.Buffer
	if err := snap.Persist(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func restoreInto(t testing.TB, s *Store, data []byte, index uint64) {
	t.Helper()
	if err := s.Restore(io.NopCloser(bytes.NewReader(data)), index); err != nil {
		t.Fatal(err)
	}
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return ctx
}

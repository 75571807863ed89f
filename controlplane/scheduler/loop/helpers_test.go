package loop

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/controller"
	"github.com/outpost-edge/outpost/controlplane/controller/controllertest"
	"github.com/outpost-edge/outpost/controlplane/scheduler"
	"github.com/outpost-edge/outpost/controlplane/scheduler/policy"
)

var eventsRes = api.ResourceOf(&api.Event{})

// testLogger sends the loop's records to t.Log.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(b []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(b))
	return len(b), nil
}

// newScheduler builds a scheduler of a policy (nil: the default) with a
// fixed tie-break, so runs repeat.
func newScheduler(t testing.TB, p *policy.Policy) *scheduler.Scheduler {
	t.Helper()
	s, err := scheduler.New(scheduler.Config{Policy: p, Rand: rand.New(rand.NewPCG(1, 2))})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// startLoop starts a loop on c with cfg's other fields and stops it when
// the test ends. Schedulers default to default-scheduler with the default
// policy.
func startLoop(t *testing.T, c controller.Client, cfg Config) *Loop {
	t.Helper()
	cfg.Client = c
	if cfg.Schedulers == nil {
		cfg.Schedulers = map[string]*scheduler.Scheduler{api.DefaultSchedulerName: newScheduler(t, nil)}
	}
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	l, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return l
}

// waitFor polls cond inside a synctest bubble: it lets every goroutine of
// the bubble settle, checks, and otherwise lets a little fake time pass,
// up to limit.
func waitFor(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		synctest.Wait()
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", limit, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// sleepUntil lets fake time pass until at, then lets the bubble settle.
func sleepUntil(at time.Time) {
	time.Sleep(time.Until(at))
	synctest.Wait()
}

type nodeOpt func(*api.Node)

// mkNode makes a Ready node: 4 CPU, 32Gi, 110 pods unless told.
func mkNode(name string, opts ...nodeOpt) *api.Node {
	n := &api.Node{ObjectMeta: api.ObjectMeta{Name: name, Labels: map[string]string{scheduler.LabelHostname: name}}}
	n.Status.Allocatable = api.ResourceList{
		api.ResourceCPU:    api.MustParseQuantity("4"),
		api.ResourceMemory: api.MustParseQuantity("32Gi"),
		api.ResourcePods:   api.MustParseQuantity("110"),
	}
	n.Status.Conditions = []api.NodeCondition{{Type: api.NodeReady, Status: api.ConditionTrue}}
	for _, o := range opts {
		o(n)
	}
	return n
}

func nodeLabels(kv ...string) nodeOpt {
	return func(n *api.Node) {
		for i := 0; i+1 < len(kv); i += 2 {
			n.Labels[kv[i]] = kv[i+1]
		}
	}
}

func nodeAlloc(kv ...string) nodeOpt {
	return func(n *api.Node) {
		n.Status.Allocatable = api.ResourceList{}
		for i := 0; i+1 < len(kv); i += 2 {
			n.Status.Allocatable[kv[i]] = api.MustParseQuantity(kv[i+1])
		}
	}
}

func nodeTaint(key, value, effect string) nodeOpt {
	return func(n *api.Node) {
		n.Spec.Taints = append(n.Spec.Taints, api.Taint{Key: key, Value: value, Effect: effect})
	}
}

type podOpt func(*api.Pod)

// mkPod makes a pod in namespace default asking 100m CPU and 500Mi.
func mkPod(name string, opts ...podOpt) *api.Pod {
	p := &api.Pod{ObjectMeta: api.ObjectMeta{Name: name, Namespace: "default"}}
	p.Spec.Containers = []api.Container{{Name: "c", Image: "registry.example/app:1"}}
	p.Spec.Containers[0].Resources.Requests = api.ResourceList{
		api.ResourceCPU:    api.MustParseQuantity("100m"),
		api.ResourceMemory: api.MustParseQuantity("500Mi"),
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func podLabels(kv ...string) podOpt {
	return func(p *api.Pod) {
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Labels[kv[i]] = kv[i+1]
		}
	}
}

func podCPU(q string) podOpt {
	return func(p *api.Pod) { p.Spec.Containers[0].Resources.Requests[api.ResourceCPU] = api.MustParseQuantity(q) }
}

func podSelector(kv ...string) podOpt {
	return func(p *api.Pod) {
		p.Spec.NodeSelector = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Spec.NodeSelector[kv[i]] = kv[i+1]
		}
	}
}

func podScheduler(name string) podOpt { return func(p *api.Pod) { p.Spec.SchedulerName = name } }

func podOnNode(name string) podOpt { return func(p *api.Pod) { p.Spec.NodeName = name } }

func podToleration(key, value, effect string) podOpt {
	return func(p *api.Pod) {
		p.Spec.Tolerations = append(p.Spec.Tolerations, api.Toleration{Key: key, Operator: "Equal", Value: value, Effect: effect})
	}
}

func create(t *testing.T, f *controllertest.Fake, objs ...api.Object) {
	t.Helper()
	for _, o := range objs {
		if _, err := f.Create(context.Background(), o); err != nil {
			t.Fatalf("create %s: %v", o.GetObjectMeta().Name, err)
		}
	}
}

func getPod(t *testing.T, f *controllertest.Fake, name string) *api.Pod {
	t.Helper()
	obj, err := f.Get(podsRes, "default", name)
	if err != nil {
		t.Fatalf("get pod %s: %v", name, err)
	}
	return obj.(*api.Pod)
}

// nodeOf returns the node pod name is bound to, "" when unbound or gone.
func nodeOf(f *controllertest.Fake, name string) string {
	obj, err := f.Get(podsRes, "default", name)
	if err != nil {
		return ""
	}
	return obj.(*api.Pod).Spec.NodeName
}

func podScheduledCondition(p *api.Pod) *api.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == api.PodScheduled {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// eventsFor lists the events about pod name.
func eventsFor(t *testing.T, f *controllertest.Fake, name string) []*api.Event {
	t.Helper()
	objs, _, err := f.List(eventsRes)
	if err != nil {
		t.Fatal(err)
	}
	var out []*api.Event
	for _, o := range objs {
		if ev := o.(*api.Event); ev.InvolvedObject.Name == name {
			out = append(out, ev)
		}
	}
	return out
}

// hookClient wraps the fake to watch or disturb Bind calls.
type hookClient struct {
	*controllertest.Fake
	mu    sync.Mutex
	calls []int // sizes of the Bind calls
	// before runs before each Bind call; a non-nil error fails every
	// binding of the call with it.
	before func(call int, bs []controller.Binding) error
}

func (h *hookClient) Bind(ctx context.Context, bs []controller.Binding) []error {
	h.mu.Lock()
	call := len(h.calls)
	h.calls = append(h.calls, len(bs))
	before := h.before
	h.mu.Unlock()
	if before != nil {
		if err := before(call, bs); err != nil {
			errs := make([]error, len(bs))
			for i := range errs {
				errs[i] = err
			}
			return errs
		}
	}
	return h.Fake.Bind(ctx, bs)
}

func (h *hookClient) bindCalls() []int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]int(nil), h.calls...)
}

// errLost stands for a write whose outcome is unknown (leadership lost).
var errLost = errors.New("leadership lost; the write may or may not have been applied")

// checkPlacements checks every bound pod against every predicate of p on
// its node, as if it were placed last.
func checkPlacements(t *testing.T, f *controllertest.Fake, p *policy.Policy) {
	t.Helper()
	c := scheduler.NewCluster()
	nodes, _, _ := f.List(nodesRes)
	for _, o := range nodes {
		c.SetNode(o.(*api.Node))
	}
	pods, _, _ := f.List(podsRes)
	for _, o := range pods {
		if err := c.SetPod(o.(*api.Pod)); err != nil {
			t.Fatal(err)
		}
	}
	s := newScheduler(t, p)
	for _, o := range pods {
		pod := o.(*api.Pod)
		if pod.Spec.NodeName == "" {
			continue
		}
		c.RemovePod(pod.Namespace, pod.Name)
		unbound := *pod
		unbound.Spec.NodeName = ""
		failed, err := s.Fits(c, &unbound, pod.Spec.NodeName)
		if err != nil {
			t.Fatal(err)
		}
		if len(failed) > 0 {
			t.Errorf("pod %s on %s fails %v", pod.Name, pod.Spec.NodeName, failed)
		}
		if err := c.SetPod(pod); err != nil {
			t.Fatal(err)
		}
	}
}

func podNames(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%02d", prefix, i)
	}
	return out
}

package loop

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/controller"
	"github.com/outpost-edge/outpost/controlplane/controller/controllertest"
	"github.com/outpost-edge/outpost/controlplane/scheduler"
	"github.com/outpost-edge/outpost/controlplane/scheduler/policy"
)

// Pods of every kind of constraint get bound, and every binding satisfies
// every predicate of the policy on its node; the metrics count them.
func TestBindsPodsThatSatisfyPredicates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := controllertest.New()
		create(t, f,
			mkNode("a1", nodeLabels("zone", "a", "disk", "ssd"), nodeAlloc("cpu", "3", "memory", "8Gi", "pods", "10")),
			mkNode("a2", nodeLabels("zone", "a"), nodeAlloc("cpu", "3", "memory", "8Gi", "pods", "10")),
			mkNode("b1", nodeLabels("zone", "b", "disk", "ssd"), nodeAlloc("cpu", "3", "memory", "8Gi", "pods", "10")),
			mkNode("b2", nodeLabels("zone", "b"), nodeAlloc("cpu", "3", "memory", "8Gi", "pods", "10"), nodeTaint("dedicated", "db", api.TaintEffectNoSchedule)),
		)
		// 6 ssd pods (a1 and b1 only), 4 db pods (b2 tolerated), then 10
		// plain ones (not b2), 300m each: 6 CPU of the 12. With 2 CPU a
		// node, db pods placed on a1, a2 and b1 (random tie-break) left
		// too little room there for the plain ones, and the test failed
		// now and then; at 3 CPU every placement the predicates allow
		// leaves room for all.
		var pods []api.Object
		for _, n := range podNames("ssd", 6) {
			pods = append(pods, mkPod(n, podCPU("300m"), podSelector("disk", "ssd")))
		}
		for _, n := range podNames("db", 4) {
			pods = append(pods, mkPod(n, podCPU("300m"), podToleration("dedicated", "db", api.TaintEffectNoSchedule)))
		}
		for _, n := range podNames("plain", 10) {
			pods = append(pods, mkPod(n, podCPU("300m")))
		}
		reg := prometheus.NewRegistry()
		l := startLoop(t, f, Config{Registerer: reg})
		create(t, f, pods...)
		waitFor(t, "every pod bound", time.Minute, func() bool { return f.Writes("bind") == len(pods) })
		checkPlacements(t, f, nil)
		for _, n := range podNames("ssd", 6) {
			if node := nodeOf(f, n); node != "a1" && node != "b1" {
				t.Errorf("%s on %s, want an ssd node", n, node)
			}
		}
		waitFor(t, "stats", time.Minute, func() bool {
			st := l.Stats()
			return st.Scheduled == uint64(len(pods)) && st.Pending == 0 && st.Binding == 0
		})
		if got := metricValue(t, reg, "outpost_scheduler_attempts_total", "result", "scheduled"); got != float64(len(pods)) {
			t.Errorf("attempts_total{result=scheduled} = %v, want %d", got, len(pods))
		}
		if got := metricValue(t, reg, "outpost_scheduler_bind_batch_size", "", ""); got != float64(len(pods)) {
			t.Errorf("bind_batch_size sum = %v, want %d", got, len(pods))
		}
		if got := metricValue(t, reg, "outpost_scheduler_e2e_seconds", "", ""); got < 0 {
			t.Errorf("e2e_seconds sum = %v", got)
		}
		if got := metricValue(t, reg, "outpost_scheduler_queue_length", "queue", "active"); got != 0 {
			t.Errorf("queue_length{active} = %v, want 0", got)
		}
	})
}

// metricValue returns a counter's or gauge's value, or a histogram's sum,
// of the series with label=value (any series when label is "").
func metricValue(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			match := label == ""
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					match = true
				}
			}
			if !match {
				continue
			}
			switch {
			case m.Counter != nil:
				return m.GetCounter().GetValue()
			case m.Gauge != nil:
				return m.GetGauge().GetValue()
			case m.Histogram != nil:
				return m.GetHistogram().GetSampleSum()
			}
		}
	}
	t.Fatalf("no series %s{%s=%q}", name, label, value)
	return 0
}

// While Bind calls are in flight the next bindings gather into one call,
// never more than MaxBatch of them.
func TestBatchesBindings(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := controllertest.New()
		// Room for exactly the 60 pods: every decision is made before any
		// binding is visible, so they fit only if each is assumed at once.
		twenty := nodeAlloc("cpu", "4", "memory", "32Gi", "pods", "20")
		create(t, f, mkNode("n1", twenty), mkNode("n2", twenty), mkNode("n3", twenty))
		release := make(chan struct{})
		h := &hookClient{Fake: f, before: func(int, []controller.Binding) error {
			<-release
			return nil
		}}
		const numPods, maxBatch = 60, 16
		l := startLoop(t, h, Config{MaxBatch: maxBatch})
		for _, n := range podNames("p", numPods) {
			create(t, f, mkPod(n))
		}
		// Every pod decided and assumed while the first calls are held:
		// the scheduler does not wait for bindings.
		waitFor(t, "every pod assumed", time.Minute, func() bool { return l.Stats().Binding == numPods })
		if f.Writes("bind") != 0 {
			t.Fatalf("bound before release")
		}
		close(release)
		waitFor(t, "every pod bound", time.Minute, func() bool { return f.Writes("bind") == numPods })
		calls := h.bindCalls()
		if len(calls) >= numPods || len(calls) > 3+(numPods+maxBatch-1)/maxBatch {
			t.Errorf("%d Bind calls for %d pods (%v), want them batched", len(calls), numPods, calls)
		}
		if m := slices.Max(calls); m > maxBatch {
			t.Errorf("a Bind call of %d bindings, want at most %d", m, maxBatch)
		}
		checkPlacements(t, f, nil)
		waitFor(t, "stats", time.Minute, func() bool { return l.Stats().Scheduled == numPods })
	})
}

// SCH-13: a pod that fits nowhere gets PodScheduled=False and one
// FailedScheduling event; a repeat of the same answer bumps the event's
// count and writes no status; a node that fits makes it bound, after the
// pod's backoff (1 s doubling).
func TestUnschedulablePodReportsWhyAndRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := controllertest.New()
		create(t, f, mkNode("n1"), mkNode("n2"), mkNode("n3"))
		startLoop(t, f, Config{})
		create(t, f, mkPod("web", podSelector("disk", "ssd")))
		const want = "0/3 nodes are available: MatchNodeSelector (3)."
		waitFor(t, "the condition", time.Minute, func() bool {
			c := podScheduledCondition(getPod(t, f, "web"))
			return c != nil && len(eventsFor(t, f, "web")) == 1
		})
		failedAt := time.Now()
		c := podScheduledCondition(getPod(t, f, "web"))
		if c.Status != api.ConditionFalse || c.Reason != ReasonUnschedulable || c.Message != want {
			t.Fatalf("condition %+v, want False/%s/%q", c, ReasonUnschedulable, want)
		}
		pod := getPod(t, f, "web")
		ev := eventsFor(t, f, "web")[0]
		if ev.Type != api.EventTypeWarning || ev.Reason != EventFailedScheduling || ev.Message != want || ev.Count != 1 ||
			ev.Source.Component != api.DefaultSchedulerName || ev.Namespace != "default" ||
			ev.InvolvedObject != (api.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "default", Name: "web", UID: pod.UID}) ||
			!strings.HasPrefix(ev.Name, "web.") {
			t.Fatalf("event %+v", ev)
		}
		if n := f.Writes("status pods"); n != 1 {
			t.Fatalf("%d status writes, want 1", n)
		}

		// A change of a node that does not help: tried again after 1 s,
		// same answer.
		n1 := mustGet[*api.Node](t, f, nodesRes, "", "n1")
		n1.Labels["rack"] = "r1"
		if _, err := f.Update(context.Background(), n1); err != nil {
			t.Fatal(err)
		}
		sleepUntil(failedAt.Add(time.Second - time.Millisecond))
		if got := eventsFor(t, f, "web")[0].Count; got != 1 {
			t.Fatalf("retried within the backoff: count %d", got)
		}
		waitFor(t, "the count to grow", 2*time.Second, func() bool { return eventsFor(t, f, "web")[0].Count == 2 })
		if time.Since(failedAt) > time.Second+100*time.Millisecond {
			t.Errorf("retried %s after the failure, want 1 s", time.Since(failedAt))
		}
		secondAt := time.Now()
		if evs := eventsFor(t, f, "web"); len(evs) != 1 || evs[0].Name != ev.Name || evs[0].Message != want {
			t.Fatalf("events %+v, want the one event updated", evs)
		}
		if n := f.Writes("status pods"); n != 1 {
			t.Fatalf("%d status writes, want 1 (the condition did not change)", n)
		}

		// A node that fits: bound after the second backoff (2 s).
		create(t, f, mkNode("n4", nodeLabels("disk", "ssd")))
		sleepUntil(secondAt.Add(2*time.Second - 100*time.Millisecond))
		if node := nodeOf(f, "web"); node != "" {
			t.Fatalf("bound to %s within the backoff", node)
		}
		waitFor(t, "web bound", 3*time.Second, func() bool { return nodeOf(f, "web") == "n4" })
		if len(eventsFor(t, f, "web")) != 1 {
			t.Errorf("events added on success")
		}
	})
}

func mustGet[T api.Object](t *testing.T, f *controllertest.Fake, r *api.Resource, ns, name string) T {
	t.Helper()
	obj, err := f.Get(r, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := controller.Copy(obj)
	if err != nil {
		t.Fatal(err)
	}
	return cp.(T)
}

// Parked pods are tried again at least every 60 s even when nothing that
// triggers a retry happens; a node heartbeat is not such a trigger.
func TestParkedPodRecheckedEveryMinute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := controllertest.New()
		create(t, f, mkNode("n1"), mkNode("n2"))
		startLoop(t, f, Config{})
		web := mkPod("web")
		web.Spec.Affinity = &api.Affinity{PodAffinity: &api.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []api.PodAffinityTerm{{
			LabelSelector: &api.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			TopologyKey:   scheduler.LabelHostname,
		}}}}
		create(t, f, web)
		waitFor(t, "web parked", time.Minute, func() bool { return len(eventsFor(t, f, "web")) == 1 })
		failedAt := time.Now()
		// The pod web needs appears; adding a placed pod triggers nothing.
		create(t, f, mkPod("db", podLabels("app", "db"), podOnNode("n2")))
		for i := range 5 {
			sleepUntil(failedAt.Add(time.Duration(10*(i+1)) * time.Second))
			n1 := mustGet[*api.Node](t, f, nodesRes, "", "n1")
			n1.Status.Conditions[0].LastHeartbeatTime = api.NewTime(time.Now())
			if _, err := f.UpdateStatus(context.Background(), n1); err != nil {
				t.Fatal(err)
			}
		}
		sleepUntil(failedAt.Add(59 * time.Second))
		if node := nodeOf(f, "web"); node != "" {
			t.Fatalf("web bound to %s before the recheck; heartbeats retried it", node)
		}
		sleepUntil(failedAt.Add(60 * time.Second))
		waitFor(t, "web bound", time.Second, func() bool { return nodeOf(f, "web") == "n2" })
	})
}

// A parked pod is tried again, after its backoff, when a placed pod is
// deleted or a service changes, not only a minute later.
func TestParkedPodRetriedOnClusterChange(t *testing.T) {
	onePod := nodeAlloc("cpu", "4", "memory", "32Gi", "pods", "1")
	for _, tc := range []struct {
		name   string
		setup  func(t *testing.T, f *controllertest.Fake)
		change func(t *testing.T, f *controllertest.Fake)
	}{
		{"placed pod deleted", func(t *testing.T, f *controllertest.Fake) {
			create(t, f, mkNode("n1", onePod), mkPod("old", podOnNode("n1")))
		}, func(t *testing.T, f *controllertest.Fake) {
			if err := f.Delete(context.Background(), podsRes, "default", "old", api.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}},
		{"service deleted", func(t *testing.T, f *controllertest.Fake) {
			// The default policy's serviceAffinity on "region" keeps the
			// service's pods in the region of its first pod, whose node
			// is full.
			create(t, f,
				mkNode("n1", onePod, nodeLabels("region", "r1")),
				mkNode("n2", nodeLabels("region", "r2")),
				&api.Service{ObjectMeta: api.ObjectMeta{Name: "web", Namespace: "default"}, Spec: api.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []api.ServicePort{{Port: 80}}}},
				mkPod("first", podLabels("app", "web"), podOnNode("n1")))
		}, func(t *testing.T, f *controllertest.Fake) {
			if err := f.Delete(context.Background(), servicesRes, "default", "web", api.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := controllertest.New()
				tc.setup(t, f)
				startLoop(t, f, Config{})
				create(t, f, mkPod("new", podLabels("app", "web")))
				waitFor(t, "new parked", time.Minute, func() bool { return len(eventsFor(t, f, "new")) == 1 })
				failedAt := time.Now()
				tc.change(t, f)
				sleepUntil(failedAt.Add(time.Second))
				if nodeOf(f, "new") == "" {
					t.Fatalf("new not bound 1 s after the change")
				}
			})
		})
	}
}

// A pod that changes is tried again at once, without waiting for its
// backoff or for the cluster to change.
func TestUpdatedPodIsRequeued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := controllertest.New()
		create(t, f, mkNode("n1", nodeTaint("dedicated", "db", api.TaintEffectNoSchedule)))
		startLoop(t, f, Config{})
		create(t, f, mkPod("db"))
		waitFor(t, "db parked", time.Minute, func() bool { return len(eventsFor(t, f, "db")) == 1 })
		db := mustGet[*api.Pod](t, f, podsRes, "default", "db")
		db.Spec.Tolerations = append(db.Spec.Tolerations, api.Toleration{Key: "dedicated", Operator: "Equal", Value: "db", Effect: api.TaintEffectNoSchedule})
		if _, err := f.Update(context.Background(), db); err != nil {
			t.Fatal(err)
		}
		// No fake time passes: the pod is scheduled as soon as seen.
		synctest.Wait()
		if node := nodeOf(f, "db"); node != "n1" {
			t.Fatalf("db on %q after adding the toleration, want n1 at once", node)
		}
	})
}

// SCH-12: a second scheduler with its own policy schedules the pods that
// name it, and only those; its reasons carry its predicate names.
func TestSecondSchedulerWithItsOwnPolicy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _, err := policy.Parse([]byte(`{
  "kind": "Policy", "apiVersion": "v1",
  "predicates": [
    {"name": "PodFitsResources"},
    {"name": "OnlySpecial", "argument": {"labelsPresence": {"labels": ["special"], "presence": true}}}
  ],
  "priorities": [{"name": "LeastRequestedPriority", "weight": 1}]
}`))
		if err != nil {
			t.Fatal(err)
		}
		f := controllertest.New()
		create(t, f,
			mkNode("n1", nodeLabels("special", "yes")),
			mkNode("n2", nodeAlloc("cpu", "16", "memory", "32Gi", "pods", "110")),
			mkNode("n3", nodeAlloc("cpu", "16", "memory", "32Gi", "pods", "110")))
		startLoop(t, f, Config{Schedulers: map[string]*scheduler.Scheduler{
			api.DefaultSchedulerName: newScheduler(t, nil),
			"special":                newScheduler(t, p),
		}})
		for _, n := range podNames("sp", 4) {
			create(t, f, mkPod(n, podScheduler("special")))
		}
		for _, n := range podNames("df", 6) {
			create(t, f, mkPod(n))
		}
		create(t, f, mkPod("huge", podScheduler("special"), podCPU("8")))
		waitFor(t, "ten pods bound", time.Minute, func() bool { return f.Writes("bind") == 10 })
		for _, n := range podNames("sp", 4) {
			if node := nodeOf(f, n); node != "n1" {
				t.Errorf("%s (special) on %q, want n1", n, node)
			}
		}
		off := 0
		for _, n := range podNames("df", 6) {
			if nodeOf(f, n) != "n1" {
				off++
			}
		}
		if off == 0 {
			t.Errorf("every default-scheduler pod on n1: the special policy scheduled them")
		}
		checkPlacements(t, f, nil)
		waitFor(t, "huge reported", time.Minute, func() bool { return len(eventsFor(t, f, "huge")) == 1 })
		ev := eventsFor(t, f, "huge")[0]
		if want := "0/3 nodes are available: OnlySpecial (2), PodFitsResources (1)."; ev.Message != want || ev.Source.Component != "special" {
			t.Errorf("event %q from %q, want %q from special", ev.Message, ev.Source.Component, want)
		}
	})
}

// SCH-12: a pod naming a scheduler that does not run stays Pending, is
// told so once after the grace, and is scheduled once that scheduler is
// added.
func TestUnknownSchedulerWaitsUntilAdded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := controllertest.New()
		create(t, f, mkNode("n1"))
		l := startLoop(t, f, Config{UnknownSchedulerGrace: 10 * time.Second})
		start := time.Now()
		create(t, f, mkPod("p", podScheduler("later")))
		sleepUntil(start.Add(10*time.Second - time.Millisecond))
		if n := f.Writes("status pods"); n != 0 {
			t.Fatalf("%d status writes within the grace", n)
		}
		waitFor(t, "the condition", time.Second, func() bool { return podScheduledCondition(getPod(t, f, "p")) != nil })
		c := podScheduledCondition(getPod(t, f, "p"))
		want := `no scheduler named "later" is running; running: default-scheduler`
		if c.Status != api.ConditionFalse || c.Reason != ReasonSchedulerNotRunning || c.Message != want {
			t.Fatalf("condition %+v, want False/%s/%q", c, ReasonSchedulerNotRunning, want)
		}
		// Cluster changes and time do not make it say so again.
		create(t, f, mkNode("n2"))
		sleepUntil(time.Now().Add(5 * time.Minute))
		if n := f.Writes("status pods"); n != 1 {
			t.Fatalf("%d status writes, want 1", n)
		}
		if st := l.Stats(); st.Pending != 1 {
			t.Fatalf("stats %+v, want 1 pending", st)
		}
		l.SetSchedulers(map[string]*scheduler.Scheduler{
			api.DefaultSchedulerName: newScheduler(t, nil),
			"later":                  newScheduler(t, nil),
		})
		synctest.Wait()
		if node := nodeOf(f, "p"); node == "" {
			t.Fatalf("p still unbound after its scheduler was added")
		}
	})
}

// SCH-12: an outside program binding a pod through the API is respected:
// no write from the loop, and its placement counts for the loop's pods.
func TestOutsideSchedulerIsRespected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := controllertest.New()
		// n1 is the better node but has room for one pod only.
		create(t, f, mkNode("n1", nodeAlloc("cpu", "32", "memory", "128Gi", "pods", "1")),
			mkNode("n2", nodeAlloc("cpu", "1", "memory", "2Gi", "pods", "10")))
		startLoop(t, f, Config{UnknownSchedulerGrace: 10 * time.Second})
		create(t, f, mkPod("ext", podScheduler("my-scheduler")))
		sleepUntil(time.Now().Add(5 * time.Second))
		ext := getPod(t, f, "ext")
		if errs := f.Bind(context.Background(), []controller.Binding{{Namespace: "default", Name: "ext", UID: ext.UID, NodeName: "n1"}}); errs[0] != nil {
			t.Fatal(errs[0])
		}
		sleepUntil(time.Now().Add(time.Minute))
		if n := f.Writes("status pods"); n != 0 {
			t.Errorf("%d status writes for a pod an outside scheduler bound", n)
		}
		if node := nodeOf(f, "ext"); node != "n1" {
			t.Errorf("ext on %q, want n1", node)
		}
		create(t, f, mkPod("mine"))
		waitFor(t, "mine bound", time.Minute, func() bool { return nodeOf(f, "mine") != "" })
		if node := nodeOf(f, "mine"); node != "n2" {
			t.Errorf("mine on %q, want n2 (n1 is full with ext)", node)
		}
	})
}

// A binding that fails is forgotten: the node's room is free again for
// the pod itself (tried again after its backoff) or for others.
func TestFailedBindingIsForgotten(t *testing.T) {
	onePod := nodeAlloc("cpu", "4", "memory", "32Gi", "pods", "1")
	t.Run("bind fails, pod remains", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := controllertest.New()
			create(t, f, mkNode("n1", onePod))
			h := &hookClient{Fake: f, before: func(call int, _ []controller.Binding) error {
				if call == 0 {
					return errLost
				}
				return nil
			}}
			l := startLoop(t, h, Config{})
			create(t, f, mkPod("a"))
			// Were a's assumption kept, n1 would look full to a itself.
			waitFor(t, "a bound after its backoff", 5*time.Second, func() bool { return nodeOf(f, "a") == "n1" })
			if st := l.Stats(); st.Failed != 1 || st.Unschedulable != 0 {
				t.Errorf("stats %+v, want 1 failed binding and no unschedulable attempt", st)
			}
		})
	})
	t.Run("pod deleted between decision and binding", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := controllertest.New()
			create(t, f, mkNode("n1", onePod))
			// The binding of a waits until b is parked (n1 looks full with
			// a), then a is deleted, and the binding fails only once the
			// loop has seen the deletion.
			parked, deleted := make(chan struct{}), make(chan struct{})
			h := &hookClient{Fake: f, before: func(_ int, bs []controller.Binding) error {
				for _, b := range bs {
					if b.Name == "a" {
						<-parked
						if err := f.Delete(context.Background(), podsRes, "default", "a", api.DeleteOptions{}); err != nil {
							return err
						}
						<-deleted
					}
				}
				return nil
			}}
			l := startLoop(t, h, Config{})
			create(t, f, mkPod("a"))
			waitFor(t, "a assumed", time.Minute, func() bool { return l.Stats().Binding == 1 })
			create(t, f, mkPod("b"))
			waitFor(t, "b parked", time.Minute, func() bool { return len(eventsFor(t, f, "b")) == 1 })
			close(parked)
			synctest.Wait()
			close(deleted)
			waitFor(t, "b bound", 5*time.Second, func() bool { return nodeOf(f, "b") == "n1" })
			waitFor(t, "nothing pending", 5*time.Second, func() bool { st := l.Stats(); return st.Pending == 0 && st.Failed == 1 })
		})
	})
}

// Pods being deleted and pods that finished do not take room; running ones
// do.
func TestDeletingAndFinishedPodsDoNotCount(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, f *controllertest.Fake)
		fits  bool
	}{
		{"running", func(*testing.T, *controllertest.Fake) {}, false},
		{"succeeded", func(t *testing.T, f *controllertest.Fake) {
			old := mustGet[*api.Pod](t, f, podsRes, "default", "old")
			old.Status.Phase = api.PodSucceeded
			if _, err := f.UpdateStatus(context.Background(), old); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"being deleted", func(t *testing.T, f *controllertest.Fake) {
			if err := f.Delete(context.Background(), podsRes, "default", "old", api.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			if p := getPod(t, f, "old"); p.DeletionTimestamp == nil {
				t.Fatal("old is gone, want it being deleted")
			}
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := controllertest.New()
				create(t, f, mkNode("n1", nodeAlloc("cpu", "4", "memory", "32Gi", "pods", "1")))
				old := mkPod("old", podOnNode("n1"))
				old.Finalizers = []string{"example.com/hold"}
				create(t, f, old)
				startLoop(t, f, Config{})
				tc.setup(t, f)
				create(t, f, mkPod("new"))
				sleepUntil(time.Now().Add(time.Second))
				if got := nodeOf(f, "new") == "n1"; got != tc.fits {
					t.Errorf("new bound: %v, want %v", got, tc.fits)
				}
			})
		})
	}
}

// Run can be started again after it stopped (leadership lost and won).
func TestRunAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := controllertest.New()
		create(t, f, mkNode("n1"))
		l, err := New(Config{Client: f, Schedulers: map[string]*scheduler.Scheduler{api.DefaultSchedulerName: newScheduler(t, nil)}})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- l.Run(ctx) }()
			synctest.Wait()
			if err := l.Run(ctx); err != ErrRunning {
				t.Errorf("second Run: %v, want ErrRunning", err)
			}
			name := fmt.Sprintf("p%d", i)
			create(t, f, mkPod(name))
			synctest.Wait()
			if nodeOf(f, name) != "n1" {
				t.Errorf("run %d: %s not bound", i, name)
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
	})
}

func TestNewRefusesBadConfig(t *testing.T) {
	f := controllertest.New()
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no client", Config{}, "Client is required"},
		{"negative batch", Config{Client: f, MaxBatch: -1}, "MaxBatch -1"},
		{"negative grace", Config{Client: f, UnknownSchedulerGrace: -time.Second}, "UnknownSchedulerGrace -1s"},
		{"nil scheduler", Config{Client: f, Schedulers: map[string]*scheduler.Scheduler{"x": nil}}, `Schedulers["x"]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New: %v, want an error naming %q", err, tc.want)
			}
		})
	}
}

package store

import (
	"bytes"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// bindAt is a binding to node made at t0.
func bindAt(node string) Binding { return Binding{NodeName: node, Now: t0} }

func TestBind(t *testing.T) {
	plain := func(h *harness) { h.mustCreate(newPod("default", "a", "", nil)) }
	tests := []struct {
		name     string
		setup    func(h *harness) // creates pod default/a; plain if nil
		bind     Binding
		pod      string
		code     int // 0 = success
		contains string
	}{
		{name: "unbound pod", bind: bindAt("n1")},
		{name: "with message", bind: Binding{NodeName: "n1", Now: t0, Message: "picked by test"}},
		{
			name: "replaces a PodScheduled=False condition and the nomination",
			setup: func(h *harness) {
				p := newPod("default", "a", "", nil)
				p.Status.NominatedNodeName = "n9"
				p.Status.Conditions = []api.PodCondition{
					{Type: api.PodInitialized, Status: api.ConditionTrue},
					{Type: api.PodScheduled, Status: api.ConditionFalse, Reason: "Unschedulable", Message: "0/3 nodes are available",
						LastTransitionTime: api.NewTime(t0.Add(-time.Hour))},
				}
				h.mustCreate(p)
			},
			bind: bindAt("n1"),
		},
		{name: "matching preconditions", bind: Binding{NodeName: "n1", Now: t0, UID: "uid-default-a", ResourceVersion: "2"}},
		{name: "missing pod", pod: "ghost", bind: bindAt("n1"), code: 404, contains: `pods "ghost" not found`},
		{
			name: "already bound",
			setup: func(h *harness) {
				plain(h)
				h.ok(BindCmd("default", "a", bindAt("n0")))
			},
			bind: bindAt("n1"), code: 409, contains: `pod a is already assigned to node "n0"`,
		},
		{
			name: "being deleted",
			setup: func(h *harness) {
				p := newPod("default", "a", "", nil)
				p.Finalizers = []string{"example.com/hold"}
				h.mustCreate(p)
				h.ok(DeleteCmd(rPods, "default", "a", Preconditions{}, t0))
			},
			bind: bindAt("n1"), code: 409, contains: "pod a is being deleted",
		},
		{
			name: "uid precondition", bind: Binding{NodeName: "n1", Now: t0, UID: "other"},
			code: 409, contains: "Precondition failed: UID in precondition: other, UID in object meta: uid-default-a",
		},
		{
			name: "resourceVersion precondition", bind: Binding{NodeName: "n1", Now: t0, ResourceVersion: "1"},
			code: 409, contains: "Precondition failed: ResourceVersion in precondition: 1, ResourceVersion in object meta: 2",
		},
		{name: "no node", bind: Binding{Now: t0}, code: 400, contains: "target.name: Required value"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Options{})
			h.mustCreate(newNamespace("default"))
			setup := tc.setup
			if setup == nil {
				setup = plain
			}
			setup(h)
			name := tc.pod
			if name == "" {
				name = "a"
			}
			prev, beforeRaw, err := h.s.Get(rPods, "default", "a")
			if err != nil {
				t.Fatal(err)
			}

			r := h.apply(BindCmd("default", name, tc.bind))
			if h.s.AppliedIndex() != h.idx {
				t.Fatalf("applied index %d, want %d", h.s.AppliedIndex(), h.idx)
			}
			// The version before the bind is unchanged: readers may still
			// hold it.
			if again, _ := encode(prev); !bytes.Equal(again, beforeRaw) {
				t.Fatalf("bind changed the previous version:\n%s\n%s", beforeRaw, again)
			}
			if tc.code != 0 {
				se, ok := r.Err.(*api.StatusError)
				if !ok {
					t.Fatalf("err = %v (%T), want a StatusError", r.Err, r.Err)
				}
				if se.Code() != tc.code || !strings.Contains(se.Error(), tc.contains) {
					t.Fatalf("err = %d %q, want %d containing %q", se.Code(), se.Error(), tc.code, tc.contains)
				}
				if tc.code == 409 && se.Status.Reason != api.ReasonConflict {
					t.Fatalf("reason %s, want Conflict", se.Status.Reason)
				}
				if _, raw, _ := h.s.Get(rPods, "default", "a"); !bytes.Equal(raw, beforeRaw) {
					t.Fatalf("a refused bind changed the pod:\n%s\n%s", beforeRaw, raw)
				}
				return
			}
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			rv := strconv.FormatUint(h.idx, 10)
			p := h.get(rPods, "default", "a").(*api.Pod)
			if p != r.Object {
				t.Fatal("the result is not the stored object")
			}
			if p.Spec.NodeName != tc.bind.NodeName || p.ResourceVersion != rv {
				t.Fatalf("pod on %q at rv %s, want %q at %s", p.Spec.NodeName, p.ResourceVersion, tc.bind.NodeName, rv)
			}
			if p.Generation != prev.GetObjectMeta().Generation+1 {
				t.Fatalf("generation %d, want %d", p.Generation, prev.GetObjectMeta().Generation+1)
			}
			if p.Status.NominatedNodeName != "" {
				t.Fatalf("nominatedNodeName %q left after binding", p.Status.NominatedNodeName)
			}
			var scheduled []api.PodCondition
			for _, c := range p.Status.Conditions {
				if c.Type == api.PodScheduled {
					scheduled = append(scheduled, c)
				}
			}
			if len(scheduled) != 1 || scheduled[0].Status != api.ConditionTrue || scheduled[0].Reason != "" ||
				scheduled[0].Message != tc.bind.Message || scheduled[0].LastTransitionTime == nil ||
				!scheduled[0].LastTransitionTime.Equal(t0) {
				t.Fatalf("PodScheduled conditions %+v, want one True at %s with message %q", scheduled, t0, tc.bind.Message)
			}
			if n := len(prev.(*api.Pod).Status.Conditions); n > 0 && len(p.Status.Conditions) != n {
				t.Fatalf("conditions %+v: others lost or added", p.Status.Conditions)
			}
			if want, _ := encode(p); !bytes.Equal(r.Raw, want) {
				t.Fatalf("raw %s\nwant %s", r.Raw, want)
			}
		})
	}
}

func TestBindIsNotSkippable(t *testing.T) {
	if cmdBind&cmdIgnorable != 0 {
		t.Fatal("bind is marked ignorable: an old server would skip it and diverge")
	}
	h := newHarness(t, Options{})
	h.mustCreate(newNamespace("default"))
	h.mustCreate(newPod("default", "a", "", nil))
	// Inside a batch a known bind passes the check that refuses unknown
	// commands.
	res := h.applyAny(BatchCmd(BindCmd("default", "a", bindAt("n1")))).([]*Result)
	if res[0].Err != nil || res[0].Fatal() {
		t.Fatalf("bind in a batch: %v", res[0].Err)
	}
}

func TestBindBatch(t *testing.T) {
	h := newHarness(t, Options{})
	h.mustCreate(newNamespace("default"))
	for _, n := range []string{"a", "b", "c"} {
		h.mustCreate(newPod("default", n, "", nil))
	}
	h.ok(BindCmd("default", "b", bindAt("n0")))
	bRaw := func() []byte { _, raw, _ := h.s.Get(rPods, "default", "b"); return raw }()

	res, ok := h.applyAny(BatchCmd(
		BindCmd("default", "a", bindAt("n1")),
		BindCmd("default", "b", bindAt("n2")),
		BindCmd("default", "c", bindAt("n3")),
	)).([]*Result)
	if !ok || len(res) != 3 {
		t.Fatalf("batch returned %T", res)
	}
	if res[0].Err != nil || !api.IsConflict(res[1].Err) || res[2].Err != nil {
		t.Fatalf("batch errors: %v / %v / %v", res[0].Err, res[1].Err, res[2].Err)
	}
	rv := strconv.FormatUint(h.idx, 10)
	for name, node := range map[string]string{"a": "n1", "c": "n3"} {
		p := h.get(rPods, "default", name).(*api.Pod)
		if p.Spec.NodeName != node || p.ResourceVersion != rv {
			t.Fatalf("pod %s on %q at %s, want %q at %s", name, p.Spec.NodeName, p.ResourceVersion, node, rv)
		}
	}
	if _, raw, _ := h.s.Get(rPods, "default", "b"); !bytes.Equal(raw, bRaw) {
		t.Fatal("the failed bind of the batch changed its pod")
	}
}

func TestBindNodeIndex(t *testing.T) {
	h := newHarness(t, Options{})
	h.mustCreate(newNamespace("default"))
	h.mustCreate(newPod("default", "a", "", nil))
	h.mustCreate(newPod("default", "b", "", nil))
	onN1, err := h.s.Watch(ctxT(t), rPods, "", ListOptions{Field: fieldSel(t, "spec.nodeName=n1")}, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	unscheduled, err := h.s.Watch(ctxT(t), rPods, "", ListOptions{Field: fieldSel(t, "spec.nodeName=")}, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	h.ok(BindCmd("default", "a", bindAt("n1")))
	h.mustCreate(newPod("default", "marker", "n1", nil))
	expectEvents(t, onN1, "ADDED:default/a", "ADDED:default/marker")
	h.mustCreate(newPod("default", "marker2", "", nil))
	expectEvents(t, unscheduled, "DELETED:default/a", "ADDED:default/marker2")

	names := func(sel string) string {
		items, _, err := h.s.List(rPods, "", ListOptions{Field: fieldSel(t, sel)})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, it := range items {
			out = append(out, it.Object.GetObjectMeta().Name)
		}
		return strings.Join(out, ",")
	}
	if got := names("spec.nodeName=n1"); got != "a,marker" {
		t.Fatalf("pods on n1: %s", got)
	}
	if got := names("spec.nodeName="); got != "b,marker2" {
		t.Fatalf("unscheduled pods: %s", got)
	}
	tb := h.s.podTable
	if len(tb.byNode[""]) != 2 || len(tb.byNode["n1"]) != 2 {
		t.Fatalf("node index: %d unscheduled, %d on n1", len(tb.byNode[""]), len(tb.byNode["n1"]))
	}
}

func TestBindWatch(t *testing.T) {
	h := newHarness(t, Options{})
	h.mustCreate(newNamespace("default"))
	for _, n := range []string{"a", "b", "c"} {
		h.mustCreate(newPod("default", n, "", nil))
	}
	ch, err := h.s.Watch(ctxT(t), rPods, "", ListOptions{}, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	h.applyAny(BatchCmd(BindCmd("default", "a", bindAt("n1")), BindCmd("default", "b", bindAt("n1"))))
	batch := h.idx
	h.ok(BindCmd("default", "c", bindAt("n2")))
	h.apply(BindCmd("default", "c", bindAt("n3"))) // refused: no event
	h.mustCreate(newPod("default", "marker", "", nil))
	evs := expectEvents(t, ch, "MODIFIED:default/a", "MODIFIED:default/b", "MODIFIED:default/c", "ADDED:default/marker")
	for i, ev := range evs[:3] {
		p := ev.Object.(*api.Pod)
		wantRV := batch
		if i == 2 {
			wantRV = batch + 1
		}
		if ev.RV != wantRV || p.Spec.NodeName == "" || len(p.Status.Conditions) != 1 || !bytes.Contains(ev.Raw, []byte(`"nodeName":"`+p.Spec.NodeName+`"`)) {
			t.Fatalf("event %d: rv %d (want %d), pod %+v, raw %s", i, ev.RV, wantRV, p, ev.Raw)
		}
	}
}

// bindLog is a seeded log of pod creates, single and batched binds (some
// of them refused) and deletes.
func bindLog(seed uint64, n int) [][]byte {
	rng := rand.New(rand.NewPCG(seed, 2))
	pod := func() string { return "p" + strconv.Itoa(rng.IntN(15)) }
	node := func() string { return "n" + strconv.Itoa(rng.IntN(4)) }
	log := [][]byte{mustCmd(CreateCmd(newNamespace("default")))}
	for i := range n {
		now := t0.Add(time.Duration(i) * time.Second)
		switch rng.IntN(5) {
		case 0, 1:
			log = append(log, mustCmd(CreateCmd(bigPod("default", pod(), ""))))
		case 2:
			log = append(log, BindCmd("default", pod(), Binding{NodeName: node(), Now: now}))
		case 3:
			var b [][]byte
			for range 4 {
				b = append(b, BindCmd("default", pod(), Binding{NodeName: node(), Now: now, Message: "m" + strconv.Itoa(i)}))
			}
			log = append(log, BatchCmd(b...))
		case 4:
			log = append(log, DeleteCmd(rPods, "default", pod(), Preconditions{}, now))
		}
	}
	return log
}

func mustCmd(c []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return c
}

func TestBindDeterminism(t *testing.T) {
	log := bindLog(5, 300)
	a, b := New(Options{}), New(Options{WatchWindow: 3})
	var bound, refused int
	for i, c := range log {
		out := a.Apply(uint64(i+1), c)
		b.Apply(uint64(i+1), c)
		if c[0] != cmdBind && c[0] != cmdBatch {
			continue
		}
		rs, ok := out.([]*Result)
		if !ok {
			rs = []*Result{out.(*Result)}
		}
		for _, r := range rs {
			if r.Err == nil {
				bound++
			} else {
				refused++
			}
		}
	}
	if bound < 20 || refused < 20 {
		t.Fatalf("%d binds, %d refused: the log does not exercise bind", bound, refused)
	}
	if !bytes.Equal(snapshotBytes(t, a), snapshotBytes(t, b)) {
		t.Fatal("two stores fed the same binds wrote different snapshots")
	}
	// A store restored from the snapshot has the same node index.
	c := New(Options{})
	restoreInto(t, c, snapshotBytes(t, a), a.AppliedIndex())
	for _, node := range []string{"", "n0", "n1", "n2", "n3"} {
		if len(a.podTable.byNode[node]) != len(c.podTable.byNode[node]) {
			t.Fatalf("node %q: %d pods indexed, %d after restore", node, len(a.podTable.byNode[node]), len(c.podTable.byNode[node]))
		}
	}
}

// TestBindRawMatchesEncoding checks that the spliced encoding of a bound
// pod is exactly what encoding the pod gives, for pods whose members
// around the changed ones vary.
func TestBindRawMatchesEncoding(t *testing.T) {
	prio := int32(7)
	pods := map[string]func(p *api.Pod){
		"big": func(p *api.Pod) {},
		"minimal": func(p *api.Pod) {
			p.Spec = api.PodSpec{Containers: []api.Container{{Name: "c", Image: "i"}}}
			p.Status = api.PodStatus{}
		},
		"selector and affinity": func(p *api.Pod) {
			p.Spec.NodeSelector = map[string]string{"disk": "ssd"}
			p.Spec.SchedulerName = ""
			p.Spec.Affinity = &api.Affinity{}
			p.Spec.Priority = &prio
			p.Spec.PriorityClassName = "high"
		},
		"only fields after nodeName": func(p *api.Pod) {
			p.Spec.RestartPolicy, p.Spec.TerminationGracePeriodSeconds, p.Spec.Volumes = "", nil, nil
			p.Spec.HostNetwork = true
		},
		"escapes": func(p *api.Pod) {
			p.Annotations = map[string]string{"note": "a \"quoted\" \\ <tag> & é\n"}
			p.Status.Message = `back\slash "x"`
			p.Status.Conditions = []api.PodCondition{{Type: api.PodScheduled, Status: api.ConditionFalse, Message: `0/3 nodes: "taint" \`}}
		},
		"nominated": func(p *api.Pod) { p.Status.NominatedNodeName = "n2" },
	}
	for name, mutate := range pods {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, Options{})
			h.mustCreate(newNamespace("default"))
			p := bigPod("default", "p", "")
			mutate(p)
			h.mustCreate(p)
			_, raw, _ := h.s.Get(rPods, "default", "p")
			for _, node := range []string{"n1", "node-with-a-long-name.example.com", `odd"<node>`} {
				next := *h.get(rPods, "default", "p").(*api.Pod)
				next.Spec.NodeName = node
				next.Generation++
				next.ResourceVersion = "123456"
				next.Status.NominatedNodeName = ""
				next.Status.Conditions = withCondition(next.Status.Conditions, api.PodCondition{Type: api.PodScheduled, Status: api.ConditionTrue, LastTransitionTime: api.NewTime(t0)})
				got, ok := bindRaw(raw, &next)
				if !ok {
					t.Fatalf("bindRaw refused the stored encoding %s", raw)
				}
				if want, _ := encode(&next); !bytes.Equal(got, want) {
					t.Fatalf("node %q:\n got %s\nwant %s", node, got, want)
				}
			}
			r := h.ok(BindCmd("default", "p", bindAt("n1")))
			if want, _ := encode(r.Object); !bytes.Equal(r.Raw, want) {
				t.Fatalf("stored after bind:\n got %s\nwant %s", r.Raw, want)
			}
		})
	}
}

// TestBindRawRefusesTheUnexpected: an encoding that is not as the store
// writes it is refused (the bind then encodes the pod), and no input
// makes it panic.
func TestBindRawRefusesTheUnexpected(t *testing.T) {
	p := bigPod("default", "p", "")
	p.APIVersion, p.Kind, p.ResourceVersion, p.Generation = "v1", "Pod", "5", 1
	raw, _ := encode(p)
	next := *p
	next.Spec.NodeName = "n1"
	for name, bad := range map[string]string{
		"spaces":         strings.Replace(string(raw), `":`, `": `, 1),
		"unknown member": strings.Replace(string(raw), `{"apiVersion"`, `{"zzz":1,"apiVersion"`, 1),
		"out of order":   strings.Replace(string(raw), `"apiVersion":"v1","kind":"Pod"`, `"kind":"Pod","apiVersion":"v1"`, 1),
		"not an object":  `[1,2]`,
		"empty":          ``,
	} {
		if bad == string(raw) && name != "empty" {
			t.Fatalf("%s: the replacement did not apply", name)
		}
		if _, ok := bindRaw([]byte(bad), &next); ok {
			t.Errorf("%s: bindRaw accepted %s", name, bad)
		}
	}
	for i := range raw {
		bindRaw(raw[:i], &next)
		mangled := bytes.Clone(raw)
		mangled[i] ^= 0xff
		bindRaw(mangled, &next)
		mangled[i] = '"'
		bindRaw(mangled, &next)
	}
}

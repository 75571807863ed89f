package store

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
)

func TestCreate(t *testing.T) {
	tests := []struct {
		name     string
		setup    func(h *harness)
		obj      api.Object
		reason   string // "" = success
		code     int
		contains string
	}{
		{name: "pod into active namespace", obj: newPod("default", "a", "", nil)},
		{name: "cluster-scoped node", obj: newNode("n1")},
		{name: "namespace", obj: newNamespace("team")},
		{
			name:  "exists",
			setup: func(h *harness) { h.mustCreate(newPod("default", "a", "", nil)) },
			obj:   newPod("default", "a", "", nil), reason: api.ReasonAlreadyExists, code: 409,
			contains: `pods "a" already exists`,
		},
		{
			name: "missing namespace", obj: newPod("nowhere", "a", "", nil),
			reason: api.ReasonNotFound, code: 404, contains: `namespaces "nowhere" not found`,
		},
		{
			name: "terminating namespace",
			setup: func(h *harness) {
				h.mustCreate(newNamespace("old"))
				held := newPod("old", "held", "", nil)
				held.Finalizers = []string{"example.com/hold"}
				h.mustCreate(held)
				if r := h.del(rNamespaces, "", "old", Preconditions{}); r.Err != nil {
					h.t.Fatal(r.Err)
				}
			},
			obj: newPod("old", "a", "", nil), reason: api.ReasonForbidden, code: 403,
			contains: "unable to create new content in namespace old because it is being terminated",
		},
		{
			name: "no name", obj: newPod("default", "", "", nil),
			reason: api.ReasonBadRequest, code: 400, contains: "metadata.name",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Options{})
			h.mustCreate(newNamespace("default"))
			if tc.setup != nil {
				tc.setup(h)
			}
			before := h.s.AppliedIndex()
			r := h.create(tc.obj)
			if h.s.AppliedIndex() != before+1 {
				t.Fatalf("applied index %d, want %d", h.s.AppliedIndex(), before+1)
			}
			if tc.reason != "" {
				se, ok := r.Err.(*api.StatusError)
				if !ok {
					t.Fatalf("err = %v (%T), want a StatusError", r.Err, r.Err)
				}
				if se.Status.Reason != tc.reason || se.Code() != tc.code || !strings.Contains(se.Error(), tc.contains) {
					t.Fatalf("err = %d %s %q, want %d %s containing %q", se.Code(), se.Status.Reason, se.Error(), tc.code, tc.reason, tc.contains)
				}
				return
			}
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			res := api.ResourceOf(tc.obj)
			m := tc.obj.GetObjectMeta()
			got, raw, err := h.s.Get(res, m.Namespace, m.Name)
			if err != nil {
				t.Fatal(err)
			}
			gm := got.GetObjectMeta()
			if gm.ResourceVersion != strconv.FormatUint(h.idx, 10) || gm.Generation != 1 {
				t.Fatalf("rv %q generation %d, want %d and 1", gm.ResourceVersion, gm.Generation, h.idx)
			}
			var back map[string]any
			if err := json.Unmarshal(raw, &back); err != nil {
				t.Fatal(err)
			}
			if back["apiVersion"] != res.APIVersion() || back["kind"] != res.Kind {
				t.Fatalf("raw apiVersion/kind = %v/%v, want %s/%s", back["apiVersion"], back["kind"], res.APIVersion(), res.Kind)
			}
			if want, _ := encode(got); string(want) != string(raw) {
				t.Fatalf("stored JSON is not the object's encoding:\n got %s\nwant %s", raw, want)
			}
			if string(r.Raw) != string(raw) || r.Object != got {
				t.Fatal("result differs from what Get returns")
			}
		})
	}
}

func TestNamespaceCreateIsActive(t *testing.T) {
	h := newHarness(t, Options{})
	h.mustCreate(newNamespace("a"))
	if ph := h.get(rNamespaces, "", "a").(*api.Namespace).Status.Phase; ph != api.NamespaceActive {
		t.Fatalf("phase %q, want Active", ph)
	}
}

func TestUpdate(t *testing.T) {
	type check func(t *testing.T, h *harness, before, after *api.Pod, r *Result)
	rvIs := func(want func(h *harness) string) check {
		return func(t *testing.T, h *harness, _, after *api.Pod, _ *Result) {
			if w := want(h); after.ResourceVersion != w {
				t.Fatalf("rv %s, want %s", after.ResourceVersion, w)
			}
		}
	}
	current := func(h *harness) string { return strconv.FormatUint(h.idx, 10) }
	tests := []struct {
		name   string
		sub    Subresource
		change func(p *api.Pod)
		reason string
		checks []check
	}{
		{
			name:   "stale resourceVersion",
			change: func(p *api.Pod) { p.ResourceVersion = "1"; p.Labels = map[string]string{"x": "y"} },
			reason: api.ReasonConflict,
		},
		{
			name:   "unconditional",
			change: func(p *api.Pod) { p.ResourceVersion = ""; p.Labels = map[string]string{"x": "y"} },
			checks: []check{rvIs(current), func(t *testing.T, _ *harness, _, after *api.Pod, _ *Result) {
				if after.Labels["x"] != "y" {
					t.Fatal("label not written")
				}
			}},
		},
		{
			name: "main write keeps status",
			change: func(p *api.Pod) {
				p.Status.Phase = api.PodFailed
				p.Spec.Containers = []api.Container{{Name: "app", Image: "v2"}}
			},
			checks: []check{func(t *testing.T, _ *harness, before, after *api.Pod, _ *Result) {
				if after.Status.Phase != before.Status.Phase {
					t.Fatalf("status phase %q, want kept %q", after.Status.Phase, before.Status.Phase)
				}
				if after.Spec.Containers[0].Image != "v2" {
					t.Fatal("spec not written")
				}
			}},
		},
		{
			name: "status write keeps spec and metadata",
			sub:  SubresourceStatus,
			change: func(p *api.Pod) {
				p.Status.Phase = api.PodRunning
				p.Spec.NodeName = "elsewhere"
				p.Labels = map[string]string{"changed": "yes"}
			},
			checks: []check{func(t *testing.T, _ *harness, before, after *api.Pod, _ *Result) {
				if after.Status.Phase != api.PodRunning {
					t.Fatal("status not written")
				}
				if after.Spec.NodeName != before.Spec.NodeName || after.Labels["changed"] != "" {
					t.Fatal("status write changed spec or metadata")
				}
				if after.Generation != before.Generation {
					t.Fatal("status write bumped generation")
				}
			}},
		},
		{
			name:   "spec change bumps generation",
			change: func(p *api.Pod) { p.Spec.NodeName = "n2" },
			checks: []check{func(t *testing.T, _ *harness, before, after *api.Pod, _ *Result) {
				if after.Generation != before.Generation+1 {
					t.Fatalf("generation %d, want %d", after.Generation, before.Generation+1)
				}
			}},
		},
		{
			name:   "metadata change keeps generation",
			change: func(p *api.Pod) { p.Annotations = map[string]string{"a": "b"}; p.Generation = 99 },
			checks: []check{func(t *testing.T, _ *harness, before, after *api.Pod, _ *Result) {
				if after.Generation != before.Generation {
					t.Fatalf("generation %d, want %d", after.Generation, before.Generation)
				}
				if after.ResourceVersion == before.ResourceVersion {
					t.Fatal("metadata change kept the resourceVersion")
				}
			}},
		},
		{
			name:   "no-op keeps resourceVersion",
			change: func(p *api.Pod) {},
			checks: []check{func(t *testing.T, _ *harness, before, after *api.Pod, r *Result) {
				if after.ResourceVersion != before.ResourceVersion || after != before {
					t.Fatalf("no-op update changed the object: rv %s → %s", before.ResourceVersion, after.ResourceVersion)
				}
				if r.Object != api.Object(before) {
					t.Fatal("no-op update did not return the stored object")
				}
			}},
		},
		{
			name:   "status no-op keeps resourceVersion",
			sub:    SubresourceStatus,
			change: func(p *api.Pod) {},
			checks: []check{func(t *testing.T, _ *harness, before, after *api.Pod, _ *Result) {
				if after != before {
					t.Fatal("no-op status update changed the object")
				}
			}},
		},
		{
			name: "uid and creationTimestamp are kept",
			change: func(p *api.Pod) {
				p.UID = "forged"
				p.CreationTimestamp = api.NewTime(t0.Add(-time.Hour))
				p.Labels = map[string]string{"x": "y"}
			},
			checks: []check{func(t *testing.T, _ *harness, before, after *api.Pod, _ *Result) {
				if after.UID != before.UID || !after.CreationTimestamp.Equal(before.CreationTimestamp.Time) {
					t.Fatal("uid or creationTimestamp overwritten")
				}
			}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Options{})
			h.mustCreate(newNamespace("default"))
			h.mustCreate(newPod("default", "p", "n1", nil))
			h.ok(func() []byte { // a second write, so that the stored rv is not the create's
				p := newPod("default", "p", "n1", nil)
				p.Status.Phase = api.PodPending
				p.Status.Message = "waiting"
				c, _ := UpdateCmd(p, SubresourceStatus)
				return c
			}())
			before := h.get(rPods, "default", "p").(*api.Pod)
			in := *before
			in.Labels = nil
			tc.change(&in)
			r := h.update(&in, tc.sub)
			if tc.reason != "" {
				if api.ReasonOf(r.Err) != tc.reason {
					t.Fatalf("err %v, want reason %s", r.Err, tc.reason)
				}
				if !strings.Contains(r.Err.Error(), "the object has been modified; please apply your changes to the latest version and try again") {
					t.Fatalf("conflict message %q", r.Err)
				}
				if h.get(rPods, "default", "p") != api.Object(before) {
					t.Fatal("failed update changed the object")
				}
				return
			}
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			after := h.get(rPods, "default", "p").(*api.Pod)
			for _, c := range tc.checks {
				c(t, h, before, after, r)
			}
		})
	}
}

func TestUpdateNotFoundAndStatusless(t *testing.T) {
	h := newHarness(t, Options{})
	h.mustCreate(newNamespace("default"))
	if r := h.update(newPod("default", "ghost", "", nil), ""); !api.IsNotFound(r.Err) {
		t.Fatalf("update of a missing pod: %v, want NotFound", r.Err)
	}
	h.mustCreate(newEvent("default", "e", t0))
	if r := h.update(newEvent("default", "e", t0), SubresourceStatus); api.ReasonOf(r.Err) != api.ReasonBadRequest {
		t.Fatalf("status update of an event: %v, want BadRequest", r.Err)
	}
}

func TestDelete(t *testing.T) {
	tests := []struct {
		name     string
		pre      func(p *api.Pod) Preconditions
		reason   string
		contains string
	}{
		{name: "unconditional", pre: func(*api.Pod) Preconditions { return Preconditions{} }},
		{name: "matching preconditions", pre: func(p *api.Pod) Preconditions {
			return Preconditions{ResourceVersion: p.ResourceVersion, UID: p.UID}
		}},
		{name: "stale resourceVersion", pre: func(p *api.Pod) Preconditions {
			return Preconditions{ResourceVersion: "1"}
		}, reason: api.ReasonConflict, contains: "Precondition failed: ResourceVersion in precondition: 1"},
		{name: "other uid", pre: func(p *api.Pod) Preconditions {
			return Preconditions{UID: "someone-else"}
		}, reason: api.ReasonConflict, contains: "Precondition failed: UID in precondition: someone-else"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Options{})
			h.mustCreate(newNamespace("default"))
			h.mustCreate(newNamespace("pad"))
			h.mustCreate(newPod("default", "p", "", nil))
			p := h.get(rPods, "default", "p").(*api.Pod)
			r := h.del(rPods, "default", "p", tc.pre(p))
			if tc.reason != "" {
				if api.ReasonOf(r.Err) != tc.reason || !strings.Contains(r.Err.Error(), tc.contains) {
					t.Fatalf("err %v, want %s containing %q", r.Err, tc.reason, tc.contains)
				}
				h.get(rPods, "default", "p")
				return
			}
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			h.absent(rPods, "default", "p")
			want := strconv.FormatUint(h.idx, 10)
			if r.Object.GetObjectMeta().ResourceVersion != want || !strings.Contains(string(r.Raw), `"resourceVersion":"`+want+`"`) {
				t.Fatalf("deleted object rv %s raw %s, want rv %s", r.Object.GetObjectMeta().ResourceVersion, r.Raw, want)
			}
		})
	}
	h := newHarness(t, Options{})
	if r := h.del(rNodes, "", "ghost", Preconditions{}); !api.IsNotFound(r.Err) {
		t.Fatalf("delete of a missing node: %v, want NotFound", r.Err)
	}
}

func TestFinalizers(t *testing.T) {
	h := newHarness(t, Options{})
	h.mustCreate(newNamespace("default"))
	p := newPod("default", "p", "", nil)
	p.Finalizers = []string{"example.com/a", "example.com/b"}
	h.mustCreate(p)

	r := h.del(rPods, "default", "p", Preconditions{})
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	marked := h.get(rPods, "default", "p").(*api.Pod)
	if marked.DeletionTimestamp == nil || !marked.DeletionTimestamp.Equal(t0.Add(time.Hour)) {
		t.Fatalf("deletionTimestamp %v, want %v", marked.DeletionTimestamp, t0.Add(time.Hour))
	}
	// A second delete keeps the first deletionTimestamp and version.
	h.apply(DeleteCmd(rPods, "default", "p", Preconditions{}, t0.Add(2*time.Hour)))
	if again := h.get(rPods, "default", "p"); again != api.Object(marked) {
		t.Fatal("second delete changed the marked object")
	}
	// An update cannot clear the deletionTimestamp.
	in := *marked
	in.DeletionTimestamp = nil
	in.Finalizers = []string{"example.com/b"}
	h.ok(func() []byte { c, _ := UpdateCmd(&in, ""); return c }())
	kept := h.get(rPods, "default", "p").(*api.Pod)
	if kept.DeletionTimestamp == nil || len(kept.Finalizers) != 1 {
		t.Fatalf("after removing one finalizer: %+v", kept.ObjectMeta)
	}
	// Removing the last finalizer removes the object.
	in = *kept
	in.Finalizers = nil
	if r := h.update(&in, ""); r.Err != nil {
		t.Fatal(r.Err)
	}
	h.absent(rPods, "default", "p")
}

func TestNamespaceCascade(t *testing.T) {
	h := newHarness(t, Options{})
	h.mustCreate(newNamespace("team"))
	h.mustCreate(newNamespace("other"))
	h.mustCreate(newPod("team", "a", "", nil))
	h.mustCreate(newPod("team", "b", "n1", nil))
	h.mustCreate(newEvent("team", "ev", t0))
	h.mustCreate(&api.Service{ObjectMeta: meta("svc", "team", nil)})
	held := newPod("team", "held", "", nil)
	held.Finalizers = []string{"example.com/hold"}
	h.mustCreate(held)
	h.mustCreate(newPod("other", "keep", "", nil))

	r := h.del(rNamespaces, "", "team", Preconditions{})
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	for _, c := range []struct {
		r    *api.Resource
		name string
	}{{rPods, "a"}, {rEvents, "ev"}, {rServices, "svc"}} {
		h.absent(c.r, "team", c.name)
	}
	// The pod a node runs terminates first (issue 10 item 1); its node
	// finishes the delete.
	if b := h.get(rPods, "team", "b").(*api.Pod); b.DeletionTimestamp == nil {
		t.Fatal("bound pod of a deleted namespace not terminating")
	}
	h.ok(DeleteGraceCmd(rPods, "team", "b", Preconditions{}, t0, 0))
	h.get(rPods, "other", "keep")
	ns := h.get(rNamespaces, "", "team").(*api.Namespace)
	if ns.Status.Phase != api.NamespaceTerminating || ns.DeletionTimestamp == nil {
		t.Fatalf("namespace %+v, want Terminating with a deletionTimestamp", ns.Status)
	}
	hp := h.get(rPods, "team", "held").(*api.Pod)
	if hp.DeletionTimestamp == nil {
		t.Fatal("finalized pod not marked deleted")
	}
	// Status and main writes keep Terminating.
	nsIn := *ns
	nsIn.Status.Phase = api.NamespaceActive
	h.update(&nsIn, SubresourceMain)
	if got := h.get(rNamespaces, "", "team").(*api.Namespace).Status.Phase; got != api.NamespaceTerminating {
		t.Fatalf("phase after update %q", got)
	}
	// Removing the pod's finalizer lets the pod, then the namespace, go.
	in := *hp
	in.Finalizers = nil
	if r := h.update(&in, ""); r.Err != nil {
		t.Fatal(r.Err)
	}
	h.absent(rPods, "team", "held")
	h.absent(rNamespaces, "", "team")
	h.get(rNamespaces, "", "other")
}

func TestNamespaceEmptyDeletesAtOnce(t *testing.T) {
	h := newHarness(t, Options{})
	h.mustCreate(newNamespace("empty"))
	r := h.del(rNamespaces, "", "empty", Preconditions{})
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	h.absent(rNamespaces, "", "empty")
	if ns := r.Object.(*api.Namespace); ns.Status.Phase != api.NamespaceTerminating {
		t.Fatalf("last state phase %q, want Terminating", ns.Status.Phase)
	}
}

func TestNamespaceFinalizerHoldsNamespace(t *testing.T) {
	h := newHarness(t, Options{})
	ns := newNamespace("fin", "example.com/ns")
	ns.Spec.Finalizers = []string{"kubernetes"}
	h.mustCreate(ns)
	h.mustCreate(newPod("fin", "p", "", nil))
	h.del(rNamespaces, "", "fin", Preconditions{})
	h.absent(rPods, "fin", "p")
	got := h.get(rNamespaces, "", "fin").(*api.Namespace)
	in := *got
	in.Finalizers = nil
	if r := h.update(&in, ""); r.Err != nil {
		t.Fatal(r.Err)
	}
	// spec.finalizers "kubernetes" stands for the content, which is gone.
	h.absent(rNamespaces, "", "fin")
}

func TestExpireEvents(t *testing.T) {
	h := newHarness(t, Options{})
	h.mustCreate(newNamespace("default"))
	if !h.s.OldestEventTime().IsZero() {
		t.Fatal("OldestEventTime of an empty store is not zero")
	}
	h.mustCreate(newEvent("default", "old", t0.Add(-2*time.Hour)))
	h.mustCreate(newEvent("default", "mid", t0.Add(-time.Hour)))
	h.mustCreate(newEvent("default", "new", t0))
	noLast := newEvent("default", "created-only", time.Time{})
	noLast.LastTimestamp = nil
	noLast.CreationTimestamp = api.NewTime(t0.Add(-3 * time.Hour))
	h.mustCreate(noLast)

	if got := h.s.OldestEventTime(); !got.Equal(t0.Add(-3 * time.Hour)) {
		t.Fatalf("OldestEventTime %v, want %v", got, t0.Add(-3*time.Hour))
	}
	h.ok(ExpireEventsCmd(t0.Add(-30 * time.Minute)))
	h.absent(rEvents, "default", "old")
	h.absent(rEvents, "default", "mid")
	h.absent(rEvents, "default", "created-only")
	h.get(rEvents, "default", "new")
	if got := h.s.OldestEventTime(); !got.Equal(t0) {
		t.Fatalf("OldestEventTime %v, want %v", got, t0)
	}
}

func TestBatch(t *testing.T) {
	h := newHarness(t, Options{})
	h.mustCreate(newNamespace("default"))
	h.mustCreate(newPod("default", "a", "", nil))
	bind := newPod("default", "a", "n1", nil)
	c1, _ := CreateCmd(newPod("default", "b", "", nil))
	c2, _ := UpdateCmd(bind, "")
	c3, _ := CreateCmd(newPod("default", "a", "", nil)) // exists
	c4 := DeleteCmd(rPods, "default", "b", Preconditions{}, t0)
	res, ok := h.applyAny(BatchCmd(c1, c2, c3, c4)).([]*Result)
	if !ok || len(res) != 4 {
		t.Fatalf("batch returned %T", res)
	}
	if res[0].Err != nil || res[1].Err != nil || !api.IsAlreadyExists(res[2].Err) || res[3].Err != nil {
		t.Fatalf("batch errors: %v %v %v %v", res[0].Err, res[1].Err, res[2].Err, res[3].Err)
	}
	rv := strconv.FormatUint(h.idx, 10)
	a := h.get(rPods, "default", "a").(*api.Pod)
	if a.Spec.NodeName != "n1" || a.ResourceVersion != rv {
		t.Fatalf("bound pod %s rv %s, want n1 at %s", a.Spec.NodeName, a.ResourceVersion, rv)
	}
	if res[0].Object.GetObjectMeta().ResourceVersion != rv {
		t.Fatal("batch commands do not share the entry's index")
	}
	h.absent(rPods, "default", "b")

	nested := h.applyAny(BatchCmd(BatchCmd(c1)))
	if rs, ok := nested.([]*Result); !ok || rs[0].Err == nil || rs[0].Fatal() {
		t.Fatalf("nested batch: %#v", nested)
	}
}

func TestUnknownCommands(t *testing.T) {
	c, _ := CreateCmd(newPod("default", "x", "", nil))
	unknownPlural := append([]byte{cmdCreate}, appendString(nil, "widgets")...)
	unknownPlural = append(unknownPlural, "{}"...)
	tests := []struct {
		name    string
		cmd     []byte
		fatal   bool
		applied bool // whether pod default/x exists afterwards
		log     string
	}{
		{name: "ignorable unknown is skipped", cmd: []byte{0x80 | 0x42, 1, 2, 3}, log: "unknown type marked ignorable"},
		{name: "required unknown is fatal", cmd: []byte{0x42, 1, 2, 3}, fatal: true, log: "must stop and be upgraded"},
		{name: "unknown resource is fatal", cmd: unknownPlural, fatal: true, log: "widgets"},
		{name: "batch with required unknown applies nothing", cmd: BatchCmd(c, []byte{0x43}), fatal: true, log: "0x43"},
		{name: "batch with ignorable unknown applies the rest", cmd: BatchCmd([]byte{0x80 | 0x43}, c), applied: true},
		{name: "empty command", cmd: nil},
		{name: "truncated create", cmd: c[:2]},
		{name: "truncated delete", cmd: DeleteCmd(rPods, "default", "x", Preconditions{}, t0)[:5]},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Options{})
			h.mustCreate(newNamespace("default"))
			out := h.applyAny(tc.cmd)
			var r *Result
			switch v := out.(type) {
			case *Result:
				r = v
			case []*Result:
				r = v[0]
			}
			if r.Fatal() != tc.fatal {
				t.Fatalf("Fatal() = %v (err %v), want %v", r.Fatal(), r.Err, tc.fatal)
			}
			if tc.fatal && !strings.Contains(r.Err.Error(), "newer server") {
				t.Fatalf("fatal error does not say why: %v", r.Err)
			}
			if h.s.AppliedIndex() != h.idx {
				t.Fatal("applied index did not move")
			}
			_, _, err := h.s.Get(rPods, "default", "x")
			if (err == nil) != tc.applied {
				t.Fatalf("pod exists = %v, want %v", err == nil, tc.applied)
			}
			if tc.log != "" && !strings.Contains(h.log.String(), tc.log) {
				t.Fatalf("log %q does not mention %q", h.log.String(), tc.log)
			}
			// After a fatal entry the store applies nothing more.
			later, _ := CreateCmd(newPod("default", "later", "", nil))
			if r := h.apply(later); r.Fatal() != tc.fatal || (h.s.Failed() != nil) != tc.fatal {
				t.Fatalf("after the entry: Fatal() %v, Failed() %v; want fatal %v", r.Fatal(), h.s.Failed(), tc.fatal)
			}
			if _, _, err := h.s.Get(rPods, "default", "later"); (err == nil) == tc.fatal {
				t.Fatalf("pod created after the entry: %v, want created = %v", err == nil, !tc.fatal)
			}
		})
	}
}

// TestMalformedNeverPanics applies every prefix of valid commands and a
// few corrupted ones: Apply must return an error result, never panic.
func TestMalformedNeverPanics(t *testing.T) {
	c1, _ := CreateCmd(newPod("default", "x", "", nil))
	c2, _ := UpdateCmd(newPod("default", "x", "", nil), SubresourceStatus)
	c3 := BindCmd("default", "x", Binding{NodeName: "n1", UID: "u", ResourceVersion: "2", Now: t0, Message: "m"})
	cmds := [][]byte{c1, c2, DeleteCmd(rPods, "default", "x", Preconditions{UID: "u"}, t0), ExpireEventsCmd(t0), BatchCmd(c1, c2), c3, BatchCmd(c1, c3)}
	h := newHarness(t, Options{})
	h.mustCreate(newNamespace("default"))
	for _, c := range cmds {
		for i := range len(c) {
			h.applyAny(c[:i])
			bad := append([]byte(nil), c...)
			bad[i] ^= 0xff
			h.applyAny(bad)
		}
	}
}

func TestRVPatchMatchesEncoding(t *testing.T) {
	for _, obj := range []api.Object{bigPod("default", "p", "n1"), newNamespace("x"), newNode("n")} {
		obj.GetObjectMeta().ResourceVersion = "12"
		tm := obj.GetTypeMeta()
		r := api.ResourceOf(obj)
		tm.APIVersion, tm.Kind = r.APIVersion(), r.Kind
		raw, _ := encode(obj)
		c, patched, err := withRV(obj, raw, 12345)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := encode(c)
		if string(patched) != string(want) {
			t.Fatalf("patched %s\nwant    %s", patched, want)
		}
		if obj.GetObjectMeta().ResourceVersion != "12" {
			t.Fatal("withRV changed the stored object")
		}
	}
}

func TestWaitForIndex(t *testing.T) {
	h := newHarness(t, Options{})
	done := make(chan error, 1)
	go func() { done <- h.s.WaitForIndex(ctxT(t), 3) }()
	for range 3 {
		h.apply(ExpireEventsCmd(t0))
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WaitForIndex did not return after index 3 was applied")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := h.s.WaitForIndex(ctx, 100); err == nil {
		t.Fatal("WaitForIndex on a cancelled context returned nil")
	}
}

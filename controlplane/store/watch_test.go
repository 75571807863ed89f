package store

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
)

func TestWatchFromRV(t *testing.T) {
	h := newHarness(t, Options{})
	h.mustCreate(newNamespace("default"))
	h.mustCreate(newPod("default", "a", "", nil))
	from := h.idx
	h.mustCreate(newPod("default", "b", "", nil))
	p := h.get(rPods, "default", "a").(*api.Pod)
	in := *p
	in.Labels = map[string]string{"x": "1"}
	h.ok(func() []byte { c, _ := UpdateCmd(&in, ""); return c }())
	h.del(rPods, "default", "b", Preconditions{})

	ch, err := h.s.Watch(ctxT(t), rPods, "default", ListOptions{}, from, false)
	if err != nil {
		t.Fatal(err)
	}
	evs := expectEvents(t, ch, "ADDED:default/b", "MODIFIED:default/a", "DELETED:default/b")
	if evs[2].RV != h.idx || evs[2].Object.GetObjectMeta().ResourceVersion != strconv.FormatUint(h.idx, 10) {
		t.Fatalf("DELETED event rv %d / %s, want %d", evs[2].RV, evs[2].Object.GetObjectMeta().ResourceVersion, h.idx)
	}
	// Live events follow the replay.
	h.mustCreate(newPod("default", "c", "", nil))
	expectEvents(t, ch, "ADDED:default/c")
}

func TestWatchNamespaceAndResourceIsolation(t *testing.T) {
	h := newHarness(t, Options{})
	h.mustCreate(newNamespace("a"))
	h.mustCreate(newNamespace("b"))
	ch, err := h.s.Watch(ctxT(t), rPods, "b", ListOptions{}, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	h.mustCreate(newPod("a", "x", "", nil))
	h.mustCreate(newEvent("b", "ev", t0))
	h.mustCreate(newPod("b", "y", "", nil))
	expectEvents(t, ch, "ADDED:b/y")
}

func TestWatchTooOld(t *testing.T) {
	h := newHarness(t, Options{WatchWindow: 3})
	h.mustCreate(newNamespace("default"))
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		h.mustCreate(newPod("default", n, "", nil))
	}
	// Pods were created at 2..6; the window holds 4, 5, 6.
	_, err := h.s.Watch(ctxT(t), rPods, "", ListOptions{}, 2, false)
	se, ok := err.(*api.StatusError)
	if !ok || se.Code() != http.StatusGone || !strings.Contains(se.Error(), "too old resource version: 2 (3)") {
		t.Fatalf("watch from 2: %v, want 410 too old resource version: 2 (3)", err)
	}
	ch, err := h.s.Watch(ctxT(t), rPods, "", ListOptions{}, 3, false)
	if err != nil {
		t.Fatalf("watch from the horizon: %v", err)
	}
	expectEvents(t, ch, "ADDED:default/c", "ADDED:default/d", "ADDED:default/e")
	// The namespaces window is separate: busy pods do not push it out.
	if _, err := h.s.Watch(ctxT(t), rNamespaces, "", ListOptions{}, 1, false); err != nil {
		t.Fatalf("namespaces watch from 1: %v", err)
	}
}

func TestWatchSelectorEnterLeave(t *testing.T) {
	h := newHarness(t, Options{})
	h.mustCreate(newNamespace("default"))
	h.mustCreate(newPod("default", "p", "", map[string]string{"app": "web"}))
	ch, err := h.s.Watch(ctxT(t), rPods, "", ListOptions{Label: labelEq(map[string]string{"app": "db"})}, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	relabel := func(v string) {
		t.Helper()
		p := h.get(rPods, "default", "p").(*api.Pod)
		in := *p
		in.Labels = map[string]string{"app": v}
		in.Annotations = map[string]string{"step": strconv.FormatUint(h.idx, 10)}
		h.ok(func() []byte { c, _ := UpdateCmd(&in, ""); return c }())
	}
	relabel("db")   // enters: ADDED
	relabel("db")   // still in: MODIFIED
	relabel("web")  // leaves: DELETED
	relabel("web2") // outside: nothing
	h.del(rPods, "default", "p", Preconditions{})
	h.mustCreate(newPod("default", "marker", "", map[string]string{"app": "db"}))
	evs := expectEvents(t, ch, "ADDED:default/p", "MODIFIED:default/p", "DELETED:default/p", "ADDED:default/marker")
	if evs[2].RV != 5 {
		t.Fatalf("leave event rv %d, want 5", evs[2].RV)
	}
}

func TestWatchSendInitial(t *testing.T) {
	h := newHarness(t, Options{})
	h.mustCreate(newNamespace("default"))
	h.mustCreate(newPod("default", "b", "", map[string]string{"app": "web"}))
	h.mustCreate(newPod("default", "a", "", map[string]string{"app": "web"}))
	h.mustCreate(newPod("default", "c", "", map[string]string{"app": "db"}))
	ch, err := h.s.Watch(ctxT(t), rPods, "default", ListOptions{Label: labelEq(map[string]string{"app": "web"})}, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	h.mustCreate(newPod("default", "d", "", map[string]string{"app": "web"}))
	evs := expectEvents(t, ch, "ADDED:default/a", "ADDED:default/b", "ADDED:default/d")
	if evs[0].RV != 4 || evs[2].RV != 5 {
		t.Fatalf("initial rv %d, live rv %d; want 4 and 5", evs[0].RV, evs[2].RV)
	}
}

func TestWatchSlowWatcherDropped(t *testing.T) {
	h := newHarness(t, Options{WatcherBuffer: 10})
	h.mustCreate(newNamespace("default"))
	slow, err := h.s.Watch(ctxT(t), rPods, "", ListOptions{}, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	fast, err := h.s.Watch(ctxT(t), rPods, "", ListOptions{}, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	// Nobody reads slow; fast keeps up, in step with Apply. Neither may
	// hold Apply up, and only slow is dropped. 200 events is more than slow
	// can hold: its pending limit, its channel and the one in hand.
	errc := make(chan error, 1)
	go func() {
		for i := range 200 {
			cmd, _ := CreateCmd(newPod("default", "p"+strconv.Itoa(i), "", nil))
			h.idx++
			if r := h.s.Apply(h.idx, cmd).(*Result); r.Err != nil {
				errc <- r.Err
				return
			}
			select {
			case ev := <-fast:
				if ev.Type != Added {
					errc <- fmt.Errorf("fast watcher got %s at %d", describe(ev), i)
					return
				}
			case <-time.After(5 * time.Second):
				errc <- fmt.Errorf("fast watcher got nothing at %d", i)
				return
			}
		}
		errc <- nil
	}()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Apply blocked on a slow watcher")
	}
	last := waitClosed(t, slow)
	if last.Type != Error || last.Err == nil || last.Err.Code() != http.StatusGone {
		t.Fatalf("slow watcher's last event %+v, want ERROR 410", last)
	}
	if !strings.Contains(string(last.Raw), `"code":410`) {
		t.Fatalf("ERROR raw %s", last.Raw)
	}
}

func TestWatchClosesOnContext(t *testing.T) {
	h := newHarness(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := h.s.Watch(ctx, rNodes, "", ListOptions{}, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	waitClosed(t, ch)
	// The watcher leaves the table before its channel closes, so Apply does
	// no more work for it.
	tb := h.s.byPlural["nodes"]
	tb.wmu.Lock()
	n := len(tb.watchers)
	tb.wmu.Unlock()
	if n != 0 {
		t.Fatal("watcher still registered after its context ended")
	}
}

func TestWatchNodeIndex(t *testing.T) {
	h := newHarness(t, Options{})
	h.mustCreate(newNamespace("default"))
	ch, err := h.s.Watch(ctxT(t), rPods, "", ListOptions{Field: fieldSel(t, "spec.nodeName=n1")}, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	h.mustCreate(newPod("default", "elsewhere", "n2", nil))
	h.mustCreate(newPod("default", "p", "", nil))
	p := h.get(rPods, "default", "p").(*api.Pod)
	bound := *p
	bound.Spec.NodeName = "n1"
	h.ok(func() []byte { c, _ := UpdateCmd(&bound, ""); return c }())
	moved := *h.get(rPods, "default", "p").(*api.Pod)
	moved.Spec.NodeName = "n3"
	h.ok(func() []byte { c, _ := UpdateCmd(&moved, ""); return c }())
	h.mustCreate(newPod("default", "marker", "n1", nil))
	expectEvents(t, ch, "ADDED:default/p", "DELETED:default/p", "ADDED:default/marker")
	// The watcher sits in the node's list: pod changes on other nodes do
	// not visit it.
	tb := h.s.byPlural["pods"]
	tb.wmu.Lock()
	indexed, general := len(tb.nodeWatchers["n1"]), len(tb.watchers)
	tb.wmu.Unlock()
	if indexed != 1 || general != 0 {
		t.Fatalf("node watchers %d, general watchers %d; want 1 and 0", indexed, general)
	}

	items, _, err := h.s.List(rPods, "", ListOptions{Field: fieldSel(t, "spec.nodeName=n1")})
	if err != nil || len(items) != 1 || items[0].Object.GetObjectMeta().Name != "marker" {
		t.Fatalf("list by node: %v %v", items, err)
	}
}

func TestRestoreClosesWatchers(t *testing.T) {
	h := newHarness(t, Options{})
	h.mustCreate(newNamespace("default"))
	data := snapshotBytes(t, h.s)
	ch, err := h.s.Watch(ctxT(t), rPods, "", ListOptions{}, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	restoreInto(t, h.s, data, 1)
	last := waitClosed(t, ch)
	if last.Type != Error || last.Err.Code() != http.StatusGone {
		t.Fatalf("last event after restore %+v, want ERROR 410", last)
	}
	if _, err := h.s.Watch(ctxT(t), rPods, "", ListOptions{}, 0, false); err != nil {
		t.Fatal(err)
	}
	// History before the restore is gone.
	if _, err := h.s.Watch(ctxT(t), rNamespaces, "", ListOptions{}, 0, false); err != nil {
		t.Fatal(err)
	}
}

func TestWatchResumesAfterWholeBatch(t *testing.T) {
	h := newHarness(t, Options{})
	h.mustCreate(newNamespace("default"))
	c1, _ := CreateCmd(newPod("default", "a", "", nil))
	c2, _ := CreateCmd(newPod("default", "b", "", nil))
	h.applyAny(BatchCmd(c1, c2))
	entry := h.idx
	h.mustCreate(newPod("default", "c", "", nil))

	before, err := h.s.Watch(ctxT(t), rPods, "", ListOptions{}, entry-1, false)
	if err != nil {
		t.Fatal(err)
	}
	evs := expectEvents(t, before, "ADDED:default/a", "ADDED:default/b", "ADDED:default/c")
	if evs[0].RV != entry || evs[1].RV != entry {
		t.Fatal("batch events do not carry the entry's index")
	}
	after, err := h.s.Watch(ctxT(t), rPods, "", ListOptions{}, entry, false)
	if err != nil {
		t.Fatal(err)
	}
	expectEvents(t, after, "ADDED:default/c")
}

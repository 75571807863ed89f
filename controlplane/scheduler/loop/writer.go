package loop

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/controller"
)

// writeReq is what the writer should say on one pod: a PodScheduled=False
// condition and, for failed attempts, a FailedScheduling event. Requests
// for a pod that is still waiting are merged: the newest message wins,
// and repeats of one message add to the event's count.
type writeReq struct {
	uid       string
	reason    string
	message   string
	scheduler string
	event     bool
	repeats   int32
	write     bool
	// forget drops the writer's memory of the pod (it was bound or is
	// gone) before any write.
	forget bool
}

// eventMemo is the last FailedScheduling event written for a pod, so that
// a repeat updates it instead of adding another.
type eventMemo struct {
	uid     string
	message string
	event   *api.Event
}

// writer makes the loop's status and event writes from one goroutine, so
// that a slow write (a raft round) never holds up scheduling.
type writer struct {
	client controller.Client
	log    *slog.Logger
	now    func() time.Time

	mu    sync.Mutex
	order []podKey
	reqs  map[podKey]*writeReq
	wake  chan struct{}

	memo map[podKey]*eventMemo // the writer goroutine's own
}

func newWriter(l *Loop) *writer {
	return &writer{
		client: l.client,
		log:    l.log,
		now:    l.now,
		reqs:   map[podKey]*writeReq{},
		wake:   make(chan struct{}, 1),
		memo:   map[podKey]*eventMemo{},
	}
}

// post asks for a write about pod key.
func (w *writer) post(key podKey, req writeReq) {
	w.mu.Lock()
	cur := w.slot(key)
	if cur.write && cur.uid == req.uid && cur.reason == req.reason && cur.message == req.message {
		cur.repeats++
	} else {
		forget := cur.forget
		*cur = req
		cur.write, cur.repeats, cur.forget = true, 1, forget
	}
	w.mu.Unlock()
	w.signal()
}

// forget drops what the writer holds of pod key, and any write for it
// not made yet.
func (w *writer) forget(key podKey) {
	w.mu.Lock()
	cur := w.slot(key)
	*cur = writeReq{forget: true}
	w.mu.Unlock()
	w.signal()
}

func (w *writer) slot(key podKey) *writeReq {
	cur := w.reqs[key]
	if cur == nil {
		cur = &writeReq{}
		w.reqs[key] = cur
		w.order = append(w.order, key)
	}
	return cur
}

func (w *writer) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *writer) next() (podKey, writeReq, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.order) == 0 {
		return podKey{}, writeReq{}, false
	}
	key := w.order[0]
	w.order[0] = podKey{}
	w.order = w.order[1:]
	if len(w.order) == 0 {
		w.order = nil
	}
	req := w.reqs[key]
	delete(w.reqs, key)
	return key, *req, true
}

func (w *writer) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		}
		for ctx.Err() == nil {
			key, req, ok := w.next()
			if !ok {
				break
			}
			w.do(ctx, key, req)
		}
	}
}

func (w *writer) do(ctx context.Context, key podKey, req writeReq) {
	if req.forget {
		delete(w.memo, key)
	}
	if !req.write {
		return
	}
	pod := w.current(key, req.uid)
	if pod == nil {
		return
	}
	if !w.setCondition(ctx, key, pod, req) {
		return
	}
	if req.event {
		w.recordEvent(ctx, key, pod, req)
	}
}

// current returns the stored pod if it is still the one the request is
// about and still waits for a node.
func (w *writer) current(key podKey, uid string) *api.Pod {
	obj, err := w.client.Get(podsRes, key.namespace, key.name)
	if err != nil {
		if !api.IsNotFound(err) {
			w.log.Warn("cannot read pod to report why it is pending", "pod", key.namespace+"/"+key.name, "err", err)
		}
		return nil
	}
	pod, ok := obj.(*api.Pod)
	if !ok || pod.UID != uid || pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil {
		return nil
	}
	return pod
}

// setCondition writes PodScheduled=False with the request's reason and
// message unless the pod already says so; it reports whether the pod is
// still there to write about.
func (w *writer) setCondition(ctx context.Context, key podKey, pod *api.Pod, req writeReq) bool {
	for range 3 {
		var prev *api.PodCondition
		for i := range pod.Status.Conditions {
			if pod.Status.Conditions[i].Type == api.PodScheduled {
				prev = &pod.Status.Conditions[i]
			}
		}
		if prev != nil && prev.Status == api.ConditionFalse && prev.Reason == req.reason && prev.Message == req.message {
			return true
		}
		obj, err := controller.Copy(pod)
		if err != nil {
			w.log.Warn("cannot copy pod", "pod", key.namespace+"/"+key.name, "err", err)
			return false
		}
		cp := obj.(*api.Pod)
		cond := api.PodCondition{Type: api.PodScheduled, Status: api.ConditionFalse, Reason: req.reason, Message: req.message}
		if prev != nil && prev.Status == api.ConditionFalse && prev.LastTransitionTime != nil {
			cond.LastTransitionTime = prev.LastTransitionTime
		} else {
			cond.LastTransitionTime = api.NewTime(w.now())
		}
		replaced := false
		for i := range cp.Status.Conditions {
			if cp.Status.Conditions[i].Type == api.PodScheduled {
				cp.Status.Conditions[i] = cond
				replaced = true
			}
		}
		if !replaced {
			cp.Status.Conditions = append(cp.Status.Conditions, cond)
		}
		_, err = w.client.UpdateStatus(ctx, cp)
		switch {
		case err == nil:
			return true
		case api.IsConflict(err):
			// Changed since read (bound, perhaps): read it again.
			if pod = w.current(key, req.uid); pod == nil {
				return false
			}
		case api.IsNotFound(err):
			return false
		default:
			w.log.Warn("cannot write why a pod is pending", "pod", key.namespace+"/"+key.name, "err", err)
			return false
		}
	}
	return true
}

// recordEvent adds a FailedScheduling event, or bumps the count of the
// last one when the message is the same.
func (w *writer) recordEvent(ctx context.Context, key podKey, pod *api.Pod, req writeReq) {
	now := api.NewTime(w.now())
	m := w.memo[key]
	if m != nil && m.uid == pod.UID && m.message == req.message {
		// Our own event: a shallow copy with new top-level values leaves
		// the stored one untouched.
		cp := *m.event
		cp.Count += req.repeats
		cp.LastTimestamp = now
		out, err := w.client.Update(ctx, &cp)
		if err == nil {
			if ev, ok := out.(*api.Event); ok {
				m.event = ev
			}
			return
		}
		if !api.IsNotFound(err) && !api.IsConflict(err) {
			w.log.Warn("cannot update event", "pod", key.namespace+"/"+key.name, "err", err)
			return
		}
		// Expired or changed by someone else: start a new one.
	}
	ev := &api.Event{
		ObjectMeta: api.ObjectMeta{Name: eventName(pod.Name), Namespace: pod.Namespace},
		InvolvedObject: api.ObjectReference{
			Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID,
		},
		Reason:         EventFailedScheduling,
		Message:        req.message,
		Source:         api.EventSource{Component: req.scheduler},
		FirstTimestamp: now,
		LastTimestamp:  now,
		Count:          req.repeats,
		Type:           api.EventTypeWarning,
	}
	out, err := w.client.Create(ctx, ev)
	if err != nil {
		w.log.Warn("cannot record event", "pod", key.namespace+"/"+key.name, "err", err)
		return
	}
	stored, ok := out.(*api.Event)
	if !ok {
		return
	}
	w.memo[key] = &eventMemo{uid: pod.UID, message: req.message, event: stored}
}

// eventName is "podname.<16 hex digits>", cut to the 253 characters a
// name may have.
func eventName(pod string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	const maxName = 253
	if len(pod) > maxName-1-2*len(b) {
		pod = strings.TrimRight(pod[:maxName-1-2*len(b)], "-.")
	}
	return pod + "." + hex.EncodeToString(b[:])
}

package agent

import (
	"context"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// Event types.
const (
	eventNormal  = "Normal"
	eventWarning = "Warning"
)

// eventRepeat is how long the same event of one container is not
// recorded again: a crash loop must not fill the store with copies.
const eventRepeat = 30 * time.Second

// podEvent records an Event about a pod's container, as the kubelet does
// (Created, Started, Failed, BackOff, Killing), so `describe pod` shows
// what happened on the node.
func (a *Agent) podEvent(pod *api.Pod, container, typ, reason, msg string) {
	ref := api.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: string(pod.UID)}
	a.record(ref, string(pod.UID)+"/"+container+"/"+reason, typ, reason, msg)
}

// nodeEvent records an Event about this node.
func (a *Agent) nodeEvent(typ, reason, msg string) {
	ref := api.ObjectReference{Kind: "Node", Name: a.cfg.NodeName}
	a.record(ref, "node/"+reason, typ, reason, msg)
}

// record queues an Event about ref, unless one with the same key was
// recorded less than eventRepeat ago. It never blocks the caller: events
// go to one sender and are dropped when the queue is full or the control
// plane is away.
func (a *Agent) record(ref api.ObjectReference, key, typ, reason, msg string) {
	now := a.now()
	a.eventsMu.Lock()
	if last, ok := a.eventLast[key]; ok && now.Sub(last) < eventRepeat {
		a.eventsMu.Unlock()
		return
	}
	a.eventLast[key] = now
	a.eventsMu.Unlock()
	ns := ref.Namespace
	if ns == "" {
		ns = "default" // events about cluster objects, as the controllers do
	}
	t := api.NewTime(now)
	ev := &api.Event{
		ObjectMeta:     api.ObjectMeta{GenerateName: ref.Name + ".", Namespace: ns},
		InvolvedObject: ref,
		Reason:         reason,
		Message:        msg,
		Source:         api.EventSource{Component: "outpost-agent", Host: a.cfg.NodeName},
		FirstTimestamp: t,
		LastTimestamp:  t,
		Count:          1,
		Type:           typ,
	}
	select {
	case a.events <- ev:
	default:
		a.log.Debug("event dropped: queue full", "object", ref.Kind+" "+ref.Name, "reason", reason)
	}
}

// heldEvents is how many events the agent keeps while the control plane
// is away; the oldest go first when more come.
const heldEvents = 256

// sendEvents writes queued events until ctx ends. While the control
// plane is away they are held (the newest heldEvents), so that what the
// agent did meanwhile, fencing pods above all, is told when it is back.
func (a *Agent) sendEvents(ctx context.Context) {
	var held []*api.Event
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	send := func(ev *api.Event) bool {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, _, err := a.cl.Create(rctx, ev)
		if err != nil {
			a.log.Debug("event not recorded", "reason", ev.Reason, "err", err)
		}
		return err == nil || api.ReasonOf(err) != "" && api.ReasonOf(err) != api.ReasonServiceUnavailable && api.ReasonOf(err) != api.ReasonTimeout
	}
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-a.events:
			held = append(held, ev)
			if len(held) > heldEvents {
				held = held[len(held)-heldEvents:]
			}
		case <-tick.C:
		}
		for len(held) > 0 && a.online.Load() && ctx.Err() == nil {
			if !send(held[0]) {
				break
			}
			held = held[1:]
		}
	}
}

// forgetEvents drops the repeat guard of a pod that is gone.
func (a *Agent) forgetEvents(uid string) {
	a.eventsMu.Lock()
	defer a.eventsMu.Unlock()
	for k := range a.eventLast {
		if len(k) > len(uid) && k[:len(uid)] == uid && k[len(uid)] == '/' {
			delete(a.eventLast, k)
		}
	}
}

package agent

import (
	"context"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
	"github.com/outpost-edge/outpost/controlplane/events"
)

// Event types.
const (
	eventNormal  = "Normal"
	eventWarning = "Warning"
)

// eventRepeat is how often repeats of one event (a crash loop's
// BackOff) are written: more often they are counted in memory and
// written together, as one Event whose count grows (events.Correlator).
const eventRepeat = 30 * time.Second

// podEvent records an Event about a pod's container, as the kubelet does
// (Created, Started, Failed, BackOff, Killing), so `describe pod` shows
// what happened on the node.
func (a *Agent) podEvent(pod *api.Pod, container, typ, reason, msg string) {
	ref := api.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: string(pod.UID)}
	a.record(ref, typ, reason, msg)
}

// nodeEvent records an Event about this node.
func (a *Agent) nodeEvent(typ, reason, msg string) {
	ref := api.ObjectReference{Kind: "Node", Name: a.cfg.NodeName}
	a.record(ref, typ, reason, msg)
}

// record queues an Event about ref. It never blocks the caller: events
// go to one sender, which aggregates repeats (see sendEvents), and are
// dropped when the queue is full.
func (a *Agent) record(ref api.ObjectReference, typ, reason, msg string) {
	ns := ref.Namespace
	if ns == "" {
		ns = "default" // events about cluster objects, as the controllers do
	}
	t := api.NewTime(a.now())
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

// sendEvents writes queued events until ctx ends, through a Correlator:
// a repeat of an event recorded lately raises the stored Event's count.
// While the control plane is away events are held (the newest
// heldEvents, repeats folded into one), so that what the agent did
// meanwhile, fencing pods above all, is told when it is back.
func (a *Agent) sendEvents(ctx context.Context) {
	corr := events.New(eventSink{a.cl}, a.now)
	corr.MinInterval = eventRepeat
	var held []*api.Event
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	send := func(ev *api.Event) bool {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, err := corr.Record(rctx, ev)
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
			held = holdEvent(held, ev)
		case <-tick.C:
			if a.online.Load() {
				rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				if err := corr.Flush(rctx); err != nil {
					a.log.Debug("held event repeats not recorded", "err", err)
				}
				cancel()
			}
		}
		for len(held) > 0 && a.online.Load() && ctx.Err() == nil {
			if !send(held[0]) {
				break
			}
			held = held[1:]
		}
	}
}

// holdEvent adds ev to the events waiting to be sent: as a repeat of one
// already waiting (its count and last time raised), else at the end,
// dropping the oldest past heldEvents.
func holdEvent(held []*api.Event, ev *api.Event) []*api.Event {
	k := events.Key(ev)
	for _, h := range held {
		if events.Key(h) == k {
			h.Count += max(ev.Count, 1)
			h.LastTimestamp = ev.LastTimestamp
			return held
		}
	}
	held = append(held, ev)
	if len(held) > heldEvents {
		held = held[len(held)-heldEvents:]
	}
	return held
}

// eventSink is the API client as the Correlator's Sink.
type eventSink struct{ cl *client.Client }

func (s eventSink) Create(ctx context.Context, ev *api.Event) (*api.Event, error) {
	obj, _, err := s.cl.Create(ctx, ev)
	return events.AsEvent(obj, err)
}

func (s eventSink) Update(ctx context.Context, ev *api.Event) (*api.Event, error) {
	obj, _, err := s.cl.Update(ctx, ev)
	return events.AsEvent(obj, err)
}

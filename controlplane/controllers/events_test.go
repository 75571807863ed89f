package controllers

import (
	"context"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// The controllers' recorder aggregates as the agent does (issue 15 item
// 7): the same warning about one object five times over ten minutes is
// one Event with count 5; repeats within eventRepeat are written by the
// next flush, not lost.
func TestRecorderAggregatesRepeats(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	rec := newRecorder(e.f, slogDiscard(), e.clock.Now)
	node := &api.Node{ObjectMeta: api.ObjectMeta{Name: "n1", UID: "u1"}}
	first := e.clock.Now()
	for i := range 5 {
		if i > 0 {
			e.clock.Advance(150 * time.Second)
		}
		rec.event(ctx, node, "node-controller", api.EventTypeWarning, "NodeNotReady", "Node n1 status is now: NodeNotReady")
	}
	evs := e.events("n1", "NodeNotReady")
	if len(evs) != 1 || evs[0].Count != 5 || evs[0].LastTimestamp.Sub(evs[0].FirstTimestamp.Time) != 10*time.Minute ||
		evs[0].FirstTimestamp.Sub(first).Abs() > time.Second {
		t.Fatalf("events %+v, want one with count 5 over 10m", evs)
	}

	// Three quick repeats: held, then written by a flush after eventRepeat.
	for range 3 {
		rec.event(ctx, node, "node-controller", api.EventTypeWarning, "NodeNotReady", "Node n1 status is now: NodeNotReady")
	}
	if evs := e.events("n1", "NodeNotReady"); evs[0].Count != 5 {
		t.Fatalf("count %d right after quick repeats, want them held at 5", evs[0].Count)
	}
	e.clock.Advance(eventRepeat)
	if err := rec.corr.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if evs := e.events("n1", "NodeNotReady"); len(evs) != 1 || evs[0].Count != 8 {
		t.Fatalf("events %+v after flush, want one with count 8", evs)
	}
}

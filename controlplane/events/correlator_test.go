package events

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
)

var evRes = api.ResourceForKind("Event")

// memSink stores events by name, with resourceVersions and the API's
// conflict and not-found errors.
type memSink struct {
	mu      sync.Mutex
	rv      int
	events  map[string]*api.Event
	creates int
	updates int
	// unavailable fails updates as a server without a leader would.
	unavailable bool
}

func newMemSink() *memSink { return &memSink{events: map[string]*api.Event{}} }

func (s *memSink) Create(_ context.Context, ev *api.Event) (*api.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cp := *ev
	s.rv++
	cp.Name = fmt.Sprintf("%s.%d", ev.InvolvedObject.Name, s.rv)
	cp.ResourceVersion = strconv.Itoa(s.rv)
	s.events[cp.Name] = &cp
	s.creates++
	return &cp, nil
}

func (s *memSink) Update(_ context.Context, ev *api.Event) (*api.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.unavailable {
		return nil, &api.StatusError{Status: api.Status{Code: 503, Reason: api.ReasonServiceUnavailable, Message: "no leader"}}
	}
	cur, ok := s.events[ev.Name]
	if !ok {
		return nil, api.NewNotFound(evRes, ev.Name)
	}
	if cur.ResourceVersion != ev.ResourceVersion {
		return nil, api.NewConflict(evRes, ev.Name, "changed")
	}
	cp := *ev
	s.rv++
	cp.ResourceVersion = strconv.Itoa(s.rv)
	s.events[cp.Name] = &cp
	s.updates++
	return &cp, nil
}

func (s *memSink) all() []*api.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*api.Event
	for _, e := range s.events {
		out = append(out, e)
	}
	return out
}

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func backOff(pod, msg string) *api.Event {
	return &api.Event{
		ObjectMeta:     api.ObjectMeta{Namespace: "default", GenerateName: pod + "."},
		InvolvedObject: api.ObjectReference{Kind: "Pod", Namespace: "default", Name: pod, UID: "u-" + pod},
		Reason:         "BackOff", Message: msg, Type: api.EventTypeWarning,
		Source: api.EventSource{Component: "outpost-agent", Host: "n1"},
	}
}

// Five repeats over ten minutes are one Event with count 5, first seen at
// the first and last seen at the last (the "x5 over 10m" of describe).
func TestRepeatsAggregate(t *testing.T) {
	ctx := context.Background()
	sink := newMemSink()
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	c := New(sink, clk.now)
	start := clk.t
	for i := range 5 {
		if i > 0 {
			clk.t = clk.t.Add(150 * time.Second)
		}
		if _, err := c.Record(ctx, backOff("web", "Back-off restarting failed container")); err != nil {
			t.Fatal(err)
		}
	}
	evs := sink.all()
	if len(evs) != 1 {
		t.Fatalf("%d events stored, want 1 aggregated", len(evs))
	}
	ev := evs[0]
	if ev.Count != 5 || !ev.FirstTimestamp.Equal(start) || !ev.LastTimestamp.Time.Equal(start.Add(10*time.Minute)) {
		t.Errorf("count %d first %v last %v; want 5 over 10m from %v", ev.Count, ev.FirstTimestamp, ev.LastTimestamp, start)
	}

	// Another message, another object, another type, another source: new
	// Events each.
	other := []*api.Event{backOff("web", "another message"), backOff("db", "Back-off restarting failed container")}
	normal := backOff("web", "Back-off restarting failed container")
	normal.Type = api.EventTypeNormal
	host := backOff("web", "Back-off restarting failed container")
	host.Source.Host = "n2"
	for _, ev := range append(other, normal, host) {
		if _, err := c.Record(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(sink.all()); n != 5 {
		t.Errorf("%d events, want 5 (each differing event its own)", n)
	}

	// Past the window after the last repeat: a new Event.
	clk.t = clk.t.Add(DefaultWindow)
	if _, err := c.Record(ctx, backOff("web", "Back-off restarting failed container")); err != nil {
		t.Fatal(err)
	}
	if n := len(sink.all()); n != 6 {
		t.Errorf("%d events after the window, want 6", n)
	}
}

// An aggregated Event that expired (or that someone else changed) is
// replaced by a new one rather than failing.
func TestGoneEventIsRecreated(t *testing.T) {
	ctx := context.Background()
	sink := newMemSink()
	clk := &clock{t: time.Unix(1000, 0)}
	c := New(sink, clk.now)
	first, err := c.Record(ctx, backOff("web", "m"))
	if err != nil {
		t.Fatal(err)
	}
	sink.mu.Lock()
	delete(sink.events, first.Name)
	sink.mu.Unlock()
	clk.t = clk.t.Add(time.Minute)
	out, err := c.Record(ctx, backOff("web", "m"))
	if err != nil || out == nil || out.Name == first.Name || out.Count != 1 {
		t.Fatalf("after expiry: %+v, %v; want a new Event with count 1", out, err)
	}
	if _, err := c.Record(ctx, backOff("web", "m")); err != nil {
		t.Fatal(err)
	}
	if ev := sink.all(); len(ev) != 1 || ev[0].Count != 2 {
		t.Errorf("events %+v, want the new one counted on", ev)
	}
}

// Repeats faster than MinInterval are written together: by the next
// repeat after it, or by Flush; nothing is lost.
func TestMinIntervalHoldsRepeats(t *testing.T) {
	ctx := context.Background()
	sink := newMemSink()
	clk := &clock{t: time.Unix(1000, 0)}
	c := New(sink, clk.now)
	c.MinInterval = 30 * time.Second
	for range 10 {
		if _, err := c.Record(ctx, backOff("web", "m")); err != nil {
			t.Fatal(err)
		}
		clk.t = clk.t.Add(time.Second)
	}
	if sink.creates != 1 || sink.updates != 0 {
		t.Fatalf("%d creates %d updates within the interval, want 1 and 0", sink.creates, sink.updates)
	}
	if err := c.Flush(ctx); err != nil || sink.updates != 0 {
		t.Fatalf("flush before the interval wrote %d updates (%v)", sink.updates, err)
	}
	clk.t = clk.t.Add(30 * time.Second)
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	ev := sink.all()[0]
	if sink.updates != 1 || ev.Count != 10 || !ev.LastTimestamp.Time.Equal(time.Unix(1009, 0)) {
		t.Errorf("after flush: %d updates, count %d, last %v; want 1, 10, the last repeat's time", sink.updates, ev.Count, ev.LastTimestamp)
	}
	if err := c.Flush(ctx); err != nil || sink.updates != 1 {
		t.Errorf("a flush with nothing held wrote (%d updates, %v)", sink.updates, err)
	}
}

// Concurrent repeats of one key make one Event with every repeat counted.
func TestConcurrentRepeats(t *testing.T) {
	ctx := context.Background()
	sink := newMemSink()
	c := New(sink, nil)
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if _, err := c.Record(ctx, backOff("web", "m")); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if ev := sink.all(); len(ev) != 1 || ev[0].Count != 20 {
		t.Errorf("%d events (count %d), want 1 with count 20", len(ev), ev[0].Count)
	}
}

// A Record that read the clock, then waited for another Record's write
// of the same event, writes its repeat: without a MinInterval nothing may
// be held, however the two interleave (CI once saw a count of 19 for 20
// concurrent repeats). The clock makes the interleaving certain: the
// first Record's first reading waits until the second Record is done.
func TestRepeatAfterWaitingIsWritten(t *testing.T) {
	ctx := context.Background()
	sink := newMemSink()
	base := time.Unix(1000, 0)
	var calls atomic.Int32
	inFirst, release := make(chan struct{}), make(chan struct{})
	c := New(sink, func() time.Time {
		n := calls.Add(1)
		if n == 1 {
			close(inFirst)
			<-release
			return base
		}
		return base.Add(time.Duration(n) * time.Second)
	})
	first := make(chan *api.Event, 1)
	go func() {
		out, err := c.Record(ctx, backOff("web", "m"))
		if err != nil {
			t.Error(err)
		}
		first <- out
	}()
	<-inFirst
	if _, err := c.Record(ctx, backOff("web", "m")); err != nil {
		t.Fatal(err)
	}
	close(release)
	if out := <-first; out == nil {
		t.Error("the repeat that waited was held, with no MinInterval to keep")
	}
	if ev := sink.all(); len(ev) != 1 || ev[0].Count != 2 {
		counts := make([]int32, len(ev))
		for i, e := range ev {
			counts[i] = e.Count
		}
		t.Errorf("%d events (counts %v), want 1 with count 2", len(ev), counts)
	}
}

// A repeat whose write fails for a passing reason is counted and written
// by a later Flush, once: the caller is not told to record it again.
func TestFailedRepeatIsFlushedLater(t *testing.T) {
	ctx := context.Background()
	sink := newMemSink()
	clk := &clock{t: time.Unix(1000, 0)}
	c := New(sink, clk.now)
	if _, err := c.Record(ctx, backOff("web", "m")); err != nil {
		t.Fatal(err)
	}
	sink.unavailable = true
	clk.t = clk.t.Add(time.Minute)
	if out, err := c.Record(ctx, backOff("web", "m")); out != nil || err != nil {
		t.Fatalf("record while the API is away: %v, %v; want it held (nil, nil)", out, err)
	}
	if err := c.Flush(ctx); err == nil {
		t.Fatal("flush while the API is away succeeded")
	}
	sink.unavailable = false
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if ev := sink.all(); len(ev) != 1 || ev[0].Count != 2 {
		t.Fatalf("events %+v, want one with count 2", ev)
	}
}

package cli

import (
	"encoding/json"
	"strings"
	"testing"
)

// seedEvents stores events put out of order: testNow is 02:00.
func seedEvents(f *fakeAPI) {
	f.put(eventR, `{"metadata":{"name":"web-1.a","namespace":"default"},"involvedObject":{"kind":"Pod","name":"web-1","namespace":"default"},
		"type":"Warning","reason":"BackOff","message":"Back-off restarting failed container","count":5,
		"firstTimestamp":"2026-01-01T01:50:00Z","lastTimestamp":"2026-01-01T01:58:00Z"}`)
	f.put(eventR, `{"metadata":{"name":"web-1.b","namespace":"default"},"involvedObject":{"kind":"Pod","name":"web-1","namespace":"default"},
		"type":"Normal","reason":"Scheduled","message":"Successfully assigned default/web-1 to edge-1",
		"firstTimestamp":"2026-01-01T01:40:00Z","lastTimestamp":"2026-01-01T01:40:00Z"}`)
	f.put(eventR, `{"metadata":{"name":"web.c","namespace":"default"},"involvedObject":{"kind":"Deployment","name":"web","namespace":"default"},
		"type":"Normal","reason":"ScalingReplicaSet","message":"Scaled up replica set web-7d9f to 1",
		"firstTimestamp":"2026-01-01T01:45:00Z","lastTimestamp":"2026-01-01T01:45:00Z"}`)
	f.put(eventR, `{"metadata":{"name":"db-1.d","namespace":"shop"},"involvedObject":{"kind":"Pod","name":"db-1","namespace":"shop"},
		"type":"Warning","reason":"FailedScheduling","message":"0/1 nodes are available",
		"firstTimestamp":"2026-01-01T01:30:00Z","lastTimestamp":"2026-01-01T01:30:00Z"}`)
}

func TestEvents(t *testing.T) {
	f := newFakeAPI(t)
	seedEvents(f)
	expect(t, "namespace", f.run("events"), 0, `LAST SEEN          TYPE      REASON              OBJECT           MESSAGE
20m                Normal    Scheduled           pod/web-1        Successfully assigned default/web-1 to edge-1
15m                Normal    ScalingReplicaSet   deployment/web   Scaled up replica set web-7d9f to 1
2m (x5 over 10m)   Warning   BackOff             pod/web-1        Back-off restarting failed container
`, "")
	expect(t, "all, warnings", f.run("events", "-A", "--types", "warning"), 0, `NAMESPACE   LAST SEEN          TYPE      REASON             OBJECT      MESSAGE
shop        30m                Warning   FailedScheduling   pod/db-1    0/1 nodes are available
default     2m (x5 over 10m)   Warning   BackOff            pod/web-1   Back-off restarting failed container
`, "")
	expect(t, "for", f.run("events", "--for", "pod/web-1", "--types=Normal,Warning"), 0, `LAST SEEN          TYPE      REASON      OBJECT      MESSAGE
20m                Normal    Scheduled   pod/web-1   Successfully assigned default/web-1 to edge-1
2m (x5 over 10m)   Warning   BackOff     pod/web-1   Back-off restarting failed container
`, "")
	if !f.sawRequest("GET /api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3Dweb-1%2CinvolvedObject.kind%3DPod%2CinvolvedObject.namespace%3Ddefault") {
		t.Error("events --for did not select the object's events on the server")
	}
	// A server that cannot select by involvedObject: filtered here.
	f.noFieldSelectors = true
	expect(t, "for, no field selectors", f.run("events", "--for", "deploy/web"), 0, `LAST SEEN   TYPE     REASON              OBJECT           MESSAGE
15m         Normal   ScalingReplicaSet   deployment/web   Scaled up replica set web-7d9f to 1
`, "")
	f.noFieldSelectors = false
	expect(t, "none", f.run("events", "-n", "empty"), 0, "", "No events found in empty namespace.\n")
	expect(t, "none anywhere", f.run("events", "-A", "--for", "node/edge-9"), 0, "", "No events found.\n")
	expect(t, "every problem", f.run("events", "--types", "Error", "--for", "web", "-o", "wide"), 1, "",
		"error: --types: \"Error\" is not Normal or Warning; --for: want TYPE/NAME, e.g. pod/web, not \"web\"; --output must be json or yaml, not \"wide\"\nSee 'outpost events --help' for usage.\n")
	expect(t, "unknown type", f.run("events", "--for", "gadget/x"), 1, "",
		"error: --for: the server doesn't have a resource type \"gadget\"\nSee 'outpost events --help' for usage.\n")

	res := f.run("events", "--for", "pod/web-1", "-o", "json")
	var l struct {
		Kind  string
		Items []struct {
			Kind     string
			Metadata struct{ Name string }
		}
	}
	if err := json.Unmarshal([]byte(res.stdout), &l); err != nil || res.code != 0 {
		t.Fatalf("events -o json: %v, code %d\n%s%s", err, res.code, res.stdout, res.stderr)
	}
	if l.Kind != "List" || len(l.Items) != 2 || l.Items[0].Metadata.Name != "web-1.b" || l.Items[1].Kind != "Event" {
		t.Errorf("events -o json: %+v", l)
	}
}

func TestEventsWatch(t *testing.T) {
	f := newFakeAPI(t)
	seedEvents(f)
	// A new event arrives while events watches; the current ones the
	// fake's watch sends again are not printed twice.
	f.watchEvents = []map[string]any{{"type": "ADDED", "object": map[string]any{
		"metadata":       map[string]any{"name": "web-1.e", "namespace": "default", "resourceVersion": "99", "uid": "e"},
		"involvedObject": map[string]any{"kind": "Pod", "name": "web-1", "namespace": "default"},
		"type":           "Warning", "reason": "Unhealthy", "message": "Readiness probe failed",
		"firstTimestamp": "2026-01-01T01:59:00Z", "lastTimestamp": "2026-01-01T01:59:00Z",
	}}}
	w := startWatch(t, f, "events", "--for", "pod/web-1", "-w")
	want := `LAST SEEN          TYPE      REASON      OBJECT      MESSAGE
20m                Normal    Scheduled   pod/web-1   Successfully assigned default/web-1 to edge-1
2m (x5 over 10m)   Warning   BackOff     pod/web-1   Back-off restarting failed container
60s                Warning   Unhealthy   pod/web-1   Readiness probe failed
`
	if !w.waitFor(want) {
		t.Fatalf("events -w printed %q (ended %v, exit %d), want %q; stderr %q", w.out.String(), w.ended, w.code, want, w.errb.String())
	}
	if code := w.stop(); code != 0 {
		t.Errorf("events -w ended by the user exited %d; stderr %q", code, w.errb.String())
	}
	if strings.Count(w.out.String(), "BackOff") != 1 {
		t.Error("an event was printed twice")
	}
}

func TestEventsWatchListFails(t *testing.T) {
	f := newFakeAPI(t)
	f.noFieldSelectors = true
	w := startWatch(t, f, "events", "--for", "pod/web-1", "-w")
	w.waitFor("never")
	if !w.ended || w.code != 1 || w.errb.String() != "Error from server (BadRequest): field label not supported: involvedObject.name=web-1,involvedObject.kind=Pod,involvedObject.namespace=default\n" {
		t.Errorf("events -w with a failing list: ended %v, exit %d, stderr %q", w.ended, w.code, w.errb.String())
	}
}

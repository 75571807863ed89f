package cli

import (
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// everyProgressLine makes every status change a line (or a redraw), so
// that a test sees each step of a command whatever the machine's speed.
func everyProgressLine(t *testing.T) {
	oldT, oldP := terminalInterval, plainInterval
	terminalInterval, plainInterval = 0, 0
	t.Cleanup(func() { terminalInterval, plainInterval = oldT, oldP })
}

// wrap puts h in front of the fake API's handler; h calls next to serve
// the request as the fake does.
func (f *fakeAPI) wrap(h func(w http.ResponseWriter, r *http.Request, next http.Handler)) {
	next := f.srv.Config.Handler
	f.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h(w, r, next) })
}

// drainFake is a fake API with node n1, three pods of a replica set on
// it, and the eviction subresource: an eviction deletes the pod, but the
// first one of pod "b" is refused as a disruption budget would.
func drainFake(t *testing.T) *fakeAPI {
	f := newFakeAPI(t)
	f.put(nodeR, `{"metadata":{"name":"n1"}}`)
	for _, n := range []string{"a", "b", "c"} {
		f.put(podR, `{"metadata":{"name":"`+n+`","namespace":"default","uid":"uid-`+n+`","ownerReferences":[{"kind":"ReplicaSet","name":"web","uid":"rs","controller":true}]},
			"spec":{"nodeName":"n1","containers":[{"name":"c"}]},"status":{"phase":"Running"}}`)
	}
	var mu sync.Mutex
	refused := false
	f.wrap(func(w http.ResponseWriter, r *http.Request, next http.Handler) {
		name, ok := strings.CutSuffix(r.URL.Path, "/eviction")
		if !ok || r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		name = name[strings.LastIndexByte(name, '/')+1:]
		mu.Lock()
		refuse := name == "b" && !refused
		refused = refused || refuse
		mu.Unlock()
		if refuse {
			writeStatus(w, &api.StatusError{Status: api.Status{Code: 429, Reason: api.ReasonTooManyRequests,
				Message: "Cannot evict pod as it would violate the pod's disruption budget."}})
			return
		}
		f.mu.Lock()
		delete(f.objs, key(podR, "default", name))
		f.mu.Unlock()
		writeJSON(w, 201, map[string]any{})
	})
	return f
}

// TestDrainProgress: drain shows the pods left to evict on stderr, as
// plain lines off a terminal, as one rewritten line on one.
func TestDrainProgress(t *testing.T) {
	slowPlainProgress(t)
	f := drainFake(t)
	r := f.run("drain", "n1", "--eviction-retry-interval", "1ms")
	expect(t, "drain, not on a terminal", result{stdout: "", stderr: r.stderr, code: r.code}, 0, "",
		"node/n1: 3 of 3 pods left to evict\n"+
			`error when evicting pods/"b" -n "default" (will retry after 1ms): Cannot evict pod as it would violate the pod's disruption budget.`+"\n"+
			"node/n1: 0 of 3 pods left to evict\n")
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	slices.Sort(lines[1 : len(lines)-1]) // evictions run at once
	if want := []string{"node/n1 cordoned", "evicting pod default/a", "evicting pod default/b", "evicting pod default/c",
		"pod/a evicted", "pod/b evicted", "pod/c evicted", "node/n1 drained"}; !slices.Equal(lines, want) {
		t.Errorf("stdout %q, want %q", lines, want)
	}

	// Every step, as a plain line.
	everyProgressLine(t)
	f = drainFake(t)
	r = f.run("drain", "n1", "--eviction-retry-interval", "1ms")
	var steps []string
	for l := range strings.SplitSeq(r.stderr, "\n") {
		if strings.HasPrefix(l, "node/n1: ") {
			steps = append(steps, l)
		}
	}
	if want := []string{"node/n1: 3 of 3 pods left to evict", "node/n1: 2 of 3 pods left to evict",
		"node/n1: 1 of 3 pods left to evict", "node/n1: 0 of 3 pods left to evict"}; r.code != 0 || !slices.Equal(steps, want) {
		t.Errorf("drain's steps: %q, want %q (%+v)", steps, want, r)
	}

	// On a terminal: one line, rewritten; the budget's refusal is
	// printed above it, and the line ends when drain does.
	onTerminal(t)
	f = drainFake(t)
	r = f.run("drain", "n1", "--eviction-retry-interval", "1ms")
	if !strings.HasPrefix(r.stderr, "\rnode/n1: 3 of 3 pods left to evict\x1b[K") ||
		!strings.HasSuffix(r.stderr, "\rnode/n1: 0 of 3 pods left to evict\x1b[K\n") ||
		!strings.Contains(r.stderr, "\r\x1b[Kerror when evicting pods/\"b\"") || strings.Count(r.stderr, "\n") != 2 {
		t.Errorf("drain on a terminal: stderr %q", r.stderr)
	}
	if !strings.HasSuffix(r.stdout, "node/n1 drained\n") {
		t.Errorf("drain on a terminal: stdout %q", r.stdout)
	}

	// Nothing to evict: no progress at all.
	f = drainFake(t)
	r = f.run("drain", "n1", "--pod-selector", "app=none")
	expect(t, "nothing to evict", r, 0, "node/n1 cordoned\nnode/n1 drained\n", "")
}

// upgradeFake is a fake API whose cluster version and pool move one step
// on each list of the pools (after serving it): the control plane
// updating, then done, then the nodes done.
func upgradeFake(t *testing.T, steps ...[2]string) *fakeAPI {
	f := newFakeAPI(t)
	cvR, mcpR := clusterVersionResource, poolResource
	f.put(cvR, steps[0][0])
	f.put(mcpR, steps[0][1])
	var mu sync.Mutex
	step := 0
	f.wrap(func(w http.ResponseWriter, r *http.Request, next http.Handler) {
		next.ServeHTTP(w, r)
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/machineconfigpools") {
			mu.Lock()
			defer mu.Unlock()
			if step++; step < len(steps) {
				f.put(cvR, steps[step][0])
				f.put(mcpR, steps[step][1])
			}
		}
	})
	return f
}

const (
	cvUpdating = `{"metadata":{"name":"version"},"spec":{"desiredUpdate":{"version":"1.3.0"}},"status":{
		"desired":{"version":"1.3.0"},
		"history":[{"state":"Partial","startedTime":"2026-01-01T00:00:00Z","version":"1.3.0","verified":true},
			{"state":"Completed","startedTime":"2025-01-01T00:00:00Z","version":"1.2.0","verified":true}],
		"conditions":[{"type":"ReleaseAccepted","status":"True"},
			{"type":"Progressing","status":"True","message":"Working towards 1.3.0: updating server s2"}]}}`
	cvDone = `{"metadata":{"name":"version"},"spec":{"desiredUpdate":{"version":"1.3.0"}},"status":{
		"desired":{"version":"1.3.0"},
		"history":[{"state":"Completed","startedTime":"2026-01-01T00:00:00Z","version":"1.3.0","verified":true}],
		"conditions":[{"type":"ReleaseAccepted","status":"True"},{"type":"Progressing","status":"False","message":"Cluster version is 1.3.0"}]}}`
	cvRefused = `{"metadata":{"name":"version"},"spec":{"desiredUpdate":{"version":"1.4.0"}},"status":{
		"conditions":[{"type":"ReleaseAccepted","status":"False","reason":"RetrievePayload","message":"signature not trusted"}]}}`
	poolOld = `{"metadata":{"name":"worker"},"spec":{"configuration":{"name":"rendered-worker-new"}},
		"status":{"configuration":{"name":"rendered-worker-old"},"machineCount":3,"updatedMachineCount":0}}`
	poolOne = `{"metadata":{"name":"worker"},"spec":{"configuration":{"name":"rendered-worker-new"},"paused":true},
		"status":{"configuration":{"name":"rendered-worker-old"},"machineCount":3,"updatedMachineCount":1,"degradedMachineCount":1}}`
	poolNew = `{"metadata":{"name":"worker"},"spec":{"configuration":{"name":"rendered-worker-new"}},
		"status":{"configuration":{"name":"rendered-worker-new"},"machineCount":3,"updatedMachineCount":3}}`
)

// TestUpgradeWaitProgress: `adm upgrade --wait` follows the control plane
// and then the pools' nodes, as lines off a terminal and as one rewritten
// line on one, and fails on a refused release and at --timeout.
func TestUpgradeWaitProgress(t *testing.T) {
	old := upgradePoll
	upgradePoll = time.Millisecond
	t.Cleanup(func() { upgradePoll = old })
	everyProgressLine(t)
	steps := [][2]string{{cvUpdating, poolOld}, {cvDone, poolOne}, {cvDone, poolNew}}

	f := upgradeFake(t, steps...)
	expect(t, "--wait, not on a terminal", f.run("adm", "upgrade", "--wait"), 0,
		"Cluster version is 1.3.0\nEvery node is updated (3/3)\n",
		"control plane: Working towards 1.3.0: updating server s2; nodes updated 0/3\n"+
			"control plane at 1.3.0; nodes updated 1/3, 1 degraded, paused: worker\n"+
			"control plane at 1.3.0; nodes updated 3/3\n")

	onTerminal(t)
	f = upgradeFake(t, steps...)
	expect(t, "--wait on a terminal", f.run("adm", "upgrade", "--wait"), 0,
		"Cluster version is 1.3.0\nEvery node is updated (3/3)\n",
		"\rcontrol plane: Working towards 1.3.0: updating server s2; nodes updated 0/3\x1b[K"+
			"\rcontrol plane at 1.3.0; nodes updated 1/3, 1 degraded, paused: worker\x1b[K"+
			// erased for the lasting line on stdout, drawn again
			"\r\x1b[K\rcontrol plane at 1.3.0; nodes updated 1/3, 1 degraded, paused: worker\x1b[K"+
			"\rcontrol plane at 1.3.0; nodes updated 3/3\x1b[K\n")

	// --to VERSION --wait: the request, then the same progress.
	withUpdates := strings.Replace(cvUpdating, `"status":{`, `"status":{"availableUpdates":[{"version":"1.3.0","image":"r@sha256:1"}],`, 1)
	f = upgradeFake(t, [2]string{withUpdates, poolOld}, [2]string{cvDone, poolNew})
	f.put(clusterVersionResource, strings.Replace(withUpdates, `"desiredUpdate":{"version":"1.3.0"}`, `"channel":"stable"`, 1))
	expect(t, "--to --wait", f.run("adm", "upgrade", "--to", "1.3.0", "--wait"), 0,
		"Requested update to 1.3.0\nCluster version is 1.3.0\nEvery node is updated (3/3)\n",
		"\rcontrol plane: Working towards 1.3.0: updating server s2; nodes updated 0/3\x1b[K"+
			"\rcontrol plane at 1.3.0; nodes updated 3/3\x1b[K"+
			"\r\x1b[K\rcontrol plane at 1.3.0; nodes updated 3/3\x1b[K\n")
	if !f.sawRequest("PUT /apis/config.openshift.io/v1/clusterversions/version") {
		t.Error("--to --wait did not write the request")
	}

	// No pools: the control plane is all there is to wait for.
	f = newFakeAPI(t)
	f.put(clusterVersionResource, cvDone)
	expect(t, "no pools", f.run("adm", "upgrade", "--wait"), 0, "Cluster version is 1.3.0\n",
		"\rcontrol plane at 1.3.0\x1b[K\r\x1b[K\rcontrol plane at 1.3.0\x1b[K\n")

	f = upgradeFake(t, [2]string{cvRefused, poolNew})
	expect(t, "refused", f.run("adm", "upgrade", "--wait"), 1, "",
		"error: the update was refused: RetrievePayload: signature not trusted\n")

	f = upgradeFake(t, [2]string{cvUpdating, poolOld})
	r := f.run("adm", "upgrade", "--wait", "--timeout", "50ms")
	if r.code != 1 || !strings.HasSuffix(r.stderr, "\x1b[K\nerror: timed out waiting for the condition\n") {
		t.Errorf("--timeout: %+v", r)
	}

	expect(t, "--clear --wait", f.run("adm", "upgrade", "--clear", "--wait"), 1, "",
		"error: --wait follows an update: it does not go with --clear\nSee 'outpost adm upgrade --help' for usage.\n")
}

// TestReadUpgrade checks when the control plane counts as updated: the
// newest history entry Completed for the release asked for, by version
// or by image.
func TestReadUpgrade(t *testing.T) {
	cv := func(d *api.Update, h ...api.UpdateHistory) *api.ClusterVersion {
		c := &api.ClusterVersion{}
		c.Spec.DesiredUpdate = d
		c.Status.History = h
		return c
	}
	done := func(v, img string) api.UpdateHistory {
		return api.UpdateHistory{State: api.UpdateCompleted, Version: v, Image: img}
	}
	for _, tc := range []struct {
		name string
		cv   *api.ClusterVersion
		want bool
	}{
		{"nothing asked, nothing done", cv(nil), true},
		{"nothing asked", cv(nil, done("1.2.0", "")), true},
		{"asked, older release done", cv(&api.Update{Version: "1.3.0"}, done("1.2.0", "")), false},
		{"asked and done", cv(&api.Update{Version: "1.3.0"}, done("1.3.0", "")), true},
		{"by image, done", cv(&api.Update{Image: "r@sha256:1"}, done("1.3.0", "r@sha256:1")), true},
		{"by image, another done", cv(&api.Update{Image: "r@sha256:1"}, done("1.3.0", "r@sha256:2")), false},
		{"partial", cv(&api.Update{Version: "1.3.0"}, api.UpdateHistory{State: api.UpdatePartial, Version: "1.3.0"}), false},
	} {
		st, err := readUpgrade(tc.cv, nil)
		if err != nil || st.controlPlane != tc.want || !st.nodes {
			t.Errorf("%s: control plane %v nodes %v err %v, want %v true", tc.name, st.controlPlane, st.nodes, err, tc.want)
		}
	}
}

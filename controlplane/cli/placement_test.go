package cli

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// nodeTaints returns a stored node's taints as "key=value:Effect".
func nodeTaints(t *testing.T, f *fakeAPI, name string) []string {
	t.Helper()
	spec, _ := f.get(nodeR, "", name)["spec"].(map[string]any)
	list, _ := spec["taints"].([]any)
	out := []string{}
	for _, x := range list {
		m := x.(map[string]any)
		s := m["key"].(string)
		if v, _ := m["value"].(string); v != "" {
			s += "=" + v
		}
		out = append(out, s+":"+m["effect"].(string))
	}
	return out
}

func TestTaint(t *testing.T) {
	f := newFakeAPI(t)
	f.put(nodeR, `{"metadata":{"name":"n1"},"spec":{"futureSpec":1,"taints":[{"key":"dedicated","value":"db","effect":"NoSchedule","futureField":"kept"}]}}`)

	steps := []struct {
		what           string
		args           []string
		code           int
		stdout, stderr string
		taints         []string
		wrote          bool
	}{
		{"add", []string{"adm", "taint", "nodes", "n1", "gpu=true:NoExecute"}, 0, "node/n1 tainted\n", "",
			[]string{"dedicated=db:NoSchedule", "gpu=true:NoExecute"}, true},
		{"change without --overwrite", []string{"adm", "taint", "nodes", "n1", "dedicated=cache:NoSchedule"}, 1, "",
			"error: node n1 already has taint \"dedicated:NoSchedule\" with value \"db\", and --overwrite is false\n",
			[]string{"dedicated=db:NoSchedule", "gpu=true:NoExecute"}, false},
		{"same key, other effect is another taint", []string{"taint", "node/n1", "dedicated=cache:PreferNoSchedule"}, 0, "node/n1 tainted\n", "",
			[]string{"dedicated=db:NoSchedule", "gpu=true:NoExecute", "dedicated=cache:PreferNoSchedule"}, true},
		{"overwrite", []string{"adm", "taint", "nodes", "n1", "dedicated=cache:NoSchedule", "--overwrite"}, 0, "node/n1 modified\n", "",
			[]string{"dedicated=cache:NoSchedule", "gpu=true:NoExecute", "dedicated=cache:PreferNoSchedule"}, true},
		{"already there", []string{"adm", "taint", "nodes", "n1", "gpu=true:NoExecute"}, 0, "node/n1 not tainted\n", "",
			[]string{"dedicated=cache:NoSchedule", "gpu=true:NoExecute", "dedicated=cache:PreferNoSchedule"}, false},
		{"remove by key and effect", []string{"adm", "taint", "nodes", "n1", "dedicated:NoSchedule-"}, 0, "node/n1 untainted\n", "",
			[]string{"gpu=true:NoExecute", "dedicated=cache:PreferNoSchedule"}, true},
		{"remove missing", []string{"adm", "taint", "nodes", "n1", "dedicated:NoSchedule-"}, 1, "", "error: taint \"dedicated:NoSchedule\" not found\n",
			[]string{"gpu=true:NoExecute", "dedicated=cache:PreferNoSchedule"}, false},
		{"add and remove", []string{"adm", "taint", "nodes", "n1", "dedicated-", "x:NoSchedule"}, 0, "node/n1 modified\n", "",
			[]string{"gpu=true:NoExecute", "x:NoSchedule"}, true},
		{"remove missing key, nothing else done", []string{"taint", "nodes", "n1", "y:NoSchedule", "dedicated-"}, 1, "", "error: taint \"dedicated\" not found\n",
			[]string{"gpu=true:NoExecute", "x:NoSchedule"}, false},
		{"remove every effect of a key", []string{"taint", "nodes", "n1", "gpu-", "x-"}, 0, "node/n1 untainted\n", "", []string{}, true},
	}
	for _, s := range steps {
		writes := f.writeCount()
		expect(t, s.what, f.run(s.args...), s.code, s.stdout, s.stderr)
		if got := nodeTaints(t, f, "n1"); !reflect.DeepEqual(got, s.taints) {
			t.Errorf("%s: taints %v, want %v", s.what, got, s.taints)
		}
		if wrote := f.writeCount() > writes; wrote != s.wrote {
			t.Errorf("%s: wrote %v, want %v", s.what, wrote, s.wrote)
		}
	}
	spec := f.get(nodeR, "", "n1")["spec"].(map[string]any)
	if _, ok := spec["taints"]; ok || spec["futureSpec"] == nil {
		t.Errorf("spec after removing every taint: %v (want no taints list, unknown fields kept)", spec)
	}

	// A taint the command does not touch keeps fields this build does
	// not know; the write is conditional and retried on a conflict.
	f.put(nodeR, `{"metadata":{"name":"n2"},"spec":{"taints":[{"key":"k","effect":"NoSchedule","futureField":"kept"}]}}`)
	f.mu.Lock()
	f.conflicts = 2
	f.mu.Unlock()
	expect(t, "racing writers", f.run("adm", "taint", "nodes", "n2", "other=1:NoExecute"), 0, "node/n2 tainted\n", "")
	first := f.get(nodeR, "", "n2")["spec"].(map[string]any)["taints"].([]any)[0].(map[string]any)
	if first["futureField"] != "kept" {
		t.Errorf("an untouched taint lost a field: %v", first)
	}
	expect(t, "missing node", f.run("adm", "taint", "nodes", "n9", "k=v:NoSchedule"), 1, "", "Error from server (NotFound): nodes \"n9\" not found\n")
}

// TestTaintRefusesInvalidSpecs checks SPEC TNT-1's rules as the CLI
// applies them: every bad argument is reported, each naming its rule,
// and no request reaches the server.
func TestTaintRefusesInvalidSpecs(t *testing.T) {
	tests := []struct {
		args []string
		want []string // lines of stderr, in order
	}{
		{[]string{"ke y=v:NoSchedule"}, []string{`invalid taint spec "ke y=v:NoSchedule": key: Invalid value: "ke y": a taint key may contain only letters, digits, '-', '.' and '_'`}},
		{[]string{strings.Repeat("k", 254) + ":NoSchedule"}, []string{"a taint key must be no more than 253 characters"}},
		{[]string{"Example.com/k:NoSchedule"}, []string{"the prefix of a taint key (before '/') must be a DNS subdomain"}},
		{[]string{"k=" + strings.Repeat("v", 64) + ":NoSchedule"}, []string{"a taint value must be no more than 63 characters"}},
		{[]string{"k=v:Sometimes"}, []string{`effect: Unsupported value: "Sometimes"`}},
		{[]string{"k=v"}, []string{`invalid taint spec "k=v": effect: Required value: a taint effect must be one of NoSchedule, PreferNoSchedule, NoExecute`}},
		{[]string{":NoSchedule"}, []string{"key: Required value: a taint key must be non-empty"}},
		{[]string{".bad-"}, []string{`invalid taint spec ".bad-": key: Invalid value: ".bad": a taint key must start with a letter or digit`}},
		{[]string{"ok=1:NoSchedule", "k=v:Sometimes", "_x=1:NoExecute"}, []string{
			`invalid taint spec "k=v:Sometimes": effect`,
			`invalid taint spec "_x=1:NoExecute": key: Invalid value: "_x": a taint key must start with a letter or digit`,
		}},
	}
	for _, tt := range tests {
		f := newFakeAPI(t)
		res := f.run(append([]string{"adm", "taint", "nodes", "n1"}, tt.args...)...)
		lines := strings.Split(strings.TrimSuffix(strings.TrimPrefix(res.stderr, "error: "), "\n"), "\n")
		if res.code != 1 || len(lines) != len(tt.want) {
			t.Errorf("%v: code %d, stderr %q; want %d error lines", tt.args, res.code, res.stderr, len(tt.want))
			continue
		}
		for i, w := range tt.want {
			if !strings.Contains(lines[i], w) {
				t.Errorf("%v: error line %q lacks %q", tt.args, lines[i], w)
			}
		}
		if len(f.requests) != 0 {
			t.Errorf("%v: requests were sent despite an invalid taint: %v", tt.args, f.requests)
		}
	}

	f := newFakeAPI(t)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"k=v:NoSchedule", "k=w:NoSchedule"}, `error: taint "k:NoSchedule" is given more than once`},
		{[]string{"k=v:NoSchedule", "k-"}, `error: taint "k" cannot be both added and removed in the same command`},
		{[]string{"k=v:NoSchedule", "-l", "a=b"}, "error: node names cannot be combined with -l or --all"},
	} {
		res := f.run(append([]string{"adm", "taint", "nodes", "n1"}, tt.args...)...)
		if res.code != 1 || !strings.HasPrefix(res.stderr, tt.want) {
			t.Errorf("%v: %+v, want %q", tt.args, res, tt.want)
		}
	}
	// An argument that is no taint at all is a bad taint, not a node
	// (issue 15 review item 5).
	format := "want KEY=VALUE:EFFECT or KEY:EFFECT to add, KEY:EFFECT- or KEY- to remove\n"
	expect(t, "not a taint", f.run("taint", "nodes", "sim-0001", "foo"), 1, "", "error: invalid taint spec \"foo\": "+format)
	expect(t, "not a taint, node/NAME", f.run("taint", "node/sim-0001", "foo"), 1, "", "error: invalid taint spec \"foo\": "+format)
	expect(t, "not a taint, by selector", f.run("taint", "nodes", "--all", "foo"), 1, "", "error: invalid taint spec \"foo\": "+format)
	expect(t, "no taint", f.run("taint", "nodes", "sim-0001"), 1, "",
		"error: at least one taint update is required: "+format+"See 'outpost taint --help' for usage.\n")
	expect(t, "no taint, node/NAME", f.run("taint", "node/a", "node/b"), 1, "",
		"error: at least one taint update is required: "+format+"See 'outpost taint --help' for usage.\n")
	res := f.run("adm", "taint", "pods", "p", "k=v:NoSchedule")
	if res.code != 1 || !strings.HasPrefix(res.stderr, "error: only nodes can be tainted, not pods") {
		t.Errorf("taint pods: %+v", res)
	}
	if len(f.requests) != 0 {
		t.Errorf("requests sent for refused commands: %v", f.requests)
	}
}

func TestTaintBySelector(t *testing.T) {
	f := newFakeAPI(t)
	f.put(nodeR, `{"metadata":{"name":"a1","labels":{"zone":"a"}},"spec":{}}`)
	f.put(nodeR, `{"metadata":{"name":"a2","labels":{"zone":"a"}},"spec":{"taints":[{"key":"maint","value":"old","effect":"PreferNoSchedule"}]}}`)
	f.put(nodeR, `{"metadata":{"name":"b1","labels":{"zone":"b"}},"spec":{}}`)

	// One node refuses (a value would change); the others are still done.
	expect(t, "by selector", f.run("adm", "taint", "nodes", "-l", "zone=a", "maint=now:PreferNoSchedule"), 1,
		"node/a1 tainted\n", "error: node a2 already has taint \"maint:PreferNoSchedule\" with value \"old\", and --overwrite is false\n")
	if !f.sawRequest("GET /api/v1/nodes?labelSelector=zone%3Da") {
		t.Error("-l was not sent as labelSelector")
	}
	if got := nodeTaints(t, f, "b1"); len(got) != 0 {
		t.Errorf("a node outside the selector was tainted: %v", got)
	}
	expect(t, "--all", f.run("taint", "nodes", "--all", "maint=now:PreferNoSchedule", "--overwrite"), 0,
		"node/a1 not tainted\nnode/a2 modified\nnode/b1 tainted\n", "")
	expect(t, "no match", f.run("adm", "taint", "nodes", "-l", "zone=z", "k:NoSchedule"), 0, "", "No resources found\n")
}

func TestCordon(t *testing.T) {
	f := newFakeAPI(t)
	f.put(nodeR, `{"metadata":{"name":"n1","labels":{"zone":"a"}},"spec":{"futureSpec":1}}`)
	f.put(nodeR, `{"metadata":{"name":"n2","labels":{"zone":"a"}},"spec":{}}`)
	unschedulable := func(name string) any { return f.get(nodeR, "", name)["spec"].(map[string]any)["unschedulable"] }

	expect(t, "cordon", f.run("adm", "cordon", "n1"), 0, "node/n1 cordoned\n", "")
	if unschedulable("n1") != true || f.get(nodeR, "", "n1")["spec"].(map[string]any)["futureSpec"] == nil {
		t.Errorf("after cordon: spec %v", f.get(nodeR, "", "n1")["spec"])
	}
	writes := f.writeCount()
	expect(t, "cordon again", f.run("adm", "cordon", "node/n1"), 0, "node/n1 already cordoned\n", "")
	if f.writeCount() != writes {
		t.Error("cordoning a cordoned node wrote")
	}
	expect(t, "cordon -l", f.run("cordon", "-l", "zone=a"), 0, "node/n1 already cordoned\nnode/n2 cordoned\n", "")
	expect(t, "uncordon", f.run("adm", "uncordon", "n1", "n2"), 0, "node/n1 uncordoned\nnode/n2 uncordoned\n", "")
	if unschedulable("n1") != nil {
		t.Errorf("after uncordon: unschedulable %v", unschedulable("n1"))
	}
	expect(t, "uncordon again", f.run("uncordon", "n1"), 0, "node/n1 already uncordoned\n", "")
	expect(t, "missing", f.run("adm", "cordon", "n9"), 1, "", "Error from server (NotFound): nodes \"n9\" not found\n")
	expect(t, "no node", f.run("adm", "cordon"), 1, "", "error: expected one or more node names, or -l SELECTOR\nSee 'outpost adm cordon --help' for usage.\n")
	f.mu.Lock()
	f.conflicts = 1
	f.mu.Unlock()
	expect(t, "conflict retried", f.run("adm", "cordon", "n2"), 0, "node/n2 cordoned\n", "")
}

// TestDescribeUnschedulablePod is SPEC SCH-13 as `describe pod` shows it:
// the condition with its reason and message, and the scheduler's events.
func TestDescribeUnschedulablePod(t *testing.T) {
	for _, noFieldSelectors := range []bool{false, true} {
		f := newFakeAPI(t)
		f.noFieldSelectors = noFieldSelectors
		f.put(podR, `{"metadata":{"name":"big","namespace":"default"},
		"spec":{"nodeSelector":{"disk":"ssd"},"tolerations":[{"key":"dedicated","operator":"Equal","value":"db","effect":"NoSchedule"}],"containers":[{"name":"c","image":"i"}]},
		"status":{"phase":"Pending","conditions":[{"type":"PodScheduled","status":"False","reason":"Unschedulable",
		"message":"0/5 nodes are available: MatchNodeSelector (3), PodToleratesNodeTaints (2)."}]}}`)
		f.put(eventR, `{"metadata":{"name":"big.1","namespace":"default"},"involvedObject":{"kind":"Pod","name":"big","namespace":"default"},
		"type":"Warning","reason":"FailedScheduling","message":"0/5 nodes are available: MatchNodeSelector (3), PodToleratesNodeTaints (2).",
		"source":{"component":"default-scheduler"},"count":1,"lastTimestamp":"2026-01-01T01:59:00Z"}`)
		f.put(eventR, `{"metadata":{"name":"x.1","namespace":"default"},"involvedObject":{"kind":"Pod","name":"bigger","namespace":"default"},"reason":"NotMine"}`)
		res := f.run("describe", "pod", "big")
		if res.code != 0 {
			t.Fatalf("describe: %+v", res)
		}
		for _, want := range []string{
			"Node:         <none>\n",
			"Status:       Pending\n",
			"Conditions:\n  Type          Status  Reason         Message\n" +
				"  PodScheduled  False   Unschedulable  0/5 nodes are available: MatchNodeSelector (3), PodToleratesNodeTaints (2).\n",
			"Node-Selectors:  disk=ssd\n",
			"Tolerations:     dedicated=db:NoSchedule\n",
			"Events:\n  Type     Reason            Age   From               Message\n  ----     ------            ----  ----               -------\n" +
				"  Warning  FailedScheduling  60s   default-scheduler  0/5 nodes are available: MatchNodeSelector (3), PodToleratesNodeTaints (2).\n",
		} {
			if !strings.Contains(res.stdout, want) {
				t.Errorf("noFieldSelectors=%v: describe lacks %q:\n%s", noFieldSelectors, want, res.stdout)
			}
		}
		if strings.Contains(res.stdout, "NotMine") || res.stderr != "" {
			t.Errorf("noFieldSelectors=%v: another object's event, or a warning: %+v", noFieldSelectors, res)
		}
	}

	f := newFakeAPI(t)
	f.put(nodeR, `{"metadata":{"name":"n1"},"spec":{"unschedulable":true,"taints":[{"key":"dedicated","value":"db","effect":"NoSchedule"}]},
		"status":{"capacity":{"cpu":"4","memory":"8Gi","pods":"110"},"allocatable":{"cpu":"3500m","memory":"7Gi","pods":"110"},
		"conditions":[{"type":"Ready","status":"True","reason":"AgentReady","message":"agent is posting ready status"}]}}`)
	f.put(podR, `{"metadata":{"name":"db-0","namespace":"data"},"spec":{"nodeName":"n1","containers":[{"name":"c","resources":{"requests":{"cpu":"1"}}}]},"status":{"phase":"Running"}}`)
	res := f.run("describe", "node", "n1")
	for _, want := range []string{
		"Taints:             dedicated=db:NoSchedule\n",
		"Unschedulable:      true\n",
		"  Ready  True    <unknown>          <unknown>           AgentReady  agent is posting ready status\n",
		"Capacity:\n  cpu:     4\n  memory:  8Gi\n  pods:    110\n",
		"Allocatable:\n  cpu:     3500m\n  memory:  7Gi\n  pods:    110\n",
		"  data       db-0  1 (28%)",
	} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("describe node lacks %q:\n%s", want, res.stdout)
		}
	}
}

// adm upgrade nodes pauses and resumes a pool; adm fleetlock lists and
// releases FleetLock clients' reboot locks (UPD-8).
func TestNodeUpdateCommands(t *testing.T) {
	f := newFakeAPI(t)
	poolR := poolResource
	f.put(poolR, `{"metadata":{"name":"worker","annotations":{"outpost.io/fleetlock-holders":"[{\"id\":\"host-a\",\"since\":\"2026-11-26T08:00:00Z\"},{\"id\":\"host-b\",\"since\":\"2026-11-26T09:00:00Z\"}]"}},"spec":{"maxUnavailable":2}}`)
	f.put(poolR, `{"metadata":{"name":"infra"},"spec":{}}`)
	paused := func() any { return f.get(poolR, "", "worker")["spec"].(map[string]any)["paused"] }

	expect(t, "pause", f.run("adm", "upgrade", "nodes", "--pool", "worker", "--pause"), 0, "machineconfigpool/worker paused\n", "")
	if paused() != true {
		t.Errorf("spec.paused = %v after --pause", paused())
	}
	expect(t, "pause again", f.run("adm", "upgrade", "nodes", "--pool", "worker", "--pause"), 0, "machineconfigpool/worker already paused\n", "")
	expect(t, "resume", f.run("adm", "upgrade", "nodes", "--pool", "worker", "--resume"), 0, "machineconfigpool/worker resumed\n", "")
	if paused() != false {
		t.Errorf("spec.paused = %v after --resume", paused())
	}
	expect(t, "neither", f.run("adm", "upgrade", "nodes", "--pool", "worker"), 1, "", "error: give one of --pause and --resume\nSee 'outpost adm upgrade nodes --help' for usage.\n")
	expect(t, "no pool", f.run("adm", "upgrade", "nodes", "--pause"), 1, "", "error: --pool is required\nSee 'outpost adm upgrade nodes --help' for usage.\n")

	res := f.run("adm", "fleetlock", "list")
	if res.code != 0 || !strings.Contains(res.stdout, "POOL") || !strings.Contains(res.stdout, "worker   host-a") || !strings.Contains(res.stdout, "worker   host-b") {
		t.Errorf("fleetlock list: %d %q %q", res.code, res.stdout, res.stderr)
	}
	expect(t, "release", f.run("adm", "fleetlock", "release", "host-a", "--pool", "worker"), 0, "released the reboot lock of host-a in pool worker\n", "")
	ann := f.get(poolR, "", "worker")["metadata"].(map[string]any)["annotations"].(map[string]any)
	if v := ann["outpost.io/fleetlock-holders"].(string); strings.Contains(v, "host-a") || !strings.Contains(v, "host-b") {
		t.Errorf("holders after release: %s", v)
	}
	expect(t, "release unknown", f.run("adm", "fleetlock", "release", "host-z", "--pool", "worker"), 1, "", "error: host-z holds no reboot lock of pool worker\n")
	expect(t, "release last", f.run("adm", "fleetlock", "release", "host-b", "--pool", "worker"), 0, "released the reboot lock of host-b in pool worker\n", "")
	expect(t, "list none", f.run("adm", "fleetlock", "list", "--pool", "worker"), 0, "", "No reboot locks held\n")
}

// adm upgrade prints the cluster's version, upstream, channel and
// updates as oc adm upgrade does (UPD-10): recommended ones in a
// VERSION/IMAGE table (a conditional update recommended for this
// cluster among them), the others only with --include-not-recommended,
// each with its reason and message; adm upgrade channel sets the
// channel.
func TestClusterUpgradeCommand(t *testing.T) {
	f := newFakeAPI(t)
	f.put(clusterVersionResource, `{"metadata":{"name":"version"},"spec":{"channel":"stable-1","upstream":"https://updates.example/api/upgrades_info/v1/graph"},
"status":{"desired":{"version":"1.2.0","channels":["fast-1","stable-1"]},
"history":[{"state":"Completed","startedTime":"2026-11-20T10:00:00Z","version":"1.2.0","verified":false}],
"conditions":[{"type":"RetrievedUpdates","status":"True","reason":"AsExpected"},{"type":"Progressing","status":"False","message":"Cluster version is 1.2.0"}],
"availableUpdates":[{"version":"1.2.1","image":"https://updates.example/releases/outpost-1.2.1.tar"}],
"conditionalUpdates":[
 {"release":{"version":"1.3.0","image":"https://updates.example/releases/outpost-1.3.0.tar"},"risks":[{"name":"GPUDriverReload","url":"https://example.com/gpu","message":"m","matchingRules":[{"type":"Always"}]}],
  "conditions":[{"type":"Recommended","status":"False","reason":"GPUDriverReload","message":"GPUDriverReload: GPU nodes lose their driver. https://example.com/gpu"}]},
 {"release":{"version":"1.2.2","image":"https://updates.example/releases/outpost-1.2.2.tar"},"risks":[{"name":"Big","url":"u","message":"m","matchingRules":[{"type":"Always"}]}],
  "conditions":[{"type":"Recommended","status":"True","reason":"NotExposedToRisks"}]}]}}`)
	want := `Cluster version is 1.2.0

Upstream: https://updates.example/api/upgrades_info/v1/graph
Channel: stable-1 (available channels: fast-1, stable-1)

Recommended updates:

  VERSION     IMAGE
  1.2.1       https://updates.example/releases/outpost-1.2.1.tar
  1.2.2       https://updates.example/releases/outpost-1.2.2.tar

Additional updates which are not recommended for your cluster configuration are available, to view those re-run the command with --include-not-recommended.
`
	expect(t, "adm upgrade", f.run("adm", "upgrade"), 0, want, "")
	res := f.run("describe", "clusterversion", "version")
	for _, w := range []string{"Upstream:", "https://updates.example/api/upgrades_info/v1/graph", "Channel:", "stable-1", "History:", "Completed", "Available Updates:",
		"1.3.0", "False (GPUDriverReload)", "RetrievedUpdates"} {
		if !strings.Contains(res.stdout, w) {
			t.Errorf("describe clusterversion lacks %q:\n%s", w, res.stdout)
		}
	}
	res = f.run("adm", "upgrade", "--include-not-recommended")
	if !strings.Contains(res.stdout, "Supported but not recommended updates:\n\n  Version: 1.3.0\n  Image: https://updates.example/releases/outpost-1.3.0.tar\n  Recommended: False\n  Reason: GPUDriverReload\n  Message: GPUDriverReload: GPU nodes lose their driver. https://example.com/gpu\n") {
		t.Errorf("--include-not-recommended:\n%s", res.stdout)
	}
	expect(t, "channel", f.run("adm", "upgrade", "channel", "fast-1"), 0, "channel set to fast-1: updates are asked of the upstream at once\n", "")
	if ch := f.get(clusterVersionResource, "", "version")["spec"].(map[string]any)["channel"]; ch != "fast-1" {
		t.Errorf("channel %v", ch)
	}
	expect(t, "channel again", f.run("adm", "upgrade", "channel", "fast-1"), 0, "the cluster already follows channel fast-1\n", "")

	// --to: a listed update; a not recommended one only with
	// --allow-not-recommended, its risks recorded as accepted; a version
	// not listed refused; --clear takes the request back.
	desired := func() any {
		return f.get(clusterVersionResource, "", "version")["spec"].(map[string]any)["desiredUpdate"]
	}
	expect(t, "--to 1.2.1", f.run("adm", "upgrade", "--to", "1.2.1"), 0, "Requested update to 1.2.1\n", "")
	if d, _ := desired().(map[string]any); d["version"] != "1.2.1" {
		t.Errorf("desiredUpdate %v", desired())
	}
	res = f.run("adm", "upgrade", "--to", "1.3.0")
	if res.code == 0 || !strings.Contains(res.stderr, "not recommended for this cluster: GPUDriverReload") || !strings.Contains(res.stderr, "--allow-not-recommended") {
		t.Errorf("--to a not recommended update: %+v", res)
	}
	expect(t, "--to 1.3.0 --allow-not-recommended", f.run("adm", "upgrade", "--to", "1.3.0", "--allow-not-recommended"), 0, "Requested update to 1.3.0\n", "")
	if d, _ := desired().(map[string]any); d["version"] != "1.3.0" || fmt.Sprint(d["acceptRisks"]) != "[GPUDriverReload]" {
		t.Errorf("desiredUpdate %v, want 1.3.0 with GPUDriverReload accepted", desired())
	}
	res = f.run("adm", "upgrade", "--to", "7.0.0")
	if res.code == 0 || !strings.Contains(res.stderr, "version 7.0.0 is not an update this cluster may take (listed: 1.2.1, 1.3.0, 1.2.2)") {
		t.Errorf("--to a version not listed: %+v", res)
	}
	expect(t, "--clear", f.run("adm", "upgrade", "--clear"), 0, "Cleared the requested update.\n", "")
	if desired() != nil {
		t.Errorf("desiredUpdate %v after --clear", desired())
	}
	if res := f.run("adm", "upgrade", "--to", "1.2.1", "--clear"); res.code != 1 {
		t.Errorf("--to with --clear: %+v", res)
	}

	// The upstream failing: the reason, and the updates retrieved last.
	f.put(clusterVersionResource, `{"metadata":{"name":"version"},"spec":{"channel":"stable-1"},"status":{"history":[{"state":"Completed","startedTime":"2026-11-20T10:00:00Z","version":"1.2.0","verified":false}],
"conditions":[{"type":"RetrievedUpdates","status":"False","reason":"NoUpstream","message":"Upstream is unset"}],"availableUpdates":[]}}`)
	res = f.run("adm", "upgrade")
	if !strings.Contains(res.stdout, "Upstream is unset: set spec.upstream") || !strings.Contains(res.stdout, "warning: Cannot display available updates:\n  Reason: NoUpstream\n") {
		t.Errorf("without an upstream:\n%s", res.stdout)
	}
}

// --to-image takes only a payload pinned by its digest; one listed as
// not recommended needs --allow-not-recommended, one not listed
// --allow-explicit-upgrade; the permission flags need a target; --clear
// says when nothing was requested; a channel has a name.
func TestClusterUpgradeToImage(t *testing.T) {
	f := newFakeAPI(t)
	risky := "https://u.example/outpost-1.3.0.tar@sha256:" + strings.Repeat("a", 64)
	other := "https://u.example/outpost-9.0.0.tar@sha256:" + strings.Repeat("b", 64)
	f.put(clusterVersionResource, `{"metadata":{"name":"version"},"spec":{"channel":"stable-1"},"status":{"desired":{"version":"1.2.0","channels":["stable-1"]},"availableUpdates":[],
"conditionalUpdates":[{"release":{"version":"1.3.0","image":"`+risky+`"},"risks":[{"name":"R","url":"u","message":"m","matchingRules":[{"type":"Always"}]}],
"conditions":[{"type":"Recommended","status":"False","reason":"R","message":"R: m u"}]}]}}`)
	desired := func() map[string]any {
		d, _ := f.get(clusterVersionResource, "", "version")["spec"].(map[string]any)["desiredUpdate"].(map[string]any)
		return d
	}
	if res := f.run("adm", "upgrade", "--to-image", "https://u.example/outpost-1.3.0.tar"); res.code != 1 || !strings.Contains(res.stderr, "pinned by its digest") {
		t.Errorf("an unpinned --to-image: %+v", res)
	}
	if res := f.run("adm", "upgrade", "--to-image", risky); res.code == 0 || !strings.Contains(res.stderr, "not recommended") {
		t.Errorf("--to-image of a not recommended update: %+v", res)
	}
	expect(t, "--to-image --allow-not-recommended", f.run("adm", "upgrade", "--to-image", risky, "--allow-not-recommended"), 0, "Requested update to release image "+risky+"\n", "")
	if d := desired(); d["image"] != risky || fmt.Sprint(d["acceptRisks"]) != "[R]" {
		t.Errorf("desiredUpdate %v", d)
	}
	if res := f.run("adm", "upgrade", "--to-image", other); res.code == 0 || !strings.Contains(res.stderr, "--allow-explicit-upgrade") {
		t.Errorf("--to-image not listed: %+v", res)
	}
	expect(t, "explicit", f.run("adm", "upgrade", "--to-image", other, "--allow-explicit-upgrade"), 0, "Requested update to release image "+other+"\n", "")
	if res := f.run("adm", "upgrade", "--force"); res.code != 1 || !strings.Contains(res.stderr, "go with --to or --to-image") {
		t.Errorf("--force alone: %+v", res)
	}
	expect(t, "--clear", f.run("adm", "upgrade", "--clear"), 0, "Cleared the requested update.\n", "")
	expect(t, "--clear again", f.run("adm", "upgrade", "--clear"), 0, "No update was requested.\n", "")
	if res := f.run("adm", "upgrade", "channel", ""); res.code != 1 {
		t.Errorf("an empty channel: %+v", res)
	}
	res := f.run("adm", "upgrade", "channel", "nope")
	if res.code != 0 || !strings.Contains(res.stderr, "warning: no channel nope is known") {
		t.Errorf("an unknown channel: %+v", res)
	}
}

// `outpost adm drain NODE` drains as `outpost drain NODE` does (oc's
// place for it), rather than print adm's help and exit 0; without a node
// it fails naming what is missing (issue 15 item 7).
func TestAdmDrain(t *testing.T) {
	f := newFakeAPI(t)
	f.put(nodeR, `{"metadata":{"name":"n1"},"status":{"conditions":[{"type":"Ready","status":"True"}]}}`)
	r := f.run("adm", "drain", "n1")
	if r.code != 0 || !strings.Contains(r.stdout, "node/n1 cordoned") || !strings.Contains(r.stdout, "node/n1 drained") || strings.Contains(r.stdout, "Available Commands") {
		t.Fatalf("adm drain n1: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if u, _ := f.get(nodeR, "", "n1")["spec"].(map[string]any)["unschedulable"].(bool); !u {
		t.Error("adm drain did not cordon the node")
	}
	for _, args := range [][]string{{"adm", "drain"}, {"drain"}} {
		r = f.run(args...)
		if r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, "error: ") || !strings.Contains(r.stderr, "NODE") {
			t.Errorf("%v without a node: exit %d, stdout %q, stderr %q; want exit 1 naming NODE", args, r.code, r.stdout, r.stderr)
		}
	}
}

package agent_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/agent"
	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/auth"
	"github.com/outpost-edge/outpost/controlplane/client"
	"github.com/outpost-edge/outpost/runtime"
	"github.com/outpost-edge/outpost/runtime/fake"
	"github.com/outpost-edge/outpost/runtime/ociarchive"
	"github.com/outpost-edge/outpost/testing/cluster"
)

const testImage = "outpost.local/agenttest:1"

var (
	podsR   = api.ResourceForKind("Pod")
	nodesR  = api.ResourceForKind("Node")
	eventsR = api.ResourceForKind("Event")
)

// env is a one-server control plane with its loops and an agent on a
// fake runtime.
type env struct {
	t     *testing.T
	ctx   context.Context
	c     *cluster.Cluster
	admin *client.Client
	rt    *fake.Runtime
	dir   string
	node  string
	stop  context.CancelFunc
	done  chan error
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvWith(t, cluster.Options{Servers: 1, ControlLoops: true})
}

// newEnvWith is newEnv on a cluster of opts.
func newEnvWith(t *testing.T, opts cluster.Options) *env {
	t.Helper()
	c := cluster.New(t, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	leader := c.WaitForLeader(ctx)
	rt := fake.New()
	var img bytes.Buffer
	if err := ociarchive.Build(&img, ociarchive.Image{
		Name: testImage, Entrypoint: []string{"/testbin"},
		Files: []ociarchive.File{{Path: "/testbin", Mode: 0o755, Data: []byte("simulated by runtime/fake")}},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.ImportImages(ctx, &img); err != nil {
		t.Fatal(err)
	}
	return &env{t: t, ctx: ctx, c: c, admin: c.Client(leader), rt: rt, dir: t.TempDir(), node: "node-a"}
}

// joinString makes a join token as `adm token create --role node` does.
func (e *env) joinString() string {
	e.t.Helper()
	id, secret := auth.NewToken()
	tok := &api.Token{ObjectMeta: api.ObjectMeta{Name: id}, Spec: api.TokenSpec{Role: api.RoleNode, SecretHash: auth.HashSecret(secret)}}
	if _, err := e.admin.CreateToken(e.ctx, tok); err != nil {
		e.t.Fatal(err)
	}
	pin, err := e.admin.CAPin()
	if err != nil {
		e.t.Fatal(err)
	}
	return auth.FormatJoin(pin, id+"."+secret)
}

func (e *env) config(rt agent.Runtime) agent.Config {
	return agent.Config{
		Server:         "https://" + e.c.Members[0].APIAddr,
		DataDir:        e.dir,
		NodeName:       e.node,
		Address:        "127.0.0.1",
		EndpointAddr:   "127.0.0.1:0",
		Runtime:        rt,
		DisableGossip:  true,
		Heartbeat:      500 * time.Millisecond,
		StatusCheck:    100 * time.Millisecond,
		RestartBackoff: 50 * time.Millisecond,
		Labels:         map[string]string{"topology.kubernetes.io/zone": "z1"},
		// The agent's records go to the test's log, which go test shows
		// only when the test fails: a rare failure then says why.
		Logger: slog.New(slog.NewTextHandler(agentLog{e.t}, &slog.HandlerOptions{Level: slog.LevelInfo})),
	}
}

// agentLog writes an agent's records to its test's log.
type agentLog struct{ t *testing.T }

func (w agentLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// start runs an agent until stopAgent.
func (e *env) start(cfg agent.Config) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(e.ctx)
	e.stop = cancel
	e.done = make(chan error, 1)
	go func() { e.done <- agent.Run(ctx, cfg) }()
	e.t.Cleanup(func() { e.stopAgent() })
}

func (e *env) stopAgent() {
	if e.stop == nil {
		return
	}
	e.stop()
	select {
	case err := <-e.done:
		if err != nil && !errors.Is(err, context.Canceled) {
			e.t.Errorf("agent.Run: %v", err)
		}
	case <-time.After(30 * time.Second):
		e.t.Error("the agent did not stop")
	}
	e.stop = nil
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, d time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	last := ""
	for {
		ok, state := cond()
		if ok {
			return
		}
		if state != "" {
			last = state
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; last: %s", d, what, last)
		}
		time.Sleep(20 * time.Millisecond) // polling interval, bounded by the deadline
	}
}

func (e *env) pod(name string) *api.Pod {
	obj, err := e.admin.Get(e.ctx, podsR, "default", name, client.GetOptions{})
	if err != nil {
		return nil
	}
	return obj.(*api.Pod)
}

func (e *env) createPod(name string, mutate func(*api.Pod)) {
	e.t.Helper()
	p := &api.Pod{
		ObjectMeta: api.ObjectMeta{Name: name, Namespace: "default"},
		Spec: api.PodSpec{
			NodeName:                      e.node,
			TerminationGracePeriodSeconds: ptr(int64(1)),
			Containers:                    []api.Container{{Name: "c", Image: testImage, Args: []string{"sleep"}, ImagePullPolicy: api.PullIfNotPresent}},
		},
	}
	if mutate != nil {
		mutate(p)
	}
	if _, _, err := e.admin.Create(e.ctx, p); err != nil {
		e.t.Fatalf("create pod %s: %v", name, err)
	}
}

func ptr[T any](v T) *T { return &v }

func nodeReady(n *api.Node) string {
	for _, c := range n.Status.Conditions {
		if c.Type == api.NodeReady {
			return c.Status
		}
	}
	return ""
}

// waitPhase waits until pod name reports phase and check holds.
func (e *env) waitPhase(name, phase string, check func(*api.Pod) bool) *api.Pod {
	e.t.Helper()
	var got *api.Pod
	waitFor(e.t, "pod "+name+" "+phase, 20*time.Second, func() (bool, string) {
		got = e.pod(name)
		if got == nil {
			return false, "no pod"
		}
		desc := fmt.Sprintf("phase %s statuses %+v", got.Status.Phase, got.Status.ContainerStatuses)
		return got.Status.Phase == phase && (check == nil || check(got)), desc
	})
	return got
}

func (e *env) podContainers(uid string) []runtime.ContainerStatus {
	all, err := e.rt.ListContainers(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []runtime.ContainerStatus
	for _, c := range all {
		if c.Labels[runtime.LabelPodUID] == uid {
			out = append(out, c)
		}
	}
	return out
}

// The agent joins with a join string, registers its Node (labels, capacity,
// endpoint, runtime version), reports Ready, runs a pod bound to it and
// stops it when it is deleted (issue 4 items 1, 2, 4; TNT-5).
func TestJoinRegisterRunAndDelete(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(e.rt)
	cfg.JoinToken = e.joinString()
	e.start(cfg)

	var node *api.Node
	waitFor(t, "node Ready", 20*time.Second, func() (bool, string) {
		obj, err := e.admin.Get(e.ctx, nodesR, "", e.node, client.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		node = obj.(*api.Node)
		return nodeReady(node) == api.ConditionTrue, fmt.Sprintf("%+v", node.Status.Conditions)
	})
	for k, v := range map[string]string{"kubernetes.io/hostname": e.node, "kubernetes.io/os": "linux", "topology.kubernetes.io/zone": "z1"} {
		if node.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, node.Labels[k], v)
		}
	}
	if node.Labels["kubernetes.io/arch"] == "" {
		t.Error("no kubernetes.io/arch label")
	}
	for _, r := range []string{"cpu", "memory", "pods", "ephemeral-storage"} {
		if _, ok := node.Status.Allocatable[r]; !ok {
			t.Errorf("allocatable lacks %s: %v", r, node.Status.Allocatable)
		}
	}
	if node.Status.DaemonEndpoints.KubeletEndpoint.Port == 0 {
		t.Error("no daemon endpoint port")
	}
	if !strings.HasPrefix(node.Status.NodeInfo.ContainerRuntimeVersion, "fake") || node.Status.NodeInfo.BootID == "" {
		t.Errorf("node info = %+v", node.Status.NodeInfo)
	}
	if len(node.Status.Images) == 0 {
		t.Error("the node reports no images")
	}
	// The credential is the owner's only, and the join token is not kept.
	st, err := os.Stat(filepath.Join(e.dir, "credential.json"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("credential file: %v %v", st, err)
	}
	b, _ := os.ReadFile(filepath.Join(e.dir, "credential.json"))
	if _, tok, _ := auth.ParseJoin(cfg.JoinToken); bytes.Contains(b, []byte(tok)) {
		t.Error("the credential file holds the join token")
	}

	e.createPod("p1", func(p *api.Pod) {
		p.Spec.Containers[0].Env = []api.EnvVar{{Name: "A", Value: "1"}}
	})
	p := e.waitPhase("p1", api.PodRunning, func(p *api.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].Ready
	})
	cs := p.Status.ContainerStatuses[0]
	if cs.State.Running == nil || cs.RestartCount != 0 || !strings.HasPrefix(cs.ContainerID, "containerd://") || p.Status.HostIP != "127.0.0.1" {
		t.Errorf("status = %+v", p.Status)
	}
	if got := e.podContainers(string(p.UID)); len(got) != 1 || got[0].State != runtime.StateRunning {
		t.Fatalf("containers of p1 = %+v", got)
	}
	e.waitEvents("p1", "Created", "Started")
	if _, err := e.admin.Delete(e.ctx, podsR, "default", "p1", nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "p1's containers removed", 20*time.Second, func() (bool, string) {
		n := len(e.podContainers(string(p.UID)))
		return n == 0, fmt.Sprintf("%d containers", n)
	})
}

// Restart policies: Always restarts with back-off and reports
// CrashLoopBackOff with the last exit; Never leaves a failed container
// Failed; OnFailure leaves a successful one Succeeded (issue 4 item 4).
func TestRestartPolicies(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(e.rt)
	cfg.JoinToken = e.joinString()
	e.start(cfg)

	e.createPod("always", func(p *api.Pod) { p.Spec.Containers[0].Args = []string{"exit", "3"} })
	e.createPod("never", func(p *api.Pod) {
		p.Spec.RestartPolicy = api.RestartPolicyNever
		p.Spec.Containers[0].Args = []string{"exit", "3"}
	})
	e.createPod("onfailure", func(p *api.Pod) {
		p.Spec.RestartPolicy = api.RestartPolicyOnFailure
		p.Spec.Containers[0].Args = []string{"exit", "0"}
	})
	e.waitPhase("always", api.PodRunning, func(p *api.Pod) bool {
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].RestartCount >= 2 && cs[0].LastState.Terminated != nil &&
			cs[0].LastState.Terminated.ExitCode == 3 && cs[0].LastState.Terminated.Reason == "Error"
	})
	e.waitEvents("always", "BackOff")
	never := e.waitPhase("never", api.PodFailed, nil)
	if cs := never.Status.ContainerStatuses; len(cs) != 1 || cs[0].State.Terminated == nil || cs[0].State.Terminated.ExitCode != 3 || cs[0].RestartCount != 0 {
		t.Errorf("never: %+v", never.Status)
	}
	ok := e.waitPhase("onfailure", api.PodSucceeded, nil)
	if cs := ok.Status.ContainerStatuses; cs[0].State.Terminated == nil || cs[0].State.Terminated.Reason != "Completed" {
		t.Errorf("onfailure: %+v", ok.Status)
	}
}

// Bad input on the node: the pod's status says exactly why (issue 4, "Bad
// input").
func TestBadInputStatus(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(e.rt)
	cfg.JoinToken = e.joinString()
	e.start(cfg)
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port

	e.createPod("noimage", func(p *api.Pod) { p.Spec.Containers[0].Image = "outpost.local/nope:1" })
	e.createPod("never", func(p *api.Pod) {
		p.Spec.Containers[0].Image = "outpost.local/nope:2"
		p.Spec.Containers[0].ImagePullPolicy = api.PullNever
	})
	e.createPod("port", func(p *api.Pod) {
		p.Spec.Containers[0].Ports = []api.ContainerPort{{ContainerPort: int32(port)}}
	})
	for name, want := range map[string][]string{
		"noimage": {"ErrImagePull", "ImagePullBackOff"},
		"never":   {"ErrImageNeverPull"},
		"port":    {"HostPortInUse"},
	} {
		waitFor(t, name+" waiting with "+want[0], 20*time.Second, func() (bool, string) {
			p := e.pod(name)
			if p == nil || len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Waiting == nil {
				return false, ""
			}
			w := p.Status.ContainerStatuses[0].State.Waiting
			for _, r := range want {
				if w.Reason == r && w.Message != "" && p.Status.Phase == api.PodPending {
					return true, ""
				}
			}
			return false, w.Reason + ": " + w.Message
		})
	}
	// A pull that keeps failing is backed off, and says so.
	waitFor(t, "noimage in ImagePullBackOff", 20*time.Second, func() (bool, string) {
		p := e.pod("noimage")
		if p == nil || len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Waiting == nil {
			return false, ""
		}
		w := p.Status.ContainerStatuses[0].State.Waiting
		return w.Reason == "ImagePullBackOff" && strings.Contains(w.Message, "outpost.local/nope:1"), w.Reason + ": " + w.Message
	})
	p := e.pod("port")
	if msg := p.Status.ContainerStatuses[0].State.Waiting.Message; !strings.Contains(msg, fmt.Sprint(port)) {
		t.Errorf("host port message %q does not name port %d", msg, port)
	}
	p = e.pod("never")
	if msg := p.Status.ContainerStatuses[0].State.Waiting.Message; !strings.Contains(msg, "outpost.local/nope:2") {
		t.Errorf("never-pull message %q does not name the image", msg)
	}
}

// Edge autonomy (issue 4 item 6): with the control plane stopped, a
// crashed container is still restarted; an agent restarted meanwhile
// adopts its pods from the state file and keeps applying the restart
// policy; once the control plane is back, the statuses agree and the agent
// says what happened. A pod deleted while the agent was down is stopped at
// its next start, and a container that is not outpost's is never touched.
func TestAutonomy(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(e.rt)
	cfg.JoinToken = e.joinString()
	e.start(cfg)
	e.createPod("keep", nil)
	e.createPod("gone", nil)
	keep := e.waitPhase("keep", api.PodRunning, nil)
	gone := e.waitPhase("gone", api.PodRunning, nil)
	e.rt.AddForeign("someone-elses")

	m := e.c.Members[0]
	e.c.Stop(m)
	crash := func(want int) {
		t.Helper()
		var id string
		for _, c := range e.podContainers(string(keep.UID)) {
			if c.State == runtime.StateRunning {
				id = c.ID
			}
		}
		if id == "" || !e.rt.Crash(id, 137) {
			t.Fatalf("no running container of keep to crash")
		}
		waitFor(t, fmt.Sprintf("attempt %d of keep running", want), 20*time.Second, func() (bool, string) {
			for _, c := range e.podContainers(string(keep.UID)) {
				if c.State == runtime.StateRunning && c.Labels[runtime.LabelAttempt] == fmt.Sprint(want) {
					return true, ""
				}
			}
			return false, fmt.Sprintf("%+v", e.podContainers(string(keep.UID)))
		})
	}
	crash(1) // the control plane is down; the agent restarts it
	e.stopAgent()
	// A new agent process: a new client of the same runtime, the same
	// data dir, no join string, the control plane still down.
	rt2 := e.rt.Reopen()
	e.rt = rt2
	cfg2 := e.config(rt2)
	e.start(cfg2)
	crash(2)

	e.c.Restart(m)
	e.admin = e.c.Client(m)
	waitFor(t, "keep's status on the API", 30*time.Second, func() (bool, string) {
		p := e.pod("keep")
		if p == nil || len(p.Status.ContainerStatuses) == 0 {
			return false, ""
		}
		cs := p.Status.ContainerStatuses[0]
		return p.Status.Phase == api.PodRunning && cs.RestartCount == 2 && cs.State.Running != nil, fmt.Sprintf("%+v", cs)
	})
	waitFor(t, "an event saying the control plane was away", 30*time.Second, func() (bool, string) {
		objs, _, err := e.admin.List(e.ctx, eventsR, "default", client.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, o := range objs {
			if ev := o.(*api.Event); ev.Reason == "ControlPlaneReachable" && ev.InvolvedObject.Name == e.node {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events", len(objs))
	})

	// Delete "gone" while the agent is down: its next start stops it.
	e.stopAgent()
	if _, err := e.admin.Delete(e.ctx, podsR, "default", "gone", nil); err != nil {
		t.Fatal(err)
	}
	rt3 := e.rt.Reopen()
	e.rt = rt3
	e.start(e.config(rt3))
	waitFor(t, "gone's containers removed", 20*time.Second, func() (bool, string) {
		n := len(e.podContainers(string(gone.UID)))
		return n == 0, fmt.Sprintf("%d containers", n)
	})
	if !e.rt.ForeignExists("someone-elses") {
		t.Error("the agent removed a container that is not outpost's")
	}
	if got := e.podContainers(string(keep.UID)); len(got) == 0 {
		t.Error("keep's containers are gone")
	}
}

// A wrong join string is refused at once with the reason, and nothing is
// saved (issue 4 item 1).
func TestJoinRefusals(t *testing.T) {
	e := newEnv(t)
	good := e.joinString()
	pin, tok, _ := auth.ParseJoin(good)
	// Another last character of the secret; "x" when the secret happened
	// to end in "x" left it valid (a flake, about 1 run in 36).
	last := "x"
	if strings.HasSuffix(tok, "x") {
		last = "y"
	}
	for name, tc := range map[string]struct{ join, want string }{
		"wrong pin":    {auth.FormatJoin("sha256:"+strings.Repeat("0", 64), tok), "not the one the join string names"},
		"wrong secret": {auth.FormatJoin(pin, tok[:len(tok)-1]+last), "join token was refused"},
		"not a join":   {"hello", "a join string starts with"},
	} {
		join := tc.join
		t.Run(name, func(t *testing.T) {
			cfg := e.config(e.rt)
			cfg.DataDir = t.TempDir()
			cfg.JoinToken = join
			ctx, cancel := context.WithTimeout(e.ctx, 20*time.Second)
			defer cancel()
			err := agent.Run(ctx, cfg)
			if err == nil || errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run = %v, want a refusal saying %q", err, tc.want)
			}
			if _, serr := os.Stat(filepath.Join(cfg.DataDir, "credential.json")); serr == nil {
				t.Error("a credential was saved")
			}
		})
	}
}

// waitEvents waits until pod has events with each of reasons, recorded by
// the agent (what `describe pod` shows).
func (e *env) waitEvents(pod string, reasons ...string) {
	e.t.Helper()
	waitFor(e.t, "events "+strings.Join(reasons, ", ")+" of pod "+pod, 20*time.Second, func() (bool, string) {
		objs, _, err := e.admin.List(e.ctx, eventsR, "default", client.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		seen := map[string]bool{}
		for _, o := range objs {
			ev := o.(*api.Event)
			if ev.InvolvedObject.Kind == "Pod" && ev.InvolvedObject.Name == pod && ev.Source.Component == "outpost-agent" {
				seen[ev.Reason] = true
			}
		}
		for _, r := range reasons {
			if !seen[r] {
				return false, fmt.Sprintf("seen %v", seen)
			}
		}
		return true, ""
	})
}

// A bad eviction threshold is refused at start, naming the setting and
// the item, before the agent joins or starts anything.
func TestBadEvictionThreshold(t *testing.T) {
	cfg := agent.Config{DataDir: t.TempDir(), NodeName: "n", Runtime: fake.New(), EvictionHard: "memory.available<lots"}
	err := agent.Run(context.Background(), cfg)
	if !errors.Is(err, agent.ErrConfig) || !strings.Contains(err.Error(), "--eviction-hard") || !strings.Contains(err.Error(), "lots") {
		t.Fatalf("Run = %v", err)
	}
	if _, serr := os.Stat(filepath.Join(cfg.DataDir, "credential.json")); serr == nil {
		t.Error("a credential was saved")
	}
}

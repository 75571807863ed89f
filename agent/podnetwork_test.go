package agent_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/agent"
	"github.com/outpost-edge/outpost/agent/podnet"
	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
	"github.com/outpost-edge/outpost/runtime"
	"github.com/outpost-edge/outpost/runtime/fake"
)

// fakeNet is a pod network that hands out addresses of 10.42.0.0/24 and
// records what the agent asked of it.
type fakeNet struct {
	mu       sync.Mutex
	nets     map[string]podnet.Network // by pod UID
	torn     []string
	ports    map[string][]podnet.PortMapping
	cidr     netip.Prefix
	failNext error
	setups   map[string]int // by pod UID
}

func (f *fakeNet) Setup(_ context.Context, p podnet.Pod) (podnet.Network, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.failNext; err != nil {
		f.failNext = nil
		return podnet.Network{}, err
	}
	f.setups[p.UID]++
	if n, ok := f.nets[p.UID]; ok {
		return n, nil
	}
	n := podnet.Network{NetNS: "/run/fake-netns/" + p.UID, IPs: []netip.Addr{netip.MustParseAddr(fmt.Sprintf("10.42.0.%d", len(f.nets)+2))}}
	f.nets[p.UID] = n
	f.ports[p.UID] = p.Ports
	return n, nil
}

func (f *fakeNet) Teardown(_ context.Context, p podnet.Pod) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.nets, p.UID)
	f.torn = append(f.torn, p.UID)
	return nil
}

func (f *fakeNet) Has(uid string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.nets[uid]
	return ok
}

func (f *fakeNet) Pods() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for uid := range f.nets {
		out = append(out, uid)
	}
	return out
}

func (f *fakeNet) Configured() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cidr.IsValid()
}

// tornDown reports whether uid's network was torn down.
func (f *fakeNet) tornDown(uid string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Contains(f.torn, uid)
}

func (f *fakeNet) WriteDefault(cidr, _ netip.Prefix, _ int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cidr = cidr
	return nil
}

// netnsRuntime is the fake runtime, remembering the network namespace
// and host name each container was created with.
type netnsRuntime struct {
	*fake.Runtime
	mu    sync.Mutex
	specs map[string]runtime.ContainerSpec // by pod name
}

func (r *netnsRuntime) CreateContainer(ctx context.Context, spec runtime.ContainerSpec) error {
	r.mu.Lock()
	r.specs[spec.Labels[runtime.LabelPodName]] = spec
	r.mu.Unlock()
	return r.Runtime.CreateContainer(ctx, spec)
}

func (r *netnsRuntime) spec(pod string) runtime.ContainerSpec {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.specs[pod]
}

// startWithPodNetwork starts an agent with a fake pod network, whose
// runtime records the containers' specs; mutate changes its config,
// which is returned for a restart.
func startWithPodNetwork(t *testing.T, mutate func(*agent.Config)) (*env, *fakeNet, *netnsRuntime, agent.Config) {
	e := newEnv(t)
	net := &fakeNet{nets: map[string]podnet.Network{}, ports: map[string][]podnet.PortMapping{}, setups: map[string]int{}}
	rt := &netnsRuntime{Runtime: e.rt, specs: map[string]runtime.ContainerSpec{}}
	cfg := e.config(rt)
	cfg.PodNetwork = net
	cfg.JoinToken = e.joinString()
	if mutate != nil {
		mutate(&cfg)
	}
	e.start(cfg)
	return e, net, rt, cfg
}

// With a pod network (SPEC NET-1) a pod that is not hostNetwork is set up
// in a network of its own before its containers, which join it, named
// after the pod; its status carries its own address; hostPorts go to the
// network; the default network is written from the node's pod CIDR; a
// hostNetwork pod keeps the host's; a failed setup leaves the pod
// ContainerCreating with a FailedCreatePodSandBox event and is tried
// again; a deleted pod's network is torn down; an agent restarted finds
// its pods' networks and keeps their addresses.
func TestPodNetworkOfItsOwn(t *testing.T) {
	e, net, rt, cfg := startWithPodNetwork(t, nil)

	e.createPod("own", func(p *api.Pod) {
		p.Spec.Containers[0].Ports = []api.ContainerPort{{ContainerPort: 8080, HostPort: 31080}}
	})
	e.createPod("host", func(p *api.Pod) { p.Spec.HostNetwork = true })
	own := e.waitPhase("own", api.PodRunning, func(p *api.Pod) bool { return p.Status.PodIP != "" })
	if own.Status.PodIP != "10.42.0.2" || len(own.Status.PodIPs) != 1 || own.Status.PodIPs[0].IP != "10.42.0.2" || own.Status.HostIP != "127.0.0.1" {
		t.Errorf("own: podIP %q podIPs %v hostIP %q, want 10.42.0.2 of its network", own.Status.PodIP, own.Status.PodIPs, own.Status.HostIP)
	}
	if s := rt.spec("own"); s.NetNS != "/run/fake-netns/"+string(own.UID) || s.Hostname != "own" {
		t.Errorf("own's container: netns %q hostname %q", s.NetNS, s.Hostname)
	}
	net.mu.Lock()
	ports, cidr := net.ports[string(own.UID)], net.cidr
	net.mu.Unlock()
	if len(ports) != 1 || ports[0] != (podnet.PortMapping{HostPort: 31080, ContainerPort: 8080, Protocol: "tcp"}) {
		t.Errorf("own's port mappings: %+v", ports)
	}
	node, err := e.admin.Get(e.ctx, nodesR, "", e.node, client.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := node.(*api.Node).Spec.PodCIDR; want == "" || cidr.String() != want {
		t.Errorf("default network written for %v, the node's pod CIDR is %q", cidr, want)
	}
	host := e.waitPhase("host", api.PodRunning, nil)
	if host.Status.PodIP != "127.0.0.1" || rt.spec("host").NetNS != "" {
		t.Errorf("host: podIP %q netns %q, want the host's", host.Status.PodIP, rt.spec("host").NetNS)
	}

	// A setup that fails is said and tried again.
	net.mu.Lock()
	net.failNext = errors.New("the bridge plugin failed")
	net.mu.Unlock()
	e.createPod("late", nil)
	e.waitEvents("late", "FailedCreatePodSandBox")
	e.waitPhase("late", api.PodRunning, func(p *api.Pod) bool { return p.Status.PodIP == "10.42.0.3" })

	// A pod that finished gives its network back and keeps reporting
	// its address, as the kubelet's does.
	e.createPod("done", func(p *api.Pod) {
		p.Spec.RestartPolicy = api.RestartPolicyNever
		p.Spec.Containers[0].Args = []string{"exit", "0"}
	})
	done := e.waitPhase("done", api.PodSucceeded, func(p *api.Pod) bool { return p.Status.PodIP != "" })
	waitFor(t, "the finished pod's network torn down", 20*time.Second, func() (bool, string) {
		return net.tornDown(string(done.UID)), ""
	})

	// An agent restarted finds its pods' networks: it asks for own's
	// again (answered from the cache) and own keeps its address. A
	// network left by a pod gone meanwhile is torn down.
	net.mu.Lock()
	before := net.setups[string(own.UID)]
	net.nets["uid-gone-while-away"] = podnet.Network{NetNS: "/run/fake-netns/uid-gone-while-away", IPs: []netip.Addr{netip.MustParseAddr("10.42.0.99")}}
	net.mu.Unlock()
	e.stopAgent()
	e.start(cfg)
	waitFor(t, "own's network adopted after a restart", 20*time.Second, func() (bool, string) {
		net.mu.Lock()
		defer net.mu.Unlock()
		return net.setups[string(own.UID)] > before, fmt.Sprint(net.setups)
	})
	waitFor(t, "the network of a pod gone while the agent was away torn down", 20*time.Second, func() (bool, string) {
		return net.tornDown("uid-gone-while-away"), ""
	})
	if p := e.pod("own"); p == nil || p.Status.PodIP != "10.42.0.2" {
		t.Errorf("own after a restart: %+v", p)
	}

	// Deleted: its network goes.
	if _, err := e.admin.Delete(e.ctx, podsR, "default", "own", nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "own's network torn down", 20*time.Second, func() (bool, string) {
		return net.tornDown(string(own.UID)), ""
	})
}

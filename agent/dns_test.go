package agent_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/agent"
	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/runtime/fake"
)

// Each pod's resolv.conf by its dnsPolicy, and the hosts file of a pod
// with a network of its own (SPEC NET-4): the agent writes them before
// the pod's containers, which mount them; a ClusterFirst pod asks the
// cluster resolver with its namespace first in the search path, a
// hostNetwork one the node's resolvers, a None one only its dnsConfig;
// a deleted pod's files go with it.
func TestPodResolvConfAndHosts(t *testing.T) {
	resolvConf := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(resolvConf, []byte("search lab.example\nnameserver 192.0.2.53\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e, _, rt, _ := startWithPodNetwork(t, func(cfg *agent.Config) {
		// A resolver the site runs: the agent runs none of its own (a
		// test must not take the node's port 53).
		cfg.ClusterDNS = "192.0.2.10"
		cfg.ResolvConf = resolvConf
	})

	e.createPod("own", nil)
	e.createPod("host", func(p *api.Pod) { p.Spec.HostNetwork = true })
	e.createPod("none", func(p *api.Pod) {
		p.Spec.DNSPolicy = api.DNSNone
		p.Spec.DNSConfig = &api.PodDNSConfig{Nameservers: []string{"192.0.2.99"}}
	})
	read := func(path string) string {
		t.Helper()
		if path == "" {
			return ""
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	own := e.waitPhase("own", api.PodRunning, func(p *api.Pod) bool { return p.Status.PodIP != "" })
	s := rt.spec("own")
	if got, want := read(s.ResolvConf), "search default.svc.cluster.local svc.cluster.local cluster.local lab.example\nnameserver 192.0.2.10\noptions ndots:5\n"; got != want {
		t.Errorf("own's resolv.conf:\n%s\nwant\n%s", got, want)
	}
	if got, want := read(s.HostsFile), fmt.Sprintf("%s\town\n", own.Status.PodIP); len(got) < len(want) || got[len(got)-len(want):] != want {
		t.Errorf("own's hosts file:\n%s\nwant it to end with %q", got, want)
	}
	e.waitPhase("host", api.PodRunning, nil)
	if s := rt.spec("host"); read(s.ResolvConf) != "search lab.example\nnameserver 192.0.2.53\n" || s.HostsFile != "" {
		t.Errorf("hostNetwork pod: resolv.conf %q hosts %q, want the node's", read(s.ResolvConf), s.HostsFile)
	}
	e.waitPhase("none", api.PodRunning, nil)
	if got := read(rt.spec("none").ResolvConf); got != "nameserver 192.0.2.99\n" {
		t.Errorf("dnsPolicy None: %q", got)
	}

	dir := filepath.Dir(s.ResolvConf)
	if _, err := e.admin.Delete(e.ctx, podsR, "default", "own", nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the deleted pod's files removed", 20*time.Second, func() (bool, string) {
		_, err := os.Stat(dir)
		return os.IsNotExist(err), fmt.Sprint(err)
	})
}

// A bad --cluster-dns or --cluster-domain is refused at start, naming
// the flag and the value (SPEC NET-4).
func TestBadClusterDNSSettings(t *testing.T) {
	for _, tc := range []struct {
		mutate func(*agent.Config)
		want   string
	}{
		{func(c *agent.Config) { c.ClusterDNS = "nope" }, `--cluster-dns "nope": want auto, none or an IP address`},
		{func(c *agent.Config) { c.ClusterDomain = "Cluster_Local" }, `--cluster-domain "Cluster_Local"`},
	} {
		cfg := agent.Config{DataDir: t.TempDir(), NodeName: "n", Runtime: fake.New()}
		tc.mutate(&cfg)
		if err := agent.Run(context.Background(), cfg); !errors.Is(err, agent.ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Run = %v, want %s", err, tc.want)
		}
	}
}

package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/agent"
	"github.com/outpost-edge/outpost/controlplane/controllers"
	"github.com/outpost-edge/outpost/controlplane/server"
	"github.com/spf13/cobra"
)

// The cluster secret can come from a file, out of ps's sight (issue 9
// item 10); an empty file or both ways at once are refused before
// anything starts.
func TestServerClusterSecretFile(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--cluster-secret-file", empty}, "is empty"},
		{[]string{"--cluster-secret-file", filepath.Join(dir, "missing")}, "no such file"},
		{[]string{"--cluster-secret-file", empty, "--cluster-secret", strings.Repeat("x", 40)}, "both given"},
	} {
		cmd := newServerCommand()
		cmd.SetArgs(append([]string{"--data-dir", filepath.Join(dir, "data")}, tt.args...))
		cmd.SetOut(&strings.Builder{})
		cmd.SetErr(&strings.Builder{})
		err := cmd.Execute()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: error %v, want one saying %q", tt.args, err, tt.want)
		}
	}
}

// The eviction settings refuse what they cannot mean, naming the flag
// (issue 10); nothing starts.
func TestServerEvictionFlags(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--node-monitor-grace-period", "0s"}, "--node-monitor-grace-period 0s: must be more than 0"},
		{[]string{"--fence-margin", "-1s"}, "--fence-margin -1s: must be 0 or more"},
		{[]string{"--node-eviction-rate", "0"}, "--node-eviction-rate 0: must be more than 0"},
		{[]string{"--secondary-node-eviction-rate", "-0.5"}, "--secondary-node-eviction-rate -0.5: must be 0 or more"},
		{[]string{"--unhealthy-zone-threshold", "1.5"}, "--unhealthy-zone-threshold 1.5: must be more than 0 and at most 1"},
		{[]string{"--large-cluster-size-threshold", "-1"}, "--large-cluster-size-threshold -1: must be 0 or more"},
		{[]string{"--machine-provider", "ipmi"}, `--machine-provider "ipmi": must be manual or exec`},
		{[]string{"--machine-provider", "exec"}, "--machine-provider exec needs --machine-release-command"},
		{[]string{"--machine-release-command", "true"}, "--machine-release-command is for --machine-provider exec"},
		// And the soft memory limit (issue 16 item 3).
		{[]string{"--memory-limit", "lots"}, `--memory-limit "lots": not a size`},
		{[]string{"--memory-limit", "1Mi"}, `--memory-limit "1Mi": at least 64Mi, or none`},
	} {
		for _, mk := range []func() *cobra.Command{newServerCommand, newDevCommand} {
			cmd := mk()
			cmd.SetArgs(append([]string{"--data-dir", filepath.Join(dir, "data")}, tt.args...))
			cmd.SetOut(&strings.Builder{})
			cmd.SetErr(&strings.Builder{})
			err := cmd.Execute()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%s %v: error %v, want one saying %q", cmd.Name(), tt.args, err, tt.want)
			}
		}
	}
}

// The eviction settings are config keys too (issue 10 item 3), with the
// flags' names under kubernetesMasterConfig.controllerArguments; a flag
// on the command line wins, and a bad value names the file and the key.
func TestServerConfigFileEvictionSettings(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "master-config.yaml")
	write := func(s string) {
		if err := os.WriteFile(file, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`kubernetesMasterConfig:
  controllerArguments:
    feature-gates: [TaintBasedEvictions=true]
    node-monitor-grace-period: ["20s"]
    node-eviction-rate: ["0.5"]
    secondary-node-eviction-rate: ["0"]
    unhealthy-zone-threshold: ["0.7"]
    large-cluster-size-threshold: ["10"]
    fence-margin: ["3s"]
`)
	cmd := &cobra.Command{}
	var e evictionFlags
	e.add(cmd)
	if err := cmd.Flags().Set("fence-margin", "4s"); err != nil {
		t.Fatal(err)
	}
	var cfg server.Config
	c := configFile{path: file}
	if err := c.apply(cmd, &cfg); err != nil {
		t.Fatal(err)
	}
	if err := e.apply(&cfg); err != nil {
		t.Fatal(err)
	}
	want := controllers.Eviction{NodeEvictionRate: 0.5, SecondaryNodeEvictionRate: -1, UnhealthyZoneThreshold: 0.7, LargeClusterSizeThreshold: 10}
	if cfg.Eviction != want || cfg.NodeMonitorGracePeriod != 20*time.Second || cfg.FenceMargin != 4*time.Second {
		t.Errorf("eviction %+v, grace %v, margin %v; want %+v, 20s and the command line's 4s", cfg.Eviction, cfg.NodeMonitorGracePeriod, cfg.FenceMargin, want)
	}

	write("kubernetesMasterConfig: {controllerArguments: {node-eviction-rate: [fast], node-monitor-grace-period: [soon]}}\n")
	for _, mk := range []func() *cobra.Command{newServerCommand, newDevCommand} {
		cmd := mk()
		cmd.SetArgs([]string{"--data-dir", filepath.Join(dir, "data"), "--config", file})
		cmd.SetOut(&strings.Builder{})
		cmd.SetErr(&strings.Builder{})
		err := cmd.Execute()
		for _, w := range []string{file + ": kubernetesMasterConfig.controllerArguments.node-eviction-rate: \"fast\"", "controllerArguments.node-monitor-grace-period: \"soon\""} {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %v, want it to say %q", cmd.Name(), err, w)
			}
		}
	}
}

// The dev agent's ports are flags: loopback 10250 and 6446 by default,
// others for a second dev cluster on the machine (seen by a review: they
// were fixed).
func TestDevAgentPorts(t *testing.T) {
	for _, tt := range []struct {
		args   []string
		listen string
		gossip int
	}{
		{nil, "127.0.0.1:10250", 6446},
		{[]string{"--agent-listen", "127.0.0.1:20250", "--agent-gossip-port", "7446"}, "127.0.0.1:20250", 7446},
	} {
		var o devAgentOptions
		cmd := &cobra.Command{Use: "dev"}
		o.add(cmd)
		if err := cmd.ParseFlags(append(tt.args, "--pod-network", "host")); err != nil {
			t.Fatal(err)
		}
		cfg, err := o.config("https://127.0.0.1:6443", "/data", "", slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		if cfg.EndpointAddr != tt.listen || cfg.GossipPort != tt.gossip || cfg.DataDir != "/data/agent" {
			t.Errorf("%v: endpoint %s gossip %d data %s, want %s %d /data/agent", tt.args, cfg.EndpointAddr, cfg.GossipPort, cfg.DataDir, tt.listen, tt.gossip)
		}
	}
	if f := newDevCommand().Flags().Lookup("agent-listen"); f == nil {
		t.Error("outpost dev has no --agent-listen")
	}
}

// --pod-network auto (the default, SPEC NET-1) gives pods networks of
// their own only where the CNI plugins are: a node without them runs
// pods in its own network, without the service proxy, and says why.
func TestPodNetworkAuto(t *testing.T) {
	var logs strings.Builder
	log := slog.New(slog.NewTextHandler(&logs, nil))
	p := podNetworkFlags{mode: "auto", binDirs: t.TempDir()}
	cfg := agent.Config{DataDir: t.TempDir()}
	if err := p.apply(&cfg, log); err != nil {
		t.Fatal(err)
	}
	if cfg.PodNetwork != nil || cfg.ServiceProxy {
		t.Errorf("without plugins: pod network %v, service proxy %v; want the host's network", cfg.PodNetwork, cfg.ServiceProxy)
	}
	if !strings.Contains(logs.String(), "the CNI plugin bridge is not in") {
		t.Errorf("the fallback is not said: %s", logs.String())
	}
	p = podNetworkFlags{mode: "bridged"}
	if err := p.apply(&cfg, log); err == nil || !strings.Contains(err.Error(), "want auto, cni or host") {
		t.Errorf("a bad --pod-network: %v", err)
	}
}

package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/outpost-edge/outpost/agent"
	"github.com/outpost-edge/outpost/controlplane/api"
)

// agentFile is the shape of `outpost agent --config FILE`: the flags'
// names in camelCase, plus registry credentials, which have no flag.
type agentFile struct {
	Server           string                 `json:"server,omitempty"`
	Token            string                 `json:"token,omitempty"`
	CACert           string                 `json:"caCert,omitempty"`
	DataDir          string                 `json:"dataDir,omitempty"`
	NodeName         string                 `json:"nodeName,omitempty"`
	Labels           map[string]string      `json:"labels,omitempty"`
	RegisterTaints   string                 `json:"registerWithTaints,omitempty"`
	Address          string                 `json:"address,omitempty"`
	Listen           string                 `json:"listen,omitempty"`
	GossipPort       int                    `json:"gossipPort,omitempty"`
	ContainerdSocket string                 `json:"containerdSocket,omitempty"`
	OCIRuntime       string                 `json:"ociRuntime,omitempty"`
	Heartbeat        string                 `json:"heartbeat,omitempty"`
	StatusRefresh    string                 `json:"statusRefresh,omitempty"`
	Reserved         map[string]string      `json:"reserved,omitempty"`
	MaxPods          int64                  `json:"maxPods,omitempty"`
	EvictionHard     string                 `json:"evictionHard,omitempty"`
	Registries       []agent.RegistryConfig `json:"registries,omitempty"`
	// The server role (SPEC CPL-2).
	ControlPlaneEligible bool     `json:"controlPlaneEligible,omitempty"`
	ClusterSecretFile    string   `json:"clusterSecretFile,omitempty"`
	ServerDataDir        string   `json:"serverDataDir,omitempty"`
	ServerArgs           []string `json:"serverArgs,omitempty"`
	// Config updates (SPEC UPD-8).
	OSUpdates    string `json:"osUpdates,omitempty"`
	OSBackend    string `json:"osBackend,omitempty"`
	OSBackendDir string `json:"osBackendDir,omitempty"`
}

// agentFlags are `outpost agent`'s flags.
type agentFlags struct {
	cfg        agent.Config
	logs       logFlags
	configFile string
	labels     string
	taints     string
	reserved   string
	osf        osUpdateFlags
	pnf        podNetworkFlags
	dnsf       clusterDNSFlags
	// installed is the join string install gives the unit, for its
	// check (roleCheck).
	installed string
}

// config is the agent's configuration from its flags, with every
// problem `outpost agent` refuses to start for, listed (agent.Config's
// Problems among them); nothing is started or written. The OS updates'
// systemd connection is osf.apply's, after. `outpost install agent` runs
// it too, with log discarding what it would say.
func (af *agentFlags) config(cmd *cobra.Command, log *slog.Logger) (agent.Config, []error) {
	cfg := af.cfg
	if af.installed != "" {
		cfg.JoinToken = af.installed
	}
	var errs []error
	if af.configFile != "" {
		errs = append(errs, loadAgentFile(af.configFile, &cfg, cmd))
	}
	var err error
	if af.labels != "" {
		cfg.Labels, err = parsePairs(af.labels, "--labels")
		errs = append(errs, err)
	}
	if af.taints != "" {
		if cfg.Taints, err = api.ParseTaints(af.taints); err != nil {
			errs = append(errs, fmt.Errorf("--register-with-taints: %w", err))
		}
	}
	if af.reserved != "" {
		cfg.Reserved, err = parseResources(af.reserved)
		errs = append(errs, err)
	}
	cfg.Logger = log
	cfg.Ready = agent.NotifyReady(log)
	af.dnsf.apply(&cfg)
	errs = append(errs, af.osf.check(), af.pnf.apply(&cfg, log))
	errs = append(errs, cfg.Problems()...)
	return cfg, slices.DeleteFunc(errs, func(err error) bool { return err == nil })
}

func newAgentCommand() *cobra.Command {
	cmd, _ := newAgentRole()
	return cmd
}

// newAgentRole is `outpost agent` and the check of its flags that
// `outpost install agent` runs: secret is the join string the unit will
// be given (install withholds --token).
func newAgentRole() (*cobra.Command, roleCheck) {
	var af agentFlags
	cfg, logs, osf, pnf, dnsf := &af.cfg, &af.logs, &af.osf, &af.pnf, &af.dnsf
	configFile, labels, taints, reserved := &af.configFile, &af.labels, &af.taints, &af.reserved
	cmd := &cobra.Command{
		Use:   "agent --server URL --token JOIN-STRING",
		Short: "Run the node agent: register this host and run the pods placed on it",
		Long: `Run the node agent on this host. The first start joins the cluster with a join
string from "outpost adm token create --role node" (it carries the cluster CA's
pin, so the agent trusts the control plane without a copy of its CA) and saves
the node's own credential in --data-dir; later starts use that.

The agent registers a Node named after the host, reports its capacity and
conditions (memory, disk and PID pressure, network, runtime), joins the gossip
pool so a silent node is noticed within seconds, and runs the pods bound to it
through containerd: its own, started from the installed containerd binary, or
the one at --containerd-socket. Containers run with crun where it is installed
(apt-get install crun; it starts them with less CPU than runc) and runs on the
host's cgroup layout, else with runc (--oci-runtime). Each pod that is not hostNetwork gets a network
of its own through CNI, with Services' cluster IPs and node ports (nftables)
and the cluster's DNS answered by the agent, where the CNI plugins, iptables
and nft are installed (--pod-network auto; host otherwise).

The pods it must run are kept in a state file: with the control plane away they
keep running, and an agent restarted meanwhile brings them back.

With --control-plane-eligible the host may serve: when a control-plane member
is lost or retired, the control plane machine set picks an eligible host in the
failure domain that keeps the balance, and its agent starts "outpost server" of
the same binary (the unit outpost-server.service when the host runs systemd,
else a child process), which joins as a non-voter and is promoted once caught
up. When the host's machine is deleted, the agent stops that server.`,
		Example: `  outpost agent --server https://10.0.0.1:6443 --token OP1::sha256:…::abcdef.0123456789abcdef
  outpost agent --config /etc/outpost/agent.yaml --labels topology.kubernetes.io/zone=shop-3
  outpost agent --control-plane-eligible --cluster-secret-file /etc/outpost/cluster-secret`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := logs.logger()
			if err != nil {
				return err
			}
			cfg, errs := af.config(cmd, log)
			if err := errors.Join(errs...); err != nil {
				return err
			}
			stop, err := osf.apply(cmd.Context(), &cfg, log)
			if err != nil {
				return err
			}
			defer stop()
			return agent.Run(cmd.Context(), cfg)
		},
	}
	f := cmd.Flags()
	pnf.register(f)
	dnsf.register(f, true)
	f.StringVar(&cfg.Server, "server", "", "API URL of a server to join through (https://host:6443; first start only: the credential then lists every server, and the agent fails over between them)")
	f.StringVar(&cfg.JoinToken, "token", os.Getenv("OUTPOST_JOIN"), "join string (or OUTPOST_JOIN); needed on the first start only")
	f.StringVar(&cfg.CAFile, "ca-cert", "", "the cluster CA's PEM file, when --token is a bare id.secret")
	f.StringVar(&cfg.DataDir, "data-dir", "/var/lib/outpost/agent", "directory for the credential, the state file, logs and containerd's root")
	f.StringVar(&cfg.BinaryDir, "binary-dir", "", "the self-update directory this agent's binary runs from (DIR/current/outpost; see outpost adm binary --help); without it a release cannot replace this agent's binary")
	f.StringVar(&cfg.NodeName, "node-name", "", "the Node's name (default: the host name)")
	f.StringVar(labels, "labels", "", "labels to put on the Node, k=v,k2=v2")
	f.StringVar(taints, "register-with-taints", "", "taints the Node is registered with, key=value:Effect,key2:Effect (as the kubelet's flag; later changes are `outpost adm taint`'s)")
	f.StringVar(&cfg.Address, "address", "", "the node's InternalIP (default: the address of the default route's interface)")
	f.StringVar(&cfg.EndpointAddr, "listen", ":10250", "address of the agent's endpoint (logs, exec, image import; control plane only)")
	f.IntVar(&cfg.GossipPort, "gossip-port", agent.DefaultGossipPort, "port of the gossip membership pool")
	f.StringVar(&cfg.ContainerdSocket, "containerd-socket", "", "containerd's socket (default: start a private containerd)")
	f.StringVar(&cfg.OCIRuntime, "oci-runtime", "auto", "the OCI runtime containerd runs new containers with: auto (crun where it is installed and the host's cgroup layout suits it, else runc; the choice is logged and shown in the node's runtime version), runc, crun (faster to start; apt-get install crun) or the absolute path of a runtime with runc's command line")
	f.DurationVar(&cfg.Heartbeat, "heartbeat", agent.DefaultHeartbeat, "how often the node proves it is alive (no raft write) and its status is compared with what was posted")
	f.DurationVar(&cfg.StatusRefresh, "status-refresh", agent.DefaultStatusRefresh, "how often the node's status is posted when nothing changed")
	f.StringVar(reserved, "reserved", "", "resources kept for the system, e.g. cpu=100m,memory=256Mi,ephemeral-storage=1Gi")
	f.Int64Var(&cfg.MaxPods, "max-pods", agent.DefaultMaxPods, "the node's pods capacity")
	f.StringVar(&cfg.EvictionHard, "eviction-hard", "", "pressure thresholds, e.g. memory.available<100Mi,nodefs.available<10% (default: the kubelet's)")
	f.StringVar(configFile, "config", "", "YAML file with the same settings (flags win) and registry credentials")
	f.BoolVar(&cfg.ControlPlaneEligible, "control-plane-eligible", false,
		"this host may serve: the control plane machine set may ask it to start a server that replaces a lost or retired one (needs --cluster-secret-file; labels the Node at its first registration, after which an administrator labels the node or its machine outpost.io/control-plane-eligible=true)")
	f.StringVar(&cfg.ClusterSecretFile, "cluster-secret-file", "", "the cluster secret's file (mode 0600), for the server this host may be asked to run")
	f.StringVar(&cfg.ServerDataDir, "server-data-dir", "", "data dir of that server (default DATA-DIR/server)")
	f.StringArrayVar(&cfg.ServerArgs, "server-arg", nil, "an extra argument for that server, after the agent's own (repeat it; e.g. --server-arg=--config=/etc/outpost/server.yaml)")
	osf.add(cmd)
	logs.add(cmd)
	check := func(cmd *cobra.Command, secret string) error {
		af.installed = secret
		defer func() { af.installed = "" }()
		_, err := logs.logger()
		_, errs := af.config(cmd, slog.New(slog.DiscardHandler))
		if secret == "" {
			// Install says itself that it needs a join string, naming
			// its own flag, when the agent has not joined.
			errs = slices.DeleteFunc(errs, func(err error) bool { return errors.Is(err, agent.ErrNoJoinString) })
		}
		return errors.Join(append([]error{err}, errs...)...)
	}
	return cmd, check
}

// loadAgentFile fills cfg from the file for every flag not given.
func loadAgentFile(path string, cfg *agent.Config, cmd *cobra.Command) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	var fc agentFile
	if err := yaml.UnmarshalStrict(b, &fc); err != nil {
		return fmt.Errorf("--config %s: %w", path, err)
	}
	set := func(flag string, apply func()) {
		if !cmd.Flags().Changed(flag) {
			apply()
		}
	}
	str := func(flag string, dst *string, v string) {
		if v != "" {
			set(flag, func() { *dst = v })
		}
	}
	str("server", &cfg.Server, fc.Server)
	str("token", &cfg.JoinToken, fc.Token)
	str("ca-cert", &cfg.CAFile, fc.CACert)
	str("data-dir", &cfg.DataDir, fc.DataDir)
	str("node-name", &cfg.NodeName, fc.NodeName)
	str("address", &cfg.Address, fc.Address)
	str("listen", &cfg.EndpointAddr, fc.Listen)
	str("containerd-socket", &cfg.ContainerdSocket, fc.ContainerdSocket)
	str("oci-runtime", &cfg.OCIRuntime, fc.OCIRuntime)
	str("eviction-hard", &cfg.EvictionHard, fc.EvictionHard)
	str("cluster-secret-file", &cfg.ClusterSecretFile, fc.ClusterSecretFile)
	str("server-data-dir", &cfg.ServerDataDir, fc.ServerDataDir)
	if fc.ControlPlaneEligible {
		set("control-plane-eligible", func() { cfg.ControlPlaneEligible = true })
	}
	for _, kv := range []struct{ flag, v string }{{"os-updates", fc.OSUpdates}, {"os-backend", fc.OSBackend}, {"os-backend-dir", fc.OSBackendDir}} {
		if kv.v != "" && !cmd.Flags().Changed(kv.flag) {
			if err := cmd.Flags().Set(kv.flag, kv.v); err != nil {
				return fmt.Errorf("--config %s: %s: %w", path, kv.flag, err)
			}
		}
	}
	if len(fc.ServerArgs) > 0 {
		set("server-arg", func() { cfg.ServerArgs = fc.ServerArgs })
	}
	if fc.GossipPort != 0 {
		set("gossip-port", func() { cfg.GossipPort = fc.GossipPort })
	}
	if fc.MaxPods != 0 {
		set("max-pods", func() { cfg.MaxPods = fc.MaxPods })
	}
	dur := func(flag, key string, dst *time.Duration, v string) error {
		if v == "" {
			return nil
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("--config %s: %s: %w", path, key, err)
		}
		set(flag, func() { *dst = d })
		return nil
	}
	if err := dur("heartbeat", "heartbeat", &cfg.Heartbeat, fc.Heartbeat); err != nil {
		return err
	}
	if err := dur("status-refresh", "statusRefresh", &cfg.StatusRefresh, fc.StatusRefresh); err != nil {
		return err
	}
	if len(fc.Labels) > 0 {
		cfg.Labels = fc.Labels
	}
	if fc.RegisterTaints != "" && !cmd.Flags().Changed("register-with-taints") {
		ts, err := api.ParseTaints(fc.RegisterTaints)
		if err != nil {
			return fmt.Errorf("--config %s: registerWithTaints: %w", path, err)
		}
		cfg.Taints = ts
	}
	if len(fc.Reserved) > 0 {
		cfg.Reserved = api.ResourceList{}
		for k, v := range fc.Reserved {
			q, err := api.ParseQuantity(v)
			if err != nil {
				return fmt.Errorf("--config %s: reserved.%s: %w", path, k, err)
			}
			cfg.Reserved[k] = q
		}
	}
	cfg.Registries = fc.Registries
	return nil
}

// parsePairs parses k=v,k2=v2.
func parsePairs(s, flag string) (map[string]string, error) {
	out := map[string]string{}
	var bad []string
	for _, p := range splitList(s) {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			bad = append(bad, p)
			continue
		}
		out[k] = v
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("%s: want key=value pairs, got %q", flag, bad)
	}
	return out, nil
}

// parseResources parses cpu=100m,memory=256Mi.
func parseResources(s string) (api.ResourceList, error) {
	pairs, err := parsePairs(s, "--reserved")
	if err != nil {
		return nil, err
	}
	out := api.ResourceList{}
	for k, v := range pairs {
		q, err := api.ParseQuantity(v)
		if err != nil {
			return nil, fmt.Errorf("--reserved %s: %w", k, err)
		}
		out[k] = q
	}
	return out, nil
}

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/outpost-edge/outpost/internal/exepages"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/outpost-edge/outpost/controlplane/admission"
	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
	"github.com/outpost-edge/outpost/controlplane/console"
	"github.com/outpost-edge/outpost/controlplane/controllers"
	"github.com/outpost-edge/outpost/controlplane/server"
	"github.com/outpost-edge/outpost/internal/portcheck"
)

// logFlags are the logging flags shared by the long-running commands.
type logFlags struct {
	level  string
	format string
}

func (l *logFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&l.level, "log-level", "info", "log level: debug, info, warn or error")
	cmd.Flags().StringVar(&l.format, "log-format", "text", "log format: text or json")
}

func (l *logFlags) logger() (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(l.level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", l.level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch l.format {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", l.format)
}

// networkFlags are the cluster's address ranges (SPEC NET-3).
type networkFlags struct {
	serviceCIDR, clusterCIDR, nodePorts, clusterDNS string
	nodeMask                                        int
}

func (n *networkFlags) register(f *pflag.FlagSet) {
	f.StringVar(&n.serviceCIDR, "service-cidr", "10.43.0.0/16", "the range Services' cluster IPs are given from")
	f.StringVar(&n.clusterCIDR, "cluster-cidr", "10.42.0.0/16", "the range pods' addresses come from (may not overlap --service-cidr)")
	f.StringVar(&n.nodePorts, "service-node-port-range", "30000-32767", "the node ports NodePort Services are given from, LOW-HIGH")
	f.StringVar(&n.clusterDNS, "cluster-dns", "", "the address every agent's DNS resolver answers pods on, kept out of --service-cidr's cluster IPs (default: its tenth address, 10.43.0.10)")
	f.IntVar(&n.nodeMask, "node-cidr-mask-size", 24, "the prefix length of each node's pod CIDR, split from --cluster-cidr (24: 254 pods a node, 256 nodes in a /16)")
}

func (n *networkFlags) apply(cfg *server.Config) error {
	var err error
	if cfg.Network.ServiceCIDR, err = netip.ParsePrefix(n.serviceCIDR); err != nil {
		return fmt.Errorf("--service-cidr %q: %w", n.serviceCIDR, err)
	}
	if cfg.Network.ClusterCIDR, err = netip.ParsePrefix(n.clusterCIDR); err != nil {
		return fmt.Errorf("--cluster-cidr %q: %w", n.clusterCIDR, err)
	}
	if n.clusterDNS != "" {
		if cfg.Network.ClusterDNS, err = netip.ParseAddr(n.clusterDNS); err != nil {
			return fmt.Errorf("--cluster-dns %q: %w", n.clusterDNS, err)
		}
	}
	lo, hi, ok := strings.Cut(n.nodePorts, "-")
	l, lerr := strconv.Atoi(lo)
	h, herr := strconv.Atoi(hi)
	if !ok || lerr != nil || herr != nil || l < 1 || h > 65535 || l > h {
		return fmt.Errorf("--service-node-port-range %q: want LOW-HIGH within 1-65535", n.nodePorts)
	}
	cfg.Network.NodePorts = [2]int32{int32(l), int32(h)}
	cfg.Network.NodeCIDRMaskSize = n.nodeMask
	return nil
}

// serverFlags are `outpost server`'s flags.
type serverFlags struct {
	cfg   server.Config
	join  string
	logs  logFlags
	sched schedulerFlags
	gf    gossipFlags
	tol   tolerationFlags
	evict evictionFlags
	nets  networkFlags
	conf  configFile
	mem   memoryLimitFlag
	// secretFile holds the cluster secret, out of ps's sight.
	secretFile string
	// installed is the cluster secret install gives the unit, for its
	// check (roleCheck).
	installed string
}

// config is the server's configuration from its flags, with every
// problem `outpost server` refuses to start for, listed; nothing is
// started or written. `outpost install server` runs it too.
func (sf *serverFlags) config(cmd *cobra.Command) (server.Config, error) {
	cfg := sf.cfg
	var errs []error
	log, err := sf.logs.logger()
	errs = append(errs, err)
	cfg.Logger = log
	cfg.Join = splitList(sf.join)
	switch {
	case sf.installed != "":
		cfg.ClusterSecret = sf.installed
	case sf.secretFile != "" && cfg.ClusterSecret != "":
		errs = append(errs, errors.New("--cluster-secret-file and --cluster-secret both given: use one"))
	case sf.secretFile != "":
		b, err := os.ReadFile(sf.secretFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("--cluster-secret-file: %w", err))
			break
		}
		cfg.ClusterSecret = strings.TrimSpace(string(b))
		if cfg.ClusterSecret == "" {
			errs = append(errs, fmt.Errorf("--cluster-secret-file %s is empty", sf.secretFile))
		}
	case cfg.ClusterSecret != "":
		if log != nil {
			log.Warn("--cluster-secret on the command line is visible to every user of this machine (ps, /proc); use --cluster-secret-file or OUTPOST_CLUSTER_SECRET")
		}
	default:
		cfg.ClusterSecret = os.Getenv("OUTPOST_CLUSTER_SECRET")
	}
	if cfg.DataDir == "" {
		errs = append(errs, errors.New("--data-dir is required"))
	}
	if cfg.HeartbeatTimeout < 5*time.Millisecond {
		errs = append(errs, fmt.Errorf("--raft-heartbeat-timeout %s: must be at least 5ms", cfg.HeartbeatTimeout))
	}
	errs = append(errs, sf.sched.apply(&cfg), sf.gf.apply(cmd, &cfg), sf.conf.apply(cmd, &cfg),
		sf.evict.apply(&cfg), sf.tol.apply(&cfg), sf.nets.apply(&cfg), sf.mem.check())
	if cfg.DataDir != "" { // else the server's check says it again
		errs = append(errs, cfg.Check())
	}
	return cfg, errors.Join(errs...)
}

func newServerCommand() *cobra.Command {
	cmd, _ := newServerRole()
	return cmd
}

// newServerRole is `outpost server` and the check of its flags that
// `outpost install server` runs: secret is the cluster secret the unit
// will be given (install withholds --cluster-secret).
func newServerRole() (*cobra.Command, roleCheck) {
	var sf serverFlags
	cfg := &sf.cfg
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run a control-plane member (raft, API, store)",
		Long: `Run one member of outpost's raft-replicated control plane.

Three servers that start with --bootstrap-expect 3 and --join listing each
other form a new cluster; they must share the cluster secret (the same
--cluster-secret-file or OUTPOST_CLUSTER_SECRET, at least 32 characters; make
one with "outpost adm secret"). A server that restarts rejoins with its data. A
new server joins an existing cluster with --join and the cluster secret only:
it is added as a non-voter, catches up, and is then promoted.

The first start writes an admin client config to DATA-DIR/admin.conf.`,
		Example: `  outpost server --data-dir /var/lib/outpost --bootstrap-expect 3 \
      --join 10.0.0.2:6444,10.0.0.3:6444 --cluster-secret-file /etc/outpost/cluster-secret`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := sf.config(cmd)
			if err != nil {
				return err
			}
			sf.mem.apply(cfg.Logger)
			cfg.Reload = reloadOnHangup(cmd.Context())
			s, err := server.Start(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			notifyServerStarted(cmd.Context(), s, cfg.Logger)
			go exepages.TrimAfter(cmd.Context(), exepages.StartupDelay, cfg.Logger)
			return s.Wait(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.ID, "id", "", "this server's stable ID (default: the host name)")
	f.StringVar(&cfg.DataDir, "data-dir", "", "directory for the raft log, snapshots, certificates and the admin config")
	f.StringVar(&cfg.BinaryDir, "binary-dir", "", "the self-update directory this server's binary runs from (DIR/current/outpost; see outpost adm binary --help); without it a release cannot replace this server's binary")
	f.StringVar(&cfg.APIAddr, "api-addr", ":6443", "address the HTTPS API listens on")
	f.StringVar(&cfg.AdvertiseAPI, "advertise-api", "", "API URL other servers and clients use (default: derived from --api-addr)")
	f.StringVar(&cfg.RaftAddr, "raft-addr", ":6444", "address raft listens on")
	f.StringVar(&cfg.AdvertiseRaft, "advertise-raft", "", "raft address other servers dial (default: derived from --raft-addr)")
	f.IntVar(&cfg.BootstrapExpect, "bootstrap-expect", 0, "form a new cluster once this many servers are known (0: join an existing one, or restart)")
	f.StringVar(&sf.join, "join", "", "comma-separated raft addresses of other servers")
	f.StringVar(&sf.secretFile, "cluster-secret-file", "", "file holding the shared cluster secret (keep it mode 0600)")
	f.StringVar(&cfg.ClusterSecret, "cluster-secret", "", "shared cluster secret; visible in ps, so prefer --cluster-secret-file or OUTPOST_CLUSTER_SECRET (generated for a one-server cluster)")
	f.BoolVar(&cfg.Insecure, "insecure", false, "plain HTTP and plain raft TCP, no TLS (tokens are still required); never on a real network")
	f.StringVar(&cfg.AdminConfigPath, "admin-config", "", "where to write the admin client config (default DATA-DIR/admin.conf)")
	f.StringVar(&cfg.BrowserCertFile, "tls-cert-file", "", "PEM certificate (with its chain) the API serves to web browsers (the console at /ui), from your own or a public CA; default: one the cluster CA issues, which browsers reach with a warning (they cannot verify its ed25519 CA)")
	f.StringVar(&cfg.BrowserKeyFile, "tls-private-key-file", "", "the key of --tls-cert-file")
	f.DurationVar(&cfg.EventTTL, "event-ttl", time.Hour, "how long events are kept")
	f.DurationVar(&cfg.StateHashInterval, "state-hash-interval", time.Minute, "how often this server compares a hash of its state with the other servers' at the same raft index; a server that differs fails /readyz (GET /debug/statehash shows the last comparison)")
	f.DurationVar(&cfg.SnapshotInterval, "raft-snapshot-interval", 0, "how often raft checks whether to snapshot (0: 2m)")
	f.Uint64Var(&cfg.SnapshotThreshold, "raft-snapshot-threshold", 0, "raft log entries since the last snapshot that trigger one (0: 8192); the least: with more stored objects, a snapshot waits for a quarter as many entries as there are objects, since each encodes them all")
	f.DurationVar(&cfg.HeartbeatTimeout, "raft-heartbeat-timeout", time.Second, "how long a follower waits without hearing from the leader before it stands for election (the election timeout is the same, the leader's lease half): "+
		"lower moves the leadership sooner when the leader's host dies, higher rides out slow or lossy links without needless elections; every server should have the same")
	sf.nets.register(f)
	f.Uint64Var(&cfg.CatchUpLag, "raft-catch-up-lag", 64, "a joining server (a replacement too) is promoted to voter once it holds every entry committed when it asked and is at most this many entries behind the leader's commit index; the leader's setting counts")
	// Hidden: a server that acknowledges writes it may lose on a power
	// cut, only for the power-loss test to prove it notices.
	f.BoolVar(&cfg.UnsafeNoFsync, "unsafe-no-fsync", false, "do not fsync the raft log (loses acknowledged writes on power loss; tests only)")
	_ = f.MarkHidden("unsafe-no-fsync")
	sf.gf.add(cmd, "")
	sf.mem.add(cmd)
	sf.conf.add(cmd)
	sf.tol.add(cmd)
	sf.evict.add(cmd)
	sf.sched.add(cmd)
	sf.logs.add(cmd)
	check := func(cmd *cobra.Command, secret string) error {
		sf.installed = secret
		defer func() { sf.installed = "" }()
		_, err := sf.config(cmd)
		return err
	}
	return cmd, check
}

// roleCheck checks a role's flags as given to cmd, as the role does when
// it starts, with secret the cluster secret or join string install puts
// in the unit's files; it lists every problem.
type roleCheck func(cmd *cobra.Command, secret string) error

func newDevCommand() *cobra.Command {
	var (
		cfg              server.Config
		logs             logFlags
		sched            schedulerFlags
		noAgent          bool
		containerdSocket string
		devAgent         devAgentOptions
		tol              tolerationFlags
		evict            evictionFlags
		nets             networkFlags
		devGossip        gossipFlags
		conf             configFile
		mem              memoryLimitFlag
	)
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a one-process development cluster",
		Long: `Run the control plane as a one-member raft cluster in one process, with the
API on localhost, and a node agent for this host in the same process (it
starts a private containerd from the installed binary: apt-get install
containerd runc, and crun, which it prefers to runc where it runs). Stop it and start it again with the same --data-dir and
every object is still there. The admin config is written to
~/.config/outpost/config, so "outpost get namespaces" works from another shell.
--no-agent runs the control plane alone (for simulated nodes). A second dev
cluster on the same machine needs its own --data-dir, --admin-config and
ports: --api-addr, --raft-addr, --gossip-addr, --agent-listen and
--agent-gossip-port.`,
		Example: `  outpost dev
  outpost dev --stop-pods
  # A second cluster beside the first, for simulated nodes only:
  outpost dev --no-agent --data-dir /tmp/dev2 --admin-config /tmp/dev2/config \
      --api-addr 127.0.0.1:7443 --raft-addr 127.0.0.1:7444 --gossip-addr 127.0.0.1:7946`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := logs.logger()
			if err != nil {
				return err
			}
			cfg.Logger = log
			cfg.BootstrapExpect = 1
			if cfg.AdminConfigPath == "" {
				cfg.AdminConfigPath = client.DefaultConfigPath()
			}
			if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
				return fmt.Errorf("data dir: %w", err)
			}
			if err := sched.apply(&cfg); err != nil {
				return err
			}
			if err := devGossip.apply(cmd, &cfg); err != nil {
				return err
			}
			if err := conf.apply(cmd, &cfg); err != nil {
				return err
			}
			if err := evict.apply(&cfg); err != nil {
				return err
			}
			if err := tol.apply(&cfg); err != nil {
				return err
			}
			if err := nets.apply(&cfg); err != nil {
				return err
			}
			if err := mem.check(); err != nil {
				return err
			}
			if !noAgent {
				// The agent's flags are checked before anything
				// starts: a typo is said at once, not in a log line.
				if _, err := devAgent.config("", cfg.DataDir, containerdSocket, log); err != nil {
					return err
				}
			}
			// A port another process holds is said now, naming the flag
			// that moves it, rather than by a listener failing inside
			// the agent while `make run` waits for it.
			if err := portcheck.Check(devPorts(&cfg, &devAgent, noAgent)); err != nil {
				return fmt.Errorf("%w\n(is another outpost dev running? stop it, or move this one with the flags named)", err)
			}
			mem.apply(log)
			cfg.Reload = reloadOnHangup(cmd.Context())
			s, err := server.Start(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			// After Start: the API's address is known then, port 0 too.
			fmt.Fprintf(cmd.ErrOrStderr(), "outpost dev: data in %s, admin config in %s, console: %s\n",
				cfg.DataDir, cfg.AdminConfigPath, strings.TrimSuffix(s.URL(), "/")+console.Prefix+"/")
			if noAgent {
				return s.Wait(cmd.Context())
			}
			agentCtx, stopAgent := context.WithCancel(cmd.Context())
			agentDone := make(chan struct{})
			go func() {
				defer close(agentDone)
				runDevAgent(agentCtx, s, &devAgent, cfg.DataDir, containerdSocket, log)
			}()
			err = s.Wait(cmd.Context())
			// Waiting for the agent lets --stop-pods finish before the
			// process exits.
			stopAgent()
			<-agentDone
			return err
		},
	}
	home, _ := os.UserHomeDir()
	f := cmd.Flags()
	f.StringVar(&cfg.DataDir, "data-dir", filepath.Join(home, ".local", "share", "outpost"), "directory for all state")
	f.StringVar(&cfg.APIAddr, "api-addr", "127.0.0.1:6443", "address the HTTPS API listens on")
	f.StringVar(&cfg.RaftAddr, "raft-addr", "127.0.0.1:6444", "address raft listens on")
	devGossip.add(cmd, "127.0.0.1:6445")
	f.StringVar(&cfg.AdminConfigPath, "admin-config", "", "where to write the admin client config (default ~/.config/outpost/config)")
	f.StringVar(&cfg.BrowserCertFile, "tls-cert-file", "", "PEM certificate (with its chain) the API serves to web browsers (the console at /ui), from your own or a public CA; default: one the cluster CA issues, which browsers reach with a warning (they cannot verify its ed25519 CA)")
	f.StringVar(&cfg.BrowserKeyFile, "tls-private-key-file", "", "the key of --tls-cert-file")
	f.BoolVar(&cfg.Insecure, "insecure", false, "plain HTTP, no TLS")
	f.BoolVar(&noAgent, "no-agent", false, "run the control plane only, without a node agent for this host")
	f.StringVar(&containerdSocket, "containerd-socket", "", "the agent's containerd socket (default: start a private containerd)")
	devAgent.add(cmd)
	mem.add(cmd)
	nets.register(cmd.Flags())
	tol.add(cmd)
	evict.add(cmd)
	conf.add(cmd)
	sched.add(cmd)
	logs.add(cmd)
	return cmd
}

// devPorts are the addresses `outpost dev` listens on, with the flags
// that move them.
func devPorts(cfg *server.Config, agent *devAgentOptions, noAgent bool) []portcheck.Use {
	uses := []portcheck.Use{
		{Network: "tcp", Addr: cfg.APIAddr, Flag: "--api-addr", What: "the API"},
		{Network: "tcp", Addr: cfg.RaftAddr, Flag: "--raft-addr", What: "raft"},
		{Network: "tcp", Addr: cfg.GossipAddr, Flag: "--gossip-addr", What: "the control plane's gossip"},
		{Network: "udp", Addr: cfg.GossipAddr, Flag: "--gossip-addr", What: "the control plane's gossip"},
	}
	if !noAgent {
		g := net.JoinHostPort("127.0.0.1", strconv.Itoa(agent.gossipPort))
		uses = append(uses,
			portcheck.Use{Network: "tcp", Addr: agent.listen, Flag: "--agent-listen", What: "the agent's endpoint"},
			portcheck.Use{Network: "tcp", Addr: g, Flag: "--agent-gossip-port", What: "the agent's gossip"},
			portcheck.Use{Network: "udp", Addr: g, Flag: "--agent-gossip-port", What: "the agent's gossip"})
	}
	return uses
}

// configFile is --config: the server's config file in the shape of
// OpenShift's master config (admission.Config): the admission plugins
// (ADM-1..3) and kubernetesMasterConfig.controllerArguments with the
// eviction settings by their flag names (TNT-7..9).
type configFile struct{ path string }

func (c *configFile) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&c.path, "config", "",
		"server config file, as OpenShift's master config writes it: admissionConfig.pluginConfig with PodNodeConstraints (nodeSelectorLabelBlacklist), "+
			"PodNodeSelector (clusterDefaultNodeSelector, per-namespace whitelists) and DefaultTolerationSeconds (disable); "+
			"kubernetesMasterConfig.controllerArguments with "+strings.Join(admission.ControllerArgumentNames, ", ")+
			" (a flag given on the command line wins) and feature-gates TaintBasedEvictions=true")
}

// apply reads the file, if one is named, into cfg's admission config and
// sets the eviction flags it names that the command line left alone, so
// that they are checked and applied as flags are.
func (c *configFile) apply(cmd *cobra.Command, cfg *server.Config) error {
	if c.path == "" {
		return nil
	}
	ac, err := admission.LoadConfig(c.path)
	if err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	cfg.AdmissionConfig = ac
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(ac.ControllerArguments)) {
		fl := cmd.Flags().Lookup(name)
		if fl == nil || fl.Changed {
			continue // the command line wins
		}
		if err := fl.Value.Set(ac.ControllerArguments[name]); err != nil {
			errs = append(errs, fmt.Errorf("--config %s: kubernetesMasterConfig.controllerArguments.%s: %q: %w", c.path, name, ac.ControllerArguments[name], err))
		}
	}
	return errors.Join(errs...)
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// evictionFlags are the node lifecycle and eviction settings (SPEC
// TNT-7, TNT-9), with kube-controller-manager's names where it has one.
type evictionFlags struct {
	monitorGrace, fenceMargin time.Duration
	rate, secondaryRate       float64
	unhealthy                 float64
	largeCluster              int
	// provider and releaseCommand choose the machine provider (MCH-1).
	provider, releaseCommand string
	releaseTimeout           time.Duration
}

func (e *evictionFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.DurationVar(&e.monitorGrace, "node-monitor-grace-period", controllers.DefaultNodeMonitorGracePeriod,
		"how long a node may go without a heartbeat before it is marked Ready=Unknown and tainted unreachable (gossip is faster when it sees the node fail); "+
			"agents learn it with each heartbeat, and a cut-off agent stops a pod this long plus the pod's toleration of unreachable after its last acknowledged heartbeat")
	f.DurationVar(&e.fenceMargin, "fence-margin", controllers.DefaultFenceMargin,
		"how much longer than a cut-off node's own deadline (node-monitor-grace-period + toleration of unreachable + grace period) the control plane waits "+
			"before it takes a pod being deleted on that node for stopped and lets it be replaced")
	f.Float64Var(&e.rate, "node-eviction-rate", controllers.DefaultNodeEvictionRate,
		"nodes per second that may be tainted for eviction (NoExecute not-ready/unreachable) in a zone that is healthy")
	f.Float64Var(&e.secondaryRate, "secondary-node-eviction-rate", controllers.DefaultSecondaryNodeEvictionRate,
		"nodes per second tainted for eviction in a zone in PartialDisruption that has more than --large-cluster-size-threshold nodes; smaller such zones taint none")
	f.Float64Var(&e.unhealthy, "unhealthy-zone-threshold", controllers.DefaultUnhealthyZoneThreshold,
		"share of a zone's nodes not ready (with more than 2 of them) that makes it PartialDisruption")
	f.IntVar(&e.largeCluster, "large-cluster-size-threshold", controllers.DefaultLargeClusterSizeThreshold,
		"zones of more nodes than this are tainted at --secondary-node-eviction-rate in PartialDisruption; smaller ones not at all")
	f.StringVar(&e.provider, "machine-provider", "manual",
		"what releases a deleted machine's host: manual (a person powers it off) or exec (--machine-release-command)")
	f.StringVar(&e.releaseCommand, "machine-release-command", "",
		"with --machine-provider exec: a shell command that powers off or re-images the host (ipmitool, redfishtool, a script); "+
			"it gets OUTPOST_MACHINE_NAME, OUTPOST_MACHINE_PROVIDER_ID, OUTPOST_NODE_NAME, OUTPOST_MACHINE_ROLE and OUTPOST_MACHINE_ZONE; exit 0 is released, anything else is retried")
	f.DurationVar(&e.releaseTimeout, "machine-release-timeout", 5*time.Minute, "how long one run of --machine-release-command may take")
}

func (e *evictionFlags) apply(cfg *server.Config) error {
	var errs []error
	if e.monitorGrace <= 0 {
		errs = append(errs, fmt.Errorf("--node-monitor-grace-period %s: must be more than 0", e.monitorGrace))
	}
	if e.fenceMargin < 0 {
		errs = append(errs, fmt.Errorf("--fence-margin %s: must be 0 or more", e.fenceMargin))
	}
	if e.rate <= 0 {
		errs = append(errs, fmt.Errorf("--node-eviction-rate %g: must be more than 0", e.rate))
	}
	if e.secondaryRate < 0 {
		errs = append(errs, fmt.Errorf("--secondary-node-eviction-rate %g: must be 0 or more", e.secondaryRate))
	}
	if e.unhealthy <= 0 || e.unhealthy > 1 {
		errs = append(errs, fmt.Errorf("--unhealthy-zone-threshold %g: must be more than 0 and at most 1", e.unhealthy))
	}
	if e.largeCluster < 0 {
		errs = append(errs, fmt.Errorf("--large-cluster-size-threshold %d: must be 0 or more", e.largeCluster))
	}
	switch {
	case e.provider == "manual" && e.releaseCommand != "":
		errs = append(errs, errors.New("--machine-release-command is for --machine-provider exec"))
	case e.provider == "manual":
	case e.provider == "exec" && strings.TrimSpace(e.releaseCommand) == "":
		errs = append(errs, errors.New("--machine-provider exec needs --machine-release-command"))
	case e.provider == "exec":
		cfg.MachineProvider = controllers.ExecProvider{Command: e.releaseCommand, Timeout: e.releaseTimeout}
	default:
		errs = append(errs, fmt.Errorf("--machine-provider %q: must be manual or exec", e.provider))
	}
	if e.releaseTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--machine-release-timeout %s: must be more than 0", e.releaseTimeout))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	cfg.NodeMonitorGracePeriod, cfg.FenceMargin = e.monitorGrace, e.fenceMargin
	cfg.Eviction = controllers.Eviction{NodeEvictionRate: e.rate, SecondaryNodeEvictionRate: e.secondaryRate,
		UnhealthyZoneThreshold: e.unhealthy, LargeClusterSizeThreshold: e.largeCluster}
	if e.secondaryRate == 0 {
		cfg.Eviction.SecondaryNodeEvictionRate = -1 // 0 asked: none, not the default
	}
	if e.largeCluster == 0 {
		cfg.Eviction.LargeClusterSizeThreshold = -1
	}
	return nil
}

// tolerationFlags are DefaultTolerationSeconds' settings (SPEC ADM-3),
// with the names and defaults of kube-apiserver's flags.
type tolerationFlags struct {
	notReady, unreachable int64
}

func (t *tolerationFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.Int64Var(&t.notReady, "default-not-ready-toleration-seconds", admission.DefaultTolerationSeconds,
		"tolerationSeconds of the node.kubernetes.io/not-ready:NoExecute toleration every new pod without one gets: how long it stays on a node that is not ready")
	f.Int64Var(&t.unreachable, "default-unreachable-toleration-seconds", admission.DefaultTolerationSeconds,
		"tolerationSeconds of the node.kubernetes.io/unreachable:NoExecute toleration every new pod without one gets: how long it stays on a node that cannot be reached")
}

func (t *tolerationFlags) apply(cfg *server.Config) error {
	var errs []error
	if t.notReady < 0 {
		errs = append(errs, fmt.Errorf("--default-not-ready-toleration-seconds %d: must be 0 or more", t.notReady))
	}
	if t.unreachable < 0 {
		errs = append(errs, fmt.Errorf("--default-unreachable-toleration-seconds %d: must be 0 or more", t.unreachable))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	d := &cfg.AdmissionConfig.DefaultTolerationSeconds
	d.NotReadySeconds, d.UnreachableSeconds = &t.notReady, &t.unreachable
	return nil
}

// schedulerFlags are the scheduler settings of server and dev (SCH-2,
// SCH-12).
type schedulerFlags struct {
	policy string
	named  []string
	none   bool
}

func (s *schedulerFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&s.policy, "scheduler-policy", "", "policy file (kind: Policy, JSON or YAML) of default-scheduler, instead of the default policy. It seeds the cluster's SchedulerPolicy default-scheduler when there is none; SIGHUP puts the file in force (a bad file is refused)")
	f.StringArrayVar(&s.named, "scheduler", nil, "another scheduler: NAME=POLICYFILE (or NAME alone for the default policy), seeded and reloaded as --scheduler-policy; pods choose it with spec.schedulerName; repeatable")
	f.BoolVar(&s.none, "no-default-scheduler", false, "do not seed default-scheduler's policy (delete the SchedulerPolicy too, for an outside program to bind pods through the API)")
}

func (s *schedulerFlags) apply(cfg *server.Config) error {
	m := map[string]string{}
	if !s.none {
		m[api.DefaultSchedulerName] = s.policy
	} else if s.policy != "" {
		return fmt.Errorf("--scheduler-policy is for default-scheduler, which --no-default-scheduler switches off")
	}
	for _, v := range s.named {
		name, file, _ := strings.Cut(v, "=")
		name = strings.TrimSpace(name)
		if name == "" {
			return fmt.Errorf("--scheduler %q: want NAME=POLICYFILE", v)
		}
		if _, dup := m[name]; dup {
			return fmt.Errorf("--scheduler %q: scheduler %q is already configured", v, name)
		}
		m[name] = strings.TrimSpace(file)
	}
	cfg.Schedulers = m
	return nil
}

// reloadOnHangup turns SIGHUP into reload requests until ctx ends.
func reloadOnHangup(ctx context.Context) <-chan struct{} {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	out := make(chan struct{}, 1)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				select {
				case out <- struct{}{}:
				default:
				}
			}
		}
	}()
	return out
}

package agent

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/outpost-edge/outpost/agent/clusterdns"
	"github.com/outpost-edge/outpost/agent/host"
	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
	"github.com/outpost-edge/outpost/osupdate"
	"github.com/outpost-edge/outpost/runtime/containerd"
)

// Errors of this package.
var (
	// ErrConfig is a configuration the agent cannot start with.
	ErrConfig = errors.New("agent configuration")
	// ErrBadReply is a server reply the agent cannot use.
	ErrBadReply = errors.New("unexpected reply from the server")
	// ErrNoRuntime is a host with neither a containerd socket given nor a
	// containerd binary to start.
	ErrNoRuntime = errors.New("no container runtime: give --containerd-socket, or install containerd and runc (apt-get install containerd runc)")
)

// Defaults of Config.
const (
	DefaultHeartbeat     = 10 * time.Second
	DefaultStatusCheck   = 2 * time.Second
	DefaultServerRefresh = time.Minute
	DefaultStatusRefresh = 5 * time.Minute
	DefaultEndpointPort  = 10250
	DefaultGossipPort    = 6445
	DefaultMaxPods       = 110
	DefaultRestartBase   = 10 * time.Second
	DefaultRestartMax    = 5 * time.Minute
	DefaultTerminateWait = 30 * time.Second
)

// Config is everything the agent needs; cmd/outpost fills it from flags
// and an optional config file.
type Config struct {
	// Server is the API URL, https://host:6443.
	Server string
	// JoinToken is the join string of `outpost adm token create --role
	// node` (used once, when DataDir holds no credential yet).
	JoinToken string
	// CAFile is the cluster CA's PEM, for a bare id.secret join token.
	CAFile string
	// DataDir holds the credential, the state file, containers' logs and,
	// when supervised, containerd's root.
	DataDir string
	// NodeName defaults to the host name.
	NodeName string
	// Labels are put on the Node at registration, beside the well-known
	// ones the agent sets itself.
	Labels map[string]string
	// Taints are registered with the Node when it is created.
	Taints []api.Taint
	// Address is the node's InternalIP (default: the address of the
	// default route's interface).
	Address string
	// EndpointAddr is where the agent's endpoint (logs, exec, image
	// import) listens; default ":10250".
	EndpointAddr string
	// GossipPort is the membership pool's port (default 6445); GossipAddr
	// the address to bind (default all).
	GossipPort int
	GossipAddr string
	// ContainerdSocket is the runtime's socket; empty means: start and
	// supervise a private containerd if the binary is installed.
	ContainerdSocket string
	// OCIRuntime is the OCI runtime containerd's runc shim runs for each
	// new container: "auto" (the default: crun where it is installed and
	// the cgroup layout suits it, else runc), "runc", "crun", or an
	// absolute path (containerd.Config.OCIRuntime).
	OCIRuntime string
	// Heartbeat is the period of the heartbeat call (liveness, no raft
	// write) and of comparing the node's status with what was posted;
	// StatusRefresh the period of posting the status when nothing
	// changed; StatusCheck the period of looking at the host's conditions.
	Heartbeat     time.Duration
	StatusRefresh time.Duration
	StatusCheck   time.Duration
	// ServerRefresh is the period of asking the API (and gossip) which
	// servers the agent may fail over to.
	ServerRefresh time.Duration
	// Reserved is taken from capacity for the system (cpu, memory,
	// ephemeral-storage); MaxPods is the pods capacity.
	Reserved api.ResourceList
	MaxPods  int64
	// EvictionHard are the thresholds, Kubernetes syntax
	// ("memory.available<100Mi,nodefs.available<10%"); empty: defaults.
	EvictionHard string
	// RestartBackoff and RestartBackoffMax bound the wait before a
	// crashed container is restarted (doubling, like the kubelet).
	RestartBackoff    time.Duration
	RestartBackoffMax time.Duration
	// Registries are credentials for image pulls.
	Registries []RegistryConfig
	// Logger gets the agent's records.
	Logger *slog.Logger

	// ControlPlaneEligible lets the control plane ask this host to serve
	// (SPEC CPL-2): the agent labels its Node so, and starts the server
	// role when asked, with ClusterSecretFile (required then),
	// ServerDataDir (default DataDir/server) and ServerArgs after its own
	// arguments (they win).
	ControlPlaneEligible bool
	ClusterSecretFile    string
	ServerDataDir        string
	ServerArgs           []string
	// ServerRole runs the server role (default: systemd's unit when the
	// host booted with systemd, else a child process).
	ServerRole ServerRole

	// BinaryDir, when set, is the self-update layout (package
	// selfupdate) the agent runs from, DIR/current/outpost under a unit
	// whose good binary checks a trial before each start: the agent then
	// replaces its binary when the cluster version controller names one
	// for its node (SPEC UPD-6). Empty: it cannot, and says so.
	BinaryDir string

	// OSSystemd, when set, makes the agent apply its pool's
	// MachineConfigs (SPEC UPD-8) through it: files under OSRoot (default
	// /), units, the OS through OSBackend (default: none, which refuses a
	// config that changes the OS image or kernel arguments), and a reboot;
	// OSRunDir keeps the boot's ID (default /run/outpost, a tmpfs).
	// OSUpdateInterval is how often the agent looks at its update without
	// being woken (default 30s; a watch of its Node wakes it when its pool
	// gives it a config), and how long a failed step waits.
	OSSystemd        osupdate.Systemd
	OSBackend        osupdate.Backend
	OSRoot           string
	OSRunDir         string
	OSUpdateInterval time.Duration

	// PodNetwork, when set, gives every pod that is not hostNetwork a
	// network namespace of its own through CNI (SPEC NET-1); nil: pods
	// share the host's network.
	PodNetwork PodNetwork
	// PodRoutes is how this host reaches other nodes' pods with a pod
	// network: PodRoutesHostGW, PodRoutesVXLAN or PodRoutesNone.
	PodRoutes string
	// StopPodsOnExit makes the agent stop every pod's containers and
	// give back their networks when ctx ends (`outpost dev
	// --stop-pods`). Off, as an installed agent must be: pods outlive
	// their agent (SPEC TNT-5).
	StopPodsOnExit bool
	// ServiceProxy makes the agent keep the node's nftables rules that
	// send Services' cluster IPs and node ports to their endpoints
	// (SPEC NET-3; package serviceproxy).
	ServiceProxy bool
	// ClusterDNS is where pods with dnsPolicy ClusterFirst send their
	// questions (SPEC NET-4): ClusterDNSAuto, the address the
	// control plane reserves, answered by this agent's own resolver
	// when it has a PodNetwork; ClusterDNSNone, the node's resolv.conf;
	// or the address of a resolver the site runs (a CoreDNS add-on).
	// Empty is ClusterDNSNone.
	ClusterDNS string
	// ClusterDomain is the cluster's DNS domain (default cluster.local).
	ClusterDomain string
	// ResolvConf is the node's resolv.conf: the upstream resolvers and
	// what pods with dnsPolicy Default get (default /etc/resolv.conf,
	// or systemd-resolved's own file when that names only its stub).
	ResolvConf string

	// StatsInterval is the time between two readings of the node's and
	// containers' usage (default stats.DefaultInterval); CPU rates are
	// averages over it.
	StatsInterval time.Duration

	// Runtime, when set, is used instead of containerd (tests).
	Runtime Runtime
	// DisableGossip runs without the membership pool (tests).
	DisableGossip bool
	// Ready, when set, is called once the agent runs its pods (after a
	// restart: from the state file); tests and sd_notify use it.
	Ready func()
}

// RegistryConfig is one registry's credentials, from the agent's config
// file (the Secret-like shape of a docker config's auths).
type RegistryConfig struct {
	Host          string `json:"host"`
	Username      string `json:"username,omitempty"`
	Password      string `json:"password,omitempty"`
	IdentityToken string `json:"identityToken,omitempty"`
	Insecure      bool   `json:"insecure,omitempty"`
}

// withDefaults fills in defaults and checks what cannot be defaulted,
// listing every problem.
func (c Config) withDefaults() (Config, error) {
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrConfig}, a...)...))
	}
	if c.DataDir == "" {
		bad("a data dir is required")
	}
	if c.ClusterDomain == "" {
		c.ClusterDomain = "cluster.local"
	}
	if c.OCIRuntime == "" {
		c.OCIRuntime = containerd.OCIRuntimeAuto
	}
	if c.ResolvConf == "" {
		c.ResolvConf = clusterdns.HostResolvConf()
	}
	if c.ClusterDNS != "" && c.ClusterDNS != ClusterDNSAuto && c.ClusterDNS != ClusterDNSNone {
		if _, err := netip.ParseAddr(c.ClusterDNS); err != nil {
			bad("--cluster-dns %q: want auto, none or an IP address", c.ClusterDNS)
		}
	}
	if msgs := api.IsDNS1123Subdomain(c.ClusterDomain); len(msgs) > 0 {
		bad("--cluster-domain %q: %s", c.ClusterDomain, strings.Join(msgs, "; "))
	}
	if c.NodeName == "" {
		h, err := os.Hostname()
		if err != nil {
			bad("no --node-name and no host name: %w", err)
		}
		c.NodeName = h
	}
	if msgs := api.IsDNS1123Subdomain(c.NodeName); len(msgs) > 0 {
		bad("node name %q: %v", c.NodeName, msgs)
	}
	if c.ControlPlaneEligible {
		if c.ClusterSecretFile == "" {
			bad("--control-plane-eligible needs --cluster-secret-file: the server this host may be asked to run joins with the cluster secret")
		} else if _, err := os.Stat(c.ClusterSecretFile); err != nil {
			bad("--cluster-secret-file: %w", err)
		}
		if c.ServerDataDir == "" {
			c.ServerDataDir = filepath.Join(c.DataDir, "server")
		}
		// The server runs from another directory (systemd's is /).
		for _, p := range []*string{&c.ClusterSecretFile, &c.ServerDataDir} {
			if *p == "" {
				continue
			}
			abs, err := filepath.Abs(*p)
			if err != nil {
				bad("%s: %w", *p, err)
			}
			*p = abs
		}
	}
	if len(errs) > 0 {
		return c, errors.Join(errs...)
	}
	if c.EndpointAddr == "" {
		c.EndpointAddr = fmt.Sprintf(":%d", DefaultEndpointPort)
	}
	if c.GossipPort == 0 {
		c.GossipPort = DefaultGossipPort
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = DefaultHeartbeat
	}
	if c.StatusCheck <= 0 {
		c.StatusCheck = DefaultStatusCheck
	}
	if c.StatusRefresh <= 0 {
		c.StatusRefresh = DefaultStatusRefresh
	}
	if c.ServerRefresh <= 0 {
		c.ServerRefresh = DefaultServerRefresh
	}
	if c.MaxPods <= 0 {
		c.MaxPods = DefaultMaxPods
	}
	if c.RestartBackoff <= 0 {
		c.RestartBackoff = DefaultRestartBase
	}
	if c.RestartBackoffMax <= 0 {
		c.RestartBackoffMax = DefaultRestartMax
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// Problems are every problem Run would refuse c for before it starts
// anything: the values, the eviction thresholds, and, while DataDir holds
// no credential, what joining needs (the server's URL and a join string
// of the right shape; ErrNoJoinString when there is none). It reads
// only; `outpost install agent` runs it, so that it never installs a
// unit that fails at every start (issue 15).
func (c Config) Problems() []error {
	_, _, errs := c.check()
	return errs
}

// check is Problems, with the configuration defaulted and the thresholds
// parsed for Run.
func (c Config) check() (Config, []host.Threshold, []error) {
	var errs []error
	c, err := c.withDefaults()
	if err != nil {
		errs = append(errs, err)
	}
	th := host.DefaultThresholds()
	if c.EvictionHard != "" {
		var err error
		if th, err = host.ParseThresholds(c.EvictionHard); err != nil {
			errs = append(errs, fmt.Errorf("%w: --eviction-hard: %w", ErrConfig, err))
		}
	}
	if c.DataDir != "" {
		errs = append(errs, c.checkJoin()...)
	}
	return c, th, errs
}

// ErrNoJoinString is a first start without a join string (--token).
var ErrNoJoinString = errors.New("no join string")

// checkJoin is what a first start (no credential in DataDir) needs to
// join: the server's URL and a join string of the right shape.
func (c Config) checkJoin() []error {
	cred, err := loadCredential(c.DataDir)
	if err != nil {
		return []error{err}
	}
	if cred != nil {
		return nil
	}
	var errs []error
	why := fmt.Sprintf("%s holds no credential yet, so the agent must join", c.DataDir)
	if c.Server == "" {
		errs = append(errs, fmt.Errorf("%w: %s: give --server (the API's URL)", ErrConfig, why))
	} else if err := client.CheckServer(c.Server); err != nil {
		errs = append(errs, fmt.Errorf("%w: --server: %w", ErrConfig, err))
	}
	if c.JoinToken == "" {
		errs = append(errs, fmt.Errorf("%w: %s: give --token (a join string from `outpost adm token create --role node`): %w", ErrConfig, why, ErrNoJoinString))
	} else if _, _, err := parseJoinString(c.JoinToken, c.CAFile != ""); err != nil {
		errs = append(errs, fmt.Errorf("%w: --token: %w", ErrConfig, err))
	}
	if c.CAFile != "" {
		if _, err := os.ReadFile(c.CAFile); err != nil {
			errs = append(errs, fmt.Errorf("%w: --ca-cert: %w", ErrConfig, err))
		}
	}
	return errs
}

package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outpost-edge/outpost/controlplane/admission"
	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/controllers"
	"github.com/outpost-edge/outpost/controlplane/core"
	"github.com/outpost-edge/outpost/controlplane/pki"
	"github.com/outpost-edge/outpost/raftstore"
)

// Defaults of Config.
const (
	DefaultAPIAddr      = ":6443"
	DefaultRaftAddr     = ":6444"
	DefaultEventTTL     = time.Hour
	DefaultMaxBodyBytes = 3 << 20
	// secretFile is the cluster secret's file in the data directory.
	secretFile = "cluster-secret"
	// adminConfigFile is the admin client config's default file name.
	adminConfigFile = "admin.conf"
	// certTTL is the life of the server certificate; it is issued anew at
	// every start and, while the server runs, two thirds into its life
	// (pki.Renewing).
	certTTL = 365 * 24 * time.Hour
)

// Config is everything one control-plane server needs. The zero value of
// every field but DataDir has a usable default.
type Config struct {
	// ID is this server's stable raft ID; default: the host name.
	ID string
	// DataDir holds the raft log, snapshots, the cluster secret and the
	// admin config. Required.
	DataDir string
	// APIAddr is the address the API listens on (default ":6443";
	// `outpost dev` passes "127.0.0.1:6443"). Port 0 picks a free port;
	// URL reports it.
	APIAddr string
	// AdvertiseAPI is the API URL other servers and clients use; default:
	// derived from the listener (its IP, or this host's first non-loopback
	// IP when it listens on every address).
	AdvertiseAPI string
	// RaftAddr is the address raft listens on (default ":6444").
	RaftAddr string
	// AdvertiseRaft is the raft address other servers dial; default:
	// derived from RaftAddr as AdvertiseAPI is.
	AdvertiseRaft string
	// GossipAddr is where the gossip pool listens, IP:port, UDP and TCP;
	// default: RaftAddr's host with port DefaultGossipPort (6445), or
	// port 0 (any free port) when RaftAddr's port is 0, as in tests.
	GossipAddr string
	// AdvertiseGossip is the IP other members reach the pool at; default:
	// GossipAddr's IP, or the advertised raft host when it listens on
	// every address.
	AdvertiseGossip string
	// GossipJoin lists other servers' gossip addresses; default: the
	// hosts of Join with this server's gossip port.
	GossipJoin []string
	// NodeMonitorGracePeriod is how long a node may go without a
	// heartbeat before the leader marks it Ready=Unknown (default 40s;
	// gossip marks a silent node within seconds, see package gossip).
	NodeMonitorGracePeriod time.Duration
	// FenceMargin is what the leader adds to a cut-off agent's own
	// deadline before it takes that node's pod for stopped (default
	// controllers.DefaultFenceMargin).
	FenceMargin time.Duration
	// Eviction rate-limits eviction tainting zone by zone (TNT-8).
	Eviction controllers.Eviction
	// MachineProvider releases the hosts of deleted machines (MCH-1);
	// default controllers.ManualProvider.
	MachineProvider controllers.MachineProvider
	// BootstrapExpect forms a new cluster once this many servers know each
	// other; 0 joins an existing cluster or restarts from DataDir.
	BootstrapExpect int
	// Join lists raft addresses of other servers.
	Join []string
	// ClusterSecret is the root of trust shared by all servers. When empty
	// it is read from DataDir/cluster-secret; a lone new server (no Join,
	// BootstrapExpect <= 1) generates one and saves it there.
	ClusterSecret string
	// Insecure serves plain HTTP and runs raft over plain TCP. Tokens are
	// still required. Only for tests and local experiments.
	Insecure bool
	// AdminConfigPath is where the admin client config is written;
	// default DataDir/admin.conf.
	AdminConfigPath string
	// BrowserCertFile and BrowserKeyFile are a PEM certificate (with
	// its chain) and key the API serves to clients that cannot use the
	// cluster's ed25519 certificate: web browsers opening the console.
	// A site's own CA or a public one makes the console open without a
	// warning. Empty: the cluster CA issues a P-256 one, which browsers
	// reach but cannot verify (they take no ed25519 CA). The files are
	// read again when the certificate is two thirds through its life.
	BrowserCertFile, BrowserKeyFile string
	// EventTTL is how long events are kept (default 1h).
	EventTTL time.Duration
	// StateHashInterval is how often this server compares its state hash
	// with the other servers' (default DefaultStateHashInterval;
	// statehash.go).
	StateHashInterval time.Duration
	// MaxBodyBytes limits request bodies (default 3 MiB); larger ones get
	// 413.
	MaxBodyBytes int64
	// WatchWindow is how many recent events per resource a watch can
	// resume from (default: the store's); older resourceVersions get 410.
	WatchWindow int
	// AdmissionConfig configures the admission plugins of SPEC ADM-1 and
	// ADM-2 (PodNodeConstraints, PodNodeSelector), read from the server's
	// --config file; they run after the built-in steps, before Admission.
	AdmissionConfig admission.Config
	// Admission runs, in order, on every create, update and delete after
	// validation and before the write goes to raft. The server's built-in
	// steps (ADM-1's spec.nodeName rule, NodeRestriction) always run
	// before these.
	Admission []Admission
	// Schedulers are the named schedulers this server seeds (SPEC SCH-12):
	// name -> policy file, "" for the seed's default policy. The policies
	// in force are SchedulerPolicy objects in the store, one per scheduler
	// the leader runs; while leading, this server creates those of its
	// schedulers that are missing, and a reload writes its files into
	// them. nil seeds "default-scheduler" with the default policy; an
	// empty map seeds none (an outside program may schedule through the
	// binding API).
	Schedulers map[string]string
	// Reload, when it receives, makes Run read the scheduler policy files
	// again (outpost server sends SIGHUP here).
	Reload <-chan struct{}
	// DisableControllers keeps the workload controllers (ReplicaSet,
	// Deployment, DaemonSet, garbage collection) off; for tests of the
	// bare API.
	DisableControllers bool
	// Dial, when set, makes every connection this server opens to another
	// server (raft, and writes forwarded to the leader). Tests use it to
	// cut links; default: a plain net.Dialer.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// WrapFSM, when set, wraps the state machine raft applies entries to.
	// Tests use it to hold one server's applies behind its log, as a slow
	// disk or a busy CPU would; nil applies directly.
	WrapFSM func(raftstore.FSM) raftstore.FSM
	// Logger receives the server's logs; default: discarded.
	Logger *slog.Logger
	// Registry collects this server's metrics (served on /metrics); default:
	// a new registry, so several servers can run in one process.
	Registry *prometheus.Registry

	// Raft tuning, passed through to raftstore; zero keeps its defaults.
	// Tests shorten the timeouts.
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration
	SnapshotInterval   time.Duration
	// UnsafeNoFsync skips the raft log's fsync (raftstore's UnsafeNoSync):
	// only for the power-loss tests to show they catch a missing fsync.
	UnsafeNoFsync     bool
	SnapshotThreshold uint64
	TrailingLogs      uint64
	// BinaryDir, when set, is the self-update layout (package selfupdate)
	// this server runs from: DIR/current/outpost under a systemd unit
	// that checks trials with DIR/good/outpost before each start. A
	// release's binary is then staged there and swapped in when the
	// cluster version controller names this server (SPEC UPD-6). Empty:
	// this server cannot update its own binary, and an update says so.
	BinaryDir string
	// Network is the cluster's address ranges: Services' cluster IPs and
	// node ports, and the pods' range split into the nodes' pod CIDRs
	// (defaults as k3s's).
	Network core.Network
	// CatchUpLag is raftstore's: how far behind the commit index a joining
	// server may be when it is promoted (0: 64 entries).
	CatchUpLag uint64
}

// withDefaults fills in defaults and checks what cannot be defaulted,
// listing every problem.
func (c Config) withDefaults() (Config, error) {
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrConfig}, a...)...))
	}
	if c.DataDir == "" {
		bad("DataDir is required")
	}
	if (c.BrowserCertFile == "") != (c.BrowserKeyFile == "") {
		bad("--tls-cert-file and --tls-private-key-file go together")
	}
	c.Network = c.Network.WithDefaults()
	if err := c.Network.Check(); err != nil {
		bad("%w", err)
	}
	if c.ID == "" {
		h, err := os.Hostname()
		if err != nil || h == "" {
			bad("ID is empty and the host name is unknown (%v)", err)
		}
		c.ID = h
	}
	if c.APIAddr == "" {
		c.APIAddr = DefaultAPIAddr
	}
	if c.RaftAddr == "" {
		c.RaftAddr = DefaultRaftAddr
	}
	if c.GossipAddr == "" {
		host, port, err := net.SplitHostPort(c.RaftAddr)
		if err != nil {
			bad("RaftAddr %q: want host:port", c.RaftAddr)
		} else {
			if port != "0" {
				port = strconv.Itoa(DefaultGossipPort)
			}
			c.GossipAddr = net.JoinHostPort(host, port)
		}
	}
	if c.AdvertiseGossip != "" && net.ParseIP(c.AdvertiseGossip) == nil {
		bad("AdvertiseGossip %q: want an IP address", c.AdvertiseGossip)
	}
	if c.AdminConfigPath == "" && c.DataDir != "" {
		c.AdminConfigPath = filepath.Join(c.DataDir, adminConfigFile)
	}
	if c.Schedulers == nil {
		c.Schedulers = map[string]string{api.DefaultSchedulerName: ""}
	}
	for name := range c.Schedulers {
		if msgs := api.IsDNS1123Subdomain(name); len(msgs) > 0 {
			bad("scheduler name %q: %s", name, strings.Join(msgs, "; "))
		}
	}
	if c.EventTTL <= 0 {
		c.EventTTL = DefaultEventTTL
	}
	if c.StateHashInterval <= 0 {
		c.StateHashInterval = DefaultStateHashInterval
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Registry == nil {
		c.Registry = prometheus.NewRegistry()
	}
	if c.AdvertiseAPI != "" {
		u, err := url.Parse(c.AdvertiseAPI)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			bad("AdvertiseAPI %q: want a URL such as https://10.0.0.1:6443", c.AdvertiseAPI)
		}
	}
	return c, errors.Join(errs...)
}

// Check is every problem Start would refuse cfg for before it listens or
// writes anything: the values, the scheduler policies' files, and the
// cluster secret against the one saved in the data directory. It reads
// only; `outpost install server` runs it, so that it never installs a
// unit that fails at every start (issue 15).
func (c Config) Check() error {
	_, _, err := c.check()
	return err
}

// check is Check, with the configuration defaulted and the schedulers
// read for Start.
func (c Config) check() (Config, *schedulerSet, error) {
	c, err := c.withDefaults()
	errs := []error{err}
	ss, err := newSchedulerSet(c.Schedulers)
	errs = append(errs, err)
	if c.DataDir != "" {
		_, _, err := resolveSecret(&c)
		errs = append(errs, err)
	}
	return c, ss, errors.Join(errs...)
}

// loadSecret returns the cluster secret (resolveSecret), saving it to the
// data directory the first time, so a restart needs no flag.
func loadSecret(c *Config) (string, error) {
	secret, save, err := resolveSecret(c)
	if err != nil || !save {
		return secret, err
	}
	if err := writeFileAtomic(filepath.Join(c.DataDir, secretFile), []byte(secret+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("saving cluster secret: %w", err)
	}
	return secret, nil
}

// resolveSecret is the cluster secret: the one saved in the data
// directory (a configured one must be the same), else the configured
// one, else a new one for a lone new server; save says it is not saved
// yet. It writes nothing.
func resolveSecret(c *Config) (secret string, save bool, err error) {
	path := filepath.Join(c.DataDir, secretFile)
	saved, err := os.ReadFile(path)
	switch {
	case err == nil:
		s := strings.TrimSpace(string(saved))
		if c.ClusterSecret != "" && c.ClusterSecret != s {
			return "", false, fmt.Errorf("%w: the cluster secret given differs from the one saved in %s; a server cannot change clusters (remove the data directory to start afresh)", ErrConfig, path)
		}
		return s, false, nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", false, fmt.Errorf("reading cluster secret: %w", err)
	}
	secret = c.ClusterSecret
	if secret == "" {
		if c.BootstrapExpect > 1 || len(c.Join) > 0 {
			return "", false, fmt.Errorf("%w: --cluster-secret is required to form or join a cluster of several servers (make one with \"outpost adm secret\")", ErrConfig)
		}
		secret = pki.GenerateSecret()
	}
	if len(secret) < pki.MinSecretLen {
		return "", false, fmt.Errorf("%w: cluster secret has %d characters, need at least %d", ErrConfig, len(secret), pki.MinSecretLen)
	}
	return secret, true, nil
}

// writeFileAtomic writes data to a temporary file and renames it into place
// so that a crash never leaves a half-written file.
func writeFileAtomic(path string, data []byte, perm fs.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// advertiseHost picks the host others should dial for a listener bound to
// addr: its own IP when it names one, else this machine's first
// non-loopback address, else loopback.
func advertiseHost(addr net.Addr) string {
	tcp, ok := addr.(*net.TCPAddr)
	if ok && tcp.IP != nil && !tcp.IP.IsUnspecified() {
		return tcp.IP.String()
	}
	if ip := firstHostIP(); ip != "" {
		return ip
	}
	return "127.0.0.1"
}

// firstHostIP returns this machine's first global unicast address.
func firstHostIP() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	var v6 string
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok || !n.IP.IsGlobalUnicast() {
			continue
		}
		if n.IP.To4() != nil {
			return n.IP.String()
		}
		if v6 == "" {
			v6 = n.IP.String()
		}
	}
	return v6
}

// certHosts lists the names and addresses the server certificate must
// cover: the advertised ones, the listen addresses, the host name, and
// every local address when a listener is bound to all of them.
func certHosts(c *Config, apiURL string, apiAddr net.Addr) []string {
	hosts := []string{c.ID}
	if h, err := os.Hostname(); err == nil {
		hosts = append(hosts, h)
	}
	if u, err := url.Parse(apiURL); err == nil {
		hosts = append(hosts, u.Hostname())
	}
	for _, a := range []string{c.AdvertiseRaft, c.RaftAddr, c.APIAddr} {
		if h, _, err := net.SplitHostPort(a); err == nil && h != "" {
			hosts = append(hosts, h)
		}
	}
	if tcp, ok := apiAddr.(*net.TCPAddr); ok && tcp.IP.IsUnspecified() {
		if addrs, err := net.InterfaceAddrs(); err == nil {
			for _, a := range addrs {
				if n, ok := a.(*net.IPNet); ok {
					hosts = append(hosts, n.IP.String())
				}
			}
		}
	}
	// Drop what pki would refuse (an ID with odd characters, say): a
	// certificate that misses one name beats a server that cannot start.
	out := hosts[:0]
	for _, h := range hosts {
		if h != "" && (net.ParseIP(h) != nil || validHostName(h)) {
			out = append(out, h)
		}
	}
	return out
}

// validHostName reports whether h is a DNS name pki accepts.
func validHostName(h string) bool {
	if len(h) > 253 {
		return false
	}
	for label := range strings.SplitSeq(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			ch := label[i]
			if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '-' || ch == '_') {
				return false
			}
		}
	}
	return true
}

// hostPort joins host and port, bracketing IPv6.
func hostPort(host string, port int) string {
	return net.JoinHostPort(host, strconv.Itoa(port))
}

package raftstore

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Config configures one raft member. The zero value of every tuning field
// picks a default suitable for a LAN or an edge link.
type Config struct {
	// ID is the stable server ID (default: the hostname); it is also the
	// raft ServerID and must not change across restarts.
	ID string
	// DataDir holds raft/: wal/ (the log), raft.db (the stable store) and snapshots/.
	DataDir string
	// BindAddr is the raft TCP listen address; "127.0.0.1:0" is allowed.
	BindAddr string
	// AdvertiseAddr is the address other servers dial (default: the bound
	// address, which must then not be an unspecified address like 0.0.0.0).
	AdvertiseAddr string
	// APIAddr is this server's HTTP API URL (https://host:port), handed to
	// peers so followers can name the leader's API.
	APIAddr string
	// Version is the release this server runs, and Info, when set, what
	// else it says of itself; both are in its status, so the leader
	// learns every server's version and binary state from one probe.
	Version string
	Info    func() map[string]string
	// BootstrapExpect > 0 forms a new cluster once this many servers
	// (including this one) are known.
	BootstrapExpect int
	// Join lists raft addresses of other servers to contact.
	Join []string
	// ServerTLS and ClientTLS configure mutual TLS on the raft port: peers'
	// certificates are verified against ServerTLS.ClientCAs and
	// ClientTLS.RootCAs. Both nil with Insecure=true means plain TCP.
	ServerTLS *tls.Config
	ClientTLS *tls.Config
	Insecure  bool
	// Logger receives raft's and this package's logs (default: discard).
	Logger *slog.Logger
	// Registerer, when non-nil, receives the outpost_raft_* metrics.
	Registerer prometheus.Registerer
	// Dial, when set, opens every connection to another server (raft and
	// RPC); tests pass one that can cut links to simulate a partition.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// OnFatal is called once, from its own goroutine, when the FSM reports
	// a result it cannot continue from (a command this version does not
	// know and may not skip). The node has stopped applying by then; the
	// caller should shut down with the error.
	OnFatal func(error)
	// UnsafeNoSync skips the log store's fsync: an acknowledged write can
	// be lost when the machine loses power. Only for showing that the
	// power-loss tests catch exactly that.
	UnsafeNoSync bool
	// StateHash, when set, returns the FSM's state hash right after the
	// entry at index was applied, and whether it still knows it; servers
	// compare them to find a state that drifted (Node.StateHashes).
	StateHash func(index uint64) (uint64, bool)
	// noPipeline replicates one batch per round trip per follower instead
	// of pipelining AppendEntries; the benchmarks compare the two.
	noPipeline bool
	// noSendAhead makes the leader send entries only once it has stored
	// them, as hashicorp/raft does (sendahead.go); the benchmarks compare.
	noSendAhead bool

	HeartbeatTimeout   time.Duration // default 1s
	ElectionTimeout    time.Duration // default: HeartbeatTimeout
	LeaderLeaseTimeout time.Duration // default: HeartbeatTimeout/2
	CommitTimeout      time.Duration // default 20ms
	SnapshotThreshold  uint64        // default 8192 entries
	TrailingLogs       uint64        // default 10240 entries
	SnapshotInterval   time.Duration // default 2m
	// CatchUpLag is how many entries behind the leader's commit index a
	// joining non-voter may be, once it has every entry committed when it
	// asked, and still be promoted (default 64). Under a steady write load
	// the commit index keeps moving, so an exact match may never come; a
	// larger lag promotes sooner, with more for the new voter to fetch.
	// The leader's setting is the one that counts.
	CatchUpLag uint64
}

// Defaults chosen for a LAN or an edge link; see DESIGN.md.
const (
	defaultHeartbeatTimeout  = time.Second
	defaultCommitTimeout     = 20 * time.Millisecond
	defaultSnapshotThreshold = 8192
	defaultTrailingLogs      = 10240
	defaultSnapshotInterval  = 2 * time.Minute
	defaultCatchUpLag        = 64
	// maxAppendEntries is the most entries per AppendEntries RPC and per
	// FSM batch; raft caps it at 1024.
	maxAppendEntries = 512
	// transportMaxPool is the number of pooled raft connections per peer.
	transportMaxPool = 4
	// transportTimeout bounds raft RPC I/O (scaled by raft for snapshots).
	transportTimeout = 10 * time.Second
)

// withDefaults returns cfg with defaults filled in, or an error naming the
// field and the rule it breaks.
func (cfg Config) withDefaults() (Config, error) {
	if cfg.ID == "" {
		h, err := os.Hostname()
		if err != nil || h == "" {
			return cfg, fmt.Errorf("%w: ID: empty and the hostname is unknown: %v", ErrInvalidConfig, err)
		}
		cfg.ID = h
	}
	if cfg.DataDir == "" {
		return cfg, fmt.Errorf("%w: DataDir: required", ErrInvalidConfig)
	}
	if cfg.BindAddr == "" {
		return cfg, fmt.Errorf("%w: BindAddr: required", ErrInvalidConfig)
	}
	if _, _, err := net.SplitHostPort(cfg.BindAddr); err != nil {
		return cfg, fmt.Errorf("%w: BindAddr: %q is not host:port: %v", ErrInvalidConfig, cfg.BindAddr, err)
	}
	if cfg.AdvertiseAddr != "" {
		if _, _, err := net.SplitHostPort(cfg.AdvertiseAddr); err != nil {
			return cfg, fmt.Errorf("%w: AdvertiseAddr: %q is not host:port: %v", ErrInvalidConfig, cfg.AdvertiseAddr, err)
		}
	}
	if cfg.BootstrapExpect < 0 {
		return cfg, fmt.Errorf("%w: BootstrapExpect: must be >= 0, got %d", ErrInvalidConfig, cfg.BootstrapExpect)
	}
	if cfg.BootstrapExpect > 1 && len(cfg.Join) == 0 {
		return cfg, fmt.Errorf("%w: Join: required when BootstrapExpect is %d", ErrInvalidConfig, cfg.BootstrapExpect)
	}
	for i, j := range cfg.Join {
		if _, _, err := net.SplitHostPort(j); err != nil {
			return cfg, fmt.Errorf("%w: Join[%d]: %q is not host:port: %v", ErrInvalidConfig, i, j, err)
		}
	}
	if !cfg.Insecure {
		if cfg.ServerTLS == nil {
			return cfg, fmt.Errorf("%w: ServerTLS: required unless Insecure", ErrInvalidConfig)
		}
		if cfg.ClientTLS == nil {
			return cfg, fmt.Errorf("%w: ClientTLS: required unless Insecure", ErrInvalidConfig)
		}
	}
	if cfg.ServerTLS != nil {
		if cfg.ServerTLS.ClientCAs == nil {
			return cfg, fmt.Errorf("%w: ServerTLS.ClientCAs: required to verify peers (mutual TLS)", ErrInvalidConfig)
		}
		if len(cfg.ServerTLS.Certificates) == 0 && cfg.ServerTLS.GetCertificate == nil {
			return cfg, fmt.Errorf("%w: ServerTLS.Certificates: required", ErrInvalidConfig)
		}
	}
	if cfg.ClientTLS != nil && cfg.ClientTLS.RootCAs == nil {
		return cfg, fmt.Errorf("%w: ClientTLS.RootCAs: required to verify peers (mutual TLS)", ErrInvalidConfig)
	}
	if (cfg.ServerTLS == nil) != (cfg.ClientTLS == nil) {
		return cfg, fmt.Errorf("%w: ServerTLS and ClientTLS: set both or neither", ErrInvalidConfig)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.HeartbeatTimeout == 0 {
		cfg.HeartbeatTimeout = defaultHeartbeatTimeout
	}
	if cfg.ElectionTimeout == 0 {
		cfg.ElectionTimeout = cfg.HeartbeatTimeout
	}
	if cfg.LeaderLeaseTimeout == 0 {
		cfg.LeaderLeaseTimeout = cfg.HeartbeatTimeout / 2
	}
	if cfg.CommitTimeout == 0 {
		cfg.CommitTimeout = defaultCommitTimeout
	}
	if cfg.SnapshotThreshold == 0 {
		cfg.SnapshotThreshold = defaultSnapshotThreshold
	}
	if cfg.TrailingLogs == 0 {
		cfg.TrailingLogs = defaultTrailingLogs
	}
	if cfg.SnapshotInterval == 0 {
		cfg.SnapshotInterval = defaultSnapshotInterval
	}
	if cfg.CatchUpLag == 0 {
		cfg.CatchUpLag = defaultCatchUpLag
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"HeartbeatTimeout", cfg.HeartbeatTimeout},
		{"ElectionTimeout", cfg.ElectionTimeout},
		{"LeaderLeaseTimeout", cfg.LeaderLeaseTimeout},
		{"SnapshotInterval", cfg.SnapshotInterval},
	} {
		if d.v < 5*time.Millisecond {
			return cfg, fmt.Errorf("%w: %s: must be at least 5ms, got %s", ErrInvalidConfig, d.name, d.v)
		}
	}
	if cfg.CommitTimeout < time.Millisecond {
		return cfg, fmt.Errorf("%w: CommitTimeout: must be at least 1ms, got %s", ErrInvalidConfig, cfg.CommitTimeout)
	}
	if cfg.ElectionTimeout < cfg.HeartbeatTimeout {
		return cfg, fmt.Errorf("%w: ElectionTimeout: %s is below HeartbeatTimeout %s", ErrInvalidConfig, cfg.ElectionTimeout, cfg.HeartbeatTimeout)
	}
	if cfg.LeaderLeaseTimeout > cfg.HeartbeatTimeout {
		return cfg, fmt.Errorf("%w: LeaderLeaseTimeout: %s is above HeartbeatTimeout %s", ErrInvalidConfig, cfg.LeaderLeaseTimeout, cfg.HeartbeatTimeout)
	}
	return cfg, nil
}

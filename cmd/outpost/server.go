package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/outpost-edge/outpost/controlplane/client"
	"github.com/outpost-edge/outpost/controlplane/server"
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

func newServerCommand() *cobra.Command {
	var (
		cfg  server.Config
		join string
		logs logFlags
	)
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run a control-plane member (raft, API, store)",
		Long: `Run one member of outpost's raft-replicated control plane.

Three servers that start with --bootstrap-expect 3 and --join listing each
other form a new cluster; they must share the cluster secret (the same
--cluster-secret or OUTPOST_CLUSTER_SECRET, at least 32 characters; make one
with "outpost adm secret"). A server that restarts rejoins with its data. A
new server joins an existing cluster with --join and the cluster secret only:
it is added as a non-voter, catches up, and is then promoted.

The first start writes an admin client config to DATA-DIR/admin.conf.`,
		Example: `  outpost server --data-dir /var/lib/outpost --bootstrap-expect 3 \
      --join 10.0.0.2:6444,10.0.0.3:6444 --cluster-secret "$SECRET"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := logs.logger()
			if err != nil {
				return err
			}
			cfg.Logger = log
			cfg.Join = splitList(join)
			if cfg.ClusterSecret == "" {
				cfg.ClusterSecret = os.Getenv("OUTPOST_CLUSTER_SECRET")
			}
			if cfg.DataDir == "" {
				return fmt.Errorf("--data-dir is required")
			}
			return server.Run(cmd.Context(), cfg)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.ID, "id", "", "this server's stable ID (default: the host name)")
	f.StringVar(&cfg.DataDir, "data-dir", "", "directory for the raft log, snapshots, certificates and the admin config")
	f.StringVar(&cfg.APIAddr, "api-addr", ":6443", "address the HTTPS API listens on")
	f.StringVar(&cfg.AdvertiseAPI, "advertise-api", "", "API URL other servers and clients use (default: derived from --api-addr)")
	f.StringVar(&cfg.RaftAddr, "raft-addr", ":6444", "address raft listens on")
	f.StringVar(&cfg.AdvertiseRaft, "advertise-raft", "", "raft address other servers dial (default: derived from --raft-addr)")
	f.IntVar(&cfg.BootstrapExpect, "bootstrap-expect", 0, "form a new cluster once this many servers are known (0: join an existing one, or restart)")
	f.StringVar(&join, "join", "", "comma-separated raft addresses of other servers")
	f.StringVar(&cfg.ClusterSecret, "cluster-secret", "", "shared cluster secret (or OUTPOST_CLUSTER_SECRET; generated for a one-server cluster)")
	f.BoolVar(&cfg.Insecure, "insecure", false, "plain HTTP and plain raft TCP, no TLS (tokens are still required); never on a real network")
	f.StringVar(&cfg.AdminConfigPath, "admin-config", "", "where to write the admin client config (default DATA-DIR/admin.conf)")
	f.DurationVar(&cfg.EventTTL, "event-ttl", time.Hour, "how long events are kept")
	f.DurationVar(&cfg.SnapshotInterval, "raft-snapshot-interval", 0, "how often raft checks whether to snapshot (0: 2m)")
	f.Uint64Var(&cfg.SnapshotThreshold, "raft-snapshot-threshold", 0, "raft log entries since the last snapshot that trigger one (0: 8192)")
	logs.add(cmd)
	return cmd
}

func newDevCommand() *cobra.Command {
	var (
		cfg  server.Config
		logs logFlags
	)
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a one-process development cluster",
		Long: `Run the control plane as a one-member raft cluster in one process, with the
API on localhost. Stop it and start it again with the same --data-dir and
every object is still there. The admin config is written to
~/.config/outpost/config, so "outpost get namespaces" works from another shell.`,
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
			fmt.Fprintf(cmd.ErrOrStderr(), "outpost dev: data in %s, admin config in %s\n", cfg.DataDir, cfg.AdminConfigPath)
			return server.Run(cmd.Context(), cfg)
		},
	}
	home, _ := os.UserHomeDir()
	f := cmd.Flags()
	f.StringVar(&cfg.DataDir, "data-dir", filepath.Join(home, ".local", "share", "outpost"), "directory for all state")
	f.StringVar(&cfg.APIAddr, "api-addr", "127.0.0.1:6443", "address the HTTPS API listens on")
	f.StringVar(&cfg.RaftAddr, "raft-addr", "127.0.0.1:6444", "address raft listens on")
	f.StringVar(&cfg.AdminConfigPath, "admin-config", "", "where to write the admin client config (default ~/.config/outpost/config)")
	f.BoolVar(&cfg.Insecure, "insecure", false, "plain HTTP, no TLS")
	logs.add(cmd)
	return cmd
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

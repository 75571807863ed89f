package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/outpost-edge/outpost/agent"
	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/auth"
	"github.com/outpost-edge/outpost/controlplane/client"
	"github.com/outpost-edge/outpost/controlplane/server"
)

// devAgentOptions are the dev agent's ports: beside the server's, on
// loopback; a second dev cluster on one machine takes others.
type devAgentOptions struct {
	listen     string
	gossipPort int
	stopPods   bool
	// net and dns are the agent's own flags of pods' networks and DNS.
	net podNetworkFlags
	dns clusterDNSFlags
}

func (o *devAgentOptions) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&o.listen, "agent-listen", "127.0.0.1:10250", "address of the dev agent's endpoint (logs, exec, image import)")
	cmd.Flags().IntVar(&o.gossipPort, "agent-gossip-port", 6446, "port of the dev agent's gossip member on 127.0.0.1")
	cmd.Flags().BoolVar(&o.stopPods, "stop-pods", false, "stop this host's pods (their containers and networks) when outpost dev ends; without it they run on until it starts again, as an installed agent's do")
	o.net.register(cmd.Flags())
	o.dns.register(cmd.Flags(), false)
}

// config is the dev agent's configuration.
func (o *devAgentOptions) config(serverURL, dataDir, socket string, log *slog.Logger) (agent.Config, error) {
	cfg := agent.Config{
		Server:           serverURL,
		DataDir:          filepath.Join(dataDir, "agent"),
		Address:          "127.0.0.1",
		EndpointAddr:     o.listen,
		GossipPort:       o.gossipPort,
		GossipAddr:       "127.0.0.1",
		StopPodsOnExit:   o.stopPods,
		ContainerdSocket: socket,
		Logger:           log,
		Ready:            agent.NotifyReady(log),
	}
	o.dns.apply(&cfg)
	if err := o.net.apply(&cfg, log); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// runDevAgent runs `outpost dev`'s agent for this host. It joins through
// the same join flow as any agent, with a short-lived join token the
// server's admin makes for it, so dev exercises what production does.
func runDevAgent(ctx context.Context, s *server.Server, o *devAgentOptions, dataDir, socket string, log *slog.Logger) {
	log = log.With("component", "agent")
	if err := s.WaitReady(ctx); err != nil {
		return
	}
	cfg, err := o.config(s.URL(), dataDir, socket, log)
	if err != nil {
		log.Error("the dev agent cannot start; the control plane runs on without a node", "err", err)
		return
	}
	if _, err := os.Stat(filepath.Join(cfg.DataDir, "credential.json")); err != nil {
		join, err := devJoinString(ctx, s)
		if err != nil {
			log.Error("the dev agent cannot join; the control plane runs on without a node", "err", err)
			return
		}
		cfg.JoinToken = join
	}
	if err := agent.Run(ctx, cfg); err != nil && ctx.Err() == nil {
		log.Error("the dev agent stopped; the control plane runs on without it (outpost dev --no-agent skips it)", "err", err)
	}
}

// devJoinString makes a join token valid for ten minutes.
func devJoinString(ctx context.Context, s *server.Server) (string, error) {
	cl, err := client.New(s.AdminConfig())
	if err != nil {
		return "", err
	}
	id, secret := auth.NewToken()
	exp := api.NewTime(time.Now().Add(10 * time.Minute))
	tok := &api.Token{
		ObjectMeta: api.ObjectMeta{Name: id},
		Spec: api.TokenSpec{Role: api.RoleNode, SecretHash: auth.HashSecret(secret), Expires: exp,
			Description: "outpost dev: join token of the local agent"},
	}
	if _, err := cl.CreateToken(ctx, tok); err != nil {
		return "", fmt.Errorf("create join token: %w", err)
	}
	return auth.FormatJoin(s.CA().Hash(), id+"."+secret), nil
}

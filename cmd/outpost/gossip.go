package main

import (
	"fmt"
	"net"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/outpost-edge/outpost/controlplane/server"
)

// gossipFlags are the gossip pool's settings of server and dev.
type gossipFlags struct {
	addr, advertise string
	port            int
}

func (g *gossipFlags) add(cmd *cobra.Command, defaultAddr string) {
	f := cmd.Flags()
	usage := "IP:port the gossip membership pool listens on, UDP and TCP"
	if defaultAddr == "" {
		usage += " (default: --raft-addr's host, port 6445)"
	}
	f.StringVar(&g.addr, "gossip-addr", defaultAddr, usage)
	f.IntVar(&g.port, "gossip-port", server.DefaultGossipPort, "port of the gossip pool, on --raft-addr's host (--gossip-addr wins)")
	f.StringVar(&g.advertise, "advertise-gossip", "", "IP other members reach the gossip pool at (default: the advertised raft host)")
}

// apply sets cfg's gossip fields; cfg.RaftAddr must be set.
func (g *gossipFlags) apply(cmd *cobra.Command, cfg *server.Config) error {
	cfg.GossipAddr, cfg.AdvertiseGossip = g.addr, g.advertise
	if g.port < 0 || g.port > 65535 {
		return fmt.Errorf("--gossip-port %d: want a port, 0-65535", g.port)
	}
	if cmd.Flags().Changed("gossip-port") && !cmd.Flags().Changed("gossip-addr") {
		host, _, err := net.SplitHostPort(cfg.RaftAddr)
		if err != nil {
			return fmt.Errorf("--raft-addr %q: want host:port", cfg.RaftAddr)
		}
		cfg.GossipAddr = net.JoinHostPort(host, strconv.Itoa(g.port))
	}
	return nil
}

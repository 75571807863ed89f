package agent

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"net"

	"github.com/outpost-edge/outpost/agent/endpoint"
	"github.com/outpost-edge/outpost/gossip"
)

// startExtras starts the agent's endpoint (logs, exec and image import
// for the control plane, mutual TLS with servers only) and its gossip
// membership, which lets the control plane notice within seconds when
// the node goes silent.
func (a *Agent) startExtras(ctx context.Context) (func(), error) {
	cert, err := a.cred.tlsCertificate()
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(a.cred.CACert)) {
		return nil, fmt.Errorf("%w: the credential's CA is not PEM", ErrConfig)
	}
	ln, err := net.Listen("tcp", a.cfg.EndpointAddr)
	if err != nil {
		return nil, fmt.Errorf("%w: --listen %s (the agent's endpoint): %w", ErrConfig, a.cfg.EndpointAddr, err)
	}
	a.endpointPort = ln.Addr().(*net.TCPAddr).Port
	h := endpoint.New(endpoint.Config{Runtime: a.rt, Logger: a.log, NodeName: a.cfg.NodeName,
		Summary: a.stats.Summary, Metrics: a.metrics.handler(a.log)})
	a.wg.Go(func() {
		if err := endpoint.Serve(ctx, ln, endpoint.TLSConfig(pool, cert), h, a.log); err != nil && ctx.Err() == nil {
			a.log.Error("the agent's endpoint stopped", "err", err)
		}
	})
	if a.cfg.DisableGossip || a.cred.GossipKey == "" {
		return func() {}, nil
	}
	key, err := base64.StdEncoding.DecodeString(a.cred.GossipKey)
	if err != nil {
		return nil, fmt.Errorf("%w: the credential's gossip key: %w", ErrConfig, err)
	}
	p, err := gossip.Start(ctx, gossip.Config{
		Name:          a.cfg.NodeName,
		Role:          gossip.RoleAgent,
		BindAddr:      a.cfg.GossipAddr,
		BindPort:      a.cfg.GossipPort,
		AdvertiseAddr: a.address,
		Key:           key,
		Join:          a.cred.GossipPeers,
		Logger:        a.log,
	})
	if err != nil {
		return nil, fmt.Errorf("gossip: %w", err)
	}
	a.gossip.Store(p)
	return func() { _ = p.Close() }, nil
}

package agent

import (
	"context"
	"slices"
	"time"

	"github.com/outpost-edge/outpost/gossip"
)

// refreshServers keeps the list of servers the agent's client fails over
// between current: every ServerRefresh it asks the API which servers
// answer and adds the servers its gossip pool sees alive, and saves the
// list in the credential so that a restarted agent whose first server
// is gone still finds the others. The client itself rotates to the next
// server when one does not answer (controlplane/client: endpoints.go).
func (a *Agent) refreshServers(ctx context.Context) {
	t := time.NewTicker(a.cfg.ServerRefresh)
	defer t.Stop()
	current := a.cl.Server()
	for {
		a.updateServers(ctx)
		if now := a.cl.Server(); now != current {
			a.log.Info("talking to another server", "server", now, "was", current)
			current = now
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// updateServers asks the API and gossip for the servers once.
func (a *Agent) updateServers(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	urls, err := a.cl.APIServers(rctx)
	if err != nil {
		a.log.Debug("listing the servers", "err", err)
	}
	a.learnServers(urls)
}

// learnServers makes urls, with the servers the gossip pool sees alive,
// the servers the client fails over between, and saves them in the
// credential when they changed.
func (a *Agent) learnServers(urls []string) {
	urls = slices.Clone(urls)
	if p := a.gossip.Load(); p != nil {
		for _, m := range p.Members() {
			if m.Role == gossip.RoleServer && m.State == gossip.StateAlive && m.API != "" && !slices.Contains(urls, m.API) {
				urls = append(urls, m.API)
			}
		}
	}
	if len(urls) == 0 {
		// Nothing learned (the control plane is away): keep what is known.
		return
	}
	slices.Sort(urls)
	a.credMu.Lock()
	defer a.credMu.Unlock()
	known := slices.Sorted(slices.Values(a.cl.Servers()))
	if slices.Equal(urls, known) {
		return
	}
	if err := a.cl.SetServers(urls); err != nil {
		a.log.Warn("servers to fail over to", "servers", urls, "err", err)
		return
	}
	a.log.Info("servers to fail over to", "servers", a.cl.Servers())
	a.cred.Servers = urls
	if err := a.cred.save(a.cfg.DataDir); err != nil {
		a.log.Warn("saving the servers in the credential", "err", err)
	}
}

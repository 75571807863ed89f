package server

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/auth"
)

// serverURLsTTL is how long the list of servers' API URLs is reused:
// finding it asks every server for its status, and thousands of agents
// read it.
const serverURLsTTL = 10 * time.Second

// serverURLs is the cached list of the servers' API URLs.
type serverURLs struct {
	mu         sync.Mutex
	urls       []string
	at         time.Time
	refreshing bool
}

// ServerURLs lists the API URLs of the servers of the raft configuration
// that answer, this server's first; agents fail over between them. A
// stale list is returned as it is while one refresh runs in the
// background: every heartbeat reply carries the list, and none should
// wait for the status calls to every server (2 s when one is down).
func (s *Server) ServerURLs(ctx context.Context) []string {
	c := &s.servers
	c.mu.Lock()
	urls, fresh := c.urls, time.Since(c.at) < serverURLsTTL
	// Not once Close began: it waits for s.wg.
	start := urls != nil && !fresh && !c.refreshing && s.stopCtx.Err() == nil
	if start {
		c.refreshing = true
	}
	c.mu.Unlock()
	switch {
	case urls == nil:
		return s.refreshServerURLs(ctx)
	case start:
		s.wg.Go(func() { s.refreshServerURLs(s.stopCtx) })
	}
	return slices.Clone(urls)
}

// refreshServerURLs asks raft for the servers and caches the list.
func (s *Server) refreshServerURLs(ctx context.Context) []string {
	urls := []string{s.url}
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	peers, err := s.node.Peers(pctx)
	if err != nil {
		s.log.Debug("listing the servers for agents", "err", err)
	}
	for _, p := range peers {
		if p.Reachable && p.APIAddr != "" && !slices.Contains(urls, p.APIAddr) {
			urls = append(urls, p.APIAddr)
		}
	}
	c := &s.servers
	c.mu.Lock()
	c.urls, c.at, c.refreshing = urls, time.Now(), false
	c.mu.Unlock()
	return slices.Clone(urls)
}

// serveServers answers GET /apis/outpost.io/v1/servers with ServerURLs.
func (s *Server) serveServers(w *recorder, r *http.Request, id *auth.Identity, segs []string) {
	w.label(auth.VerbList, auth.ResourceServers)
	if len(segs) != 0 || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
		writeError(w, api.NewMethodNotAllowed(r.Method+" is not supported on "+r.URL.Path+" (GET /apis/outpost.io/v1/servers)"))
		return
	}
	if err := auth.Authorize(id, auth.Request{Verb: auth.VerbList, Group: "outpost.io", Resource: auth.ResourceServers}, nil); err != nil {
		writeError(w, api.NewForbidden(err.Error()))
		return
	}
	writeJSON(w, http.StatusOK, &api.ServerList{
		TypeMeta: api.TypeMeta{APIVersion: "outpost.io/v1", Kind: "ServerList"},
		Servers:  s.ServerURLs(r.Context()),
	})
}

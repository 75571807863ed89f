package server

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/auth"
	"github.com/outpost-edge/outpost/controlplane/core"
	"github.com/outpost-edge/outpost/raftstore"
)

// DefaultStateHashInterval is how often each server compares its state
// hash with its peers'.
const DefaultStateHashInterval = time.Minute

// stateHashWait bounds how long a check waits for the other servers to
// apply the index it asks about.
const stateHashWait = 10 * time.Second

// stateCheck is this server's side of the divergence check (issue 9 item
// 4b), etcd's corruption check in outpost's terms: every server, at its
// own interval, takes its applied index, asks every server for its state
// hash there (store.StateHash: a hash of every stored object kept as
// entries apply), and compares. A server whose hash is not the most
// common one has drifted: it raises an alarm that stays until it
// restarts (readyz fails and says why), logs an error naming the servers,
// and the leader records a Warning event. Nothing repairs the state:
// the way back is to rebuild that server from the others (remove it,
// wipe its data directory, join it again).
type stateCheck struct {
	mu    sync.Mutex
	last  api.StateHashReport
	alarm string // why this server's state is not to be trusted; sticky
	// reported holds the servers this leader recorded an event about.
	reported map[string]bool

	checks     prometheus.Counter
	mismatches prometheus.Counter
	diverged   prometheus.Gauge
}

func newStateCheck(reg prometheus.Registerer) (*stateCheck, error) {
	c := &stateCheck{
		reported: map[string]bool{},
		last:     api.StateHashReport{TypeMeta: api.TypeMeta{APIVersion: "outpost.io/v1", Kind: "StateHashReport"}},
		checks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "outpost_state_hash_checks_total",
			Help: "Comparisons of this server's state hash with its peers'.",
		}),
		mismatches: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "outpost_state_hash_mismatches_total",
			Help: "Comparisons that found servers whose state hash differs.",
		}),
		diverged: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "outpost_state_diverged",
			Help: "1 once this server's state was found to differ from its peers' (until it restarts).",
		}),
	}
	for _, m := range []prometheus.Collector{c.checks, c.mismatches, c.diverged} {
		if err := reg.Register(m); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Alarm is why this server's state is not to be trusted, or "".
func (c *stateCheck) Alarm() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.alarm
}

func (c *stateCheck) report() api.StateHashReport {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.last
	r.Servers = slices.Clone(r.Servers)
	r.Diverged = slices.Clone(r.Diverged)
	return r
}

// runStateChecks compares state hashes every interval until ctx ends.
func (s *Server) runStateChecks(ctx context.Context) {
	t := time.NewTicker(s.cfg.StateHashInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if s.core.CatchingUp() != "" {
			continue
		}
		s.checkStateHash(ctx)
	}
}

// checkStateHash runs one comparison and acts on what it finds.
func (s *Server) checkStateHash(ctx context.Context) {
	index := s.node.AppliedIndex()
	cctx, cancel := context.WithTimeout(ctx, stateHashWait)
	hashes, err := s.node.StateHashes(cctx, index)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("state hash check failed", "err", err)
		}
		return
	}
	rep := compareHashes(index, hashes)
	now := api.NewTime(time.Now())
	rep.CheckedAt = now
	c := s.stateCheck
	c.checks.Inc()
	c.mu.Lock()
	rep.TypeMeta = c.last.TypeMeta
	c.last = rep
	mine := slices.Contains(rep.Diverged, s.cfg.ID)
	if mine && c.alarm == "" {
		c.alarm = fmt.Sprintf("this server's state differs from its peers' at raft index %d (%s); "+
			"rebuild it: remove it from the cluster, empty its data directory and join it again", index, describeHashes(rep))
	}
	c.mu.Unlock()
	if len(rep.Diverged) == 0 {
		return
	}
	c.mismatches.Inc()
	if mine {
		c.diverged.Set(1)
	}
	s.log.Error("state hash mismatch: servers applied the same log to different states",
		"index", index, "diverged", strings.Join(rep.Diverged, ","), "hashes", describeHashes(rep), "this_server_diverged", mine)
	if s.node.IsLeader() {
		s.recordDivergence(ctx, rep)
	}
}

// compareHashes finds the servers whose hash is not the most common one;
// with no single most common hash, every server that answered.
func compareHashes(index uint64, hashes []raftstore.ServerHash) api.StateHashReport {
	rep := api.StateHashReport{Index: index}
	count := map[uint64]int{}
	for _, h := range hashes {
		sh := api.ServerStateHash{ID: h.ID, Error: h.Error}
		if h.Known {
			sh.Hash = fmt.Sprintf("%016x", h.Hash)
			count[h.Hash]++
		}
		rep.Servers = append(rep.Servers, sh)
	}
	slices.SortFunc(rep.Servers, func(a, b api.ServerStateHash) int { return strings.Compare(a.ID, b.ID) })
	if len(count) < 2 {
		return rep
	}
	best, tie := 0, false
	var common uint64
	for h, n := range count {
		switch {
		case n > best:
			best, common, tie = n, h, false
		case n == best:
			tie = true
		}
	}
	for _, h := range hashes {
		if h.Known && (tie || h.Hash != common) {
			rep.Diverged = append(rep.Diverged, h.ID)
		}
	}
	slices.Sort(rep.Diverged)
	return rep
}

func describeHashes(rep api.StateHashReport) string {
	parts := make([]string, 0, len(rep.Servers))
	for _, sh := range rep.Servers {
		v := sh.Hash
		if v == "" {
			v = "unknown"
		}
		parts = append(parts, sh.ID+"="+v)
	}
	return strings.Join(parts, " ")
}

// recordDivergence records a Warning event about each diverged server
// not reported before, in outpost-system, where an operator looking at
// events finds it. The leader records them: every server checks, and one
// event per server is enough.
func (s *Server) recordDivergence(ctx context.Context, rep api.StateHashReport) {
	now := api.NewTime(time.Now())
	for _, id := range rep.Diverged {
		c := s.stateCheck
		c.mu.Lock()
		seen := c.reported[id]
		c.mu.Unlock()
		if seen {
			continue
		}
		ev := &api.Event{
			ObjectMeta: api.ObjectMeta{Namespace: NamespaceSystem, Name: fmt.Sprintf("statehash.%s.%x", id, uint64(now.UnixNano()))},
			InvolvedObject: api.ObjectReference{
				Kind: "Server", APIVersion: "outpost.io/v1", Name: id,
			},
			Reason: "StateDiverged",
			Message: fmt.Sprintf("server %s's state differs from the other servers' at raft index %d (%s); "+
				"rebuild it from the others: remove it, empty its data directory, join it again", id, rep.Index, describeHashes(rep)),
			Source:         api.EventSource{Component: "outpost-server", Host: s.cfg.ID},
			FirstTimestamp: now,
			LastTimestamp:  now,
			Count:          1,
			Type:           "Warning",
		}
		if _, err := s.core.Create(ctx, core.ControlPlane, ev); err != nil {
			s.log.Warn("recording the state divergence event failed", "server", id, "err", err)
			continue
		}
		c.mu.Lock()
		c.reported[id] = true
		c.mu.Unlock()
	}
}

// serveStateHash answers GET /debug/statehash with the last comparison,
// for the callers that may read /metrics.
func (s *Server) serveStateHash(w http.ResponseWriter, r *http.Request, id *auth.Identity) {
	if err := auth.Authorize(id, auth.Request{Verb: auth.VerbGet, Path: "/metrics"}, nil); err != nil {
		writeError(w, api.NewForbidden(err.Error()))
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		writeError(w, api.NewMethodNotAllowed(r.Method+" is not supported on /debug/statehash (GET)"))
		return
	}
	writeJSON(w, http.StatusOK, s.stateCheck.report())
}

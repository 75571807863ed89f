package raftstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// backoff is a capped exponential delay for retry loops.
type backoff struct{ cur, max time.Duration }

// wait sleeps for the current delay or until ctx ends, then grows it.
func (b *backoff) wait(ctx context.Context) error {
	t := time.NewTimer(b.cur)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
	}
	b.cur = min(2*b.cur, b.max)
	return nil
}

// form runs when the server starts without raft state.
func (n *Node) form(ctx context.Context) error {
	switch {
	case n.cfg.BootstrapExpect == 1:
		return n.bootstrap([]raft.Server{{Suffrage: raft.Voter, ID: raft.ServerID(n.cfg.ID), Address: raft.ServerAddress(n.advertise)}})
	case n.cfg.BootstrapExpect > 1:
		return n.bootstrapExpect(ctx)
	case len(n.cfg.Join) > 0:
		return n.join(ctx)
	default:
		n.log.Info("no raft state, no bootstrap and nothing to join: waiting to be added by a leader")
		return nil
	}
}

// bootstrap writes the initial configuration, sorted by ID so that every
// server of a bootstrap-expect group writes the same one.
func (n *Node) bootstrap(servers []raft.Server) error {
	slices.SortFunc(servers, func(a, b raft.Server) int { return cmpString(string(a.ID), string(b.ID)) })
	err := n.raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error()
	if err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
		return fmt.Errorf("bootstrap: %w", err)
	}
	ids := make([]string, len(servers))
	for i, s := range servers {
		ids[i] = string(s.ID)
	}
	n.log.Info("bootstrapped a new raft cluster", "servers", ids)
	return nil
}

// bootstrapExpect contacts the Join addresses until BootstrapExpect servers
// (this one included) are known, then bootstraps with all of them. If one
// of them already has raft state, a cluster exists and this server joins it.
func (n *Node) bootstrapExpect(ctx context.Context) error {
	known := map[string]string{n.cfg.ID: n.advertise}
	b := backoff{cur: 50 * time.Millisecond, max: 2 * time.Second}
	var foreign foreignCAWarner
	for {
		statuses := make([]Status, len(n.cfg.Join))
		errs := make([]error, len(n.cfg.Join))
		var wg sync.WaitGroup
		for i, addr := range n.cfg.Join {
			if addr == n.advertise {
				errs[i] = errSelf
				continue
			}
			wg.Go(func() { statuses[i], errs[i] = n.status(ctx, "", addr) })
		}
		wg.Wait()
		for _, err := range errs {
			foreign.check(n.log, err)
		}
		for i, st := range statuses {
			if errs[i] != nil || st.ID == n.cfg.ID {
				continue
			}
			if st.Bootstrapped {
				n.log.Info("found an existing raft cluster, joining it", "via", n.cfg.Join[i], "server", st.ID)
				return n.join(ctx)
			}
			known[st.ID] = st.RaftAddr
		}
		if len(known) >= n.cfg.BootstrapExpect {
			servers := make([]raft.Server, 0, len(known))
			for id, addr := range known {
				servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(id), Address: raft.ServerAddress(addr)})
			}
			return n.bootstrap(servers)
		}
		n.log.Debug("waiting for servers to bootstrap", "known", len(known), "expect", n.cfg.BootstrapExpect)
		if err := b.wait(ctx); err != nil {
			if foreign.last != nil {
				return fmt.Errorf("bootstrap: %d of %d expected servers found: %w (%w)", len(known), n.cfg.BootstrapExpect, err, foreign.last)
			}
			return fmt.Errorf("bootstrap: %d of %d expected servers found: %w", len(known), n.cfg.BootstrapExpect, err)
		}
	}
}

var errSelf = errors.New("own address")

// join asks the Join addresses, in turn and with backoff, to add this
// server (the leader adds it as a non-voter, waits until it caught up, then
// promotes it). It returns once one accepted.
func (n *Node) join(ctx context.Context) error {
	req := joinRequest{ID: n.cfg.ID, RaftAddr: n.advertise}
	b := backoff{cur: 100 * time.Millisecond, max: 2 * time.Second}
	lastErr := errors.New("no other server to ask")
	var foreign foreignCAWarner
	for {
		for _, addr := range n.cfg.Join {
			if addr == n.advertise {
				continue
			}
			actx := ctx
			cancel := context.CancelFunc(func() {})
			if _, ok := ctx.Deadline(); !ok {
				// The leader waits for this server to catch up inside the
				// call: give it time, but not forever.
				actx, cancel = context.WithTimeout(ctx, 5*time.Minute)
			}
			err := n.rpc.call(actx, addr, rpcJoin, &req, nil)
			cancel()
			if err == nil {
				n.log.Info("joined the raft cluster", "via", addr)
				return nil
			}
			lastErr = err
			foreign.check(n.log, err)
			n.log.Debug("join attempt failed", "via", addr, "error", err)
		}
		if err := b.wait(ctx); err != nil {
			if foreign.last != nil && !errors.Is(lastErr, ErrForeignCA) {
				return fmt.Errorf("join: %w (last error: %w; earlier: %w)", err, lastErr, foreign.last)
			}
			return fmt.Errorf("join: %w (last error: %w)", err, lastErr)
		}
	}
}

// foreignCAWarner remembers the last ErrForeignCA of a retry loop and logs
// the first at warn: the loop goes on (the other server may be fixed), but
// a secret that differs between servers is a mistake to show at once, not
// after the loop gives up.
type foreignCAWarner struct {
	last error
}

func (w *foreignCAWarner) check(log *slog.Logger, err error) {
	if !errors.Is(err, ErrForeignCA) {
		return
	}
	if w.last == nil {
		log.Warn("cannot talk to another server: it belongs to another cluster CA; retrying", "error", err)
	}
	w.last = err
}

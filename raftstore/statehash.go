package raftstore

import (
	"context"
	"fmt"
	"sync"
)

// ServerHash is one server's state hash at an index (Config.StateHash).
type ServerHash struct {
	ID    string `json:"id"`
	Index uint64 `json:"index"`
	// Hash is the state hash, valid when Known.
	Hash  uint64 `json:"hash"`
	Known bool   `json:"known"`
	// Error says why the server gave no hash: unreachable, not there yet,
	// or the index is older than the hashes it keeps.
	Error string `json:"error,omitempty"`
}

type stateHashRequest struct {
	Index uint64 `json:"index"`
}

// localStateHash is this server's hash at index, once it has applied
// index (or ctx ends).
func (n *Node) localStateHash(ctx context.Context, index uint64) ServerHash {
	sh := ServerHash{ID: n.cfg.ID, Index: index}
	if n.cfg.StateHash == nil {
		sh.Error = "this server keeps no state hash"
		return sh
	}
	if err := n.WaitApplied(ctx, index); err != nil {
		sh.Error = fmt.Sprintf("has applied index %d, not yet %d: %v", n.AppliedIndex(), index, err)
		return sh
	}
	sh.Hash, sh.Known = n.cfg.StateHash(index)
	if !sh.Known {
		sh.Error = fmt.Sprintf("index %d is older than the state hashes it keeps", index)
	}
	return sh
}

// StateHashes asks every server of the configuration, this one included,
// for its state hash at index; each waits until it has applied index,
// as long as ctx allows. The result is in configuration order.
func (n *Node) StateHashes(ctx context.Context, index uint64) ([]ServerHash, error) {
	if n.closed.Load() {
		return nil, ErrClosed
	}
	c, _, err := n.configuration()
	if err != nil {
		return nil, err
	}
	out := make([]ServerHash, len(c.Servers))
	var wg sync.WaitGroup
	for i, s := range c.Servers {
		wg.Go(func() {
			if string(s.ID) == n.cfg.ID {
				out[i] = n.localStateHash(ctx, index)
				return
			}
			var sh ServerHash
			if err := n.rpc.call(ctx, string(s.Address), rpcStateHash, &stateHashRequest{Index: index}, &sh); err != nil {
				sh = ServerHash{Index: index, Error: err.Error()}
			}
			sh.ID = string(s.ID) // the configuration's name, whatever answered
			out[i] = sh
		})
	}
	wg.Wait()
	return out, nil
}

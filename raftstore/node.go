package raftstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/raft"
	"github.com/outpost-edge/outpost/internal/plant"
	bolterrors "go.etcd.io/bbolt/errors"
)

// LeaderInfo names the current leader; the zero value means none is known.
type LeaderInfo struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raftAddr"`
	APIAddr  string `json:"apiAddr,omitempty"`
}

// Node is one running raft member. All methods are safe for concurrent use.
type Node struct {
	cfg       Config
	log       *slog.Logger
	advertise string

	raft     *raft.Raft
	fsm      *fsmAdapter
	tuneMu   sync.Mutex // serializes setSnapshotThreshold
	store    *boltStore // the stable store (term, vote)
	logs     *walStore  // the log
	snaps    *snapshotStore
	trans    *raft.NetworkTransport
	ahead    *sendAhead
	mux      *mux
	rpc      *rpcClient
	metrics  *nodeMetrics
	observer *raft.Observer

	// ctx lives as long as the node; background work and RPC handlers use it.
	ctx    context.Context
	cancel context.CancelFunc

	bgMu    sync.Mutex
	closing bool
	wg      sync.WaitGroup

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error

	// Leadership as seen by this node, fanned out to subscribers.
	subMu   sync.Mutex
	leading bool
	subs    map[chan bool]struct{}

	// leaderChanged wakes WaitForLeader on leader or API address news.
	leaderChanged notifier
	// removed is set once this node learned it was removed from the
	// cluster; removedProbe is when it last asked the others.
	removedMu    sync.Mutex
	removed      bool
	removedProbe time.Time

	apiMu       sync.Mutex
	apiAddrs    map[string]string // raft address -> API address ("" = known to be empty)
	apiFetching map[string]bool

	// Linearizable reads on the leader: a read barrier per term, then one
	// VerifyLeader shared by every read that arrived before it started.
	readyMu     sync.Mutex
	readyTerm   atomic.Uint64
	readMu      sync.Mutex
	readPending *readBatch
	readRunning bool

	// changeMu serializes membership changes so each is checked against the
	// configuration the previous one produced.
	changeMu sync.Mutex
}

// notifier is a broadcast: wait returns a channel closed by the next notify.
type notifier struct {
	mu sync.Mutex
	ch chan struct{}
}

func (b *notifier) wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch == nil {
		b.ch = make(chan struct{})
	}
	return b.ch
}

func (b *notifier) notify() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch != nil {
		close(b.ch)
		b.ch = nil
	}
}

// logCacheSize is how many recent entries stay in memory in front of
// bbolt: enough for followers that lag by a few batches.
const logCacheSize = 4 * maxAppendEntries

// Open starts a raft member. A server with existing raft state just starts
// and rejoins with its data. Otherwise, with BootstrapExpect it forms a new
// cluster (or joins one that already exists), and with only Join it asks the
// members to add it; in both cases Open returns once that is done, or fails
// when ctx ends. With neither, it waits to be added by a leader.
func Open(ctx context.Context, cfg Config, fsm FSM) (*Node, error) {
	if fsm == nil {
		return nil, fmt.Errorf("%w: fsm: required", ErrInvalidConfig)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	n := &Node{
		cfg:         cfg,
		log:         cfg.Logger.With("raft_id", cfg.ID),
		subs:        make(map[chan bool]struct{}),
		apiAddrs:    make(map[string]string),
		apiFetching: make(map[string]bool),
	}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	if err := n.start(fsm); err != nil {
		_ = n.shutdown()
		return nil, err
	}
	if n.raft.LastIndex() == 0 {
		if err := n.form(ctx); err != nil {
			_ = n.Close()
			return nil, err
		}
	}
	return n, nil
}

func (n *Node) start(fsm FSM) error {
	cfg := n.cfg
	raftDir := filepath.Join(cfg.DataDir, "raft")
	if err := os.MkdirAll(raftDir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", raftDir, err)
	}
	var err error
	if n.store, err = openBoltStore(filepath.Join(raftDir, "raft.db"), cfg.UnsafeNoSync); err != nil {
		if errors.Is(err, bolterrors.ErrTimeout) {
			return &dataDirInUseError{dir: cfg.DataDir}
		}
		return err
	}
	if n.logs, err = openWALStore(filepath.Join(raftDir, "wal"), cfg.UnsafeNoSync, n.store); err != nil {
		return err
	}
	hl := newHCLog(n.log.With("component", "raft"))
	if n.snaps, err = openSnapshotStore(raftDir, n.log); err != nil {
		return err
	}
	cache, err := raft.NewLogCache(logCacheSize, n.logs)
	if err != nil {
		return fmt.Errorf("log cache: %w", err)
	}
	if n.mux, err = newMux(cfg, n.log); err != nil {
		return err
	}
	n.advertise = n.mux.advertise.String()
	n.rpc = newRPCClient(n.mux)
	layer := &raftLayer{m: n.mux, closed: make(chan struct{})}
	n.trans = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  layer,
		MaxPool: transportMaxPool,
		Timeout: transportTimeout,
		Logger:  hl.Named("transport"),
	})
	n.fsm = newFSMAdapter(fsm, n.ctx.Done())
	n.fsm.onFatal = func(err error) {
		n.log.Error("stopping: this server cannot apply a replicated command; upgrade it to the version the other servers run", "err", err)
		if cfg.OnFatal != nil {
			cfg.OnFatal(err)
		}
	}

	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.ID)
	rc.Logger = hl
	rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	rc.ElectionTimeout = cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = cfg.LeaderLeaseTimeout
	rc.CommitTimeout = cfg.CommitTimeout
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.TrailingLogs = cfg.TrailingLogs
	rc.SnapshotInterval = cfg.SnapshotInterval
	rc.MaxAppendEntries = maxAppendEntries
	rc.BatchApplyCh = true
	// A removed server stays up (answering status RPCs, closable as usual)
	// instead of shutting raft down under the caller's feet.
	rc.ShutdownOnRemove = false
	rc.NoLegacyTelemetry = true
	if err := raft.ValidateConfig(rc); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	ahead := newSendAhead(cache, n.trans, rc.LocalID, raft.ServerAddress(n.advertise), cfg.noSendAhead)
	var started atomic.Pointer[raft.Raft]
	ahead.leading = func() bool {
		r := started.Load()
		return r != nil && r.State() == raft.Leader
	}
	ahead.commitIndex = func() uint64 { return started.Load().CommitIndex() }
	ahead.members = func() []raft.Server {
		// Not through raft's main loop: the leader loop calls this.
		return started.Load().GetConfiguration().Configuration().Servers
	}
	n.ahead = ahead
	if sz, ok := fsm.(Sizer); ok {
		// A member that installs a snapshot (joining, or far behind) holds
		// the whole state at once: its threshold must follow before raft
		// next looks, or it snapshots all it just installed while it
		// replays the log after it (seen at 150,000 pods: a joining member
		// snapshotted 27,000 entries after the install, still at the
		// configured 8,192, and was ready 1-2 s later).
		n.fsm.onRestore = func() {
			if r := started.Load(); r != nil {
				n.setSnapshotThreshold(r, sz, cfg.SnapshotThreshold)
			}
		}
	}
	var trans raft.Transport = pipelined{observed{n.trans, ahead}, n.ctx.Done()}
	if cfg.noPipeline {
		trans = unpipelined{observed{n.trans, ahead}}
	}
	// NewRaft restores the latest snapshot into the FSM before it returns.
	if n.raft, err = raft.NewRaft(rc, n.fsm, ahead, n.store, n.snaps, trans); err != nil {
		return fmt.Errorf("start raft: %w", err)
	}
	started.Store(n.raft)
	if n.metrics, err = newNodeMetrics(cfg.Registerer, n); err != nil {
		return err
	}
	obs := make(chan raft.Observation, 64)
	n.observer = raft.NewObserver(obs, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	n.raft.RegisterObserver(n.observer)
	n.goBackground(func() { n.watchLeader(obs) })
	n.goBackground(n.watchLeadership)
	if sz, ok := fsm.(Sizer); ok {
		n.goBackground(func() { n.tuneSnapshots(sz, cfg.SnapshotThreshold, cfg.SnapshotInterval) })
	}
	handlers := n.rpcHandlers()
	n.mux.handleRPC = func(c net.Conn) { serveRPC(n.ctx, c, handlers) }
	n.mux.serve()
	n.log.Info("raft member started", "addr", n.advertise, "last_index", n.raft.LastIndex())
	return nil
}

// goBackground runs f on a goroutine that Close waits for; it reports
// whether f was started (not after Close began).
func (n *Node) goBackground(f func()) bool {
	n.bgMu.Lock()
	defer n.bgMu.Unlock()
	if n.closing {
		return false
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		f()
	}()
	return true
}

// watchLeader follows cluster leader changes (observations are dropped
// rather than block raft; WaitForLeader also re-checks on a timer).
func (n *Node) watchLeader(obs <-chan raft.Observation) {
	var last raft.ServerID
	for {
		select {
		case <-n.ctx.Done():
			return
		case o := <-obs:
			lo, ok := o.Data.(raft.LeaderObservation)
			if !ok {
				continue
			}
			if lo.LeaderID != "" && lo.LeaderID != last {
				n.metrics.leaderChanges.Inc()
				n.log.Info("raft leader changed", "leader_id", string(lo.LeaderID), "leader_addr", string(lo.LeaderAddr))
			}
			last = lo.LeaderID
			if lo.LeaderID != "" && string(lo.LeaderID) != n.cfg.ID {
				n.learnAPI(string(lo.LeaderAddr))
			}
			n.leaderChanged.notify()
		}
	}
}

// watchLeadership fans this node's own leadership changes out to
// subscribers and prepares a new leader for linearizable reads.
func (n *Node) watchLeadership() {
	ch := n.raft.LeaderCh()
	for {
		select {
		case <-n.ctx.Done():
			return
		case v := <-ch:
			n.subMu.Lock()
			n.leading = v
			for s := range n.subs {
				deliverLatest(s, v)
			}
			n.subMu.Unlock()
			n.leaderChanged.notify()
			if v {
				n.goBackground(func() {
					ctx, cancel := context.WithTimeout(n.ctx, 10*n.cfg.ElectionTimeout)
					defer cancel()
					if err := n.ensureReadReady(ctx); err != nil {
						n.log.Debug("read barrier after election failed", "error", err)
					}
				})
			}
		}
	}
}

// deliverLatest puts v in a one-slot channel, replacing a value the
// receiver has not taken yet: the receiver always sees the latest state.
// The caller holds subMu, so it is the only sender.
func deliverLatest(ch chan bool, v bool) {
	select {
	case ch <- v:
		return
	default:
	}
	select {
	case <-ch:
	default:
	}
	ch <- v
}

// Close leaves gracefully: a leader first hands leadership to another
// voter, then raft stops and the stores close. Membership is unchanged, so
// a restart with the same DataDir rejoins. Safe to call more than once.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		n.closed.Store(true)
		if n.raft != nil && n.IsLeader() && n.voterCount() > 1 {
			if err := n.raft.LeadershipTransfer().Error(); err != nil {
				n.log.Debug("leadership transfer before close failed", "error", err)
			}
		}
		n.closeErr = n.shutdown()
	})
	return n.closeErr
}

// shutdown releases whatever start managed to build.
func (n *Node) shutdown() error {
	n.closed.Store(true)
	n.bgMu.Lock()
	n.closing = true
	n.bgMu.Unlock()
	n.cancel()
	var errs []error
	if n.raft != nil {
		if err := n.raft.Shutdown().Error(); err != nil {
			errs = append(errs, fmt.Errorf("stop raft: %w", err))
		}
		n.raft.DeregisterObserver(n.observer)
	}
	if n.trans != nil {
		_ = n.trans.Close()
	}
	if n.rpc != nil {
		n.rpc.Close()
	}
	if n.mux != nil {
		_ = n.mux.Close()
	}
	n.wg.Wait()
	if n.ahead != nil {
		n.ahead.wait()
	}
	if n.logs != nil {
		if err := n.logs.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close log store: %w", err))
		}
	}
	if n.store != nil {
		if err := n.store.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close stable store: %w", err))
		}
	}
	if n.metrics != nil {
		n.metrics.unregister()
	}
	n.subMu.Lock()
	for s := range n.subs {
		if n.leading {
			deliverLatest(s, false)
		}
		close(s)
		delete(n.subs, s)
	}
	n.leading = false
	n.subMu.Unlock()
	return errors.Join(errs...)
}

func (n *Node) voterCount() int {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return 0
	}
	c := 0
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter {
			c++
		}
	}
	return c
}

// waitFuture waits for a raft future, giving up when ctx ends (the
// operation itself may still complete).
func waitFuture(ctx context.Context, f raft.Future) error {
	if ctx.Done() == nil {
		return f.Error()
	}
	ch := make(chan error, 1)
	go func() { ch <- f.Error() }()
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// enqueueTimeout is how long raft may wait to accept a request: the
// caller's remaining time, or forever (0) without a deadline.
func enqueueTimeout(ctx context.Context) (time.Duration, error) {
	dl, ok := ctx.Deadline()
	if !ok {
		return 0, nil
	}
	d := time.Until(dl)
	if d <= 0 {
		return 0, context.DeadlineExceeded
	}
	return d, nil
}

// Apply replicates cmd and returns the FSM's result and the entry's index.
// On a follower it fails with a *NotLeaderError (errors.Is ErrNotLeader).
// An error wrapping ErrUnknownOutcome means the command may still commit.
func (n *Node) Apply(ctx context.Context, cmd []byte) (any, uint64, error) {
	if n.closed.Load() {
		return nil, 0, ErrClosed
	}
	timeout, err := enqueueTimeout(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("apply: %w", err)
	}
	m := n.metrics
	m.inflight.Inc()
	start := time.Now()
	f := n.raft.ApplyLog(raft.Log{Data: cmd}, timeout)
	err = waitFuture(ctx, f)
	m.inflight.Dec()
	if errors.Is(err, raft.ErrRaftShutdown) {
		// The entry may already be in the log and commit on the others.
		return nil, 0, fmt.Errorf("apply: %w: %w: the server shut down before the entry was known to be committed", ErrUnknownOutcome, ErrClosed)
	}
	if err != nil {
		return nil, 0, n.raftError("apply", err)
	}
	m.commit.Observe(time.Since(start).Seconds())
	return f.Response(), f.Index(), nil
}

// raftError maps raft's errors onto this package's sentinels. A request
// that was refused before it reached the log is a clean failure; one that
// was in the log when leadership was lost (or the caller stopped waiting)
// has an unknown outcome.
func (n *Node) raftError(op string, err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader):
		return fmt.Errorf("%s: %w", op, n.notLeaderErr())
	case errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return fmt.Errorf("%s: %w: %w", op, ErrNoLeader, err)
	case errors.Is(err, raft.ErrRaftShutdown):
		return fmt.Errorf("%s: %w", op, ErrClosed)
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return fmt.Errorf("%s: %w: %w", op, context.DeadlineExceeded, err)
	case errors.Is(err, raft.ErrLeadershipLost):
		return fmt.Errorf("%s: %w: leadership was lost before the entry was known to be committed: %w", op, ErrUnknownOutcome, err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%s: %w: stopped waiting for the commit: %w", op, ErrUnknownOutcome, err)
	default:
		return fmt.Errorf("%s: %w: %w", op, ErrUnknownOutcome, err)
	}
}

// notLeaderErr names the leader this follower knows of; with none known it
// also matches ErrNoLeader.
func (n *Node) notLeaderErr() error {
	li := n.Leader()
	if li.ID == "" {
		return fmt.Errorf("%w: %w", &NotLeaderError{}, ErrNoLeader)
	}
	return &NotLeaderError{Leader: li}
}

// ReadIndex returns a linearizable read point: once WaitApplied(index)
// returns, local reads reflect every write acknowledged before ReadIndex was
// called. The leader confirms it still leads (one quorum round shared by
// concurrent readers); a follower asks the leader over the RPC mux.
func (n *Node) ReadIndex(ctx context.Context) (uint64, error) {
	var lastErr error
	backoff := 5 * time.Millisecond
	for attempt := 0; attempt < maxReadAttempts; attempt++ {
		if n.closed.Load() {
			return 0, ErrClosed
		}
		if n.IsLeader() {
			idx, err := n.leaderReadIndex(ctx)
			if err == nil || !errors.Is(err, ErrNotLeader) {
				return idx, err
			}
			lastErr = err
		} else if li := n.Leader(); li.ID != "" {
			var resp readIndexResponse
			err := n.rpc.call(ctx, li.RaftAddr, rpcReadIndex, &readIndexRequest{ID: n.cfg.ID}, &resp)
			if err == nil {
				return resp.Index, nil
			}
			if errors.Is(err, ErrUnknownServer) {
				// Removed: no leader will ever send this server the
				// entries the read would wait for.
				n.markRemoved()
				return 0, fmt.Errorf("%w: the leader %s does not count this server as a member: %w", ErrNoLeader, li.ID, err)
			}
			if errors.Is(err, ErrClosed) && n.closed.Load() {
				return 0, ErrClosed
			}
			lastErr = err
			if ctx.Err() == nil && unreachable(err) {
				// No connection at all: the leader this server last heard
				// of is gone and it has not noticed yet. To the caller
				// that is no leader, not a broken RPC. A slow leader (a
				// deadline) is not this case.
				lastErr = fmt.Errorf("%w: the last known leader %s cannot be reached: %w", ErrNoLeader, li.ID, err)
			}
		} else {
			lastErr = ErrNoLeader
		}
		// The leader moved or is being elected: wait a little and retry.
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, fmt.Errorf("read index: %w (last error: %w)", ctx.Err(), lastErr)
		case <-n.ctx.Done():
			t.Stop()
			return 0, ErrClosed
		case <-n.leaderChanged.wait():
			t.Stop()
		case <-t.C:
		}
		backoff = min(2*backoff, 200*time.Millisecond)
	}
	return 0, fmt.Errorf("read index: %w", lastErr)
}

const maxReadAttempts = 30

// unreachable reports whether err says a peer could not be connected to,
// or hung up without answering.
func unreachable(err error) bool {
	var op *net.OpError
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EHOSTUNREACH) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || (errors.As(err, &op) && op.Op == "dial" && !op.Timeout())
}

type readBatch struct {
	done  chan struct{}
	index uint64
	err   error
}

// leaderReadIndex joins the next leadership check; every read waiting when
// a check starts shares its result.
func (n *Node) leaderReadIndex(ctx context.Context) (uint64, error) {
	n.readMu.Lock()
	b := n.readPending
	if b == nil {
		b = &readBatch{done: make(chan struct{})}
		n.readPending = b
	}
	if !n.readRunning {
		if !n.goBackground(n.runReads) {
			n.readMu.Unlock()
			return 0, ErrClosed
		}
		n.readRunning = true
	}
	n.readMu.Unlock()
	select {
	case <-b.done:
		return b.index, b.err
	case <-ctx.Done():
		return 0, fmt.Errorf("read index: %w", ctx.Err())
	}
}

func (n *Node) runReads() {
	for {
		n.readMu.Lock()
		b := n.readPending
		n.readPending = nil
		if b == nil {
			n.readRunning = false
			n.readMu.Unlock()
			return
		}
		n.readMu.Unlock()
		ctx, cancel := context.WithTimeout(n.ctx, 4*n.cfg.ElectionTimeout)
		b.index, b.err = n.verifiedCommitIndex(ctx)
		cancel()
		close(b.done)
	}
}

func (n *Node) verifiedCommitIndex(ctx context.Context) (uint64, error) {
	if !plant.On(plant.SkipReadBarrier) {
		if err := n.ensureReadReady(ctx); err != nil {
			return 0, err
		}
	}
	if !plant.On(plant.NoLeaderCheck) {
		if err := waitFuture(ctx, n.raft.VerifyLeader()); err != nil {
			return 0, n.raftError("verify leader", err)
		}
	}
	return n.raft.CommitIndex(), nil
}

// ensureReadReady makes sure this leader has committed and applied an entry
// of its own term. Until then its commit index may lag entries an earlier
// leader committed, and raft's own no-op entry is invisible to the FSM, so
// a read barrier entry (consumed by the adapter) is appended instead.
func (n *Node) ensureReadReady(ctx context.Context) error {
	term := n.raft.CurrentTerm()
	if n.readyTerm.Load() == term {
		return nil
	}
	n.readyMu.Lock()
	defer n.readyMu.Unlock()
	if n.readyTerm.Load() == term {
		return nil
	}
	if !n.IsLeader() {
		return n.notLeaderErr()
	}
	timeout, err := enqueueTimeout(ctx)
	if err != nil {
		return fmt.Errorf("read barrier: %w", err)
	}
	f := n.raft.ApplyLog(raft.Log{Extensions: readBarrierExt}, timeout)
	if err := waitFuture(ctx, f); err != nil {
		return n.raftError("read barrier", err)
	}
	n.readyTerm.Store(term)
	return nil
}

// Barrier returns once this node, as leader, has committed an entry of its
// current term and its FSM has applied it, with the index it reached. The
// FSM then holds every entry any earlier leader committed. hashicorp/raft
// reports leadership before that is so: a new leader's FSM may still lack
// writes the cluster has acknowledged, and leader-only work started at
// once (controllers, schedulers) would act on that stale state, for
// example creating pods a ReplicaSet already has. Such work must wait for
// Barrier, as Nomad's leader loop waits for raft.Barrier. The entry is the
// term's read barrier, so reads share it. On a follower it fails with
// ErrNotLeader.
func (n *Node) Barrier(ctx context.Context) (uint64, error) {
	if n.closed.Load() {
		return 0, ErrClosed
	}
	if !n.IsLeader() {
		return 0, fmt.Errorf("barrier: %w", n.notLeaderErr())
	}
	if err := n.ensureReadReady(ctx); err != nil {
		return 0, err
	}
	return n.fsm.applied.Load(), nil
}

// TransferLeadership asks raft to hand leadership to the voter id, which
// must be caught up, and returns once the transfer is done or refused.
// Tests use it to pick the next leader; operators use it before taking the
// leader down.
func (n *Node) TransferLeadership(ctx context.Context, id string) error {
	if n.closed.Load() {
		return ErrClosed
	}
	s, err := n.server(id)
	if err != nil {
		return fmt.Errorf("transfer leadership: %w", err)
	}
	if err := waitFuture(ctx, n.raft.LeadershipTransferToServer(s.ID, s.Address)); err != nil {
		return n.raftError("transfer leadership", err)
	}
	return nil
}

// WaitApplied blocks until the local FSM has applied index (an index from
// Apply or ReadIndex).
func (n *Node) WaitApplied(ctx context.Context, index uint64) error {
	if n.closed.Load() {
		return ErrClosed
	}
	return n.fsm.waitApplied(ctx, index)
}

// AppliedIndex is the index of the last entry the local FSM has applied.
func (n *Node) AppliedIndex() uint64 { return n.fsm.applied.Load() }

// IsLeader reports whether this node is the raft leader right now.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// Leader returns the leader this node knows of; APIAddr is empty until it
// has been learned over the RPC mux.
func (n *Node) Leader() LeaderInfo {
	addr, id := n.raft.LeaderWithID()
	if id == "" {
		return LeaderInfo{}
	}
	li := LeaderInfo{ID: string(id), RaftAddr: string(addr)}
	if li.ID == n.cfg.ID {
		li.APIAddr = n.cfg.APIAddr
		return li
	}
	n.apiMu.Lock()
	li.APIAddr = n.apiAddrs[li.RaftAddr]
	n.apiMu.Unlock()
	return li
}

func (n *Node) apiKnown(li LeaderInfo) bool {
	if li.ID == n.cfg.ID {
		return true
	}
	n.apiMu.Lock()
	defer n.apiMu.Unlock()
	_, ok := n.apiAddrs[li.RaftAddr]
	return ok
}

func (n *Node) rememberAPI(raftAddr, apiAddr string) {
	n.apiMu.Lock()
	old, ok := n.apiAddrs[raftAddr]
	n.apiAddrs[raftAddr] = apiAddr
	n.apiMu.Unlock()
	if !ok || old != apiAddr {
		n.leaderChanged.notify()
	}
}

// learnAPI asks the server at raftAddr for its API address in the
// background, once at a time per address.
func (n *Node) learnAPI(raftAddr string) {
	n.apiMu.Lock()
	if n.apiFetching[raftAddr] {
		n.apiMu.Unlock()
		return
	}
	n.apiFetching[raftAddr] = true
	n.apiMu.Unlock()
	started := n.goBackground(func() {
		defer func() {
			n.apiMu.Lock()
			delete(n.apiFetching, raftAddr)
			n.apiMu.Unlock()
		}()
		ctx, cancel := context.WithTimeout(n.ctx, n.probeTimeout())
		defer cancel()
		var st Status
		if err := n.rpc.call(ctx, raftAddr, rpcStatus, nil, &st); err != nil {
			n.log.Debug("could not learn the API address of a server", "addr", raftAddr, "error", err)
			return
		}
		n.rememberAPI(raftAddr, st.APIAddr)
	})
	if !started {
		n.apiMu.Lock()
		delete(n.apiFetching, raftAddr)
		n.apiMu.Unlock()
	}
}

// LeaderChanged is closed at the next news of the leader (a new one, none,
// or its API address). News can be missed between a look at Leader and
// this call, so a caller also looks again now and then.
func (n *Node) LeaderChanged() <-chan struct{} { return n.leaderChanged.wait() }

// WaitForLeader blocks until a leader is known, with its API address.
func (n *Node) WaitForLeader(ctx context.Context) (LeaderInfo, error) {
	for {
		wake := n.leaderChanged.wait()
		li := n.Leader()
		if li.ID != "" {
			if n.apiKnown(li) {
				return li, nil
			}
			n.learnAPI(li.RaftAddr)
		}
		// Observations can be dropped; re-check now and then regardless.
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-wake:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return li, fmt.Errorf("wait for leader: %w: %w", ErrNoLeader, ctx.Err())
		case <-n.ctx.Done():
			t.Stop()
			return LeaderInfo{}, ErrClosed
		}
		t.Stop()
	}
}

// Subscribe delivers this node's leadership changes (true = became leader),
// starting with the current state. The channel has one slot holding the
// latest state: a receiver that falls behind sees the newest value, so a
// true while it already leads means leadership was lost and regained and
// leader-only work should restart. The channel closes on cancel or Close.
func (n *Node) Subscribe() (<-chan bool, func()) {
	ch := make(chan bool, 1)
	n.subMu.Lock()
	if n.closed.Load() {
		n.subMu.Unlock()
		close(ch)
		return ch, func() {}
	}
	ch <- n.leading
	n.subs[ch] = struct{}{}
	n.subMu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			n.subMu.Lock()
			defer n.subMu.Unlock()
			if _, ok := n.subs[ch]; ok {
				delete(n.subs, ch)
				close(ch)
			}
		})
	}
}

// Snapshot takes a snapshot now (nothing new since the last one is fine).
func (n *Node) Snapshot() error {
	if n.closed.Load() {
		return ErrClosed
	}
	err := n.raft.Snapshot().Error()
	if err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) {
		return fmt.Errorf("snapshot: %w", err)
	}
	return nil
}

// Stats returns raft's statistics plus this package's own.
func (n *Node) Stats() map[string]string {
	s := n.raft.Stats()
	s["id"] = n.cfg.ID
	s["advertise_addr"] = n.advertise
	s["api_addr"] = n.cfg.APIAddr
	s["fsm_applied_index"] = strconv.FormatUint(n.fsm.applied.Load(), 10)
	s["fsm_restores"] = strconv.FormatUint(n.fsm.restores.Load(), 10)
	s["snapshot_last_index"] = strconv.FormatUint(n.snaps.last.Load(), 10)
	return s
}

// Status describes this server, as its status RPC does.
func (n *Node) Status() Status {
	state := n.raft.State()
	return Status{
		ID:           n.cfg.ID,
		RaftAddr:     n.advertise,
		APIAddr:      n.cfg.APIAddr,
		LastIndex:    n.raft.LastIndex(),
		AppliedIndex: n.fsm.applied.Load(),
		CommitIndex:  n.raft.CommitIndex(),
		Term:         n.raft.CurrentTerm(),
		State:        state.String(),
		IsLeader:     state == raft.Leader,
		Bootstrapped: n.raft.LastIndex() > 0,
		Servers:      n.serverIDs(),
		Version:      n.cfg.Version,
		Info:         n.info(),
	}
}

func (n *Node) info() map[string]string {
	if n.cfg.Info == nil {
		return nil
	}
	return n.cfg.Info()
}

// serverIDs lists the IDs of the configuration this node holds.
func (n *Node) serverIDs() []string {
	c, _, err := n.configuration()
	if err != nil {
		return nil
	}
	ids := make([]string, len(c.Servers))
	for i, s := range c.Servers {
		ids[i] = string(s.ID)
	}
	return ids
}

// probeTimeout bounds one status RPC used to judge reachability.
func (n *Node) probeTimeout() time.Duration {
	return min(max(2*n.cfg.ElectionTimeout, 500*time.Millisecond), 5*time.Second)
}

// status returns the status of the server at addr (this one without RPC).
func (n *Node) status(ctx context.Context, id, addr string) (Status, error) {
	if id == n.cfg.ID || addr == n.advertise {
		return n.Status(), nil
	}
	ctx, cancel := context.WithTimeout(ctx, n.probeTimeout())
	defer cancel()
	var st Status
	if err := n.rpc.call(ctx, addr, rpcStatus, nil, &st); err != nil {
		return st, err
	}
	if id != "" && st.ID != id {
		return st, fmt.Errorf("status %s: server there is %q, expected %q", addr, st.ID, id)
	}
	n.rememberAPI(addr, st.APIAddr)
	return st, nil
}

func (n *Node) rpcHandlers() map[string]rpcHandler {
	return map[string]rpcHandler{
		rpcStatus: func(context.Context, json.RawMessage) (any, error) {
			st := n.Status()
			return &st, nil
		},
		rpcReadIndex: func(ctx context.Context, body json.RawMessage) (any, error) {
			if !n.IsLeader() {
				return nil, n.notLeaderErr()
			}
			var req readIndexRequest
			if len(body) > 0 {
				if err := json.Unmarshal(body, &req); err != nil {
					return nil, fmt.Errorf("read index: bad request: %w", err)
				}
			}
			if req.ID != "" {
				if _, err := n.server(req.ID); err != nil {
					return nil, err
				}
			}
			idx, err := n.leaderReadIndex(ctx)
			if err != nil {
				return nil, err
			}
			return &readIndexResponse{Index: idx}, nil
		},
		rpcStateHash: func(ctx context.Context, body json.RawMessage) (any, error) {
			var req stateHashRequest
			if err := json.Unmarshal(body, &req); err != nil {
				return nil, fmt.Errorf("state hash: bad request: %w", err)
			}
			sh := n.localStateHash(ctx, req.Index)
			return &sh, nil
		},
		rpcJoin: func(ctx context.Context, body json.RawMessage) (any, error) {
			var req joinRequest
			if err := json.Unmarshal(body, &req); err != nil {
				return nil, fmt.Errorf("join: bad request: %w", err)
			}
			return nil, n.handleJoin(ctx, req)
		},
	}
}

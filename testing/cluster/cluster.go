package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/client"
	"github.com/outpost-edge/outpost/controlplane/server"
)

// Options shape a test cluster.
type Options struct {
	// Servers is the number of voters (default 3).
	Servers int
	// SnapshotThreshold and TrailingLogs are passed to raft (0: defaults).
	SnapshotThreshold, TrailingLogs uint64
	// Logger receives every server's logs (default: t.Log at Error).
	Logger *slog.Logger
	// ControlLoops runs the leader's schedulers and controllers. Off by
	// default: tests of the store's and API's own semantics (histories
	// checked for linearizability, resourceVersions compared) must see
	// only their own writes.
	ControlLoops bool
	// Configure, when set, changes each server's config before it starts
	// (schedulers, admission, controllers).
	Configure func(*server.Config)
}

// Member is one server of the cluster; Server is nil while it is stopped.
type Member struct {
	ID       string
	DataDir  string
	APIAddr  string
	RaftAddr string
	Server   *server.Server
}

// Cluster is an in-process control plane.
type Cluster struct {
	t       testing.TB
	opts    Options
	secret  string
	Net     *Network
	mu      sync.Mutex
	Members []*Member
}

// New starts a cluster of opts.Servers servers that bootstrap together and
// waits for a leader. The cluster is closed when the test ends.
func New(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if opts.Servers == 0 {
		opts.Servers = 3
	}
	if opts.Logger == nil {
		tw := &testWriter{t: t}
		// Registered before c.Close, so it runs after it: a goroutine that
		// logs once the test is over must not call t.Log (that panics).
		t.Cleanup(func() { tw.done.Store(true) })
		// OUTPOST_TEST_DEBUG=1 logs everything, for a failure that only
		// shows under load (elections, barriers, replication).
		lvl := slog.LevelError
		if os.Getenv("OUTPOST_TEST_DEBUG") != "" {
			lvl = slog.LevelDebug
		}
		opts.Logger = slog.New(slog.NewTextHandler(tw, &slog.HandlerOptions{Level: lvl}))
	}
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	c := &Cluster{t: t, opts: opts, secret: hex.EncodeToString(b), Net: NewNetwork()}
	t.Cleanup(c.Close)
	for attempt := 1; ; attempt++ {
		err := c.bootstrap(opts.Servers)
		if err == nil {
			break
		}
		c.Close()
		// freePort's port was free when it looked; another test's
		// process (make test runs packages side by side) may have taken
		// it since. New ports, new data dirs, and again.
		if attempt < 3 && (errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "address already in use")) {
			t.Logf("start cluster, attempt %d: %v; retrying on other ports", attempt, err)
			continue
		}
		t.Fatalf("start cluster: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c.WaitForLeader(ctx)
	// A server answers nothing that depends on its store until it has
	// applied a read index taken after it started (server: catchup.go);
	// tests begin once every member would answer.
	c.waitReady("start cluster", c.Members...)
	return c
}

// bootstrap starts n fresh members that form one cluster.
func (c *Cluster) bootstrap(n int) error {
	root := c.t.TempDir()
	members := make([]*Member, 0, n)
	for i := range n {
		members = append(members, c.newMember(root, fmt.Sprintf("s%d", i+1)))
	}
	c.mu.Lock()
	c.Members = members
	c.mu.Unlock()
	errs := make(chan error, n)
	for _, m := range members {
		go func() { errs <- c.start(m, n) }()
	}
	var first error
	for range members {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

func (c *Cluster) newMember(root, id string) *Member {
	m := &Member{ID: id, DataDir: filepath.Join(root, id), APIAddr: freePort(c.t), RaftAddr: freePort(c.t)}
	c.Net.Register(m.ID, m.RaftAddr)
	c.Net.Register(m.ID, m.APIAddr)
	return m
}

func freePort(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer l.Close()
	return l.Addr().String()
}

func (c *Cluster) config(m *Member, expect int) server.Config {
	var join []string
	for _, o := range c.Members {
		if o != m {
			join = append(join, o.RaftAddr)
		}
	}
	cfg := server.Config{
		ID: m.ID, DataDir: m.DataDir,
		APIAddr: m.APIAddr, RaftAddr: m.RaftAddr,
		// Any free port: start joins the pools (see there).
		GossipAddr:      "127.0.0.1:0",
		BootstrapExpect: expect, Join: join,
		ClusterSecret: c.secret,
		Logger:        c.opts.Logger.With("server", m.ID),
		Dial:          c.Net.Dialer(m.ID),
		// Short timeouts keep elections quick; generous enough for -race
		// on two shared cores.
		HeartbeatTimeout:   300 * time.Millisecond,
		ElectionTimeout:    300 * time.Millisecond,
		LeaderLeaseTimeout: 150 * time.Millisecond,
		CommitTimeout:      5 * time.Millisecond,
		SnapshotThreshold:  c.opts.SnapshotThreshold,
		TrailingLogs:       c.opts.TrailingLogs,
	}
	if !c.opts.ControlLoops {
		cfg.Schedulers = map[string]string{}
		cfg.DisableControllers = true
	}
	if c.opts.Configure != nil {
		c.opts.Configure(&cfg)
	}
	return cfg
}

func (c *Cluster) start(m *Member, expect int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := server.Start(ctx, c.config(m, expect))
	if err != nil {
		return fmt.Errorf("server %s: %w", m.ID, err)
	}
	c.mu.Lock()
	m.Server = s
	c.mu.Unlock()
	// With gossip on free ports the servers cannot find each other by
	// the shared port; point the new one at the others.
	var seeds []string
	c.mu.Lock()
	for _, o := range c.Members {
		if o != m && o.Server != nil {
			seeds = append(seeds, o.Server.Gossip().LocalAddr())
		}
	}
	c.mu.Unlock()
	if err := s.Gossip().Join(seeds); err != nil {
		return fmt.Errorf("server %s: gossip: %w", m.ID, err)
	}
	return nil
}

// Stop shuts a member down; its data stays for Restart.
func (c *Cluster) Stop(m *Member) {
	c.t.Helper()
	c.mu.Lock()
	s := m.Server
	m.Server = nil
	c.mu.Unlock()
	if s != nil {
		if err := s.Close(); err != nil {
			c.t.Logf("stop %s: %v", m.ID, err)
		}
	}
}

// Restart starts a stopped member again from its data dir and waits until
// it has caught up with the cluster: a restarted server answers nothing
// that depends on its store before (server: catchup.go).
func (c *Cluster) Restart(m *Member) {
	c.t.Helper()
	if err := c.start(m, 0); err != nil {
		c.t.Fatalf("restart: %v", err)
	}
	c.waitReady("restart", m)
}

// waitReady fails the test, naming what, unless every one of ms is ready
// within 30 s.
func (c *Cluster) waitReady(what string, ms ...*Member) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, m := range ms {
		if err := m.Server.WaitReady(ctx); err != nil {
			c.t.Fatalf("%s: %v", what, err)
		}
	}
}

// AddServer starts a new server that joins the running cluster.
func (c *Cluster) AddServer() *Member {
	c.t.Helper()
	c.mu.Lock()
	id := fmt.Sprintf("s%d", len(c.Members)+1)
	c.mu.Unlock()
	return c.AddServerNamed(id)
}

// AddServerNamed starts a new server with raft ID id that joins the
// running cluster (as an agent's server role names it after its node).
func (c *Cluster) AddServerNamed(id string) *Member {
	c.t.Helper()
	m := c.newMember(c.t.TempDir(), id)
	c.mu.Lock()
	c.Members = append(c.Members, m)
	c.mu.Unlock()
	if err := c.start(m, 0); err != nil {
		c.t.Fatalf("add server: %v", err)
	}
	c.waitReady("add server", m)
	return m
}

// Running returns the members that are running.
func (c *Cluster) Running() []*Member {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*Member
	for _, m := range c.Members {
		if m.Server != nil {
			out = append(out, m)
		}
	}
	return out
}

// Leader returns the running member that is leader, or nil.
func (c *Cluster) Leader() *Member {
	m, _ := c.LeaderServer()
	return m
}

// LeaderServer is Leader with its server as it was when looked at: Stop
// may clear Member.Server at any moment.
func (c *Cluster) LeaderServer() (*Member, *server.Server) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.Members {
		if m.Server != nil && m.Server.Node().IsLeader() {
			return m, m.Server
		}
	}
	return nil, nil
}

// Followers returns the running members that are not leader.
func (c *Cluster) Followers() []*Member {
	var out []*Member
	for _, m := range c.Running() {
		if !m.Server.Node().IsLeader() {
			out = append(out, m)
		}
	}
	return out
}

// WaitForLeader waits until exactly one running, connected member leads
// and every running member knows it.
func (c *Cluster) WaitForLeader(ctx context.Context) *Member {
	c.t.Helper()
	for {
		if l := c.Leader(); l != nil {
			agreed := true
			for _, m := range c.Running() {
				if m.Server.Node().Leader().ID != l.ID && !c.Net.isIsolated(m.ID) {
					agreed = false
				}
			}
			if agreed {
				return l
			}
		}
		select {
		case <-ctx.Done():
			c.t.Fatalf("no leader: %v", ctx.Err())
			return nil
		case <-time.After(20 * time.Millisecond): // polling raft state, bounded by ctx
		}
	}
}

// Client returns an admin client that talks to member m.
func (c *Cluster) Client(m *Member) *client.Client {
	c.t.Helper()
	cfg := m.Server.AdminConfig()
	cl, err := client.New(cfg)
	if err != nil {
		c.t.Fatalf("client for %s: %v", m.ID, err)
	}
	return cl
}

// ClientConfig returns the admin client config for member m's API,
// usable while m is stopped.
func (c *Cluster) ClientConfig(m *Member) client.Config {
	for _, o := range c.Running() {
		cfg := o.Server.AdminConfig()
		cfg.Server = "https://" + m.APIAddr
		return cfg
	}
	c.t.Fatalf("no running member")
	return client.Config{}
}

// Close stops every member.
func (c *Cluster) Close() {
	for _, m := range c.Members {
		c.Stop(m)
	}
}

func (n *Network) isIsolated(id string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.isolated[id]
}

// testWriter sends log lines to t.Log until the test has ended.
type testWriter struct {
	t    testing.TB
	done atomic.Bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	if w.done.Load() {
		return len(p), nil
	}
	w.t.Log(string(p))
	return len(p), nil
}

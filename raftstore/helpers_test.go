package raftstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// kvFSM is the test state machine: "set k v" commands on a map, plus the
// list of applied indexes and a count of restores.
type kvFSM struct {
	mu       sync.Mutex
	data     map[string]string
	applied  []uint64
	restores int
	restored uint64 // index passed to the last Restore
}

func newKV() *kvFSM { return &kvFSM{data: map[string]string{}} }

func (f *kvFSM) Apply(index uint64, cmd []byte) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.applied = append(f.applied, index)
	parts := strings.SplitN(string(cmd), " ", 3)
	if len(parts) != 3 || parts[0] != "set" {
		return fmt.Errorf("bad command %q", cmd)
	}
	f.data[parts[1]] = parts[2]
	return "ok " + parts[1]
}

type kvSnap struct{ data []byte }

func (s kvSnap) Persist(w io.Writer) error { _, err := w.Write(s.data); return err }
func (s kvSnap) Release()                  {}

func (f *kvFSM) Snapshot() (FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, err := json.Marshal(f.data)
	return kvSnap{b}, err
}

func (f *kvFSM) Restore(r io.Reader, index uint64) error {
	data := map[string]string{}
	if err := json.NewDecoder(r).Decode(&data); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.data = data
	f.restores++
	f.restored = index
	return nil
}

func (f *kvFSM) get(k string) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.data[k]
	return v, ok
}

func (f *kvFSM) restoreCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.restores
}

func (f *kvFSM) appliedIndexes() []uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.applied)
}

// testLogWriter sends log lines to t.Log until the test ends (raft's
// goroutines may log during shutdown).
type testLogWriter struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (w *testLogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(string(bytes.TrimRight(p, "\n")))
	}
	return len(p), nil
}

func testLogger(t testing.TB) *slog.Logger {
	w := &testLogWriter{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: testLogLevel}))
}

// freeAddrs reserves loopback ports for servers that must know each
// other's addresses before they start (bootstrap-expect).
func freeAddrs(t testing.TB, n int) []string {
	t.Helper()
	var out []string
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().String())
	}
	for _, ln := range lns {
		_ = ln.Close()
	}
	return out
}

type testNode struct {
	cfg  Config
	fsm  *kvFSM
	node *Node
}

func testConfig(t testing.TB, id string) Config {
	return Config{
		ID:       id,
		DataDir:  t.TempDir(),
		BindAddr: "127.0.0.1:0",
		APIAddr:  "https://api-" + id + ".test:6443",
		Insecure: true,
		Logger:   testLogger(t).With("server", id),
		// Short, but with room for a loaded 2-core machine running -race:
		// a lease shorter than a GC pause plus an fsync makes leaders step
		// down in tests that are not about elections.
		HeartbeatTimeout:   300 * time.Millisecond,
		ElectionTimeout:    300 * time.Millisecond,
		LeaderLeaseTimeout: 300 * time.Millisecond,
		CommitTimeout:      5 * time.Millisecond,
	}
}

// open starts (or restarts) the node with a fresh FSM.
func (tn *testNode) open(ctx context.Context) error {
	tn.fsm = newKV()
	n, err := Open(ctx, tn.cfg, tn.fsm)
	if err != nil {
		return err
	}
	tn.node = n
	// Later opens reuse the bound address, as a restarted server would.
	tn.cfg.BindAddr = n.advertise
	return nil
}

func (tn *testNode) close(t testing.TB) {
	t.Helper()
	if tn.node == nil {
		return
	}
	if err := tn.node.Close(); err != nil {
		t.Errorf("close %s: %v", tn.cfg.ID, err)
	}
	tn.node = nil
}

// startCluster forms an n-server cluster with bootstrap-expect.
func startCluster(t testing.TB, n int, mod func(*Config)) []*testNode {
	t.Helper()
	addrs := freeAddrs(t, n)
	nodes := make([]*testNode, n)
	for i := range nodes {
		cfg := testConfig(t, fmt.Sprintf("s%d", i+1))
		cfg.BindAddr = addrs[i]
		cfg.BootstrapExpect = n
		cfg.Join = addrs
		if mod != nil {
			mod(&cfg)
		}
		nodes[i] = &testNode{cfg: cfg}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, tn := range nodes {
		wg.Go(func() { errs[i] = tn.open(ctx) })
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, tn := range nodes {
			tn.close(t)
		}
	})
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("start cluster: %v", err)
	}
	return nodes
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		<-tick.C
	}
}

// waitLeader waits until exactly one of the running nodes leads and all
// of them agree on it.
func waitLeader(t testing.TB, nodes []*testNode) *testNode {
	t.Helper()
	var leader *testNode
	waitFor(t, 10*time.Second, "one agreed leader", func() bool {
		leader = nil
		for _, tn := range nodes {
			if tn.node == nil {
				continue
			}
			if tn.node.IsLeader() {
				if leader != nil {
					return false
				}
				leader = tn
			}
		}
		if leader == nil {
			return false
		}
		for _, tn := range nodes {
			if tn.node != nil && tn.node.Leader().ID != leader.cfg.ID {
				return false
			}
		}
		return true
	})
	return leader
}

func followers(nodes []*testNode, leader *testNode) []*testNode {
	var out []*testNode
	for _, tn := range nodes {
		if tn != leader && tn.node != nil {
			out = append(out, tn)
		}
	}
	return out
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// set applies "set k v" on n and checks the FSM's answer.
func set(t testing.TB, n *Node, k, v string) uint64 {
	t.Helper()
	resp, idx, err := n.Apply(ctxT(t, 5*time.Second), []byte("set "+k+" "+v))
	if err != nil {
		t.Fatalf("apply set %s: %v", k, err)
	}
	if resp != "ok "+k {
		t.Fatalf("apply set %s: response %v", k, resp)
	}
	return idx
}

var testLogLevel = slog.LevelInfo

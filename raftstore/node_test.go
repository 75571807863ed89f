package raftstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func TestSingleServerBootstrapAndLifecycle(t *testing.T) {
	tn := &testNode{cfg: testConfig(t, "solo")}
	tn.cfg.BootstrapExpect = 1
	if err := tn.open(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	n := tn.node
	li, err := n.WaitForLeader(ctxT(t, 10*time.Second))
	if err != nil || li.ID != "solo" || li.APIAddr != tn.cfg.APIAddr || li.RaftAddr != n.advertise {
		t.Fatalf("WaitForLeader = %+v, %v", li, err)
	}
	sub, cancel := n.Subscribe()
	waitTrue(t, sub)
	cancel()
	cancel() // idempotent
	if _, ok := <-sub; ok {
		t.Fatal("cancelled subscription still open")
	}

	idx := set(t, n, "a", "1")
	if n.AppliedIndex() < idx {
		t.Fatalf("applied %d < %d after Apply returned", n.AppliedIndex(), idx)
	}
	ri, err := n.ReadIndex(ctxT(t, 5*time.Second))
	if err != nil || ri < idx {
		t.Fatalf("ReadIndex = %d, %v", ri, err)
	}
	// A bad command's error comes back as the FSM's result, not as a raft error.
	resp, _, err := n.Apply(ctxT(t, 5*time.Second), []byte("bogus"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := resp.(error); !ok {
		t.Fatalf("FSM result %v not returned", resp)
	}
	if err := n.WaitApplied(ctxT(t, 50*time.Millisecond), idx+1000); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitApplied of a future index: %v, want deadline exceeded", err)
	}
	st := n.Stats()
	for _, k := range []string{"state", "term", "last_log_index", "fsm_applied_index", "snapshot_last_index"} {
		if st[k] == "" {
			t.Errorf("Stats lacks %s: %v", k, st)
		}
	}
	if err := n.Snapshot(); err != nil {
		t.Fatal(err)
	}
	if err := n.Snapshot(); err != nil {
		t.Fatalf("second snapshot with nothing new: %v", err)
	}
	if n.snaps.last.Load() == 0 {
		t.Error("snapshot index not recorded")
	}

	// Errors from raft: refused before the log is a clean failure, lost
	// leadership after it is an unknown outcome.
	for _, tt := range []struct {
		in      error
		is      error
		unknown bool
	}{
		{raft.ErrNotLeader, ErrNotLeader, false},
		{raft.ErrLeadershipLost, ErrUnknownOutcome, true},
		{raft.ErrEnqueueTimeout, context.DeadlineExceeded, false},
		{raft.ErrRaftShutdown, ErrClosed, false},
		{raft.ErrLeadershipTransferInProgress, ErrNoLeader, false},
		{context.Canceled, ErrUnknownOutcome, true},
	} {
		err := n.raftError("apply", tt.in)
		if !errors.Is(err, tt.is) || errors.Is(err, ErrUnknownOutcome) != tt.unknown {
			t.Errorf("raftError(%v) = %v, want Is %v (unknown outcome %v)", tt.in, err, tt.is, tt.unknown)
		}
	}

	sub2, _ := n.Subscribe()
	waitTrue(t, sub2)
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if v, ok := <-sub2; !ok || v {
		t.Errorf("subscriber after Close got %v, %v; want false then closed", v, ok)
	}
	if _, ok := <-sub2; ok {
		t.Error("subscription not closed by Close")
	}
	if _, _, err := n.Apply(context.Background(), []byte("set b 2")); !errors.Is(err, ErrClosed) {
		t.Errorf("Apply after Close: %v", err)
	}
	if _, err := n.ReadIndex(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("ReadIndex after Close: %v", err)
	}
	tn.node = nil

	// Restart alone: state is kept, it leads again, data is back.
	if err := tn.open(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tn.close(t) })
	if _, err := tn.node.WaitForLeader(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	ri, err = tn.node.ReadIndex(ctxT(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := tn.node.WaitApplied(ctxT(t, 5*time.Second), ri); err != nil {
		t.Fatal(err)
	}
	if v, _ := tn.fsm.get("a"); v != "1" {
		t.Fatalf("after restart a = %q", v)
	}
}

func TestBootstrapExpectGivesUpWhenCtxEnds(t *testing.T) {
	addrs := freeAddrs(t, 2)
	tn := &testNode{cfg: testConfig(t, "lonely")}
	tn.cfg.BindAddr = addrs[0]
	tn.cfg.BootstrapExpect = 2
	tn.cfg.Join = addrs
	err := tn.open(ctxT(t, 300*time.Millisecond))
	if err == nil {
		tn.close(t)
		t.Fatal("formed a 2-server cluster alone")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want the deadline", err)
	}
}

// waitTrue reads a subscription until it reports leadership.
func waitTrue(t *testing.T, sub <-chan bool) {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case v, ok := <-sub:
			if !ok {
				t.Fatal("subscription closed")
			}
			if v {
				return
			}
		case <-timeout:
			t.Fatal("subscription never reported leadership")
		}
	}
}

// A second process on a data directory in use gets told so, not bbolt's
// bare "timeout". Two opens in one process conflict like two processes:
// bbolt's flock belongs to the open file, not to the process.
func TestOpenOnADataDirInUse(t *testing.T) {
	first := &testNode{cfg: testConfig(t, "first")}
	first.cfg.BootstrapExpect = 1
	if err := first.open(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { first.close(t) })
	second := testConfig(t, "second")
	second.DataDir = first.cfg.DataDir
	n, err := Open(ctxT(t, 10*time.Second), second, newKV())
	if err == nil {
		n.Close()
		t.Fatal("a second Open on a data directory in use succeeded")
	}
	want := "data directory " + first.cfg.DataDir + " is in use by another outpost process (raft.db is locked)"
	if !errors.Is(err, ErrDataDirInUse) || err.Error() != want {
		t.Fatalf("second Open: %v\nwant ErrDataDirInUse saying %q", err, want)
	}
}

func TestCheckDataDir(t *testing.T) {
	tn := &testNode{cfg: testConfig(t, "solo")}
	tn.cfg.BootstrapExpect = 1
	if err := CheckDataDir(tn.cfg.DataDir); err != nil {
		t.Fatalf("CheckDataDir of a new directory: %v", err)
	}
	if err := tn.open(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := CheckDataDir(tn.cfg.DataDir); !errors.Is(err, ErrDataDirInUse) {
		t.Fatalf("CheckDataDir while a node has it open: %v, want ErrDataDirInUse", err)
	}
	tn.close(t)
	if err := CheckDataDir(tn.cfg.DataDir); err != nil {
		t.Fatalf("CheckDataDir after Close: %v", err)
	}
}

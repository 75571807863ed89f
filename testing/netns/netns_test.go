package netns

import (
	"context"
	"net"
	"testing"
	"time"
)

// A host reaches the test side through its link, and not once it is cut.
func TestCutAndRestore(t *testing.T) {
	Require(t)
	h := New(t, 201)
	ln, err := net.Listen("tcp", h.Gateway+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	dial := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		// bash's /dev/tcp dials from inside the namespace without any
		// tool beyond bash.
		return h.Command(ctx, "bash", "-c", "exec 3<>/dev/tcp/"+h.Gateway+"/"+portOf(ln)).Run()
	}
	if err := dial(); err != nil {
		t.Fatalf("dial from the host before the cut: %v", err)
	}
	h.Cut(t)
	if err := dial(); err == nil {
		t.Fatal("the host still reached the test side after the cut")
	}
	h.Restore(t)
	// The link takes a moment to carry traffic again.
	deadline := time.Now().Add(10 * time.Second)
	for err := dial(); err != nil; err = dial() {
		if time.Now().After(deadline) {
			t.Fatalf("dial after restore: %v", err)
		}
	}
}

func portOf(ln net.Listener) string {
	_, p, _ := net.SplitHostPort(ln.Addr().String())
	return p
}

// Open makes a host without a test, and Close removes all of it: the
// namespace and the test side's link; closing again is no error.
func TestOpenClose(t *testing.T) {
	Require(t)
	h, err := Open(202)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	if err := run("ip", "netns", "exec", h.Name, "true"); err != nil {
		t.Fatalf("namespace %s missing after Open: %v", h.Name, err)
	}
	if err := h.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := run("ip", "netns", "exec", h.Name, "true"); err == nil {
		t.Fatalf("namespace %s still there after Close", h.Name)
	}
	if err := run("ip", "link", "show", h.rootIf); err == nil {
		t.Fatalf("link %s still there after Close", h.rootIf)
	}
	if err := h.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := Open(0); err == nil {
		t.Fatal("Open(0) succeeded, want an error naming the range")
	}
}

package agent

import (
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// listenNotify stands in for systemd's notify socket.
func listenNotify(t *testing.T) *net.UnixConn {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify.sock")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	t.Setenv("NOTIFY_SOCKET", path)
	return c
}

func readNotify(t *testing.T, c *net.UnixConn) string {
	t.Helper()
	buf := make([]byte, 256)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := c.Read(buf)
	if err != nil {
		t.Fatalf("no notification: %v", err)
	}
	return string(buf[:n])
}

// Type=notify: READY=1 reaches systemd's socket.
func TestNotifyReady(t *testing.T) {
	c := listenNotify(t)
	NotifyReady(slog.New(slog.DiscardHandler))()
	if got := readNotify(t, c); got != "READY=1" {
		t.Fatalf("got %q", got)
	}
}

// The watchdog is petted while the node loop turns, and not once it is
// stuck, so systemd restarts a hung agent.
func TestWatchdogPetsOnlyWhileAlive(t *testing.T) {
	c := listenNotify(t)
	t.Setenv("WATCHDOG_USEC", "200000") // 200 ms: pets every 100 ms
	a := &Agent{cfg: Config{StatusCheck: 100 * time.Millisecond}, log: slog.New(slog.DiscardHandler)}
	var alive atomic.Int64
	alive.Store(time.Now().UnixNano())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); a.watchdog(ctx, &alive) }()
	if got := readNotify(t, c); !strings.Contains(got, "WATCHDOG=1") {
		t.Fatalf("got %q, want WATCHDOG=1", got)
	}
	// Stuck: the loop stops turning; after the stale bound no more pets.
	alive.Store(time.Now().Add(-time.Hour).UnixNano())
	// Drain pets already in flight, then expect silence.
	buf := make([]byte, 64)
	for n := 0; ; n++ {
		if n > 2 {
			t.Fatal("the watchdog is still petted while the node loop is stuck")
		}
		_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		if _, err := c.Read(buf); err != nil {
			break
		}
	}
	cancel()
	<-done
}

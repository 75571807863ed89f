package agent

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestProcessRole: the child-process server role runs its command, starts
// it again when it exits, and Stop ends it (SPEC CPL-2 on a host without
// systemd).
func TestProcessRole(t *testing.T) {
	dir := t.TempDir()
	pids := filepath.Join(dir, "pids")
	// Each run appends its PID; the first exits at once, the second stays.
	script := `echo $$ >> "$1"; if [ $(wc -l < "$1") -ge 2 ]; then exec sleep 600; fi`
	p := &ProcessRole{Binary: "/bin/sh", LogFile: filepath.Join(dir, "server.log"), Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if err := p.Start(context.Background(), []string{"-c", script, "sh", pids}); err != nil {
		t.Fatal(err)
	}
	var last int
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, _ := os.ReadFile(pids)
		lines := strings.Fields(string(b))
		if len(lines) >= 2 {
			last, _ = strconv.Atoi(lines[len(lines)-1])
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the role was not started again after it exited: pids %q", b)
		}
		time.Sleep(20 * time.Millisecond) // polling, bounded by the deadline
	}
	if err := syscall.Kill(last, 0); err != nil {
		t.Fatalf("the second run (pid %d) is not running: %v", last, err)
	}
	if err := p.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Stop waited for the child: it is gone (reaped), not merely signalled.
	if err := syscall.Kill(last, 0); err == nil {
		t.Errorf("pid %d still runs after Stop", last)
	}
}

// TestServerUnit: the systemd unit installs the agent's binary into the
// self-update layout and runs it from there (UPD-6) with the server's
// arguments, each quoted so systemd passes it unchanged; the good binary
// checks a trial before each start and records each stop.
func TestServerUnit(t *testing.T) {
	var calls []string
	dir := t.TempDir()
	s := &SystemdRole{UnitDir: dir, Binary: "/usr/bin/outpost", systemctl: func(_ context.Context, args ...string) error {
		calls = append(calls, strings.Join(args, " "))
		return nil
	}}
	if err := s.Start(context.Background(), []string{"server", "--id", "h 1", "--data-dir", `/var/lib/o"p%$`}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, ServerUnit))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`ExecStartPre="/usr/bin/outpost" "adm" "binary" "install" "--dir" "/var/lib/outpost/bin"`,
		`ExecStartPre="/var/lib/outpost/bin/good/outpost" "adm" "binary" "check" "--dir" "/var/lib/outpost/bin"`,
		`ExecStart="/var/lib/outpost/bin/current/outpost" "server" "--id" "h 1" "--data-dir" "/var/lib/o\"p%%$$" "--binary-dir" "/var/lib/outpost/bin"`,
		`ExecStopPost="/var/lib/outpost/bin/good/outpost" "adm" "binary" "stopped" "--dir" "/var/lib/outpost/bin"`,
		"Restart=always", "StartLimitIntervalSec=0", "WantedBy=multi-user.target",
	} {
		if !strings.Contains(string(b), want+"\n") {
			t.Errorf("unit:\n%s\nwant the line %s", b, want)
		}
	}
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if strings.Join(calls, "; ") != "daemon-reload; enable --now outpost-server.service; disable --now outpost-server.service" {
		t.Errorf("systemctl calls %q", calls)
	}
}

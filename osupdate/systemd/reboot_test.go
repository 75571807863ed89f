package systemd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/godbus/dbus/v5"
)

func TestBlocking(t *testing.T) {
	const self = 42
	all := []Inhibitor{
		{What: "shutdown", Who: "apt", Mode: "block", PID: 7},
		{What: "sleep:shutdown:idle", Who: "admin", Mode: "block", PID: 8},
		{What: "shutdown", Who: "networkd", Mode: "delay", PID: 9},
		{What: "sleep", Who: "desktop", Mode: "block", PID: 10},
		{What: "shutdownx", Who: "not a what", Mode: "block", PID: 11},
		{What: "shutdown", Who: "agent itself", Mode: "block", PID: self},
	}
	got := blocking(all, self)
	var who []string
	for _, in := range got {
		who = append(who, in.Who)
	}
	if strings.Join(who, ",") != "apt,admin" {
		t.Errorf("blocking: %q, want apt and admin", who)
	}
}

// inhibitors is a fake ListInhibitors whose lock is released at a time.
type inhibitors struct {
	until time.Time // held before
	err   error
	calls int
}

func (f *inhibitors) list(context.Context) ([]Inhibitor, error) {
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
	if time.Now().Before(f.until) {
		return []Inhibitor{{What: "shutdown", Who: "apt", Why: "upgrading", Mode: "block", PID: 7}}, nil
	}
	return nil, nil
}

func TestWaitUnblocked(t *testing.T) {
	errList := errors.New("bus gone")
	for _, tc := range []struct {
		name          string
		hold, timeout time.Duration
		listErr       error
		cancelAfter   time.Duration
		wantWait      time.Duration
		wantErr       error
		wantLog       []string
	}{
		{name: "no lock", hold: 0, timeout: time.Minute, wantWait: 0},
		{name: "released", hold: 3500 * time.Millisecond, timeout: time.Minute, wantWait: 4 * time.Second,
			wantLog: []string{"reboot blocked by an inhibitor lock", "who=apt why=upgrading", "inhibitor locks released"}},
		{name: "timeout", hold: time.Hour, timeout: 2500 * time.Millisecond, wantWait: 2500 * time.Millisecond,
			wantLog: []string{"reboot blocked", "inhibitor lock still held; rebooting anyway", "who=apt"}},
		{name: "no wait", hold: time.Hour, timeout: -1, wantWait: 0,
			wantLog: []string{"still held; rebooting anyway"}},
		{name: "cancelled", hold: time.Hour, timeout: time.Minute, cancelAfter: 1500 * time.Millisecond,
			wantWait: 1500 * time.Millisecond, wantErr: context.Canceled},
		{name: "list fails", listErr: errList, timeout: time.Minute, wantErr: errList},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				if tc.cancelAfter > 0 {
					time.AfterFunc(tc.cancelAfter, cancel)
				}
				var buf bytes.Buffer
				log := slog.New(slog.NewTextHandler(&buf, nil))
				start := time.Now()
				f := &inhibitors{until: start.Add(tc.hold), err: tc.listErr}
				err := waitUnblocked(ctx, f.list, tc.timeout, time.Second, 42, log)
				if !errors.Is(err, tc.wantErr) {
					t.Errorf("error %v, want %v", err, tc.wantErr)
				}
				if waited := time.Since(start); waited != tc.wantWait {
					t.Errorf("waited %s, want %s", waited, tc.wantWait)
				}
				for _, w := range tc.wantLog {
					if !strings.Contains(buf.String(), w) {
						t.Errorf("log lacks %q:\n%s", w, buf.String())
					}
				}
				// A lock held on is logged once, not at each poll.
				if n := strings.Count(buf.String(), "reboot blocked"); n > 1 {
					t.Errorf("logged the same lock %d times:\n%s", n, buf.String())
				}
			})
		})
	}
}

// A reboot call whose connection closed before the reply was taken when
// systemd says it is stopping (CI saw logind's reply lost as the host
// went down, and the fallback then asked twice); a refusal never is.
func TestTookDespite(t *testing.T) {
	dir := t.TempDir()
	systemctl := func(state string) string {
		p := filepath.Join(dir, "systemctl-"+state)
		script := "#!/bin/sh\n[ \"$1\" = is-system-running ] || exit 2\necho " + state + "\n[ " + state + " = running ]\n"
		if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	refused := dbus.Error{Name: "org.freedesktop.DBus.Error.AccessDenied", Body: []any{"no"}}
	for _, tc := range []struct {
		state string
		err   error
		want  bool
	}{
		{"stopping", io.EOF, true},
		{"stopping", fmt.Errorf("read unix @->/run/dbus/system_bus_socket: %w", io.EOF), true},
		{"stopping", refused, false},
		{"running", io.EOF, false},
		{"degraded", errors.New("dbus: connection closed by user"), false},
	} {
		s := &Systemd{opts: Options{Systemctl: systemctl(tc.state)}}
		if got := s.tookDespite(t.Context(), tc.err); got != tc.want {
			t.Errorf("state %s, error %v: took = %v, want %v", tc.state, tc.err, got, tc.want)
		}
	}
}

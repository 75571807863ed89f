package systemd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/godbus/dbus/v5"
)

// logind on the bus.
const (
	login1Dest    = "org.freedesktop.login1"
	login1Path    = dbus.ObjectPath("/org/freedesktop/login1")
	login1Manager = "org.freedesktop.login1.Manager"
)

// The ways Reboot can take, as its log says ("via").
const (
	ViaLogind    = "logind"
	ViaManager   = "systemd manager (start reboot.target)"
	ViaSystemctl = "systemctl reboot"
)

// Inhibitor is one of logind's inhibitor locks, as ListInhibitors gives
// it.
type Inhibitor struct {
	// What is what it inhibits, colon-separated: "shutdown:sleep".
	What string
	// Who and Why are what the holder said about itself.
	Who, Why string
	// Mode is "block" or "delay" ("block-weak" on newer logind).
	Mode     string
	UID, PID uint32
}

// Inhibitors lists logind's inhibitor locks. Without logind on the bus
// it fails with a dbus.Error (org.freedesktop.DBus.Error.ServiceUnknown,
// say).
func (s *Systemd) Inhibitors(ctx context.Context) ([]Inhibitor, error) {
	var list []Inhibitor
	err := s.bus.Object(login1Dest, login1Path).CallWithContext(ctx, login1Manager+".ListInhibitors", 0).Store(&list)
	if err != nil {
		return nil, fmt.Errorf("list inhibitor locks: %w", err)
	}
	return list, nil
}

// Reboot asks for the host to be rebooted and returns once it was asked;
// systemd then stops everything, this process too. reason goes to the
// log.
//
// While logind has a "block" inhibitor lock for shutdown (other than one
// of this process), it waits, polling every InhibitPoll and logging who
// holds the lock and why, for at most InhibitTimeout; then it reboots
// anyway (as root, logind lets it). It asks logind to reboot; if logind is
// not on the bus, or refuses, it asks the systemd manager to start
// reboot.target (replace-irreversibly), and if that fails too it runs
// `systemctl reboot`. The log says which way it took ("via"); the error,
// when none did, has each one's failure.
func (s *Systemd) Reboot(ctx context.Context, reason string) error {
	log := s.log.With("reason", reason)
	var errs []error
	useLogind := true
	err := waitUnblocked(ctx, s.Inhibitors, s.opts.InhibitTimeout, s.opts.InhibitPoll, uint32(os.Getpid()), log)
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("reboot (%s): waiting for inhibitor locks: %w", reason, ctx.Err())
	case err != nil && s.logindGone(ctx):
		// The error says why in words only: ServiceUnknown where it is
		// not installed, a systemd error where its unit will not start.
		log.Info("logind is not available; rebooting through the systemd manager", "error", err)
		errs = append(errs, fmt.Errorf("%s: %w", ViaLogind, err))
		useLogind = false
	case err != nil:
		log.Warn("cannot list logind's inhibitor locks; rebooting without waiting for them", "error", err)
	}

	if useLogind {
		// login1.Conn.Reboot makes this call but drops its error, which
		// is what tells to fall back.
		err := s.bus.Object(login1Dest, login1Path).CallWithContext(ctx, login1Manager+".Reboot", 0, false).Err
		if err == nil || s.tookDespite(ctx, err) {
			log.Info("reboot asked", "via", ViaLogind, "reply", errText(err))
			return nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", ViaLogind, err))
		log.Warn("logind did not take the reboot; trying the systemd manager", "error", err)
	}
	if ctx.Err() != nil {
		return fmt.Errorf("reboot (%s): %w", reason, errors.Join(errs...))
	}

	_, err = s.mgr.StartUnitContext(ctx, "reboot.target", "replace-irreversibly", nil)
	if err == nil || s.tookDespite(ctx, err) {
		log.Info("reboot asked", "via", ViaManager, "reply", errText(err))
		return nil
	}
	errs = append(errs, fmt.Errorf("%s: %w", ViaManager, err))
	log.Warn("the systemd manager did not take the reboot; running systemctl", "error", err)
	if ctx.Err() != nil {
		return fmt.Errorf("reboot (%s): %w", reason, errors.Join(errs...))
	}

	// Inhibitors were waited for above; systemctl must not refuse for
	// them (it checks them when run on a terminal).
	out, err := exec.CommandContext(ctx, s.opts.Systemctl, "reboot", "--ignore-inhibitors").CombinedOutput()
	if err == nil {
		log.Info("reboot asked", "via", ViaSystemctl)
		return nil
	}
	errs = append(errs, fmt.Errorf("%s: %w: %s", ViaSystemctl, err, bytes.TrimSpace(out)))
	return fmt.Errorf("reboot (%s): %w", reason, errors.Join(errs...))
}

// tookDespite reports whether a reboot call that failed with err was
// taken all the same: the bus connection ended before the reply came
// (the shutdown it started stops D-Bus), and systemd says the system is
// stopping. A refusal (a D-Bus error reply) was not taken. Falling back
// after such a call would ask a second time while the host goes down.
func (s *Systemd) tookDespite(ctx context.Context, err error) bool {
	var refused dbus.Error
	if errors.As(err, &refused) || ctx.Err() != nil {
		return false
	}
	// systemctl talks to systemd over its private socket, which outlives
	// the bus while the host stops.
	out, _ := exec.CommandContext(ctx, s.opts.Systemctl, "is-system-running").Output()
	return strings.TrimSpace(string(out)) == "stopping"
}

// errText is err's text for a log line, "ok" without one.
func errText(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// logindGone reports whether logind is not on the bus: nobody owns its
// name (after a call to it failed, so bus activation was tried too).
func (s *Systemd) logindGone(ctx context.Context) bool {
	var owned bool
	err := s.bus.BusObject().CallWithContext(ctx, "org.freedesktop.DBus.NameHasOwner", 0, login1Dest).Store(&owned)
	return err == nil && !owned
}

// waitUnblocked waits while a block inhibitor lock for shutdown, other
// than one of the process self, is held: until none is, or for at most
// timeout (none if it is negative), listing the locks every poll. It
// returns list's error or ctx's.
func waitUnblocked(ctx context.Context, list func(context.Context) ([]Inhibitor, error), timeout, poll time.Duration, self uint32, log *slog.Logger) error {
	start := time.Now()
	var (
		ticker  *time.Ticker
		expired <-chan time.Time
		timeUp  bool
		last    string
	)
	for {
		all, err := list(ctx)
		if err != nil {
			return err
		}
		held := blocking(all, self)
		switch {
		case len(held) == 0:
			if ticker != nil {
				log.Info("inhibitor locks released", "waited", time.Since(start).Round(time.Millisecond))
			}
			return nil
		case timeUp || timeout < 0:
			for _, in := range held {
				log.Warn("inhibitor lock still held; rebooting anyway", inhibitorAttrs(in, time.Since(start), timeout)...)
			}
			return nil
		case ticker == nil:
			ticker = time.NewTicker(poll)
			defer ticker.Stop()
			timer := time.NewTimer(timeout)
			defer timer.Stop()
			expired = timer.C
		}
		if k := key(held); k != last {
			last = k
			for _, in := range held {
				log.Info("reboot blocked by an inhibitor lock; waiting", inhibitorAttrs(in, time.Since(start), timeout)...)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-expired:
			timeUp = true // one more look, then reboot
		case <-ticker.C:
		}
	}
}

// blocking returns the locks that block shutdown, leaving out the
// process self's.
func blocking(all []Inhibitor, self uint32) []Inhibitor {
	var out []Inhibitor
	for _, in := range all {
		if in.Mode == "block" && in.PID != self && slices.Contains(strings.Split(in.What, ":"), "shutdown") {
			out = append(out, in)
		}
	}
	return out
}

// key tells one set of locks from another, to log only changes.
func key(held []Inhibitor) string {
	var b strings.Builder
	for _, in := range held {
		b.WriteString(strconv.FormatUint(uint64(in.PID), 10) + "\x00" + in.Who + "\x00" + in.Why + "\x00")
	}
	return b.String()
}

func inhibitorAttrs(in Inhibitor, waited, timeout time.Duration) []any {
	return []any{"who", in.Who, "why", in.Why, "what", in.What, "pid", in.PID, "uid", in.UID,
		"waited", waited.Round(time.Millisecond), "timeout", timeout}
}

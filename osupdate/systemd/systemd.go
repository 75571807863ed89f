package systemd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"
)

// Defaults of Options.
const (
	DefaultInhibitTimeout = 5 * time.Minute
	DefaultInhibitPoll    = 5 * time.Second
)

// Options configure a Systemd. The zero value is usable.
type Options struct {
	// Logger gets what Reboot waits for and which way it rebooted; nil
	// discards.
	Logger *slog.Logger
	// InhibitTimeout is how long Reboot waits while a block inhibitor lock
	// for shutdown is held before it reboots anyway; 0 means
	// DefaultInhibitTimeout, a negative value does not wait at all.
	InhibitTimeout time.Duration
	// InhibitPoll is how often Reboot looks at the inhibitor locks while
	// one blocks; 0 means DefaultInhibitPoll. Tests shorten it.
	InhibitPoll time.Duration
	// Systemctl is the command Reboot runs when neither logind nor the
	// systemd manager took the reboot; "" means "systemctl" in PATH.
	Systemctl string
}

// Systemd is the host's systemd over the system bus. Its methods may be
// called from several goroutines.
type Systemd struct {
	opts Options
	log  *slog.Logger
	mgr  *sddbus.Conn // systemd's manager (org.freedesktop.systemd1)
	bus  *dbus.Conn   // the bus itself, for logind (org.freedesktop.login1)
}

// New connects to the system bus. ctx bounds the connecting only: the
// connections live until Close.
func New(ctx context.Context, opts Options) (*Systemd, error) {
	if opts.InhibitTimeout == 0 {
		opts.InhibitTimeout = DefaultInhibitTimeout
	}
	if opts.InhibitPoll <= 0 {
		opts.InhibitPoll = DefaultInhibitPoll
	}
	if opts.Systemctl == "" {
		opts.Systemctl = "systemctl"
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Systemd{opts: opts, log: log}

	// godbus closes a connection when the context it was made with ends,
	// so the connections get one that does not; ctx is honoured by not
	// waiting for them past it.
	type conns struct {
		mgr *sddbus.Conn
		bus *dbus.Conn
		err error
	}
	done := make(chan conns, 1)
	go func() {
		life := context.WithoutCancel(ctx)
		mgr, err := sddbus.NewSystemConnectionContext(life)
		if err != nil {
			done <- conns{err: fmt.Errorf("connect to systemd on the system bus: %w", err)}
			return
		}
		bus, err := dbus.ConnectSystemBus(dbus.WithContext(life),
			// As go-systemd does: no user name lookup, no cookie auth.
			dbus.WithAuth(dbus.AuthExternal(strconv.Itoa(os.Getuid()))))
		if err != nil {
			mgr.Close()
			done <- conns{err: fmt.Errorf("connect to the system bus: %w", err)}
			return
		}
		done <- conns{mgr: mgr, bus: bus}
	}()
	select {
	case c := <-done:
		if c.err != nil {
			return nil, c.err
		}
		s.mgr, s.bus = c.mgr, c.bus
		return s, nil
	case <-ctx.Done():
		go func() {
			if c := <-done; c.err == nil {
				c.mgr.Close()
				_ = c.bus.Close()
			}
		}()
		return nil, fmt.Errorf("connect to the system bus: %w", ctx.Err())
	}
}

// Close closes the connections to the bus.
func (s *Systemd) Close() error {
	s.mgr.Close()
	return s.bus.Close()
}

// DaemonReload makes systemd read unit files again, as `systemctl
// daemon-reload` does. It returns when systemd has reloaded.
func (s *Systemd) DaemonReload(ctx context.Context) error {
	if err := s.mgr.ReloadContext(ctx); err != nil {
		return fmt.Errorf("daemon reload: %w", err)
	}
	return nil
}

// EnableUnits enables unit files (names such as "hello.service", found in
// systemd's unit search path: /etc/systemd/system and the others), as
// `systemctl enable` does: the [Install] section's links are made under
// /etc, replacing links to other units where they are in the way, and
// systemd reloads. The units are not started. Units without an [Install]
// section are left as they are, with a warning in the log (systemctl
// warns too). An empty list does nothing.
func (s *Systemd) EnableUnits(ctx context.Context, units []string) error {
	return s.unitFiles(ctx, "enable", units, func() ([]change, error) {
		install, changes, err := s.mgr.EnableUnitFilesContext(ctx, units, false, true)
		if err == nil && !install {
			s.log.Warn("no [Install] section in the unit files: enabling them changed nothing", "units", units)
		}
		return changesOf(changes), err
	})
}

// DisableUnits disables unit files, as `systemctl disable` does, and
// reloads. The units are not stopped. An empty list does nothing.
func (s *Systemd) DisableUnits(ctx context.Context, units []string) error {
	return s.unitFiles(ctx, "disable", units, func() ([]change, error) {
		changes, err := s.mgr.DisableUnitFilesContext(ctx, units, false)
		return changesOf(changes), err
	})
}

// MaskUnits masks units, as `systemctl mask` does: a link to /dev/null
// under /etc/systemd/system, replacing what was there, and reloads. A
// unit file of the same name in /etc/systemd/system is in the way and
// makes it fail, as it does for systemctl. An empty list does nothing.
func (s *Systemd) MaskUnits(ctx context.Context, units []string) error {
	return s.unitFiles(ctx, "mask", units, func() ([]change, error) {
		changes, err := s.mgr.MaskUnitFilesContext(ctx, units, false, true)
		return changesOf(changes), err
	})
}

// UnmaskUnits unmasks units, as `systemctl unmask` does, and reloads.
// Unmasking a unit that is not masked is not an error. An empty list
// does nothing.
func (s *Systemd) UnmaskUnits(ctx context.Context, units []string) error {
	return s.unitFiles(ctx, "unmask", units, func() ([]change, error) {
		changes, err := s.mgr.UnmaskUnitFilesContext(ctx, units, false)
		return changesOf(changes), err
	})
}

// change is one link made or removed by a unit file call; go-systemd has
// a type of the same fields for each call.
type change struct{ Type, Filename, Destination string }

func changesOf[C sddbus.EnableUnitFileChange | sddbus.DisableUnitFileChange | sddbus.MaskUnitFileChange | sddbus.UnmaskUnitFileChange](cs []C) []change {
	out := make([]change, len(cs))
	for i, c := range cs {
		out[i] = change(c)
	}
	return out
}

// unitFiles runs one of the unit file calls and then reloads, as
// systemctl does after each.
func (s *Systemd) unitFiles(ctx context.Context, verb string, units []string, call func() ([]change, error)) error {
	if len(units) == 0 {
		return nil
	}
	names := strings.Join(units, ", ")
	changes, err := call()
	if err != nil {
		return fmt.Errorf("%s units %s: %w", verb, names, err)
	}
	for _, c := range changes {
		s.log.Debug("unit file "+c.Type, "op", verb, "file", c.Filename, "destination", c.Destination)
	}
	if err := s.mgr.ReloadContext(ctx); err != nil {
		return fmt.Errorf("%s units %s: daemon reload: %w", verb, names, err)
	}
	return nil
}

// ReloadUnit reloads a unit, as `systemctl reload` does, and waits for
// the job: an error when systemd reports it other than done (a unit
// without ExecReload, a reload command that fails).
func (s *Systemd) ReloadUnit(ctx context.Context, unit string) error {
	return s.job(ctx, "reload", unit, func(ch chan<- string) (int, error) {
		return s.mgr.ReloadUnitContext(ctx, unit, "replace", ch)
	})
}

// RestartUnit restarts a unit, starting it when it is not running, as
// `systemctl restart` does, and waits for the job.
func (s *Systemd) RestartUnit(ctx context.Context, unit string) error {
	return s.job(ctx, "restart", unit, func(ch chan<- string) (int, error) {
		return s.mgr.RestartUnitContext(ctx, unit, "replace", ch)
	})
}

func (s *Systemd) job(ctx context.Context, verb, unit string, start func(chan<- string) (int, error)) error {
	ch := make(chan string, 1) // go-systemd sends the result once, and must not block
	if _, err := start(ch); err != nil {
		return fmt.Errorf("%s %s: %w", verb, unit, err)
	}
	select {
	case res := <-ch:
		if res != "done" {
			return fmt.Errorf("%s %s: the job ended %s (see journalctl -u %s)", verb, unit, res, unit)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s %s: %w", verb, unit, ctx.Err())
	}
}

// ActiveState returns the unit's ActiveState: "active", "reloading",
// "inactive", "failed", "activating" or "deactivating". A unit systemd
// does not know is "inactive", as systemd says, not an error.
func (s *Systemd) ActiveState(ctx context.Context, unit string) (string, error) {
	return s.stringProperty(ctx, unit, "ActiveState", "active state")
}

// stringProperty is the unit's property name, a string.
func (s *Systemd) stringProperty(ctx context.Context, unit, name, what string) (string, error) {
	p, err := s.mgr.GetUnitPropertyContext(ctx, unit, name)
	if err != nil {
		return "", fmt.Errorf("%s of %s: %w", what, unit, err)
	}
	v, ok := p.Value.Value().(string)
	if !ok {
		return "", fmt.Errorf("%s of %s: %w: %s is %s", what, unit, errBadReply, name, p.Value.Signature())
	}
	return v, nil
}

// errBadReply is a reply of a type the D-Bus API does not give.
var errBadReply = errors.New("unexpected D-Bus reply")

// StartUnit starts a unit, as `systemctl start` does, and waits for the
// job: for a Type=notify service, until it said READY=1.
func (s *Systemd) StartUnit(ctx context.Context, unit string) error {
	return s.job(ctx, "start", unit, func(ch chan<- string) (int, error) {
		return s.mgr.StartUnitContext(ctx, unit, "replace", ch)
	})
}

// StopUnit stops a unit, as `systemctl stop` does, and waits for the job.
func (s *Systemd) StopUnit(ctx context.Context, unit string) error {
	return s.job(ctx, "stop", unit, func(ch chan<- string) (int, error) {
		return s.mgr.StopUnitContext(ctx, unit, "replace", ch)
	})
}

// KillUnit sends signal to every process left in the unit's cgroup, as
// `systemctl kill --kill-whom=all` does: what KillMode=process left
// running when the unit stopped. A unit with no process left, or not
// loaded at all, is not an error.
func (s *Systemd) KillUnit(ctx context.Context, unit string, signal syscall.Signal) error {
	var dbe dbus.Error
	err := s.mgr.KillUnitWithTarget(ctx, unit, sddbus.All, int32(signal))
	if err == nil || (errors.As(err, &dbe) && (strings.HasSuffix(dbe.Name, ".NoSuchProcess") || strings.HasSuffix(dbe.Name, ".NoSuchUnit"))) {
		return nil
	}
	return fmt.Errorf("kill %s: %w", unit, err)
}

// UnitFileState returns the unit file's state as `systemctl is-enabled`
// says it: "enabled", "disabled", "static", "masked", or "" for a unit
// systemd has no file of.
func (s *Systemd) UnitFileState(ctx context.Context, unit string) (string, error) {
	return s.stringProperty(ctx, unit, "UnitFileState", "unit file state")
}

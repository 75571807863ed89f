package osupdate

import (
	"context"
	"errors"
)

// Systemd is what an update needs of the host's systemd. The real one
// (package osupdate/systemd) speaks D-Bus through go-systemd; tests use a
// fake.
type Systemd interface {
	// DaemonReload makes systemd read unit files again.
	DaemonReload(ctx context.Context) error
	// EnableUnits, DisableUnits, MaskUnits and UnmaskUnits change unit
	// files' install state, as systemctl enable/disable/mask/unmask do
	// (without --now: the reboot starts what is enabled).
	EnableUnits(ctx context.Context, units []string) error
	DisableUnits(ctx context.Context, units []string) error
	MaskUnits(ctx context.Context, units []string) error
	UnmaskUnits(ctx context.Context, units []string) error
	// ReloadUnit and RestartUnit reload or (re)start a unit and wait for
	// the job: an error says it failed (a config takes effect without a
	// reboot through them).
	ReloadUnit(ctx context.Context, unit string) error
	RestartUnit(ctx context.Context, unit string) error
	// ActiveState is a unit's ActiveState ("active", "failed", ...).
	ActiveState(ctx context.Context, unit string) (string, error)
	// Reboot asks systemd to reboot the host, respecting block inhibitor
	// locks for at most the given wait (logind), then forcing it. It
	// returns once the reboot is under way; the process is then stopped
	// by systemd.
	Reboot(ctx context.Context, reason string) error
}

// OSState is what a host boots: its OS version (as its backend names it,
// matching a MachineConfig's osImageURL) and its kernel arguments.
type OSState struct {
	Version    string
	KernelArgs []string
}

// Backend stages an OS image and kernel arguments for the next boot and
// tells what the current boot runs. Implementations: bootc and rpm-ostree
// (command adapters) and an A/B directory backend (the tests').
type Backend interface {
	// Name is the backend's name, for messages ("bootc").
	Name() string
	// Booted is the OS the host runs now.
	Booted(ctx context.Context) (OSState, error)
	// Stage makes the next boot run want. Staging what runs already is
	// not an error.
	Stage(ctx context.Context, want OSState) error
}

// ErrNotSupported is a backend asked to do what it cannot (the none
// backend asked to change the OS image).
var ErrNotSupported = errors.New("not supported by this OS backend")

// Checker is a Backend that can tell, before anything is touched, that
// it cannot stage an OS (the none backend and a new image; bootc and
// kernel arguments): the update is refused without a cordon or a drain.
type Checker interface {
	CanStage(want OSState) error
}

// Rollbacker is a Backend that keeps the previous deployment and boots
// it again without fetching anything (bootc rollback, rpm-ostree
// rollback); others stage the previous OS.
type Rollbacker interface {
	Rollback(ctx context.Context, prev OSState) error
}

package osupdate

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Step is how far an update has got on this host; each is recorded before
// the action that follows it.
type Step string

const (
	// StepStarted: the node is to be marked Working and cordoned.
	StepStarted Step = "Started"
	// StepCordoned: the node is to be drained.
	StepCordoned Step = "Cordoned"
	// StepDrained: the config is to be written (backups are in the record
	// before the first write) and the OS staged.
	StepDrained Step = "Drained"
	// StepWritten: the host is to reboot (or, with nothing to reboot
	// for, to be checked).
	StepWritten Step = "Written"
	// StepRebooting: a reboot was asked from BootID; a later boot is to
	// be checked.
	StepRebooting Step = "Rebooting"
	// StepBooted: the new boot is to be verified and health-checked.
	StepBooted Step = "Booted"
	// StepRestoring: the update failed its check (Reason); the previous
	// files, units and OS are to be put back.
	StepRestoring Step = "Restoring"
	// StepRollingBack: the previous files, units and OS are back and a
	// reboot was asked from BootID; a later boot reports Degraded.
	StepRollingBack Step = "RollingBack"
)

// Record is an update in progress, as the Journal keeps it.
type Record struct {
	// Desired is the rendered config being applied; Previous the one the
	// node ran (its currentConfig, maybe empty).
	Desired  string `json:"desired,omitempty"`
	Previous string `json:"previous,omitempty"`
	Step     Step   `json:"step,omitempty"`
	// StepAt is when Step was recorded: each step's time goes to the log
	// ("update step"), across the reboot too.
	StepAt time.Time `json:"stepAt,omitzero"`
	// BootID is the boot a reboot was asked from (BootID()).
	BootID string `json:"bootID,omitempty"`
	// Backups are what the write replaced, to restore on rollback.
	Backups []Backup `json:"backups,omitempty"`
	// PrevOS is what the host booted before the update.
	PrevOS OSState `json:"prevOS"`
	// Plan is what the update does here: drain, reboot, or take the
	// config up without (decided at the start).
	Plan Plan `json:"plan,omitzero"`
	// Reason is why a rollback began.
	Reason string `json:"reason,omitempty"`
	// Reboots counts reboots asked for this update (a loop guard).
	Reboots int `json:"reboots,omitempty"`
	// Failed is the last config that failed on this host and was rolled
	// back: it is not tried again (the pool renders a new one).
	Failed string `json:"failed,omitempty"`
}

// Backup is a path as it was before the update wrote it: its bytes and
// mode, or that it did not exist.
type Backup struct {
	Path    string      `json:"path"`
	Existed bool        `json:"existed"`
	Mode    os.FileMode `json:"mode,omitempty"`
	Data    []byte      `json:"data,omitempty"`
	// Link is the target when the path was a symbolic link
	// (/etc/resolv.conf, a unit masked to /dev/null).
	Link string `json:"link,omitempty"`
	UID  int    `json:"uid"`
	GID  int    `json:"gid"`
}

// Journal keeps the Record across agent restarts and reboots; the agent
// keeps it in its bbolt state file, synced before Save returns.
type Journal interface {
	Load() (Record, error)
	Save(Record) error
}

// ErrNoBootID is a run directory where the boot's ID cannot be kept.
var ErrNoBootID = errors.New("no boot ID")

// BootID identifies the current boot by a random ID kept in runDir
// (/run/outpost on a host: /run is a fresh tmpfs every boot, so a new
// boot has no ID yet and gets a new one). The kernel's boot ID is no use
// here: under systemd-nspawn it does not change when the container
// reboots.
func BootID(runDir string) (string, error) {
	p := filepath.Join(runDir, "boot-id")
	if b, err := os.ReadFile(p); err == nil && len(strings.TrimSpace(string(b))) > 0 {
		return strings.TrimSpace(string(b)), nil
	}
	if err := os.MkdirAll(runDir, 0o700); err != nil {
		return "", fmt.Errorf("%w: %w", ErrNoBootID, err)
	}
	buf := make([]byte, 16)
	_, _ = rand.Read(buf)
	id := hex.EncodeToString(buf)
	// Another process of this boot may have written one meanwhile: the
	// first one written wins.
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return BootID(runDir)
	}
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrNoBootID, err)
	}
	defer f.Close()
	if _, err := f.WriteString(id + "\n"); err != nil {
		return "", fmt.Errorf("%w: %w", ErrNoBootID, err)
	}
	return id, nil
}

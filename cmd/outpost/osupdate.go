package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/outpost-edge/outpost/agent"
	"github.com/outpost-edge/outpost/osupdate"
	"github.com/outpost-edge/outpost/osupdate/systemd"
)

// osUpdateFlags choose how the agent applies its pool's MachineConfigs
// (SPEC UPD-8).
type osUpdateFlags struct {
	mode, backend, backendDir, root string
}

var osBackends = []string{"none", "directory", "bootc", "rpm-ostree"}

func (o *osUpdateFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.mode, "os-updates", "auto",
		"apply the node's MachineConfig (files, units, OS image, kernel arguments; cordon, drain, reboot through systemd, roll back on a failed check): "+
			"on, off, or auto (on when the host booted with systemd and the agent runs as root)")
	f.StringVar(&o.backend, "os-backend", "none",
		"what stages a config's OS image and kernel arguments: none (a config that changes them is refused), bootc, rpm-ostree, or directory (an A/B tree under --os-backend-dir, for tests and appliances)")
	f.StringVar(&o.backendDir, "os-backend-dir", "", "the directory backend's slots (default DATA-DIR/os)")
	f.StringVar(&o.root, "os-root", "/", "where a config's files are written (tests)")
	_ = f.MarkHidden("os-root")
}

// check is every problem of the flags, with nothing connected.
func (o *osUpdateFlags) check() error {
	var errs []error
	if !slices.Contains(osBackends, o.backend) {
		errs = append(errs, fmt.Errorf("--os-backend %q: want one of %v", o.backend, osBackends))
	}
	if !slices.Contains([]string{"on", "off", "auto"}, o.mode) {
		errs = append(errs, fmt.Errorf("--os-updates %q: want on, off or auto", o.mode))
	}
	return errors.Join(errs...)
}

// apply connects to systemd and sets cfg's updater parts; the returned
// function closes the connection.
func (o *osUpdateFlags) apply(ctx context.Context, cfg *agent.Config, log *slog.Logger) (func(), error) {
	nothing := func() {}
	if err := o.check(); err != nil {
		return nil, err
	}
	systemdBooted := func() bool { _, err := os.Stat("/run/systemd/system"); return err == nil }
	switch o.mode {
	case "off":
		return nothing, nil
	case "auto":
		if !systemdBooted() || os.Geteuid() != 0 {
			log.Info("config updates off: the host did not boot with systemd or the agent is not root (--os-updates on to insist)")
			return nothing, nil
		}
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	sd, err := systemd.New(cctx, systemd.Options{Logger: log.With("component", "systemd")})
	if err != nil {
		return nil, fmt.Errorf("--os-updates %s: %w", o.mode, err)
	}
	runDir := "/run/outpost"
	switch o.backend {
	case "none":
		cfg.OSBackend = osupdate.NoneBackend{}
	case "directory":
		dir := o.backendDir
		if dir == "" {
			dir = filepath.Join(cfg.DataDir, "os")
		}
		cfg.OSBackend = &osupdate.DirBackend{Dir: dir, BootID: func() (string, error) { return osupdate.BootID(runDir) }}
	default:
		managed := filepath.Join(cfg.DataDir, "kernel-args")
		cfg.OSBackend = &osupdate.ImageBackend{Tool: o.backend, Managed: func() []string { return readLines(managed) }, SetManaged: func(a []string) error { return writeLines(managed, a) }}
	}
	cfg.OSSystemd, cfg.OSRoot, cfg.OSRunDir = sd, o.root, runDir
	return func() { _ = sd.Close() }, nil
}

// readLines and writeLines keep the kernel arguments outpost added, one
// per line.
func readLines(p string) []string {
	b, err := os.ReadFile(p)
	if err != nil {
		return nil
	}
	return strings.Fields(string(b))
}

func writeLines(p string, lines []string) error {
	return os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600)
}

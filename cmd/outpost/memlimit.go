package main

import (
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/outpost-edge/outpost/internal/memlimit"
	"github.com/outpost-edge/outpost/runtime/cgroups"
)

// memoryLimitFlag is --memory-limit of the server and dev roles.
type memoryLimitFlag struct {
	value string
	spec  memlimit.Spec
}

func (m *memoryLimitFlag) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&m.value, "memory-limit", memlimit.Auto, memlimit.FlagUsage)
}

// check parses the flag; config lists its error with the others.
func (m *memoryLimitFlag) check() error {
	spec, err := memlimit.Parse("--memory-limit", m.value)
	m.spec = spec
	return err
}

// apply sets the runtime's soft limit. A cgroup it cannot read leaves
// none, with a warning: the process runs as it would have without one.
func (m *memoryLimitFlag) apply(log *slog.Logger) {
	l, err := m.spec.Resolve(os.Getenv, cgroups.FS{})
	if err != nil {
		log.Warn("no soft memory limit: the cgroup's limit cannot be read", "err", err)
		return
	}
	memlimit.Apply(l)
	log.Info("soft memory limit", "limit", l.String())
}

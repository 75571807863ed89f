// Command outpost is the one binary of outpost: `outpost server` runs a
// control-plane member, `outpost dev` a one-process cluster, and every other
// subcommand is the CLI. main only wires flags to packages.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/outpost-edge/outpost/agent/sim"
	"github.com/outpost-edge/outpost/controlplane/cli"
	"github.com/outpost-edge/outpost/runtime/containerd"
)

func main() {
	// containerd's shims start this binary to write containers' logs.
	containerd.RunLogWriterIfAsked()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Execute(ctx, newRootCommand())
	stop()
	os.Exit(code)
}

// newRootCommand is the whole command tree: the CLI's and the commands
// that run a server, an agent or both.
func newRootCommand() *cobra.Command {
	root := cli.NewRootCommand()
	root.AddCommand(newServerCommand(), newDevCommand(), newAgentCommand(), sim.Command(), newInstallCommand(), newUninstallCommand())
	addAdmCommands(root)
	return root
}

package cli

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/outpost-edge/outpost/controlplane/client"
)

func newLogsCommand(o *options) *cobra.Command {
	var opts client.PodLogOptions
	tail := -1
	cmd := &cobra.Command{
		Use:   "logs POD [-c CONTAINER] [-f] [--tail N] [--timestamps] [--previous]",
		Short: "Print the output of a container in a pod",
		Long: "logs prints what a container of a pod wrote to stdout and stderr, as the node's agent\n" +
			"keeps it. The API server finds the pod's node and streams the output from its agent, so\n" +
			"the node must be reachable from the control plane. A pod with one container needs no\n" +
			"-c; for a pod with several, -c names the one to read. --previous reads the container's\n" +
			"previous attempt (before its last restart), which is where a crash usually shows.",
		Example: `  outpost logs web-6d4b9-x2x7q
  outpost logs web-6d4b9-x2x7q -c sidecar --tail 20
  outpost logs -f pod/web-6d4b9-x2x7q --timestamps
  outpost logs deployment/web        # one of its pods, a ready one first
  outpost logs web-6d4b9-x2x7q --previous -n shop`,
		Args: exactArgs(1, "one pod name, e.g. `outpost logs web-1`"),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case tail == 0:
				return usagef("--tail 0 is not supported: give 1 or more lines, or -1 for all")
			case tail < -1:
				return usagef("--tail must be -1 (all lines) or a number of lines")
			case tail > 0:
				opts.TailLines = tail
			}
			if opts.Follow && opts.Previous {
				return usagef("--follow and --previous cannot be given together: a previous container has exited")
			}
			cl, err := o.client(cmd)
			if err != nil {
				return err
			}
			name, err := podTarget(cmd.Context(), cl, args[0], cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			rc, err := cl.PodLogs(cmd.Context(), cl.Namespace(), name, opts)
			if err != nil {
				return err
			}
			defer rc.Close()
			if _, err := io.Copy(cmd.OutOrStdout(), rc); err != nil {
				if cmd.Context().Err() != nil {
					// Ctrl-C ends a follow; that is not a failure.
					return nil
				}
				return fmt.Errorf("reading the log stream: %w", err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&opts.Container, "container", "c", "", "the container to read (default: the pod's only container)")
	f.BoolVarP(&opts.Follow, "follow", "f", false, "keep printing new output until the container exits or Ctrl-C")
	f.IntVar(&tail, "tail", -1, "print only the last N lines first (-1: all)")
	f.BoolVar(&opts.Timestamps, "timestamps", false, "prefix every line with the time it was written (RFC 3339)")
	f.BoolVarP(&opts.Previous, "previous", "p", false, "read the container's previous attempt, before its last restart")
	return cmd
}

// exitCodeError is an exit code other than 1 that a command asks for: a
// remote command's non-zero exit code, which becomes the CLI's own, or
// diff's code for a failure. Execute prints its message (kubectl's note
// on the remote command, unless msg says otherwise) and nothing more.
type exitCodeError struct {
	code int
	msg  string
}

func (e *exitCodeError) Error() string {
	if e.msg != "" {
		return e.msg
	}
	return fmt.Sprintf("command terminated with exit code %d", e.code)
}

// ExitCode returns the exit code err asks for, and whether it asks for
// one.
func exitCodeOf(err error) (int, bool) {
	if e, ok := errors.AsType[*exitCodeError](err); ok {
		return e.code, true
	}
	return 0, false
}

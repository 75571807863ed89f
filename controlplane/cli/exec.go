package cli

import (
	"github.com/spf13/cobra"

	"github.com/outpost-edge/outpost/controlplane/client"
)

func newExecCommand(o *options) *cobra.Command {
	var (
		container string
		stdin     bool
		tty       bool
	)
	cmd := &cobra.Command{
		Use:   "exec POD [-c CONTAINER] [-i] -- COMMAND [ARGS...]",
		Short: "Run a command in a container of a pod",
		Long: "exec runs COMMAND with ARGS in a running container of a pod, through the API server and\n" +
			"the agent of the pod's node, and prints its stdout and stderr as they come. With -i this\n" +
			"command's stdin is sent to the command until it ends (end a terminal's input with Ctrl-D).\n" +
			"The command's exit code becomes outpost's own, so scripts can test it.\n\n" +
			"There is no -t: outpost does not allocate a terminal, so full-screen programs and shells\n" +
			"that need one do not work; `exec -i POD -- sh` still gives a plain interactive shell.",
		Example: `  outpost exec web-6d4b9-x2x7q -- ls /data
  outpost exec web-6d4b9-x2x7q -c sidecar -- cat /etc/os-release
  outpost exec deployment/web -- ls /   # in one of its pods
  echo 'select 1;' | outpost exec -i db-0 -- sqlite3 /data/app.db`,
		Args: func(cmd *cobra.Command, args []string) error {
			if tty {
				return usagef("outpost exec has no -t (no terminal is allocated): use -i alone, e.g. `outpost exec -i POD -- sh`")
			}
			if cmd.ArgsLenAtDash() != 1 || len(args) < 2 {
				return usagef("expected POD -- COMMAND [ARGS...], e.g. `outpost exec web-1 -- ls /`")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := o.client(cmd)
			if err != nil {
				return err
			}
			name, err := podTarget(cmd.Context(), cl, args[0], cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			opts := client.ExecOptions{
				Container: container,
				Command:   args[1:],
				Stdout:    cmd.OutOrStdout(),
				Stderr:    cmd.ErrOrStderr(),
			}
			if stdin {
				opts.Stdin = cmd.InOrStdin()
			}
			code, err := cl.Exec(cmd.Context(), cl.Namespace(), name, opts)
			if err != nil {
				return err
			}
			if code != 0 {
				return &exitCodeError{code: code}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&container, "container", "c", "", "the container to run in (default: the pod's only container)")
	f.BoolVarP(&stdin, "stdin", "i", false, "send this command's stdin to the remote command")
	// Accepted only to refuse it with the reason: kubectl users type -it.
	f.BoolVarP(&tty, "tty", "t", false, "not supported: no terminal is allocated")
	_ = f.MarkHidden("tty")
	return cmd
}

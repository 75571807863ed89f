package cli

import (
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/spf13/cobra"

	"github.com/outpost-edge/outpost/controlplane/scheduler/policy"
)

func newSchedulerCommand() *cobra.Command {
	sched := &cobra.Command{
		Use:   "scheduler",
		Short: "Work with scheduler policies",
	}
	pol := &cobra.Command{
		Use:   "policy",
		Short: "Check scheduler policy files",
	}
	check := &cobra.Command{
		Use:   "check FILE",
		Short: "Check a scheduler policy file and print what it enables",
		Long: "check reads a scheduler policy (kind: Policy, JSON or YAML) as\n" +
			"`outpost server --scheduler-policy FILE` would, and prints the predicates in the order\n" +
			"they run, with their arguments, the priorities with their weights, and warnings about\n" +
			"what may surprise. A file that would be refused exits 1 with every problem listed.\n" +
			"It needs no server. FILE - reads standard input.",
		Example: `  outpost adm scheduler policy check /etc/outpost/scheduler-policy.yaml
  outpost adm scheduler policy check - < policy.json`,
		Args: exactArgs(1, "one policy file (- for standard input)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			file := args[0]
			var (
				data []byte
				err  error
			)
			if file == "-" {
				data, err = io.ReadAll(cmd.InOrStdin())
			} else {
				data, err = os.ReadFile(file)
			}
			if err != nil {
				return fmt.Errorf("read the policy: %w", err)
			}
			p, warns, err := policy.Parse(data)
			stderr := cmd.ErrOrStderr()
			if err != nil {
				// Warnings about what was read (ignored lines, a
				// guessed format) help explain the refusal.
				for _, w := range warns {
					printWarning(stderr, w)
				}
				return fmt.Errorf("%s: %w", file, err)
			}
			out := cmd.OutOrStdout()
			fmt.Fprint(out, policy.Describe(p))
			// Describe lists the warnings about the policy itself; the
			// rest are about how the file was read.
			own := policy.Warnings(p)
			var rest []string
			for _, w := range warns {
				if !slices.Contains(own, w) {
					rest = append(rest, w)
				}
			}
			if len(rest) > 0 {
				fmt.Fprintln(out, "Notes on the file:")
				for _, w := range rest {
					fmt.Fprintln(out, "  "+w)
				}
			}
			fmt.Fprintf(out, "%s: valid\n", file)
			return nil
		},
	}
	pol.AddCommand(check)
	sched.AddCommand(pol)
	return sched
}

package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/outpost-edge/outpost/selfupdate"
)

// defaultBinaryDir is where a host keeps its outpost binaries.
const defaultBinaryDir = "/var/lib/outpost/bin"

// newBinaryCommand is `adm binary`: this host's outpost binaries and
// their self-update (SPEC UPD-6). None of it needs a server; check and
// stopped are run by systemd around every start of the service.
func newBinaryCommand() *cobra.Command {
	var dir string
	bin := &cobra.Command{
		Use:   "binary",
		Short: "Install, check and inspect this host's outpost binaries (self-update)",
		Long: `A server or an agent updates its own binary: it stages the new one by digest, makes it
current, and is restarted on it by systemd, on trial. Once healthy it marks itself good;
a binary that does not is rolled back to the good one, because the good binary runs before
every start of the service and after every stop:

  ExecStartPre=DIR/good/outpost adm binary check --dir DIR
  ExecStart=DIR/current/outpost server ...
  ExecStopPost=DIR/good/outpost adm binary stopped --dir DIR

DIR (--dir) holds every binary as versions/<sha256>/outpost, and the links current and good.
'install' puts the binary there on a new host; 'status' says where the host stands.`,
	}
	bin.PersistentFlags().StringVar(&dir, "dir", defaultBinaryDir, "directory of the binaries: versions/, current, good")
	bin.AddCommand(newBinaryInstallCommand(&dir), newBinaryCheckCommand(&dir), newBinaryStoppedCommand(&dir),
		newBinaryStatusCommand(&dir), newBinaryMarkGoodCommand(&dir), newBinaryRollbackCommand(&dir))
	return bin
}

func newBinaryInstallCommand(dir *string) *cobra.Command {
	var exe string
	cmd := &cobra.Command{
		Use:   "install [--exe PATH]",
		Short: "Put this binary under --dir, as current and good on a new host",
		Long: `install copies the binary (this one, or --exe) to DIR/versions/<sha256>/outpost. On a host
without DIR/current it becomes current and good, for the systemd unit to start; otherwise
it is only kept there, and the current binary stays. Run it again at will.`,
		Example: `  outpost adm binary install
  outpost adm binary install --exe ./outpost --dir /var/lib/outpost/bin`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if exe == "" {
				self, err := os.Executable()
				if err != nil {
					return fmt.Errorf("this binary's path: %w (give --exe)", err)
				}
				exe = self
			}
			before, err := selfupdate.Read(*dir)
			if err != nil {
				return err
			}
			d, err := selfupdate.Install(*dir, exe)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			switch before.Current {
			case "":
				fmt.Fprintf(out, "installed %s as current and good in %s\n", d, *dir)
			case d:
				fmt.Fprintf(out, "%s already installed\n", d)
			default:
				fmt.Fprintf(out, "%s kept in %s; current is still %s\n", d, filepath.Join(*dir, "versions"), before.Current)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&exe, "exe", "", "the binary to install (default: this one)")
	return cmd
}

func newBinaryCheckCommand(dir *string) *cobra.Command {
	return &cobra.Command{
		Use:   "check",
		Short: "Count a start of the binary on trial, and roll it back when it has had its chances (ExecStartPre)",
		Long: `check is systemd's ExecStartPre, run by the good binary. During a trial it counts the start;
after the trial's starts or past its deadline it makes the good binary current again, so
that this start runs it, records why in DIR/last-failure.json and prints that on standard
error. It exits 0 even when it cannot do its work, after saying why: a failing
ExecStartPre would keep the service from starting at all.`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := selfupdate.Check(*dir, time.Now())
			if err != nil {
				printWarning(cmd.ErrOrStderr(), err.Error()+"; starting anyway")
				return nil
			}
			if f != nil {
				fmt.Fprintln(cmd.ErrOrStderr(), f.Reason)
			}
			return nil
		},
	}
}

func newBinaryStoppedCommand(dir *string) *cobra.Command {
	return &cobra.Command{
		Use:   "stopped",
		Short: "Record how the binary on trial stopped (ExecStopPost)",
		Long: `stopped is systemd's ExecStopPost, run by the good binary: it records $SERVICE_RESULT,
$EXIT_CODE and $EXIT_STATUS, which systemd sets, for the reason of a rollback. Without a
trial it does nothing. It exits 0 even when it cannot record, after saying why.`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			err := selfupdate.Stopped(*dir, os.Getenv("SERVICE_RESULT"), os.Getenv("EXIT_CODE"), os.Getenv("EXIT_STATUS"))
			if err != nil {
				printWarning(cmd.ErrOrStderr(), err.Error())
			}
			return nil
		},
	}
}

func newBinaryStatusCommand(dir *string) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the current and good binaries, the trial in progress and the last failure",
		Example: `  sudo outpost adm binary status
  sudo outpost adm binary status -o json`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := selfupdate.Read(*dir)
			if err != nil {
				return err
			}
			switch output {
			case "json":
				b, err := json.MarshalIndent(st, "", "  ")
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s\n", b)
				return err
			case "":
				return printBinaryStatus(cmd.OutOrStdout(), *dir, st)
			default:
				return usagef("--output %q: give json or nothing", output)
			}
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "json for the whole of it")
	return cmd
}

// printBinaryStatus writes st for people.
func printBinaryStatus(out io.Writer, dir string, st selfupdate.Status) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "Directory:\t%s\n", dir)
	if st.Current == "" && st.Good == "" {
		fmt.Fprintf(tw, "Current:\t%s\t(nothing installed: outpost adm binary install)\n", none)
	} else {
		fmt.Fprintf(tw, "Current:\t%s\n", orNone(st.Current))
	}
	fmt.Fprintf(tw, "Good:\t%s\n", orNone(st.Good))
	if t := st.Trial; t == nil {
		fmt.Fprintf(tw, "Trial:\t%s\n", none)
	} else {
		fmt.Fprintf(tw, "Trial:\t%s\n", versionDigest(t.Version, t.Digest))
		fmt.Fprintf(tw, "  From:\t%s\n", versionDigest(t.FromVersion, t.From))
		fmt.Fprintf(tw, "  Started:\t%s\n", t.Started.UTC().Format(time.RFC3339))
		maxStarts := t.MaxStarts
		if maxStarts <= 0 {
			maxStarts = selfupdate.DefaultMaxStarts
		}
		fmt.Fprintf(tw, "  Starts:\t%d/%d\n", t.Starts, maxStarts)
		deadline := none
		if !t.Deadline.IsZero() {
			deadline = t.Deadline.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "  Deadline:\t%s\n", deadline)
		fmt.Fprintf(tw, "  Last exit:\t%s\n", orNone(t.LastExit))
	}
	if f := st.Failure; f == nil {
		fmt.Fprintf(tw, "Last failure:\t%s\n", none)
	} else {
		fmt.Fprintf(tw, "Last failure:\t%s\t%s\n", f.At.UTC().Format(time.RFC3339), f.Reason)
	}
	return tw.Flush()
}

// versionDigest is "1.3.0 sha256:...", or the digest alone.
func versionDigest(version, digest string) string {
	if version == "" {
		return digest
	}
	return version + " " + digest
}

func newBinaryMarkGoodCommand(dir *string) *cobra.Command {
	return &cobra.Command{
		Use:   "mark-good",
		Short: "End the trial in success: the binary on trial becomes the good one",
		Long: `mark-good makes the binary on trial the good one, as it does itself once healthy. Without a
trial it does nothing.`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := selfupdate.Read(*dir)
			if err != nil {
				return err
			}
			if st.Trial == nil {
				fmt.Fprintln(cmd.OutOrStdout(), "no trial in progress: nothing to mark good")
				return nil
			}
			if err := selfupdate.MarkGood(*dir); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s marked good\n", st.Trial.Digest)
			return nil
		},
	}
}

func newBinaryRollbackCommand(dir *string) *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "rollback [--reason TEXT]",
		Short: "End the trial in failure: the good binary becomes current again",
		Long: `rollback makes the good binary current again and records the trial's failure with --reason.
The binary on trial keeps running until the service restarts: restart it
(systemctl restart) to run the good one.`,
		Example: `  outpost adm binary rollback --reason "raft never caught up" && systemctl restart outpost-server`,
		Args:    exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := selfupdate.Read(*dir)
			if err != nil {
				return err
			}
			if st.Trial == nil {
				fmt.Fprintln(cmd.OutOrStdout(), "no trial in progress: nothing to roll back")
				return nil
			}
			why := versionDigest(st.Trial.Version, st.Trial.Digest) + " rolled back by hand"
			if reason != "" {
				why += ": " + reason
			}
			if err := selfupdate.Abort(*dir, "outpost "+why, time.Now()); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s rolled back to %s; restart the service to run it\n", st.Trial.Digest, st.Good)
			return nil
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why, for the failure record")
	return cmd
}

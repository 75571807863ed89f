package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/outpost-edge/outpost/agent"
	"github.com/outpost-edge/outpost/internal/install"
)

// newInstallCommand is `outpost install server|agent` (issue 15 item 1):
// the role's flags are the flags of `outpost server` or `outpost agent`
// (parsed here, so a mistake is said now, not in the journal), put in
// /etc/outpost/ROLE.env for the unit.
func newInstallCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "install server|agent [flags]",
		Short: "Install this host's outpost server or agent as a systemd service",
		Long: `Install outpost on this host as a systemd service and start it: the unit
(outpost-server.service or outpost-agent.service; a package ships both), the
role's flags in /etc/outpost/ROLE.env, the cluster secret or the join string in
a file only root reads. The service is enabled and started through systemd's
D-Bus API, and install waits until the server's API is ready or the agent's
node is Ready.

Running it again with the same flags changes nothing; with other flags it
rewrites the configuration and restarts the service. The role's flags are
checked as "outpost server" or "outpost agent" checks them when it starts, and
every problem refuses the install, a dry run's too. --dry-run prints every file
it would write. It refuses, saying why, when it is not run as root, when
systemd is not PID 1, or when a port the role listens on is taken.

"outpost uninstall" stops and removes what install did.`,
		Example: `  # The first server of a new cluster (a cluster secret is made):
  sudo outpost install server --bootstrap-expect 1
  # An agent, with a join string from "outpost adm token create --role node":
  sudo outpost install agent --server https://10.0.0.1:6443 --token-file ./join`,
	}
	server, serverCheck := newServerRole()
	agent, agentCheck := newAgentRole()
	cmd.AddCommand(newInstallRoleCommand(install.Server, server, serverCheck), newInstallRoleCommand(install.Agent, agent, agentCheck), newUnitFilesCommand())
	return cmd
}

// installExamples are the Example blocks of install server and install
// agent.
var installExamples = map[install.Role]string{
	install.Server: `  # The first server of a new cluster (a cluster secret is made):
  sudo outpost install server --bootstrap-expect 1
  # One of three, with the secret the others have:
  sudo outpost install server --bootstrap-expect 3 --join 10.0.0.2:6444,10.0.0.3:6444 \
      --cluster-secret-file ./cluster-secret
  # What it would write, changing nothing:
  outpost install server --dry-run`,
	install.Agent: `  # The join string comes from "outpost adm token create --role node":
  sudo outpost install agent --server https://10.0.0.1:6443 --token-file ./join
  sudo outpost install agent --server https://10.0.0.1:6443 --token-file ./join \
      --labels topology.kubernetes.io/zone=shop-3
  outpost install agent --server https://10.0.0.1:6443 --token-file ./join --dry-run`,
}

// installFlags are install's own flags, beside the role's.
type installFlags struct {
	dryRun     bool
	timeout    time.Duration
	secretFile string
	// check is the role's check of its flags (roleCheck).
	check roleCheck
}

// withheld are role flags install does not pass on: secrets on the
// command line (ps shows them; install takes a file), and what the unit
// fixes.
var withheld = map[string]string{
	"cluster-secret": "it would show in ps: give --cluster-secret-file FILE (or OUTPOST_CLUSTER_SECRET)",
	"token":          "it would show in ps: give --token-file FILE (or OUTPOST_JOIN)",
	"binary-dir":     "the installed unit runs from its own (outpost adm binary --help)",
}

func newInstallRoleCommand(role install.Role, runner *cobra.Command, check roleCheck) *cobra.Command {
	f := installFlags{check: check}
	cmd := &cobra.Command{
		Use:   string(role) + " [flags]",
		Short: "Install and start outpost-" + string(role) + ".service with " + runner.CommandPath() + "'s flags",
		Long: "Install and start outpost-" + string(role) + ".service; every flag but --dry-run, --timeout and\n" +
			"the secret's file is the flag of \"outpost " + string(role) + "\" (see outpost " + string(role) + " --help).",
		Example: installExamples[role],
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o, err := installOptions(role, runner, cmd, &f)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if f.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, f.timeout)
				defer cancel()
			}
			out := cmd.OutOrStdout()
			progress := install.NewProgress(out, out == os.Stdout && install.IsTerminal(os.Stdout.Fd()))
			in := &install.Installer{Sys: install.Host{}, Connect: install.ConnectSystemd, Out: out,
				Wait: func(ctx context.Context, sd install.Systemd, o install.Options) error {
					return install.WaitReady(ctx, sd, o, progress)
				}}
			if f.timeout == 0 {
				in.Wait = nil
			}
			return in.Install(ctx, o)
		},
	}
	fs := cmd.Flags()
	fs.BoolVar(&f.dryRun, "dry-run", false, "check the flags as the role would, print the binary install would copy, the files it would write and the unit it would start, and change nothing")
	fs.DurationVar(&f.timeout, "timeout", 5*time.Minute, "how long to wait for the server's API to be ready or the agent's node to be Ready (0: do not wait)")
	switch role {
	case install.Server:
		fs.StringVar(&f.secretFile, "cluster-secret-file", "", "file with the cluster secret every server shares (default: OUTPOST_CLUSTER_SECRET, else the installed one, else a new one); copied to "+install.SecretFile)
	case install.Agent:
		fs.StringVar(&f.secretFile, "token-file", "", "file with the join string from \"outpost adm token create --role node\" (default: OUTPOST_JOIN, else the installed one); needed until the agent has joined")
	}
	runner.Flags().VisitAll(func(fl *pflag.Flag) {
		if fs.Lookup(fl.Name) == nil {
			fs.AddFlag(fl)
		}
	})
	for name := range withheld {
		if fs.Lookup(name) != nil && (role == install.Agent || name != "token") {
			_ = fs.MarkHidden(name)
		}
	}
	return cmd
}

// installOptions turns the command line into install.Options: the role's
// flags given, checked as the role would check them, and the secret.
func installOptions(role install.Role, runner *cobra.Command, cmd *cobra.Command, f *installFlags) (install.Options, error) {
	bin, err := os.Executable()
	if err == nil {
		bin, err = filepath.EvalSymlinks(bin)
	}
	if err != nil {
		return install.Options{}, fmt.Errorf("this binary's path: %w", err)
	}
	o := install.Options{Role: role, Binary: bin, DryRun: f.dryRun}
	var errs []error
	cmd.Flags().Visit(func(fl *pflag.Flag) {
		if runner.Flags().Lookup(fl.Name) != fl {
			return // install's own
		}
		if why, ok := withheld[fl.Name]; ok {
			errs = append(errs, fmt.Errorf("--%s: %s", fl.Name, why))
			return
		}
		o.Args = append(o.Args, flagArgs(fl)...)
	})
	if err := errors.Join(errs...); err != nil {
		return o, err
	}
	if role == install.Server && !cmd.Flags().Changed("join") && !cmd.Flags().Changed("bootstrap-expect") {
		// Neither joining nor forming a cluster of several: the first
		// server of a cluster of one (more join it later).
		o.Args = append(o.Args, "--bootstrap-expect=1")
	}
	if role == install.Agent && !cmd.Flags().Changed("gossip-port") && installedHere(install.Server) {
		// The server of this host has the gossip port both default to
		// (a cluster of one host runs both).
		port := strconv.Itoa(agent.DefaultGossipPort + 1)
		fmt.Fprintf(cmd.OutOrStdout(), "this host runs outpost-server.service, whose gossip pool has port %d: the agent's gets --gossip-port=%s\n", agent.DefaultGossipPort, port)
		o.Args = append(o.Args, "--gossip-port="+port)
		if err := runner.Flags().Set("gossip-port", port); err != nil {
			return o, err
		}
	}
	o.Secret, err = readSecret(role, f.secretFile)
	if err != nil {
		return o, err
	}
	get := func(name string) string { return runner.Flags().Lookup(name).Value.String() }
	if role == install.Server && get("data-dir") == "" {
		// The unit gives the server this one.
		if err := runner.Flags().Set("data-dir", role.DataDir()); err != nil {
			return o, err
		}
	}
	o.DataDir = get("data-dir")
	if f.check != nil {
		o.Check = func(secret string) error { return f.check(cmd, secret) }
	}
	o.Ports, err = rolePorts(role, get)
	return o, err
}

// installedHere reports whether outpost install put the role on this
// host.
func installedHere(r install.Role) bool {
	_, err := os.Stat(r.EnvFile())
	return err == nil
}

// flagArgs is fl as --name=value words, one per value of a list flag
// given several times.
func flagArgs(fl *pflag.Flag) []string {
	if sv, ok := fl.Value.(pflag.SliceValue); ok && strings.HasSuffix(fl.Value.Type(), "Array") {
		var out []string
		for _, v := range sv.GetSlice() {
			out = append(out, "--"+fl.Name+"="+v)
		}
		return out
	}
	return []string{"--" + fl.Name + "=" + fl.Value.String()}
}

// readSecret reads the secret's file, or the role's variable.
func readSecret(role install.Role, file string) (string, error) {
	flag, env := "--cluster-secret-file", "OUTPOST_CLUSTER_SECRET"
	if role == install.Agent {
		flag, env = "--token-file", install.JoinVar
	}
	if file == "" {
		return strings.TrimSpace(os.Getenv(env)), nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("%s: %w", flag, err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", fmt.Errorf("%s %s is empty", flag, file)
	}
	return s, nil
}

// rolePorts are the ports the role will listen on, as its flags say.
func rolePorts(role install.Role, get func(string) string) ([]install.Port, error) {
	var ports []install.Port
	tcp := func(addr, flag string) { ports = append(ports, install.Port{Network: "tcp", Addr: addr, Flag: flag}) }
	both := func(addr, flag string) {
		tcp(addr, flag)
		ports = append(ports, install.Port{Network: "udp", Addr: addr, Flag: flag})
	}
	switch role {
	case install.Server:
		tcp(get("api-addr"), "--api-addr")
		tcp(get("raft-addr"), "--raft-addr")
		if g := get("gossip-addr"); g != "" {
			both(g, "--gossip-addr")
		} else {
			host, _, err := net.SplitHostPort(get("raft-addr"))
			if err != nil {
				return nil, fmt.Errorf("--raft-addr %q: want host:port", get("raft-addr"))
			}
			both(net.JoinHostPort(host, get("gossip-port")), "--gossip-port")
		}
	case install.Agent:
		tcp(get("listen"), "--listen")
		both(net.JoinHostPort("", get("gossip-port")), "--gossip-port")
	}
	var errs []error
	for _, p := range ports {
		_, port, err := net.SplitHostPort(p.Addr)
		if n, perr := strconv.Atoi(port); err != nil || perr != nil || n <= 0 || n > 65535 {
			errs = append(errs, fmt.Errorf("%s %q: want host:port with a port, 1-65535", p.Flag, p.Addr))
		}
	}
	return ports, errors.Join(errs...)
}

// newUnitFilesCommand writes the units as the packages ship them (make
// package), rendered for the packaged binary's path.
func newUnitFilesCommand() *cobra.Command {
	bin := install.PackagedBinary
	cmd := &cobra.Command{
		Use:    "unit-files DIR",
		Short:  "Write the systemd units for a package into DIR",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := os.MkdirAll(args[0], 0o755); err != nil {
				return err
			}
			for _, r := range install.Roles {
				if err := os.WriteFile(filepath.Join(args[0], r.Unit()), []byte(install.Unit(r, bin)), 0o644); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&bin, "binary", bin, "the binary's path on the hosts")
	return cmd
}

func newUninstallCommand() *cobra.Command {
	var purge, dryRun bool
	cmd := &cobra.Command{
		Use:   "uninstall [server|agent]",
		Short: "Stop and remove this host's outpost services and their configuration",
		Long: `Stop and disable outpost-server.service and outpost-agent.service (or the one
named), stop what the agent left running (its containerd and pods), and remove
the units "outpost install" wrote and /etc/outpost's files, and the binary it
copied to /usr/local/bin once neither role is left. The data
(/var/lib/outpost: the raft log, the node's credential, images) stays unless
--purge. A unit or binary a package installed stays until the package is
removed. --dry-run says what it would stop, disable and remove.`,
		Example: `  sudo outpost uninstall --dry-run
  sudo outpost uninstall
  sudo outpost uninstall agent
  sudo outpost uninstall --purge`,
		Args:      cobra.MaximumNArgs(1),
		ValidArgs: []string{string(install.Server), string(install.Agent)},
		RunE: func(cmd *cobra.Command, args []string) error {
			roles := install.Roles
			if len(args) == 1 {
				r := install.Role(args[0])
				if r != install.Server && r != install.Agent {
					return fmt.Errorf("%q: want server or agent", args[0])
				}
				roles = []install.Role{r}
			}
			in := &install.Installer{Sys: install.Host{}, Connect: install.ConnectSystemd, Out: cmd.OutOrStdout()}
			return in.Uninstall(cmd.Context(), roles, purge, dryRun)
		},
	}
	cmd.Flags().BoolVar(&purge, "purge", false, "remove the data under /var/lib/outpost too")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print what it would stop, disable and remove, and change nothing")
	return cmd
}

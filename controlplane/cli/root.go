package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/outpost-edge/outpost/controlplane/client"
)

// Errors of this package.
var (
	// ErrNoServer is a command that needs the API without a server
	// configured anywhere. Its message says how to get a configuration.
	ErrNoServer = errors.New("no server configured: run `outpost dev` (it writes " +
		"~/.config/outpost/config), ask your administrator for a client configuration, " +
		"or pass --server and --token")
	// errReported is returned by a command that has printed its errors
	// itself (apply and delete report every failure as it happens); the
	// process still exits 1.
	errReported = errors.New("errors were reported")
	// errBadJSON is a reply that is not the JSON it should be.
	errBadJSON = errors.New("reply is not valid JSON")
	// errParse is a manifest file that is not YAML or JSON objects.
	errParse = errors.New("error parsing")
	// errNoObjects is a -f whose files hold no object at all.
	errNoObjects = errors.New("no objects passed to")
	// errInvalidTaint is a taint argument of `taint` that breaks SPEC
	// TNT-1; the message names the rule.
	errInvalidTaint = errors.New("invalid taint spec")
	// errPrecondition is a --current-replicas of `scale` that does not
	// hold.
	errPrecondition = errors.New("precondition failed")
	// errTimedOut is `rollout status --timeout` running out.
	errTimedOut = errors.New("timed out waiting for the condition")
	// errProgressDeadline is a deployment whose controller gave up on the
	// rollout (condition Progressing, reason ProgressDeadlineExceeded).
	errProgressDeadline = errors.New("exceeded its progress deadline")
	// errNoHistory is an undo of a deployment with no earlier revision.
	errNoHistory = errors.New("no rollout history found")
	// errNoRevision is an undo or history --revision naming a revision
	// no ReplicaSet of the deployment has.
	errNoRevision = errors.New("unable to find the specified revision")
	// errPaused is an undo of a paused deployment.
	errPaused = errors.New("cannot roll back a paused deployment")
	// errNoStatus is rollout status on a kind or strategy that has no
	// rollout to follow.
	errNoStatus = errors.New("rollout status is not available")
)

// usageError is a mistake in the command line; it is printed with a hint
// to the command's help.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// options are the global flags and what is built from them once per run.
type options struct {
	server     string
	token      string
	configPath string
	namespace  string
	// namespaces is every value -n/--namespace was given, in order:
	// the last one is the namespace of requests, as in kubectl, but
	// `adm token create` takes them all.
	namespaces []string
	insecure   bool
	timeout    time.Duration

	// now is the clock for ages and token expiry; tests fix it.
	now func() time.Time

	cl *client.Client
	// tokenFrom names where cl's token came from ("" when it has none),
	// for the hint after the server refuses it.
	tokenFrom string
}

// NewRootCommand returns the `outpost` command with every CLI verb. The
// caller adds other subcommands (server, dev) and runs it with Execute,
// which prints errors the way users of kubectl expect.
func NewRootCommand() *cobra.Command {
	return newRootCommand(&options{now: time.Now})
}

func newRootCommand(o *options) *cobra.Command {
	root := &cobra.Command{
		Use:   "outpost",
		Short: "outpost runs and manages small Kubernetes-shaped edge clusters",
		Long: "outpost runs a raft-replicated, Kubernetes-shaped control plane for small edge clusters.\n" +
			"`outpost server` runs it, `outpost agent` runs each host's pods through containerd\n" +
			"(`outpost dev`: both in one process on this machine; `outpost sim agents`: simulated\n" +
			"nodes); the other commands are the CLI.",
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	pf := root.PersistentFlags()
	pf.StringVar(&o.server, "server", "", "API server URL (overrides the config file and $OUTPOST_SERVER)")
	pf.StringVar(&o.token, "token", "", "bearer token (overrides the config file and $OUTPOST_TOKEN)")
	pf.StringVar(&o.configPath, "config", "", "client configuration file (default $OUTPOST_CONFIG, else ~/.config/outpost/config)")
	pf.VarP(&namespaceFlag{o: o}, "namespace", "n", "namespace of the request (default from the config file, else \"default\")")
	pf.BoolVar(&o.insecure, "insecure", false, "allow a plain http:// server URL (credentials travel unencrypted)")
	pf.DurationVar(&o.timeout, "request-timeout", 0, "give up on a request after this long (0: never); watches are not bounded")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &usageError{msg: err.Error()}
	})
	root.AddCommand(
		newGetCommand(o),
		newDescribeCommand(o),
		newApplyCommand(o),
		newCreateCommand(o),
		newDeleteCommand(o),
		newLabelCommand(o, labelKind),
		newLabelCommand(o, annotationKind),
		newEditCommand(o),
		newPatchCommand(o),
		newEventsCommand(o),
		newScaleCommand(o),
		newRolloutCommand(o),
		// taint, cordon and uncordon live under adm as in oc; kubectl
		// users find them at the top level.
		newTaintCommand(o),
		newCordonCommand(o, true),
		newCordonCommand(o, false),
		newDrainCommand(o),
		newAdmCommand(o),
		// logs, exec and image import stream through the nodes' agents.
		newLogsCommand(o),
		newExecCommand(o),
		newImageCommand(o),
		newTopCommand(o),
		newVersionCommand(o),
		newManCommand(),
		newAPIResourcesCommand(o),
		newExplainCommand(o),
		newSetCommand(o),
		newRunCommand(o),
		newWaitCommand(o),
		newDiffCommand(o),
		newCpCommand(o),
		newPortForwardCommand(o),
	)
	registerCompletions(root, o)
	return root
}

// refuseUnknownSubcommands makes every command that only groups others
// (adm, adm token, rollout, ...) fail on an argument that names none of
// them. Cobra checks unknown subcommands of the root only: `outpost adm
// drain` printed adm's help and exited 0, which a script takes for done.
// Without arguments a group still prints its help.
func refuseUnknownSubcommands(c *cobra.Command) {
	for _, sub := range c.Commands() {
		refuseUnknownSubcommands(sub)
	}
	if c == c.Root() || !c.HasSubCommands() || c.Runnable() {
		return
	}
	if c.SuggestionsMinimumDistance <= 0 {
		c.SuggestionsMinimumDistance = 2
	}
	c.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return cmd.Help()
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
		if sugg := cmd.SuggestionsFor(args[0]); len(sugg) > 0 {
			msg += "; did you mean " + strings.Join(sugg, " or ") + "?"
		}
		return &usageError{msg: msg}
	}
}

// Execute runs root with ctx and returns the process's exit code: 0; the
// remote command's code after a failed `exec`; or 1 after printing the
// error to root's stderr as one line,
// `Error from server (NotFound): pods "x" not found` for errors the server
// sent and `error: ...` for others, with a help hint for usage mistakes.
func Execute(ctx context.Context, root *cobra.Command) int {
	refuseUnknownShells(root)
	refuseUnknownSubcommands(root)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return 0
	}
	if errors.Is(err, errReported) {
		return 1
	}
	if code, ok := exitCodeOf(err); ok {
		// exec: the remote command's exit code is outpost's, with
		// kubectl's note on stderr.
		fmt.Fprintln(root.ErrOrStderr(), err.Error())
		return code
	}
	w := root.ErrOrStderr()
	fmt.Fprintln(w, FormatError(err))
	if s, ok := statusOf(err); ok && s.Code() == http.StatusUnauthorized {
		// The namespace flag's value holds the run's options.
		if nf, ok := root.PersistentFlags().Lookup("namespace").Value.(*namespaceFlag); ok {
			fmt.Fprintln(w, nf.o.unauthorizedHint())
		}
	}
	if isUsageError(err) {
		if cmd == nil {
			cmd = root
		}
		fmt.Fprintf(w, "See '%s --help' for usage.\n", cmd.CommandPath())
	}
	return 1
}

// isUsageError reports whether err is a command-line mistake, ours or
// cobra's (whose unknown-command error has no type of its own).
func isUsageError(err error) bool {
	if _, ok := errors.AsType[*usageError](err); ok {
		return true
	}
	msg := err.Error()
	return strings.HasPrefix(msg, "unknown command") || strings.HasPrefix(msg, "unknown flag") ||
		strings.HasPrefix(msg, "unknown shorthand flag") || strings.Contains(msg, "arg(s)")
}

// FormatError renders err as the CLI prints it. Errors from the server
// carry their reason, as kubectl shows them.
func FormatError(err error) string {
	if err == nil {
		return ""
	}
	if s, ok := statusOf(err); ok {
		if s.Status.Reason != "" {
			return fmt.Sprintf("Error from server (%s): %s", s.Status.Reason, err.Error())
		}
		return "Error from server: " + err.Error()
	}
	return "error: " + err.Error()
}

// client builds the API client from the config file, the environment and
// the flags, in rising precedence, once per run.
func (o *options) client(cmd *cobra.Command) (*client.Client, error) {
	if o.cl != nil {
		return o.cl, nil
	}
	cfg, err := client.LoadConfig(o.configPath)
	if err != nil {
		return nil, err
	}
	cfg = o.applyFlags(cfg)
	if cfg.Server == "" {
		if o.configPath == "" {
			if err := client.MissingConfigFile(); err != nil {
				return nil, err
			}
		}
		return nil, ErrNoServer
	}
	cl, err := client.New(cfg)
	if err != nil {
		return nil, err
	}
	stderr := cmd.ErrOrStderr()
	cl.SetWarningHandler(func(text string) { printWarning(stderr, text) })
	o.cl = cl
	switch {
	case cfg.Token == "":
	case o.token != "":
		o.tokenFrom = "--token"
	case os.Getenv(client.EnvToken) != "":
		o.tokenFrom = "$" + client.EnvToken
	case o.configPath != "":
		o.tokenFrom = o.configPath
	default:
		o.tokenFrom = client.DefaultConfigPath()
	}
	return cl, nil
}

// unauthorizedHint is the line after the server refused the run's token,
// as kubectl's "You must be logged in to the server": which token was
// refused, and how to get one.
func (o *options) unauthorizedHint() string {
	const get = "an administrator creates one with `outpost adm token create`"
	if o.tokenFrom == "" {
		return "You must be logged in to the server: no token was given (--token, $" + client.EnvToken + " or the config file's token); " + get + "."
	}
	return "You must be logged in to the server: the token from " + o.tokenFrom + " was refused; " + get + "."
}

// applyFlags lays the command-line flags over a loaded configuration.
func (o *options) applyFlags(cfg client.Config) client.Config {
	if o.server != "" {
		cfg.Server = o.server
	}
	if o.token != "" {
		cfg.Token = o.token
	}
	if o.namespace != "" {
		cfg.Namespace = o.namespace
	}
	if o.insecure {
		cfg.Insecure = true
	}
	if o.timeout > 0 {
		cfg.Timeout = o.timeout
	}
	return cfg
}

// namespaceFlag is the value of -n/--namespace. It keeps every value it
// is given, so that the flag can be repeated where a command takes
// several namespaces, while reading like a plain string flag elsewhere.
type namespaceFlag struct{ o *options }

func (f *namespaceFlag) String() string { return f.o.namespace }

func (f *namespaceFlag) Set(v string) error {
	f.o.namespace = v
	f.o.namespaces = append(f.o.namespaces, v)
	return nil
}

func (f *namespaceFlag) Type() string { return "string" }

func printWarning(w io.Writer, text string) {
	fmt.Fprintf(w, "Warning: %s\n", text)
}

// exactArgs, minArgs and rangeArgs are cobra's argument checks with
// errors that Execute recognises as usage mistakes.
func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("expected %s", what)
		}
		return nil
	}
}

func minArgs(n int, what string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) < n {
			return usagef("expected %s", what)
		}
		return nil
	}
}

package sim

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/outpost-edge/outpost/controlplane/client"
)

// ErrNoServer is a command without a server configured anywhere.
var ErrNoServer = errors.New("no server configured: run `outpost dev` (it writes " +
	"~/.config/outpost/config), use an admin configuration (DATA-DIR/admin.conf) with --config, " +
	"or pass --server and --token")

// connFlags are the connection flags of every `sim` command, named and
// read as the CLI's global flags are, so that `outpost --server X sim ...`
// and `outpost sim ... --server X` both work.
type connFlags struct {
	server, token, config string
	insecure              bool
	timeout               time.Duration
}

func (f *connFlags) register(cmd *cobra.Command) {
	fs := cmd.PersistentFlags()
	fs.StringVar(&f.server, "server", "", "API server URL (overrides the config file and $OUTPOST_SERVER)")
	fs.StringVar(&f.token, "token", "", "bearer token of a cluster admin (overrides the config file and $OUTPOST_TOKEN)")
	fs.StringVar(&f.config, "config", "", "client configuration file (default $OUTPOST_CONFIG, else ~/.config/outpost/config)")
	fs.BoolVar(&f.insecure, "insecure", false, "allow a plain http:// server URL (credentials travel unencrypted)")
	fs.DurationVar(&f.timeout, "request-timeout", 0, "give up on a request after this long (0: never); watches are not bounded")
}

// clientConfig loads the configuration file and the environment and lays
// the flags over them, as the CLI does.
func (f *connFlags) clientConfig() (client.Config, error) {
	cfg, err := client.LoadConfig(f.config)
	if err != nil {
		return client.Config{}, err
	}
	if f.server != "" {
		cfg.Server = f.server
	}
	if f.token != "" {
		cfg.Token = f.token
	}
	if f.insecure {
		cfg.Insecure = true
	}
	if f.timeout > 0 {
		cfg.Timeout = f.timeout
	}
	if cfg.Server == "" {
		if f.config == "" {
			if err := client.MissingConfigFile(); err != nil {
				return client.Config{}, err
			}
		}
		return client.Config{}, ErrNoServer
	}
	return cfg, nil
}

// Command returns `sim`, with `agents`, `silence` and `resume`.
func Command() *cobra.Command {
	var cf connFlags
	sim := &cobra.Command{
		Use:   "sim",
		Short: "Simulated nodes for tests, demos and scale runs",
		Long: "sim runs many simulated node agents in one process (`sim agents`) and makes chosen\n" +
			"nodes go quiet and come back (`sim silence`, `sim resume`). Every command needs a\n" +
			"cluster-admin configuration.",
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	cf.register(sim)
	sim.AddCommand(agentsCommand(&cf), silenceCommand(&cf, true), silenceCommand(&cf, false))
	return sim
}

const agentsLong = `agents registers the Node objects of a file and runs a simulated agent for each, all in
this process. Each node is a real API client with a credential of its own (a node Token,
made with the admin configuration and stored by its hash only): it registers its Node with
the file's labels, taints, capacity, allocatable and conditions, plus the labels a real agent
sets (kubernetes.io/hostname = the node's name, kubernetes.io/os, kubernetes.io/arch); it
sends a heartbeat every --heartbeat (jittered; the heartbeat call, which costs no raft write,
and its whole status only when the stored node is not Ready or every 5 minutes); and it marks the pods bound to it Running
and Ready, with a pod IP from a fake per-node range (no container runs anywhere).

--count N stamps out N copies of each Node of the file, numbered: a Node "worker" with
--count 3 runs as worker-0001, worker-0002 and worker-0003 (zero-padded to at least four
digits, more if N needs them). Without --count the names of the file are used as they are.
Missing capacity defaults to 4 CPU, 32Gi of memory and 110 pods; missing allocatable is the
capacity; missing conditions are those of a healthy node (Ready=True).

Silencing: a node goes quiet (no heartbeats, no pod updates) when its annotation
sim.outpost.io/silenced becomes "true" (` + "`outpost sim silence NODE...`" + `) and resumes when it is
removed (` + "`outpost sim resume NODE...`" + `). SIGUSR1 silences every node of this process and
SIGUSR2 resumes them all; a later change of a node's annotation switches it again.

Restarts: node credentials are derived from the admin token, so a restarted simulation
finds and reuses them. Nodes that exist already are taken over: the file's labels and
taints are put back (others are kept) and the status is reported again; a node silenced
by its annotation stays quiet.

SIGINT or SIGTERM stops the agents. The nodes stay registered: with no heartbeats they
look like hosts that went away. Delete them with ` + "`outpost delete node NAME...`" + `.

An example nodes file (see also examples/sim/nodes.yaml):

  apiVersion: v1
  kind: Node
  metadata:
    name: worker
    labels:
      topology.kubernetes.io/region: eu-west
      topology.kubernetes.io/zone: eu-west-1a
      rack: r1
  status:
    capacity: {cpu: "8", memory: 64Gi, pods: "110"}
    allocatable: {cpu: 7500m, memory: 62Gi, pods: "110"}
  ---
  apiVersion: v1
  kind: Node
  metadata:
    name: gpu
  spec:
    taints:
    - {key: dedicated, value: gpu, effect: NoSchedule}
  status:
    conditions:
    - {type: MemoryPressure, status: "True", reason: KubeletHasInsufficientMemory}`

func agentsCommand(cf *connFlags) *cobra.Command {
	var (
		file      string
		count     int
		heartbeat time.Duration
		// statusEvery: the old heartbeat (a status write each).
		statusEvery  bool
		pods         bool
		workers      int
		quiet        bool
		update       time.Duration
		binaryUpdate time.Duration
	)
	cmd := &cobra.Command{
		Use:   "agents -f nodes.yaml [--count N]",
		Short: "Run simulated agents for the Nodes of a file",
		Long:  agentsLong,
		Example: `  outpost sim agents -f examples/sim/nodes.yaml
  outpost sim agents -f examples/sim/nodes.yaml --count 1000 --heartbeat 30s
  outpost sim agents -f nodes.yaml --count 5000 --pods=false   # scheduler benchmarks
  kill -USR1 $(pidof outpost)                                   # every node goes quiet`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return errors.New("-f/--filename is required: a file of Node manifests")
			}
			nodes, warns, err := ReadNodesFile(file)
			if err != nil {
				return err
			}
			stderr := cmd.ErrOrStderr()
			for _, w := range warns {
				fmt.Fprintf(stderr, "Warning: %s\n", w)
			}
			ccfg, err := cf.clientConfig()
			if err != nil {
				return err
			}
			level := slog.LevelInfo
			if quiet {
				level = slog.LevelWarn
			}
			cfg := Config{
				Client:      ccfg,
				Nodes:       nodes,
				Count:       count,
				Heartbeat:   heartbeat,
				DisablePods: !pods,
				Workers:     workers,
				// A config update each node plays (UPD-8).
				UpdateDuration: update,
				// A binary update each node's agent plays (UPD-6).
				BinaryUpdateDuration: binaryUpdate,

				StatusEveryHeartbeat: statusEvery,
				Logger:               slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})),
				Progress:             stderr,
			}
			return runAgents(cmd, cfg, stderr)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&file, "filename", "f", "", "file of Node manifests (YAML, --- separated, or JSON)")
	f.IntVar(&count, "count", 0, "run this many numbered copies of each Node of the file (name-0001...)")
	f.DurationVar(&heartbeat, "heartbeat", DefaultHeartbeat, "interval of each node's heartbeat (jittered by ±10%)")
	f.BoolVar(&statusEvery, "status-every-heartbeat", false, "post each node's whole status at every heartbeat (a raft write each), as agents did before the heartbeat call; for comparing")
	f.BoolVar(&pods, "pods", true, "mark pods bound to the nodes Running; --pods=false leaves them Pending")
	f.IntVar(&workers, "workers", DefaultWorkers, "writes in flight at most, for each of registration, heartbeats and pods")
	f.BoolVarP(&quiet, "quiet", "q", false, "log only warnings (not each node going quiet or resuming)")
	f.DurationVar(&binaryUpdate, "binary-update-duration", 0, "play agent binary updates: a node the cluster version controller names a binary downloads it from the API and, this long later (its simulated restart), reports the version (0: agents say they cannot replace their binary)")
	f.DurationVar(&update, "update-duration", 0, "play config updates: a node its pool gives a desiredConfig reports Working and cordons itself, and this long later (its simulated apply and reboot) Done (0: nodes ignore configs)")
	return cmd
}

// runAgents runs the simulation until SIGINT or SIGTERM (or the command's
// context ends), switching every node on SIGUSR1 and SIGUSR2.
func runAgents(cmd *cobra.Command, cfg Config, stderr io.Writer) error {
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	usr := make(chan os.Signal, 1)
	if silenceSignal != nil {
		signal.Notify(usr, silenceSignal, resumeSignal)
		defer signal.Stop(usr)
	}
	a, err := Start(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "%d nodes running\n", len(a.Names()))
	for {
		select {
		case <-ctx.Done():
			a.Stop()
			fmt.Fprintf(stderr, "stopped; the %d nodes stay registered\n", len(a.Names()))
			return nil
		case s := <-usr:
			if s == silenceSignal {
				_ = a.Silence(a.Names()...) // every name is ours
				fmt.Fprintf(stderr, "%v: %d nodes silenced\n", s, len(a.Names()))
			} else {
				_ = a.Resume(a.Names()...)
				fmt.Fprintf(stderr, "%v: %d nodes resumed\n", s, len(a.Names()))
			}
		}
	}
}

func silenceCommand(cf *connFlags, silenced bool) *cobra.Command {
	verb, done, short := "silence", "silenced", "Make simulated nodes go quiet: no heartbeats, no pod updates"
	long := "silence sets the annotation " + SilencedAnnotation + "=true on the Nodes through the API.\n" +
		"The `outpost sim agents` process running them sees it and stops their heartbeats and pod\n" +
		"updates: to the control plane they look like hosts that went away. `outpost sim resume`\n" +
		"brings them back."
	if !silenced {
		verb, done, short = "resume", "resumed", "Make silenced simulated nodes heartbeat again"
		long = "resume removes the annotation " + SilencedAnnotation + " from the Nodes through the API.\n" +
			"The `outpost sim agents` process running them sees it and heartbeats for them again at once."
	}
	return &cobra.Command{
		Use:     verb + " NODE...",
		Short:   short,
		Long:    long,
		Example: "  outpost sim " + verb + " worker-0001 worker-0002",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return errors.New("expected the names of one or more nodes")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ccfg, err := cf.clientConfig()
			if err != nil {
				return err
			}
			cl, err := client.New(ccfg)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			return SetSilenced(cmd.Context(), cl, silenced, args, func(name string) {
				fmt.Fprintf(out, "node/%s %s\n", name, done)
			})
		},
	}
}

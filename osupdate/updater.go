package osupdate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// Cluster is what an update needs of the control plane, through the
// node's own credential.
type Cluster interface {
	// Node is this host's Node as the API has it now.
	Node(ctx context.Context) (*api.Node, error)
	// UpdateNode reads the Node, applies fn and writes it back, again
	// on a conflict.
	UpdateNode(ctx context.Context, fn func(*api.Node)) error
	// MachineConfig reads a config by name.
	MachineConfig(ctx context.Context, name string) (*api.MachineConfig, error)
	// DisruptionPolicy reads the cluster's MachineConfiguration (nil,
	// nil when there is none): which changes need no drain or reboot.
	DisruptionPolicy(ctx context.Context) (*api.MachineConfiguration, error)
	// Drain evicts the node's pods (daemon set pods stay, as an update's
	// drain leaves them) through the eviction API and waits until they
	// are gone; an error says what is left and why.
	Drain(ctx context.Context) error
	// PodsRunning is nil once the pods bound to the node run, else what
	// does not.
	PodsRunning(ctx context.Context) error
}

// Config is an Updater's.
type Config struct {
	Cluster Cluster
	Systemd Systemd
	Backend Backend
	Journal Journal
	// Root is where the config's files go: "/" (default) on a host.
	Root string
	// RunDir keeps the boot's ID: /run/outpost (default), a tmpfs that
	// a boot clears.
	RunDir string
	// DrainTimeout bounds one drain (default 10m); a drain that fails is
	// tried again after RetryAfter.
	DrainTimeout time.Duration
	// HealthTimeout bounds the health gate after a boot (default 5m): the
	// config's enabled units active, the node's pods running, the
	// config's health check passing.
	HealthTimeout time.Duration
	// RetryAfter is how long a failed step waits before it is tried
	// again (default 30s).
	RetryAfter time.Duration
	// RebootWait is how long a reboot asked for may take to come before
	// it is asked again (default 10m).
	RebootWait time.Duration
	// MaxReboots bounds the reboots one update may ask for (default 3):
	// a host that does not reboot when asked is reported, not asked
	// forever.
	MaxReboots int
	// RunCheck runs a config's health check command (default: exec).
	RunCheck func(ctx context.Context, argv []string) error
	// AfterStep, when set, is called once a step is journaled and before
	// it is acted on: end-to-end tests hold a real agent there to
	// SIGKILL it at that step.
	AfterStep func(ctx context.Context, step Step)
	Logger    *slog.Logger
}

// Updater applies the node's desired config, one step per Journal record.
type Updater struct {
	cfg   Config
	files files
	log   *slog.Logger
	// asked is the boot this process asked to reboot: it waits for the
	// reboot rather than ask again. A new process of the same boot (the
	// agent restarted before the reboot came) asks again.
	asked string
}

// New checks cfg and fills in defaults.
func New(cfg Config) (*Updater, error) {
	if cfg.Cluster == nil || cfg.Systemd == nil || cfg.Backend == nil || cfg.Journal == nil {
		return nil, errors.New("osupdate: Cluster, Systemd, Backend and Journal are required")
	}
	if cfg.Root == "" {
		cfg.Root = "/"
	}
	if cfg.RunDir == "" {
		cfg.RunDir = "/run/outpost"
	}
	if cfg.DrainTimeout <= 0 {
		cfg.DrainTimeout = 10 * time.Minute
	}
	if cfg.HealthTimeout <= 0 {
		cfg.HealthTimeout = 5 * time.Minute
	}
	if cfg.RetryAfter <= 0 {
		cfg.RetryAfter = 30 * time.Second
	}
	if cfg.RebootWait <= 0 {
		cfg.RebootWait = 10 * time.Minute
	}
	if cfg.MaxReboots <= 0 {
		cfg.MaxReboots = 3
	}
	if cfg.RunCheck == nil {
		cfg.RunCheck = runCommand
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Updater{cfg: cfg, files: files{root: cfg.Root}, log: cfg.Logger}, nil
}

func runCommand(ctx context.Context, argv []string) error {
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if len(msg) > 300 {
			msg = msg[len(msg)-300:]
		}
		return fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, msg)
	}
	return nil
}

// errWait ends a Sync that has nothing more to do until later (a reboot
// under way).
var errWait = errors.New("waiting")

// Sync takes the update as far as it can go now. It returns how long to
// wait before calling it again when a step is to be retried (0: call it
// when the node changes, or at the next start).
func (u *Updater) Sync(ctx context.Context) (time.Duration, error) {
	for range 16 { // each pass moves one step; more would be a loop
		rec, err := u.cfg.Journal.Load()
		if err != nil {
			return u.cfg.RetryAfter, fmt.Errorf("osupdate: journal: %w", err)
		}
		if rec.Step != "" && !rec.Plan.Made {
			// An update an older agent began: it planned none, and
			// drained and rebooted every update.
			rec.Plan = rebootPlan("begun by an older agent")
		}
		next, err := u.step(ctx, rec)
		switch {
		case errors.Is(err, errWait):
			return 0, nil
		case err != nil:
			return u.cfg.RetryAfter, err
		case next == nil:
			return 0, nil
		}
		if next.Step != rec.Step {
			now := time.Now()
			if rec.Step != "" {
				u.log.Info("update step", "config", rec.Desired, "step", string(rec.Step), "next", stepName(next.Step), "took", now.Sub(rec.StepAt).Round(time.Millisecond))
			}
			next.StepAt = now
		}
		if err := u.cfg.Journal.Save(*next); err != nil {
			return u.cfg.RetryAfter, fmt.Errorf("osupdate: journal: %w", err)
		}
		if u.cfg.AfterStep != nil && next.Step != rec.Step {
			u.cfg.AfterStep(ctx, next.Step)
		}
	}
	return u.cfg.RetryAfter, errors.New("osupdate: too many steps in one sync")
}

func stepName(s Step) string {
	if s == "" {
		return "Done"
	}
	return string(s)
}

// step does what rec's step says and returns the record of the next one
// (nil: nothing more now).
func (u *Updater) step(ctx context.Context, rec Record) (*Record, error) {
	switch rec.Step {
	case "":
		return u.start(ctx, rec)
	case StepStarted:
		if !rec.Plan.Drain {
			// The policy spares the drain: the pods keep running, and
			// so the node is not cordoned either.
			if err := u.setState(ctx, api.MCStateWorking, "", nil); err != nil {
				return nil, err
			}
			rec.Step = StepDrained
			return &rec, nil
		}
		err := u.setState(ctx, api.MCStateWorking, "", func(n *api.Node) {
			if !n.Spec.Unschedulable {
				n.Spec.Unschedulable = true
				n.Annotations[api.AnnotationUpdateCordoned] = "true"
			}
		})
		if err != nil {
			return nil, err
		}
		rec.Step = StepCordoned
		return &rec, nil
	case StepCordoned:
		dctx, cancel := context.WithTimeout(ctx, u.cfg.DrainTimeout)
		err := u.cfg.Cluster.Drain(dctx)
		cancel()
		if err != nil {
			// Never reboot a node that did not drain. It stays Working
			// (it keeps its place in the pool's maxUnavailable) with the
			// reason, and the drain is tried again: a budget refusing now
			// may allow it later, and the config is not at fault.
			u.log.Warn("drain failed; trying again later", "config", rec.Desired, "error", err)
			if serr := u.setState(ctx, api.MCStateWorking, "drain blocked, retrying: "+err.Error(), nil); serr != nil {
				return nil, serr
			}
			return nil, fmt.Errorf("drain for %s: %w", rec.Desired, err)
		}
		if err := u.setState(ctx, api.MCStateWorking, "", nil); err != nil {
			return nil, err
		}
		rec.Step = StepDrained
		return &rec, nil
	case StepDrained:
		return u.write(ctx, rec)
	case StepWritten:
		if !rec.Plan.Reboot {
			return u.takeUpWritten(ctx, rec)
		}
		return u.reboot(ctx, rec, StepRebooting, api.MCStateRebooting, "rebooting into "+rec.Desired)
	case StepRebooting, StepRollingBack:
		boot, err := BootID(u.cfg.RunDir)
		if err != nil {
			return nil, err
		}
		if boot == rec.BootID && u.asked == boot {
			if time.Since(rec.StepAt) < u.cfg.RebootWait {
				return nil, errWait // the reboot is under way
			}
			// Asked long ago and still the same boot: ask again (counted
			// against MaxReboots).
			u.asked = ""
		}
		if boot == rec.BootID {
			// Still the boot that asked, and another process asked: the
			// reboot has not happened (the agent was restarted before it
			// came, or it failed). Ask again.
			state, msg := api.MCStateRebooting, "rebooting into "+rec.Desired
			if rec.Step == StepRollingBack {
				msg = "rolling back: " + rec.Reason
			}
			return u.reboot(ctx, rec, rec.Step, state, msg)
		}
		if rec.Step == StepRollingBack {
			return u.rolledBack(ctx, rec)
		}
		rec.Step = StepBooted
		return &rec, nil
	case StepBooted:
		return u.verify(ctx, rec)
	case StepRestoring:
		return u.restore(ctx, rec)
	}
	return nil, fmt.Errorf("osupdate: unknown step %q in the journal", rec.Step)
}

// start begins an update when the node's desired config is not the one
// it runs, and was not rolled back here already.
func (u *Updater) start(ctx context.Context, rec Record) (*Record, error) {
	n, err := u.cfg.Cluster.Node(ctx)
	if api.IsNotFound(err) {
		return nil, nil // not registered yet
	}
	if err != nil {
		return nil, fmt.Errorf("osupdate: read node: %w", err)
	}
	desired, current := n.Annotations[api.AnnotationDesiredConfig], n.Annotations[api.AnnotationCurrentConfig]
	switch {
	case desired == "":
		return nil, nil
	case desired == current:
		if n.Annotations[api.AnnotationMCState] != api.MCStateDone {
			return nil, u.setState(ctx, api.MCStateDone, "", nil)
		}
		return nil, nil
	case desired == rec.Failed:
		return nil, nil // it failed here; a new config will be rendered
	}
	next := &Record{Desired: desired, Previous: current, Failed: rec.Failed}
	prev, want, err := u.configs(ctx, *next)
	if err != nil {
		return nil, err
	}
	booted, err := u.cfg.Backend.Booted(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: booted OS: %w", u.cfg.Backend.Name(), err)
	}
	wantOS := osWanted(want, booted)
	if c, ok := u.cfg.Backend.(Checker); ok {
		if err := c.CanStage(wantOS); err != nil {
			// Refused before anything is touched: no cordon, no drain.
			return nil, u.fail(ctx, *next, fmt.Errorf("%s: %w", u.cfg.Backend.Name(), err))
		}
	}
	changed, units, osChanged, err := u.diff(prev, want, booted)
	if err != nil {
		// Refused before anything is touched: no cordon, no drain.
		return nil, u.fail(ctx, *next, err)
	}
	if len(changed) == 0 && len(units) == 0 && !osChanged {
		// Nothing on the host would change (a pool put over hosts that
		// have its files already): report it, no cordon, no reboot.
		u.log.Info("the pool's config changes nothing here", "config", desired)
		err := u.cfg.Cluster.UpdateNode(ctx, func(n *api.Node) {
			n.Annotations[api.AnnotationCurrentConfig] = desired
			n.Annotations[api.AnnotationMCState] = api.MCStateDone
			delete(n.Annotations, api.AnnotationMCReason)
		})
		return nil, err
	}
	policy, err := u.cfg.Cluster.DisruptionPolicy(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the node disruption policy: %w", err)
	}
	next.Plan = planFor(policy, changed, units, osChanged)
	u.log.Info("updating to the pool's config", "config", desired, "from", current, "reboot", next.Plan.Reboot, "drain", next.Plan.Drain, "why", next.Plan.Why)
	next.Step = StepStarted
	return next, nil
}

// diff is what moving from prev to want changes on the host: the files
// that differ from what is there, the units whose enabled or masked
// state the configs set differently, and whether the OS changes. A
// config whose files cannot be made (bad contents, an unknown user) is
// an error.
func (u *Updater) diff(prev, want *api.MachineConfig, booted OSState) (changed []fileOp, units []string, osChanged bool, err error) {
	ops, err := fileOps(prev, want)
	if err != nil {
		return nil, nil, false, err
	}
	for _, op := range ops {
		if u.files.changes(op) {
			changed = append(changed, op)
		}
	}
	return changed, unitsChanged(prev, want), !sameOS(osWanted(want, booted), booted), nil
}

// takeUpWritten makes the running host take up a config written without
// a reboot; when it cannot (a reload fails on the new file), the update
// is rolled back.
func (u *Updater) takeUpWritten(ctx context.Context, rec Record) (*Record, error) {
	prev, want, err := u.configs(ctx, rec)
	if err != nil {
		return nil, err
	}
	if err := u.takeUp(ctx, rec.Plan, prev, want); err != nil {
		u.log.Warn("taking up the config without a reboot failed; rolling back", "config", rec.Desired, "error", err)
		return u.rollback(ctx, rec, want, "taking up the config without a reboot: "+err.Error())
	}
	rec.Step = StepBooted
	return &rec, nil
}

// configs reads the desired config and the previous one (nil when the
// node ran none, or it is gone: nothing of it is then removed).
func (u *Updater) configs(ctx context.Context, rec Record) (prev, want *api.MachineConfig, err error) {
	want, err = u.cfg.Cluster.MachineConfig(ctx, rec.Desired)
	if err != nil {
		return nil, nil, fmt.Errorf("read config %s: %w", rec.Desired, err)
	}
	if rec.Previous != "" {
		prev, err = u.cfg.Cluster.MachineConfig(ctx, rec.Previous)
		if err != nil && !api.IsNotFound(err) {
			return nil, nil, fmt.Errorf("read config %s: %w", rec.Previous, err)
		}
	}
	return prev, want, nil
}

// write backs up what the config replaces (recorded before the first
// write), writes files and units and stages the OS.
func (u *Updater) write(ctx context.Context, rec Record) (*Record, error) {
	prev, want, err := u.configs(ctx, rec)
	if err != nil {
		return nil, err
	}
	ops, err := fileOps(prev, want)
	if err != nil {
		return nil, u.fail(ctx, rec, err)
	}
	if rec.Backups == nil {
		// First pass: record how things are before touching them. A
		// second pass (after a crash) keeps these: the files may hold
		// the new contents by now.
		rec.PrevOS, err = u.cfg.Backend.Booted(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s: booted OS: %w", u.cfg.Backend.Name(), err)
		}
		rec.Backups = []Backup{}
		for _, op := range ops {
			b, err := u.files.backup(op.path)
			if err != nil {
				return nil, u.fail(ctx, rec, err)
			}
			rec.Backups = append(rec.Backups, b)
		}
		if err := u.cfg.Journal.Save(rec); err != nil {
			return nil, fmt.Errorf("osupdate: journal: %w", err)
		}
	}
	for _, op := range ops {
		if err := u.files.apply(op); err != nil {
			return nil, err
		}
	}
	if err := unitChanges(prev, want).apply(ctx, u.cfg.Systemd); err != nil {
		return nil, err
	}
	if err := u.cfg.Backend.Stage(ctx, osWanted(want, rec.PrevOS)); err != nil {
		return nil, u.fail(ctx, rec, fmt.Errorf("%s: stage: %w", u.cfg.Backend.Name(), err))
	}
	rec.Step = StepWritten
	return &rec, nil
}

// osWanted is the OS a config asks for: its image (else the one booted)
// and its kernel arguments.
func osWanted(mc *api.MachineConfig, booted OSState) OSState {
	want := OSState{Version: booted.Version, KernelArgs: slices.Clone(mc.Spec.KernelArguments)}
	if mc.Spec.OSImageURL != "" {
		want.Version = mc.Spec.OSImageURL
	}
	return want
}

func sameOS(a, b OSState) bool {
	return a.Version == b.Version && slices.Equal(a.KernelArgs, b.KernelArgs)
}

// fail reports a config that cannot be applied at all (bad contents, an
// unknown user): Degraded, nothing rebooted. Files written so far are
// put back.
func (u *Updater) fail(ctx context.Context, rec Record, err error) error {
	for _, b := range rec.Backups {
		if rerr := u.files.restore(b); rerr != nil {
			u.log.Error("restore after a failed write", "path", b.Path, "error", rerr)
		}
	}
	if prev, want, cerr := u.configs(ctx, rec); cerr == nil {
		if rerr := unitChanges(want, prev).apply(ctx, u.cfg.Systemd); rerr != nil {
			u.log.Error("restore units after a failed write", "error", rerr)
		}
	}
	if rec.Backups != nil { // the OS was looked at: put back what may be staged
		if rerr := u.cfg.Backend.Stage(ctx, rec.PrevOS); rerr != nil {
			u.log.Error("restore the staged OS after a failed write", "error", rerr)
		}
	}
	msg := fmt.Sprintf("%s cannot be applied: %v", rec.Desired, err)
	if serr := u.setState(ctx, api.MCStateDegraded, msg, uncordonIfOurs); serr != nil {
		return serr
	}
	if jerr := u.cfg.Journal.Save(Record{Failed: rec.Desired}); jerr != nil {
		return jerr
	}
	return errWait
}

func (u *Updater) reboot(ctx context.Context, rec Record, step Step, state, msg string) (*Record, error) {
	if rec.Reboots >= u.cfg.MaxReboots {
		_ = u.setState(ctx, api.MCStateDegraded, fmt.Sprintf("asked for %d reboots and the host did not reboot", rec.Reboots), nil)
		return nil, fmt.Errorf("osupdate: %d reboots asked for %s, none happened", rec.Reboots, rec.Desired)
	}
	boot, err := BootID(u.cfg.RunDir)
	if err != nil {
		return nil, err
	}
	rec.Step, rec.BootID = step, boot
	rec.Reboots++
	if err := u.cfg.Journal.Save(rec); err != nil {
		return nil, fmt.Errorf("osupdate: journal: %w", err)
	}
	if err := u.setState(ctx, state, reasonIf(step == StepRollingBack, msg), nil); err != nil {
		return nil, err
	}
	u.log.Info("rebooting", "why", msg)
	if err := u.cfg.Systemd.Reboot(ctx, "outpost: "+msg); err != nil {
		return nil, fmt.Errorf("reboot: %w", err)
	}
	u.asked = boot
	return nil, errWait
}

func reasonIf(ok bool, msg string) string {
	if ok {
		return msg
	}
	return ""
}

// verify checks the boot runs what was asked and is healthy; then the
// node reports Done, else the update is rolled back.
func (u *Updater) verify(ctx context.Context, rec Record) (*Record, error) {
	_, want, err := u.configs(ctx, rec)
	if err != nil {
		return nil, err
	}
	if problem := u.check(ctx, rec, want); problem != "" {
		u.log.Warn("update failed its check; rolling back", "config", rec.Desired, "problem", problem)
		return u.rollback(ctx, rec, want, problem)
	}
	err = u.cfg.Cluster.UpdateNode(ctx, func(n *api.Node) {
		n.Annotations[api.AnnotationCurrentConfig] = rec.Desired
		n.Annotations[api.AnnotationMCState] = api.MCStateDone
		delete(n.Annotations, api.AnnotationMCReason)
		uncordonIfOurs(n)
	})
	if err != nil {
		return nil, fmt.Errorf("report done: %w", err)
	}
	u.log.Info("update done", "config", rec.Desired)
	return &Record{}, nil
}

// check is the health gate: "" when the host runs want and is healthy,
// else what is wrong.
func (u *Updater) check(ctx context.Context, rec Record, want *api.MachineConfig) string {
	ops, err := hostFiles(want)
	if err != nil {
		return err.Error()
	}
	for _, op := range ops {
		if u.files.changes(op) {
			return fmt.Sprintf("%s does not hold what the config wrote", op.path)
		}
	}
	booted, err := u.cfg.Backend.Booted(ctx)
	if err != nil {
		return fmt.Sprintf("%s: booted OS: %v", u.cfg.Backend.Name(), err)
	}
	if w := osWanted(want, rec.PrevOS); !sameOS(booted, w) {
		return fmt.Sprintf("booted %s %v, want %s %v", booted.Version, booted.KernelArgs, w.Version, w.KernelArgs)
	}
	hctx, cancel := context.WithTimeout(ctx, u.cfg.HealthTimeout)
	defer cancel()
	units := enabledUnits(want)
	last := ""
	for {
		last = ""
		for _, unit := range units {
			st, err := u.cfg.Systemd.ActiveState(hctx, unit)
			if err != nil || st != "active" {
				last = fmt.Sprintf("unit %s is %s (%v)", unit, st, err)
				if st == "failed" {
					return last
				}
				break
			}
		}
		if last == "" {
			if n, err := u.cfg.Cluster.Node(hctx); err != nil || !api.ReadyIn(n.Status.Conditions) {
				last = fmt.Sprintf("the node is not Ready (%v)", err)
			}
		}
		if last == "" {
			if err := u.cfg.Cluster.PodsRunning(hctx); err != nil {
				last = "pods: " + err.Error()
			}
		}
		if last == "" {
			break
		}
		t := time.NewTimer(time.Second)
		select {
		case <-hctx.Done():
			t.Stop()
			return last + fmt.Sprintf(" after %s", u.cfg.HealthTimeout)
		case <-t.C:
		}
	}
	if h := want.Spec.HealthCheck; h != nil {
		cctx, cancel := context.WithTimeout(ctx, h.TimeoutDuration())
		defer cancel()
		if err := u.cfg.RunCheck(cctx, h.Command); err != nil {
			return "health check failed: " + err.Error()
		}
	}
	return ""
}

// rollback records why and that a restore is to come; the restore (the
// next step) puts back the files, units and OS of before and reboots
// back. A restore killed halfway runs again from its record, reason kept.
func (u *Updater) rollback(_ context.Context, rec Record, _ *api.MachineConfig, why string) (*Record, error) {
	rec.Step, rec.Reason, rec.Reboots = StepRestoring, why, 0
	return &rec, nil
}

func (u *Updater) restore(ctx context.Context, rec Record) (*Record, error) {
	prev, want, err := u.configs(ctx, rec)
	if err != nil {
		return nil, err
	}
	for _, b := range rec.Backups {
		if err := u.files.restore(b); err != nil {
			return nil, fmt.Errorf("roll back: %w", err)
		}
	}
	if err := unitChanges(want, prev).apply(ctx, u.cfg.Systemd); err != nil {
		return nil, fmt.Errorf("roll back units: %w", err)
	}
	if !rec.Plan.Reboot {
		// Nothing was staged and nothing rebooted: the running host
		// takes the previous files up as it took the new ones.
		if err := u.takeUp(ctx, rec.Plan, want, prev); err != nil {
			// Degraded says so; a reboot of a node never drained is
			// not the agent's to decide.
			rec.Reason += fmt.Sprintf("; taking the previous config up again failed too: %v", err)
		}
		return u.rolledBack(ctx, rec)
	}
	if err := u.stageBack(ctx, rec.PrevOS); err != nil {
		return nil, fmt.Errorf("roll back: %s: %w", u.cfg.Backend.Name(), err)
	}
	return u.reboot(ctx, rec, StepRollingBack, api.MCStateRebooting, "rolling back: "+rec.Reason)
}

// stageBack makes the next boot run prev again: the backend's own
// rollback when it has one (bootc and rpm-ostree keep the previous
// deployment: nothing to fetch), else a stage of prev.
func (u *Updater) stageBack(ctx context.Context, prev OSState) error {
	if rb, ok := u.cfg.Backend.(Rollbacker); ok {
		return rb.Rollback(ctx, prev)
	}
	return u.cfg.Backend.Stage(ctx, prev)
}

// rolledBack reports the failure once the host booted back.
func (u *Updater) rolledBack(ctx context.Context, rec Record) (*Record, error) {
	msg := fmt.Sprintf("%s failed: %s; rolled back to %s", rec.Desired, rec.Reason, orNone(rec.Previous))
	if booted, err := u.cfg.Backend.Booted(ctx); err != nil {
		msg += fmt.Sprintf("; the booted OS is unknown (%v)", err)
	} else if !sameOS(booted, rec.PrevOS) {
		msg += fmt.Sprintf("; but the host booted %s %v, not the previous %s %v", booted.Version, booted.KernelArgs, rec.PrevOS.Version, rec.PrevOS.KernelArgs)
	}
	if err := u.setState(ctx, api.MCStateDegraded, msg, uncordonIfOurs); err != nil {
		return nil, err
	}
	u.log.Warn("rolled back", "config", rec.Desired, "reason", rec.Reason)
	return &Record{Failed: rec.Desired}, nil
}

func orNone(s string) string {
	if s == "" {
		return "no config"
	}
	return s
}

// uncordonIfOurs lifts the cordon the update set (never an
// administrator's).
func uncordonIfOurs(n *api.Node) {
	if _, ok := n.Annotations[api.AnnotationUpdateCordoned]; ok {
		n.Spec.Unschedulable = false
		delete(n.Annotations, api.AnnotationUpdateCordoned)
	}
}

// setState writes the node's update state and reason, with more changes
// from also.
func (u *Updater) setState(ctx context.Context, state, reason string, also func(*api.Node)) error {
	err := u.cfg.Cluster.UpdateNode(ctx, func(n *api.Node) {
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[api.AnnotationMCState] = state
		if reason == "" {
			delete(n.Annotations, api.AnnotationMCReason)
		} else {
			n.Annotations[api.AnnotationMCReason] = reason
		}
		if also != nil {
			also(n)
		}
	})
	if err != nil {
		return fmt.Errorf("osupdate: node state %s: %w", state, err)
	}
	return nil
}

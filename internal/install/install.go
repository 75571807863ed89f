package install

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/outpost-edge/outpost/controlplane/pki"
)

// System is what install needs to know of the machine besides its files.
type System interface {
	// Root reports whether this process may write /etc and talk to
	// systemd as root.
	Root() bool
	// PID1 is the command name of process 1 ("systemd" on a host booted
	// with systemd).
	PID1() (string, error)
	// PortFree is nil when addr (host:port) can be listened on with
	// network ("tcp" or "udp"), else why not.
	PortFree(network, addr string) error
}

// Systemd is what install asks of systemd, through its D-Bus API.
type Systemd interface {
	DaemonReload(ctx context.Context) error
	EnableUnits(ctx context.Context, units []string) error
	DisableUnits(ctx context.Context, units []string) error
	// StartUnit, RestartUnit and StopUnit wait for their job.
	StartUnit(ctx context.Context, unit string) error
	RestartUnit(ctx context.Context, unit string) error
	StopUnit(ctx context.Context, unit string) error
	// KillUnit signals every process left in the unit's cgroup.
	KillUnit(ctx context.Context, unit string, sig syscall.Signal) error
	// ActiveState is "active", "inactive", "failed", "activating"...
	ActiveState(ctx context.Context, unit string) (string, error)
	// UnitFileState is "enabled", "disabled"... or "" for no unit file.
	UnitFileState(ctx context.Context, unit string) (string, error)
}

// Port is a port the role listens on, named by the flag that sets it.
type Port struct {
	Network, Addr, Flag string
}

// Options are what `outpost install ROLE` was asked.
type Options struct {
	Role Role
	// Binary is the outpost binary the unit starts from (an absolute
	// path; this one, usually).
	Binary string
	// Args are the role's flags, each "--name=value", put in its env file.
	Args []string
	// Secret is the cluster secret (server) or the join string (agent);
	// "" keeps what is installed, and a server with none gets a new one.
	Secret string
	// Ports must be free unless the role's unit is running already.
	Ports []Port
	// DataDir is the role's --data-dir (where its credential and admin
	// config are), for the wait.
	DataDir string
	DryRun  bool
}

// Installer installs and uninstalls outpost's units.
type Installer struct {
	// Root is prefixed to every path written or read ("" is /).
	Root string
	Sys  System
	// Connect reaches systemd; it is called only once the checks pass.
	Connect func(ctx context.Context) (Systemd, io.Closer, error)
	// Out gets what was done, a line each.
	Out io.Writer
	// Wait, if set, waits until the installed role is ready (Ready.go).
	Wait func(ctx context.Context, sd Systemd, o Options) error
}

// Refusal is an install or uninstall that cannot be done here; it lists
// every reason.
type Refusal struct{ Reasons []string }

func (r *Refusal) Error() string {
	return "refusing: " + strings.Join(r.Reasons, "; ")
}

// checkHost gives the reasons this host cannot have units installed.
func (in *Installer) checkHost() []string {
	var why []string
	if !in.Sys.Root() {
		why = append(why, "not running as root: it writes "+ConfigDir+" and systemd units and starts them (run it with sudo)")
	}
	pid1, err := in.Sys.PID1()
	switch {
	case err != nil:
		why = append(why, fmt.Sprintf("cannot tell what PID 1 is: %v", err))
	case pid1 != "systemd":
		why = append(why, fmt.Sprintf("systemd is not PID 1 (PID 1 is %q): without systemd, run \"outpost server\" or \"outpost agent\" under this host's init", pid1))
	}
	return why
}

// Install writes the role's files and unit, enables and starts it (or
// restarts it when its files changed while it ran), and waits for it to
// be ready. Run again with the same options it changes nothing and says
// so. With DryRun it prints what it would write and do.
func (in *Installer) Install(ctx context.Context, o Options) error {
	why := in.checkHost()
	if len(why) > 0 && !o.DryRun {
		return &Refusal{Reasons: why}
	}
	var sd Systemd
	if len(why) == 0 {
		s, closer, err := in.Connect(ctx)
		if err != nil {
			return fmt.Errorf("systemd: %w", err)
		}
		defer closer.Close()
		sd = s
	}
	active := ""
	if sd != nil {
		var err error
		if active, err = sd.ActiveState(ctx, o.Role.Unit()); err != nil {
			return err
		}
	}
	// The role's own ports are taken by itself once it runs.
	if active != "active" && active != "activating" && active != "reloading" {
		for _, p := range o.Ports {
			if err := in.Sys.PortFree(p.Network, p.Addr); err != nil {
				why = append(why, fmt.Sprintf("%s %s (%s) is taken: %v", p.Network, p.Addr, p.Flag, err))
			}
		}
	}
	if len(why) > 0 {
		if !o.DryRun {
			return &Refusal{Reasons: why}
		}
		for _, w := range why {
			fmt.Fprintf(in.Out, "note: a real install would refuse: %s\n", w)
		}
	}
	files, err := in.plan(o)
	if err != nil {
		return err
	}
	if o.DryRun {
		for _, f := range files {
			fmt.Fprintf(in.Out, "would write %s (mode %04o):\n", f.Path, f.Mode)
			fmt.Fprintln(in.Out, indent(f.Shown()))
		}
		fmt.Fprintf(in.Out, "would enable and start %s, then wait for it to be ready\n", o.Role.Unit())
		return nil
	}

	changed := false
	unitChanged := false
	for _, f := range files {
		did, err := in.writeFile(f)
		if err != nil {
			return err
		}
		if did {
			fmt.Fprintf(in.Out, "wrote %s\n", f.Path)
			changed = true
			unitChanged = unitChanged || strings.HasSuffix(f.Path, ".service")
		}
	}
	unit := o.Role.Unit()
	if unitChanged {
		if err := sd.DaemonReload(ctx); err != nil {
			return err
		}
	}
	state, err := sd.UnitFileState(ctx, unit)
	if err != nil {
		return err
	}
	if state != "enabled" {
		if err := sd.EnableUnits(ctx, []string{unit}); err != nil {
			return err
		}
		fmt.Fprintf(in.Out, "enabled %s\n", unit)
		changed = true
	}
	switch {
	case active == "active" && changed:
		fmt.Fprintf(in.Out, "restarting %s: its files changed\n", unit)
		if err := sd.RestartUnit(ctx, unit); err != nil {
			return err
		}
	case active == "active":
		fmt.Fprintf(in.Out, "%s is installed, enabled and running: nothing changed\n", unit)
	default:
		fmt.Fprintf(in.Out, "starting %s\n", unit)
		if err := sd.StartUnit(ctx, unit); err != nil {
			return err
		}
		changed = true
	}
	if in.Wait != nil {
		return in.Wait(ctx, sd, o)
	}
	return nil
}

// plan is every file the role needs: its configuration and, unless a
// package installed the very same unit, the unit.
func (in *Installer) plan(o Options) ([]File, error) {
	secret := o.Secret
	switch {
	case secret != "":
	case o.Role == Server:
		old, err := os.ReadFile(under(in.Root, SecretFile))
		switch {
		case err == nil && strings.TrimSpace(string(old)) != "":
			secret = strings.TrimSpace(string(old))
		case err == nil || errors.Is(err, fs.ErrNotExist):
			// A new cluster's first server: as "outpost adm secret".
			secret = pki.GenerateSecret()
			fmt.Fprintf(in.Out, "no cluster secret given: a new one goes into %s (give it to the other servers with --cluster-secret-file)\n", SecretFile)
		default:
			return nil, fmt.Errorf("the installed cluster secret: %w", err)
		}
	case o.Role == Agent:
		old, err := os.ReadFile(under(in.Root, o.Role.EnvFile()))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("the installed join string: %w", err)
		}
		secret = envValue(string(old), JoinVar)
		if secret == "" && !in.joined(o) {
			return nil, errors.New("a join string is needed (--token-file FILE, or OUTPOST_JOIN): make one on a server with \"outpost adm token create --role node\"")
		}
	}
	files, err := Config(o.Role, o.Args, secret)
	if err != nil {
		return nil, err
	}
	unit := Unit(o.Role, o.Binary)
	for _, d := range PackagedUnitDirs {
		if b, err := os.ReadFile(under(in.Root, filepath.Join(d, o.Role.Unit()))); err == nil && string(b) == unit {
			return files, nil // the package's unit is this one
		}
	}
	return append(files, File{Path: filepath.Join(UnitDir, o.Role.Unit()), Content: unit, Mode: 0o644}), nil
}

// joined reports whether the agent has a credential already.
func (in *Installer) joined(o Options) bool {
	dir := o.DataDir
	if dir == "" {
		dir = o.Role.DataDir()
	}
	_, err := os.Stat(under(in.Root, filepath.Join(dir, "credential.json")))
	return err == nil
}

// writeFile writes f unless it is there already with that content and
// mode; it reports whether it wrote. The file is replaced whole (a
// temporary file renamed), so a reader never sees half of it.
func (in *Installer) writeFile(f File) (bool, error) {
	p := under(in.Root, f.Path)
	if old, err := os.ReadFile(p); err == nil && bytes.Equal(old, []byte(f.Content)) {
		if st, err := os.Stat(p); err == nil && st.Mode().Perm() == f.Mode {
			return false, nil
		}
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return false, fmt.Errorf("write %s: %w", f.Path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), "."+filepath.Base(p)+".*")
	if err != nil {
		return false, fmt.Errorf("write %s: %w", f.Path, err)
	}
	defer os.Remove(tmp.Name())
	// Mode first, content second: a secret is never readable by others.
	err = tmp.Chmod(f.Mode)
	if err == nil {
		_, err = tmp.WriteString(f.Content)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), p)
	}
	if err != nil {
		return false, fmt.Errorf("write %s: %w", f.Path, err)
	}
	return true, nil
}

// Uninstall stops and disables the roles' units, kills what the agent's
// unit left running (its containerd and the pods), and removes the units
// install wrote and /etc/outpost's files. The roles' data (raft log,
// credential, images) stays unless purge.
func (in *Installer) Uninstall(ctx context.Context, roles []Role, purge bool) error {
	if why := in.checkHost(); len(why) > 0 {
		return &Refusal{Reasons: why}
	}
	sd, closer, err := in.Connect(ctx)
	if err != nil {
		return fmt.Errorf("systemd: %w", err)
	}
	defer closer.Close()
	var errs []error
	did := false
	reload := false
	for _, r := range roles {
		unit := r.Unit()
		dataDir := in.installedDataDir(r)
		active, err := sd.ActiveState(ctx, unit)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if active != "inactive" {
			fmt.Fprintf(in.Out, "stopping %s\n", unit)
			if err := sd.StopUnit(ctx, unit); err != nil {
				errs = append(errs, err)
			}
			did = true
		}
		if r == Agent {
			// KillMode=process left containerd, the shims and the pods.
			if err := sd.KillUnit(ctx, unit, syscall.SIGKILL); err != nil {
				errs = append(errs, err)
			}
		}
		state, err := sd.UnitFileState(ctx, unit)
		if err != nil {
			errs = append(errs, err)
		} else if state == "enabled" {
			if err := sd.DisableUnits(ctx, []string{unit}); err != nil {
				errs = append(errs, err)
			}
			fmt.Fprintf(in.Out, "disabled %s\n", unit)
			did = true
		}
		p := filepath.Join(UnitDir, unit)
		if b, err := os.ReadFile(under(in.Root, p)); err == nil {
			if !bytes.HasPrefix(b, []byte(Marker)) {
				fmt.Fprintf(in.Out, "left %s: outpost install did not write it\n", p)
			} else if in.remove(p, &errs) {
				reload, did = true, true
			}
		}
		files := []string{r.EnvFile()}
		if r == Server {
			files = append(files, SecretFile)
		}
		for _, f := range files {
			did = in.remove(f, &errs) || did
		}
		if purge {
			for _, d := range []string{dataDir, r.BinaryDir()} {
				if _, err := os.Stat(under(in.Root, d)); err == nil {
					if err := os.RemoveAll(under(in.Root, d)); err != nil {
						errs = append(errs, fmt.Errorf("remove %s: %w", d, err))
					} else {
						fmt.Fprintf(in.Out, "removed %s\n", d)
						did = true
					}
				}
			}
		} else if _, err := os.Stat(under(in.Root, dataDir)); err == nil {
			fmt.Fprintf(in.Out, "kept %s (--purge removes it)\n", dataDir)
		}
	}
	for _, d := range []string{ConfigDir, DataRoot} {
		_ = os.Remove(under(in.Root, d)) // only when empty
	}
	if reload {
		if err := sd.DaemonReload(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if !did && len(errs) == 0 {
		fmt.Fprintln(in.Out, "nothing to uninstall")
	}
	return errors.Join(errs...)
}

// installedDataDir is the role's data dir as its env file says (a
// --data-dir given to install), else the default.
func (in *Installer) installedDataDir(r Role) string {
	b, _ := os.ReadFile(under(in.Root, r.EnvFile()))
	for _, a := range strings.Fields(envValue(string(b), r.ArgsVar())) {
		if v, ok := strings.CutPrefix(a, "--data-dir="); ok && filepath.IsAbs(v) {
			return filepath.Clean(v)
		}
	}
	return r.DataDir()
}

// remove removes p, saying so; it reports whether there was one.
func (in *Installer) remove(p string, errs *[]error) bool {
	err := os.Remove(under(in.Root, p))
	switch {
	case err == nil:
		fmt.Fprintf(in.Out, "removed %s\n", p)
		return true
	case errors.Is(err, fs.ErrNotExist):
		return false
	}
	*errs = append(*errs, fmt.Errorf("remove %s: %w", p, err))
	return false
}

func indent(s string) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = "    " + l
	}
	return strings.Join(lines, "\n")
}

func hidden(v string) string { return fmt.Sprintf("<secret, %d characters>", len(v)) }

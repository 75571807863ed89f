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
	"slices"
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
	// Check, if set, checks the role's flags as the role does when it
	// starts, given the secret the unit's files will hold; its problems
	// refuse the install, a dry run's too: a unit that fails at every
	// start is never installed.
	Check func(secret string) error
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
	if len(r.Reasons) == 1 {
		return "refusing: " + r.Reasons[0]
	}
	return "refusing:\n  " + strings.Join(r.Reasons, "\n  ")
}

// reasons are err's lines (errors.Join puts one problem on each).
func reasons(err error) []string {
	var out []string
	for _, l := range strings.Split(err.Error(), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
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

// Install copies this binary to a stable path (StableBinary) unless it
// is there, writes the role's files and unit, enables and starts it (or
// restarts it when its files changed while it ran), and waits for it to
// be ready. Run again with the same options it changes nothing and says
// so. With DryRun it prints what it would copy, write and do. The role's
// flags are checked first (Options.Check): their problems refuse even a
// dry run; the host's (root, systemd, ports) only a real install.
func (in *Installer) Install(ctx context.Context, o Options) error {
	why := in.checkHost()
	secret, generated, err := in.secret(o)
	var bad []string
	if err != nil {
		bad = reasons(err)
	}
	if o.Check != nil {
		if err := o.Check(secret); err != nil {
			bad = append(bad, reasons(err)...)
		}
	}
	if len(bad) > 0 {
		if !o.DryRun {
			bad = append(bad, why...)
		}
		return &Refusal{Reasons: bad}
	}
	if len(why) > 0 && !o.DryRun {
		return &Refusal{Reasons: why}
	}
	sd, closer, err := in.connect(ctx, why)
	if err != nil {
		return err
	}
	defer closer.Close()
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
	if generated {
		fmt.Fprintf(in.Out, "no cluster secret given: a new one goes into %s (give it to the other servers with --cluster-secret-file)\n", SecretFile)
	}
	bin, copyBin := StableBinary(o.Binary)
	copyBin = copyBin && !in.sameFile(o.Binary, bin)
	files, err := in.plan(o, secret, bin, copyBin)
	if err != nil {
		return err
	}
	if o.DryRun {
		switch {
		case copyBin:
			fmt.Fprintf(in.Out, "would copy %s to %s (mode 0755): the unit runs it from there, so the download may be deleted\n", o.Binary, bin)
		case bin != o.Binary:
			fmt.Fprintf(in.Out, "%s is this binary already: unchanged\n", bin)
		}
		for _, f := range files {
			fmt.Fprintf(in.Out, "would write %s (mode %04o):\n", f.Path, f.Mode)
			fmt.Fprintln(in.Out, indent(f.Shown()))
		}
		fmt.Fprintf(in.Out, "would enable and start %s, then wait for it to be ready\n", o.Role.Unit())
		return nil
	}

	changed := false
	switch {
	case copyBin:
		if err := in.copyBinary(o.Binary, bin); err != nil {
			return err
		}
		fmt.Fprintf(in.Out, "copied %s to %s\n", o.Binary, bin)
		changed = true
	case bin != o.Binary:
		fmt.Fprintf(in.Out, "%s is this binary already: unchanged\n", bin)
	}
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

// secret is the secret the role's files get: the one given, else the
// installed one; a server with none gets a new one (generated).
func (in *Installer) secret(o Options) (secret string, generated bool, err error) {
	switch {
	case o.Secret != "":
		return o.Secret, false, nil
	case o.Role == Server:
		old, err := os.ReadFile(under(in.Root, SecretFile))
		switch {
		case err == nil && strings.TrimSpace(string(old)) != "":
			return strings.TrimSpace(string(old)), false, nil
		case err == nil || errors.Is(err, fs.ErrNotExist):
			// A new cluster's first server: as "outpost adm secret".
			return pki.GenerateSecret(), true, nil
		default:
			return "", false, fmt.Errorf("the installed cluster secret: %w", err)
		}
	case o.Role == Agent:
		old, err := os.ReadFile(under(in.Root, o.Role.EnvFile()))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", false, fmt.Errorf("the installed join string: %w", err)
		}
		secret = envValue(string(old), JoinVar)
		if secret == "" && !in.joined(o) {
			return "", false, errors.New("a join string is needed (--token-file FILE, or OUTPOST_JOIN): make one on a server with \"outpost adm token create --role node\"")
		}
		return secret, false, nil
	}
	return "", false, fmt.Errorf("role %q: want server or agent", o.Role)
}

// connect reaches systemd when the host passed its checks (no why); a
// dry run on a host that did not gets a nil Systemd.
func (in *Installer) connect(ctx context.Context, why []string) (Systemd, io.Closer, error) {
	if len(why) > 0 {
		return nil, io.NopCloser(nil), nil
	}
	sd, closer, err := in.Connect(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("systemd: %w", err)
	}
	return sd, closer, nil
}

// plan is every file the role needs: its configuration, the note of the
// binary install copied, and, unless a package installed the very same
// unit, the unit, which runs bin.
func (in *Installer) plan(o Options, secret, bin string, copyBin bool) ([]File, error) {
	files, err := Config(o.Role, o.Args, secret)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(under(in.Root, BinaryNote)); copyBin || err == nil {
		files = append(files, File{Path: BinaryNote, Content: bin + "\n", Mode: 0o644})
	}
	unit := Unit(o.Role, bin)
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
// mode; it reports whether it wrote.
func (in *Installer) writeFile(f File) (bool, error) {
	p := under(in.Root, f.Path)
	if old, err := os.ReadFile(p); err == nil && bytes.Equal(old, []byte(f.Content)) {
		if st, err := os.Stat(p); err == nil && st.Mode().Perm() == f.Mode {
			return false, nil
		}
	}
	err := writeAtomic(p, f.Mode, func(w io.Writer) error {
		_, err := io.WriteString(w, f.Content)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("write %s: %w", f.Path, err)
	}
	return true, nil
}

// writeAtomic replaces p whole with what fill writes (a temporary file
// renamed), so a reader never sees half of it, and a running binary
// being replaced keeps its old file.
func writeAtomic(p string, mode fs.FileMode, fill func(io.Writer) error) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), "."+filepath.Base(p)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	// Mode first, content second: a secret is never readable by others.
	err = tmp.Chmod(mode)
	if err == nil {
		err = fill(tmp)
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
	return err
}

// StableBinary is the path the units run outpost from, for the running
// binary at running: itself when it is in /usr/bin or /usr/local/bin (a
// package's, or one put there by hand), else LocalBinary, where install
// copies it (copy), as k3s's installer does: a binary run from a
// download directory may be deleted after the install.
func StableBinary(running string) (path string, copy bool) {
	switch filepath.Dir(running) {
	case filepath.Dir(PackagedBinary), filepath.Dir(LocalBinary):
		return running, false
	}
	return LocalBinary, true
}

// sameFile reports whether the file at dst (under Root) has src's bytes.
func (in *Installer) sameFile(src, dst string) bool {
	a, err := os.ReadFile(src)
	if err != nil {
		return false
	}
	b, err := os.ReadFile(under(in.Root, dst))
	return err == nil && bytes.Equal(a, b)
}

// copyBinary copies the binary src to dst (under Root), mode 0755,
// replacing it whole.
func (in *Installer) copyBinary(src, dst string) error {
	f, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("copy this binary: %w", err)
	}
	defer f.Close()
	err = writeAtomic(under(in.Root, dst), 0o755, func(w io.Writer) error {
		_, err := io.Copy(w, f)
		return err
	})
	if err != nil {
		return fmt.Errorf("copy this binary to %s: %w", dst, err)
	}
	return nil
}

// Uninstall stops and disables the roles' units, kills what the agent's
// unit left running (its containerd and the pods), and removes the units
// install wrote, /etc/outpost's files and, once no role is left, the
// binary install copied. The roles' data (raft log, credential, images)
// stays unless purge. With dryRun it changes nothing and says what it
// would do.
func (in *Installer) Uninstall(ctx context.Context, roles []Role, purge, dryRun bool) error {
	why := in.checkHost()
	if len(why) > 0 && !dryRun {
		return &Refusal{Reasons: why}
	}
	for _, w := range why {
		fmt.Fprintf(in.Out, "note: a real uninstall would refuse: %s\n", w)
	}
	sd, closer, err := in.connect(ctx, why)
	if err != nil {
		return err
	}
	defer closer.Close()
	u := &undo{in: in, dry: dryRun}
	reload := false
	for _, r := range roles {
		unit := r.Unit()
		dataDir := in.installedDataDir(r)
		// Without systemd's word (a dry run as a user), what it would
		// do if the unit runs and is enabled.
		active, state, runs, enabled := "unknown", "unknown", " (if it runs)", " (if it is enabled)"
		if sd != nil {
			var err error
			if active, err = sd.ActiveState(ctx, unit); err != nil {
				u.errs = append(u.errs, err)
				continue
			}
			if state, err = sd.UnitFileState(ctx, unit); err != nil {
				u.errs = append(u.errs, err)
			}
			runs, enabled = "", ""
		}
		if active != "inactive" {
			if !dryRun {
				fmt.Fprintf(in.Out, "stopping %s\n", unit)
			}
			u.do("", "stop "+unit+runs, func() error { return sd.StopUnit(ctx, unit) })
		}
		if r == Agent && !dryRun {
			// KillMode=process left containerd, the shims and the pods.
			if err := sd.KillUnit(ctx, unit, syscall.SIGKILL); err != nil {
				u.errs = append(u.errs, err)
			}
		} else if r == Agent && active != "inactive" {
			fmt.Fprintf(in.Out, "would kill what %s left running (its containerd and pods)\n", unit)
		}
		if state == "enabled" || state == "unknown" {
			u.do("disabled "+unit, "disable "+unit+enabled, func() error { return sd.DisableUnits(ctx, []string{unit}) })
		}
		p := filepath.Join(UnitDir, unit)
		if b, err := os.ReadFile(under(in.Root, p)); err == nil {
			if !bytes.HasPrefix(b, []byte(Marker)) {
				fmt.Fprintf(in.Out, "left %s: outpost install did not write it\n", p)
			} else if u.remove(p) {
				reload = true
			}
		}
		files := []string{r.EnvFile()}
		if r == Server {
			files = append(files, SecretFile)
		}
		for _, f := range files {
			u.remove(f)
		}
		if purge {
			for _, d := range []string{dataDir, r.BinaryDir()} {
				u.removeAll(d)
			}
		} else if _, err := os.Stat(under(in.Root, dataDir)); err == nil {
			fmt.Fprintf(in.Out, "%s %s (--purge removes it)\n", map[bool]string{false: "kept", true: "would keep"}[dryRun], dataDir)
		}
	}
	in.removeCopiedBinary(u, roles)
	if !dryRun {
		for _, d := range []string{ConfigDir, DataRoot} {
			_ = os.Remove(under(in.Root, d)) // only when empty
		}
	}
	if reload && !dryRun {
		if err := sd.DaemonReload(ctx); err != nil {
			u.errs = append(u.errs, err)
		}
	}
	if !u.did && len(u.errs) == 0 {
		fmt.Fprintln(in.Out, "nothing to uninstall")
	}
	return errors.Join(u.errs...)
}

// removeCopiedBinary removes the binary install copied (BinaryNote) once
// no role is left installed: the units of the roles kept run it. A
// package's binary is the package's to remove.
func (in *Installer) removeCopiedBinary(u *undo, leaving []Role) {
	b, err := os.ReadFile(under(in.Root, BinaryNote))
	if err != nil {
		return
	}
	for _, r := range Roles {
		if _, err := os.Stat(under(in.Root, r.EnvFile())); err == nil && !slices.Contains(leaving, r) {
			fmt.Fprintf(in.Out, "kept the outpost binary: %s stays installed\n", r.Unit())
			return
		}
	}
	if bin := strings.TrimSpace(string(b)); bin == LocalBinary {
		u.remove(bin)
	}
	u.remove(BinaryNote)
}

// undo does, or with dry only says, uninstall's steps, keeping their
// errors and whether there was anything to do.
type undo struct {
	in   *Installer
	dry  bool
	did  bool
	errs []error
}

// do runs f and says done (unless ""); a dry run says "would " + would
// instead.
func (u *undo) do(done, would string, f func() error) {
	u.did = true
	if u.dry {
		fmt.Fprintf(u.in.Out, "would %s\n", would)
		return
	}
	if err := f(); err != nil {
		u.errs = append(u.errs, err)
		return
	}
	if done != "" {
		fmt.Fprintln(u.in.Out, done)
	}
}

// remove removes the file p, if there is one.
func (u *undo) remove(p string) bool {
	if _, err := os.Lstat(under(u.in.Root, p)); err != nil {
		return false
	}
	u.do("removed "+p, "remove "+p, func() error { return os.Remove(under(u.in.Root, p)) })
	return true
}

// removeAll removes the directory d, if there is one.
func (u *undo) removeAll(d string) {
	if _, err := os.Stat(under(u.in.Root, d)); err != nil {
		return
	}
	u.do("removed "+d, "remove "+d+" and everything in it", func() error { return os.RemoveAll(under(u.in.Root, d)) })
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

func indent(s string) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = "    " + l
	}
	return strings.Join(lines, "\n")
}

func hidden(v string) string { return fmt.Sprintf("<secret, %d characters>", len(v)) }

package osupdate

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/internal/fsync"
)

// unitDir is where a config's units and drop-ins are written, as the MCO
// does.
const unitDir = "/etc/systemd/system"

// fileOp is one path the update writes (data) or removes (remove).
type fileOp struct {
	path     string
	data     []byte
	mode     os.FileMode
	uid, gid int // -1: keep
	remove   bool
	// keep: the file is written only if absent (overwrite: false).
	keep bool
	// unit is the unit whose file or drop-in this is: its change is
	// the unit's, for the node disruption policy.
	unit string
}

// hostFiles is what a config puts on the host as files: its storage
// files, and its units' and drop-ins' files.
func hostFiles(mc *api.MachineConfig) ([]fileOp, error) {
	if mc == nil {
		return nil, nil
	}
	var out []fileOp
	for _, f := range mc.Spec.Config.Storage.Files {
		data, err := api.DecodeFileContents(f.Contents)
		if err != nil {
			return nil, fmt.Errorf("file %s: %w", f.Path, err)
		}
		uid, err := lookupID(f.User, false)
		if err != nil {
			return nil, fmt.Errorf("file %s: user: %w", f.Path, err)
		}
		gid, err := lookupID(f.Group, true)
		if err != nil {
			return nil, fmt.Errorf("file %s: group: %w", f.Path, err)
		}
		out = append(out, fileOp{path: f.Path, data: data, mode: fileModeOf(f.FileMode()), uid: uid, gid: gid, keep: !f.Overwrites()})
	}
	for _, u := range mc.Spec.Config.Systemd.Units {
		if u.Contents != "" {
			out = append(out, fileOp{path: filepath.Join(unitDir, u.Name), data: []byte(u.Contents), mode: 0o644, uid: -1, gid: -1, unit: u.Name})
		}
		for _, d := range u.Dropins {
			if d.Contents != "" {
				out = append(out, fileOp{path: filepath.Join(unitDir, u.Name+".d", d.Name), data: []byte(d.Contents), mode: 0o644, uid: -1, gid: -1, unit: u.Name})
			}
		}
	}
	return out, nil
}

// fileModeOf turns Unix permission bits (0o4755) into Go's FileMode,
// whose setuid, setgid and sticky bits are elsewhere.
func fileModeOf(m int) os.FileMode {
	fm := os.FileMode(m) & os.ModePerm
	if m&0o4000 != 0 {
		fm |= os.ModeSetuid
	}
	if m&0o2000 != 0 {
		fm |= os.ModeSetgid
	}
	if m&0o1000 != 0 {
		fm |= os.ModeSticky
	}
	return fm
}

// modeBits is what of a file's mode a config sets.
const modeBits = os.ModePerm | os.ModeSetuid | os.ModeSetgid | os.ModeSticky

func lookupID(u *api.IgnitionNodeUser, group bool) (int, error) {
	switch {
	case u == nil:
		return -1, nil
	case u.ID != nil:
		return *u.ID, nil
	case u.Name == "":
		return -1, nil
	case group:
		g, err := user.LookupGroup(u.Name)
		if err != nil {
			return 0, err
		}
		return strconv.Atoi(g.Gid)
	default:
		usr, err := user.Lookup(u.Name)
		if err != nil {
			return 0, err
		}
		return strconv.Atoi(usr.Uid)
	}
}

// fileOps is what moving from prev to want does to files: want's written,
// prev's that want has not removed (the MCO removes them too).
func fileOps(prev, want *api.MachineConfig) ([]fileOp, error) {
	next, err := hostFiles(want)
	if err != nil {
		return nil, err
	}
	old, err := hostFiles(prev)
	if err != nil {
		return nil, err
	}
	for _, o := range old {
		if !slices.ContainsFunc(next, func(n fileOp) bool { return n.path == o.path }) {
			next = append(next, fileOp{path: o.path, remove: true, unit: o.unit})
		}
	}
	return next, nil
}

// files writes below root ("/" on a host, a directory in tests).
type files struct{ root string }

func (f files) abs(p string) string { return filepath.Join(f.root, p) }

// backup records how p is now.
func (f files) backup(p string) (Backup, error) {
	b := Backup{Path: p}
	st, err := os.Lstat(f.abs(p))
	if errors.Is(err, fs.ErrNotExist) {
		return b, nil
	}
	if err != nil {
		return b, fmt.Errorf("back up %s: %w", p, err)
	}
	if st.Mode()&os.ModeSymlink != 0 {
		target, err := os.Readlink(f.abs(p))
		if err != nil {
			return b, fmt.Errorf("back up %s: %w", p, err)
		}
		b.Existed, b.Link = true, target
		return b, nil
	}
	if !st.Mode().IsRegular() {
		return b, fmt.Errorf("back up %s: not a regular file or a link (%s)", p, st.Mode().Type())
	}
	data, err := os.ReadFile(f.abs(p))
	if err != nil {
		return b, fmt.Errorf("back up %s: %w", p, err)
	}
	b.Existed, b.Mode, b.Data = true, st.Mode()&modeBits, data
	b.UID, b.GID = -1, -1
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		b.UID, b.GID = int(sys.Uid), int(sys.Gid)
	}
	return b, nil
}

// changes reports whether op would change the file.
func (f files) changes(op fileOp) bool {
	st, err := os.Stat(f.abs(op.path))
	if op.remove {
		return err == nil
	}
	if err != nil {
		return true
	}
	if op.keep {
		return false
	}
	data, err := os.ReadFile(f.abs(op.path))
	return err != nil || !bytes.Equal(data, op.data) || st.Mode()&modeBits != op.mode
}

// apply writes or removes one file. A write is atomic: a temporary file
// beside it, synced, renamed over it, and the directory synced, so a
// power cut leaves the old file or the new one.
func (f files) apply(op fileOp) error {
	p := f.abs(op.path)
	if op.remove {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", op.path, err)
		}
		return syncDir(filepath.Dir(p))
	}
	if op.keep {
		if _, err := os.Lstat(p); err == nil {
			return nil
		}
	}
	return writeAtomic(p, op.data, op.mode, op.uid, op.gid)
}

// restore puts a backed-up path back as it was.
func (f files) restore(b Backup) error {
	if !b.Existed {
		return f.apply(fileOp{path: b.Path, remove: true})
	}
	if b.Link != "" {
		p := f.abs(b.Path)
		tmp := p + ".outpost-link"
		_ = os.Remove(tmp)
		if err := os.Symlink(b.Link, tmp); err != nil {
			return fmt.Errorf("restore %s: %w", b.Path, err)
		}
		if err := os.Rename(tmp, p); err != nil {
			return fmt.Errorf("restore %s: %w", b.Path, err)
		}
		return syncDir(filepath.Dir(p))
	}
	return writeAtomic(f.abs(b.Path), b.Data, b.Mode, b.UID, b.GID)
}

func writeAtomic(p string, data []byte, mode os.FileMode, uid, gid int) error {
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(p)+".outpost-")
	if err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	done := false
	defer func() {
		if !done {
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", p, err)
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: mode: %w", p, err)
	}
	if uid >= 0 || gid >= 0 {
		if err := tmp.Chown(uid, gid); err != nil {
			tmp.Close()
			return fmt.Errorf("write %s: owner: %w", p, err)
		}
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: sync: %w", p, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	done = true
	return syncDir(dir)
}

// syncDir is fsync.Dir for a directory that may be gone: nothing to sync.
func syncDir(dir string) error {
	if err := fsync.Dir(dir); !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

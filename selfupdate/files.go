package selfupdate

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/outpost-edge/outpost/internal/fsync"
)

// Names in DIR.
const (
	versionsDir = "versions"
	binaryName  = "outpost"
	currentLink = "current"
	goodLink    = "good"
	trialFile   = "trial.json"
	failureFile = "last-failure.json"
	// tempPrefix starts every file this package writes before renaming
	// it into place; Prune removes those a power cut left in versions/.
	tempPrefix = ".tmp-"
)

// beforeChange is called with the path of every change to DIR just
// before it is made (a rename into place, a removal), and the change is
// not made when it returns an error. It is a seam for tests, which cut
// an operation short at each of its steps as a power cut would: every
// change is atomic, so a cut falls between two of them.
var beforeChange = func(path string) error { return nil }

// parseDigest returns the hex of a "sha256:<hex>" digest, the name of
// its directory under versions/.
func parseDigest(d string) (string, error) {
	h, ok := strings.CutPrefix(d, "sha256:")
	if !ok || !isHex64(h) {
		return "", fmt.Errorf("digest %q: want sha256: and 64 lowercase hex digits", d)
	}
	return h, nil
}

func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// binPath is the binary of the version with digest hex hx.
func binPath(dir, hx string) string {
	return filepath.Join(dir, versionsDir, hx, binaryName)
}

// fileDigest is the digest of the file at p.
func fileDigest(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err // *PathError names p
	}
	defer f.Close()
	d, err := Digest(f)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", p, err)
	}
	return d, nil
}

// writeTemp copies r to a new file in dir named tempPrefix+name+random,
// fsynced and with mode, and returns its path and the sha256 of what
// was written. On error nothing is left behind.
func writeTemp(dir, name string, r io.Reader, mode os.FileMode) (path, digest string, err error) {
	f, err := os.CreateTemp(dir, tempPrefix+name+"-")
	if err != nil {
		return "", "", err // *PathError names the file
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	h := sha256.New()
	if _, err = io.Copy(io.MultiWriter(f, h), r); err != nil {
		return "", "", fmt.Errorf("write %s: %w", f.Name(), err)
	}
	if err = f.Chmod(mode); err != nil {
		return "", "", fmt.Errorf("chmod %s: %w", f.Name(), err)
	}
	if err = f.Sync(); err != nil {
		return "", "", fmt.Errorf("sync %s: %w", f.Name(), err)
	}
	if err = f.Close(); err != nil {
		return "", "", fmt.Errorf("close %s: %w", f.Name(), err)
	}
	return f.Name(), "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// rename moves the temporary file tmp to p and syncs p's directory, so
// that the rename survives a power cut; tmp is removed when it fails.
func rename(tmp, p string) error {
	if err := beforeChange(p); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, p); err != nil {
		_ = os.Remove(tmp)
		return err // *LinkError names both
	}
	return syncDir(filepath.Dir(p))
}

// writeJSON writes v to DIR/name atomically.
func writeJSON(dir, name string, v any) error {
	p := filepath.Join(dir, name)
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	tmp, _, err := writeTemp(dir, name, bytes.NewReader(append(b, '\n')), 0o644)
	if err != nil {
		return err
	}
	return rename(tmp, p)
}

// readJSON decodes DIR/name into v; it reports false, nil when the file
// does not exist.
func readJSON(dir, name string, v any) (bool, error) {
	p := filepath.Join(dir, name)
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err // *PathError names p
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("read %s: %w", p, err)
	}
	return true, nil
}

// remove removes DIR/name, which need not exist, and syncs DIR.
func remove(dir, name string) error {
	p := filepath.Join(dir, name)
	if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err := beforeChange(p); err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err // *PathError names p
	}
	return syncDir(dir)
}

// setLink points the symlink DIR/name at versions/<hx>, replacing what
// was there in one rename: a reader (systemd starting DIR/current/outpost)
// sees the old target or the new one, never none.
func setLink(dir, name, hx string) error {
	p := filepath.Join(dir, name)
	tmp := filepath.Join(dir, tempPrefix+name)
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err // left by a cut; *PathError names it
	}
	// Relative, so that DIR can be moved or seen from a chroot.
	if err := os.Symlink(filepath.Join(versionsDir, hx), tmp); err != nil {
		return err // *LinkError names it
	}
	return rename(tmp, p)
}

// readLink returns the digest of the version the symlink DIR/name points
// at, or "" when there is no such link.
func readLink(dir, name string) (string, error) {
	p := filepath.Join(dir, name)
	target, err := os.Readlink(p)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err // *PathError names p
	}
	hx := filepath.Base(target)
	if filepath.Base(filepath.Dir(target)) != versionsDir || !isHex64(hx) {
		return "", fmt.Errorf("%s points to %q, not to %s/<sha256 hex>", p, target, versionsDir)
	}
	return "sha256:" + hx, nil
}

// syncDir fsyncs directory dir, so that the entries just renamed or
// removed in it survive a power cut.
var syncDir = fsync.Dir

//go:build unix

package raftstore

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// CheckDataDir returns an error wrapping ErrDataDirInUse when another
// process has the raft log in dir open. A server calls it before it binds
// its ports, so a second server started on the same directory by mistake
// is told so rather than that a port is taken. Open finds the lock too;
// this only answers earlier.
func CheckDataDir(dir string) error {
	f, err := os.Open(filepath.Join(dir, "raft", "raft.db"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return nil // Open reports what is wrong with the file
	}
	// bbolt holds an exclusive flock while the file is open; a shared one
	// is refused at once if so. Closing the file drops ours.
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); errors.Is(err, syscall.EWOULDBLOCK) {
		return &dataDirInUseError{dir: dir}
	}
	return nil
}

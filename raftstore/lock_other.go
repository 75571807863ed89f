//go:build !unix

package raftstore

// CheckDataDir always succeeds where flock is unknown; Open still reports
// a data directory in use (ErrDataDirInUse) when bbolt cannot lock it.
func CheckDataDir(dir string) error { return nil }

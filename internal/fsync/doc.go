// Package fsync holds the directory sync that crash-safe file updates
// need: after a file is created, renamed or removed, the directory's entry
// survives a power cut only once the directory itself is synced.
package fsync

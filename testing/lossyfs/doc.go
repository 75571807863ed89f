// Package lossyfs is a FUSE filesystem for tests that loses what was not
// synced, as a machine does when its power is cut: file data written but
// not fsynced is dropped by Cut, as LazyFS does for etcd's robustness
// tests. Crash tests that kill a process with SIGKILL cannot see a missing
// fsync, because the page cache keeps every write; a test on lossyfs can.
//
// Metadata (creating, renaming and removing files and directories) is
// durable at once: the model is a journaling filesystem whose journal
// commits metadata promptly, and what it tests is that data reached disk
// before it was acknowledged.
package lossyfs

//go:build !linux

package containerd

import "syscall"

// procAttr has nothing to add off Linux (no parent-death signal; the
// supervisor is only used on Linux hosts).
func procAttr() *syscall.SysProcAttr { return nil }

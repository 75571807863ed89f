//go:build !linux

package containerd

import "syscall"

// procAttr puts containerd in its own process group (no parent-death
// signal off Linux).
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

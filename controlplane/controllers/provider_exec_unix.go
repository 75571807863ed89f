//go:build unix

package controllers

import (
	"os/exec"
	"syscall"
)

// killGroup runs cmd in a process group of its own and makes its
// cancellation kill the group.
func killGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}

package containerd

import "syscall"

// procAttr puts containerd in its own process group, so a terminal's
// Ctrl-C reaches the agent, which then stops containerd in order; and
// has the kernel kill containerd if the agent dies, so a restarted agent
// does not find a stray containerd on its socket. The containers' shims
// are containerd's own daemons and survive both.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

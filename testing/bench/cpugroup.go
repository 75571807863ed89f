package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/outpost-edge/outpost/runtime/cgroups"
)

// cpuGroup is a CPU accounting cgroup the agent is started in: its
// descendants (containerd, the shims, runc, the log writers) inherit it,
// so its usage counts short-lived processes too, which /proc cannot.
// Containers themselves are moved to their own cgroups by runc.
type cpuGroup struct {
	dir, name string
}

// newCPUGroup makes the cgroup name in cgroup v2's unified hierarchy or
// v1's cpuacct one, whichever the machine has.
func newCPUGroup(name string) (*cpuGroup, error) {
	g := &cpuGroup{name: name}
	switch {
	case exists("/sys/fs/cgroup/cgroup.controllers"):
		g.dir = filepath.Join("/sys/fs/cgroup", name)
	case exists("/sys/fs/cgroup/cpuacct/cpuacct.usage"):
		g.dir = filepath.Join("/sys/fs/cgroup/cpuacct", name)
	default:
		return nil, errors.New("no cgroup v2 and no cgroup v1 cpuacct hierarchy")
	}
	if err := os.Mkdir(g.dir, 0o755); err != nil {
		return nil, fmt.Errorf("make cgroup: %w", err)
	}
	return g, nil
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// procs is the file a process writes its ID to, to join the group.
func (g *cpuGroup) procs() string { return filepath.Join(g.dir, "cgroup.procs") }

// usage is the CPU time the group's processes used, the dead included.
func (g *cpuGroup) usage() (time.Duration, error) {
	ns, err := cgroups.FS{}.CPU("/" + g.name)
	return time.Duration(ns), err
}

// remove deletes the group; its processes must all have ended.
func (g *cpuGroup) remove() error {
	if err := os.Remove(g.dir); err != nil {
		return fmt.Errorf("remove cgroup %s: %w", g.dir, err)
	}
	return nil
}

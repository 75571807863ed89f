package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// cpuGroup is a CPU accounting cgroup the agent is started in: its
// descendants (containerd, the shims, runc, the log writers) inherit it,
// so its usage counts short-lived processes too, which /proc cannot.
// Containers themselves are moved to their own cgroups by runc.
type cpuGroup struct {
	dir string
	v2  bool
}

// newCPUGroup makes the cgroup name in cgroup v2's unified hierarchy or
// v1's cpuacct one, whichever the machine has.
func newCPUGroup(name string) (*cpuGroup, error) {
	g := &cpuGroup{}
	switch {
	case exists("/sys/fs/cgroup/cgroup.controllers"):
		g.dir, g.v2 = filepath.Join("/sys/fs/cgroup", name), true
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
	if !g.v2 {
		b, err := os.ReadFile(filepath.Join(g.dir, "cpuacct.usage"))
		if err != nil {
			return 0, err
		}
		ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parse cpuacct.usage: %w", err)
		}
		return time.Duration(ns), nil
	}
	b, err := os.ReadFile(filepath.Join(g.dir, "cpu.stat"))
	if err != nil {
		return 0, err
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "usage_usec "); ok {
			us, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parse cpu.stat: %w", err)
			}
			return time.Duration(us) * time.Microsecond, nil
		}
	}
	return 0, errors.New("no usage_usec in cpu.stat")
}

// remove deletes the group; its processes must all have ended.
func (g *cpuGroup) remove() error {
	if err := os.Remove(g.dir); err != nil {
		return fmt.Errorf("remove cgroup %s: %w", g.dir, err)
	}
	return nil
}

package containerd

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// cgroupRoot is where cgroupfs is mounted; a var for tests.
var cgroupRoot = "/sys/fs/cgroup"

// oomKilled reports whether the kernel's OOM killer killed a process of
// the cgroup at path (the spec's cgroupsPath, runc's cgroupfs layout). It
// reads the oom_kill counter: memory.events on cgroup v2, the memory
// controller's memory.oom_control on v1 (kernel 4.13 or later). It must be
// called before the task is deleted, which removes the cgroup.
func oomKilled(path string) bool {
	if path == "" || strings.Contains(path, ":") {
		// A systemd slice path ("slice:prefix:name"): not laid out
		// by cgroupfs rules, so not read.
		return false
	}
	if _, err := os.Stat(filepath.Join(cgroupRoot, "cgroup.controllers")); err == nil {
		return counter(filepath.Join(cgroupRoot, path, "memory.events"), "oom_kill") > 0
	}
	return counter(filepath.Join(cgroupRoot, "memory", path, "memory.oom_control"), "oom_kill") > 0
}

// counter returns the value of "key N" in a cgroup flat-keyed file, 0 if
// absent.
func counter(file, key string) int64 {
	f, err := os.Open(file)
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		k, v, ok := strings.Cut(s.Text(), " ")
		if ok && k == key {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

package containerd

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// workingSet is the memory working set of the cgroup at path (runc's
// cgroupfs layout, as oomKilled reads it): memory in use less the
// inactive file cache, which the kernel can drop at once; 0 when the
// cgroup cannot be read (the container stopped, or a systemd slice path).
func workingSet(path string) uint64 {
	if path == "" || strings.Contains(path, ":") {
		return 0
	}
	var usage uint64
	var inactive int64
	if _, err := os.Stat(filepath.Join(cgroupRoot, "cgroup.controllers")); err == nil {
		dir := filepath.Join(cgroupRoot, path)
		usage = readUint(filepath.Join(dir, "memory.current"))
		inactive = counter(filepath.Join(dir, "memory.stat"), "inactive_file")
	} else {
		dir := filepath.Join(cgroupRoot, "memory", path)
		usage = readUint(filepath.Join(dir, "memory.usage_in_bytes"))
		inactive = counter(filepath.Join(dir, "memory.stat"), "total_inactive_file")
	}
	if inactive < 0 || uint64(inactive) >= usage {
		return 0
	}
	return usage - uint64(inactive)
}

// readUint reads a cgroup file holding one number, 0 if it cannot.
func readUint(file string) uint64 {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	return n
}

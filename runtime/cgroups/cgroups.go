package cgroups

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Errors of this package.
var (
	// ErrSystemdPath is a cgroupsPath in systemd's "slice:prefix:name"
	// form, which is not laid out by cgroupfs rules.
	ErrSystemdPath = errors.New("systemd cgroup paths are not read")
	// ErrFormat is a cgroup or proc file that does not hold what it
	// should.
	ErrFormat = errors.New("unexpected cgroup file contents")
)

// Default mount points.
const (
	DefaultRoot = "/sys/fs/cgroup"
	DefaultProc = "/proc"
)

// Reading is one reading of a cgroup's counters.
type Reading struct {
	// CPUNanos is the CPU time used since the cgroup was made (for the
	// node: since boot), in nanoseconds of one core.
	CPUNanos uint64
	// WorkingSetBytes is memory in use less the inactive file cache.
	WorkingSetBytes uint64
}

// FS is a cgroupfs mount and a procfs mount; the zero value reads the
// host's.
type FS struct {
	Root string
	Proc string
}

func (f FS) root() string {
	if f.Root == "" {
		return DefaultRoot
	}
	return f.Root
}

func (f FS) proc() string {
	if f.Proc == "" {
		return DefaultProc
	}
	return f.Proc
}

// Unified reports whether the mount is cgroup v2's single tree.
func (f FS) Unified() bool {
	_, err := os.Stat(filepath.Join(f.root(), "cgroup.controllers"))
	return err == nil
}

// HybridControllers lists the controllers that the cgroup2 tree of a
// hybrid layout (v1 hierarchies plus cgroup2 at Root/unified, systemd's
// "hybrid") holds because no v1 hierarchy took them. It is empty on a
// pure v1 or v2 layout, and on a hybrid one whose controllers are all in
// v1 hierarchies, the only hybrid layout crun runs containers on.
func (f FS) HybridControllers() ([]string, error) {
	if f.Unified() {
		return nil, nil
	}
	b, err := os.ReadFile(filepath.Join(f.root(), "unified", "cgroup.controllers"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cgroups: %w", err)
	}
	return strings.Fields(string(b)), nil
}

// checkPath refuses paths this package cannot read; "" and "/" are the
// root.
func checkPath(path string) error {
	if strings.Contains(path, ":") {
		return fmt.Errorf("%w: %q", ErrSystemdPath, path)
	}
	return nil
}

// Read reads the cgroup at path (the spec's cgroupsPath). A cgroup that
// is gone (its container stopped) is an error wrapping os.ErrNotExist.
func (f FS) Read(path string) (Reading, error) {
	if err := checkPath(path); err != nil {
		return Reading{}, err
	}
	if f.Unified() {
		dir := filepath.Join(f.root(), path)
		return f.readV2(dir, true)
	}
	return f.readV1(path)
}

// ReadNode reads the whole node's use: the root cgroup, and on v2
// /proc/meminfo for memory.
func (f FS) ReadNode() (Reading, error) {
	if !f.Unified() {
		return f.readV1("/")
	}
	r, err := f.readV2(f.root(), false)
	if err != nil {
		return Reading{}, err
	}
	b, err := os.ReadFile(filepath.Join(f.proc(), "meminfo"))
	if err != nil {
		return Reading{}, fmt.Errorf("node memory: %w", err)
	}
	m, err := meminfo(b, "MemTotal", "MemFree", "Inactive(file)")
	if err != nil {
		return Reading{}, fmt.Errorf("node memory: %w", err)
	}
	r.WorkingSetBytes = sub(sub(m[0], m[1]), m[2])
	return r, nil
}

// CPU reads only the CPU time (nanoseconds) of the cgroup at path, for
// a group made without the memory controller.
func (f FS) CPU(path string) (uint64, error) {
	if err := checkPath(path); err != nil {
		return 0, err
	}
	if f.Unified() {
		return cpuV2(filepath.Join(f.root(), path))
	}
	return f.cpuV1(path)
}

func cpuV2(dir string) (uint64, error) {
	usec, err := flatKey(filepath.Join(dir, "cpu.stat"), "usage_usec")
	return usec * 1000, err
}

func (f FS) cpuV1(path string) (uint64, error) {
	cpuDir := filepath.Join(f.root(), "cpuacct")
	if _, err := os.Stat(cpuDir); err != nil {
		// Mounted together, without the usual symbolic links.
		cpuDir = filepath.Join(f.root(), "cpu,cpuacct")
	}
	return single(filepath.Join(cpuDir, path, "cpuacct.usage"))
}

// readV2 reads a v2 cgroup directory; memory only when withMemory (the
// root has no memory.current).
func (f FS) readV2(dir string, withMemory bool) (Reading, error) {
	cpu, err := cpuV2(dir)
	if err != nil {
		return Reading{}, err
	}
	r := Reading{CPUNanos: cpu}
	if !withMemory {
		return r, nil
	}
	usage, err := single(filepath.Join(dir, "memory.current"))
	if err != nil {
		return Reading{}, err
	}
	inactive, err := flatKey(filepath.Join(dir, "memory.stat"), "inactive_file")
	if err != nil {
		return Reading{}, err
	}
	r.WorkingSetBytes = sub(usage, inactive)
	return r, nil
}

// readV1 reads path under the cpuacct and memory hierarchies.
func (f FS) readV1(path string) (Reading, error) {
	cpu, err := f.cpuV1(path)
	if err != nil {
		return Reading{}, err
	}
	memDir := filepath.Join(f.root(), "memory", path)
	usage, err := single(filepath.Join(memDir, "memory.usage_in_bytes"))
	if err != nil {
		return Reading{}, err
	}
	inactive, err := flatKey(filepath.Join(memDir, "memory.stat"), "total_inactive_file")
	if err != nil {
		return Reading{}, err
	}
	return Reading{CPUNanos: cpu, WorkingSetBytes: sub(usage, inactive)}, nil
}

// OOMKilled reports whether the kernel's OOM killer killed a process of
// the cgroup at path: memory.events on v2, memory.oom_control on v1
// (kernel 4.13 or later). It must be asked before the cgroup is removed;
// a cgroup it cannot read reports false.
func (f FS) OOMKilled(path string) bool {
	if checkPath(path) != nil {
		return false
	}
	var n uint64
	if f.Unified() {
		n, _ = flatKey(filepath.Join(f.root(), path, "memory.events"), "oom_kill")
	} else {
		n, _ = flatKey(filepath.Join(f.root(), "memory", path, "memory.oom_control"), "oom_kill")
	}
	return n > 0
}

// sub is a − b, or 0 when b is larger (counters read at slightly
// different moments).
func sub(a, b uint64) uint64 {
	if b >= a {
		return 0
	}
	return a - b
}

// single reads a file holding one number.
func single(file string) (uint64, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseUint(string(bytes.TrimSpace(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %s: %w", ErrFormat, file, err)
	}
	return n, nil
}

// flatKey reads "key N" from a flat-keyed file; a key that is absent is
// an error.
func flatKey(file, key string) (uint64, error) {
	f, err := os.Open(file)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		k, v, ok := strings.Cut(s.Text(), " ")
		if !ok || k != key {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%w: %s: %s: %w", ErrFormat, file, key, err)
		}
		return n, nil
	}
	if err := s.Err(); err != nil {
		return 0, fmt.Errorf("%s: %w", file, err)
	}
	return 0, fmt.Errorf("%w: %s has no %s", ErrFormat, file, key)
}

// meminfo returns the values of keys (in bytes) from /proc/meminfo's
// "Key:   N kB" lines, in the order asked.
func meminfo(b []byte, keys ...string) ([]uint64, error) {
	out := make([]uint64, len(keys))
	found := 0
	for line := range bytes.Lines(b) {
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		for i, key := range keys {
			if string(k) != key {
				continue
			}
			fields := bytes.Fields(v)
			if len(fields) == 0 {
				return nil, fmt.Errorf("%w: meminfo %s has no value", ErrFormat, key)
			}
			n, err := strconv.ParseUint(string(fields[0]), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%w: meminfo %s: %w", ErrFormat, key, err)
			}
			if len(fields) > 1 && string(fields[1]) == "kB" {
				n <<= 10
			}
			out[i] = n
			found++
		}
	}
	if found < len(keys) {
		return nil, fmt.Errorf("%w: meminfo lacks one of %v", ErrFormat, keys)
	}
	return out, nil
}

// unlimitedV1 is the least value cgroup v1 reports for "no limit": the
// kernel rounds LONG_MAX down to its page size.
const unlimitedV1 = 1 << 62

// MemoryLimit returns the lowest memory limit that applies to the
// process pid ("self" for this one): on v2 memory.max and memory.high of
// its cgroup and every ancestor (a systemd unit's MemoryMax and
// MemoryHigh, and its slice's), on v1 memory.limit_in_bytes of its memory
// cgroup and its ancestors. ok is false when none is set, and when the
// kernel has no memory controller.
func (f FS) MemoryLimit(pid string) (limit uint64, ok bool, err error) {
	b, err := os.ReadFile(filepath.Join(f.proc(), pid, "cgroup"))
	if err != nil {
		return 0, false, fmt.Errorf("memory limit: %w", err)
	}
	unified := f.Unified()
	var path string
	found := false
	for line := range strings.Lines(string(b)) {
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if unified && parts[0] == "0" && parts[1] == "" {
			path, found = parts[2], true
			break
		}
		if !unified && slices.Contains(strings.Split(parts[1], ","), "memory") {
			path, found = parts[2], true
			break
		}
	}
	if !found {
		// A v1 kernel without the memory controller (cgroup_disable=memory,
		// as Raspberry Pi kernels boot): no limit to read.
		return 0, false, nil
	}
	base := f.root()
	files := []string{"memory.max", "memory.high"}
	if !unified {
		base = filepath.Join(base, "memory")
		files = []string{"memory.limit_in_bytes"}
	}
	// The mount's root, then each directory of the path that the mount
	// shows: a path not under the mount (the process is in a cgroup
	// namespace) is read as far as it exists.
	dirs := []string{base}
walk:
	for _, part := range strings.Split(path, "/") {
		switch part {
		case "":
			continue
		case "..":
			// A cgroup outside this namespace's root: what applies to it
			// cannot be read from here.
			return 0, false, nil
		}
		next := filepath.Join(dirs[len(dirs)-1], part)
		if _, err := os.Stat(next); err != nil {
			break walk
		}
		dirs = append(dirs, next)
	}
	for _, dir := range dirs {
		for _, name := range files {
			n, set, err := readLimit(filepath.Join(dir, name))
			if err != nil {
				return 0, false, err
			}
			if set && (!ok || n < limit) {
				limit, ok = n, true
			}
		}
	}
	return limit, ok, nil
}

// readLimit reads a memory limit file; one that is absent (the root has
// none), says "max" or holds v1's "no limit" sets none.
func readLimit(file string) (uint64, bool, error) {
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("memory limit: %w", err)
	}
	s := string(bytes.TrimSpace(b))
	if s == "max" {
		return 0, false, nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("%w: %s: %w", ErrFormat, file, err)
	}
	return n, n < unlimitedV1, nil
}

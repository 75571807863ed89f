package proc

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Process is what the benchmarks need to tell the processes of a node
// apart: its ID, parent, name and command line.
type Process struct {
	PID, PPID int
	// Comm is the kernel's short name of the process (/proc/PID/comm).
	Comm string
	// Args is the command line.
	Args []string
	// Root is where the process's root directory is (a container's
	// rootfs, or "/").
	Root string
	// State is the kernel's one-letter state (R, S, Z...).
	State string
}

// Processes lists every process of the machine that can be read. A
// process that ends while it is read is left out.
func Processes() []Process {
	ents, _ := os.ReadDir("/proc")
	var out []Process
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		p, err := ReadProcess(pid)
		if err != nil {
			continue
		}
		out = append(out, p)
	}
	return out
}

// ReadProcess reads process pid from /proc.
func ReadProcess(pid int) (Process, error) {
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	comm, f, err := readStat(pid)
	if err != nil {
		return Process{}, err
	}
	if len(f) < 2 {
		return Process{}, fmt.Errorf("parse %s/stat: %d fields", dir, len(f))
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return Process{}, fmt.Errorf("parse %s/stat: ppid: %w", dir, err)
	}
	p := Process{PID: pid, PPID: ppid, Comm: comm, State: f[0]}
	if cmd, err := os.ReadFile(filepath.Join(dir, "cmdline")); err == nil {
		for a := range bytes.SplitSeq(bytes.TrimRight(cmd, "\x00"), []byte{0}) {
			p.Args = append(p.Args, string(a))
		}
	}
	p.Root, _ = os.Readlink(filepath.Join(dir, "root"))
	return p, nil
}

// Names reports whether the process's command line or root directory
// contains s (a data directory: containerd and its shims name their
// socket or state in it, a container's root is a snapshot under it).
func (p Process) Names(s string) bool {
	if strings.Contains(p.Root, s) {
		return true
	}
	for _, a := range p.Args {
		if strings.Contains(a, s) {
			return true
		}
	}
	return false
}

// PSS returns a process's proportional set size in bytes: its private
// pages plus its share of pages it shares, so the PSS of many processes
// running one binary adds up to what they cost together, where their RSS
// counts the shared pages once per process.
func PSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Pss:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parse Pss of %d: %w", pid, err)
			}
			return kb * 1024, nil
		}
	}
	return 0, fmt.Errorf("no Pss in /proc/%d/smaps_rollup", pid)
}

// KillNaming sends SIGKILL to every process that Names s (but this one)
// and waits until none is left or ctx ends; it returns how many it
// killed, and an error naming those that outlived ctx.
func KillNaming(ctx context.Context, s string) (int, error) {
	killed := map[int]bool{}
	for {
		var left []int
		for _, p := range Processes() {
			if p.PID == os.Getpid() || !p.Names(s) {
				continue
			}
			left = append(left, p.PID)
			killed[p.PID] = true
			_ = syscall.Kill(p.PID, syscall.SIGKILL)
		}
		if len(left) == 0 {
			return len(killed), nil
		}
		select {
		case <-ctx.Done():
			return len(killed), fmt.Errorf("processes naming %s outlived SIGKILL: %v: %w", s, left, ctx.Err())
		case <-time.After(50 * time.Millisecond): // polling /proc for them to go
		}
	}
}

// MountsUnder lists the mount points at or below dir, deepest first, so
// they can be unmounted in that order.
func MountsUnder(dir string) ([]string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []string
	for l := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 5 {
			continue
		}
		// Field 5 is the mount point, with spaces and the like octal-escaped.
		mp := unescapeMount(f[4])
		if mp == dir || strings.HasPrefix(mp, strings.TrimSuffix(dir, "/")+"/") {
			out = append(out, mp)
		}
	}
	// Deeper paths first: a longer path cannot be a parent of a shorter one.
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out, nil
}

// unescapeMount undoes mountinfo's \ooo escapes.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// MemStatus is a process's resident memory by kind (/proc/PID/status).
type MemStatus struct {
	// RSS is Anon + File + Shmem.
	RSS int64
	// Anon is private memory: the Go heap, stacks.
	Anon int64
	// File is mapped files resident: mostly the executable's pages,
	// shared with every process of the same binary.
	File int64
	// Shmem is shared memory.
	Shmem int64
}

// Mem returns a process's resident memory by kind.
func Mem(pid int) (MemStatus, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return MemStatus{}, err
	}
	var m MemStatus
	fields := map[string]*int64{"VmRSS:": &m.RSS, "RssAnon:": &m.Anon, "RssFile:": &m.File, "RssShmem:": &m.Shmem}
	found := 0
	for l := range strings.SplitSeq(string(b), "\n") {
		k, v, ok := strings.Cut(l, ":")
		dst := fields[k+":"]
		if !ok || dst == nil {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
		if err != nil {
			return MemStatus{}, fmt.Errorf("parse %s of %d: %w", k, pid, err)
		}
		*dst = kb * 1024
		found++
	}
	if found != len(fields) {
		return MemStatus{}, fmt.Errorf("/proc/%d/status: %d of %d memory fields", pid, found, len(fields))
	}
	return m, nil
}

package netns

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// ownersDir holds one file per host number in use on this machine, naming
// the process that made it, so that a run killed before its cleanup (a
// CI job stopped, a test binary killed by its timeout) does not leave a
// subnet that routes the next run's traffic into a dead namespace.
var ownersDir = "/run/outpost-test-netns"

// processID is a process as its owner file names it: the PID with the
// process's start time, since PIDs are reused.
func processID(pid int) (string, bool) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", false
	}
	// The command name (field 2) may hold spaces; the fields after its
	// closing parenthesis do not. Start time is field 22.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return "", false
	}
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 20 {
		return "", false
	}
	return fmt.Sprintf("%d %s", pid, fields[19]), true
}

func ownerFile(key string) string { return filepath.Join(ownersDir, key) }

// claim takes host number n for this process (claimSubnet).
func claim(n int) error {
	return claimSubnet(strconv.Itoa(n), fmt.Sprintf("test host %d", n), fmt.Sprintf("10.213.%d.0/24", n), "opr", "op")
}

// claimSubnet takes subnet, under key, for this process. A key held by a
// process that is gone is taken back: its links on the subnet (named
// linkPrefix+tag) and their namespaces (nsPrefix+tag, none when empty)
// are removed first. A key held by a live process, or a subnet some
// other link of this machine carries, is refused with what holds it.
func claimSubnet(key, what, subnet, linkPrefix, nsPrefix string) error {
	me, ok := processID(os.Getpid())
	if !ok {
		return fmt.Errorf("netns: cannot read this process's start time")
	}
	if b, err := os.ReadFile(ownerFile(key)); err == nil {
		owner := strings.TrimSpace(string(b))
		if f := strings.Fields(owner); len(f) == 2 {
			pid, _ := strconv.Atoi(f[0])
			if now, alive := processID(pid); alive && now == owner {
				return fmt.Errorf("netns: %s is in use by process %d (another test run on this machine?)", what, pid)
			}
		}
	}
	out, err := exec.Command("ip", "-o", "-4", "addr", "show", "to", subnet).Output()
	if err != nil {
		return fmt.Errorf("netns: list links on %s: %w", subnet, err)
	}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		link := f[1]
		if !strings.HasPrefix(link, linkPrefix) {
			return fmt.Errorf("netns: %s is already on link %s of this machine", subnet, link)
		}
		// A test link whose owner is gone: what a killed run left.
		if err := run("ip", "link", "del", link); err != nil {
			return fmt.Errorf("netns: remove the stale test link %s: %w", link, err)
		}
		if nsPrefix == "" {
			continue
		}
		if err := run("ip", "netns", "del", nsPrefix+strings.TrimPrefix(link, linkPrefix)); err != nil && !strings.Contains(err.Error(), "No such file") {
			return fmt.Errorf("netns: remove the stale test namespace: %w", err)
		}
	}
	if err := os.MkdirAll(ownersDir, 0o755); err != nil {
		return fmt.Errorf("netns: %w", err)
	}
	if err := os.WriteFile(ownerFile(key), []byte(me+"\n"), 0o644); err != nil {
		return fmt.Errorf("netns: %w", err)
	}
	return nil
}

// release gives key back, if this process holds it.
func release(key string) {
	me, _ := processID(os.Getpid())
	if b, err := os.ReadFile(ownerFile(key)); err == nil && strings.TrimSpace(string(b)) == me {
		_ = os.Remove(ownerFile(key))
	}
}

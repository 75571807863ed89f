package memlimit

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"github.com/outpost-edge/outpost/internal/realtest"
	"github.com/outpost-edge/outpost/runtime/cgroups"
	"github.com/outpost-edge/outpost/runtime/cgroups/cgroupstest"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Spec
	}{
		{"", Spec{auto: true}},
		{"auto", Spec{auto: true}},
		{"none", Spec{}},
		{"0", Spec{}},
		{"600Mi", Spec{bytes: 600 << 20}},
		{"1Gi", Spec{bytes: 1 << 30}},
		{"500M", Spec{bytes: 500_000_000}},
		{"104857600", Spec{bytes: 100 << 20}},
	} {
		got, err := Parse("--memory-limit", tc.in)
		if err != nil || got != tc.want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"lots", "-1Gi", "10Mi", "1.5.6", "600 MB"} {
		_, err := Parse("--memory-limit", in)
		if err == nil || !strings.Contains(err.Error(), "--memory-limit") {
			t.Errorf("Parse(%q) = %v, want an error naming the flag", in, err)
		}
	}
}

// fakeCgroup is a v2 tree where the process's unit has memory.max max
// (0 for none).
func fakeCgroup(t *testing.T, max uint64) cgroups.FS {
	v := "max"
	if max > 0 {
		v = strconv.FormatUint(max, 10)
	}
	cg, proc := cgroupstest.Tree(t, map[string]string{
		"proc/self/cgroup":                           "0::/system.slice/outpost.service\n",
		"cg/cgroup.controllers":                      "memory\n",
		"cg/system.slice/outpost.service/memory.max": v + "\n",
	})
	return cgroups.FS{Root: cg, Proc: proc}
}

func TestResolve(t *testing.T) {
	noEnv := func(string) string { return "" }
	auto, _ := Parse("--memory-limit", "auto")
	fixed, _ := Parse("--memory-limit", "512Mi")
	none, _ := Parse("--memory-limit", "none")

	// The flag wins over the cgroup and the environment.
	l, err := fixed.Resolve(func(k string) string {
		if k == "GOMEMLIMIT" {
			return "1GiB"
		}
		return ""
	}, fakeCgroup(t, 1<<30))
	if err != nil || l.Bytes != 512<<20 {
		t.Errorf("512Mi: %+v, %v", l, err)
	}
	// Under a limit the collector waits for more garbage, unless GOGC
	// says otherwise.
	if l.GCPercent != 200 {
		t.Errorf("GOGC under a limit: %d, want 200", l.GCPercent)
	}
	l, _ = fixed.Resolve(func(k string) string {
		if k == "GOGC" {
			return "50"
		}
		return ""
	}, fakeCgroup(t, 0))
	if l.GCPercent != 0 {
		t.Errorf("GOGC=50 set: GCPercent %d, want 0 (left alone)", l.GCPercent)
	}
	l, err = none.Resolve(noEnv, fakeCgroup(t, 1<<30))
	if err != nil || l.Bytes != 0 || l.GCPercent != 0 {
		t.Errorf("none: %+v, %v", l, err)
	}
	// auto: 90% of a unit's MemoryMax, and GOGC left alone: a limit
	// found is a ceiling, not a budget to grow into.
	l, err = auto.Resolve(noEnv, fakeCgroup(t, 600<<20))
	if err != nil || l.Bytes != int64(float64(600<<20)*0.9) || !strings.Contains(l.From, "600 MiB") || l.GCPercent != 0 {
		t.Errorf("auto under MemoryMax=600M: %+v, %v", l, err)
	}
	// GOMEMLIMIT=off says no limit, whatever the cgroup's.
	l, err = auto.Resolve(func(k string) string {
		if k == "GOMEMLIMIT" {
			return "off"
		}
		return ""
	}, fakeCgroup(t, 600<<20))
	if err != nil || l.Bytes != 0 || l.GCPercent != 0 {
		t.Errorf("auto with GOMEMLIMIT=off: %+v, %v", l, err)
	}
	// auto without any limit: one that follows the live heap, GOGC
	// left alone.
	l, err = auto.Resolve(noEnv, fakeCgroup(t, 0))
	if err != nil || l.Bytes != 0 || !l.Follow || l.GCPercent != 0 {
		t.Errorf("auto, no limit: %+v, %v; want it to follow the heap", l, err)
	}
	// auto with GOMEMLIMIT: what the runtime made of it, not the cgroup's.
	old := debug.SetMemoryLimit(700 << 20)
	t.Cleanup(func() { debug.SetMemoryLimit(old) })
	l, err = auto.Resolve(func(k string) string {
		if k == "GOMEMLIMIT" {
			return "700MiB"
		}
		return ""
	}, fakeCgroup(t, 600<<20))
	if err != nil || l.Bytes != 700<<20 || !strings.Contains(l.From, "GOMEMLIMIT") {
		t.Errorf("auto with GOMEMLIMIT: %+v, %v", l, err)
	}
}

func TestApply(t *testing.T) {
	old := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(old) })
	oldGC := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(oldGC) })
	Apply(Limit{Bytes: 300 << 20, From: "--memory-limit", GCPercent: 200})
	if got := debug.SetMemoryLimit(-1); got != 300<<20 {
		t.Errorf("limit %d, want %d", got, 300<<20)
	}
	if got := debug.SetGCPercent(100); got != 200 {
		t.Errorf("GOGC %d under a limit, want 200", got)
	}
	Apply(Limit{From: "--memory-limit none"})
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("limit %d after none, want no limit", got)
	}
}

// TestCgroupLimitReal puts a child process in a real memory cgroup with a
// limit, as systemd does for MemoryMax=, and checks that auto gives it 90%
// of that limit (issue 16 item 3).
func TestCgroupLimitReal(t *testing.T) {
	fs := cgroups.FS{}
	var dir, limitFile string
	if fs.Unified() {
		dir = filepath.Join(cgroups.DefaultRoot, fmt.Sprintf("outpost-memlimit-test-%d", os.Getpid()))
		limitFile = "memory.max"
	} else {
		dir = filepath.Join(cgroups.DefaultRoot, "memory", fmt.Sprintf("outpost-memlimit-test-%d", os.Getpid()))
		limitFile = "memory.limit_in_bytes"
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		realtest.Require(t, "cannot make a memory cgroup (needs root): "+err.Error())
	}
	t.Cleanup(func() { os.Remove(dir) })
	const limit = 600 << 20
	if err := os.WriteFile(filepath.Join(dir, limitFile), []byte(strconv.Itoa(limit)), 0o644); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "MEMLIMIT_CHILD=1", "GOMEMLIMIT=")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Into the cgroup before the child reads its limit: it waits for a
	// line on stdin.
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal(err)
	}
	fmt.Fprintln(stdin, "go")
	stdin.Close()
	var got string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "LIMIT "); ok {
			got = v
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	want := strconv.FormatInt(int64(float64(limit)*0.9), 10)
	if got != want {
		t.Errorf("child's soft limit %q, want %s (90%% of its cgroup's %d)", got, want, limit)
	}
}

// TestMain runs TestCgroupLimitReal's child when asked to.
func TestMain(m *testing.M) {
	if os.Getenv("MEMLIMIT_CHILD") == "1" {
		os.Exit(child())
	}
	os.Exit(m.Run())
}

// child waits for a line on stdin (its parent moves it into a cgroup
// first), then resolves and applies auto and prints the runtime's limit.
func child() int {
	bufio.NewReader(os.Stdin).ReadString('\n')
	spec, _ := Parse("--memory-limit", Auto)
	l, err := spec.Resolve(os.Getenv, cgroups.FS{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	Apply(l)
	fmt.Printf("LIMIT %d\n", debug.SetMemoryLimit(-1))
	return 0
}

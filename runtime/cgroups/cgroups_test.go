package cgroups

import (
	"errors"
	"os"
	"slices"
	"testing"

	"github.com/outpost-edge/outpost/runtime/cgroups/cgroupstest"
)

func TestRead(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fs      FS
		unified bool
		want    Reading
		oom     bool
	}{
		// v1: cpuacct.usage is nanoseconds; the working set is
		// usage_in_bytes less total_inactive_file (the hierarchy's).
		{"v1", FS{Root: "testdata/v1"}, false, Reading{CPUNanos: 2_500_000_000, WorkingSetBytes: 104857600 - 2097152}, true},
		// cpu and cpuacct mounted as one hierarchy; inactive file cache
		// above usage (read at another moment) is a working set of 0.
		{"v1 cpu,cpuacct", FS{Root: "testdata/v1-joined"}, false, Reading{CPUNanos: 7000, WorkingSetBytes: 0}, false},
		// v2: usage_usec is microseconds; memory.current less
		// inactive_file.
		{"v2", FS{Root: "testdata/v2"}, true, Reading{CPUNanos: 1_500_000_000, WorkingSetBytes: 73400320 - 8388608}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.fs.Unified(); got != tc.unified {
				t.Errorf("Unified() = %v, want %v", got, tc.unified)
			}
			got, err := tc.fs.Read("/outpost/c1")
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("Read = %+v, want %+v", got, tc.want)
			}
			if cpu, err := tc.fs.CPU("/outpost/c1"); err != nil || cpu != tc.want.CPUNanos {
				t.Errorf("CPU = %d, %v; want %d", cpu, err, tc.want.CPUNanos)
			}
			if got := tc.fs.OOMKilled("/outpost/c1"); got != tc.oom {
				t.Errorf("OOMKilled = %v, want %v", got, tc.oom)
			}
			// A container whose cgroup is gone (stopped) says so.
			if _, err := tc.fs.Read("/outpost/gone"); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("Read of a missing cgroup: %v, want os.ErrNotExist", err)
			}
			if tc.fs.OOMKilled("/outpost/gone") {
				t.Error("OOMKilled of a missing cgroup is true")
			}
		})
	}
}

func TestReadNode(t *testing.T) {
	// v1: the root cgroup's own counters.
	got, err := FS{Root: "testdata/v1"}.ReadNode()
	if err != nil {
		t.Fatal(err)
	}
	if want := (Reading{CPUNanos: 125591282886, WorkingSetBytes: 1924919296 - 268435456}); got != want {
		t.Errorf("v1 node = %+v, want %+v", got, want)
	}
	// v2: the root's cpu.stat, and meminfo for memory (the root has no
	// memory.current): MemTotal − MemFree − Inactive(file).
	got, err = FS{Root: "testdata/v2", Proc: "testdata/v2/proc"}.ReadNode()
	if err != nil {
		t.Fatal(err)
	}
	if want := (Reading{CPUNanos: 167833700 * 1000, WorkingSetBytes: (4028440 - 1024000 - 500000) << 10}); got != want {
		t.Errorf("v2 node = %+v, want %+v", got, want)
	}
	if _, err := (FS{Root: "testdata/v2", Proc: "testdata/none"}).ReadNode(); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("v2 node without meminfo: %v, want os.ErrNotExist", err)
	}
}

func TestRefused(t *testing.T) {
	fs := FS{Root: "testdata/v2"}
	if _, err := fs.Read("system.slice:outpost:c1"); !errors.Is(err, ErrSystemdPath) {
		t.Errorf("systemd path: %v, want ErrSystemdPath", err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/cgroup.controllers", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir+"/cpu.stat", []byte("usage_usec many\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := (FS{Root: dir}).Read("/"); !errors.Is(err, ErrFormat) {
		t.Errorf("garbage in cpu.stat: %v, want ErrFormat", err)
	}
	if err := os.WriteFile(dir+"/cpu.stat", []byte("user_usec 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := (FS{Root: dir}).Read("/"); !errors.Is(err, ErrFormat) {
		t.Errorf("cpu.stat without usage_usec: %v, want ErrFormat", err)
	}
}

// TestHost reads this machine's own cgroups, whichever layout it has:
// the node's counters exist and CPU time moves.
func TestHost(t *testing.T) {
	if _, err := os.Stat(DefaultRoot); err != nil {
		t.Skip("no cgroupfs here")
	}
	var fs FS
	a, err := fs.ReadNode()
	if err != nil {
		t.Fatalf("unified=%v: %v", fs.Unified(), err)
	}
	if a.CPUNanos == 0 || a.WorkingSetBytes == 0 {
		t.Errorf("node reading %+v: want CPU time and memory in use", a)
	}
}

// treeFS is the FS of a tree of files (cgroupstest.Tree).
func treeFS(t *testing.T, files map[string]string) FS {
	root, proc := cgroupstest.Tree(t, files)
	return FS{Root: root, Proc: proc}
}

// TestMemoryLimit reads the limits that a systemd unit's MemoryMax and
// MemoryHigh (and its slice's) set, for the server's soft memory limit
// (issue 16 item 3).
func TestMemoryLimit(t *testing.T) {
	const unlimited = "9223372036854771712\n"
	for _, tc := range []struct {
		name   string
		files  map[string]string
		want   uint64
		wantOK bool
	}{
		{"v2 unit MemoryMax", map[string]string{
			"proc/self/cgroup":                                   "0::/system.slice/outpost-server.service\n",
			"cg/cgroup.controllers":                              "cpu memory\n",
			"cg/system.slice/memory.max":                         "max\n",
			"cg/system.slice/memory.high":                        "max\n",
			"cg/system.slice/outpost-server.service/memory.max":  "629145600\n",
			"cg/system.slice/outpost-server.service/memory.high": "max\n",
		}, 629145600, true},
		// The lowest of MemoryHigh, MemoryMax and the slice's counts.
		{"v2 slice and high", map[string]string{
			"proc/self/cgroup":                                   "0::/system.slice/outpost-server.service\n",
			"cg/cgroup.controllers":                              "cpu memory\n",
			"cg/system.slice/memory.max":                         "1073741824\n",
			"cg/system.slice/outpost-server.service/memory.max":  "2147483648\n",
			"cg/system.slice/outpost-server.service/memory.high": "536870912\n",
		}, 536870912, true},
		{"v2 none", map[string]string{
			"proc/self/cgroup":           "0::/user.slice\n",
			"cg/cgroup.controllers":      "cpu memory\n",
			"cg/user.slice/memory.max":   "max\n",
			"cg/user.slice/memory.high":  "max\n",
			"cg/user.slice/memory.peak":  "1\n",
			"cg/user.slice/cgroup.procs": "1\n",
		}, 0, false},
		// A cgroup namespace: the path is not under the mount, whose root
		// is the process's own cgroup.
		{"v2 namespaced", map[string]string{
			"proc/self/cgroup":      "0::/kubepods/pod1/c1\n",
			"cg/cgroup.controllers": "cpu memory\n",
			"cg/memory.max":         "268435456\n",
		}, 268435456, true},
		{"v1", map[string]string{
			"proc/self/cgroup":                                                    "5:devices:/\n4:memory:/system.slice/outpost-server.service\n1:cpu,cpuacct:/\n",
			"cg/memory/memory.limit_in_bytes":                                     unlimited,
			"cg/memory/system.slice/memory.limit_in_bytes":                        unlimited,
			"cg/memory/system.slice/outpost-server.service/memory.limit_in_bytes": "629145600\n",
		}, 629145600, true},
		// A v1 kernel booted without the memory controller.
		{"v1 no memory controller", map[string]string{
			"proc/self/cgroup":   "12:cpu,cpuacct:/a\n1:name=systemd:/x\n",
			"cg/cpu,cpuacct/a/x": "",
		}, 0, false},
		// Outside the cgroup namespace's root: nothing that applies can be
		// read, and the root's limit does not apply.
		{"v2 outside the namespace", map[string]string{
			"proc/self/cgroup":      "0::/../../sibling\n",
			"cg/cgroup.controllers": "memory\n",
			"cg/memory.max":         "1000000000\n",
		}, 0, false},
		{"v1 none", map[string]string{
			"proc/self/cgroup":                "4:memory:/\n",
			"cg/memory/memory.limit_in_bytes": unlimited,
		}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok, err := treeFS(t, tc.files).MemoryLimit("self")
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("MemoryLimit = %d, %v; want %d, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
	t.Run("refused", func(t *testing.T) {
		for name, files := range map[string]map[string]string{
			"not a number": {"proc/self/cgroup": "0::/a\n", "cg/cgroup.controllers": "memory\n",
				"cg/a/memory.max": "lots\n"},
		} {
			if _, _, err := treeFS(t, files).MemoryLimit("self"); err == nil {
				t.Errorf("%s: no error", name)
			}
		}
	})
}

// crun runs containers on a hybrid layout only while its cgroup2 tree
// holds no controller (Makefile host-deps); HybridControllers tells.
func TestHybridControllers(t *testing.T) {
	for _, tc := range []struct {
		root string
		want []string
	}{
		{"testdata/v1", nil},
		{"testdata/v2", nil},
		{"testdata/hybrid-all-v1", nil},
		{"testdata/hybrid", []string{"hugetlb", "misc"}},
	} {
		got, err := FS{Root: tc.root}.HybridControllers()
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s: HybridControllers() = %q, %v; want %q", tc.root, got, err, tc.want)
		}
	}
	if _, err := (FS{Root: "testdata/hybrid/unified/cgroup.controllers"}).HybridControllers(); err == nil {
		t.Error("a root that is a file: no error")
	}
}

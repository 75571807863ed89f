package cgroups

import (
	"errors"
	"os"
	"testing"
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

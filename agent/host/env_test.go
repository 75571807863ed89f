package host

import (
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
)

// fakeHost serves recorded inputs through an osEnv.
type fakeHost struct {
	files    map[string]string // path → contents; missing: fs.ErrNotExist
	fs       map[string]FSStats
	dirs     map[string][]string
	cpus     int
	release  string
	hostname string
	addrs    map[string][]netip.Addr
	up       []string
	reads    int
}

func (h *fakeHost) env() osEnv {
	return osEnv{
		readFile: func(path string, buf []byte) ([]byte, error) {
			h.reads++
			s, ok := h.files[path]
			if !ok {
				return buf, &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
			}
			return append(buf[:0], s...), nil
		},
		readDirNames: func(path string) ([]string, error) {
			d, ok := h.dirs[path]
			if !ok {
				return nil, &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
			}
			return d, nil
		},
		statfs: func(path string) (FSStats, error) {
			st, ok := h.fs[path]
			if !ok {
				return FSStats{}, &fs.PathError{Op: "statfs", Path: path, Err: fs.ErrNotExist}
			}
			return st, nil
		},
		cpus: func() (int, error) {
			if h.cpus == 0 {
				return 0, fmt.Errorf("sched_getaffinity: %w", fs.ErrPermission)
			}
			return h.cpus, nil
		},
		kernelRelease: func() (string, error) { return h.release, nil },
		hostname:      func() (string, error) { return h.hostname, nil },
		interfaceAddrs: func(name string) ([]netip.Addr, error) {
			a, ok := h.addrs[name]
			if !ok {
				return nil, fmt.Errorf("interface %s: no such network interface", name)
			}
			return a, nil
		},
		interfaces: func() ([]string, error) { return h.up, nil },
	}
}

// recorded is a file of testdata.
func recorded(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// healthyHost is a Debian host recorded on the build machine, with eth0 up
// and plenty of everything; tests change one part of it.
func healthyHost(t testing.TB) *fakeHost {
	return &fakeHost{
		files: map[string]string{
			pathMeminfo:                    recorded(t, "meminfo/debian12-host.txt"),
			pathPIDMax:                     "32768\n",
			pathLoadavg:                    "0.17 0.50 0.56 1/94 22713\n",
			pathRoute:                      recorded(t, "route/default-eth0.txt"),
			pathIPv6Route:                  recorded(t, "ipv6_route/default-eth0.txt"),
			operstatePath("eth0"):          "up\n",
			operstatePath("lo"):            "unknown\n",
			pathOSRelease:                  "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nNAME=\"Debian GNU/Linux\"\n",
			pathMachineID:                  "3d1219c7c4c5404aaa1f6d2a48adfda4\n",
			pathBootID:                     "0f5d0e2c-3c5e-4c8a-9a57-1b8f2f0c6a11\n",
			"/sys/class/dmi/id/sys_vendor": "QEMU\n",
		},
		fs: map[string]FSStats{
			"/var/lib/outpost": {AvailableBytes: 40 << 30, CapacityBytes: 100 << 30, InodesFree: 6_000_000, Inodes: 6_553_600},
		},
		cpus:     4,
		release:  "6.1.0-28-amd64",
		hostname: "edge-7",
		addrs: map[string][]netip.Addr{
			"eth0": {netip.MustParseAddr("fe80::1"), netip.MustParseAddr("192.0.2.17"), netip.MustParseAddr("fd00::17")},
			"lo":   {netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")},
		},
		up: []string{"eth0"},
	}
}

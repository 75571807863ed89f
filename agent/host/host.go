package host

import (
	"errors"
	"net/netip"
)

// Errors of this package.
var (
	// ErrThreshold is an eviction threshold setting that cannot be parsed;
	// the wrapped text lists every bad item and why.
	ErrThreshold = errors.New("bad eviction threshold")
	// ErrConfig is a FactsConfig or ObserveConfig that cannot be used; the
	// text names the field.
	ErrConfig = errors.New("bad host configuration")
	// ErrParse is a /proc or /sys file whose contents are not what the
	// kernel writes; the text names the file.
	ErrParse = errors.New("unreadable host file")
)

// Paths the package reads. They are relative to the root the osEnv
// serves, which is "/" on a real host and testdata/<case> in tests.
const (
	pathMeminfo    = "/proc/meminfo"
	pathPIDMax     = "/proc/sys/kernel/pid_max"
	pathLoadavg    = "/proc/loadavg"
	pathRoute      = "/proc/net/route"
	pathIPv6Route  = "/proc/net/ipv6_route"
	pathOSRelease  = "/etc/os-release"
	pathOSRelease2 = "/usr/lib/os-release"
	pathMachineID  = "/etc/machine-id"
	pathMachineID2 = "/var/lib/dbus/machine-id"
	pathBootID     = "/proc/sys/kernel/random/boot_id"
	pathSystemUUID = "/sys/class/dmi/id/product_uuid"
	pathProc       = "/proc"
)

// operstatePath is where the kernel says whether an interface is up.
func operstatePath(iface string) string { return "/sys/class/net/" + iface + "/operstate" }

// FSStats is what statfs says about the filesystem holding a directory.
// All zero means it was not observed.
type FSStats struct {
	// AvailableBytes is what an unprivileged writer may still use
	// (f_bavail), as the kubelet counts it; CapacityBytes is the size.
	AvailableBytes int64
	CapacityBytes  int64
	// InodesFree and Inodes are zero on filesystems without a fixed inode
	// table (btrfs), where inode signals are not judged.
	InodesFree int64
	Inodes     int64
}

// osEnv is every way the package touches the operating system, pulled out
// for testing: tests serve recorded files and numbers, the real one reads
// the host.
type osEnv struct {
	// readFile reads a whole file, appending to buf[:0] when it can so
	// the periodic reads reuse one buffer.
	readFile func(path string, buf []byte) ([]byte, error)
	// readDirNames lists the names in a directory (to count processes
	// when /proc/loadavg is unusable).
	readDirNames func(path string) ([]string, error)
	statfs       func(path string) (FSStats, error)
	// cpus is the number of CPUs the process may run on.
	cpus func() (int, error)
	// kernelRelease is uname's release.
	kernelRelease func() (string, error)
	hostname      func() (string, error)
	// interfaceAddrs lists an interface's addresses; interfaces lists the
	// names of all interfaces that are up and not loopback.
	interfaceAddrs func(name string) ([]netip.Addr, error)
	interfaces     func() ([]string, error)
}

package host

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"

	"golang.org/x/sys/unix"
)

// Facts reads the host's capacity, allocatable resources, node info and
// addresses. cpu is the number of CPUs this process may run on
// (sched_getaffinity: a cpuset or taskset limit counts), memory is
// MemTotal, ephemeral-storage the size of DataDir's filesystem.
func Facts(ctx context.Context, cfg FactsConfig) (NodeFacts, error) {
	return facts(ctx, linuxEnv(), cfg)
}

// Observe reads the host's pressure signals once: /proc/meminfo, statfs
// of the data and image filesystems, pid_max against the tasks in
// /proc/loadavg, and the default route's interface state. It returns what
// it could read, with an error naming each part it could not.
func Observe(ctx context.Context, cfg ObserveConfig) (Observation, error) {
	return observe(ctx, linuxEnv(), cfg)
}

func linuxEnv() osEnv {
	return osEnv{
		readFile:       readFileInto,
		readDirNames:   readDirNames,
		statfs:         statfs,
		cpus:           affinityCPUs,
		kernelRelease:  kernelRelease,
		hostname:       os.Hostname,
		interfaceAddrs: interfaceAddrs,
		interfaces:     upInterfaces,
	}
}

// readFileInto reads path into buf. Files of /proc and /sys report size
// 0, so it reads until EOF, growing buf as needed. Plain system calls, not
// os.File: these are small files read every few seconds, and os.File's
// poller registration and finalizer cost more than the read.
func readFileInto(path string, buf []byte) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return buf, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	if cap(buf) == 0 {
		buf = make([]byte, 0, 512)
	}
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return buf, &os.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
}

func readDirNames(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

func statfs(path string) (FSStats, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return FSStats{}, &os.PathError{Op: "statfs", Path: path, Err: err}
	}
	bs := int64(st.Bsize)
	return FSStats{
		AvailableBytes: int64(st.Bavail) * bs,
		CapacityBytes:  int64(st.Blocks) * bs,
		InodesFree:     int64(st.Ffree),
		Inodes:         int64(st.Files),
	}, nil
}

func affinityCPUs() (int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return 0, fmt.Errorf("sched_getaffinity: %w", err)
	}
	return set.Count(), nil
}

func kernelRelease() (string, error) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "", fmt.Errorf("uname: %w", err)
	}
	return unix.ByteSliceToString(u.Release[:]), nil
}

func interfaceAddrs(name string) ([]netip.Addr, error) {
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		return nil, fmt.Errorf("interface %s: %w", name, err)
	}
	addrs, err := ifc.Addrs()
	if err != nil {
		return nil, fmt.Errorf("addresses of %s: %w", name, err)
	}
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		if p, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(p.IP); ok {
				out = append(out, ip.Unmap())
			}
		}
	}
	return out, nil
}

func upInterfaces() ([]string, error) {
	ifcs, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("list interfaces: %w", err)
	}
	var out []string
	for _, i := range ifcs {
		if i.Flags&net.FlagUp != 0 && i.Flags&net.FlagLoopback == 0 {
			out = append(out, i.Name)
		}
	}
	return out, nil
}

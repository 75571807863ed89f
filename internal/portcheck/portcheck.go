package portcheck

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Use is an address a command is about to listen on.
type Use struct {
	// Network is "tcp" or "udp".
	Network string
	// Addr is host:port; an empty host or 0.0.0.0 is every address.
	Addr string
	// Flag names the setting that moves it, as the user types it
	// ("--agent-listen").
	Flag string
	// What says what listens there ("the agent's endpoint").
	What string
}

// Check tries each address and returns an error listing every one that
// is taken, with the process holding it when /proc tells, or nil when all
// are free. Port 0 is always free; a Use without an address is skipped.
func Check(uses []Use) error {
	var errs []error
	for _, u := range uses {
		if u.Addr == "" {
			continue
		}
		if err := Free(u.Network, u.Addr); err != nil {
			msg := fmt.Sprintf("%s %s (%s, %s) is in use", u.Network, u.Addr, u.Flag, u.What)
			if who := Holder(u.Network, u.Addr); who != "" {
				msg += " by " + who
			}
			errs = append(errs, fmt.Errorf("%s: %w", msg, err))
		}
	}
	return errors.Join(errs...)
}

// Free is nil when network ("tcp" or "udp") addr can be listened on now,
// else the kernel's reason.
func Free(network, addr string) error {
	switch network {
	case "udp":
		c, err := net.ListenPacket("udp", addr)
		if err != nil {
			return unwrapSyscall(err)
		}
		return c.Close()
	default:
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return unwrapSyscall(err)
		}
		return l.Close()
	}
}

// unwrapSyscall keeps the kernel's words ("address already in use")
// without the listener's repetition of the address.
func unwrapSyscall(err error) error {
	var se *os.SyscallError
	if errors.As(err, &se) {
		return se.Err
	}
	return err
}

// Holder names the process listening on network/addr ("pid 4242
// (containerd)"), or "" when it cannot be found: the socket is another
// user's and this one may not read its /proc, or /proc is missing.
func Holder(network, addr string) string {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		host, port, splitErr := net.SplitHostPort(addr)
		if splitErr != nil {
			return ""
		}
		if host == "" {
			host = "0.0.0.0"
		}
		if ap, err = netip.ParseAddrPort(net.JoinHostPort(host, port)); err != nil {
			return ""
		}
	}
	files := []string{"/proc/net/tcp", "/proc/net/tcp6"}
	if network == "udp" {
		files = []string{"/proc/net/udp", "/proc/net/udp6"}
	}
	var inodes []string
	for _, f := range files {
		inodes = append(inodes, socketInodes(f, network == "udp", ap)...)
	}
	for _, ino := range inodes {
		if who := processOf(ino); who != "" {
			return who
		}
	}
	return ""
}

// socketInodes reads a /proc/net table for sockets bound to ap's port
// that clash with it: on the same address, or on a wildcard on either
// side. TCP sockets count only when listening (state 0A).
func socketInodes(path string, udp bool, ap netip.AddrPort) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 {
			continue
		}
		local, ok := parseHexAddrPort(fields[1])
		if !ok || local.Port() != ap.Port() {
			continue
		}
		if !udp && fields[3] != "0A" {
			continue
		}
		la, want := local.Addr().Unmap(), ap.Addr().Unmap()
		if la != want && !la.IsUnspecified() && !want.IsUnspecified() {
			continue
		}
		out = append(out, fields[9])
	}
	return out
}

// parseHexAddrPort reads /proc/net's "0100007F:2802": the address in the
// kernel's byte order per 32-bit word, the port in hex.
func parseHexAddrPort(s string) (netip.AddrPort, bool) {
	a, p, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, false
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return netip.AddrPort{}, false
	}
	raw, err := hex.DecodeString(a)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.AddrPort{}, false
	}
	for i := 0; i+4 <= len(raw); i += 4 {
		raw[i], raw[i+1], raw[i+2], raw[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
	}
	addr, _ := netip.AddrFromSlice(raw)
	return netip.AddrPortFrom(addr, uint16(port)), true
}

// processOf finds the process with a descriptor of socket inode ino.
func processOf(ino string) string {
	target := "socket:[" + ino + "]"
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return ""
	}
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		dir := filepath.Join("/proc", p.Name(), "fd")
		fds, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if l, err := os.Readlink(filepath.Join(dir, fd.Name())); err == nil && l == target {
				comm, _ := os.ReadFile(filepath.Join("/proc", p.Name(), "comm"))
				return fmt.Sprintf("pid %d (%s)", pid, strings.TrimSpace(string(comm)))
			}
		}
	}
	return ""
}

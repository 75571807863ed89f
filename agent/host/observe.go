package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"sync"
)

// ObserveConfig says where to look.
type ObserveConfig struct {
	// DataDir is on the node filesystem (nodefs): pods' writable layers,
	// logs and the agent's state. Required.
	DataDir string
	// ImageDir is on the image filesystem (imagefs), containerd's root.
	// Empty: images share nodefs, and imagefs signals judge nodefs.
	ImageDir string
	// Interface, when given, is the one interface whose state decides
	// whether the node has a network, default route or not (an isolated
	// site's LAN may have none). Empty: the default route's interface.
	Interface string
}

// Observation is one look at the host's pressure signals. A part that
// could not be read is zero, and Conditions reports it as not observed.
type Observation struct {
	Memory  MemoryStats
	NodeFS  FSStats
	ImageFS FSStats
	PIDs    PIDStats
	Network NetworkStats
}

// MemoryStats is from /proc/meminfo.
type MemoryStats struct {
	// AvailableBytes is MemAvailable: what can be allocated without
	// swapping, page cache that can be dropped included.
	AvailableBytes int64
	TotalBytes     int64
}

// PIDStats compares the pid space with its use.
type PIDStats struct {
	// Max is kernel.pid_max; Running is the number of tasks (threads
	// included: each holds a pid), from /proc/loadavg.
	Max     int64
	Running int64
}

// Available is the number of pids still free.
func (p PIDStats) Available() int64 { return max(p.Max-p.Running, 0) }

// NetworkStats says how the node reaches the network.
type NetworkStats struct {
	// Interface is the default route's interface (or the configured
	// one); empty when there is no default route other than through
	// loopback.
	Interface string
	// Configured reports whether Interface was given in ObserveConfig
	// rather than found from the routing table.
	Configured bool
	// OperState is /sys/class/net/IF/operstate ("up", "down",
	// "unknown", ...); "absent" when the interface does not exist.
	OperState string
}

// Available reports whether the node has a usable network: a non-loopback
// interface that is up (operstate "unknown" counts as up, as virtual
// interfaces and some drivers never report more).
func (n NetworkStats) Available() bool {
	return n.Interface != "" && n.Interface != "lo" && operUp(n.OperState)
}

func operUp(s string) bool { return s == "up" || s == "unknown" }

// bufPool holds read buffers: the files read are small, and Observe runs
// every few seconds for the life of the agent.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 8<<10); return &b }}

// observe is Observe on any environment.
func observe(ctx context.Context, env osEnv, cfg ObserveConfig) (Observation, error) {
	var obs Observation
	if cfg.DataDir == "" {
		return obs, fmt.Errorf("%w: DataDir is required", ErrConfig)
	}
	if err := ctx.Err(); err != nil {
		return obs, fmt.Errorf("observe host: %w", err)
	}
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	var errs []error

	b, err := read(env, bp, pathMeminfo)
	if err == nil {
		obs.Memory, err = parseMeminfo(b)
	}
	if err != nil {
		errs = append(errs, err)
	}

	if obs.NodeFS, err = env.statfs(cfg.DataDir); err != nil {
		errs = append(errs, fmt.Errorf("statfs DataDir %s: %w", cfg.DataDir, err))
	}
	if cfg.ImageDir == "" {
		obs.ImageFS = obs.NodeFS
	} else if obs.ImageFS, err = env.statfs(cfg.ImageDir); err != nil {
		errs = append(errs, fmt.Errorf("statfs ImageDir %s: %w", cfg.ImageDir, err))
	}

	if obs.PIDs, err = observePIDs(env, bp); err != nil {
		errs = append(errs, err)
	}
	if err := ctx.Err(); err != nil {
		return obs, fmt.Errorf("observe host: %w", err)
	}
	obs.Network, err = observeNetwork(env, bp, cfg.Interface)
	if err != nil {
		errs = append(errs, err)
	}
	return obs, errors.Join(errs...)
}

func observePIDs(env osEnv, bp *[]byte) (PIDStats, error) {
	var p PIDStats
	b, err := read(env, bp, pathPIDMax)
	if err != nil {
		return p, err
	}
	if p.Max, err = parseInt(bytes.TrimSpace(b)); err != nil || p.Max <= 0 {
		return PIDStats{}, fmt.Errorf("%w: %s: %q is not a pid count", ErrParse, pathPIDMax, bytes.TrimSpace(b))
	}
	b, err = read(env, bp, pathLoadavg)
	if err == nil {
		if n, ok := parseLoadavgTasks(b); ok {
			p.Running = n
			return p, nil
		}
	}
	// Without a usable loadavg, count processes: threads go uncounted,
	// so this under-reports, but it is the best left.
	names, err := env.readDirNames(pathProc)
	if err != nil {
		return PIDStats{}, fmt.Errorf("count processes: %w", err)
	}
	for _, n := range names {
		if _, err := strconv.ParseUint(n, 10, 64); err == nil {
			p.Running++
		}
	}
	return p, nil
}

// defaultRoute is a default route found in a routing table.
type defaultRoute struct {
	iface  string
	metric uint64
}

func observeNetwork(env osEnv, bp *[]byte, iface string) (NetworkStats, error) {
	if iface != "" {
		return NetworkStats{Interface: iface, Configured: true, OperState: readOperState(env, bp, iface)}, nil
	}
	var (
		routes []defaultRoute
		errs   []error
		first  NetworkStats
	)
	// pick returns the first route of rs, by metric as the kernel picks,
	// whose interface is up; it remembers the first route seen at all.
	pick := func(rs []defaultRoute) (NetworkStats, bool) {
		slices.SortStableFunc(rs, func(a, b defaultRoute) int { return cmpUint(a.metric, b.metric) })
		for _, r := range rs {
			st := NetworkStats{Interface: r.iface, OperState: readOperState(env, bp, r.iface)}
			if st.Available() {
				return st, true
			}
			if first.Interface == "" {
				first = st
			}
		}
		return NetworkStats{}, false
	}
	// IPv4 first; the IPv6 table (often the longer one) is read only when
	// IPv4 has no usable default route.
	b, err := read(env, bp, pathRoute)
	if err != nil {
		errs = append(errs, err)
	} else {
		routes = parseRoutes4(b, routes)
		if st, ok := pick(routes); ok {
			return st, nil
		}
	}
	b, err = read(env, bp, pathIPv6Route)
	switch {
	case errors.Is(err, fs.ErrNotExist): // IPv6 disabled: nothing to learn
	case err != nil:
		errs = append(errs, err)
	default:
		if st, ok := pick(parseRoutes6(b, routes[:0])); ok {
			return st, nil
		}
	}
	return first, errors.Join(errs...)
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func readOperState(env osEnv, bp *[]byte, iface string) string {
	b, err := read(env, bp, operstatePath(iface))
	if err != nil {
		return "absent"
	}
	return operStateName(bytes.TrimSpace(b))
}

// operStateName returns the kernel's words as constants, so that the
// common answers cost no allocation.
func operStateName(b []byte) string {
	for _, s := range [...]string{"up", "down", "unknown", "dormant", "lowerlayerdown", "notpresent", "testing"} {
		if string(b) == s {
			return s
		}
	}
	return string(b)
}

// parseMeminfo reads MemTotal and MemAvailable (kB). Kernels before 3.14
// have no MemAvailable; there MemFree+Buffers+Cached stands in for it.
func parseMeminfo(b []byte) (MemoryStats, error) {
	var (
		m                     MemoryStats
		haveAvail             bool
		free, buffers, cached int64
	)
	for len(b) > 0 {
		var line []byte
		line, b, _ = bytes.Cut(b, []byte{'\n'})
		key, rest, ok := bytes.Cut(line, []byte{':'})
		if !ok {
			continue
		}
		var dst *int64
		switch string(key) {
		case "MemTotal":
			dst = &m.TotalBytes
		case "MemAvailable":
			dst, haveAvail = &m.AvailableBytes, true
		case "MemFree":
			dst = &free
		case "Buffers":
			dst = &buffers
		case "Cached":
			dst = &cached
		default:
			continue
		}
		v, err := parseKB(rest)
		if err != nil {
			return MemoryStats{}, fmt.Errorf("%w: %s: %s: %w", ErrParse, pathMeminfo, key, err)
		}
		*dst = v
	}
	if m.TotalBytes <= 0 {
		return MemoryStats{}, fmt.Errorf("%w: %s: no MemTotal", ErrParse, pathMeminfo)
	}
	if !haveAvail {
		m.AvailableBytes = min(free+buffers+cached, m.TotalBytes)
	}
	return m, nil
}

// parseKB reads "   16318196 kB" as bytes.
func parseKB(b []byte) (int64, error) {
	b = bytes.TrimSpace(b)
	num, unit, _ := bytes.Cut(b, []byte{' '})
	v, err := parseInt(num)
	if err != nil {
		return 0, err
	}
	switch string(bytes.TrimSpace(unit)) {
	case "kB":
		if v > (1<<63-1)/1024 {
			return 0, fmt.Errorf("%d kB does not fit", v)
		}
		return v * 1024, nil
	case "":
		return v, nil
	}
	return 0, fmt.Errorf("unit %q, want kB", unit)
}

// parseInt reads a non-negative decimal without allocating.
func parseInt(b []byte) (int64, error) {
	if len(b) == 0 || len(b) > 18 {
		return 0, fmt.Errorf("%q is not a number", b)
	}
	var v int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%q is not a number", b)
		}
		v = v*10 + int64(c-'0')
	}
	return v, nil
}

// parseLoadavgTasks reads the total of "running/total" in /proc/loadavg
// ("0.17 0.50 0.56 1/94 22713"): the number of tasks, threads included.
func parseLoadavgTasks(b []byte) (int64, bool) {
	f := 0
	for f < 3 {
		i := bytes.IndexByte(b, ' ')
		if i < 0 {
			return 0, false
		}
		b = bytes.TrimLeft(b[i:], " ")
		f++
	}
	field, _, _ := bytes.Cut(b, []byte{' '})
	_, total, ok := bytes.Cut(field, []byte{'/'})
	if !ok {
		return 0, false
	}
	n, err := parseInt(total)
	return n, err == nil && n > 0
}

// Route flags of the kernel (include/uapi/linux/route.h, ipv6_route.h).
const (
	rtfUp     = 0x0001
	rtfReject = 0x0200
)

// parseRoutes4 appends the default routes of /proc/net/route: destination
// and mask 0, route up, not through loopback (a default route through lo
// reaches nothing).
func parseRoutes4(b []byte, out []defaultRoute) []defaultRoute {
	first := true
	for len(b) > 0 {
		var line []byte
		line, b, _ = bytes.Cut(b, []byte{'\n'})
		if first { // the header
			first = false
			continue
		}
		var f [11][]byte
		if fieldsInto(line, f[:]) < 8 {
			continue
		}
		iface, dst, flags, metric, mask := f[0], f[1], f[3], f[6], f[7]
		if !allZero(dst) || !allZero(mask) || string(iface) == "lo" {
			continue
		}
		fl, err := parseHex(flags)
		if err != nil || fl&rtfUp == 0 || fl&rtfReject != 0 {
			continue
		}
		m, err := parseInt(metric)
		if err != nil {
			continue
		}
		out = append(out, defaultRoute{iface: string(iface), metric: uint64(m)})
	}
	return out
}

// parseRoutes6 appends the default routes of /proc/net/ipv6_route
// (destination ::/0, up, not a reject route, not through lo; the kernel
// lists an unreachable default through lo when there is none).
func parseRoutes6(b []byte, out []defaultRoute) []defaultRoute {
	for len(b) > 0 {
		var line []byte
		line, b, _ = bytes.Cut(b, []byte{'\n'})
		var f [10][]byte
		if fieldsInto(line, f[:]) < 10 {
			continue
		}
		dst, plen, metric, flags, iface := f[0], f[1], f[5], f[8], f[9]
		if !allZero(dst) || !allZero(plen) || string(iface) == "lo" {
			continue
		}
		fl, err := parseHex(flags)
		if err != nil || fl&rtfUp == 0 || fl&rtfReject != 0 {
			continue
		}
		m, err := parseHex(metric)
		if err != nil {
			continue
		}
		out = append(out, defaultRoute{iface: string(iface), metric: m})
	}
	return out
}

// read reads a file into the pooled buffer, keeping a grown buffer.
func read(env osEnv, bp *[]byte, path string) ([]byte, error) {
	b, err := env.readFile(path, (*bp)[:0])
	if cap(b) > cap(*bp) {
		*bp = b[:0]
	}
	return b, err
}

// parseHex reads a hexadecimal field of a routing table.
func parseHex(b []byte) (uint64, error) {
	if len(b) == 0 || len(b) > 16 {
		return 0, fmt.Errorf("%q is not hexadecimal", b)
	}
	var v uint64
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, fmt.Errorf("%q is not hexadecimal", b)
		}
		v = v<<4 | uint64(c)
	}
	return v, nil
}

// fieldsInto splits line on blanks into f without allocating and returns
// how many fields it found (at most len(f)).
func fieldsInto(line []byte, f [][]byte) int {
	n := 0
	for n < len(f) {
		line = bytes.TrimLeft(line, " \t")
		if len(line) == 0 {
			break
		}
		i := bytes.IndexAny(line, " \t")
		if i < 0 {
			i = len(line)
		}
		f[n] = line[:i]
		line = line[i:]
		n++
	}
	return n
}

func allZero(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if c != '0' {
			return false
		}
	}
	return true
}

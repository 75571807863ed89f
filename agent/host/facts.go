package host

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/version"
)

// DefaultMaxPods is the pods capacity when FactsConfig.MaxPods is zero
// (the kubelet's default).
const DefaultMaxPods = 110

// FactsConfig says what to report and what to hold back.
type FactsConfig struct {
	// DataDir is on the filesystem whose size is the ephemeral-storage
	// capacity. Required.
	DataDir string
	// ImageDir is containerd's root; it is not part of the capacity
	// (images are not pods' storage) but must be readable when given.
	ImageDir string
	// Reserved is held back from capacity for the system (cpu, memory,
	// ephemeral-storage).
	Reserved api.ResourceList
	// MaxPods is the pods capacity; 0 means DefaultMaxPods.
	MaxPods int64
	// Evictions are the hard eviction thresholds: memory.available and
	// nodefs.available are held back from allocatable as well, as the
	// kubelet does, so the scheduler never fills a node into eviction.
	Evictions []Threshold
	// Address is the node's InternalIP; empty: the address of Interface,
	// else of the default route's interface, else of the first
	// interface that is up.
	Address string
	// Interface is the network interface the node is reached on (see
	// ObserveConfig.Interface).
	Interface string
	// Hostname is the Hostname address; empty: the host's name.
	Hostname string
}

// NodeFacts is what the agent registers about its host.
type NodeFacts struct {
	Capacity    api.ResourceList
	Allocatable api.ResourceList
	// NodeInfo is filled but for ContainerRuntimeVersion, which the
	// agent learns from its runtime; KubeletVersion is outpost's version.
	NodeInfo  api.NodeSystemInfo
	Addresses []api.NodeAddress
}

// reservable are the resources Reserved may name.
var reservable = []string{api.ResourceCPU, api.ResourceMemory, api.ResourceEphemeralStorage}

// facts is Facts on any environment.
func facts(ctx context.Context, env osEnv, cfg FactsConfig) (NodeFacts, error) {
	var nf NodeFacts
	if err := checkFactsConfig(&cfg); err != nil {
		return nf, err
	}
	if err := ctx.Err(); err != nil {
		return nf, fmt.Errorf("host facts: %w", err)
	}
	cpus, err := env.cpus()
	if err != nil {
		return nf, fmt.Errorf("host facts: cpus: %w", err)
	}
	b, err := env.readFile(pathMeminfo, nil)
	if err != nil {
		return nf, fmt.Errorf("host facts: %w", err)
	}
	mem, err := parseMeminfo(b)
	if err != nil {
		return nf, fmt.Errorf("host facts: %w", err)
	}
	fsst, err := env.statfs(cfg.DataDir)
	if err != nil {
		return nf, fmt.Errorf("host facts: statfs DataDir %s: %w", cfg.DataDir, err)
	}
	if cfg.ImageDir != "" {
		if _, err := env.statfs(cfg.ImageDir); err != nil {
			return nf, fmt.Errorf("host facts: statfs ImageDir %s: %w", cfg.ImageDir, err)
		}
	}
	nf.Capacity = api.ResourceList{
		api.ResourceCPU:              api.NewQuantity(int64(cpus)),
		api.ResourceMemory:           bytesQuantity(mem.TotalBytes),
		api.ResourcePods:             api.NewQuantity(cfg.MaxPods),
		api.ResourceEphemeralStorage: bytesQuantity(fsst.CapacityBytes),
	}
	nf.Allocatable = Allocatable(nf.Capacity, cfg.Reserved, cfg.Evictions)

	if nf.NodeInfo, err = systemInfo(env); err != nil {
		return nf, err
	}
	if nf.Addresses, err = addresses(env, cfg); err != nil {
		return nf, err
	}
	return nf, nil
}

func checkFactsConfig(cfg *FactsConfig) error {
	var problems []string
	if cfg.DataDir == "" {
		problems = append(problems, "DataDir: required")
	}
	switch {
	case cfg.MaxPods == 0:
		cfg.MaxPods = DefaultMaxPods
	case cfg.MaxPods < 0:
		problems = append(problems, fmt.Sprintf("MaxPods: %d is negative", cfg.MaxPods))
	}
	for _, name := range sortedKeys(cfg.Reserved) {
		q := cfg.Reserved[name]
		switch {
		case !slices.Contains(reservable, name):
			problems = append(problems, fmt.Sprintf("Reserved[%s]: cannot reserve %q (only %s)", name, name, strings.Join(reservable, ", ")))
		case q.MilliValue() < 0:
			problems = append(problems, fmt.Sprintf("Reserved[%s]: %s is negative", name, q))
		}
	}
	if cfg.Address != "" {
		if _, err := netip.ParseAddr(cfg.Address); err != nil {
			problems = append(problems, fmt.Sprintf("Address: %q is not an IP address", cfg.Address))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s", ErrConfig, strings.Join(problems, "; "))
	}
	return nil
}

func sortedKeys(rl api.ResourceList) []string {
	keys := make([]string, 0, len(rl))
	for k := range rl {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Allocatable is capacity less reserved and less the hard eviction
// thresholds of memory.available (from memory) and nodefs.available (from
// ephemeral-storage), a percentage taken of the capacity; nothing goes
// below zero. Resources of capacity that nothing reserves are copied.
func Allocatable(capacity, reserved api.ResourceList, evictions []Threshold) api.ResourceList {
	held := make(map[string]int64, 3) // milli units
	for name, q := range reserved {
		held[name] += max(q.MilliValue(), 0)
	}
	for _, t := range evictions {
		var name string
		switch t.Signal {
		case SignalMemoryAvailable:
			name = api.ResourceMemory
		case SignalNodeFSAvailable:
			name = api.ResourceEphemeralStorage
		default:
			continue
		}
		c, ok := capacity[name]
		if !ok {
			continue
		}
		held[name] = satAdd(held[name], satMul1000(t.Limit(c.Value())))
	}
	out := make(api.ResourceList, len(capacity))
	for name, c := range capacity {
		h, ok := held[name]
		if !ok || h == 0 {
			out[name] = c
			continue
		}
		left := max(c.MilliValue()-h, 0)
		if name == api.ResourceMemory || name == api.ResourceEphemeralStorage {
			out[name] = bytesQuantity(left / 1000) // whole bytes
		} else {
			out[name] = api.NewMilliQuantity(left)
		}
	}
	return out
}

func satAdd(a, b int64) int64 {
	if s := a + b; s >= a {
		return s
	}
	return 1<<63 - 1
}

func satMul1000(v int64) int64 {
	if v > (1<<63-1)/1000 {
		return 1<<63 - 1
	}
	return v * 1000
}

// bytesQuantity writes an amount of bytes as Kubernetes writes memory:
// in Ki when it is a whole number of them, else in bytes.
func bytesQuantity(b int64) api.Quantity {
	if b > 0 && b%1024 == 0 {
		if q, err := api.ParseQuantity(strconv.FormatInt(b/1024, 10) + "Ki"); err == nil {
			return q
		}
	}
	return api.NewQuantity(b)
}

// systemInfo reads what identifies the host and its software. The files
// that are missing on some hosts (machine-id in minimal images, DMI on
// boards without it) leave their field empty.
func systemInfo(env osEnv) (api.NodeSystemInfo, error) {
	info := api.NodeSystemInfo{OperatingSystem: runtime.GOOS, Architecture: runtime.GOARCH, KubeletVersion: version.Version}
	rel, err := env.kernelRelease()
	if err != nil {
		return info, fmt.Errorf("host facts: kernel release: %w", err)
	}
	info.KernelVersion = rel
	for _, p := range []string{pathOSRelease, pathOSRelease2} {
		if b, err := env.readFile(p, nil); err == nil {
			info.OSImage = prettyName(b)
			break
		}
	}
	if info.OSImage == "" {
		info.OSImage = "Linux"
	}
	for _, p := range []string{pathMachineID, pathMachineID2} {
		if b, err := env.readFile(p, nil); err == nil {
			if id := strings.TrimSpace(string(b)); id != "" {
				info.MachineID = id
				break
			}
		}
	}
	if b, err := env.readFile(pathBootID, nil); err == nil {
		info.BootID = strings.TrimSpace(string(b))
	}
	if b, err := env.readFile(pathSystemUUID, nil); err == nil {
		info.SystemUUID = strings.TrimSpace(string(b))
	}
	return info, nil
}

// prettyName is PRETTY_NAME of an os-release file (shell-style quoting),
// falling back to NAME.
func prettyName(b []byte) string {
	var name string
	for len(b) > 0 {
		var line []byte
		line, b, _ = bytes.Cut(b, []byte{'\n'})
		k, v, ok := bytes.Cut(bytes.TrimSpace(line), []byte{'='})
		if !ok {
			continue
		}
		switch string(k) {
		case "PRETTY_NAME":
			return unquoteOSRelease(v)
		case "NAME":
			name = unquoteOSRelease(v)
		}
	}
	return name
}

func unquoteOSRelease(v []byte) string {
	s := string(v)
	if len(s) >= 2 && (s[0] == '"' || s[0] == '\'') && s[len(s)-1] == s[0] {
		s = s[1 : len(s)-1]
		if v[0] == '"' {
			r := strings.NewReplacer(`\"`, `"`, `\\`, `\`, "\\`", "`", `\$`, `$`)
			s = r.Replace(s)
		}
	}
	return s
}

// addresses is the Hostname address and the InternalIP, chosen as
// FactsConfig.Address says.
func addresses(env osEnv, cfg FactsConfig) ([]api.NodeAddress, error) {
	name := cfg.Hostname
	if name == "" {
		h, err := env.hostname()
		if err != nil {
			return nil, fmt.Errorf("host facts: hostname: %w", err)
		}
		name = h
	}
	out := []api.NodeAddress{{Type: "Hostname", Address: name}}
	ip, err := internalIP(env, cfg)
	if err != nil {
		return nil, err
	}
	if ip.IsValid() {
		out = append([]api.NodeAddress{{Type: "InternalIP", Address: ip.String()}}, out...)
	}
	return out, nil
}

func internalIP(env osEnv, cfg FactsConfig) (netip.Addr, error) {
	if cfg.Address != "" {
		return netip.ParseAddr(cfg.Address)
	}
	if cfg.Interface != "" {
		ip, err := ifaceIP(env, cfg.Interface)
		if err != nil {
			return netip.Addr{}, fmt.Errorf("host facts: Interface %s: %w", cfg.Interface, err)
		}
		if !ip.IsValid() {
			return netip.Addr{}, fmt.Errorf("%w: Interface %s has no usable address", ErrConfig, cfg.Interface)
		}
		return ip, nil
	}
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	var candidates []string
	if nst, _ := observeNetwork(env, bp, ""); nst.Interface != "" {
		candidates = append(candidates, nst.Interface)
	}
	// No default route (an isolated site): any interface that is up.
	if up, err := env.interfaces(); err == nil {
		candidates = append(candidates, up...)
	}
	for _, c := range candidates {
		if ip, err := ifaceIP(env, c); err == nil && ip.IsValid() {
			return ip, nil
		}
	}
	return netip.Addr{}, nil
}

// ifaceIP is the interface's first global unicast IPv4 address, else its
// first global unicast IPv6 one; invalid when it has neither.
func ifaceIP(env osEnv, name string) (netip.Addr, error) {
	addrs, err := env.interfaceAddrs(name)
	if err != nil {
		return netip.Addr{}, err
	}
	var v6 netip.Addr
	for _, a := range addrs {
		a = a.Unmap()
		if !a.IsGlobalUnicast() {
			continue
		}
		if a.Is4() {
			return a, nil
		}
		if !v6.IsValid() {
			v6 = a
		}
	}
	return v6, nil
}

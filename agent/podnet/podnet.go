package podnet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/outpost-edge/outpost/internal/linuxns"
)

// Defaults of a node, as the CNI ecosystem lays them out (Debian's
// containernetworking-plugins install to /usr/lib/cni; upstream's
// release archives to /opt/cni/bin).
var (
	DefaultConfDir  = "/etc/cni/net.d"
	DefaultBinDirs  = []string{"/usr/lib/cni", "/opt/cni/bin"}
	DefaultStateDir = "/run/outpost/netns"
	DefaultCacheDir = "/var/lib/outpost/cni"
)

// Config says where a node's CNI configuration, plugins and state are.
type Config struct {
	ConfDir  string
	BinDirs  []string
	StateDir string
	// CacheDir holds libcni's record of each ADD (the configuration and
	// result), which DEL uses after an agent restart; and the default
	// network's IP address leases.
	CacheDir string
	// Bridge is the default network's bridge device (default outpost0).
	Bridge string
	Logger *slog.Logger
}

// Manager sets up and tears down pods' networks. Its methods are safe
// for concurrent use on different pods.
type Manager struct {
	cfg Config
	cni *libcni.CNIConfig
	log *slog.Logger
}

// New returns a Manager for cfg, its unset fields the defaults.
// MissingPlugins are those of plugins that none of binDirs holds.
func MissingPlugins(binDirs []string, plugins ...string) []string {
	var missing []string
	for _, p := range plugins {
		if !slices.ContainsFunc(binDirs, func(d string) bool {
			_, err := os.Stat(filepath.Join(d, p))
			return err == nil
		}) {
			missing = append(missing, p)
		}
	}
	return missing
}

// HostMissing says what a host lacks for pods' own networks (the bridge
// and host-local plugins in binDirs, iptables and nft on the PATH), one
// item each, or nothing when it has it all.
func HostMissing(binDirs []string) []string {
	var missing []string
	for _, plugin := range MissingPlugins(binDirs, "bridge", "host-local") {
		missing = append(missing, "the CNI plugin "+plugin+" is not in "+strings.Join(binDirs, ",")+" (Debian's containernetworking-plugins)")
	}
	for _, tool := range []string{"iptables", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool+" is not installed")
		}
	}
	return missing
}

func New(cfg Config) (*Manager, error) {
	if cfg.ConfDir == "" {
		cfg.ConfDir = DefaultConfDir
	}
	if len(cfg.BinDirs) == 0 {
		cfg.BinDirs = DefaultBinDirs
	}
	if cfg.StateDir == "" {
		cfg.StateDir = DefaultStateDir
	}
	if cfg.CacheDir == "" {
		cfg.CacheDir = DefaultCacheDir
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	// A node without the bridge plugin has no plugins at all.
	if len(MissingPlugins(cfg.BinDirs, "bridge")) > 0 {
		return nil, fmt.Errorf("podnet: no CNI plugins in %s (install Debian's containernetworking-plugins)", strings.Join(cfg.BinDirs, ", "))
	}
	for _, d := range []string{cfg.StateDir, cfg.CacheDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("podnet: %w", err)
		}
	}
	return &Manager{cfg: cfg, cni: libcni.NewCNIConfigWithCacheDir(cfg.BinDirs, cfg.CacheDir, nil), log: cfg.Logger}, nil
}

// Pod is what the plugins are told of a pod.
type Pod struct {
	Namespace, Name, UID string
	// Ports are the pod's hostPort mappings (the portmap plugin's
	// portMappings capability).
	Ports []PortMapping
}

// PortMapping is a host port forwarded to a pod's port.
type PortMapping struct {
	HostPort      int32  `json:"hostPort"`
	ContainerPort int32  `json:"containerPort"`
	Protocol      string `json:"protocol"`
	HostIP        string `json:"hostIP,omitempty"`
}

// Network is a pod's network as set up.
type Network struct {
	// NetNS is the path of the pod's network namespace, for its
	// containers' runtime spec.
	NetNS string
	// IPs are the pod's addresses, the first the primary (podIP).
	IPs []netip.Addr
}

// ifName is the pod's interface, as every Kubernetes runtime names it.
const ifName = "eth0"

func (m *Manager) nsPath(uid string) string { return filepath.Join(m.cfg.StateDir, uid) }

func (m *Manager) runtimeConf(p Pod) *libcni.RuntimeConf {
	rt := &libcni.RuntimeConf{
		ContainerID: p.UID,
		NetNS:       m.nsPath(p.UID),
		IfName:      ifName,
		Args: [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", p.Namespace},
			{"K8S_POD_NAME", p.Name}, {"K8S_POD_INFRA_CONTAINER_ID", p.UID}, {"K8S_POD_UID", p.UID}},
	}
	if len(p.Ports) > 0 {
		rt.CapabilityArgs = map[string]any{"portMappings": p.Ports}
	}
	return rt
}

// Setup gives pod p its network: a namespace, lo up (directly: a CRI
// runtime runs the loopback plugin for it, a process start this does
// without), and the configured
// network's interface and addresses. A pod already set up (this agent's
// earlier run did it) is answered from libcni's cache. A failure leaves
// nothing behind.
func (m *Manager) Setup(ctx context.Context, p Pod) (Network, error) {
	if p.UID == "" || strings.ContainsAny(p.UID, "/.") {
		return Network{}, fmt.Errorf("podnet: pod %s/%s: bad UID %q", p.Namespace, p.Name, p.UID)
	}
	list, err := m.confList()
	if err != nil {
		return Network{}, err
	}
	rt := m.runtimeConf(p)
	list = withoutUnused(list, p)
	if linuxns.Is(rt.NetNS) {
		if res, err := m.cni.GetNetworkListCachedResult(list, rt); err == nil && res != nil {
			return m.network(rt.NetNS, res)
		}
	}
	_ = linuxns.Remove(rt.NetNS) // a file a crash left before its bind
	if err := linuxns.New(rt.NetNS); err != nil {
		return Network{}, fmt.Errorf("podnet: pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	fail := func(err error) (Network, error) {
		_ = m.cni.DelNetworkList(context.WithoutCancel(ctx), list, rt)
		_ = linuxns.Remove(rt.NetNS)
		return Network{}, fmt.Errorf("podnet: pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	if err := linuxns.LoopbackUp(rt.NetNS); err != nil {
		return fail(err)
	}
	res, err := m.cni.AddNetworkList(ctx, list, rt)
	if err != nil {
		return fail(fmt.Errorf("network %q (%s): %w", list.Name, m.cfg.ConfDir, err))
	}
	n, err := m.network(rt.NetNS, res)
	if err != nil {
		return fail(err)
	}
	m.log.Debug("pod network set up", "pod", p.Namespace+"/"+p.Name, "netns", n.NetNS, "ips", n.IPs)
	return n, nil
}

// network reads the addresses of the pod's interface from a plugin
// chain's result.
func (m *Manager) network(ns string, res types.Result) (Network, error) {
	r, err := types100.NewResultFromResult(res)
	if err != nil {
		return Network{}, fmt.Errorf("the network's result: %w", err)
	}
	n := Network{NetNS: ns}
	for _, ip := range r.IPs {
		// Addresses of the host's side (a bridge's gateway) are not the
		// pod's.
		if ip.Interface != nil && *ip.Interface >= 0 && *ip.Interface < len(r.Interfaces) && r.Interfaces[*ip.Interface].Sandbox == "" {
			continue
		}
		if a, ok := netip.AddrFromSlice(ip.Address.IP); ok {
			n.IPs = append(n.IPs, a.Unmap())
		}
	}
	if len(n.IPs) == 0 {
		return Network{}, fmt.Errorf("the network gave the pod no address")
	}
	return n, nil
}

// withoutUnused is list without the portmap plugin when p maps no host
// port: it would do nothing but cost a process start (some 7 ms of a
// pod's start). Teardown runs the whole list, as cached at ADD.
func withoutUnused(list *libcni.NetworkConfigList, p Pod) *libcni.NetworkConfigList {
	if len(p.Ports) > 0 {
		return list
	}
	out := *list
	out.Plugins = slices.DeleteFunc(slices.Clone(list.Plugins), func(c *libcni.NetworkConfig) bool {
		return c.Network != nil && c.Network.Type == "portmap"
	})
	return &out
}

// Teardown removes pod p's network: the plugins' DEL (with the
// configuration they were given at ADD, if cached) and its namespace.
// A pod without one is no error.
func (m *Manager) Teardown(ctx context.Context, p Pod) error {
	rt := m.runtimeConf(p)
	list, err := m.confList()
	if err != nil {
		return err
	}
	if raw, cached, err := m.cni.GetNetworkListCachedConfig(list, rt); err == nil && raw != nil {
		if l, err := libcni.ConfListFromBytes(raw); err == nil {
			list = l
		}
		if cached != nil {
			rt.CapabilityArgs = cached.CapabilityArgs
		}
	}
	if !linuxns.Is(rt.NetNS) {
		rt.NetNS = "" // plugins then only release what they hold
	}
	var errs []error
	if err := m.cni.DelNetworkList(ctx, list, rt); err != nil {
		errs = append(errs, fmt.Errorf("network %q: %w", list.Name, err))
	}
	if err := linuxns.Remove(m.nsPath(p.UID)); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("podnet: pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	return nil
}

// WriteDefault writes the default network over the node's pod CIDR to
// the configuration directory unless the site has its own there
// (WriteDefault); mtu, when not 0, is its pods' links' MTU.
func (m *Manager) WriteDefault(podCIDR, clusterCIDR netip.Prefix, mtu int) error {
	wrote, err := WriteDefault(m.cfg.ConfDir, DefaultNetwork{Bridge: m.cfg.Bridge, PodCIDR: podCIDR, IPAMDir: filepath.Join(m.cfg.CacheDir, "ipam"), MTU: mtu})
	if err != nil {
		return err
	}
	if wrote {
		m.log.Info("wrote the default pod network", "file", filepath.Join(m.cfg.ConfDir, DefaultConfName), "pod_cidr", podCIDR)
	}
	if l, err := m.confList(); err == nil && l.Name == "outpost" {
		return ensureHostRules(context.Background(), podCIDR, clusterCIDR)
	}
	return nil
}

// Has reports whether pod uid has a network namespace here.
func (m *Manager) Has(uid string) bool { return linuxns.Is(m.nsPath(uid)) }

// Pods lists the UIDs of the pods with a network namespace here.
func (m *Manager) Pods() []string {
	entries, err := os.ReadDir(m.cfg.StateDir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir() && !strings.HasSuffix(e.Name(), ".tmp") {
			out = append(out, e.Name())
		}
	}
	return out
}

// Configured reports whether the configuration directory holds a network.
func (m *Manager) Configured() bool {
	_, err := m.confList()
	return err == nil
}

// confList is the network pods join: the first conflist (or conf) of the
// configuration directory by name, as CNI orders them.
func (m *Manager) confList() (*libcni.NetworkConfigList, error) {
	files, err := libcni.ConfFiles(m.cfg.ConfDir, []string{".conflist", ".conf", ".json"})
	if err != nil {
		return nil, fmt.Errorf("podnet: read %s: %w", m.cfg.ConfDir, err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("podnet: no CNI network configuration in %s", m.cfg.ConfDir)
	}
	slices.Sort(files)
	f := files[0]
	if strings.HasSuffix(f, ".conflist") {
		l, err := libcni.ConfListFromFile(f)
		if err != nil {
			return nil, fmt.Errorf("podnet: %w", err)
		}
		return l, nil
	}
	c, err := libcni.ConfFromFile(f)
	if err != nil {
		return nil, fmt.Errorf("podnet: %w", err)
	}
	l, err := libcni.ConfListFromConf(c)
	if err != nil {
		return nil, fmt.Errorf("podnet: %s: %w", f, err)
	}
	return l, nil
}

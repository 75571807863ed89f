package host

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// envObserveChild makes the test binary a child that prints one
// Observe of the host it runs in (a network namespace) as JSON and exits.
const envObserveChild = "OUTPOST_HOST_OBSERVE_CHILD"

func TestMain(m *testing.M) {
	if dir := os.Getenv(envObserveChild); dir != "" {
		obs, err := Observe(context.Background(), ObserveConfig{DataDir: dir})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		_ = json.NewEncoder(os.Stdout).Encode(obs)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// TestFactsRealHost runs Facts on this machine and checks each value
// against a second, independent reading.
func TestFactsRealHost(t *testing.T) {
	dir := t.TempDir()
	f, err := Facts(context.Background(), FactsConfig{DataDir: dir, Reserved: api.ResourceList{"cpu": q("100m")}, Evictions: DefaultThresholds()})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("capacity %v allocatable %v info %+v addresses %v", f.Capacity, f.Allocatable, f.NodeInfo, f.Addresses)

	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatal(err)
	}
	if got := f.Capacity["cpu"].Value(); got != int64(set.Count()) || got < 1 {
		t.Errorf("cpu %d, sched_getaffinity says %d", got, set.Count())
	}
	if got := f.Allocatable["cpu"].MilliValue(); got != int64(set.Count())*1000-100 {
		t.Errorf("allocatable cpu %dm, want %dm", got, int64(set.Count())*1000-100)
	}

	memTotal := meminfoField(t, "MemTotal")
	if got := f.Capacity["memory"].Value(); got != memTotal || got <= 0 {
		t.Errorf("memory %d, MemTotal %d", got, memTotal)
	}
	if got := f.Allocatable["memory"].Value(); got != memTotal-100<<20 {
		t.Errorf("allocatable memory %d, want MemTotal-100Mi = %d", got, memTotal-100<<20)
	}

	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	if got, want := f.Capacity["ephemeral-storage"].Value(), int64(st.Blocks)*int64(st.Bsize); got != want || got <= 0 {
		t.Errorf("ephemeral-storage %d, statfs of %s says %d", got, dir, want)
	}
	if f.Capacity["pods"].Value() != DefaultMaxPods {
		t.Errorf("pods %v", f.Capacity["pods"])
	}

	info := f.NodeInfo
	if !uuidRE.MatchString(info.BootID) {
		t.Errorf("boot ID %q does not look like a UUID", info.BootID)
	}
	if b, err := os.ReadFile("/proc/sys/kernel/random/boot_id"); err != nil || strings.TrimSpace(string(b)) != info.BootID {
		t.Errorf("boot ID %q, file says %q (%v)", info.BootID, b, err)
	}
	if out, err := exec.Command("uname", "-r").Output(); err != nil || strings.TrimSpace(string(out)) != info.KernelVersion {
		t.Errorf("kernel %q, uname -r says %q (%v)", info.KernelVersion, out, err)
	}
	if info.OperatingSystem != "linux" || info.Architecture == "" || info.OSImage == "" {
		t.Errorf("info %+v", info)
	}
	if b, err := os.ReadFile("/etc/machine-id"); err == nil && strings.TrimSpace(string(b)) != info.MachineID {
		t.Errorf("machine ID %q, /etc/machine-id says %q", info.MachineID, b)
	}

	host, _ := os.Hostname()
	var hasHostname bool
	for _, a := range f.Addresses {
		switch a.Type {
		case "Hostname":
			hasHostname = a.Address == host
		case "InternalIP":
			if ip := net4or6(a.Address); !ip {
				t.Errorf("InternalIP %q is not an IP address", a.Address)
			}
		}
	}
	if !hasHostname {
		t.Errorf("addresses %v lack Hostname %s", f.Addresses, host)
	}
	if dev := ipRouteDefaultDev(t); dev != "" && len(f.Addresses) != 2 {
		t.Errorf("the host has a default route via %s but addresses are %v", dev, f.Addresses)
	}
}

func net4or6(s string) bool {
	_, err := netip.ParseAddr(s)
	return err == nil
}

// TestObserveRealHost runs Observe on this machine.
func TestObserveRealHost(t *testing.T) {
	dir := t.TempDir()
	obs, err := Observe(context.Background(), ObserveConfig{DataDir: dir, ImageDir: "/"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", obs)
	if m := obs.Memory; m.TotalBytes != meminfoField(t, "MemTotal") || m.AvailableBytes <= 0 || m.AvailableBytes > m.TotalBytes {
		t.Errorf("memory %+v", m)
	}
	for name, fs := range map[string]FSStats{"nodefs": obs.NodeFS, "imagefs": obs.ImageFS} {
		if fs.CapacityBytes <= 0 || fs.AvailableBytes < 0 || fs.AvailableBytes > fs.CapacityBytes || fs.InodesFree > fs.Inodes {
			t.Errorf("%s %+v", name, fs)
		}
	}
	b, err := os.ReadFile("/proc/sys/kernel/pid_max")
	if err != nil {
		t.Fatal(err)
	}
	pidMax, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if obs.PIDs.Max != pidMax || obs.PIDs.Running < 1 || obs.PIDs.Running >= pidMax {
		t.Errorf("pids %+v, pid_max %d", obs.PIDs, pidMax)
	}
	if dev := ipRouteDefaultDev(t); dev != "" && obs.Network.Interface != dev {
		t.Errorf("network %+v, ip route says the default route is via %s", obs.Network, dev)
	}
	cs := Conditions(nil, obs, DefaultThresholds(), nil, time.Now())
	for _, c := range cs {
		if c.Status == api.ConditionUnknown {
			t.Errorf("%s is Unknown on a real host: %s", c.Type, c.Message)
		}
	}
}

// TestObserveNetworkNamespace changes the network under Observe in a
// network namespace of its own: nothing, a default route over a link
// without carrier, the carrier back. Needs root and iproute2.
func TestObserveNetworkNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a network namespace")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2 (make test-deps installs it)")
	}
	ns := fmt.Sprintf("outpost-host-%d", os.Getpid())
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	ip("netns", "add", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	observeIn := func() Observation {
		t.Helper()
		cmd := exec.Command("ip", "netns", "exec", ns, self)
		// GORACE: a race-enabled child otherwise waits a second at exit.
		cmd.Env = append(os.Environ(), envObserveChild+"="+dir, "GORACE=atexit_sleep_ms=0")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("observe in %s: %v: %s", ns, err, stderr.String())
		}
		var obs Observation
		if err := json.Unmarshal(out, &obs); err != nil {
			t.Fatalf("child output %q: %v", out, err)
		}
		return obs
	}
	netCond := func(obs Observation) api.NodeCondition {
		return Conditions(nil, obs, nil, nil, time.Now())[0]
	}

	// A fresh namespace: loopback only, and down.
	obs := observeIn()
	if obs.Network != (NetworkStats{}) || obs.Network.Available() {
		t.Errorf("fresh namespace: %+v, want no network", obs.Network)
	}
	if c := netCond(obs); c.Status != "True" || c.Reason != ReasonNoDefaultRoute {
		t.Errorf("fresh namespace: NetworkUnavailable %s %s", c.Status, c.Reason)
	}
	// Loopback up: still no network.
	ip("-n", ns, "link", "set", "lo", "up")
	if obs := observeIn(); obs.Network.Available() {
		t.Errorf("loopback up: %+v, want no network", obs.Network)
	}

	// A veth whose peer is down: the default route exists, the link has
	// no carrier.
	ip("-n", ns, "link", "add", "up0", "type", "veth", "peer", "name", "peer0")
	ip("-n", ns, "addr", "add", "10.99.0.2/24", "dev", "up0")
	ip("-n", ns, "link", "set", "up0", "up")
	ip("-n", ns, "route", "add", "default", "via", "10.99.0.1", "dev", "up0")
	obs = observeIn()
	if obs.Network.Interface != "up0" || obs.Network.Available() {
		t.Errorf("peer down: %+v, want up0 not available", obs.Network)
	}
	if c := netCond(obs); c.Status != "True" || c.Reason != ReasonInterfaceDown || !strings.Contains(c.Message, "up0") {
		t.Errorf("peer down: NetworkUnavailable %s %s %q", c.Status, c.Reason, c.Message)
	}

	// The peer comes up: carrier, and the network is there.
	ip("-n", ns, "link", "set", "peer0", "up")
	// operstate follows the carrier asynchronously in the kernel: poll.
	deadline := time.Now().Add(5 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for obs = observeIn(); !obs.Network.Available() && time.Now().Before(deadline); obs = observeIn() {
		<-tick.C
	}
	if obs.Network != (NetworkStats{Interface: "up0", OperState: "up"}) {
		t.Errorf("peer up: %+v, want up0 up", obs.Network)
	}
	if c := netCond(obs); c.Status != "False" || c.Reason != ReasonHasNetwork {
		t.Errorf("peer up: NetworkUnavailable %s %s", c.Status, c.Reason)
	}
}

// BenchmarkObserve measures one look at the real host, as the agent takes
// every StatusCheck period.
func BenchmarkObserve(b *testing.B) {
	cfg := ObserveConfig{DataDir: b.TempDir(), ImageDir: "/"}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Observe(ctx, cfg); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkConditions measures turning an observation into conditions.
func BenchmarkConditions(b *testing.B) {
	ts := DefaultThresholds()
	prev := Conditions(nil, okObs(), ts, nil, time.Now())
	obs := okObs()
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		prev = Conditions(prev, obs, ts, nil, now)
	}
}

// meminfoField reads one /proc/meminfo field in bytes, independently of
// parseMeminfo.
func meminfoField(t *testing.T, key string) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		var k string
		var v int64
		if n, _ := fmt.Sscanf(line, "%s %d kB", &k, &v); n == 2 && k == key+":" {
			return v * 1024
		}
	}
	t.Fatalf("no %s in /proc/meminfo", key)
	return 0
}

// ipRouteDefaultDev is the device of `ip route show default`'s first
// route, or "" when there is none or no ip command.
func ipRouteDefaultDev(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("ip", "-4", "route", "show", "default").Output()
	if err != nil {
		return ""
	}
	f := strings.Fields(string(out))
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "dev" {
			return f[i+1]
		}
	}
	return ""
}

package host

import (
	"context"
	"errors"
	"net/netip"
	"runtime"
	"strings"
	"testing"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/version"
)

func q(s string) api.Quantity { return api.MustParseQuantity(s) }

func TestAllocatable(t *testing.T) {
	capacity := api.ResourceList{
		"cpu":               q("4"),
		"memory":            q("16Gi"),
		"pods":              q("110"),
		"ephemeral-storage": q("100Gi"),
	}
	for _, tc := range []struct {
		name      string
		capacity  api.ResourceList
		reserved  api.ResourceList
		evictions string
		want      map[string]int64 // milli values
	}{
		{
			name: "nothing held back",
			want: map[string]int64{"cpu": 4000, "memory": 16 << 30 * 1000, "pods": 110_000, "ephemeral-storage": 100 << 30 * 1000},
		},
		{
			name:     "reserve",
			reserved: api.ResourceList{"cpu": q("500m"), "memory": q("1Gi"), "ephemeral-storage": q("10Gi")},
			want:     map[string]int64{"cpu": 3500, "memory": 15 << 30 * 1000, "pods": 110_000, "ephemeral-storage": 90 << 30 * 1000},
		},
		{
			name:      "kubelet defaults: 100Mi of memory, 10% of nodefs; inode and imagefs thresholds hold nothing back",
			evictions: "memory.available<100Mi,nodefs.available<10%,nodefs.inodesFree<5%,imagefs.available<15%",
			want: map[string]int64{"cpu": 4000, "memory": (16<<30 - 100<<20) * 1000, "pods": 110_000,
				"ephemeral-storage": (100<<30 - (100<<30)/10) * 1000},
		},
		{
			name:      "reserve and eviction add up",
			reserved:  api.ResourceList{"memory": q("512Mi"), "ephemeral-storage": q("5Gi")},
			evictions: "memory.available<5%,nodefs.available<1Gi",
			want: map[string]int64{"cpu": 4000, "memory": (16<<30 - 512<<20 - (16<<30)/20) * 1000, "pods": 110_000,
				"ephemeral-storage": (94 << 30) * 1000},
		},
		{
			name:      "never below zero",
			reserved:  api.ResourceList{"cpu": q("8"), "memory": q("15Gi")},
			evictions: "memory.available<2Gi,nodefs.available<100%",
			want:      map[string]int64{"cpu": 0, "memory": 0, "pods": 110_000, "ephemeral-storage": 0},
		},
		{
			name:     "a reserve of a resource the node lacks is ignored",
			capacity: api.ResourceList{"cpu": q("2")},
			reserved: api.ResourceList{"memory": q("1Gi")},
			want:     map[string]int64{"cpu": 2000},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := capacity
			if tc.capacity != nil {
				c = tc.capacity
			}
			var ev []Threshold
			if tc.evictions != "" {
				ev = mustThresholds(t, tc.evictions)
			}
			got := Allocatable(c, tc.reserved, ev)
			if len(got) != len(tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
			for name, w := range tc.want {
				if g, ok := got[name]; !ok || g.MilliValue() != w {
					t.Errorf("%s = %v (%d milli), want %d milli", name, got[name], got[name].MilliValue(), w)
				}
			}
		})
	}
	// Bytes are written as Kubernetes writes memory, in Ki when whole.
	got := Allocatable(capacity, api.ResourceList{"memory": q("1Gi")}, nil)
	if s := got["memory"].String(); s != "15728640Ki" {
		t.Errorf("memory written %q, want 15728640Ki", s)
	}
	if s := bytesQuantity(1000).String(); s != "1000" {
		t.Errorf("bytesQuantity(1000) = %q", s)
	}
}

func TestFacts(t *testing.T) {
	ctx := context.Background()
	cfg := FactsConfig{
		DataDir:   "/var/lib/outpost",
		Reserved:  api.ResourceList{"cpu": q("250m"), "memory": q("256Mi")},
		Evictions: DefaultThresholds(),
	}
	h := healthyHost(t)
	f, err := facts(ctx, h.env(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	wantCap := map[string]string{"cpu": "4", "memory": "24684084Ki", "pods": "110", "ephemeral-storage": "104857600Ki"}
	for name, w := range wantCap {
		if got := f.Capacity[name].String(); got != w {
			t.Errorf("capacity %s = %s, want %s", name, got, w)
		}
	}
	wantAlloc := map[string]int64{
		"cpu":               3750,
		"memory":            (24684084<<10 - 256<<20 - 100<<20) * 1000,
		"pods":              110_000,
		"ephemeral-storage": (100<<30 - (100<<30)/10) * 1000,
	}
	for name, w := range wantAlloc {
		if got := f.Allocatable[name].MilliValue(); got != w {
			t.Errorf("allocatable %s = %d milli, want %d", name, got, w)
		}
	}
	wantInfo := api.NodeSystemInfo{
		MachineID:       "3d1219c7c4c5404aaa1f6d2a48adfda4",
		BootID:          "0f5d0e2c-3c5e-4c8a-9a57-1b8f2f0c6a11",
		KernelVersion:   "6.1.0-28-amd64",
		OSImage:         "Debian GNU/Linux 12 (bookworm)",
		OperatingSystem: runtime.GOOS,
		Architecture:    runtime.GOARCH,
		KubeletVersion:  version.Version,
	}
	if f.NodeInfo != wantInfo {
		t.Errorf("node info\n got %+v\nwant %+v", f.NodeInfo, wantInfo)
	}
	wantAddrs := []api.NodeAddress{{Type: "InternalIP", Address: "192.0.2.17"}, {Type: "Hostname", Address: "edge-7"}}
	if !equalAddrs(f.Addresses, wantAddrs) {
		t.Errorf("addresses %v, want %v", f.Addresses, wantAddrs)
	}

	t.Run("MaxPods and fallbacks for node info", func(t *testing.T) {
		h := healthyHost(t)
		delete(h.files, pathOSRelease)
		h.files[pathOSRelease2] = "NAME='Flatcar Container Linux by Kinvolk'\nID=flatcar\n"
		delete(h.files, pathMachineID)
		h.files[pathMachineID2] = "abcdef0123456789abcdef0123456789\n"
		h.files[pathSystemUUID] = "4C4C4544-0042-3510-8052-B4C04F4E4B32\n"
		f, err := facts(ctx, h.env(), FactsConfig{DataDir: "/var/lib/outpost", MaxPods: 16})
		if err != nil {
			t.Fatal(err)
		}
		if f.Capacity["pods"].Value() != 16 || f.Allocatable["pods"].Value() != 16 {
			t.Errorf("pods %v/%v, want 16", f.Capacity["pods"], f.Allocatable["pods"])
		}
		if f.NodeInfo.OSImage != "Flatcar Container Linux by Kinvolk" || f.NodeInfo.MachineID != "abcdef0123456789abcdef0123456789" ||
			f.NodeInfo.SystemUUID != "4C4C4544-0042-3510-8052-B4C04F4E4B32" {
			t.Errorf("node info %+v", f.NodeInfo)
		}
	})
	t.Run("no identity files", func(t *testing.T) {
		h := healthyHost(t)
		for _, p := range []string{pathOSRelease, pathMachineID, pathBootID} {
			delete(h.files, p)
		}
		f, err := facts(ctx, h.env(), FactsConfig{DataDir: "/var/lib/outpost"})
		if err != nil {
			t.Fatal(err)
		}
		if f.NodeInfo.OSImage != "Linux" || f.NodeInfo.MachineID != "" || f.NodeInfo.BootID != "" {
			t.Errorf("node info %+v", f.NodeInfo)
		}
	})

	for _, tc := range []struct {
		name  string
		cfg   FactsConfig
		setup func(*fakeHost)
		want  []api.NodeAddress
	}{
		{
			name: "configured address and hostname",
			cfg:  FactsConfig{Address: "10.9.8.7", Hostname: "gate"},
			want: []api.NodeAddress{{Type: "InternalIP", Address: "10.9.8.7"}, {Type: "Hostname", Address: "gate"}},
		},
		{
			name:  "configured interface",
			cfg:   FactsConfig{Interface: "wg0"},
			setup: func(h *fakeHost) { h.addrs["wg0"] = []netip.Addr{netip.MustParseAddr("fd7a::5")} },
			want:  []api.NodeAddress{{Type: "InternalIP", Address: "fd7a::5"}, {Type: "Hostname", Address: "edge-7"}},
		},
		{
			name: "no default route: the first interface that is up with an address",
			setup: func(h *fakeHost) {
				h.files[pathRoute] = recorded(t, "route/no-default.txt")
				h.files[pathIPv6Route] = recorded(t, "ipv6_route/reject-only.txt")
				h.up = []string{"docker0", "eth1"}
				h.addrs["docker0"] = []netip.Addr{netip.MustParseAddr("fe80::42")}
				h.addrs["eth1"] = []netip.Addr{netip.MustParseAddr("192.168.1.20")}
			},
			want: []api.NodeAddress{{Type: "InternalIP", Address: "192.168.1.20"}, {Type: "Hostname", Address: "edge-7"}},
		},
		{
			name: "no address anywhere: the hostname only",
			setup: func(h *fakeHost) {
				h.files[pathRoute] = recorded(t, "route/header-only.txt")
				delete(h.files, pathIPv6Route)
				h.up = nil
			},
			want: []api.NodeAddress{{Type: "Hostname", Address: "edge-7"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := healthyHost(t)
			if tc.setup != nil {
				tc.setup(h)
			}
			tc.cfg.DataDir = "/var/lib/outpost"
			f, err := facts(ctx, h.env(), tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if !equalAddrs(f.Addresses, tc.want) {
				t.Errorf("addresses %v, want %v", f.Addresses, tc.want)
			}
		})
	}
}

func equalAddrs(a, b []api.NodeAddress) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestFactsErrors(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		cfg   FactsConfig
		setup func(*fakeHost)
		want  []string
		is    error
	}{
		{name: "no DataDir", cfg: FactsConfig{}, want: []string{"DataDir: required"}, is: ErrConfig},
		{
			name: "every bad field is named",
			cfg: FactsConfig{DataDir: "/d", MaxPods: -1, Address: "10.0.0.300",
				Reserved: api.ResourceList{"gpu": q("1"), "memory": q("-1Gi")}},
			want: []string{"MaxPods: -1 is negative", `Reserved[gpu]: cannot reserve "gpu"`, "Reserved[memory]: -1Gi is negative", `Address: "10.0.0.300" is not an IP address`},
			is:   ErrConfig,
		},
		{name: "DataDir missing", cfg: FactsConfig{DataDir: "/nope"}, want: []string{"statfs DataDir /nope"}},
		{name: "ImageDir missing", cfg: FactsConfig{DataDir: "/var/lib/outpost", ImageDir: "/nope"}, want: []string{"statfs ImageDir /nope"}},
		{name: "meminfo unreadable", cfg: FactsConfig{DataDir: "/var/lib/outpost"}, setup: func(h *fakeHost) { h.files[pathMeminfo] = "junk" },
			want: []string{"no MemTotal"}, is: ErrParse},
		{name: "affinity fails", cfg: FactsConfig{DataDir: "/var/lib/outpost"}, setup: func(h *fakeHost) { h.cpus = 0 }, want: []string{"cpus: sched_getaffinity"}},
		{name: "interface without address", cfg: FactsConfig{DataDir: "/var/lib/outpost", Interface: "lo"},
			want: []string{"Interface lo has no usable address"}, is: ErrConfig},
		{name: "interface absent", cfg: FactsConfig{DataDir: "/var/lib/outpost", Interface: "wg9"},
			want: []string{"Interface wg9"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := healthyHost(t)
			if tc.setup != nil {
				tc.setup(h)
			}
			_, err := facts(ctx, h.env(), tc.cfg)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %v is not %v", err, tc.is)
			}
		})
	}
}

func TestPrettyName(t *testing.T) {
	for in, want := range map[string]string{
		"NAME=\"Debian GNU/Linux\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n": "Debian GNU/Linux 12 (bookworm)",
		"PRETTY_NAME='Alpine Linux v3.20'\n":                                          "Alpine Linux v3.20",
		"PRETTY_NAME=Buildroot\n":                                                     "Buildroot",
		`PRETTY_NAME="Say \"hi\" \$HOME"`:                                             `Say "hi" $HOME`,
		"NAME=Yocto\n# comment\n":                                                     "Yocto",
		"":                                                                            "",
	} {
		if got := prettyName([]byte(in)); got != want {
			t.Errorf("prettyName(%q) = %q, want %q", in, got, want)
		}
	}
}

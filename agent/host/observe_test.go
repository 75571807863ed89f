package host

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestParseMeminfo(t *testing.T) {
	for _, tc := range []struct {
		file             string
		avail, total     int64
		wantErrSubstring string
	}{
		{file: "debian12-host.txt", avail: 24099752 << 10, total: 24684084 << 10},
		{file: "raspberrypi-low.txt", avail: 81920 << 10, total: 948280 << 10},
		{file: "at-threshold.txt", avail: 100 << 20, total: 2015784 << 10},
		// Before Linux 3.14: MemFree+Buffers+Cached.
		{file: "kernel-3.10-no-memavailable.txt", avail: (210444 + 102400 + 1048576) << 10, total: 3881692 << 10},
		{file: "garbage.txt", wantErrSubstring: `MemTotal: "lots" is not a number`},
		{file: "no-memtotal.txt", wantErrSubstring: "no MemTotal"},
	} {
		m, err := parseMeminfo([]byte(recorded(t, "meminfo/"+tc.file)))
		if tc.wantErrSubstring != "" {
			if err == nil || !errors.Is(err, ErrParse) || !strings.Contains(err.Error(), tc.wantErrSubstring) ||
				!strings.Contains(err.Error(), pathMeminfo) {
				t.Errorf("%s: error %v, want ErrParse naming %s and %q", tc.file, err, pathMeminfo, tc.wantErrSubstring)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.file, err)
			continue
		}
		if m.AvailableBytes != tc.avail || m.TotalBytes != tc.total {
			t.Errorf("%s: available %d total %d, want %d %d", tc.file, m.AvailableBytes, m.TotalBytes, tc.avail, tc.total)
		}
	}
}

func TestObserveNetwork(t *testing.T) {
	const (
		noIPv6 = "" // the file is absent: IPv6 disabled
	)
	for _, tc := range []struct {
		name      string
		route     string // testdata/route file
		ipv6      string // testdata/ipv6_route file or noIPv6
		oper      map[string]string
		iface     string // ObserveConfig.Interface
		want      NetworkStats
		available bool
	}{
		{
			name: "recorded host: default via eth0, up", route: "default-eth0.txt", ipv6: "default-eth0.txt",
			oper: map[string]string{"eth0": "up"},
			want: NetworkStats{Interface: "eth0", OperState: "up"}, available: true,
		},
		{
			name: "operstate unknown counts as up", route: "default-eth0.txt", ipv6: noIPv6,
			oper: map[string]string{"eth0": "unknown"},
			want: NetworkStats{Interface: "eth0", OperState: "unknown"}, available: true,
		},
		{
			name: "default interface down", route: "default-eth0.txt", ipv6: "reject-only.txt",
			oper: map[string]string{"eth0": "down"},
			want: NetworkStats{Interface: "eth0", OperState: "down"},
		},
		{
			name: "default interface gone", route: "default-eth0.txt", ipv6: noIPv6,
			oper: map[string]string{},
			want: NetworkStats{Interface: "eth0", OperState: "absent"},
		},
		{
			name: "no default route, only subnets; ipv6 only the kernel's reject route through lo", route: "no-default.txt", ipv6: "reject-only.txt",
			oper: map[string]string{"eth0": "up", "docker0": "up", "lo": "unknown"},
			want: NetworkStats{},
		},
		{
			name: "a default route through loopback is no network", route: "lo-default.txt", ipv6: noIPv6,
			oper: map[string]string{"lo": "unknown"},
			want: NetworkStats{},
		},
		{
			name: "header only", route: "header-only.txt", ipv6: noIPv6,
			want: NetworkStats{},
		},
		{
			name: "default routes not up or reject are not routes", route: "default-not-up-or-reject.txt", ipv6: noIPv6,
			oper: map[string]string{"eth0": "up", "eth1": "up"},
			want: NetworkStats{},
		},
		{
			name: "two defaults: the lower metric wins", route: "two-defaults.txt", ipv6: noIPv6,
			oper: map[string]string{"eth0": "up", "wlan0": "up"},
			want: NetworkStats{Interface: "eth0", OperState: "up"}, available: true,
		},
		{
			name: "two defaults: the lower metric is down, the other carries", route: "two-defaults.txt", ipv6: noIPv6,
			oper: map[string]string{"eth0": "down", "wlan0": "up"},
			want: NetworkStats{Interface: "wlan0", OperState: "up"}, available: true,
		},
		{
			name: "two defaults, both down: the preferred one is reported", route: "two-defaults.txt", ipv6: noIPv6,
			oper: map[string]string{"eth0": "down", "wlan0": "lowerlayerdown"},
			want: NetworkStats{Interface: "eth0", OperState: "down"},
		},
		{
			name: "IPv6-only uplink", route: "no-default.txt", ipv6: "default-wwan0.txt",
			oper: map[string]string{"wwan0": "up"},
			want: NetworkStats{Interface: "wwan0", OperState: "up"}, available: true,
		},
		{
			name: "IPv4 is preferred over IPv6", route: "default-eth0.txt", ipv6: "default-wwan0.txt",
			oper: map[string]string{"eth0": "up", "wwan0": "up"},
			want: NetworkStats{Interface: "eth0", OperState: "up"}, available: true,
		},
		{
			name: "configured interface up without any default route", route: "no-default.txt", ipv6: "reject-only.txt",
			oper: map[string]string{"eth0": "up"}, iface: "eth0",
			want: NetworkStats{Interface: "eth0", Configured: true, OperState: "up"}, available: true,
		},
		{
			name: "configured interface down while the default route is fine", route: "default-eth0.txt", ipv6: noIPv6,
			oper: map[string]string{"eth0": "up", "eth1": "down"}, iface: "eth1",
			want: NetworkStats{Interface: "eth1", Configured: true, OperState: "down"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &fakeHost{files: map[string]string{pathRoute: recorded(t, "route/"+tc.route)}}
			if tc.ipv6 != noIPv6 {
				h.files[pathIPv6Route] = recorded(t, "ipv6_route/"+tc.ipv6)
			}
			for ifc, st := range tc.oper {
				h.files[operstatePath(ifc)] = st + "\n"
			}
			var b []byte
			got, err := observeNetwork(h.env(), &b, tc.iface)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			if got.Available() != tc.available {
				t.Errorf("Available() = %v, want %v", got.Available(), tc.available)
			}
		})
	}
}

func TestObservePIDs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		files   map[string]string
		proc    []string
		want    PIDStats
		wantErr string
	}{
		{name: "loadavg", files: map[string]string{pathPIDMax: "32768\n", pathLoadavg: "0.17 0.50 0.56 1/94 22713\n"}, want: PIDStats{Max: 32768, Running: 94}},
		{name: "near pid_max", files: map[string]string{pathPIDMax: "32768\n", pathLoadavg: "12.00 9.31 4.02 7/32000 31999\n"}, want: PIDStats{Max: 32768, Running: 32000}},
		{name: "big pid_max", files: map[string]string{pathPIDMax: "4194304\n", pathLoadavg: "0.00 0.00 0.00 1/1203 884\n"}, want: PIDStats{Max: 4194304, Running: 1203}},
		{
			name:  "no loadavg: count numeric /proc entries",
			files: map[string]string{pathPIDMax: "32768\n"},
			proc:  []string{"1", "2", "77", "self", "thread-self", "net", "meminfo", "31999"},
			want:  PIDStats{Max: 32768, Running: 4},
		},
		{
			name:  "unparsable loadavg: count /proc",
			files: map[string]string{pathPIDMax: "32768\n", pathLoadavg: "0.17 0.50 0.56 94 22713\n"},
			proc:  []string{"1", "2"},
			want:  PIDStats{Max: 32768, Running: 2},
		},
		{name: "bad pid_max", files: map[string]string{pathPIDMax: "many\n", pathLoadavg: "0 0 0 1/2 3\n"}, wantErr: `pid_max: "many" is not a pid count`},
		{name: "zero pid_max", files: map[string]string{pathPIDMax: "0\n", pathLoadavg: "0 0 0 1/2 3\n"}, wantErr: "is not a pid count"},
		{name: "no pid_max", files: map[string]string{pathLoadavg: "0 0 0 1/2 3\n"}, wantErr: "pid_max"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &fakeHost{files: tc.files, dirs: map[string][]string{}}
			if tc.proc != nil {
				h.dirs[pathProc] = tc.proc
			}
			var b []byte
			got, err := observePIDs(h.env(), &b)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
	if got := (PIDStats{Max: 10, Running: 12}).Available(); got != 0 {
		t.Errorf("Available with more tasks than pid_max = %d, want 0", got)
	}
}

func TestObserve(t *testing.T) {
	ctx := context.Background()
	t.Run("healthy host, images on nodefs", func(t *testing.T) {
		h := healthyHost(t)
		obs, err := observe(ctx, h.env(), ObserveConfig{DataDir: "/var/lib/outpost"})
		if err != nil {
			t.Fatal(err)
		}
		want := Observation{
			Memory:  MemoryStats{AvailableBytes: 24099752 << 10, TotalBytes: 24684084 << 10},
			NodeFS:  h.fs["/var/lib/outpost"],
			ImageFS: h.fs["/var/lib/outpost"],
			PIDs:    PIDStats{Max: 32768, Running: 94},
			Network: NetworkStats{Interface: "eth0", OperState: "up"},
		}
		if obs != want {
			t.Errorf("got  %+v\nwant %+v", obs, want)
		}
	})
	t.Run("separate image filesystem", func(t *testing.T) {
		h := healthyHost(t)
		h.fs["/srv/images"] = FSStats{AvailableBytes: 1 << 30, CapacityBytes: 500 << 30}
		obs, err := observe(ctx, h.env(), ObserveConfig{DataDir: "/var/lib/outpost", ImageDir: "/srv/images"})
		if err != nil {
			t.Fatal(err)
		}
		if obs.ImageFS != h.fs["/srv/images"] || obs.NodeFS != h.fs["/var/lib/outpost"] {
			t.Errorf("nodefs %+v imagefs %+v", obs.NodeFS, obs.ImageFS)
		}
	})
	t.Run("parts that fail are named, the rest is observed", func(t *testing.T) {
		h := healthyHost(t)
		delete(h.files, pathMeminfo)
		delete(h.files, pathPIDMax)
		obs, err := observe(ctx, h.env(), ObserveConfig{DataDir: "/var/lib/outpost", ImageDir: "/gone"})
		for _, w := range []string{pathMeminfo, pathPIDMax, "statfs ImageDir /gone"} {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("error %v does not name %q", err, w)
			}
		}
		if obs.Memory != (MemoryStats{}) || obs.PIDs != (PIDStats{}) || obs.ImageFS != (FSStats{}) {
			t.Errorf("failed parts are not zero: %+v", obs)
		}
		if obs.NodeFS.CapacityBytes == 0 || !obs.Network.Available() {
			t.Errorf("parts that could be read are missing: %+v", obs)
		}
	})
	t.Run("DataDir is required", func(t *testing.T) {
		_, err := observe(ctx, healthyHost(t).env(), ObserveConfig{})
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "DataDir") {
			t.Errorf("error %v, want ErrConfig naming DataDir", err)
		}
	})
	t.Run("a cancelled context reads nothing", func(t *testing.T) {
		h := healthyHost(t)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, err := observe(cctx, h.env(), ObserveConfig{DataDir: "/var/lib/outpost"})
		if !errors.Is(err, context.Canceled) || h.reads != 0 {
			t.Errorf("error %v after %d reads, want context.Canceled and none", err, h.reads)
		}
	})
}

func TestParseLoadavgAndHelpers(t *testing.T) {
	for in, want := range map[string]int64{
		"0.17 0.50 0.56 1/94 22713\n": 94,
		"0.17  0.50 0.56 3/1 22713":   1,
		"0.17 0.50 0.56 1/0 1":        -1,
		"0.17 0.50":                   -1,
		"0.17 0.50 0.56 1/x 1":        -1,
		"":                            -1,
	} {
		n, ok := parseLoadavgTasks([]byte(in))
		if !ok {
			n = -1
		}
		if n != want {
			t.Errorf("parseLoadavgTasks(%q) = %d, want %d", in, n, want)
		}
	}
	if _, err := parseInt([]byte("9999999999999999999")); err == nil {
		t.Error("parseInt took a number that overflows")
	}
	if _, err := parseKB([]byte(" 12 MB")); err == nil {
		t.Error("parseKB took MB")
	}
	if v, err := parseHex([]byte("80200001")); err != nil || v != 0x80200001 {
		t.Errorf("parseHex = %x, %v", v, err)
	}
}

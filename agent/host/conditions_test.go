package host

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// okObs is a healthy observation: 100 GiB filesystems 40 % free, plenty
// of memory, pids and a network.
func okObs() Observation {
	fs := FSStats{AvailableBytes: 40 << 30, CapacityBytes: 100 << 30, InodesFree: 6_000_000, Inodes: 6_553_600}
	return Observation{
		Memory:  MemoryStats{AvailableBytes: 8 << 30, TotalBytes: 16 << 30},
		NodeFS:  fs,
		ImageFS: fs,
		PIDs:    PIDStats{Max: 32768, Running: 300},
		Network: NetworkStats{Interface: "eth0", OperState: "up"},
	}
}

func mustThresholds(t testing.TB, spec string) []Threshold {
	t.Helper()
	ts, err := ParseThresholds(spec)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// want is one expected condition: status, reason and words its message has.
type want struct {
	status, reason string
	msg            []string
}

func TestConditions(t *testing.T) {
	all := "memory.available<100Mi,nodefs.available<10%,nodefs.inodesFree<5%,imagefs.available<15%,imagefs.inodesFree<5%,pid.available<5%"
	const gi = int64(1) << 30
	for _, tc := range []struct {
		name       string
		change     func(*Observation)
		thresholds string
		runtimeErr error
		want       map[string]want // by type; types not listed must be the healthy default
	}{
		{name: "healthy", change: func(*Observation) {}},
		{
			name: "memory 1 byte under 100Mi",
			change: func(o *Observation) {
				o.Memory = MemoryStats{AvailableBytes: 100<<20 - 1, TotalBytes: 1 << 30}
			},
			want: map[string]want{api.NodeMemoryPressure: {"True", "AgentHasInsufficientMemory",
				[]string{"memory.available is 99.9Mi", "under the threshold memory.available<100Mi", "of 1.0Gi"}}},
		},
		{
			name:   "memory exactly at 100Mi is not under it",
			change: func(o *Observation) { o.Memory = MemoryStats{AvailableBytes: 100 << 20, TotalBytes: 1 << 30} },
		},
		{
			name:       "memory as a percentage",
			thresholds: "memory.available<10%",
			change:     func(o *Observation) { o.Memory = MemoryStats{AvailableBytes: 1 << 30, TotalBytes: 16 << 30} },
			want: map[string]want{api.NodeMemoryPressure: {"True", "AgentHasInsufficientMemory",
				[]string{"memory.available is 1.0Gi (6.2% of 16.0Gi), under the threshold memory.available<10%"}}},
		},
		{
			name:   "nodefs 1 byte under 10%",
			change: func(o *Observation) { o.NodeFS.AvailableBytes = 10*gi - 1 },
			want: map[string]want{api.NodeDiskPressure: {"True", "AgentHasDiskPressure",
				[]string{"nodefs.available is 9.9Gi (9.9% of 100.0Gi)", "under the threshold nodefs.available<10%"}}},
		},
		{
			name:   "nodefs at 10% exactly",
			change: func(o *Observation) { o.NodeFS.AvailableBytes = 10 * gi },
		},
		{
			name:   "nodefs inodes under 5%",
			change: func(o *Observation) { o.NodeFS.InodesFree = 327679 },
			want: map[string]want{api.NodeDiskPressure: {"True", "AgentHasDiskPressure",
				[]string{"nodefs.inodesFree is 327679 (4.9% of 6553600), under the threshold nodefs.inodesFree<5%"}}},
		},
		{
			name:   "nodefs inodes at 5%",
			change: func(o *Observation) { o.NodeFS.InodesFree = 327680 },
		},
		{
			name:   "imagefs under 15% while nodefs is fine",
			change: func(o *Observation) { o.ImageFS.AvailableBytes = 15*gi - 1 },
			want: map[string]want{api.NodeDiskPressure: {"True", "AgentHasDiskPressure",
				[]string{"imagefs.available", "under the threshold imagefs.available<15%"}}},
		},
		{
			name:   "imagefs inodes",
			change: func(o *Observation) { o.ImageFS.InodesFree = 100 },
			want: map[string]want{api.NodeDiskPressure: {"True", "AgentHasDiskPressure",
				[]string{"imagefs.inodesFree is 100"}}},
		},
		{
			name: "several disk signals: every one is named",
			change: func(o *Observation) {
				o.NodeFS.AvailableBytes = gi
				o.NodeFS.InodesFree = 1
				o.ImageFS = o.NodeFS
			},
			want: map[string]want{api.NodeDiskPressure: {"True", "AgentHasDiskPressure",
				[]string{"nodefs.available", "nodefs.inodesFree", "imagefs.available", "imagefs.inodesFree", "; "}}},
		},
		{
			name:   "btrfs: no inode counts, inode signals not judged, bytes still are",
			change: func(o *Observation) { o.NodeFS.Inodes, o.NodeFS.InodesFree = 0, 0; o.ImageFS = o.NodeFS },
		},
		{
			name: "btrfs nearly full",
			change: func(o *Observation) {
				o.NodeFS = FSStats{AvailableBytes: gi, CapacityBytes: 100 * gi}
				o.ImageFS = o.NodeFS
			},
			want: map[string]want{api.NodeDiskPressure: {"True", "AgentHasDiskPressure", []string{"nodefs.available is 1.0Gi (1.0% of 100.0Gi)"}}},
		},
		{
			name:   "pids: available 1637 is under 5% of 32768 (1638)",
			change: func(o *Observation) { o.PIDs.Running = 31131 },
			want: map[string]want{api.NodePIDPressure: {"True", "AgentHasInsufficientPID",
				[]string{"pid.available is 1637 (4.9% of 32768), under the threshold pid.available<5%"}}},
		},
		{
			name:   "pids: available 1638 is not",
			change: func(o *Observation) { o.PIDs.Running = 31130 },
		},
		{
			name:       "pids: no pid threshold, no pressure",
			thresholds: "memory.available<100Mi",
			change:     func(o *Observation) { o.PIDs.Running = 32768 },
		},
		{
			name:   "no default route",
			change: func(o *Observation) { o.Network = NetworkStats{} },
			want: map[string]want{
				api.NodeNetworkUnavailable: {"True", "NoDefaultRoute", []string{"no default route"}},
				api.NodeReady:              {"False", "NetworkNotReady", []string{"network is unavailable: no default route"}},
			},
		},
		{
			name:   "interface down",
			change: func(o *Observation) { o.Network = NetworkStats{Interface: "eth0", OperState: "down"} },
			want: map[string]want{
				api.NodeNetworkUnavailable: {"True", "InterfaceDown", []string{"interface eth0 is down"}},
				api.NodeReady:              {"False", "NetworkNotReady", []string{"interface eth0 is down"}},
			},
		},
		{
			name: "configured interface up",
			change: func(o *Observation) {
				o.Network = NetworkStats{Interface: "br-lan", Configured: true, OperState: "unknown"}
			},
			want: map[string]want{
				api.NodeNetworkUnavailable: {"False", "AgentHasNetwork", []string{"interface br-lan is unknown"}},
			},
		},
		{
			name:       "runtime down",
			change:     func(*Observation) {},
			runtimeErr: fmt.Errorf("containerd: %w", errors.New("dial unix /run/containerd/containerd.sock: connect: no such file or directory")),
			want: map[string]want{api.NodeReady: {"False", "ContainerRuntimeDown",
				[]string{"container runtime is down: containerd: dial unix /run/containerd/containerd.sock"}}},
		},
		{
			name:       "runtime down and no network: the runtime is the reason, both are said",
			change:     func(o *Observation) { o.Network = NetworkStats{} },
			runtimeErr: errors.New("containerd stopped"),
			want: map[string]want{
				api.NodeNetworkUnavailable: {"True", "NoDefaultRoute", nil},
				api.NodeReady:              {"False", "ContainerRuntimeDown", []string{"containerd stopped", "network is unavailable"}},
			},
		},
		{
			name:   "memory not observed",
			change: func(o *Observation) { o.Memory = MemoryStats{} },
			want:   map[string]want{api.NodeMemoryPressure: {"Unknown", "AgentCannotObserve", []string{"/proc/meminfo"}}},
		},
		{
			name:   "pids not observed",
			change: func(o *Observation) { o.PIDs = PIDStats{} },
			want:   map[string]want{api.NodePIDPressure: {"Unknown", "AgentCannotObserve", nil}},
		},
		{
			name:   "no filesystem observed",
			change: func(o *Observation) { o.NodeFS, o.ImageFS = FSStats{}, FSStats{} },
			want:   map[string]want{api.NodeDiskPressure: {"Unknown", "AgentCannotObserve", nil}},
		},
		{
			name:   "imagefs not observed while nodefs is: Unknown, naming the imagefs signals",
			change: func(o *Observation) { o.ImageFS = FSStats{} },
			want: map[string]want{api.NodeDiskPressure: {"Unknown", "AgentCannotObserve",
				[]string{"imagefs.available, imagefs.inodesFree not observed"}}},
		},
		{
			name:   "imagefs not observed, nodefs crossing: pressure wins",
			change: func(o *Observation) { o.ImageFS = FSStats{}; o.NodeFS.AvailableBytes = 1 },
			want:   map[string]want{api.NodeDiskPressure: {"True", "AgentHasDiskPressure", []string{"nodefs.available is 1 "}}},
		},
		{
			name:       "memory not observed, no memory threshold: nothing to judge",
			thresholds: "pid.available<5%",
			change:     func(o *Observation) { o.Memory = MemoryStats{} },
		},
		{
			name:       "everything at once, default thresholds",
			thresholds: FormatThresholds(DefaultThresholds()),
			change: func(o *Observation) {
				o.Memory.AvailableBytes = 1 << 20
				o.NodeFS.AvailableBytes = 0
				o.PIDs.Running = 32768
			},
			want: map[string]want{
				api.NodeMemoryPressure: {"True", "AgentHasInsufficientMemory", nil},
				api.NodeDiskPressure:   {"True", "AgentHasDiskPressure", nil},
				// pid.available is not among the kubelet's defaults.
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs := okObs()
			tc.change(&obs)
			spec := all
			if tc.thresholds != "" {
				spec = tc.thresholds
			}
			now := time.Date(2026, 11, 23, 22, 0, 0, 0, time.UTC)
			got := Conditions(nil, obs, mustThresholds(t, spec), tc.runtimeErr, now)
			healthy := map[string]want{
				api.NodeNetworkUnavailable: {"False", "AgentHasNetwork", []string{"default route via eth0 is up"}},
				api.NodeMemoryPressure:     {"False", "AgentHasSufficientMemory", []string{"outpost agent has sufficient memory available"}},
				api.NodeDiskPressure:       {"False", "AgentHasNoDiskPressure", []string{"outpost agent has no disk pressure"}},
				api.NodePIDPressure:        {"False", "AgentHasSufficientPID", []string{"outpost agent has sufficient PID available"}},
				api.NodeReady:              {"True", "AgentReady", []string{"outpost agent is posting ready status"}},
			}
			order := []string{api.NodeNetworkUnavailable, api.NodeMemoryPressure, api.NodeDiskPressure, api.NodePIDPressure, api.NodeReady}
			if len(got) != len(order) {
				t.Fatalf("got %d conditions, want 5: %+v", len(got), got)
			}
			for i, c := range got {
				if c.Type != order[i] {
					t.Errorf("condition %d is %s, want %s", i, c.Type, order[i])
				}
				w, ok := tc.want[c.Type]
				if !ok {
					w = healthy[c.Type]
				}
				if c.Status != w.status || c.Reason != w.reason {
					t.Errorf("%s = %s %s (%q), want %s %s", c.Type, c.Status, c.Reason, c.Message, w.status, w.reason)
				}
				for _, m := range w.msg {
					if !strings.Contains(c.Message, m) {
						t.Errorf("%s message %q lacks %q", c.Type, c.Message, m)
					}
				}
				if c.LastHeartbeatTime == nil || !c.LastHeartbeatTime.Equal(now) ||
					c.LastTransitionTime == nil || !c.LastTransitionTime.Equal(now) {
					t.Errorf("%s times %v %v, want both %v (no previous conditions)", c.Type, c.LastHeartbeatTime, c.LastTransitionTime, now)
				}
			}
		})
	}
}

func TestConditionsTransitionTimes(t *testing.T) {
	ts := DefaultThresholds()
	t0 := time.Date(2026, 11, 23, 20, 0, 0, 0, time.UTC)
	t1, t2, t3 := t0.Add(10*time.Second), t0.Add(20*time.Second), t0.Add(30*time.Second)
	byType := func(cs []api.NodeCondition) map[string]api.NodeCondition {
		m := map[string]api.NodeCondition{}
		for _, c := range cs {
			m[c.Type] = c
		}
		return m
	}

	c0 := Conditions(nil, okObs(), ts, nil, t0)
	// Nothing changes: transition times stay at t0, heartbeats move.
	c1 := Conditions(c0, okObs(), ts, nil, t1)
	for _, c := range c1 {
		if !c.LastTransitionTime.Equal(t0) || !c.LastHeartbeatTime.Equal(t1) {
			t.Errorf("unchanged %s: transition %v heartbeat %v, want %v %v", c.Type, c.LastTransitionTime, c.LastHeartbeatTime, t0, t1)
		}
	}
	if Changed(c0, c1) {
		t.Error("Changed reports a change when only heartbeats moved")
	}

	// Memory runs low: MemoryPressure transitions at t2, the rest stay.
	low := okObs()
	low.Memory.AvailableBytes = 50 << 20
	c2 := Conditions(c1, low, ts, nil, t2)
	m2 := byType(c2)
	if c := m2[api.NodeMemoryPressure]; c.Status != "True" || !c.LastTransitionTime.Equal(t2) {
		t.Errorf("MemoryPressure %s since %v, want True since %v", c.Status, c.LastTransitionTime, t2)
	}
	if c := m2[api.NodeReady]; !c.LastTransitionTime.Equal(t0) {
		t.Errorf("Ready transitioned at %v without changing", c.LastTransitionTime)
	}
	if !Changed(c1, c2) {
		t.Error("Changed misses MemoryPressure turning True")
	}

	// Still low, a different amount: the message moves, nothing else does.
	lower := low
	lower.Memory.AvailableBytes = 40 << 20
	c3 := Conditions(c2, lower, ts, nil, t3)
	m3 := byType(c3)
	if c := m3[api.NodeMemoryPressure]; !c.LastTransitionTime.Equal(t2) || c.Message == m2[api.NodeMemoryPressure].Message {
		t.Errorf("MemoryPressure since %v with message %q; want since %v with a new amount", c.LastTransitionTime, c.Message, t2)
	}
	if Changed(c2, c3) {
		t.Error("Changed reports a change when only the observed amount in a message moved")
	}

	// Runtime goes down then Ready flips; the reason changes with the status.
	c4 := Conditions(c3, lower, ts, errors.New("containerd gone"), t3.Add(time.Second))
	if c := byType(c4)[api.NodeReady]; c.Status != "False" || !c.LastTransitionTime.Equal(t3.Add(time.Second)) {
		t.Errorf("Ready %s since %v", c.Status, c.LastTransitionTime)
	}
	if !Changed(c3, c4) {
		t.Error("Changed misses Ready turning False")
	}

	// A previous status from elsewhere (the control plane's Unknown) is a
	// transition too, and a previous condition without a transition time
	// gets now.
	prev := []api.NodeCondition{
		{Type: api.NodeReady, Status: api.ConditionUnknown, Reason: "NodeStatusUnknown", LastTransitionTime: api.NewTime(t0)},
		{Type: api.NodeDiskPressure, Status: api.ConditionFalse, Reason: ReasonNoDiskPressure},
		{Type: "Custom", Status: api.ConditionTrue},
	}
	c5 := Conditions(prev, okObs(), ts, nil, t3)
	m5 := byType(c5)
	if c := m5[api.NodeReady]; c.Status != "True" || !c.LastTransitionTime.Equal(t3) {
		t.Errorf("Ready after Unknown: %s since %v, want True since %v", c.Status, c.LastTransitionTime, t3)
	}
	if c := m5[api.NodeDiskPressure]; !c.LastTransitionTime.Equal(t3) {
		t.Errorf("DiskPressure without previous time: since %v, want %v", c.LastTransitionTime, t3)
	}
	if _, ok := m5["Custom"]; ok {
		t.Error("a condition of another type was carried over")
	}

	// The returned times are not shared with prev, nor with each other.
	c6 := Conditions(c1, okObs(), ts, nil, t3)
	c6[0].LastTransitionTime.Time = t3
	c6[0].LastHeartbeatTime.Time = t0
	if !c1[0].LastTransitionTime.Equal(t0) {
		t.Error("changing a returned condition's time changed prev's")
	}
	if !c6[1].LastHeartbeatTime.Equal(t3) || !c6[0].LastTransitionTime.Equal(t3) {
		t.Error("changing one returned time changed another")
	}
}

func TestChanged(t *testing.T) {
	now := time.Date(2026, 11, 23, 20, 0, 0, 0, time.UTC)
	base := Conditions(nil, okObs(), DefaultThresholds(), nil, now)
	cp := func() []api.NodeCondition { return append([]api.NodeCondition(nil), base...) }
	for _, tc := range []struct {
		name   string
		change func([]api.NodeCondition) []api.NodeCondition
		want   bool
	}{
		{"same", func(c []api.NodeCondition) []api.NodeCondition { return c }, false},
		{"heartbeat", func(c []api.NodeCondition) []api.NodeCondition {
			c[1].LastHeartbeatTime = api.NewTime(now.Add(time.Hour))
			return c
		}, false},
		{"message", func(c []api.NodeCondition) []api.NodeCondition { c[2].Message = "other words"; return c }, false},
		{"reordered", func(c []api.NodeCondition) []api.NodeCondition { c[0], c[4] = c[4], c[0]; return c }, false},
		{"status", func(c []api.NodeCondition) []api.NodeCondition { c[4].Status = api.ConditionFalse; return c }, true},
		{"reason", func(c []api.NodeCondition) []api.NodeCondition { c[0].Reason = ReasonInterfaceDown; return c }, true},
		{"one fewer", func(c []api.NodeCondition) []api.NodeCondition { return c[:4] }, true},
		{"type replaced", func(c []api.NodeCondition) []api.NodeCondition { c[3].Type = "Other"; return c }, true},
		{"none", func([]api.NodeCondition) []api.NodeCondition { return nil }, true},
	} {
		if got := Changed(base, tc.change(cp())); got != tc.want {
			t.Errorf("%s: Changed = %v, want %v", tc.name, got, tc.want)
		}
	}
	if Changed(nil, nil) {
		t.Error("Changed(nil, nil)")
	}
}

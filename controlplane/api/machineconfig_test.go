package api

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An MCO MachineConfig as OpenShift's documentation writes them (a chrony
// file, base64 data URL, mode in decimal, a unit with a drop-in, kernel
// arguments) applies as it is (SPEC UPD-8).
func TestMachineConfigOpenShiftShape(t *testing.T) {
	doc := `apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  labels:
    machineconfiguration.openshift.io/role: worker
  name: 99-worker-chrony
spec:
  config:
    ignition:
      version: 3.2.0
    storage:
      files:
      - contents:
          source: data:text/plain;charset=utf-8;base64,cG9vbCAwLnJoZWwucG9vbC5udHAub3JnIGlidXJzdAo=
        mode: 420
        overwrite: true
        path: /etc/chrony.conf
      - contents:
          source: data:,hello%20world%0A
        path: /etc/hello
    systemd:
      units:
      - name: hello.service
        enabled: true
        contents: |
          [Service]
          ExecStart=/bin/true
        dropins:
        - name: 10-env.conf
          contents: |
            [Service]
            Environment=A=1
  kernelArguments:
  - nosmt
  fips: false
  kernelType: default
`
	objs, _, err := DecodeYAMLOrJSON([]byte(doc))
	if err != nil || len(objs) != 1 {
		t.Fatalf("decode: %v (%d objects)", err, len(objs))
	}
	mc, ok := objs[0].(*MachineConfig)
	if !ok {
		t.Fatalf("decoded %T, want *MachineConfig", objs[0])
	}
	if errs := Validate(mc); len(errs) > 0 {
		t.Fatalf("valid config refused: %v", errs)
	}
	f := mc.Spec.Config.Storage.Files
	if b, err := DecodeFileContents(f[0].Contents); err != nil || string(b) != "pool 0.rhel.pool.ntp.org iburst\n" || f[0].FileMode() != 0o644 {
		t.Errorf("chrony file: %q %v mode %o", b, err, f[0].FileMode())
	}
	if b, err := DecodeFileContents(f[1].Contents); err != nil || string(b) != "hello world\n" {
		t.Errorf("percent-encoded file: %q %v", b, err)
	}
}

func TestDecodeFileContentsGzip(t *testing.T) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write([]byte("compressed\n"))
	_ = zw.Close()
	c := IgnitionContents{Source: "data:;base64," + base64.StdEncoding.EncodeToString(buf.Bytes()), Compression: "gzip"}
	if b, err := DecodeFileContents(c); err != nil || string(b) != "compressed\n" {
		t.Errorf("gzip contents: %q %v", b, err)
	}
	// A bomb: more than the limit once inflated.
	buf.Reset()
	zw = gzip.NewWriter(&buf)
	_, _ = zw.Write(make([]byte, maxFileBytes+1))
	_ = zw.Close()
	c.Source = "data:;base64," + base64.StdEncoding.EncodeToString(buf.Bytes())
	if _, err := DecodeFileContents(c); err == nil {
		t.Error("contents over the limit once inflated were accepted")
	}
}

// Bad configs are refused with every problem listed by field path.
func TestMachineConfigValidation(t *testing.T) {
	mode := 0o10000
	yes := true
	neg := -1
	mc := &MachineConfig{ObjectMeta: ObjectMeta{Name: "bad"}, Spec: MachineConfigSpec{
		Config: IgnitionConfig{
			Ignition: IgnitionMeta{Version: "2.2.0"},
			Storage: IgnitionStorage{Files: []IgnitionFile{
				{Path: "etc/relative", Contents: IgnitionContents{Source: "data:,x"}},
				{Path: "/etc/a/../b"},
				{Path: "/etc/x", Mode: &mode, Contents: IgnitionContents{Source: "https://example.com/x"}},
				{Path: "/etc/x", Contents: IgnitionContents{Source: "data:;base64,!!!"}},
				{Path: "/etc/y", Contents: IgnitionContents{Source: "data:,x", Compression: "xz"}},
				{Path: "/etc/z", User: &IgnitionNodeUser{ID: &neg}},
			}},
			Systemd: IgnitionSystemd{Units: []IgnitionUnit{
				{Name: "nosuffix"},
				{Name: "a.service", Mask: &yes, Enabled: &yes, Dropins: []IgnitionDropin{{Name: "x.txt"}, {Name: ""}}},
				{Name: "a.service"},
				{Name: "../x.service"},
			}},
		},
		KernelArguments: []string{"ok", " "},
		FIPS:            true,
		KernelType:      "realtime",
		Extensions:      []string{"usbguard"},
		HealthCheck:     &ConfigHealthCheck{Timeout: "soon"},
	}}
	errs := Validate(mc)
	got := map[string]bool{}
	for _, e := range errs {
		got[e.Field] = true
	}
	for _, want := range []string{
		"spec.config.ignition.version",
		"spec.config.storage.files[0].path",
		"spec.config.storage.files[1].path",
		"spec.config.storage.files[2].mode",
		"spec.config.storage.files[2].contents.source",
		"spec.config.storage.files[3].path",
		"spec.config.storage.files[3].contents.source",
		"spec.config.storage.files[4].contents.compression",
		"spec.config.storage.files[5].user.id",
		"spec.config.systemd.units[0].name",
		"spec.config.systemd.units[1].enabled",
		"spec.config.systemd.units[1].mask",
		"spec.config.systemd.units[1].dropins[0].name",
		"spec.config.systemd.units[1].dropins[1].name",
		"spec.config.systemd.units[2].name",
		"spec.config.systemd.units[3].name",
		"spec.kernelArguments[1]",
		"spec.fips",
		"spec.kernelType",
		"spec.extensions",
		"spec.healthCheck.command",
		"spec.healthCheck.timeout",
	} {
		if !got[want] {
			t.Errorf("no error for %s; got %v", want, errs)
		}
	}
	if len(errs) != 22 {
		t.Errorf("%d errors, want 22: %v", len(errs), errs)
	}
}

// Sections a running host does not take are refused by name.
func TestMachineConfigUnknownSection(t *testing.T) {
	doc := `apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: disks
spec:
  config:
    ignition:
      version: 3.2.0
    storage:
      disks:
      - device: /dev/sdb
`
	_, _, err := DecodeYAMLOrJSON([]byte(doc))
	if err == nil || !strings.Contains(err.Error(), "disks") {
		t.Errorf("a config with storage.disks: %v, want a refusal naming it", err)
	}
}

func TestMachineConfigPoolValidation(t *testing.T) {
	for _, tt := range []struct {
		max  IntOrString
		want string
	}{
		{FromInt(0), "spec.maxUnavailable"},
		{FromString("0%"), "spec.maxUnavailable"},
		{FromString("150%"), "spec.maxUnavailable"},
		{FromString("ten"), "spec.maxUnavailable"},
		{FromInt(2), ""},
		{FromString("10%"), ""},
	} {
		p := &MachineConfigPool{ObjectMeta: ObjectMeta{Name: "worker"}, Spec: MachineConfigPoolSpec{MaxUnavailable: &tt.max,
			NodeSelector: &LabelSelector{MatchLabels: map[string]string{"node-role.kubernetes.io/worker": ""}}}}
		errs := Validate(p)
		if tt.want == "" && len(errs) > 0 || tt.want != "" && (len(errs) != 1 || errs[0].Field != tt.want) {
			t.Errorf("maxUnavailable %s: %v, want an error on %q", tt.max.String(), errs, tt.want)
		}
	}
	// 10% of 1,000 nodes is 100; of 5 nodes it rounds down to 0, and a
	// pool always updates at least one.
	ten := FromString("10%")
	s := MachineConfigPoolSpec{MaxUnavailable: &ten}
	if a, b := s.MaxUnavailableOf(1000), s.MaxUnavailableOf(5); a != 100 || b != 1 {
		t.Errorf("10%% of 1000 = %d (want 100), of 5 = %d (want 1)", a, b)
	}
	if n := (&MachineConfigPoolSpec{}).MaxUnavailableOf(5); n != 1 {
		t.Errorf("default maxUnavailable = %d, want 1", n)
	}
}

// The README's examples decode and validate as they are.
func TestMachineConfigExamples(t *testing.T) {
	files, err := filepath.Glob("../../examples/machineconfig/*/*.yaml")
	more, _ := filepath.Glob("../../examples/machineconfig/*.yaml")
	files = append(files, more...)
	if err != nil || len(files) < 2 {
		t.Fatalf("examples: %v %v", files, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		objs, _, err := DecodeYAMLOrJSON(b)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, o := range objs {
			if errs := Validate(o); len(errs) > 0 {
				t.Errorf("%s: %v", f, errs)
			}
		}
	}
}

// Same-priority configs conflict on a file only within one role: the
// MCO's 99-master-chrony and 99-worker-chrony go to different pools.
func TestConfigConflictsByRole(t *testing.T) {
	mk := func(name, role, data string) *MachineConfig {
		mc := &MachineConfig{ObjectMeta: ObjectMeta{Name: name}}
		if role != "" {
			mc.Labels = map[string]string{LabelMachineConfigRole: role}
		}
		mc.Spec.Config.Storage.Files = []IgnitionFile{{Path: "/etc/chrony.conf", Contents: IgnitionContents{Source: "data:," + data}}}
		return mc
	}
	for _, tt := range []struct {
		a, b *MachineConfig
		want int
	}{
		{mk("99-master-chrony", "master", "m"), mk("99-worker-chrony", "worker", "w"), 0},
		{mk("99-a", "worker", "a"), mk("99-b", "worker", "b"), 1},
		{mk("99-a", "", "a"), mk("99-b", "worker", "b"), 1},
		{mk("99-a", "worker", "a"), mk("98-b", "worker", "b"), 0},
		{mk("99-a", "worker", "same"), mk("99-b", "worker", "same"), 0},
	} {
		if got := len(ConfigConflicts(tt.a, tt.b)); got != tt.want {
			t.Errorf("%s/%s vs %s/%s: %d conflicts, want %d", tt.a.Name, tt.a.Labels[LabelMachineConfigRole], tt.b.Name, tt.b.Labels[LabelMachineConfigRole], got, tt.want)
		}
	}
}

// A node in a custom pool and worker belongs to the custom pool (the
// MCO's rule); one in two custom pools to none.
func TestPoolOf(t *testing.T) {
	pool := func(name, label string) *MachineConfigPool {
		return &MachineConfigPool{ObjectMeta: ObjectMeta{Name: name}, Spec: MachineConfigPoolSpec{NodeSelector: &LabelSelector{MatchLabels: map[string]string{label: ""}}}}
	}
	pools := []*MachineConfigPool{pool("worker", "node-role.kubernetes.io/worker"), pool("infra", "node-role.kubernetes.io/infra"), pool("gpu", "gpu")}
	node := func(labels ...string) *Node {
		n := &Node{ObjectMeta: ObjectMeta{Name: "n", Labels: map[string]string{}}}
		for _, l := range labels {
			n.Labels[l] = ""
		}
		return n
	}
	for _, tt := range []struct {
		n    *Node
		want string
	}{
		{node("node-role.kubernetes.io/worker"), "worker"},
		{node("node-role.kubernetes.io/worker", "node-role.kubernetes.io/infra"), "infra"},
		{node("node-role.kubernetes.io/infra", "gpu"), ""},
		{node("other"), ""},
	} {
		if got := PoolOf(tt.n, pools); got != tt.want {
			t.Errorf("PoolOf(%v) = %q, want %q", tt.n.Labels, got, tt.want)
		}
	}
}

// OpenShift's node disruption policy example applies as it is; bad
// policies are refused with every problem by field path.
func TestMachineConfigurationValidation(t *testing.T) {
	doc := `apiVersion: operator.openshift.io/v1
kind: MachineConfiguration
metadata:
  name: cluster
spec:
  managementState: Managed
  nodeDisruptionPolicy:
    files:
    - path: /etc/my-file.conf
      actions:
      - type: Restart
        restart:
          serviceName: my-service.service
    units:
    - name: auditd.service
      actions:
      - type: Drain
      - type: Reload
        reload:
          serviceName: crio.service
      - type: DaemonReload
    sshkey:
      actions:
      - type: None
`
	objs, _, err := DecodeYAMLOrJSON([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if errs := Validate(objs[0]); len(errs) > 0 {
		t.Errorf("OpenShift's example: %v", errs)
	}
	bad := &MachineConfiguration{ObjectMeta: ObjectMeta{Name: "other"}, Spec: MachineConfigurationSpec{
		ManagementState: "Sometimes",
		NodeDisruptionPolicy: NodeDisruptionPolicyConfig{
			Files: []NodeDisruptionPolicyFile{
				{Path: "etc/relative", Actions: []NodeDisruptionAction{{Type: DisruptionNone}}},
				{Path: "/etc/a", Actions: []NodeDisruptionAction{{Type: DisruptionReboot}, {Type: DisruptionDrain}}},
				{Path: "/etc/a"},
				{Path: "/etc/b", Actions: []NodeDisruptionAction{{Type: DisruptionReload}, {Type: DisruptionSpecial}, {Type: "Kick"}}},
				{Path: "/etc/c", Actions: []NodeDisruptionAction{{Type: DisruptionDrain, Restart: &NodeDisruptionService{ServiceName: "x.service"}}}},
			},
			Units: []NodeDisruptionPolicyUnit{
				{Name: "nosuffix", Actions: []NodeDisruptionAction{{Type: DisruptionRestart, Restart: &NodeDisruptionService{ServiceName: "bad"}}}},
			},
		},
	}}
	errs := Validate(bad)
	got := map[string]bool{}
	for _, e := range errs {
		got[e.Field] = true
	}
	p := "spec.nodeDisruptionPolicy."
	want := []string{
		"metadata.name",
		"spec.managementState",
		p + "files[0].path",
		p + "files[1].actions[0].type",
		p + "files[2].path",
		p + "files[2].actions",
		p + "files[3].actions[0].reload.serviceName",
		p + "files[3].actions[1].type",
		p + "files[3].actions[2].type",
		p + "files[4].actions[0].restart",
		p + "units[0].name",
		p + "units[0].actions[0].restart.serviceName",
	}
	for _, w := range want {
		if !got[w] {
			t.Errorf("no error for %s; got %v", w, errs)
		}
	}
	if len(errs) != len(want) {
		t.Errorf("%d errors, want %d: %v", len(errs), len(want), errs)
	}
}

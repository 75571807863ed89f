package admission

import (
	"maps"
	"strconv"
	"strings"
	"testing"

	"github.com/outpost-edge/outpost/controlplane/api"
)

func secs(n int64) *int64 { return &n }

// SPEC ADM-3: a new pod that does not tolerate not-ready or unreachable
// gets an Exists/NoExecute toleration of each it lacks, for 300 s unless
// set otherwise; its own tolerations (by today's key, by the seed's older
// key, with no key or no effect) are left alone.
func TestDefaultTolerationSeconds(t *testing.T) {
	nr := api.Toleration{Key: api.TaintNodeNotReady, Operator: api.TolerationOpExists, Effect: api.TaintEffectNoExecute, TolerationSeconds: secs(300)}
	ur := api.Toleration{Key: api.TaintNodeUnreachable, Operator: api.TolerationOpExists, Effect: api.TaintEffectNoExecute, TolerationSeconds: secs(300)}
	own := api.Toleration{Key: api.TaintNodeUnreachable, Operator: api.TolerationOpExists, Effect: api.TaintEffectNoExecute, TolerationSeconds: secs(6000)}
	oldName := api.Toleration{Key: "node.alpha.kubernetes.io/notReady", Operator: api.TolerationOpExists, Effect: api.TaintEffectNoExecute, TolerationSeconds: secs(6000)}
	all := api.Toleration{Operator: api.TolerationOpExists}
	noEffect := api.Toleration{Key: api.TaintNodeNotReady, Operator: api.TolerationOpExists}
	noSchedule := api.Toleration{Key: api.TaintNodeNotReady, Operator: api.TolerationOpExists, Effect: api.TaintEffectNoSchedule}
	other := api.Toleration{Key: "dedicated", Operator: api.TolerationOpEqual, Value: "db", Effect: api.TaintEffectNoSchedule}
	tests := []struct {
		name string
		have []api.Toleration
		want []api.Toleration
	}{
		{"none", nil, []api.Toleration{nr, ur}},
		{"unrelated kept, both added", []api.Toleration{other}, []api.Toleration{other, nr, ur}},
		{"its own unreachable", []api.Toleration{own}, []api.Toleration{own, nr}},
		{"seed's older not-ready name", []api.Toleration{oldName}, []api.Toleration{oldName, ur}},
		{"everything tolerated", []api.Toleration{all}, []api.Toleration{all}},
		{"no effect covers NoExecute", []api.Toleration{noEffect}, []api.Toleration{noEffect, ur}},
		{"NoSchedule does not", []api.Toleration{noSchedule}, []api.Toleration{noSchedule, nr, ur}},
	}
	chain := New(Config{}, Deps{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := pod("ns1", "p", nil)
			p.Spec.Tolerations = tt.have
			if err := admit(t, chain, OpCreate, developer, p, nil); err != nil {
				t.Fatal(err)
			}
			if !tolerationsEqual(p.Spec.Tolerations, tt.want) {
				t.Errorf("tolerations %s, want %s", show(p.Spec.Tolerations), show(tt.want))
			}
			api.SetDefaults(p)
			if errs := api.Validate(p); len(errs) > 0 {
				t.Errorf("the admitted pod is invalid: %v", errs)
			}
		})
	}
	// Each pod has its own seconds: changing one pod's changes no other's.
	a, b := pod("ns1", "a", nil), pod("ns1", "b", nil)
	_ = admit(t, chain, OpCreate, developer, a, nil)
	_ = admit(t, chain, OpCreate, developer, b, nil)
	*a.Spec.Tolerations[0].TolerationSeconds = 1
	if *b.Spec.Tolerations[0].TolerationSeconds != 300 {
		t.Error("two pods share one tolerationSeconds")
	}
	// Updates, bindings and workloads' templates are left alone.
	d := pod("ns1", "d", nil)
	if err := admit(t, chain, OpUpdate, developer, d, pod("ns1", "d", nil)); err != nil || len(d.Spec.Tolerations) != 0 {
		t.Errorf("an update got tolerations: %v %s", err, show(d.Spec.Tolerations))
	}
}

// The settings and the switch: the flags' seconds, and the seed's
// DefaultAdmissionConfig with disable: true.
func TestDefaultTolerationSecondsSettings(t *testing.T) {
	chain := New(Config{DefaultTolerationSeconds: DefaultTolerationSecondsConfig{NotReadySeconds: secs(60), UnreachableSeconds: secs(0)}}, Deps{})
	p := pod("ns1", "p", nil)
	if err := admit(t, chain, OpCreate, developer, p, nil); err != nil {
		t.Fatal(err)
	}
	if got := show(p.Spec.Tolerations); got != "node.kubernetes.io/not-ready:NoExecute for 60s, node.kubernetes.io/unreachable:NoExecute for 0s" {
		t.Errorf("tolerations %s", got)
	}
	cfg, err := ParseConfig([]byte(`admissionConfig:
  pluginConfig:
    DefaultTolerationSeconds:
      configuration:
        kind: DefaultAdmissionConfig
        apiVersion: v1
        disable: true
`))
	if err != nil || !cfg.DefaultTolerationSeconds.Disable || len(New(cfg, Deps{})) != 0 {
		t.Errorf("disable: true: %+v, %v", cfg, err)
	}
	// The seed's sample: disable: false is the default.
	cfg, err = ParseConfig([]byte(`admissionConfig: {pluginConfig: {DefaultTolerationSeconds: {configuration: {kind: DefaultAdmissionConfig, apiVersion: v1, disable: false}}}}`))
	if err != nil || cfg.DefaultTolerationSeconds.Disable {
		t.Errorf("disable: false: %+v, %v", cfg, err)
	}
	for in, want := range map[string]string{
		`admissionConfig: {pluginConfig: {DefaultTolerationSeconds: {configuration: {kind: Other}}}}`:    "admissionConfig.pluginConfig.DefaultTolerationSeconds.configuration.kind",
		`admissionConfig: {pluginConfig: {DefaultTolerationSeconds: {configuration: {disable: "yes"}}}}`: "admissionConfig.pluginConfig.DefaultTolerationSeconds.configuration.disable",
		`admissionConfig: {pluginConfig: {DefaultTolerationSeconds: {configuration: {disable: true}}}}
kubernetesMasterConfig: {admissionConfig: {pluginConfig: {DefaultTolerationSeconds: {configuration: {disable: false}}}}}`: "configures DefaultTolerationSeconds unlike",
	} {
		if _, err := ParseConfig([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error naming %s", in, err, want)
		}
	}
}

// Seed 000 §14.9.5's feature gate is accepted: taint-based eviction is
// always on. Other gates are refused by name; =false is a warning.
func TestFeatureGates(t *testing.T) {
	cfg, err := ParseConfig([]byte("kubernetesMasterConfig:\n  controllerArguments:\n    feature-gates:\n    - \"TaintBasedEvictions=true\"\n"))
	if err != nil || len(cfg.Warnings) != 0 {
		t.Errorf("TaintBasedEvictions=true: %v %v", cfg.Warnings, err)
	}
	// Spaces and empty entries, as Kubernetes' gate parser takes them.
	cfg, err = ParseConfig([]byte("kubernetesMasterConfig: {controllerArguments: {feature-gates: [' TaintBasedEvictions = true ,']}}"))
	if err != nil || len(cfg.Warnings) != 0 {
		t.Errorf("spaces and a trailing comma: %v %v", cfg.Warnings, err)
	}
	cfg, err = ParseConfig([]byte("kubernetesMasterConfig: {controllerArguments: {feature-gates: [TaintBasedEvictions=false]}}"))
	if err != nil || len(cfg.Warnings) != 1 || !strings.Contains(cfg.Warnings[0], "always on") {
		t.Errorf("TaintBasedEvictions=false: %v %v", cfg.Warnings, err)
	}
	_, err = ParseConfig([]byte("kubernetesMasterConfig: {controllerArguments: {feature-gates: [PodPriority=true], pod-eviction-timeout: [5m]}}"))
	if err == nil || !strings.Contains(err.Error(), "feature-gates[0]") || !strings.Contains(err.Error(), "PodPriority") ||
		!strings.Contains(err.Error(), "controllerArguments.pod-eviction-timeout: unknown field") {
		t.Errorf("unknown gate and argument: %v", err)
	}
}

// The eviction settings are config keys with kube-controller-manager's
// names (TNT-8), in OpenShift's list form or plain; values stay strings
// for the server to read as it reads its flags.
func TestControllerArguments(t *testing.T) {
	cfg, err := ParseConfig([]byte(`kubernetesMasterConfig:
  controllerArguments:
    node-monitor-grace-period: ["20s"]
    node-eviction-rate: ["0.5"]
    secondary-node-eviction-rate: 0.05
    unhealthy-zone-threshold: "0.6"
    large-cluster-size-threshold: [100]
    fence-margin: [3s]
`))
	want := map[string]string{"node-monitor-grace-period": "20s", "node-eviction-rate": "0.5", "secondary-node-eviction-rate": "0.05",
		"unhealthy-zone-threshold": "0.6", "large-cluster-size-threshold": "100", "fence-margin": "3s"}
	if err != nil || !maps.Equal(cfg.ControllerArguments, want) {
		t.Fatalf("arguments %v (%v), want %v", cfg.ControllerArguments, err, want)
	}
	_, err = ParseConfig([]byte("kubernetesMasterConfig: {controllerArguments: {node-eviction-rate: ['0.1', '0.2'], fence-margin: {a: 1}, unhealthy-zone-threshold: [[1]]}}"))
	for _, w := range []string{
		"controllerArguments.node-eviction-rate: Invalid value", "must hold one value",
		"controllerArguments.fence-margin: Invalid value", "controllerArguments.unhealthy-zone-threshold[0]: Invalid value",
	} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("bad arguments: %v, want it to say %q", err, w)
		}
	}
}

func tolerationsEqual(a, b []api.Toleration) bool { return show(a) == show(b) }

func show(ts []api.Toleration) string {
	var parts []string
	for _, t := range ts {
		s := t.Key
		if t.Value != "" {
			s += "=" + t.Value
		}
		s += ":" + string(t.Effect)
		if t.TolerationSeconds != nil {
			s += " for " + strconv.FormatInt(*t.TolerationSeconds, 10) + "s"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

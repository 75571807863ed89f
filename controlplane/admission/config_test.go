package admission

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

var seedNS1Whitelist = map[string]string{"region": "west", "env": "test", "infra": "fedora", "os": "fedora"}

// TestParseConfigSeedSamples parses the seed's samples (14.4.2 to 14.4.4)
// as the seed prints them, "..." lines included.
func TestParseConfigSeedSamples(t *testing.T) {
	seedSelector := &PodNodeSelectorConfig{
		ClusterDefaultNodeSelector: map[string]string{"k3": "v3"},
		Whitelists:                 map[string]map[string]string{"ns1": seedNS1Whitelist},
	}
	tests := []struct {
		file string
		want Config
	}{
		// Without a blacklist, OpenShift's default one.
		{"seed-14.4.2-admissionConfig.yaml", Config{PodNodeConstraints: &PodNodeConstraintsConfig{NodeSelectorLabelBlacklist: []string{"kubernetes.io/hostname"}}}},
		{"seed-14.4.2-kubernetesMasterConfig.yaml", Config{PodNodeConstraints: &PodNodeConstraintsConfig{NodeSelectorLabelBlacklist: []string{"kubernetes.io/hostname"}}}},
		{"seed-14.4.4-configuration.yaml", Config{PodNodeSelector: seedSelector}},
		{"full.yaml", Config{
			PodNodeConstraints: &PodNodeConstraintsConfig{NodeSelectorLabelBlacklist: []string{"kubernetes.io/hostname", "region"}},
			PodNodeSelector:    seedSelector,
		}},
		{"full.json", Config{
			PodNodeConstraints: &PodNodeConstraintsConfig{NodeSelectorLabelBlacklist: []string{"kubernetes.io/hostname", "region"}},
			PodNodeSelector:    seedSelector,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, err := ParseConfig(readTestdata(t, tt.file))
			if err != nil {
				t.Fatalf("ParseConfig: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v %+v, want %+v %+v", got.PodNodeConstraints, got.PodNodeSelector, tt.want.PodNodeConstraints, tt.want.PodNodeSelector)
			}
		})
	}
}

// TestParseConfigSeedPlaceholders: the seed's 14.4.3 samples name
// "<label>" where the administrator's label goes; filled in they parse,
// left as they are they are refused at that entry, saying why.
func TestParseConfigSeedPlaceholders(t *testing.T) {
	for file, path := range map[string]string{
		"seed-14.4.3-admissionConfig.yaml":        "admissionConfig.pluginConfig.PodNodeConstraints.configuration.nodeSelectorLabelBlacklist[1]",
		"seed-14.4.3-kubernetesMasterConfig.yaml": "kubernetesMasterConfig.admissionConfig.pluginConfig.PodNodeConstraints.configuration.nodeSelectorLabelBlacklist[1]",
	} {
		data := readTestdata(t, file)
		_, err := ParseConfig(data)
		if err == nil || !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "placeholder") {
			t.Errorf("%s as printed: err = %v, want a placeholder refusal at %s", file, err, path)
		}
		filled := strings.NewReplacer("<label_1>", "region", "<label>", "region").Replace(string(data))
		cfg, err := ParseConfig([]byte(filled))
		if err != nil {
			t.Fatalf("%s filled in: %v", file, err)
		}
		if want := []string{"kubernetes.io/hostname", "region"}; cfg.PodNodeConstraints == nil || !reflect.DeepEqual(cfg.PodNodeConstraints.NodeSelectorLabelBlacklist, want) {
			t.Errorf("%s filled in: blacklist %+v, want %v", file, cfg.PodNodeConstraints, want)
		}
	}
}

func TestParseConfigEmpty(t *testing.T) {
	for _, in := range []string{"", "\n", "# nothing\n", "{}", "null", "...\n", "admissionConfig:\n", "admissionConfig:\n  pluginConfig: {}\n"} {
		cfg, err := ParseConfig([]byte(in))
		if err != nil {
			t.Errorf("%q: %v", in, err)
			continue
		}
		// DefaultTolerationSeconds alone: it is on unless disabled.
		chain := New(cfg, Deps{})
		if cfg.PodNodeConstraints != nil || cfg.PodNodeSelector != nil || len(chain) != 1 {
			t.Errorf("%q: plugins enabled: %+v", in, cfg)
		} else if _, ok := chain[0].(*defaultTolerationSeconds); !ok {
			t.Errorf("%q: the one step is %T", in, chain[0])
		}
	}
}

func TestParseConfigVariants(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Config
	}{
		{"explicit empty blacklist", `
admissionConfig:
  pluginConfig:
    PodNodeConstraints:
      configuration:
        nodeSelectorLabelBlacklist: []
`, Config{PodNodeConstraints: &PodNodeConstraintsConfig{NodeSelectorLabelBlacklist: []string{}}}},
		{"plugin without configuration", `
admissionConfig:
  pluginConfig:
    PodNodeConstraints: {}
    PodNodeSelector:
`, Config{
			PodNodeConstraints: &PodNodeConstraintsConfig{NodeSelectorLabelBlacklist: []string{"kubernetes.io/hostname"}},
			PodNodeSelector:    &PodNodeSelectorConfig{},
		}},
		{"empty selectors", `
admissionConfig:
  pluginConfig:
    PodNodeSelector:
      configuration:
        podNodeSelectorPluginConfig:
          clusterDefaultNodeSelector: ""
          ns2: " "
          ns3: " a = b , c=d "
`, Config{PodNodeSelector: &PodNodeSelectorConfig{
			Whitelists: map[string]map[string]string{"ns2": nil, "ns3": {"a": "b", "c": "d"}},
		}}},
		{"both places alike", `
admissionConfig:
  pluginConfig:
    PodNodeSelector:
      configuration:
        podNodeSelectorPluginConfig: {clusterDefaultNodeSelector: "a=b"}
kubernetesMasterConfig:
  admissionConfig:
    pluginConfig:
      PodNodeSelector:
        configuration:
          podNodeSelectorPluginConfig: {clusterDefaultNodeSelector: "a=b"}
`, Config{PodNodeSelector: &PodNodeSelectorConfig{ClusterDefaultNodeSelector: map[string]string{"a": "b"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseConfig([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v %+v, want %+v %+v", got.PodNodeConstraints, got.PodNodeSelector, tt.want.PodNodeConstraints, tt.want.PodNodeSelector)
			}
		})
	}
}

// TestParseConfigRefusals: every mistake is refused with its field path,
// and all of a file's mistakes in one error.
func TestParseConfigRefusals(t *testing.T) {
	const pnc = "admissionConfig.pluginConfig.PodNodeConstraints.configuration"
	const pns = "admissionConfig.pluginConfig.PodNodeSelector.configuration.podNodeSelectorPluginConfig"
	tests := []struct {
		name string
		in   string
		want []string // substrings of the error, each a path and its rule
	}{
		{"unknown top-level key", "admissionConfg: {}\n", []string{"admissionConfg: unknown field"}},
		{"wrong kind", "kind: Policy\n", []string{`kind: Unsupported value: "Policy"`, `"MasterConfig"`}},
		{"not an object", "- a\n", []string{"(document): Invalid value", "must be an object"}},
		{"unknown plugin", "admissionConfig:\n  pluginConfig:\n    PodNodeConstraint: {}\n",
			[]string{`admissionConfig.pluginConfig.PodNodeConstraint: Unsupported value: "PodNodeConstraint"`, `"PodNodeConstraints", "PodNodeSelector"`}},
		{"misspelt blacklist", "admissionConfig:\n  pluginConfig:\n    PodNodeConstraints:\n      configuration:\n        nodeSelectorLabelBlackList: [a]\n",
			[]string{pnc + ".nodeSelectorLabelBlackList: unknown field", "allowed here: apiVersion, apiversion, kind, nodeSelectorLabelBlacklist"}},
		{"wrong apiVersion", "admissionConfig:\n  pluginConfig:\n    PodNodeConstraints:\n      configuration:\n        apiVersion: v2\n",
			[]string{pnc + `.apiVersion: Unsupported value: "v2"`}},
		{"wrong apiversion", "admissionConfig:\n  pluginConfig:\n    PodNodeConstraints:\n      configuration:\n        apiversion: v2\n",
			[]string{pnc + `.apiversion: Unsupported value: "v2"`}},
		{"both spellings", "admissionConfig:\n  pluginConfig:\n    PodNodeConstraints:\n      configuration:\n        apiVersion: v1\n        apiversion: v1\n",
			[]string{pnc + ".apiversion: Forbidden"}},
		{"wrong plugin kind", "admissionConfig:\n  pluginConfig:\n    PodNodeConstraints:\n      configuration:\n        kind: PodNodeSelectorConfig\n",
			[]string{pnc + `.kind: Unsupported value: "PodNodeSelectorConfig"`}},
		{"blacklist not a list", "admissionConfig:\n  pluginConfig:\n    PodNodeConstraints:\n      configuration:\n        nodeSelectorLabelBlacklist: region\n",
			[]string{pnc + `.nodeSelectorLabelBlacklist: Invalid value: "region": must be a list`}},
		{"bad and duplicate blacklist entries", "admissionConfig:\n  pluginConfig:\n    PodNodeConstraints:\n      configuration:\n        nodeSelectorLabelBlacklist: [region, 'bad key', region, 7]\n",
			[]string{pnc + `.nodeSelectorLabelBlacklist[1]: Invalid value: "bad key"`, pnc + `.nodeSelectorLabelBlacklist[2]: Duplicate value: "region"`, pnc + ".nodeSelectorLabelBlacklist[3]: Invalid value: 7: must be a string"}},
		{"malformed selectors", "admissionConfig:\n  pluginConfig:\n    PodNodeSelector:\n      configuration:\n        podNodeSelectorPluginConfig:\n          clusterDefaultNodeSelector: k3\n          ns1: region=west,,env=test\n          ns2: a!=b\n          ns3: a=b,a=c\n          ns4: a=-x\n",
			[]string{pns + `.clusterDefaultNodeSelector: Invalid value: "k3"`, "not key=value", pns + ".ns1: Invalid value", "empty term", pns + ".ns2: Invalid value", pns + ".ns3: Invalid value", "given twice", pns + ".ns4: Invalid value", "label value"}},
		{"bad namespace key", "admissionConfig:\n  pluginConfig:\n    PodNodeSelector:\n      configuration:\n        podNodeSelectorPluginConfig:\n          clusterDefaultNodeSelectr: a=b\n",
			[]string{pns + ".clusterDefaultNodeSelectr: unknown field", "clusterDefaultNodeSelector and namespace names"}},
		{"non-string selector", "admissionConfig:\n  pluginConfig:\n    PodNodeSelector:\n      configuration:\n        podNodeSelectorPluginConfig:\n          ns1: 5\n",
			[]string{pns + ".ns1: Invalid value: 5: must be a string"}},
		{"unknown PodNodeSelector key", "admissionConfig:\n  pluginConfig:\n    PodNodeSelector:\n      configuration:\n        clusterDefaultNodeSelector: a=b\n",
			[]string{"admissionConfig.pluginConfig.PodNodeSelector.configuration.clusterDefaultNodeSelector: unknown field"}},
		{"location without a file", "admissionConfig:\n  pluginConfig:\n    PodNodeSelector:\n      location: x.yaml\n",
			[]string{`admissionConfig.pluginConfig.PodNodeSelector.location: Invalid value: "x.yaml"`, "read from a file"}},
		{"location and configuration", "admissionConfig:\n  pluginConfig:\n    PodNodeSelector:\n      location: x.yaml\n      configuration: {}\n",
			[]string{"admissionConfig.pluginConfig.PodNodeSelector.location: Forbidden: give configuration or location, not both"}},
		{"places differ", "admissionConfig:\n  pluginConfig:\n    PodNodeConstraints:\n      configuration:\n        nodeSelectorLabelBlacklist: [a]\nkubernetesMasterConfig:\n  admissionConfig:\n    pluginConfig:\n      PodNodeConstraints:\n        configuration:\n          nodeSelectorLabelBlacklist: [b]\n",
			[]string{"kubernetesMasterConfig.admissionConfig.pluginConfig.PodNodeConstraints: Invalid value", "unlike admissionConfig.pluginConfig.PodNodeConstraints"}},
		{"unknown kubernetesMasterConfig key", "kubernetesMasterConfig:\n  servicesSubnet: 10.0.0.0/16\n", []string{"kubernetesMasterConfig.servicesSubnet: unknown field"}},
		{"duplicate key", "admissionConfig: {}\nadmissionConfig: {}\n", []string{"admissionConfig"}},
		{"two documents", "admissionConfig: {}\n---\nkind: MasterConfig\n", []string{"2 YAML documents"}},
		{"not YAML", "admissionConfig: [\n", []string{"YAML"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := ParseConfig([]byte(tt.in))
			if err == nil {
				t.Fatalf("accepted: %+v", cfg)
			}
			if !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("error %v does not wrap ErrInvalidConfig", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestParseConfigReportsEveryProblem(t *testing.T) {
	in := `
kind: MasterConfig
bogus: 1
admissionConfig:
  pluginConfig:
    PodNodeConstraints:
      configuration:
        kind: Wrong
        nodeSelectorLabelBlacklist: ["bad key"]
    PodNodeSelector:
      configuration:
        podNodeSelectorPluginConfig:
          ns1: "x"
`
	_, err := ParseConfig([]byte(in))
	if err == nil || !strings.Contains(err.Error(), "4 problems:") {
		t.Fatalf("err = %v, want 4 problems listed", err)
	}
}

// TestLoadConfigLocation: the seed's 14.4.4 second form, the plugin's
// configuration in its own file named relative to the config file.
func TestLoadConfigLocation(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"seed-14.4.4-location.yaml", "podnodeselector.yaml"} {
		if err := os.WriteFile(filepath.Join(dir, name), readTestdata(t, name), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := LoadConfig(filepath.Join(dir, "seed-14.4.4-location.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := &PodNodeSelectorConfig{
		ClusterDefaultNodeSelector: map[string]string{"k3": "v3"},
		Whitelists:                 map[string]map[string]string{"ns1": seedNS1Whitelist},
	}
	if !reflect.DeepEqual(cfg.PodNodeSelector, want) || cfg.PodNodeConstraints != nil {
		t.Errorf("got %+v %+v, want PodNodeSelector %+v", cfg.PodNodeConstraints, cfg.PodNodeSelector, want)
	}

	// Mistakes in the referenced file are reported under the location.
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("podNodeSelectorPluginConfig:\n  ns1: a=b=c\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	main := filepath.Join(dir, "main.yaml")
	if err := os.WriteFile(main, []byte("admissionConfig:\n  pluginConfig:\n    PodNodeSelector:\n      location: bad.yaml\n    PodNodeConstraints:\n      location: missing.yaml\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = LoadConfig(main)
	for _, w := range []string{
		"admissionConfig.pluginConfig.PodNodeSelector.location[bad.yaml].podNodeSelectorPluginConfig.ns1: Invalid value",
		`admissionConfig.pluginConfig.PodNodeConstraints.location: Invalid value: "missing.yaml"`,
	} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("err = %v, want it to contain %q", err, w)
		}
	}
	if _, err := LoadConfig(filepath.Join(dir, "nope.yaml")); err == nil {
		t.Error("LoadConfig of a missing file succeeded")
	}
	if _, err := LoadConfig(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("LoadConfig of a directory: %v", err)
	}
}

func FuzzParseConfig(f *testing.F) {
	for _, name := range []string{"full.yaml", "full.json", "seed-14.4.3-admissionConfig.yaml", "seed-14.4.4-location.yaml", "podnodeselector.yaml"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("admissionConfig:\n  pluginConfig:\n    PodNodeSelector:\n      configuration:\n        podNodeSelectorPluginConfig:\n          ns1: 'a=b,,c'\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := ParseConfig(data)
		if err != nil {
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("error %v does not wrap ErrInvalidConfig", err)
			}
			return
		}
		// Whatever parses must build plugins without panicking.
		New(cfg, Deps{})
	})
}

package cli

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// samplePolicy is a file of the policy package's seed samples.
func samplePolicy(name string) string {
	return filepath.Join("..", "scheduler", "policy", "testdata", name)
}

// TestPolicyCheckSamples runs `adm scheduler policy check` on the seed's
// sample policies with no server configured (it works offline), and
// checks it prints the predicates in run order with their arguments, the
// priorities with their weights, and the warnings.
func TestPolicyCheckSamples(t *testing.T) {
	tests := []struct {
		file string
		want []string // in this order in stdout
	}{
		{"region-zone-affinity-rack-spread.yaml", []string{
			"Predicates (",
			"RegionZoneAffinity      serviceAffinity on region, zone:",
			"Priorities (1;",
			"RackSpread              weight 1      serviceAntiAffinity on \"rack\":",
			"line 4: \"...\" ignored",
			"region-zone-affinity-rack-spread.yaml: valid\n",
		}},
		{"default-scheduler.json", []string{
			// GeneralPredicates expanded, cheap checks first: the run
			// order, not the file's.
			"CheckNodeUnschedulable", "HostName", "MatchNodeSelector", "PodFitsResources", "PodToleratesNodeTaints",
			"Region                       serviceAffinity on region:", "NoVolumeZoneConflict", "MatchInterPodAffinity",
			"(accepted, filtering nothing: MaxEBSVolumeCount, MaxGCEPDVolumeCount, MaxAzureDiskVolumeCount)",
			"SelectorSpreadPriority", "weight 1 ", "NodePreferAvoidPodsPriority", "weight 10000",
			"Zone ", "weight 2 ", "serviceAntiAffinity on \"zone\"",
			"Warnings:\n", "MaxEBSVolumeCount is accepted but filters nothing",
		}},
		{"modified-scheduler.yaml", []string{"Region", "serviceAffinity on region", "Zone", "weight 2", "flow mapping", "valid\n"}},
	}
	for _, tt := range tests {
		res := runCLI(t, context.Background(), "", "adm", "scheduler", "policy", "check", samplePolicy(tt.file))
		if res.code != 0 || res.stderr != "" {
			t.Errorf("%s: %+v", tt.file, res)
			continue
		}
		rest := res.stdout
		for _, w := range tt.want {
			i := strings.Index(rest, w)
			if i < 0 {
				t.Errorf("%s: %q missing or out of order in:\n%s", tt.file, w, res.stdout)
				break
			}
			rest = rest[i+len(w):]
		}
	}

	// Every seed sample is accepted as it is (SPEC SCH-2).
	entries, err := os.ReadDir(samplePolicy(""))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		res := runCLI(t, context.Background(), "", "adm", "scheduler", "policy", "check", samplePolicy(e.Name()))
		if res.code != 0 || !strings.HasSuffix(res.stdout, e.Name()+": valid\n") {
			t.Errorf("%s: a seed sample is refused: %+v", e.Name(), res)
		}
	}
}

func TestPolicyCheckRefusesBadFiles(t *testing.T) {
	dir := t.TempDir()
	bad := writeFile(t, dir, "bad.yaml", `kind: Policy
apiVersion: v1
predicates:
- name: NoSuchPredicate
- name: PodFitsResources
- name: Rack
  argument: {serviceAffinity: {labels: []}}
priorities:
- name: LeastRequestedPriority
  weight: 0
`)
	res := runCLI(t, context.Background(), "", "adm", "scheduler", "policy", "check", bad)
	if res.code != 1 || res.stdout != "" {
		t.Fatalf("bad policy: %+v", res)
	}
	for _, want := range []string{
		"error: " + bad + ": invalid scheduler policy: 3 problems:",
		`predicates[0].name: Invalid value: "NoSuchPredicate"`,
		"predicates[2].argument.serviceAffinity.labels: Required value",
		"priorities[0].weight: Invalid value: 0",
	} {
		if !strings.Contains(res.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, res.stderr)
		}
	}
	garbage := writeFile(t, dir, "garbage.yaml", "kind: [Policy\n")
	res = runCLI(t, context.Background(), "", "adm", "scheduler", "policy", "check", garbage)
	if res.code != 1 || !strings.Contains(res.stderr, "invalid scheduler policy: neither JSON nor YAML") {
		t.Errorf("garbage policy: %+v", res)
	}
	res = runCLI(t, context.Background(), "", "adm", "scheduler", "policy", "check", filepath.Join(dir, "missing.yaml"))
	if res.code != 1 || !regexp.MustCompile(`^error: read the policy: open .*missing.yaml: no such file or directory\n$`).MatchString(res.stderr) {
		t.Errorf("missing file: %+v", res)
	}
	res = runCLI(t, context.Background(), `{"kind":"Policy","predicates":[{"name":"HostName"}],"priorities":[{"name":"EqualPriority","weight":1}]}`,
		"adm", "scheduler", "policy", "check", "-")
	if res.code != 0 || !strings.Contains(res.stdout, "HostName") || !strings.HasSuffix(res.stdout, "-: valid\n") {
		t.Errorf("policy from stdin: %+v", res)
	}
}

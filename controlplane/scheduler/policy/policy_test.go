package policy

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func parseFile(t *testing.T, name string) (*Policy, []string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	p, warns, err := Parse(data)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return p, warns
}

// summary lists a policy's checks (name/type[args]) and priorities
// (name/type[args]*weight), to compare with what a sample says it enables.
func summary(p *Policy) (checks, prios []string) {
	for _, c := range Checks(p) {
		s := c.Name + "/" + c.Type
		if a := c.Argument; a != nil {
			switch {
			case a.ServiceAffinity != nil:
				s += "[" + strings.Join(a.ServiceAffinity.Labels, ",") + "]"
			case a.LabelsPresence != nil:
				s += "[" + strings.Join(a.LabelsPresence.Labels, ",") + map[bool]string{true: " present]", false: " absent]"}[a.LabelsPresence.Presence]
			}
		}
		checks = append(checks, s)
	}
	for _, pr := range p.Priorities {
		s := pr.Name + "/" + pr.Type()
		if a := pr.Argument; a != nil {
			switch {
			case a.ServiceAntiAffinity != nil:
				s += "[" + a.ServiceAntiAffinity.Label + "]"
			case a.LabelPreference != nil:
				s += "[" + a.LabelPreference.Label + map[bool]string{true: " present]", false: " absent]"}[a.LabelPreference.Presence]
			}
		}
		prios = append(prios, s+"*"+itoa(pr.Weight))
	}
	return checks, prios
}

func itoa(n int64) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

var defaultChecks = []string{
	"CheckNodeUnschedulable/CheckNodeUnschedulable",
	"HostName/HostName", "PodFitsHostPorts/PodFitsHostPorts", "MatchNodeSelector/MatchNodeSelector", "PodFitsResources/PodFitsResources",
	"NoDiskConflict/NoDiskConflict", "PodToleratesNodeTaints/PodToleratesNodeTaints", "Region/serviceAffinity[region]",
	"NoVolumeZoneConflict/NoVolumeZoneConflict", "CheckNodeMemoryPressure/CheckNodeMemoryPressure",
	"CheckNodeDiskPressure/CheckNodeDiskPressure", "MatchInterPodAffinity/MatchInterPodAffinity",
}

var defaultPriorities = []string{
	"SelectorSpreadPriority/SelectorSpreadPriority*1", "InterPodAffinityPriority/InterPodAffinityPriority*1",
	"LeastRequestedPriority/LeastRequestedPriority*1", "BalancedResourceAllocation/BalancedResourceAllocation*1",
	"NodePreferAvoidPodsPriority/NodePreferAvoidPodsPriority*10000", "NodeAffinityPriority/NodeAffinityPriority*1",
	"TaintTolerationPriority/TaintTolerationPriority*1", "Zone/serviceAntiAffinity[zone]*2",
}

// The sample policies of seed 000 (14.2.4, 14.2.4.1, 14.2.8), as files,
// parse and enable what the seed says they do.
func TestSeedSamplePolicies(t *testing.T) {
	tests := []struct {
		file   string
		checks []string
		prios  []string
		warn   []string // substrings some warning must contain
	}{
		{
			file: "default-scheduler.json", checks: defaultChecks, prios: defaultPriorities,
			warn: []string{"MaxEBSVolumeCount is accepted but filters nothing", "MaxGCEPDVolumeCount", "MaxAzureDiskVolumeCount"},
		},
		{
			file: "modified-scheduler.yaml",
			checks: []string{"CheckNodeUnschedulable/CheckNodeUnschedulable", "HostName/HostName", "MatchNodeSelector/MatchNodeSelector",
				"PodFitsResources/PodFitsResources", "NoDiskConflict/NoDiskConflict", "Region/serviceAffinity[region]"},
			prios: []string{"LeastRequestedPriority/LeastRequestedPriority*1", "BalancedResourceAllocation/BalancedResourceAllocation*1",
				"ServiceSpreadingPriority/ServiceSpreadingPriority*1", "Zone/serviceAntiAffinity[zone]*2"},
			warn: []string{"flow mapping"},
		},
		{
			file: "modified-scheduler-flat.yaml",
			checks: []string{"CheckNodeUnschedulable/CheckNodeUnschedulable", "HostName/HostName", "MatchNodeSelector/MatchNodeSelector",
				"PodFitsResources/PodFitsResources", "NoDiskConflict/NoDiskConflict", "Region/serviceAffinity[region]"},
			prios: []string{"LeastRequestedPriority/LeastRequestedPriority*1", "BalancedResourceAllocation/BalancedResourceAllocation*1",
				"ServiceSpreadingPriority/ServiceSpreadingPriority*1", "Zone/serviceAntiAffinity[zone]*2"},
		},
		{
			// region and zone affinity, rack anti-affinity.
			file:   "region-zone-affinity-rack-spread.yaml",
			checks: []string{"CheckNodeUnschedulable/CheckNodeUnschedulable", "RegionZoneAffinity/serviceAffinity[region,zone]"},
			prios:  []string{"RackSpread/serviceAntiAffinity[rack]*1"},
			warn:   []string{`line 4: "..." ignored`, `line 12: "..." ignored`},
		},
		{
			// city affinity, building and room anti-affinity.
			file:   "city-affinity-building-room-spread.yaml",
			checks: []string{"CheckNodeUnschedulable/CheckNodeUnschedulable", "CityAffinity/serviceAffinity[city]"},
			prios:  []string{"BuildingSpread/serviceAntiAffinity[building]*1", "RoomSpread/serviceAntiAffinity[room]*1"},
		},
		{
			// only nodes with a region label; prefer those with a zone label.
			file:   "require-region-prefer-zone.yaml",
			checks: []string{"CheckNodeUnschedulable/CheckNodeUnschedulable", "RequireRegion/labelsPresence[region present]"},
			prios:  []string{"ZonePreferred/labelPreference[zone present]*1"},
		},
		{
			// static and configurable predicates and priorities together;
			// PodFitsPorts is the older name of PodFitsHostPorts.
			file: "static-and-configurable.yaml",
			checks: []string{"CheckNodeUnschedulable/CheckNodeUnschedulable", "PodFitsPorts/PodFitsHostPorts", "MatchNodeSelector/MatchNodeSelector",
				"RequireRegion/labelsPresence[region present]", "BuildingNodesAvoid/labelsPresence[building absent]", "RegionAffinity/serviceAffinity[region]"},
			prios: []string{"ZoneSpread/serviceAntiAffinity[zone]*2", "ZonePreferred/labelPreference[zone present]*1", "ServiceSpreadingPriority/ServiceSpreadingPriority*1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			p, warns := parseFile(t, tt.file)
			checks, prios := summary(p)
			if !slices.Equal(checks, tt.checks) {
				t.Errorf("checks:\n got %q\nwant %q", checks, tt.checks)
			}
			if !slices.Equal(prios, tt.prios) {
				t.Errorf("priorities:\n got %q\nwant %q", prios, tt.prios)
			}
			for _, w := range tt.warn {
				if !slices.ContainsFunc(warns, func(s string) bool { return strings.Contains(s, w) }) {
					t.Errorf("no warning contains %q: %q", w, warns)
				}
			}
			desc := Describe(p)
			for _, pr := range p.Priorities {
				if !strings.Contains(desc, pr.Name) {
					t.Errorf("Describe does not mention %s:\n%s", pr.Name, desc)
				}
			}
		})
	}
}

// The seed's default file is the built-in default plus the cloud-only
// predicates, which filter nothing.
func TestDefaultMatchesSeed(t *testing.T) {
	fromFile, _ := parseFile(t, "default-scheduler.json")
	checks, prios := summary(Default())
	fc, fp := summary(fromFile)
	if !slices.Equal(checks, fc) || !slices.Equal(prios, fp) {
		t.Errorf("Default() differs from the seed's default file:\n%q %q\n%q %q", checks, prios, fc, fp)
	}
	if err := Validate(Default()); err != nil {
		t.Errorf("Default() is invalid: %v", err)
	}
	if w := Warnings(Default()); len(w) != 0 {
		t.Errorf("Default() has warnings: %q", w)
	}
}

// Bad policies are refused with every problem listed by field path.
func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"not a policy", `kind: Pod`, []string{`kind: Unsupported value: "Pod"`}},
		{"no kind", `predicates: []`, []string{"kind: Required value"}},
		{"bad version", `{"kind":"Policy","apiVersion":"v2"}`, []string{`apiVersion: Unsupported value: "v2"`}},
		{"not YAML", "kind: [", []string{"neither JSON nor YAML"}},
		{"a list", "- a\n- b", []string{"(document)"}},
		{"everything wrong at once", `
kind: Policy
colour: blue
predicates:
  - name: PodFitsResource
  - name: podfitsresources
  - name: serviceAffinity
  - name: Region
    argument:
      serviceAffinity:
        labels: []
  - name: Region
    argument:
      labelsPresence:
        labels: ["bad label!"]
  - name: PodFitsResources
    argument:
      serviceAffinity:
        labels: [region]
  - name: Both
    argument:
      serviceAffinity: {labels: [a]}
      labelsPresence: {labels: [b]}
  - name: Prio
    argument:
      serviceAntiAffinity: {label: zone}
  - argument: {}
priorities:
  - name: LeastRequestedPriority
    weight: 0
  - name: MostRequestedPriority
    weight: -1
  - name: EqualPriority
  - name: Nope
    weight: 1
  - name: Zone
    weight: "two"
    argument:
      serviceAntiAffinity:
        label: ""
  - name: RackSpread
    weight: 1
    argument:
      serviceAffinity:
        labels: [rack]
  - name: Zone
    weight: 1
    argument:
      labelPreference: {label: zone, presence: maybe}
`, []string{
			"colour: unknown field",
			`predicates[0].name: Invalid value: "PodFitsResource": unknown predicate`,
			`predicates[1].name: Invalid value: "podfitsresources": unknown predicate (did you mean "PodFitsResources"?)`,
			"predicates[2].argument: Required value: serviceAffinity is configurable",
			"predicates[3].argument.serviceAffinity.labels: Required value",
			`predicates[4].name: Duplicate value: "Region"`,
			`predicates[4].argument.labelsPresence.labels[0]: Invalid value: "bad label!"`,
			`predicates[5].name: Invalid value: "PodFitsResources": is a built-in predicate`,
			"predicates[6].argument: Invalid value: \"2 arguments\"",
			"predicates[7].argument.serviceAntiAffinity: Invalid value: \"{...}\": is a priority argument",
			"predicates[8].name: Required value",
			"priorities[0].weight: Invalid value: 0: must be a positive integer",
			"priorities[1].weight: Invalid value: -1",
			"priorities[2].weight: Required value",
			`priorities[3].name: Invalid value: "Nope": unknown priority`,
			`priorities[4].weight: Invalid value: "two": must be an integer`,
			"priorities[4].argument.serviceAntiAffinity.label: Required value",
			"priorities[5].argument.serviceAffinity: Invalid value: \"{...}\": is a predicate argument",
			`priorities[6].name: Duplicate value: "Zone"`,
			`priorities[6].argument.labelPreference.presence: Invalid value: "maybe": must be true or false`,
		}},
		{"extenders", `{"kind":"Policy","extenders":[{"urlPrefix":"http://x"}]}`, []string{"extenders: Forbidden"}},
		{"symmetric weight", `{"kind":"Policy","hardPodAffinitySymmetricWeight":101}`, []string{"hardPodAffinitySymmetricWeight: Invalid value: 101"}},
		{"antiaffinity labels list of two", `{"kind":"Policy","priorities":[{"name":"S","weight":1,"argument":{"serviceAntiAffinity":{"labels":["a","b"]}}}]}`,
			[]string{"serviceAntiAffinity spreads over one label"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := Parse([]byte(tt.in))
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			if n := strings.Count(err.Error(), "\n  - "); len(tt.want) > 1 && n != len(tt.want) {
				t.Errorf("error lists %d problems, want %d:\n%v", n, len(tt.want), err)
			}
		})
	}
}

// The forms the seed writes in its snippets are accepted, with warnings
// where they mean something else than they seem to.
func TestSeedSnippetForms(t *testing.T) {
	// 14.2.5.3: a predicate with "weight" : "1" and a serviceAffinity on
	// rack; 14.2.6.2: serviceAntiAffinity with a labels list.
	in := `{"kind": "Policy", "predicates":[ { "name":"ZoneAffinity", "weight" : "1", "argument":{ "serviceAffinity":{ "labels":[ "rack" ] } } } ],
	"priorities":[ { "name":"RackSpread", "weight" : "1", "argument":{ "serviceAntiAffinity":{ "labels":[ "rack" ] } } },
	{ "name":"RackPreferred", "weight" : 1, "argument":{ "labelPreference":{ "label": "rack" } } } ] }`
	p, warns, err := Parse([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	checks, prios := summary(p)
	if !slices.Equal(checks, []string{"CheckNodeUnschedulable/CheckNodeUnschedulable", "ZoneAffinity/serviceAffinity[rack]"}) {
		t.Errorf("checks %q", checks)
	}
	if !slices.Equal(prios, []string{"RackSpread/serviceAntiAffinity[rack]*1", "RackPreferred/labelPreference[rack absent]*1"}) {
		t.Errorf("priorities %q", prios)
	}
	for _, w := range []string{"predicates[0].weight: ignored", "read as label: rack", "labelPreference.presence: not given, so false"} {
		if !slices.ContainsFunc(warns, func(s string) bool { return strings.Contains(s, w) }) {
			t.Errorf("no warning contains %q: %q", w, warns)
		}
	}
}

func TestChecks(t *testing.T) {
	p := &Policy{Kind: Kind, Predicates: []Predicate{
		{Name: MatchInterPodAffinity},
		{Name: PodFitsResources},
		{Name: GeneralPredicates},
		{Name: "PodFitsPorts"},
		{Name: MaxEBSVolumeCount},
		{Name: CheckNodeLabelPresence},
		{Name: "A", Argument: &PredicateArgument{LabelsPresence: &LabelsPresence{Labels: []string{"a"}}}},
		{Name: "B", Argument: &PredicateArgument{LabelsPresence: &LabelsPresence{Labels: []string{"b"}}}},
	}}
	if err := Validate(p); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range Checks(p) {
		got = append(got, c.Name)
	}
	// Once each, cheapest first, configurable ones once per name, no-ops
	// left out, CheckNodeUnschedulable always.
	want := []string{CheckNodeUnschedulable, HostName, PodFitsHostPorts, MatchNodeSelector, PodFitsResources, "A", "B", MatchInterPodAffinity}
	if !slices.Equal(got, want) {
		t.Errorf("Checks = %q, want %q", got, want)
	}
	ws := Warnings(p)
	for _, w := range []string{"MaxEBSVolumeCount is accepted but filters nothing", "CheckNodeLabelPresence checks nothing without an argument"} {
		if !slices.ContainsFunc(ws, func(s string) bool { return strings.Contains(s, w) }) {
			t.Errorf("no warning contains %q: %q", w, ws)
		}
	}
}

// Leaving out a whole list keeps the default one; an empty list is empty.
func TestMissingLists(t *testing.T) {
	p, warns, err := Parse([]byte(`{"kind":"Policy","priorities":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Predicates) != len(Default().Predicates) || len(p.Priorities) != 0 {
		t.Errorf("predicates %d, priorities %d", len(p.Predicates), len(p.Priorities))
	}
	if !slices.ContainsFunc(warns, func(s string) bool { return strings.Contains(s, "default predicates apply") }) ||
		!slices.ContainsFunc(warns, func(s string) bool { return strings.Contains(s, "no priorities") }) {
		t.Errorf("warnings %q", warns)
	}
}

func TestDescribe(t *testing.T) {
	p, _ := parseFile(t, "static-and-configurable.yaml")
	d := Describe(p)
	for _, want := range []string{
		"Predicates (6, in the order they run",
		"CheckNodeUnschedulable", "always on",
		"RequireRegion", "labelsPresence region, presence true",
		"BuildingNodesAvoid", "labelsPresence building, presence false",
		"RegionAffinity", "serviceAffinity on region",
		"ZoneSpread", "weight 2", `serviceAntiAffinity on "zone"`,
		`labelPreference "zone", presence true`,
	} {
		if !strings.Contains(d, want) {
			t.Errorf("Describe lacks %q:\n%s", want, d)
		}
	}
	if strings.Index(d, "PodFitsPorts") > strings.Index(d, "RegionAffinity") {
		t.Errorf("Describe does not list predicates in run order:\n%s", d)
	}
}

// Every predicate and priority named in the seed is known.
func TestSeedNamesKnown(t *testing.T) {
	for _, n := range []string{NoVolumeZoneConflict, MaxEBSVolumeCount, MaxGCEPDVolumeCount, MatchInterPodAffinity, NoDiskConflict,
		PodToleratesNodeTaints, CheckNodeMemoryPressure, CheckNodeDiskPressure, CheckVolumeBinding, CheckNodeCondition,
		PodToleratesNodeNoExecuteTaints, CheckNodeLabelPresence, CheckServiceAffinity, MaxAzureDiskVolumeCount, PodFitsResources,
		PodFitsHostPorts, HostName, MatchNodeSelector, GeneralPredicates, CheckNodePIDPressure, "PodFitsPorts"} {
		if _, ok := PredicateInfo(n); !ok {
			t.Errorf("predicate %s unknown", n)
		}
	}
	for _, n := range []string{SelectorSpreadPriority, InterPodAffinityPriority, LeastRequestedPriority, BalancedResourceAllocation,
		NodePreferAvoidPodsPriority, NodeAffinityPriority, TaintTolerationPriority, EqualPriority, MostRequestedPriority,
		ImageLocalityPriority, ServiceSpreadingPriority} {
		if _, ok := PriorityInfo(n); !ok {
			t.Errorf("priority %s unknown", n)
		}
	}
}

package api

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestParseSelector(t *testing.T) {
	labels := map[string]string{"env": "prod", "tier": "fe", "cpus": "8", "example.com/team": "a"}
	tests := []struct {
		in      string
		str     string // canonical String()
		matches bool
		reqs    []Requirement
	}{
		{"", "", true, nil},
		{"  ", "", true, nil},
		{"env=prod", "env=prod", true, []Requirement{{Key: "env", Operator: OpEquals, Values: []string{"prod"}}}},
		{"env==prod", "env=prod", true, nil},
		{"env = prod", "env=prod", true, nil},
		{"env!=prod", "env!=prod", false, []Requirement{{Key: "env", Operator: OpNotEquals, Values: []string{"prod"}}}},
		{"missing!=x", "missing!=x", true, nil},
		{"env in (dev, prod)", "env in (dev,prod)", true, []Requirement{{Key: "env", Operator: OpIn, Values: []string{"dev", "prod"}}}},
		{"env in (prod,dev,prod)", "env in (dev,prod)", true, nil},
		{"env notin (prod)", "env notin (prod)", false, nil},
		{"missing notin (prod)", "missing notin (prod)", true, nil},
		{"missing in (prod)", "missing in (prod)", false, nil},
		{"tier", "tier", true, []Requirement{{Key: "tier", Operator: OpExists}}},
		{"!tier", "!tier", false, []Requirement{{Key: "tier", Operator: OpDoesNotExist}}},
		{"! missing", "!missing", true, nil},
		{"tier,env=prod", "env=prod,tier", true, nil},
		{"tier,env=dev", "env=dev,tier", false, nil},
		{"example.com/team=a", "example.com/team=a", true, nil},
		{"cpus>4", "cpus>4", true, []Requirement{{Key: "cpus", Operator: OpGt, Values: []string{"4"}}}},
		{"cpus<4", "cpus<4", false, nil},
		{"env>4", "env>4", false, nil},
		{"env=", "env=", false, nil},
		{"x in ()", "x in ()", false, []Requirement{{Key: "x", Operator: OpIn, Values: []string{""}}}},
		{"in", "in", false, nil},
		{"notin=a", "notin=a", false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			s, err := ParseSelector(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.String(); got != tt.str {
				t.Errorf("String() = %q, want %q", got, tt.str)
			}
			if got := s.Matches(labels); got != tt.matches {
				t.Errorf("Matches = %v, want %v", got, tt.matches)
			}
			if s.Empty() != (tt.str == "") {
				t.Errorf("Empty() = %v", s.Empty())
			}
			if tt.reqs != nil && !slices.EqualFunc(s.Requirements(), tt.reqs, func(a, b Requirement) bool {
				return a.Key == b.Key && a.Operator == b.Operator && slices.Equal(a.Values, b.Values)
			}) {
				t.Errorf("Requirements() = %+v, want %+v", s.Requirements(), tt.reqs)
			}
			again, err := ParseSelector(s.String())
			if err != nil || again.String() != s.String() {
				t.Errorf("String() does not parse back: %q, %v", again, err)
			}
		})
	}
}

func TestParseSelectorErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{"a=b,", "at position 4: expected a requirement after ','"},
		{",a", "at position 0: expected a label key"},
		{"a b", `at position 2: expected one of '=', '==', '!=', '>', '<', 'in', 'notin', ',' or the end after key "a", found "b"`},
		{"a in b", "at position 5: expected '(' to open the set of values"},
		{"a in (b", "expected ')' to close the set of values"},
		{"a in (b c)", "unexpected 'c' in a set of values"},
		{"a=b=c", `unexpected '=' in the value of key "a"`},
		{"a=b c", `at position 4: expected ',' or the end, found "c"`},
		{"!", "expected a label key after '!'"},
		{"-a=b", `at position 0: invalid label key "-a"`},
		{"a=-b", `invalid label value "-b"`},
		{"a>b", "must be an integer"},
		{"a/b/c", "invalid label key"},
		{"(a)", "expected a label key"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			s, err := ParseSelector(tt.in)
			if err == nil {
				t.Fatalf("parsed %q, want an error", s)
			}
			if !errors.Is(err, ErrSelector) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q, want ErrSelector containing %q", err, tt.want)
			}
		})
	}
}

func TestSelectorFromSetAndLabelSelector(t *testing.T) {
	labels := map[string]string{"app": "web", "tier": "fe"}
	if s := SelectorFromSet(map[string]string{"tier": "fe", "app": "web"}); !s.Matches(labels) || s.String() != "app=web,tier=fe" {
		t.Errorf("SelectorFromSet: %q matches=%v", s, s.Matches(labels))
	}
	if s := SelectorFromSet(nil); !s.Empty() || !s.Matches(nil) {
		t.Errorf("empty set must match everything")
	}

	s, err := SelectorFromLabelSelector(nil)
	if err != nil || s.Matches(labels) || s.Matches(nil) || s.Empty() {
		t.Errorf("nil LabelSelector must match nothing: %v %v", s, err)
	}
	s, err = SelectorFromLabelSelector(&LabelSelector{})
	if err != nil || !s.Matches(labels) || !s.Empty() {
		t.Errorf("empty LabelSelector must match everything: %v %v", s, err)
	}
	s, err = SelectorFromLabelSelector(&LabelSelector{
		MatchLabels:      map[string]string{"app": "web"},
		MatchExpressions: []LabelSelectorRequirement{{Key: "tier", Operator: OpIn, Values: []string{"fe", "be"}}, {Key: "canary", Operator: OpDoesNotExist}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !s.Matches(labels) || s.Matches(map[string]string{"app": "web", "tier": "fe", "canary": ""}) || s.Matches(map[string]string{"app": "web", "tier": "db"}) {
		t.Errorf("selector %q matches wrongly", s)
	}
	if s.String() != "app=web,!canary,tier in (be,fe)" { // sorted by key
		t.Errorf("String() = %q", s.String())
	}
	for _, bad := range []*LabelSelector{
		{MatchExpressions: []LabelSelectorRequirement{{Key: "a", Operator: OpIn}}},
		{MatchExpressions: []LabelSelectorRequirement{{Key: "a", Operator: OpExists, Values: []string{"x"}}}},
		{MatchExpressions: []LabelSelectorRequirement{{Key: "a", Operator: OpGt, Values: []string{"1"}}}},
		{MatchLabels: map[string]string{"a": "b c"}},
	} {
		if _, err := SelectorFromLabelSelector(bad); !errors.Is(err, ErrSelector) {
			t.Errorf("%+v: error %v, want ErrSelector", bad, err)
		}
	}
}

func TestNodeSelectorTermMatches(t *testing.T) {
	labels := map[string]string{"zone": "us", "cpus": "8", "ssd": ""}
	req := func(k, op string, v ...string) NodeSelectorRequirement {
		return NodeSelectorRequirement{Key: k, Operator: op, Values: v}
	}
	tests := []struct {
		name string
		term NodeSelectorTerm
		want bool
		err  bool
	}{
		{"empty term matches nothing", NodeSelectorTerm{}, false, false},
		{"In", NodeSelectorTerm{MatchExpressions: []NodeSelectorRequirement{req("zone", OpIn, "eu", "us")}}, true, false},
		{"In missing key", NodeSelectorTerm{MatchExpressions: []NodeSelectorRequirement{req("rack", OpIn, "a")}}, false, false},
		{"NotIn", NodeSelectorTerm{MatchExpressions: []NodeSelectorRequirement{req("zone", OpNotIn, "us")}}, false, false},
		{"NotIn missing key", NodeSelectorTerm{MatchExpressions: []NodeSelectorRequirement{req("rack", OpNotIn, "a")}}, true, false},
		{"Exists empty value", NodeSelectorTerm{MatchExpressions: []NodeSelectorRequirement{req("ssd", OpExists)}}, true, false},
		{"DoesNotExist", NodeSelectorTerm{MatchExpressions: []NodeSelectorRequirement{req("ssd", OpDoesNotExist)}}, false, false},
		{"Gt", NodeSelectorTerm{MatchExpressions: []NodeSelectorRequirement{req("cpus", OpGt, "4")}}, true, false},
		{"Gt equal", NodeSelectorTerm{MatchExpressions: []NodeSelectorRequirement{req("cpus", OpGt, "8")}}, false, false},
		{"Lt", NodeSelectorTerm{MatchExpressions: []NodeSelectorRequirement{req("cpus", OpLt, "16")}}, true, false},
		{"Gt on a non-number label", NodeSelectorTerm{MatchExpressions: []NodeSelectorRequirement{req("zone", OpGt, "1")}}, false, false},
		{"Gt missing label", NodeSelectorTerm{MatchExpressions: []NodeSelectorRequirement{req("mem", OpGt, "1")}}, false, false},
		{"AND", NodeSelectorTerm{MatchExpressions: []NodeSelectorRequirement{req("zone", OpIn, "us"), req("cpus", OpLt, "4")}}, false, false},
		{"matchFields name", NodeSelectorTerm{MatchFields: []NodeSelectorRequirement{req("metadata.name", OpIn, "node1")}}, true, false},
		{"matchFields other name", NodeSelectorTerm{MatchFields: []NodeSelectorRequirement{req("metadata.name", OpNotIn, "node1")}}, false, false},
		{"matchFields and labels", NodeSelectorTerm{MatchExpressions: []NodeSelectorRequirement{req("zone", OpIn, "us")}, MatchFields: []NodeSelectorRequirement{req("metadata.name", OpIn, "node2")}}, false, false},
		{"matchFields other field", NodeSelectorTerm{MatchFields: []NodeSelectorRequirement{req("metadata.uid", OpIn, "x")}}, false, true},
		{"Gt non-integer", NodeSelectorTerm{MatchExpressions: []NodeSelectorRequirement{req("cpus", OpGt, "four")}}, false, true},
		{"Gt two values", NodeSelectorTerm{MatchExpressions: []NodeSelectorRequirement{req("cpus", OpGt, "1", "2")}}, false, true},
		{"In no values", NodeSelectorTerm{MatchExpressions: []NodeSelectorRequirement{req("cpus", OpIn)}}, false, true},
		{"Exists with values", NodeSelectorTerm{MatchExpressions: []NodeSelectorRequirement{req("cpus", OpExists, "1")}}, false, true},
		{"bad operator", NodeSelectorTerm{MatchExpressions: []NodeSelectorRequirement{req("cpus", "Near", "1")}}, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := NodeSelectorTermMatches(tt.term, labels, "node1")
			if (err != nil) != tt.err {
				t.Fatalf("error %v, want error %v", err, tt.err)
			}
			if err != nil && !errors.Is(err, ErrSelector) {
				t.Errorf("error %v is not ErrSelector", err)
			}
			if got != tt.want {
				t.Errorf("matches = %v, want %v", got, tt.want)
			}
		})
	}
	ns := &NodeSelector{NodeSelectorTerms: []NodeSelectorTerm{
		{MatchExpressions: []NodeSelectorRequirement{req("zone", OpIn, "eu")}},
		{MatchExpressions: []NodeSelectorRequirement{req("zone", OpIn, "us")}},
	}}
	if ok, err := NodeSelectorMatches(ns, labels, "node1"); !ok || err != nil {
		t.Errorf("terms are ORed: got %v, %v", ok, err)
	}
}

func TestSelectorMatchingDoesNotAllocate(t *testing.T) {
	s, err := ParseSelector("env in (dev,prod),tier,!canary,cpus>2,app!=db")
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"env": "prod", "tier": "fe", "cpus": "8", "app": "web"}
	term := NodeSelectorTerm{
		MatchExpressions: []NodeSelectorRequirement{{Key: "env", Operator: OpIn, Values: []string{"prod"}}, {Key: "cpus", Operator: OpGt, Values: []string{"4"}}},
		MatchFields:      []NodeSelectorRequirement{{Key: "metadata.name", Operator: OpIn, Values: []string{"n1"}}},
	}
	fs, err := ParseFieldSelector(ResourceOf(&Pod{}), "spec.nodeName=n1,status.phase!=Failed,metadata.namespace=default")
	if err != nil {
		t.Fatal(err)
	}
	pod := &Pod{ObjectMeta: ObjectMeta{Namespace: "default"}, Spec: PodSpec{NodeName: "n1"}, Status: PodStatus{Phase: PodRunning}}
	allocs := testing.AllocsPerRun(100, func() {
		if !s.Matches(labels) {
			t.Fatal("no match")
		}
		if ok, err := NodeSelectorTermMatches(term, labels, "n1"); !ok || err != nil {
			t.Fatal("no match")
		}
		if !fs.Matches(pod) {
			t.Fatal("no match")
		}
	})
	if allocs != 0 {
		t.Errorf("matching allocates %v times per call", allocs)
	}
}

func BenchmarkSelectorMatches(b *testing.B) {
	s, _ := ParseSelector("env in (dev,prod),tier,!canary")
	labels := map[string]string{"env": "prod", "tier": "fe", "app": "web"}
	b.ReportAllocs()
	for b.Loop() {
		s.Matches(labels)
	}
}

package release

import (
	"errors"
	"strings"
	"testing"
)

// A graph in Cincinnati's JSON with conditional edges, as OpenShift's
// update service serves it (with a PromQL rule outpost cannot evaluate).
const graphJSON = `{
  "nodes": [
    {"version": "1.1.0", "payload": "file:///srv/releases/outpost-1.1.0.tar", "metadata": {"io.openshift.upgrades.graph.release.channels": "stable-1"}},
    {"version": "1.2.0", "payload": "file:///srv/releases/outpost-1.2.0.tar", "metadata": {"url": "https://example.com/1.2.0"}},
    {"version": "1.2.1", "payload": "file:///srv/releases/outpost-1.2.1.tar"},
    {"version": "1.3.0", "payload": "file:///srv/releases/outpost-1.3.0.tar"},
    {"version": "1.3.1", "payload": "file:///srv/releases/outpost-1.3.1.tar"},
    {"version": "1.4.0", "payload": "file:///srv/releases/outpost-1.4.0.tar"}
  ],
  "edges": [[0, 1], [1, 2], [1, 3], [1, 4], [1, 5]],
  "conditionalEdges": [
    {"edges": [{"from": "1.2.0", "to": "1.3.0"}],
     "risks": [{"url": "https://example.com/gpu", "name": "GPUDriverReload", "message": "GPU nodes lose their driver until a reboot.",
                "matchingRules": [{"type": "Expression", "expression": {"expression": "nodes(\"gpu=true\") > 0"}}]}]},
    {"edges": [{"from": "1.2.0", "to": "1.3.1"}],
     "risks": [{"url": "https://example.com/big", "name": "LargeClusters", "message": "Slow on large clusters.",
                "matchingRules": [{"type": "Expression", "expression": {"expression": "nodes > 100"}}]}]},
    {"edges": [{"from": "1.2.0", "to": "1.4.0"}],
     "risks": [{"url": "https://example.com/promql", "name": "MonitoringOnly", "message": "Needs a metric.",
                "matchingRules": [{"type": "PromQL", "promql": {"promql": "cluster_infrastructure_provider{type=\"AWS\"}"}}]}]}
  ]
}`

// Updates from a version: the plain edges recommended, the conditional
// ones with their risks evaluated: an Expression that matches makes the
// update not recommended, one that does not leaves it recommended, and a
// rule outpost cannot evaluate counts as matching (UPD-2).
func TestGraphUpdates(t *testing.T) {
	g, err := ParseGraph([]byte(graphJSON))
	if err != nil {
		t.Fatal(err)
	}
	facts := Facts{Version: "1.2.0", Arch: "amd64", NodeLabels: []map[string]string{{"gpu": "true"}, {}}}
	avail, cond, err := g.Updates("1.2.0", facts)
	if err != nil {
		t.Fatal(err)
	}
	if len(avail) != 1 || avail[0].Version != "1.2.1" || avail[0].Payload != "file:///srv/releases/outpost-1.2.1.tar" {
		t.Errorf("available %+v, want 1.2.1 only (the others are conditional)", avail)
	}
	got := map[string]ConditionalUpdate{}
	for _, c := range cond {
		got[c.Version] = c
	}
	if c := got["1.3.0"]; c.Recommended || c.Reason != "GPUDriverReload" || !strings.Contains(c.Message, "https://example.com/gpu") {
		t.Errorf("1.3.0 with a GPU node: %+v, want not recommended for GPUDriverReload", c)
	}
	if c := got["1.3.1"]; !c.Recommended || c.Reason != "NotExposedToRisks" {
		t.Errorf("1.3.1 on 2 nodes: %+v, want recommended", c)
	}
	if c := got["1.4.0"]; c.Recommended || c.Reason != "EvaluationFailed" || !strings.Contains(c.Message, `"PromQL" is not evaluated`) {
		t.Errorf("1.4.0 with a PromQL rule: %+v, want not recommended, EvaluationFailed", c)
	}
	if len(cond) != 3 || cond[0].Version != "1.4.0" || cond[2].Version != "1.3.0" {
		t.Errorf("conditional updates %v, want three, newest first", cond)
	}
	// Without GPU nodes, 1.3.0 is recommended.
	_, cond, _ = g.Updates("1.2.0", Facts{Version: "1.2.0", NodeLabels: []map[string]string{{}}})
	for _, c := range cond {
		if c.Version == "1.3.0" && !c.Recommended {
			t.Errorf("1.3.0 without GPU nodes: %+v", c)
		}
	}
	if _, _, err := g.Updates("9.9.9", facts); err == nil {
		t.Error("a version not in the graph: no error")
	}
}

// A risk's first rule that can be evaluated decides; Always applies.
func TestRiskRules(t *testing.T) {
	expr := func(e string) MatchingRule {
		return MatchingRule{Type: RuleExpression, Expression: &ExpressionRule{Expression: e}}
	}
	facts := Facts{Version: "1.2.0", NodeLabels: []map[string]string{{}}}
	for _, tc := range []struct {
		name        string
		rules       []MatchingRule
		recommended bool
		reason      string
	}{
		{"Always", []MatchingRule{{Type: RuleAlways}}, false, "R"},
		{"PromQL then an expression that does not match", []MatchingRule{{Type: "PromQL"}, expr("nodes > 5")}, true, "NotExposedToRisks"},
		{"a broken expression then Always", []MatchingRule{expr("nodes >"), {Type: RuleAlways}}, false, "R"},
		{"only a broken expression", []MatchingRule{expr("nodez > 1")}, false, "EvaluationFailed"},
		{"an expression that is not true or false", []MatchingRule{expr("nodes")}, false, "EvaluationFailed"},
	} {
		rec, reason, _ := evaluateRisks([]Risk{{Name: "R", MatchingRules: tc.rules}}, facts)
		if rec != tc.recommended || reason != tc.reason {
			t.Errorf("%s: recommended %v reason %q, want %v %q", tc.name, rec, reason, tc.recommended, tc.reason)
		}
	}
}

// Bad graphs are refused with every problem: an edge off the nodes, a
// version twice, a conditional edge to a version the graph lacks, a risk
// without a name or rules, a cycle.
func TestParseGraphRefuses(t *testing.T) {
	bad := `{
  "nodes": [{"version": "1.0.0"}, {"version": "1.1.0"}, {"version": "1.1.0"}, {"version": "1.2.0"}],
  "edges": [[0, 1], [1, 3], [3, 0], [0, 9]],
  "conditionalEdges": [{"edges": [{"from": "1.0.0", "to": "2.0.0"}], "risks": [{"url": "u", "message": "m"}]}]
}`
	_, err := ParseGraph([]byte(bad))
	if !errors.Is(err, ErrGraph) {
		t.Fatalf("%v, want ErrGraph", err)
	}
	for _, want := range []string{
		"nodes[2].version: 1.1.0 is in the graph twice",
		"edges[3]: [0 9] names a node the graph does not have",
		`conditionalEdges[0].edges[0].to: unknown version "2.0.0"`,
		"conditionalEdges[0].risks[0].name: required",
		"conditionalEdges[0].risks[0].matchingRules: at least one rule",
		"the updates form a cycle: 1.0.0 → 1.1.0 → 1.2.0 → 1.0.0",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if _, err := ParseGraph([]byte(`{"nodes": [`)); !errors.Is(err, ErrGraph) {
		t.Errorf("broken JSON: %v", err)
	}
}

// The expression language: every operator, the facts, versions compared
// as versions, and errors instead of panics for what is not an
// expression.
func TestEval(t *testing.T) {
	facts := Facts{Version: "1.10.0", Channel: "stable-1", Arch: "arm64", NodeLabels: []map[string]string{
		{"gpu": "true", "topology.kubernetes.io/zone": "a"}, {"topology.kubernetes.io/zone": "b"}, {}}}
	for expr, want := range map[string]bool{
		`true`:                   true,
		`!false && true`:         true,
		`false || !true`:         false,
		`nodes == 3`:             true,
		`nodes("gpu=true") == 1`: true,
		`nodes("topology.kubernetes.io/zone in (a,b)") >= 2`: true,
		`nodes("gpu") > 1`:                                        false,
		`version > "1.9.0"`:                                       true, // as versions, not bytes
		`version < "1.10.0-rc.1"`:                                 false,
		`"1.10.0-rc.1" < version`:                                 true,
		`arch == "arm64" && channel != "fast-1"`:                  true,
		`(nodes > 2 || arch == "amd64") && !(version == "1.0.0")`: true,
		`"b" > "a"`: true,
	} {
		got, err := Eval(expr, facts)
		if err != nil || got != want {
			t.Errorf("%s = %v (%v), want %v", expr, got, err, want)
		}
	}
	for _, expr := range []string{
		``, `nodes >`, `nodes > "3"`, `version && true`, `nodez`, `nodes(gpu)`, `"open`, `(true`, `true)`, `1 = 1`,
		`nodes("=bad")`, strings.Repeat("(", 200) + "true" + strings.Repeat(")", 200), strings.Repeat("!", 100) + "true",
		`nodes`, `version`, strings.Repeat("x", 3000),
	} {
		if _, err := Eval(expr, facts); err == nil {
			t.Errorf("%q: no error", expr)
		}
	}
}

// Fuzzed expressions never panic.
func FuzzEval(f *testing.F) {
	for _, s := range []string{`nodes("a=b") > 1 && version < "1.2"`, `!(true || false)`, `"x\"y" == arch`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = Eval(s, Facts{Version: "1.0.0", NodeLabels: []map[string]string{{"a": "b"}}})
	})
}

func TestCompareVersions(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		sign int
	}{
		{"1.10.0", "1.9.9", 1}, {"1.2.0", "1.2", 0}, {"1.3.0-rc.1", "1.3.0", -1}, {"1.3.0-rc.2", "1.3.0-rc.1", 1}, {"1.3.0-rc.10", "1.3.0-rc.9", 1}, {"abc", "abd", -1},
	} {
		got := CompareVersions(tc.a, tc.b)
		if (got > 0) != (tc.sign > 0) || (got < 0) != (tc.sign < 0) {
			t.Errorf("CompareVersions(%s, %s) = %d, want sign %d", tc.a, tc.b, got, tc.sign)
		}
	}
}

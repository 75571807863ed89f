package release

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// Graph is an update graph in Cincinnati's JSON (UPD-2), as OpenShift's
// update service serves it: releases, the updates between them, and
// updates recommended only where their risks do not apply.
type Graph struct {
	Nodes            []GraphNode       `json:"nodes"`
	Edges            [][2]int          `json:"edges"`
	ConditionalEdges []ConditionalEdge `json:"conditionalEdges,omitempty"`
}

// GraphNode is one release: its version, where its payload is, and
// metadata (io.openshift.upgrades.graph.release.channels lists its
// channels; url points at its notes).
type GraphNode struct {
	Version  string            `json:"version"`
	Payload  string            `json:"payload"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// ChannelsKey is the node metadata key listing a release's channels.
const ChannelsKey = "io.openshift.upgrades.graph.release.channels"

// ConditionalEdge is a set of updates that carry risks.
type ConditionalEdge struct {
	Edges []struct {
		From string `json:"from"`
		To   string `json:"to"`
	} `json:"edges"`
	Risks []Risk `json:"risks"`
}

// Risk is one known problem of an update and the rules that say whether
// a cluster has it; the graph's JSON and the ClusterVersion's status
// share the shape (api.ConditionalRisk).
type Risk = api.ConditionalRisk

// MatchingRule decides whether a risk applies. Outpost evaluates Always
// and Expression (its expression language over the cluster's facts; see
// Eval); any other type (PromQL, which needs OpenShift's monitoring)
// cannot be evaluated here.
type MatchingRule = api.ConditionalRiskRule

// ExpressionRule holds an Expression rule's expression.
type ExpressionRule = api.RiskExpression

// The rule types outpost evaluates.
const (
	RuleAlways     = "Always"
	RuleExpression = "Expression"
)

// ErrGraph is an update graph that is not well formed.
var ErrGraph = errors.New("invalid update graph")

// ParseGraph decodes and checks a graph: edges within the nodes, no
// version twice, conditional edges between versions the graph has,
// every risk named, no cycle (an update path that comes back to where
// it started).
func ParseGraph(data []byte) (*Graph, error) {
	var g Graph
	if err := json.Unmarshal(data, &g); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrGraph, err)
	}
	var problems []string
	index := map[string]int{}
	for i, n := range g.Nodes {
		_, seen := index[n.Version]
		switch {
		case n.Version == "":
			problems = append(problems, fmt.Sprintf("nodes[%d].version: required", i))
		case seen:
			problems = append(problems, fmt.Sprintf("nodes[%d].version: %s is in the graph twice", i, n.Version))
		default:
			index[n.Version] = i
		}
	}
	adj := make([][]int, len(g.Nodes))
	for i, e := range g.Edges {
		if e[0] < 0 || e[0] >= len(g.Nodes) || e[1] < 0 || e[1] >= len(g.Nodes) {
			problems = append(problems, fmt.Sprintf("edges[%d]: %v names a node the graph does not have (%d nodes)", i, e, len(g.Nodes)))
			continue
		}
		adj[e[0]] = append(adj[e[0]], e[1])
	}
	for i, ce := range g.ConditionalEdges {
		for j, e := range ce.Edges {
			for _, v := range []struct{ field, version string }{{"from", e.From}, {"to", e.To}} {
				if _, ok := index[v.version]; !ok {
					problems = append(problems, fmt.Sprintf("conditionalEdges[%d].edges[%d].%s: unknown version %q", i, j, v.field, v.version))
				}
			}
			if f, ok := index[e.From]; ok {
				if t, ok := index[e.To]; ok {
					adj[f] = append(adj[f], t)
				}
			}
		}
		if len(ce.Risks) == 0 {
			problems = append(problems, fmt.Sprintf("conditionalEdges[%d].risks: a conditional edge has at least one risk", i))
		}
		for j, r := range ce.Risks {
			if r.Name == "" {
				problems = append(problems, fmt.Sprintf("conditionalEdges[%d].risks[%d].name: required", i, j))
			}
			if len(r.MatchingRules) == 0 {
				problems = append(problems, fmt.Sprintf("conditionalEdges[%d].risks[%d].matchingRules: at least one rule", i, j))
			}
		}
	}
	if cycle := findCycle(adj); cycle != nil {
		names := make([]string, len(cycle))
		for i, n := range cycle {
			names[i] = g.Nodes[n].Version
		}
		problems = append(problems, "the updates form a cycle: "+strings.Join(names, " → "))
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%w:\n  %s", ErrGraph, strings.Join(problems, "\n  "))
	}
	return &g, nil
}

// findCycle returns the nodes of a cycle (the first repeated at the
// end), or nil.
func findCycle(adj [][]int) []int {
	const (
		white = iota
		grey
		black
	)
	color := make([]int, len(adj))
	var stack []int
	var found []int
	var visit func(n int) bool
	visit = func(n int) bool {
		color[n] = grey
		stack = append(stack, n)
		for _, m := range adj[n] {
			switch color[m] {
			case grey:
				i := slices.Index(stack, m)
				found = append(slices.Clone(stack[i:]), m)
				return true
			case white:
				if visit(m) {
					return true
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[n] = black
		return false
	}
	for n := range adj {
		if color[n] == white && visit(n) {
			return found
		}
	}
	return nil
}

// Update is a release the cluster may update to.
type Update struct {
	Version  string
	Payload  string
	Metadata map[string]string
}

// ConditionalUpdate is an update with risks, and whether they apply to
// this cluster.
type ConditionalUpdate struct {
	Update
	Risks []Risk
	// Recommended is false when a risk applies (or could not be
	// evaluated, which counts as applying); Reason and Message say which.
	Recommended bool
	Reason      string
	Message     string
}

// Updates are the updates from version: the recommended ones, and the
// conditional ones with their risks evaluated against facts. An update
// both unconditional and conditional is conditional, as in OpenShift.
func (g *Graph) Updates(version string, facts Facts) (available []Update, conditional []ConditionalUpdate, err error) {
	from := slices.IndexFunc(g.Nodes, func(n GraphNode) bool { return n.Version == version })
	if from < 0 {
		return nil, nil, fmt.Errorf("version %s is not in the update graph", version)
	}
	condTo := map[string][]Risk{}
	for _, ce := range g.ConditionalEdges {
		for _, e := range ce.Edges {
			if e.From == version {
				condTo[e.To] = append(condTo[e.To], ce.Risks...)
			}
		}
	}
	node := func(v string) Update {
		i := slices.IndexFunc(g.Nodes, func(n GraphNode) bool { return n.Version == v })
		return Update{Version: v, Payload: g.Nodes[i].Payload, Metadata: g.Nodes[i].Metadata}
	}
	for _, e := range g.Edges {
		if e[0] != from {
			continue
		}
		v := g.Nodes[e[1]].Version
		if _, cond := condTo[v]; cond || slices.ContainsFunc(available, func(u Update) bool { return u.Version == v }) {
			continue
		}
		available = append(available, node(v))
	}
	for _, v := range slices.Sorted(maps.Keys(condTo)) {
		cu := ConditionalUpdate{Update: node(v), Risks: condTo[v]}
		cu.Recommended, cu.Reason, cu.Message = evaluateRisks(cu.Risks, facts)
		conditional = append(conditional, cu)
	}
	slices.SortFunc(available, func(a, b Update) int { return CompareVersions(b.Version, a.Version) })
	slices.SortFunc(conditional, func(a, b ConditionalUpdate) int { return CompareVersions(b.Version, a.Version) })
	return available, conditional, nil
}

// evaluateRisks decides whether an update is recommended: not if any risk
// applies. A risk's first rule that can be evaluated decides; a risk no
// rule can evaluate applies (fail closed).
func evaluateRisks(risks []Risk, facts Facts) (bool, string, string) {
	var applies, unknown, msgs []string
	for _, r := range risks {
		decided, match := false, false
		var why []string
		for _, rule := range r.MatchingRules {
			switch rule.Type {
			case RuleAlways:
				decided, match = true, true
			case RuleExpression:
				if rule.Expression == nil {
					why = append(why, "an Expression rule without an expression")
					continue
				}
				m, err := Eval(rule.Expression.Expression, facts)
				if err != nil {
					why = append(why, err.Error())
					continue
				}
				decided, match = true, m
			default:
				why = append(why, fmt.Sprintf("rule type %q is not evaluated by outpost", rule.Type))
			}
			if decided {
				break
			}
		}
		switch {
		case !decided:
			unknown = append(unknown, r.Name)
			msgs = append(msgs, fmt.Sprintf("%s: could not be evaluated (%s), so it counts as applying. %s %s", r.Name, strings.Join(why, "; "), r.Message, r.URL))
		case match:
			applies = append(applies, r.Name)
			msgs = append(msgs, fmt.Sprintf("%s: %s %s", r.Name, r.Message, r.URL))
		}
	}
	switch {
	case len(unknown) > 0 && len(applies) == 0:
		return false, "EvaluationFailed", strings.Join(msgs, "\n")
	case len(applies)+len(unknown) > 0:
		return false, strings.Join(append(applies, unknown...), ","), strings.Join(msgs, "\n")
	}
	return true, "NotExposedToRisks", "the update has risks; none applies to this cluster"
}

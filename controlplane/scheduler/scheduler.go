package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/scheduler/policy"
)

// Sentinel errors of the package.
var (
	// ErrUnschedulable is wrapped by every *FitError: no node fits the pod.
	ErrUnschedulable = errors.New("pod fits no node")
	// ErrInvalidPod is returned for a pod the scheduler cannot read (an
	// affinity selector that does not parse).
	ErrInvalidPod = errors.New("pod cannot be scheduled as written")
	// ErrNodeNotFound is returned by Fits for a node the cluster lacks.
	ErrNodeNotFound = errors.New("node not found")
	// ErrInvalidConfig is returned by New for settings out of range.
	ErrInvalidConfig = errors.New("invalid scheduler configuration")
)

// Bounds of the scan of nodes (like kube-scheduler's
// percentageOfNodesToScore): below minFeasibleNodesToFind nodes every node
// is checked; above, the scan stops once this many feasible nodes are
// found, at least minFeasibleNodesPercentageToFind percent of the nodes.
const (
	minFeasibleNodesToFind           = 100
	minFeasibleNodesPercentageToFind = 5
)

// MaxScore is the best score one priority gives a node (SPEC SCH-1).
const MaxScore = 10

// Config configures a Scheduler.
type Config struct {
	// Policy selects the predicates and priorities; nil is the default
	// policy of the seed (policy.Default).
	Policy *policy.Policy
	// PercentageOfNodesToScore bounds the scan in clusters of 100 nodes
	// or more: the scan stops once this share of the nodes fit (at least
	// 100). 0 picks it from the cluster size as Kubernetes does (50% at
	// 100 nodes falling to 5% at 5,625 and more); 100 checks every node.
	PercentageOfNodesToScore int
	// Rand breaks ties between nodes with the same best score. nil uses
	// a randomly seeded source.
	Rand *rand.Rand
	// Logger gets debug records of each cycle; nil discards them.
	Logger *slog.Logger
}

// Scheduler decides where pods go: filter nodes with the policy's
// predicates, score the rest with its priorities, pick the best
// (SPEC SCH-1). A Scheduler runs one cycle at a time: it and the Cluster
// it reads belong to one goroutine.
type Scheduler struct {
	filters  []filterEntry
	scorers  []scoreEntry
	checkAll bool
	pct      int
	rnd      *rand.Rand
	log      *slog.Logger
	st       *State
	next     int // where the next scan starts, so nodes take turns
	policy   *policy.Policy
}

type filterEntry struct {
	name   string
	idx    int
	plugin filterPlugin
}

type scoreEntry struct {
	name   string
	weight int64
	plugin scorePlugin
}

// New builds a scheduler for a policy, checking it first.
func New(cfg Config) (*Scheduler, error) {
	p := cfg.Policy
	if p == nil {
		p = policy.Default()
	}
	if err := policy.Validate(p); err != nil {
		return nil, err
	}
	if cfg.PercentageOfNodesToScore < 0 || cfg.PercentageOfNodesToScore > 100 {
		return nil, fmt.Errorf("%w: percentageOfNodesToScore %d: must be between 0 and 100", ErrInvalidConfig, cfg.PercentageOfNodesToScore)
	}
	s := &Scheduler{
		checkAll: p.AlwaysCheckAllPredicates,
		pct:      cfg.PercentageOfNodesToScore,
		rnd:      cfg.Rand,
		log:      cfg.Logger,
		policy:   p,
	}
	if s.rnd == nil {
		s.rnd = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	slots := 0
	for _, c := range policy.Checks(p) {
		f, err := newFilter(c, slots)
		if err != nil {
			return nil, err
		}
		slots++
		s.filters = append(s.filters, filterEntry{name: c.Name, idx: len(s.filters), plugin: f})
	}
	for i := range p.Priorities {
		pr := &p.Priorities[i]
		sc, err := newScorer(pr, p, slots)
		if err != nil {
			return nil, err
		}
		slots++
		s.scorers = append(s.scorers, scoreEntry{name: pr.Name, weight: pr.Weight, plugin: sc})
	}
	s.st = &State{slots: make([]any, slots)}
	return s, nil
}

// Policy returns the policy the scheduler runs.
func (s *Scheduler) Policy() *policy.Policy { return s.policy }

// Result is where a cycle put a pod.
type Result struct {
	Node string
	// Score is the node's weighted total; 0 when only one node fitted
	// and scoring was skipped.
	Score int64
	// Evaluated is how many nodes the predicates ran on; Feasible how
	// many of them fit.
	Evaluated, Feasible int
}

// FitError says why a pod fits no node: how many nodes each predicate
// rejected (SPEC SCH-13). It wraps ErrUnschedulable.
type FitError struct {
	Pod         string // namespace/name
	NumAllNodes int
	// Reasons counts, per predicate name, the nodes it rejected. Unless
	// the policy sets alwaysCheckAllPredicates, a node counts once, under
	// the first predicate that rejected it.
	Reasons map[string]int
}

// Error renders the reasons as `0/5 nodes are available:
// MatchNodeSelector (3), PodToleratesNodeTaints (2).`, sorted by name as
// Kubernetes sorts them.
func (e *FitError) Error() string {
	if e.NumAllNodes == 0 {
		return "no nodes available to schedule pods"
	}
	names := make([]string, 0, len(e.Reasons))
	for n := range e.Reasons {
		names = append(names, n)
	}
	slices.Sort(names)
	var b strings.Builder
	fmt.Fprintf(&b, "0/%d nodes are available: ", e.NumAllNodes)
	for i, n := range names {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s (%d)", n, e.Reasons[n])
	}
	b.WriteByte('.')
	return b.String()
}

// Unwrap makes errors.Is(err, ErrUnschedulable) hold.
func (e *FitError) Unwrap() error { return ErrUnschedulable }

// numFeasibleNodesToFind is how many feasible nodes end the scan.
func (s *Scheduler) numFeasibleNodesToFind(numAll int) int {
	if numAll < minFeasibleNodesToFind || s.pct >= 100 {
		return numAll
	}
	pct := s.pct
	if pct == 0 {
		pct = max(50-numAll/125, minFeasibleNodesPercentageToFind)
	}
	return max(numAll*pct/100, minFeasibleNodesToFind)
}

// Schedule runs one scheduling cycle for pod on the cluster as it is and
// returns the chosen node. It does not bind or assume: the caller does
// (Cluster.Assume), so that a cycle has no side effect on the cluster. A
// pod that fits no node gets a *FitError.
func (s *Scheduler) Schedule(ctx context.Context, c *Cluster, pod *api.Pod) (Result, error) {
	st := s.st
	if err := st.reset(c, pod); err != nil {
		return Result{}, err
	}
	defer st.clear()
	order := c.scanOrder()
	numAll := len(order)
	if numAll == 0 {
		return Result{}, &FitError{Pod: podName(pod)}
	}
	active := st.filters[:0]
	for _, f := range s.filters {
		if f.plugin.prepare(st) {
			active = append(active, f)
		}
	}
	st.filters = active
	rejected := st.rejected[:0]
	for range s.filters {
		rejected = append(rejected, 0)
	}
	// Scan in chunks, each predicate over the whole chunk in turn (the
	// cheap ones first), until enough nodes fit or every node was seen.
	toFind := s.numFeasibleNodesToFind(numAll)
	start := s.next % numAll
	feasible := st.feasible[:0]
	scanned := 0
	for scanned < numAll && len(feasible) < toFind {
		if err := ctx.Err(); err != nil {
			return Result{}, fmt.Errorf("scheduling %s: %w", podName(pod), err)
		}
		chunk := min(max(toFind-len(feasible), minChunk), numAll-scanned)
		from := len(feasible)
		for i := range chunk {
			feasible = append(feasible, order[(start+scanned+i)%numAll])
		}
		scanned += chunk
		feasible = s.filterChunk(st, active, feasible, from, rejected)
	}
	s.next = (start + scanned) % numAll
	st.feasible, st.rejected = feasible, rejected
	if len(feasible) == 0 {
		fe := &FitError{Pod: podName(pod), NumAllNodes: numAll, Reasons: map[string]int{}}
		for i, n := range rejected {
			if n > 0 {
				fe.Reasons[s.filters[i].name] += n
			}
		}
		s.log.Debug("pod fits no node", "pod", fe.Pod, "reasons", fe.Error())
		return Result{}, fe
	}
	res := Result{Evaluated: scanned, Feasible: len(feasible)}
	if len(feasible) == 1 || len(s.scorers) == 0 {
		res.Node = feasible[s.rnd.IntN(len(feasible))].name
		return res, nil
	}
	totals, base := s.score(st, feasible)
	best, ties := 0, 0
	for i, t := range totals {
		switch {
		case i == 0 || t > totals[best]:
			best, ties = i, 1
		case t == totals[best]:
			// Reservoir sampling: each tied node ends up chosen with the
			// same probability, without collecting them.
			ties++
			if s.rnd.IntN(ties) == 0 {
				best = i
			}
		}
	}
	res.Node, res.Score = feasible[best].name, totals[best]+base
	return res, nil
}

// minChunk is the fewest nodes a scan step checks: smaller steps cost
// more in loop overhead than the few extra nodes they save.
const minChunk = 64

// filterChunk runs the active predicates over nodes[from:] and keeps
// those that pass, counting each rejection under the first predicate that
// fails (every failing one with alwaysCheckAllPredicates).
func (s *Scheduler) filterChunk(st *State, active []filterEntry, nodes []*NodeInfo, from int, rejected []int) []*NodeInfo {
	if s.checkAll {
		j := from
		for _, n := range nodes[from:] {
			ok := true
			for _, f := range active {
				if !f.plugin.filter(st, n) {
					rejected[f.idx]++
					ok = false
				}
			}
			if ok {
				nodes[j] = n
				j++
			}
		}
		return nodes[:j]
	}
	for _, f := range active {
		j := from
		for _, n := range nodes[from:] {
			if f.plugin.filter(st, n) {
				nodes[j] = n
				j++
			} else {
				rejected[f.idx]++
			}
		}
		nodes = nodes[:j]
		if j == from {
			break
		}
	}
	return nodes
}

// score returns the weighted total of the priorities that tell the nodes
// apart, and base, what the others add to every node alike.
func (s *Scheduler) score(st *State, nodes []*NodeInfo) (totals []int64, base int64) {
	totals = growInts(st.totals, len(nodes))
	clear(totals)
	raw := growInts(st.raw, len(nodes))
	for _, e := range s.scorers {
		same, varies := e.plugin.prepare(st, nodes)
		if !varies {
			base += same * e.weight
			continue
		}
		e.plugin.score(st, nodes, raw)
		if nz, ok := e.plugin.(normalizePlugin); ok {
			nz.normalize(raw)
		}
		for i := range nodes {
			totals[i] += raw[i] * e.weight
		}
	}
	st.totals, st.raw = totals, raw
	return totals, base
}

func growInts(b []int64, n int) []int64 {
	if cap(b) < n {
		return make([]int64, n)
	}
	return b[:n]
}

// Fits runs every predicate of the policy on one node and returns the
// names of those that reject the pod (none: it fits). The daemon set
// controller places its pods with it, and tests check the scheduler's
// choices against it.
func (s *Scheduler) Fits(c *Cluster, pod *api.Pod, nodeName string) ([]string, error) {
	n := c.Node(nodeName)
	if n == nil {
		return nil, fmt.Errorf("%w: %s", ErrNodeNotFound, nodeName)
	}
	st := s.st
	if err := st.reset(c, pod); err != nil {
		return nil, err
	}
	defer st.clear()
	var failed []string
	for _, f := range s.filters {
		if f.plugin.prepare(st) && !f.plugin.filter(st, n) {
			failed = append(failed, f.name)
		}
	}
	return failed, nil
}

// NodeScore is one node's scores, for explaining a decision.
type NodeScore struct {
	Node string
	// Scores holds each priority's 0–10 score, by name, before weighting.
	Scores map[string]int64
	Total  int64
}

// Scores runs every priority on the given nodes (which should fit the
// pod) and returns each one's scores, for `describe`-style explanations
// and for tests.
func (s *Scheduler) Scores(c *Cluster, pod *api.Pod, nodeNames []string) ([]NodeScore, error) {
	st := s.st
	if err := st.reset(c, pod); err != nil {
		return nil, err
	}
	defer st.clear()
	nodes := make([]*NodeInfo, 0, len(nodeNames))
	out := make([]NodeScore, 0, len(nodeNames))
	for _, name := range nodeNames {
		n := c.Node(name)
		if n == nil {
			return nil, fmt.Errorf("%w: %s", ErrNodeNotFound, name)
		}
		nodes = append(nodes, n)
		out = append(out, NodeScore{Node: name, Scores: map[string]int64{}})
	}
	raw := make([]int64, len(nodes))
	for _, e := range s.scorers {
		same, varies := e.plugin.prepare(st, nodes)
		if varies {
			e.plugin.score(st, nodes, raw)
			if nz, ok := e.plugin.(normalizePlugin); ok {
				nz.normalize(raw)
			}
		} else {
			for i := range raw {
				raw[i] = same
			}
		}
		for i := range nodes {
			out[i].Scores[e.name] = raw[i]
			out[i].Total += raw[i] * e.weight
		}
	}
	return out, nil
}

func podName(p *api.Pod) string { return p.Namespace + "/" + p.Name }

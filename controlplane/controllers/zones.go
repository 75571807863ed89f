package controllers

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/scheduler"
)

// Zone-aware, rate-limited eviction tainting (SPEC TNT-8), with
// kube-controller-manager's settings and defaults. A zero setting is the
// default; SecondaryNodeEvictionRate and LargeClusterSizeThreshold below
// zero are 0.
const (
	DefaultNodeEvictionRate          = 0.1
	DefaultSecondaryNodeEvictionRate = 0.01
	DefaultUnhealthyZoneThreshold    = 0.55
	DefaultLargeClusterSizeThreshold = 50
)

// Events of zone state changes (TNT-8), from the node controller as
// Kubernetes names it.
const (
	componentNodeController     = "node-controller"
	reasonZoneStateChanged      = "ZoneStateChanged"
	reasonMasterDisruption      = "MasterDisruption"
	reasonMasterDisruptionEnded = "MasterDisruptionEnded"
)

// ZoneState is a zone's health, as Kubernetes names it.
type ZoneState string

// Zone states.
const (
	ZoneNormal            ZoneState = api.ZoneNormal
	ZonePartialDisruption ZoneState = api.ZonePartialDisruption
	ZoneFullDisruption    ZoneState = api.ZoneFullDisruption
)

func zoneOf(n *api.Node) string { return scheduler.ZoneOf(n.Labels) }

// Eviction configures the zone-aware rate limit on the NoExecute taints of
// not-ready and unreachable nodes. Zero values are the defaults; a rate
// below zero is 0.
type Eviction struct {
	// NodeEvictionRate is how many nodes per second may be tainted for
	// eviction in a zone that is Normal (or FullDisruption while other
	// zones are not).
	NodeEvictionRate float64
	// SecondaryNodeEvictionRate is the rate in a PartialDisruption zone
	// of more than LargeClusterSizeThreshold nodes; smaller zones in
	// PartialDisruption taint no node.
	SecondaryNodeEvictionRate float64
	// UnhealthyZoneThreshold is the share of not-ready nodes (of a zone
	// with more than 2 of them) that makes it PartialDisruption.
	UnhealthyZoneThreshold float64
	// LargeClusterSizeThreshold: see SecondaryNodeEvictionRate.
	LargeClusterSizeThreshold int
}

func (e Eviction) withDefaults() Eviction {
	if e.NodeEvictionRate == 0 {
		e.NodeEvictionRate = DefaultNodeEvictionRate
	}
	if e.SecondaryNodeEvictionRate == 0 {
		e.SecondaryNodeEvictionRate = DefaultSecondaryNodeEvictionRate
	}
	if e.UnhealthyZoneThreshold == 0 {
		e.UnhealthyZoneThreshold = DefaultUnhealthyZoneThreshold
	}
	if e.LargeClusterSizeThreshold == 0 {
		e.LargeClusterSizeThreshold = DefaultLargeClusterSizeThreshold
	}
	e.NodeEvictionRate = max(e.NodeEvictionRate, 0)
	e.SecondaryNodeEvictionRate = max(e.SecondaryNodeEvictionRate, 0)
	e.LargeClusterSizeThreshold = max(e.LargeClusterSizeThreshold, 0)
	return e
}

// zoneStateOf is TNT-8's rule: no ready node (and some not ready) is
// FullDisruption; more than 2 not ready and at least the threshold's
// share of the zone is PartialDisruption; else Normal.
func zoneStateOf(ready, notReady int, threshold float64) ZoneState {
	switch {
	case ready == 0 && notReady > 0:
		return ZoneFullDisruption
	case notReady > 2 && float64(notReady)/float64(ready+notReady) >= threshold:
		return ZonePartialDisruption
	}
	return ZoneNormal
}

// bucket is a token bucket of burst 1: one node at a time at rate per
// second, as Kubernetes' eviction limiter.
type bucket struct {
	rate   float64
	tokens float64
	last   time.Time
}

// take reports whether a node may be tainted at now; if not, wait is when
// to ask again (0 when the rate is 0: never, until it changes).
func (b *bucket) take(now time.Time) (ok bool, wait time.Duration) {
	// Callers' clocks were read before they queued for the lock, so now
	// may be a little behind last: the bucket's time only moves forward,
	// or the same interval would be credited twice.
	if b.last.IsZero() {
		b.last = now
	} else if now.After(b.last) {
		b.tokens = min(1, b.tokens+now.Sub(b.last).Seconds()*b.rate)
		b.last = now
	}
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	if b.rate <= 0 {
		return false, 0
	}
	return false, time.Duration((1 - b.tokens) / b.rate * float64(time.Second))
}

// zones keeps each zone's state and limiter.
type zones struct {
	cfg    Eviction
	report *ZoneReport // nil: nobody asks

	mu      sync.Mutex
	state   map[string]ZoneState
	buckets map[string]*bucket
	// members are the nodes counted (those with a Ready condition), and
	// ready and notReady their counts by zone, kept from the informer's
	// events so that a count is O(zones), not O(nodes): the controller
	// counts before every node it taints.
	members         map[string]zoneMember
	ready, notReady map[string]int
	// master is "every zone is in FullDisruption": the control plane
	// takes itself for the one cut off and evicts nothing.
	master bool
}

func newZones(cfg Eviction, report *ZoneReport) *zones {
	return &zones{cfg: cfg.withDefaults(), report: report, state: map[string]ZoneState{}, buckets: map[string]*bucket{},
		members: map[string]zoneMember{}, ready: map[string]int{}, notReady: map[string]int{}}
}

// zoneMember is how a node counts: its zone, ready or not.
type zoneMember struct {
	zone  string
	ready bool
}

// track counts n as it is now (a node without a Ready condition, which
// no agent reports, does not count).
func (z *zones) track(n *api.Node) {
	r := nodeReadyCondition(n)
	z.mu.Lock()
	defer z.mu.Unlock()
	z.untrackLocked(n.Name)
	if r == nil {
		return
	}
	m := zoneMember{zone: zoneOf(n), ready: r.Status == api.ConditionTrue}
	z.members[n.Name] = m
	if m.ready {
		z.ready[m.zone]++
	} else {
		z.notReady[m.zone]++
	}
}

// forget stops counting the node name (deleted).
func (z *zones) forget(name string) {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.untrackLocked(name)
}

func (z *zones) untrackLocked(name string) {
	m, ok := z.members[name]
	if !ok {
		return
	}
	delete(z.members, name)
	counts := z.notReady
	if m.ready {
		counts = z.ready
	}
	if counts[m.zone]--; counts[m.zone] <= 0 {
		delete(counts, m.zone)
	}
}

// zoneChange is a zone whose state changed, for the log and events.
type zoneChange struct {
	zone         string
	from, to     ZoneState
	ready, total int
	// masterChange: the change is of master disruption, to master.
	masterChange, master bool
}

// observe recomputes every zone's state from the nodes tracked and
// returns what changed.
func (z *zones) observe(now time.Time) []zoneChange {
	z.mu.Lock()
	defer z.mu.Unlock()
	ready, notReady := z.ready, z.notReady
	var changes []zoneChange
	seen := map[string]bool{}
	allFull := true
	for _, zone := range unionKeys(ready, notReady) {
		seen[zone] = true
		st := zoneStateOf(ready[zone], notReady[zone], z.cfg.UnhealthyZoneThreshold)
		allFull = allFull && st == ZoneFullDisruption
		if prev, ok := z.state[zone]; !ok || prev != st {
			from := prev
			if !ok {
				from = ZoneNormal
			}
			if from != st {
				changes = append(changes, zoneChange{zone: zone, from: from, to: st, ready: ready[zone], total: z.sizeLocked(zone)})
			}
			z.state[zone] = st
		}
		b := z.buckets[zone]
		if b == nil {
			// A zone starts with a token: its first node is tainted at
			// once, as Kubernetes' limiter allows.
			b = &bucket{tokens: 1, last: now}
			z.buckets[zone] = b
		}
	}
	for zone := range z.state {
		if !seen[zone] {
			delete(z.state, zone)
			delete(z.buckets, zone)
		}
	}
	master := allFull && len(seen) > 0
	if master != z.master {
		changes = append(changes, zoneChange{masterChange: true, master: master})
		z.master = master
	}
	items := make([]api.ZoneStatus, 0, len(seen))
	for zone, b := range z.buckets {
		b.rate = z.rateLocked(zone)
		items = append(items, api.ZoneStatus{Name: zone, State: string(z.state[zone]), Nodes: z.sizeLocked(zone), Ready: ready[zone], EvictionRate: b.rate})
	}
	if master {
		for i := range items {
			items[i].EvictionRate = 0
		}
	}
	z.report.publish(master, items)
	return changes
}

// sizeLocked is how many counted nodes zone has.
func (z *zones) sizeLocked(zone string) int { return z.ready[zone] + z.notReady[zone] }

// rateLocked is the tainting rate of zone in its state.
func (z *zones) rateLocked(zone string) float64 {
	switch z.state[zone] {
	case ZonePartialDisruption:
		if z.sizeLocked(zone) > z.cfg.LargeClusterSizeThreshold {
			return z.cfg.SecondaryNodeEvictionRate
		}
		return 0
	default:
		// Normal; a FullDisruption zone while others are not is evicted
		// at the normal rate, as in Kubernetes.
		return z.cfg.NodeEvictionRate
	}
}

// gate lets through the NoExecute condition taints that want would add
// to n only if n's zone may taint a node now: in master disruption none
// at all (and those it holds go), otherwise one node per token. It
// returns the taints to write and, when some were held back, when to
// look again (0: at the next sweep).
func (z *zones) gate(n *api.Node, want []api.Taint, now time.Time) ([]api.Taint, time.Duration, bool) {
	adds := addsEvictionTaint(n, want)
	// A node that holds one already (not-ready becoming unreachable)
	// swaps it without a token: the limit is on nodes, as in Kubernetes.
	swap := slices.ContainsFunc(n.Spec.Taints, isEvictionTaint)
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.master {
		return slices.DeleteFunc(slices.Clone(want), isEvictionTaint), 0, adds
	}
	if !adds || swap {
		return want, 0, false
	}
	b := z.buckets[zoneOf(n)]
	if b == nil {
		b = &bucket{tokens: 1, last: now, rate: z.cfg.NodeEvictionRate}
		z.buckets[zoneOf(n)] = b
	}
	ok, wait := b.take(now)
	if ok {
		z.report.evicted(zoneOf(n))
		return want, 0, false
	}
	held := slices.DeleteFunc(slices.Clone(want), func(t api.Taint) bool { return newEvictionTaint(n, t) })
	return held, wait, true
}

// inMasterDisruption reports whether every zone is in FullDisruption.
func (z *zones) inMasterDisruption() bool {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.master
}

// State is zone's state ("" when unknown) and whether the control plane
// is in master disruption.
func (z *zones) State(zone string) (ZoneState, bool) {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.state[zone], z.master
}

// newEvictionTaint reports whether t is an eviction taint n lacks.
func newEvictionTaint(n *api.Node, t api.Taint) bool {
	return isEvictionTaint(t) && !hasTaint(n.Spec.Taints, t.Key, t.Effect)
}

// addsEvictionTaint reports whether want adds an eviction taint to n.
func addsEvictionTaint(n *api.Node, want []api.Taint) bool {
	return slices.ContainsFunc(want, func(t api.Taint) bool { return newEvictionTaint(n, t) })
}

// isEvictionTaint reports whether t is a NoExecute taint of a condition:
// the ones TNT-8 rate-limits.
func isEvictionTaint(t api.Taint) bool {
	return t.Effect == api.TaintEffectNoExecute && (t.Key == api.TaintNodeNotReady || t.Key == api.TaintNodeUnreachable)
}

func unionKeys(a, b map[string]int) []string {
	var out []string
	for k := range a {
		out = append(out, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func (c zoneChange) String() string {
	if c.masterChange {
		if c.master {
			return "every zone is in FullDisruption: the control plane takes itself for the one cut off; it evicts nothing and removes the NoExecute taints it added"
		}
		return "a zone has a ready node again: eviction resumes"
	}
	name := c.zone
	if name == "" {
		name = "(nodes without a zone)"
	}
	return fmt.Sprintf("zone %s is now %s (was %s): %d of %d nodes ready", name, c.to, c.from, c.ready, c.total)
}

// ZoneReport holds the zones as the leader's node lifecycle controller
// last counted them, for the API (describe node) and the metrics. A
// server keeps one for its life, so that the eviction counts only grow
// across its terms as leader. Its methods are safe for concurrent use,
// and on a nil *ZoneReport do nothing.
type ZoneReport struct {
	mu        sync.Mutex
	live      bool
	master    bool
	items     []api.ZoneStatus
	evictions map[string]int64
}

// NewZoneReport returns an empty report.
func NewZoneReport() *ZoneReport { return &ZoneReport{evictions: map[string]int64{}} }

// Zones is the last count, sorted by zone name; ok is false when no
// controller has counted since this server last became leader.
func (r *ZoneReport) Zones() (l api.ZoneList, ok bool) {
	l = api.ZoneList{TypeMeta: api.TypeMeta{APIVersion: "outpost.io/v1", Kind: "ZoneList"}, Items: []api.ZoneStatus{}}
	if r == nil {
		return l, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	l.MasterDisruption = r.master
	for _, z := range r.items {
		z.Evictions = r.evictions[z.Name]
		l.Items = append(l.Items, z)
	}
	slices.SortFunc(l.Items, func(a, b api.ZoneStatus) int { return strings.Compare(a.Name, b.Name) })
	return l, r.live
}

// Evictions is the count of nodes tainted for eviction, by zone, since
// the report was made.
func (r *ZoneReport) Evictions() map[string]int64 {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.evictions)
}

// Reset forgets the count when leadership ends: another server counts
// now. The eviction counts stay.
func (r *ZoneReport) Reset() {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.live, r.master, r.items = false, false, nil
}

func (r *ZoneReport) publish(master bool, items []api.ZoneStatus) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.live, r.master, r.items = true, master, items
}

func (r *ZoneReport) evicted(zone string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evictions[zone]++
}

package scheduler

import (
	"slices"
	"strconv"
	"strings"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// Views are counts the cluster keeps up to date as pods come and go, so
// that a cycle reads them instead of walking every pod of a service or
// every pod with an affinity term (see DESIGN.md, "views").
//
// A podGroup counts the placed pods that one selector (or several, ORed,
// and a controller) selects: in all, per node, and per value of the
// labels its readers asked about (the topology keys of affinity terms,
// the labels of serviceAntiAffinity, the zone). A termGroup gathers the
// placed pods that carry the same affinity term and counts them per value
// of the term's topology key.
//
// Both depend on node labels, which rarely change: when they do (or a
// node appears under pods that were waiting for it, or goes), labelsGen
// moves on and each view rebuilds itself from the pods when next read.

// zoneLabel is the pseudo label under which views count pods per zone
// (the region and zone pair of zoneKey); it cannot be a real label key.
const zoneLabel = "\x00zone"

// maxPodGroups bounds the pod groups kept; the least recently read ones
// go first. A cycle reads at most a few.
const maxPodGroups = 512

// podGroup counts the placed pods some selectors select.
type podGroup struct {
	sig        string
	namespaces []string
	sels       []api.Selector
	ctrl       string // controller UID, "" for none
	total      int32
	perNode    map[*NodeInfo]int32
	perValue   map[string]map[string]int32
	oldest     *PodInfo
	oldestOK   bool
	gen        uint64
	used       uint64
}

// matches reports whether the group counts pod p.
func (g *podGroup) matches(p *PodInfo) bool {
	if !slices.Contains(g.namespaces, p.pod.Namespace) {
		return false
	}
	if g.ctrl != "" && p.controller == g.ctrl {
		return true
	}
	for _, s := range g.sels {
		if s.Matches(p.pod.Labels) {
			return true
		}
	}
	return false
}

// counts reports whether a pod takes part in the views: pods being
// deleted are on their way out and do not attract or repel new ones.
func counts(p *PodInfo) bool { return p.pod.DeletionTimestamp == nil }

func (g *podGroup) add(p *PodInfo, d int32) {
	g.total += d
	if d > 0 && g.oldestOK && (g.oldest == nil || olderFirst(p, g.oldest) < 0) {
		g.oldest = p
	}
	if d < 0 && p == g.oldest {
		g.oldest, g.oldestOK = nil, false
	}
	n := p.node
	if n.node == nil {
		return
	}
	if g.perNode[n] += d; g.perNode[n] <= 0 {
		delete(g.perNode, n)
	}
	for key, m := range g.perValue {
		if v, ok := labelValue(n, key); ok {
			if m[v] += d; m[v] <= 0 {
				delete(m, v)
			}
		}
	}
}

// labelValue returns a node's value of a label, or its zone for zoneLabel.
func labelValue(n *NodeInfo, key string) (string, bool) {
	if n == nil || n.node == nil {
		return "", false
	}
	if key == zoneLabel {
		return n.zone, n.zone != ""
	}
	return n.label(key)
}

// byValue returns the group's counts per value of key, building them on
// first use.
func (g *podGroup) byValue(key string) map[string]int32 {
	if m, ok := g.perValue[key]; ok {
		return m
	}
	m := map[string]int32{}
	for n, c := range g.perNode {
		if v, ok := labelValue(n, key); ok {
			m[v] += c
		}
	}
	if g.perValue == nil {
		g.perValue = map[string]map[string]int32{}
	}
	g.perValue[key] = m
	return m
}

// group returns the up-to-date pod group of the placed pods in namespaces
// that any of sels selects or that ctrl controls. sig must name exactly
// that set (see groupSig).
func (c *Cluster) group(sig string, namespaces []string, sels []api.Selector, ctrl string) *podGroup {
	c.useClock++
	g := c.groups[sig]
	if g == nil {
		if len(c.groups) >= maxPodGroups {
			c.evictGroup()
		}
		g = &podGroup{sig: sig, namespaces: slices.Clone(namespaces), sels: slices.Clone(sels), ctrl: ctrl, gen: c.labelsGen - 1}
		c.groups[sig] = g
		for _, ns := range g.namespaces {
			c.groupsByNS[ns] = append(c.groupsByNS[ns], g)
		}
	}
	g.used = c.useClock
	if g.gen != c.labelsGen {
		c.rebuildGroup(g)
	}
	if !g.oldestOK {
		g.oldest, g.oldestOK = nil, true
		for _, ns := range g.namespaces {
			if idx := c.namespaces[ns]; idx != nil {
				for _, p := range idx.all.items {
					if counts(p) && g.matches(p) && (g.oldest == nil || olderFirst(p, g.oldest) < 0) {
						g.oldest = p
					}
				}
			}
		}
	}
	return g
}

func (c *Cluster) rebuildGroup(g *podGroup) {
	g.gen = c.labelsGen
	g.total, g.perNode, g.perValue = 0, map[*NodeInfo]int32{}, nil
	g.oldest, g.oldestOK = nil, true
	for _, ns := range g.namespaces {
		idx := c.namespaces[ns]
		if idx == nil {
			continue
		}
		for _, p := range idx.all.items {
			if counts(p) && g.matches(p) {
				g.add(p, 1)
			}
		}
	}
}

func (c *Cluster) evictGroup() {
	var victim *podGroup
	for _, g := range c.groups {
		if victim == nil || g.used < victim.used {
			victim = g
		}
	}
	delete(c.groups, victim.sig)
	for _, ns := range victim.namespaces {
		l := c.groupsByNS[ns]
		if i := slices.Index(l, victim); i >= 0 {
			l[i] = l[len(l)-1]
			l = l[:len(l)-1]
		}
		if len(l) == 0 {
			delete(c.groupsByNS, ns)
		} else {
			c.groupsByNS[ns] = l
		}
	}
}

// updateGroups counts pod p in (d = 1) or out of (d = -1) the groups
// that select it.
func (c *Cluster) updateGroups(p *PodInfo, d int32) {
	if !counts(p) {
		return
	}
	for _, g := range c.groupsByNS[p.pod.Namespace] {
		if g.gen == c.labelsGen && g.matches(p) {
			g.add(p, d)
		}
	}
}

// groupSig names a pod group: its namespaces, selectors and controller.
func groupSig(namespaces []string, selStrings []string, ctrl string) string {
	var b strings.Builder
	for _, ns := range namespaces {
		b.WriteString(ns)
		b.WriteByte(',')
	}
	b.WriteByte(0)
	for _, s := range selStrings {
		b.WriteString(s)
		b.WriteByte(1)
	}
	b.WriteByte(0)
	b.WriteString(ctrl)
	return b.String()
}

// termKind says which of a pod's affinity terms a termGroup holds.
type termKind uint8

const (
	kindReqAffinity termKind = iota
	kindReqAnti
	kindPrefAffinity
	kindPrefAnti
)

// termGroup gathers the placed pods that carry one affinity term (same
// kind, weight, namespaces, selector and topology key), and counts them
// per value of the term's key on their nodes.
type termGroup struct {
	sig      string
	kind     termKind
	term     affinityTerm
	pods     podList
	perValue map[string]int32
	gen      uint64
	pos      int // index in Cluster.termGroups[kind]
}

func termSig(kind termKind, t *affinityTerm) string {
	var b strings.Builder
	b.WriteByte(byte('0' + kind))
	b.WriteString(strconv.FormatInt(t.weight, 10))
	b.WriteByte(0)
	for _, ns := range t.namespaces {
		b.WriteString(ns)
		b.WriteByte(',')
	}
	b.WriteByte(0)
	b.WriteString(selectorKey(t.sel))
	b.WriteByte(0)
	b.WriteString(t.key)
	return b.String()
}

// selectorKey is a selector's canonical text, telling "nothing" (a
// missing labelSelector) from "everything" (an empty one), which both
// print as "".
func selectorKey(s api.Selector) string {
	if s.Empty() {
		return ""
	}
	if str := s.String(); str != "" {
		return str
	}
	return "\x02nothing"
}

// addTerms puts a pod into the term groups of its terms.
func (c *Cluster) addTerms(p *PodInfo) {
	for kind, terms := range [...][]affinityTerm{kindReqAffinity: p.reqAffinity, kindReqAnti: p.reqAnti, kindPrefAffinity: p.prefAffinity, kindPrefAnti: p.prefAnti} {
		for i := range terms {
			t := &terms[i]
			sig := termSig(termKind(kind), t)
			g := c.termIndex[sig]
			if g == nil {
				g = &termGroup{sig: sig, kind: termKind(kind), term: *t, perValue: map[string]int32{}, gen: c.labelsGen}
				c.termIndex[sig] = g
				g.pos = len(c.termGroups[kind])
				c.termGroups[kind] = append(c.termGroups[kind], g)
			}
			g.pods.add(p)
			p.termGroups = append(p.termGroups, g)
			if g.gen == c.labelsGen && counts(p) {
				if v, ok := labelValue(p.node, t.key); ok {
					g.perValue[v]++
				}
			}
		}
	}
}

// removeTerms uncounts a pod from its term groups; the caller removes its
// slots (and so its membership) afterwards, then calls dropEmptyTermGroups.
func (c *Cluster) removeTerms(p *PodInfo) {
	for _, g := range p.termGroups {
		if g.gen != c.labelsGen || !counts(p) {
			continue
		}
		if v, ok := labelValue(p.node, g.term.key); ok {
			if g.perValue[v]--; g.perValue[v] <= 0 {
				delete(g.perValue, v)
			}
		}
	}
}

// dropEmptyTermGroups forgets the pod's term groups that are now empty.
func (c *Cluster) dropEmptyTermGroups(p *PodInfo) {
	for _, g := range p.termGroups {
		if len(g.pods.items) > 0 || c.termIndex[g.sig] != g {
			continue
		}
		delete(c.termIndex, g.sig)
		l := c.termGroups[g.kind]
		last := len(l) - 1
		l[g.pos] = l[last]
		l[g.pos].pos = g.pos
		l[last] = nil
		c.termGroups[g.kind] = l[:last]
	}
	if p.termGroups != nil {
		p.termGroups = nil // never noExtra's: a pod with groups has terms
	}
}

// values returns the group's counts per value of its topology key,
// rebuilding them if node labels changed since.
func (c *Cluster) values(g *termGroup) map[string]int32 {
	if g.gen != c.labelsGen {
		g.gen = c.labelsGen
		clear(g.perValue)
		for _, p := range g.pods.items {
			if !counts(p) {
				continue
			}
			if v, ok := labelValue(p.node, g.term.key); ok {
				g.perValue[v]++
			}
		}
	}
	return g.perValue
}

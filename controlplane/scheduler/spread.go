package scheduler

import "github.com/outpost-edge/outpost/controlplane/api"

// zoneWeighting is the share of SelectorSpreadPriority's score that comes
// from spreading over zones rather than nodes, as in Kubernetes.
const zoneWeighting = 2.0 / 3.0

// selectorSpread is SelectorSpreadPriority (the pod's services and its
// controller's other pods) and, with controllers false,
// ServiceSpreadingPriority (services only) (SPEC SCH-6). A node scores
// 10 * (most - here) / most, where here counts the matching pods on it
// and most is the largest count among the scored nodes; when nodes have
// zones, two thirds of the score comes from the same formula over zones.
type selectorSpread struct {
	slot        int
	controllers bool
}

type spreadData struct {
	here    []int32 // matching pods on each scored node, in order
	perZone map[string]int32
	maxNode int32
	maxZone int32
	zones   bool
	sels    []api.Selector
	strs    []string
}

func (p *selectorSpread) prepare(st *State, nodes []*NodeInfo) (int64, bool) {
	d := slotOf[spreadData](st, p.slot)
	d.sels, d.strs = d.sels[:0], d.strs[:0]
	for _, s := range st.podServices() {
		d.sels = append(d.sels, s.sel)
		d.strs = append(d.strs, s.selStr)
	}
	ctrl := ""
	if p.controllers {
		ctrl = st.pi.controller
	}
	if len(d.sels) == 0 && ctrl == "" {
		return MaxScore, false
	}
	g := st.c.group(groupSig(st.nsOnly, d.strs, ctrl), st.nsOnly, d.sels, ctrl)
	if len(g.perNode) == 0 {
		return MaxScore, false
	}
	d.perZone = g.byValue(zoneLabel)
	d.maxNode, d.maxZone, d.zones = 0, 0, false
	d.here = d.here[:0]
	for _, n := range nodes {
		c := g.perNode[n]
		d.here = append(d.here, c)
		d.maxNode = max(d.maxNode, c)
		if n.zone != "" {
			d.zones = true
			d.maxZone = max(d.maxZone, d.perZone[n.zone])
		}
	}
	return 0, true
}

func (p *selectorSpread) score(st *State, nodes []*NodeInfo, out []int64) {
	d := slotOf[spreadData](st, p.slot)
	for i, n := range nodes {
		f := float64(MaxScore)
		if d.maxNode > 0 {
			f = MaxScore * float64(d.maxNode-d.here[i]) / float64(d.maxNode)
		}
		if d.zones && n.zone != "" {
			z := float64(MaxScore)
			if d.maxZone > 0 {
				z = MaxScore * float64(d.maxZone-d.perZone[n.zone]) / float64(d.maxZone)
			}
			f = f*(1-zoneWeighting) + z*zoneWeighting
		}
		out[i] = int64(f)
	}
}

// serviceAntiAffinity (SPEC SCH-7): spreads the pods of the pod's first
// service over the groups of nodes that share a value of label. A node
// with the label scores 10 * (all - in its group) / all, all being the
// service's placed pods (10 when there are none); a node without the
// label scores 0.
type serviceAntiAffinity struct {
	label string
	slot  int
}

type serviceAntiAffinityData struct {
	perValue map[string]int32
	total    int32
}

func (p *serviceAntiAffinity) prepare(st *State, _ []*NodeInfo) (int64, bool) {
	d := slotOf[serviceAntiAffinityData](st, p.slot)
	d.perValue, d.total = nil, 0
	if g := st.firstServiceGroup(); g != nil {
		d.perValue, d.total = g.byValue(p.label), g.total
	}
	if d.total == 0 {
		// No pod of the service is placed: the score is the label's
		// presence, the same for every node when all or none have it.
		switch st.c.nodesWithLabel(p.label) {
		case 0:
			return 0, false
		case st.c.NumNodes():
			return MaxScore, false
		}
	}
	return 0, true
}

func (p *serviceAntiAffinity) score(st *State, nodes []*NodeInfo, out []int64) {
	d := slotOf[serviceAntiAffinityData](st, p.slot)
	for i, n := range nodes {
		v, ok := n.label(p.label)
		switch {
		case !ok:
			out[i] = 0
		case d.total == 0:
			out[i] = MaxScore
		default:
			out[i] = int64(MaxScore * float64(d.total-d.perValue[v]) / float64(d.total))
		}
	}
}

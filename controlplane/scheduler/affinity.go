package scheduler

// matchInterPodAffinity (SPEC SCH-11) checks, from counts read once per
// cycle:
//   - the pod's required affinity: for every term, the node's value of the
//     term's topology key must be one where a pod the term selects runs;
//     except that the first pod of a group whose terms select itself, with
//     no such pod anywhere yet, may go to any node that has the keys;
//   - the pod's required anti-affinity: no selected pod in the node's
//     domain of the term's key;
//   - the required anti-affinity of the pods already placed: a pod whose
//     term selects the new pod keeps it out of its own domain.
type matchInterPodAffinity struct{ slot int }

// domainCheck is one term's topology key and the pods it selects, per
// value of the key.
type domainCheck struct {
	key  string
	vals map[string]int32
}

type interPodFilterData struct {
	forbid    []domainCheck // placed pods' anti-affinity that selects the pod
	anti      []domainCheck // the pod's required anti-affinity
	affinity  []domainCheck // the pod's required affinity
	anyMatch  bool
	selfMatch bool
}

func (p *matchInterPodAffinity) prepare(st *State) bool {
	d := slotOf[interPodFilterData](st, p.slot)
	d.forbid, d.anti, d.affinity = d.forbid[:0], d.anti[:0], d.affinity[:0]
	for _, g := range st.c.termGroups[kindReqAnti] {
		if g.term.matches(st.pod) {
			if vals := st.c.values(g); len(vals) > 0 {
				d.forbid = append(d.forbid, domainCheck{g.term.key, vals})
			}
		}
	}
	pi := st.pi
	for i := range pi.reqAnti {
		t := &pi.reqAnti[i]
		if vals := st.termGroupOf(t).byValue(t.key); len(vals) > 0 {
			d.anti = append(d.anti, domainCheck{t.key, vals})
		}
	}
	d.anyMatch, d.selfMatch = false, true
	for i := range pi.reqAffinity {
		t := &pi.reqAffinity[i]
		vals := st.termGroupOf(t).byValue(t.key)
		d.affinity = append(d.affinity, domainCheck{t.key, vals})
		d.anyMatch = d.anyMatch || len(vals) > 0
		d.selfMatch = d.selfMatch && t.matches(st.pod)
	}
	return len(d.forbid)+len(d.anti)+len(d.affinity) > 0
}

func (p *matchInterPodAffinity) filter(st *State, n *NodeInfo) bool {
	d := slotOf[interPodFilterData](st, p.slot)
	for _, f := range d.forbid {
		if v, ok := n.label(f.key); ok && f.vals[v] > 0 {
			return false
		}
	}
	for _, a := range d.anti {
		if v, ok := n.label(a.key); ok && a.vals[v] > 0 {
			return false
		}
	}
	satisfied := true
	for _, a := range d.affinity {
		v, ok := n.label(a.key)
		if !ok {
			return false
		}
		if a.vals[v] == 0 {
			satisfied = false
		}
	}
	return satisfied || (!d.anyMatch && d.selfMatch)
}

// interPodAffinityPriority (SPEC SCH-11) sums, per topology domain, the
// weights of the pod's preferred affinity terms (+) and anti-affinity
// terms (-) over the pods they select, and the weights of the placed
// pods' terms that select the new pod (preferred affinity +, preferred
// anti-affinity -, required affinity + the policy's
// hardPodAffinitySymmetricWeight). A node scores the sum over its
// domains, scaled to 0–10 between the lowest and the highest sum (with 0
// always in the range, as Kubernetes does).
type interPodAffinityPriority struct {
	slot      int
	symmetric int64
}

type interPodScoreData struct {
	weights map[string]map[string]int64
}

func (p *interPodAffinityPriority) prepare(st *State, _ []*NodeInfo) (int64, bool) {
	d := slotOf[interPodScoreData](st, p.slot)
	clear(d.weights)
	add := func(key string, vals map[string]int32, w int64) {
		if len(vals) == 0 || w == 0 {
			return
		}
		if d.weights == nil {
			d.weights = map[string]map[string]int64{}
		}
		m := d.weights[key]
		if m == nil {
			m = map[string]int64{}
			d.weights[key] = m
		}
		for v, n := range vals {
			m[v] += w * int64(n)
		}
	}
	pi := st.pi
	for i := range pi.prefAffinity {
		t := &pi.prefAffinity[i]
		add(t.key, st.termGroupOf(t).byValue(t.key), t.weight)
	}
	for i := range pi.prefAnti {
		t := &pi.prefAnti[i]
		add(t.key, st.termGroupOf(t).byValue(t.key), -t.weight)
	}
	if p.symmetric > 0 {
		for _, g := range st.c.termGroups[kindReqAffinity] {
			if g.term.matches(st.pod) {
				add(g.term.key, st.c.values(g), p.symmetric)
			}
		}
	}
	for _, g := range st.c.termGroups[kindPrefAffinity] {
		if g.term.matches(st.pod) {
			add(g.term.key, st.c.values(g), g.term.weight)
		}
	}
	for _, g := range st.c.termGroups[kindPrefAnti] {
		if g.term.matches(st.pod) {
			add(g.term.key, st.c.values(g), -g.term.weight)
		}
	}
	return 0, len(d.weights) > 0
}

func (p *interPodAffinityPriority) score(st *State, nodes []*NodeInfo, out []int64) {
	d := slotOf[interPodScoreData](st, p.slot)
	for i, n := range nodes {
		var sum int64
		for key, m := range d.weights {
			if v, ok := n.label(key); ok {
				sum += m[v]
			}
		}
		out[i] = sum
	}
}

func (p *interPodAffinityPriority) normalize(scores []int64) {
	var lo, hi int64
	for _, s := range scores {
		lo, hi = min(lo, s), max(hi, s)
	}
	for i, s := range scores {
		if hi > lo {
			scores[i] = MaxScore * (s - lo) / (hi - lo)
		} else {
			scores[i] = 0
		}
	}
}

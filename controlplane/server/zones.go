package server

import (
	"net/http"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/auth"
	"github.com/outpost-edge/outpost/controlplane/controllers"
	"github.com/prometheus/client_golang/prometheus"
)

// serveZones serves GET /apis/outpost.io/v1/zones: the zones' states as
// the leader's node lifecycle controller counts them (SPEC TNT-8), for
// describe node. Only the leader counts, so a follower forwards. Whoever
// may list nodes may read them: they are a summary of the nodes' Ready
// conditions.
func (s *Server) serveZones(w *recorder, r *http.Request, id *auth.Identity, segs []string) {
	w.label(verbList, "zones")
	if len(segs) != 0 {
		writeError(w, notFoundPath())
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		writeError(w, api.NewMethodNotAllowed(r.Method+" is not supported on "+r.URL.Path))
		return
	}
	if err := auth.Authorize(id, auth.Request{Verb: auth.VerbList, Resource: "nodes"}, nil); err != nil {
		writeError(w, api.NewForbidden(err.Error()))
		return
	}
	if s.forwardIfFollower(w, r) {
		return
	}
	l, ok := s.zones.Zones()
	if !ok {
		writeError(w, unavailable("the node lifecycle controller has not counted the zones since this server became leader; retry shortly", 1))
		return
	}
	writeJSON(w, http.StatusOK, &l)
}

// zoneCollector exports the zone report as metrics, on the leader only
// (followers' reports are empty): as kube-controller-manager's
// node_collector series, with outpost's names.
type zoneCollector struct {
	r                                 *controllers.ZoneReport
	state, nodes, ready, rate, master *prometheus.Desc
	evictions                         *prometheus.Desc
}

func newZoneCollector(r *controllers.ZoneReport) *zoneCollector {
	zl := []string{"zone"}
	return &zoneCollector{
		r:         r,
		state:     prometheus.NewDesc("outpost_zone_state", "1 for the state a zone is in (Normal, PartialDisruption, FullDisruption), 0 for the others; leader only.", []string{"zone", "state"}, nil),
		nodes:     prometheus.NewDesc("outpost_zone_nodes", "Nodes of a zone that an agent reports; leader only.", zl, nil),
		ready:     prometheus.NewDesc("outpost_zone_ready_nodes", "Ready nodes of a zone; leader only.", zl, nil),
		rate:      prometheus.NewDesc("outpost_zone_eviction_rate", "Nodes per second that may be tainted for eviction in a zone's state; leader only.", zl, nil),
		master:    prometheus.NewDesc("outpost_zone_master_disruption", "1 while every zone is in FullDisruption and the control plane evicts nothing; leader only.", nil, nil),
		evictions: prometheus.NewDesc("outpost_zone_evictions_total", "Nodes this server tainted for eviction (NoExecute not-ready or unreachable), by zone.", zl, nil),
	}
}

func (c *zoneCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.state, c.nodes, c.ready, c.rate, c.master, c.evictions} {
		ch <- d
	}
}

func (c *zoneCollector) Collect(ch chan<- prometheus.Metric) {
	l, ok := c.r.Zones()
	evictions := c.r.Evictions()
	for zone, n := range evictions {
		ch <- prometheus.MustNewConstMetric(c.evictions, prometheus.CounterValue, float64(n), zone)
	}
	if !ok {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.master, prometheus.GaugeValue, boolValue(l.MasterDisruption))
	for _, z := range l.Items {
		for _, st := range []string{api.ZoneNormal, api.ZonePartialDisruption, api.ZoneFullDisruption} {
			ch <- prometheus.MustNewConstMetric(c.state, prometheus.GaugeValue, boolValue(z.State == st), z.Name, st)
		}
		ch <- prometheus.MustNewConstMetric(c.nodes, prometheus.GaugeValue, float64(z.Nodes), z.Name)
		ch <- prometheus.MustNewConstMetric(c.ready, prometheus.GaugeValue, float64(z.Ready), z.Name)
		ch <- prometheus.MustNewConstMetric(c.rate, prometheus.GaugeValue, z.EvictionRate, z.Name)
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

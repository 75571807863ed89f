package server

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// GET .../zones: the leader's count of the zones (TNT-8) for whoever may
// list nodes (as describe node shows it), and the same numbers on /metrics.
func TestZonesEndpoint(t *testing.T) {
	cfg := testConfig(t)
	cfg.Schedulers = map[string]string{} // no scheduler; the controllers run
	s := startServer(t, cfg)
	c := admin(t, s)
	now := time.Now().UTC().Format(time.RFC3339)
	for name, zone := range map[string]string{"a1": "a", "a2": "a", "b1": "b"} {
		c.must(http.StatusCreated, "POST", "/api/v1/nodes", map[string]any{
			"metadata": map[string]any{"name": name, "labels": map[string]any{"topology.kubernetes.io/zone": zone}},
			"status":   map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "True", "lastHeartbeatTime": now}}}})
	}
	const path = "/apis/outpost.io/v1/zones"
	var l api.ZoneList
	waitFor(t, 20*time.Second, "the zones counted", func() bool {
		r := c.do("GET", path, nil)
		if r.code != http.StatusOK {
			return false
		}
		l = *decode[api.ZoneList](t, r)
		return len(l.Items) == 2
	})
	want := []api.ZoneStatus{
		{Name: "a", State: api.ZoneNormal, Nodes: 2, Ready: 2, EvictionRate: 0.1},
		{Name: "b", State: api.ZoneNormal, Nodes: 1, Ready: 1, EvictionRate: 0.1},
	}
	for i, z := range l.Items {
		if z != want[i] {
			t.Errorf("zone %d: %+v, want %+v", i, z, want[i])
		}
	}
	if l.Kind != "ZoneList" || l.MasterDisruption {
		t.Errorf("list %+v, want a ZoneList without master disruption", l)
	}
	body := string(c.must(http.StatusOK, "GET", "/metrics", nil).body)
	for _, m := range []string{`outpost_zone_state{state="Normal",zone="a"} 1`, `outpost_zone_state{state="FullDisruption",zone="a"} 0`,
		`outpost_zone_nodes{zone="a"} 2`, `outpost_zone_ready_nodes{zone="b"} 1`, `outpost_zone_master_disruption 0`} {
		if !strings.Contains(body, m) {
			t.Errorf("/metrics lacks %s", m)
		}
	}

	// Whoever may list nodes may read it: every role, developers too.
	dev := c.as(addToken(t, c, api.TokenSpec{Role: api.RoleDeveloper, Namespaces: []string{"default"}}))
	dev.must(http.StatusOK, "GET", path, nil)
	c.must(http.StatusMethodNotAllowed, "POST", path, nil)
	c.must(http.StatusNotFound, "GET", path+"/a", nil)
}

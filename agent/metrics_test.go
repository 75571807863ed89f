package agent_test

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/runtime/cgroups"
)

// TestUsageThroughTheAPI: the agent's readings reach metrics.k8s.io and
// its /metrics through the API server, as `outpost top` and Prometheus
// read them (issue 15 item 4).
func TestUsageThroughTheAPI(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(e.rt)
	cfg.JoinToken = e.joinString()
	cfg.StatsInterval = 100 * time.Millisecond
	e.start(cfg)
	e.createPod("web", func(p *api.Pod) {
		p.Labels = map[string]string{"app": "web"}
		p.Spec.Containers[0].Args = []string{"hold", "64"} // the fake's working set: 64 MiB
	})
	e.waitPhase("web", api.PodRunning, nil)

	get := func(path string) (string, error) {
		b, _, err := e.admin.Do(e.ctx, "GET", path, nil, nil)
		return string(b), err
	}
	var pm api.PodMetrics
	waitFor(t, "web's metrics", 20*time.Second, func() (bool, string) {
		b, err := get("/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/web")
		if err != nil {
			return false, err.Error()
		}
		return api.Unmarshal([]byte(b), &pm) == nil, b
	})
	if len(pm.Containers) != 1 || pm.Containers[0].Name != "c" || pm.Containers[0].Usage[api.ResourceMemory].String() != "65536Ki" ||
		pm.Labels["app"] != "web" || pm.Window.Duration <= 0 || pm.Window.Duration > 5*time.Second {
		t.Errorf("web's metrics: %+v", pm)
	}
	if _, err := (cgroups.FS{}).ReadNode(); err == nil {
		// This host's own cgroups can be read: the node has metrics.
		waitFor(t, "the node's metrics", 20*time.Second, func() (bool, string) {
			b, err := get("/apis/metrics.k8s.io/v1beta1/nodes/" + e.node)
			return err == nil && strings.Contains(b, `"cpu":"`), fmt.Sprint(b, err)
		})
	}

	// The agent's own metrics, through the API as Prometheus scrapes
	// kubelets.
	text, err := get("/api/v1/nodes/" + e.node + "/proxy/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`container_memory_working_set_bytes{container="c",namespace="default",pod="web"} 6.7108864e+07 `,
		`pod_memory_working_set_bytes{namespace="default",pod="web"} 6.7108864e+07 `,
		`kube_pod_container_status_restarts_total{container="c",namespace="default",pod="web"} 0`,
		`outpost_agent_sync_errors_total{loop="node"} 0`,
		`outpost_agent_control_plane_reachable 1`,
		`outpost_agent_pods 1`,
		"\ngo_goroutines ",
		"\nprocess_resident_memory_bytes ",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the agent's /metrics lacks %q:\n%s", want, text)
		}
	}
	m := regexp.MustCompile(`\noutpost_agent_last_status_report_timestamp_seconds (\S+)`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no last status report time:\n%s", text)
	}
	if v, err := strconv.ParseFloat(m[1], 64); err != nil || time.Since(time.Unix(int64(v), 0)) > time.Minute {
		t.Errorf("last status report at %s, want within the last minute", m[1])
	}
}

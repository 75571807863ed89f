package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/agent/endpoint"
	"github.com/outpost-edge/outpost/agent/endpoint/endpointtest"
	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
	"github.com/outpost-edge/outpost/testing/cluster"
)

// Streams are served by whichever server the user reached, from its own
// store: through a follower, and through a follower cut off from the
// other servers (logs matter most when the cluster is in trouble).
func TestStreamsThroughFollower(t *testing.T) {
	c := cluster.New(t, cluster.Options{Servers: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	leader := c.WaitForLeader(ctx)
	ca := leader.Server.CA()

	rt := endpointtest.New()
	cert, err := ca.IssueNodeCert("edge-1", []string{"127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	actx, acancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- endpoint.Serve(actx, ln, endpoint.TLSConfig(ca.Pool(), cert), endpoint.New(endpoint.Config{Runtime: rt, NodeName: "edge-1"}), nil)
	}()
	t.Cleanup(func() {
		acancel()
		if err := <-served; err != nil {
			t.Errorf("agent: %v", err)
		}
	})

	lc := c.Client(leader)
	nodes := api.ResourceForKind("Node")
	if _, _, err := lc.Create(ctx, &api.Node{ObjectMeta: api.ObjectMeta{Name: "edge-1"}}); err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	status, _ := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "Node", "metadata": map[string]any{"name": "edge-1"},
		"status": map[string]any{
			"addresses":       []any{map[string]any{"type": "InternalIP", "address": "127.0.0.1"}},
			"daemonEndpoints": map[string]any{"kubeletEndpoint": map[string]any{"Port": json.Number(port)}},
		},
	})
	if _, _, err := lc.Do(ctx, "PUT", client.PathFor(nodes, "", "edge-1", "status"), nil, status); err != nil {
		t.Fatal(err)
	}
	pod := &api.Pod{ObjectMeta: api.ObjectMeta{Name: "web", Namespace: "default"}, Spec: api.PodSpec{
		NodeName: "edge-1", Containers: []api.Container{{Name: "app", Image: "example.local/app:1"}},
	}}
	if _, _, err := lc.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	id := rt.AddContainer("default", "web", "app", 0)
	rt.Log(id, "from the agent")

	f := c.Followers()[0]
	fc := c.Client(f)
	check := func(when string) {
		t.Helper()
		rc, err := fc.PodLogs(ctx, "default", "web", client.PodLogOptions{})
		if err != nil {
			t.Fatalf("%s: logs: %v", when, err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || string(got) != "from the agent\n" {
			t.Fatalf("%s: logs %q, %v", when, got, err)
		}
		var out bytes.Buffer
		code, err := fc.Exec(ctx, "default", "web", client.ExecOptions{Command: []string{"cat"}, Stdin: strings.NewReader("stdin via " + when), Stdout: &out})
		if err != nil || code != 0 || out.String() != "stdin via "+when {
			t.Fatalf("%s: exec %d %v %q", when, code, err, out.String())
		}
	}
	check("a follower")

	archive := strings.Repeat("image bytes ", 10000)
	imgs, err := fc.ImportImages(ctx, "edge-1", strings.NewReader(archive), int64(len(archive)))
	if err != nil || len(imgs) != 1 || imgs[0].Size != int64(len(archive)) {
		t.Fatalf("import through a follower: %+v %v", imgs, err)
	}
	if got := rt.Imports(); len(got) != 1 || got[0].Size != int64(len(archive)) {
		t.Fatalf("runtime got %+v", got)
	}

	c.Net.Isolate(f.ID)
	defer c.Net.Heal()
	start := time.Now()
	check("an isolated follower")
	t.Logf("an isolated follower served logs and exec in %v", time.Since(start).Round(time.Millisecond))
}

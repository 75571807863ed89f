package server

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/agent/endpoint/endpointtest"
)

// port-forward (issue 15 item 6): the server sends the caller's bytes to
// the pod's port through its node's agent, both directions at once, to
// the address in the pod's status.
func TestPodPortForwardThroughAgent(t *testing.T) {
	e := startStreamEnv(t)
	e.pod("default", "web", "edge-1", "app")
	e.rt.AddContainer("default", "web", "app", 0)
	base := "/api/v1/namespaces/default/pods/web/portforward"
	wantError(t, e.c.do("POST", base+"?port=80", nil), 400, "unable to forward port because pod is not running. Current status=Pending")
	e.c.must(http.StatusOK, "PUT", "/api/v1/namespaces/default/pods/web/status", map[string]any{
		"metadata": map[string]any{"name": "web"},
		"status":   map[string]any{"phase": "Running", "podIP": "127.0.0.1"},
	})
	port := strconv.Itoa(endpointtest.EchoPort(t))

	for _, h2 := range []bool{false, true} {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		pr, pw := io.Pipe()
		context.AfterFunc(ctx, func() { pw.CloseWithError(ctx.Err()) })
		resp := e.open(ctx, e.c.token, "POST", base+"?port="+port, pr, h2)
		context.AfterFunc(ctx, func() { resp.Body.Close() })
		if resp.StatusCode != 200 {
			t.Fatalf("h2 %v: %d", h2, resp.StatusCode)
		}
		br := bufio.NewReader(resp.Body)
		for _, line := range []string{"ping\n", "pong\n"} {
			if _, err := io.WriteString(pw, line); err != nil {
				t.Fatal(err)
			}
			if got, err := br.ReadString('\n'); err != nil || got != "echo: "+line {
				t.Fatalf("h2 %v: got %q, %v; want the pod's answer to %q", h2, got, err, line)
			}
		}
		pw.Close()
		if rest, err := io.ReadAll(br); err != nil || string(rest) != "bye\n" {
			t.Fatalf("h2 %v: after the caller's end: %q, %v", h2, rest, err)
		}
		if ctx.Err() != nil {
			t.Fatalf("h2 %v: the stream outlived its deadline", h2)
		}
		cancel()
	}

	wantError(t, e.c.do("POST", base+"?port=http", nil), 400, `invalid value "http" for query parameter port: want a port number, 1 to 65535`)
	wantError(t, e.c.do("GET", base+"?port=80", nil), 405, "GET is not supported on pods web/portforward; use POST")
	wantError(t, e.c.do("POST", "/api/v1/namespaces/default/pods/nope/portforward?port=80", nil), 404, `pods "nope" not found`)
}
